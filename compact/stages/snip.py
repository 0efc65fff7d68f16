"""Snip: the model removes whole user turns it no longer needs (docs/compaction.md).

Triggers: the model calls the ``Snip`` tool with the ``[id:xxxxxx]`` tags of old turns; a nudge (a
short system reminder) suggests it once the context has grown ~10,000 tokens since the last snip,
nudge or compaction.
Drops: each named turn whole — the typed user prompt and everything after it up to the next typed
prompt (assistant text, tool calls, tool results, injected context) — so a tool_use never loses its
tool_result. The turn holding the Snip call can't be snipped.
Keeps: every other message; the transcript keeps everything (a snip is a record listing the removed
uuids, replayed on resume).
Writes to disk: no (the caller records the snip). Model calls: none.

The tags are derived from each prompt's uuid and exist only in the copy sent to the API
(``tag_prompts``); the live list and the transcript never hold them.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, replace
from typing import Any, Callable

from compact.decision.tokens import count_tokens
from compact.stages.state import ContextState, snip_record
from core.errors import SnipError
from core.messages import Message, meta

NUDGE_GROWTH = 10_000
NUDGE_TEXT = (
    "<system-reminder>The conversation has grown. Earlier turns you no longer need can be removed "
    "from the context with the Snip tool: pass the [id:...] tags shown at the end of those user "
    "messages. Only snip turns whose details you won't need again.</system-reminder>"
)

_DIGITS = string.digits + string.ascii_lowercase


@dataclass(frozen=True)
class SnipPlan:
    removed_uuids: list[str]
    freed_tokens: int
    message_count: int


def snip_id(uuid: str) -> str:
    """Short stable id of a message: its uuid's first 10 hex digits as a base-36 number, 6 chars."""
    hex_digits = "".join(c for c in uuid.lower() if c in string.hexdigits)[:10]
    n = int(hex_digits or "0", 16)
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = _DIGITS[r] + out
        if n == 0:
            break
    return out[:6]


def is_typed_prompt(m: Message) -> bool:
    """A user message the user typed (tool results and injected context are not turns)."""
    return (
        m.role == "user" and m.kind == "prompt" and not any(b.get("type") == "tool_result" for b in m.content)
    )


# --- the API copy -------------------------------------------------------------------------------


def tag_prompts(messages: list[Message], cache: dict[str, Any] | None = None) -> list[Message]:
    """Copies of the typed prompts with " [id:xxxxxx]" appended to their last text block."""
    cache = {} if cache is None else cache
    out = []
    for m in messages:
        if m.role == "user" and m.kind == "prompt":
            hit = cache.get(m.uuid)
            if hit is None or hit[0] is not m:
                hit = (m, _tagged(m))
                cache[m.uuid] = hit
            m = hit[1]
        out.append(m)
    return out


def _tagged(m: Message) -> Message:
    if not is_typed_prompt(m):
        return m
    tag = f"[id:{snip_id(m.uuid)}]"
    blocks = list(m.content)
    for i in range(len(blocks) - 1, -1, -1):
        b = blocks[i]
        if b.get("type") == "text" and b.get("text", "").strip():
            if b["text"].endswith(tag):
                return m
            blocks[i] = {**b, "text": f"{b['text']} {tag}"}
            return m.replace(content=blocks)
    return m.replace(content=blocks + [{"type": "text", "text": tag}])


def apply_snips(messages: list[Message], state: ContextState) -> list[Message]:
    """The messages minus those the model snipped."""
    if not state.snipped:
        return list(messages)
    gone = state.snipped
    return [m for m in messages if m.uuid not in gone]


# --- planning a snip ----------------------------------------------------------------------------


def turns(messages: list[Message]) -> list[list[Message]]:
    """The user turns: each starts at a typed prompt; messages before the first prompt are not a turn."""
    out: list[list[Message]] = []
    for m in messages:
        if is_typed_prompt(m):
            out.append([m])
        elif out:
            out[-1].append(m)
    return out


def _normalise(raw: str) -> str:
    s = raw.strip().strip("[]").strip()
    return s[3:].strip() if s.lower().startswith("id:") else s


def plan_snip(messages: list[Message], ids: list[str], current_turn_uuid: str | None) -> SnipPlan:
    """Which messages removing the turns tagged ``ids`` drops, or SnipError saying why it can't."""
    wanted = [_normalise(i) for i in ids]
    if not wanted or not all(wanted):
        raise SnipError("Snip needs at least one id, as shown in the [id:...] tags of user messages.")
    all_turns = turns(messages)
    by_id = {snip_id(t[0].uuid): t for t in all_turns}
    unknown = [i for i in wanted if i not in by_id]
    if unknown:
        raise SnipError(
            f"Unknown turn id(s): {', '.join(unknown)}. Use the [id:...] tags of user "
            "messages still in the conversation."
        )
    current = {id(all_turns[-1][0])} if all_turns else set()
    for t in all_turns:
        if any(m.uuid == current_turn_uuid for m in t):
            current.add(id(t[0]))
    removed: list[Message] = []
    for i in dict.fromkeys(wanted):
        t = by_id[i]
        if id(t[0]) in current:
            raise SnipError(f"Turn {i} is the current turn and can't be snipped.")
        removed.extend(t)
    return SnipPlan([m.uuid for m in removed], sum(m.tokens for m in removed), len(removed))


def snip_sentence(plan: SnipPlan) -> str:
    s = "" if plan.message_count == 1 else "s"
    return f"Snipped {plan.message_count} message{s}, freeing about {plan.freed_tokens:,} tokens."


def perform_snip(
    messages: list[Message],
    state: ContextState,
    ids: list[str],
    reason: str | None,
    current_turn_uuid: str | None,
    record: Callable[[dict[str, Any]], Any],
    tokens_now: int | None = None,
    sent: Callable[[], list[Message]] | None = None,
) -> str:
    """Plan, record and apply a snip; returns the sentence for the model. Raises SnipError.

    This is the body of the ``snip`` service the query loop hands to the Snip tool. ``sent``: the
    messages as the request shows them (old results cleared, spans collapsed), so the figure is what the
    request actually loses, not the size of the messages in full.
    """
    visible = apply_snips(messages, state)
    plan = plan_snip(visible, ids, current_turn_uuid)
    if sent is not None:
        removed = set(plan.removed_uuids)
        plan = replace(plan, freed_tokens=sum(m.tokens for m in sent() if m.uuid in removed))
    if tokens_now is None:
        tokens_now = count_tokens(visible, freed=state.freed_since_usage)
    record(snip_record(plan.removed_uuids, reason or ""))
    state.snipped.update(plan.removed_uuids)
    # the last reported usage still counts what was just removed: take it off until the next response
    measured = next((m for m in reversed(visible) if m.role == "assistant" and m.usage), None)
    if measured is not None and measured.uuid not in plan.removed_uuids:
        state.freed_since_usage[measured.uuid] = (
            state.freed_since_usage.get(measured.uuid, 0) + plan.freed_tokens
        )
    state.tokens_at_last_nudge = max(0, tokens_now - plan.freed_tokens)
    return snip_sentence(plan)


# --- the nudge ----------------------------------------------------------------------------------


def nudge_needed(tokens: int, state: ContextState) -> bool:
    return tokens - state.tokens_at_last_nudge >= NUDGE_GROWTH


def nudge_message() -> Message:
    """The reminder to inject (a meta message); the caller then sets state.tokens_at_last_nudge."""
    return meta(NUDGE_TEXT)
