"""A system prompt fixed for the session, and what changes under it told in appended system messages.

On the models with preserved thinking (docs/preserved-thinking.md) every thinking block is bound to the top-level
``system`` as it was sent: rebuilding it (a new date, an edited or newly found CLAUDE.md, another git
snapshot after a resume, another model's name) would invalidate every earlier block and miss the prompt
cache. So on those models the system prompt is built once, on the session's first request, recorded in
the transcript (``{"type": "system-prompt", "blocks": [...]}``, so a resume sends the very same bytes),
and never rebuilt. When what it says goes out of date, ``refresh`` appends a ``role: "system"`` message
with the current environment or instruction files, right before the next main request (after a user
turn, where the API accepts one); it stays in the history like any message. What the model has been told
is read back from the live list each time, so a compaction that replaced the history, a resume or a
rewind tells it again when it needs to.

On older models nothing changes: the system prompt is rebuilt for every request, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agent.config.system_prompt import INSTRUCTIONS_HEAD, INTRO
from agent.transcript.claude_code import THINKING_TYPES, same_model
from compact.stages.state import thinking_record
from core.messages import Message
from core.transcript_writer import SYSTEM_PROMPT

if TYPE_CHECKING:
    from compact.context.conversation import Conversation

__all__ = ["SYSTEM_PROMPT", "refresh", "told", "parts"]
UPDATE = "contextUpdate"  # the extra field naming what an appended system message updates
ENVIRONMENT, INSTRUCTIONS = "environment", "instructions"

ENVIRONMENT_TEXT = (
    "The environment has changed since this conversation began; the system prompt is kept as it was, "
    "and these values replace what it says:\n\n"
)
INSTRUCTIONS_TEXT = (
    "The instruction files (CLAUDE.md) have changed since they were last given. This is what they say "
    "now; it replaces the version in the system prompt and any earlier update:\n\n"
)
NO_INSTRUCTIONS = "(There are no instruction files any more: disregard the earlier ones.)"


class Owner(Protocol):
    """What a session gives this module (agent.runtime.session.Session)."""

    @property
    def messages(self) -> list[Message]: ...

    def built_system(self) -> list[dict[str, Any]]: ...

    def fixed_system(self) -> list[dict[str, Any]] | None: ...

    def add(self, message: Message) -> None: ...


def parts(blocks: list[dict[str, Any]]) -> dict[str, str]:
    """The two parts of a system prompt that can change: the environment and the instruction files."""
    first = str(blocks[0].get("text", "")) if blocks else ""
    environment = first[len(INTRO) :].strip() if first.startswith(INTRO) else first
    # the instruction files' block (a session's memory, agent/memory, is a block of its own after it)
    texts = [str(b.get("text", "")) for b in blocks[1:]]
    memory = next((t for t in texts if t.startswith(INSTRUCTIONS_HEAD)), "")
    return {ENVIRONMENT: environment, INSTRUCTIONS: memory}


def told(fixed: list[dict[str, Any]], messages: list[Message]) -> dict[str, str]:
    """What the model has been told of each part: the fixed prompt, then the updates still in the history."""
    known = parts(fixed)
    for m in messages:
        what = m.extra.get(UPDATE) if m.role == "system" else None
        if what in known:
            known[what] = str(m.extra.get("value", ""))
    return known


def update_message(what: str, value: str) -> Message:
    if what == ENVIRONMENT:
        text = ENVIRONMENT_TEXT + value
    else:
        text = INSTRUCTIONS_TEXT + (value or NO_INSTRUCTIONS)
    return Message(
        "system", [{"type": "text", "text": text}], kind="meta", extra={UPDATE: what, "value": value}
    )


def refresh(owner: Owner) -> list[Message]:
    """Before a main request: append a system message for each part whose current value the model has not
    been told (nothing on models whose system prompt is rebuilt for every request)."""
    fixed = owner.fixed_system()
    if fixed is None:
        return []
    now, known = parts(owner.built_system()), told(fixed, owner.messages)
    added = []
    for what in (ENVIRONMENT, INSTRUCTIONS):
        if now[what] != known[what]:
            message = update_message(what, now[what])
            owner.add(message)
            added.append(message)
    return added


def drop_foreign_thinking(conv: Conversation, model: str) -> int:
    """After a switch to ``model``: leave out the thinking of replies another model wrote (the API would
    drop it anyway, a model reads only its own family's), so every later request sends the same history;
    the live list's messages are replaced by copies without it (same uuids). The number dropped."""
    dropped, uuids = 0, []
    with conv.lock:
        for i, m in enumerate(conv.messages):
            if m.role != "assistant" or same_model(m.model, model):
                continue
            kept = [b for b in m.content if b.get("type") not in THINKING_TYPES]
            if len(kept) != len(m.content):
                dropped += len(m.content) - len(kept)
                conv.messages[i] = m.replace(content=kept)
                uuids.append(m.uuid)
        if uuids:
            # recorded as the stages' sticky decision (compact.stages.state): a resume leaves the same
            # thinking out whatever model it runs on, so it sends what this session sent
            conv.state.thinking_dropped.update(uuids)
            conv.record(thinking_record(uuids, "model-switch"))
        if dropped:
            conv.foreign_thinking_dropped += dropped
            conv.rebuild_point = True
            if conv.view_ctx is not None:
                conv.view_ctx._memo = None  # the list was rewritten: no reuse of the previous view
    return dropped
