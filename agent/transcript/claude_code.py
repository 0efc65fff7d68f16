"""Claude Code's way of writing a conversation, and how a resume turns its records back into messages.

Claude Code records each streamed response as several records (one per content block, sharing
``message.id``), chained one after the other; the result of an early tool call of a parallel batch
hangs off that call's record, on a side branch of the chain. It also records API errors it showed as
assistant replies (``<synthetic>``), and thinking blocks that only verify for the model that wrote them.
Here: grouping a chain into responses and recovering what hangs off side branches (``recover_siblings``),
merging one response's records into one Message (``merge``), and making the result sendable
(``clean``). Our own transcripts go through the same steps harmlessly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from core.messages import Message, from_record
from core.transcript_writer import MESSAGE_TYPES, is_boundary

THINKING_TYPES = ("thinking", "redacted_thinking")


@dataclass
class Rec:
    offset: int  # byte offset of the line
    data: dict[str, Any]

    @property
    def uuid(self) -> str:
        return self.data.get("uuid") or ""

    @property
    def type(self) -> str | None:
        return self.data.get("type")

    @property
    def is_message(self) -> bool:
        return self.data.get("type") in MESSAGE_TYPES and isinstance(self.data.get("message"), dict)

    @property
    def message_id(self) -> str | None:
        return self.data["message"].get("id") if self.type == "assistant" and self.is_message else None


def recover_siblings(chain: list[Rec], main: list[Rec]) -> list[list[Rec]]:
    """Group the chain into responses; bring back blocks and tool results left on side branches.

    Claude Code chains the blocks of one streamed response one after the other, but the result of
    an early tool call in a parallel batch hangs off that call's record, not off the last block,
    so walking back from the leaf never passes it.
    """
    children: dict[str, list[Rec]] = {}
    for r in main:
        p = r.data.get("parentUuid")
        if p:
            children.setdefault(p, []).append(r)
    on_chain = {r.uuid for r in chain}
    groups: list[list[Rec]] = []
    for r in chain:
        if groups and r.message_id and groups[-1][-1].message_id == r.message_id:
            groups[-1].append(r)
        else:
            groups.append([r])
    out: list[list[Rec]] = []
    for g in groups:
        if not g[0].message_id:
            out.append(g)
            continue
        extra_blocks, results = _side_branches(g, children, on_chain)
        out.append(sorted(g + extra_blocks, key=lambda r: r.offset))
        out.extend([r] for r in results)
    answered: set[Any] = set()
    final: list[list[Rec]] = []
    for g in out:  # a recovered result must not duplicate one already on the chain
        ids = {b.get("tool_use_id") for r in g for b in record_blocks(r) if b.get("type") == "tool_result"}
        if g[0].type == "user" and g[0].uuid not in on_chain and ids & answered:
            continue
        answered |= ids
        final.append(g)
    return final


def _side_branches(
    group: list[Rec], children: dict[str, list[Rec]], on_chain: set[str]
) -> tuple[list[Rec], list[Rec]]:
    mid = group[0].message_id
    uses = {b.get("id") for r in group for b in record_blocks(r) if b.get("type") == "tool_use"}
    todo = [r.uuid for r in group]
    reached = set(todo)
    blocks: list[Rec] = []
    results: list[Rec] = []
    while todo:
        for c in children.get(todo.pop(), []):
            if c.uuid in on_chain or c.uuid in reached:
                continue
            if c.type == "assistant" and c.message_id == mid:
                blocks.append(c)
                uses |= {b.get("id") for b in record_blocks(c) if b.get("type") == "tool_use"}
            elif c.type in ("progress", "system") and not is_boundary(c.data):
                pass
            else:
                if c.type == "user" and answers(c, uses):
                    results.append(c)
                continue
            reached.add(c.uuid)
            todo.append(c.uuid)
    results = [r for r in results if answers(r, uses)]
    return blocks, sorted(results, key=lambda r: r.offset)


def record_blocks(r: Rec) -> list[dict[str, Any]]:
    content = r.data.get("message", {}).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def answers(r: Rec, uses: set[Any]) -> bool:
    ids = [b.get("tool_use_id") for b in record_blocks(r) if b.get("type") == "tool_result"]
    return bool(ids) and all(i in uses for i in ids)


def merge(group: list[Rec]) -> Message | None:
    """One Message from the records of one streamed response (or from a single record)."""
    first = from_record(group[0].data)
    if len(group) == 1 or first is None:
        return first
    parts = [m for m in (from_record(r.data) for r in group) if m is not None]
    last = parts[-1]
    content = [b for m in parts for b in m.content]
    stop = next((m.stop_reason for m in reversed(parts) if m.stop_reason), None)
    usage = next((m.usage for m in reversed(parts) if m.usage), None)
    return first.replace(
        content=content, uuid=last.uuid, stop_reason=stop, usage=usage, model=first.model or last.model
    )


def clean(messages: list[Message | None], model: str | None) -> list[Message]:
    """Make the list sendable: no synthetic errors, foreign or unsigned thinking, empty replies or lone tool
    calls. Thinking can only be left out oldest first (docs/preserved-thinking.md): when a message lost a block (one without
    a signature, which the API refuses, or one the writer left out because it held a secret), every earlier
    message's thinking goes too, so the blocks kept after it stay valid."""
    said = [m for m in _thinking_oldest_first(messages) if m is not None and not _synthetic(m)]
    out = [_own_thinking(m, model) for m in said]
    paired, answered = _results_after_uses(out)
    final: list[Message] = []
    for m in paired:
        if m.role == "assistant":
            keep = [b for b in m.content if b.get("type") != "tool_use" or b.get("id") in answered]
            if len(keep) != len(m.content):
                m = m.replace(content=keep)
        if has_content(m):
            final.append(m)
    return final


def _synthetic(m: Message) -> bool:
    """An API error Claude Code displayed as a reply; the model never said it."""
    return m.role == "assistant" and (m.model == "<synthetic>" or bool(m.extra.get("isApiErrorMessage")))


def _own_thinking(m: Message, model: str | None) -> Message:
    """A reply without its thinking when another model wrote it (its signatures would not verify)."""
    if (
        m.role == "assistant"
        and model is not None
        and not same_model(m.model, model)
        and any(b.get("type") in THINKING_TYPES for b in m.content)
    ):
        return m.replace(content=[b for b in m.content if b.get("type") not in THINKING_TYPES])
    return m


def _results_after_uses(messages: list[Message]) -> tuple[list[Message], set[Any]]:
    """Tool results need a tool_use before them (and answer it once): the others left out; and the ids
    answered (a tool_use needs a result somewhere after it)."""
    seen_uses: set[Any] = set()
    answered: set[Any] = set()
    paired: list[Message] = []
    for m in messages:
        if m.role == "assistant":
            seen_uses |= {b.get("id") for b in m.tool_uses}
        elif m.tool_results:
            keep = [
                b
                for b in m.content
                if b.get("type") != "tool_result"
                or (b.get("tool_use_id") in seen_uses and b.get("tool_use_id") not in answered)
            ]
            answered |= {b.get("tool_use_id") for b in keep if b.get("type") == "tool_result"}
            if len(keep) != len(m.content):
                m = m.replace(content=keep)
        paired.append(m)
    return paired, answered


def _unsigned(block: dict[str, Any]) -> bool:
    return block.get("type") == "thinking" and not block.get("signature")


def _thinking_oldest_first(messages: list[Message | None]) -> list[Message | None]:
    last = -1
    for i, m in enumerate(messages):
        if m is not None and m.role == "assistant":
            if m.extra.get("thinkingDropped") or any(_unsigned(b) for b in m.content):
                last = i
    if last < 0:
        return messages
    out: list[Message | None] = []
    for i, m in enumerate(messages):
        if m is not None and m.role == "assistant" and i <= last:
            kept = [b for b in m.content if b.get("type") not in THINKING_TYPES]
            if len(kept) != len(m.content):
                m = m.replace(content=kept)
        out.append(m)
    return out


_DATED = re.compile(r"-\d{8}$")


def same_model(produced: str | None, resumed: str) -> bool:
    """Whether a response of ``produced`` counts as the resumed model's own (its thinking signatures verify).

    A dated id and its alias name one model (``claude-opus-4-1-20250805`` and ``claude-opus-4-1``), and the
    ``[1m]`` window suffix is ours, not the model's.
    """
    if not produced:
        return False

    def base(name: str) -> str:
        return _DATED.sub("", name.replace("[1m]", "").strip())

    return base(produced) == base(resumed)


def has_content(m: Message) -> bool:
    for b in m.content:
        if b.get("type") != "text" or str(b.get("text", "")).strip():
            return True
    return False
