"""Preserved thinking between compaction points: which thinking blocks an edit invalidates (docs/preserved-thinking.md).

On the 5.5 family a thinking block is valid only while everything before it — system, tools and every
earlier message — is what it was when the block was written; a changed prefix invalidates that block
and every later one, and the request is refused. Appending is always allowed, and so is leaving
thinking out (the request then sends less of it). So between two compaction points each request's
messages must extend the previous request's, and this module is the one place that says so:

    first_edit(sent, view)        where ``view`` stops extending ``sent`` (None: it extends it)
    invalidated(sent, view)       the messages whose thinking that edit invalidates (the edited one
                                  and every later one holding thinking, new replies included)
    settle(view, sent, state)     what the view may send now, by the policy below

The policy, the same for every stage of the view (budget applied late, snip, time-based microcompact,
collapse — each stays its own module and knows nothing of this):

    no thinking at or after the edit     the edit goes out as it is (nothing it could invalidate)
    a tool loop is running               the edit waits: the previous request's messages go out again
                                         with what was appended since (the loop's latest assistant
                                         message must come back with its thinking, which the edit
                                         would invalidate); the stage's decision is sticky, so it
                                         applies once the loop has ended — or at the compaction
                                         point, which rewrites the history anyway
    otherwise                            the edit goes out and, in the same stroke, the thinking it
                                         invalidates is dropped: recorded once (``thinking_record``),
                                         counted once, and left out of every later request too

Server-side clearing (``clear_tool_uses``, compact.context.context_editing) is not an edit: the local messages
do not change. A compaction point is not settled here: the compactor picks a backend that leaves no
invalid thinking in what it keeps (compact.compaction.backend).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.messages import Message

THINKING = ("thinking", "redacted_thinking")


def holds_thinking(m: Message) -> bool:
    return m.role == "assistant" and any(b.get("type") in THINKING for b in m.content)


def without_thinking(m: Message) -> Message:
    """The message with its thinking blocks left out (the same object when it has none)."""
    if not holds_thinking(m):
        return m
    kept = [b for b in m.content if b.get("type") not in THINKING]
    return m.replace(content=kept)


def same(a: Message, b: Message) -> bool:
    """Whether two versions of a message send the same bytes (object identity first: the view reuses
    the objects of what did not change)."""
    return a is b or (a.uuid == b.uuid and a.role == b.role and a.content == b.content)


def first_edit(sent: Sequence[Message], view: Sequence[Message]) -> int | None:
    """Index in ``view`` of the first message that differs from what ``sent`` held there; None when
    ``view`` is ``sent`` plus appended messages."""
    for i, old in enumerate(sent):
        if i >= len(view) or not same(old, view[i]):
            return i
    return None


def invalidated(sent: Sequence[Message], view: Sequence[Message]) -> list[str]:
    """Uuids of the messages of ``view`` whose thinking the edit of ``sent`` invalidates, in order."""
    at = first_edit(sent, view)
    if at is None:
        return []
    return [m.uuid for m in view[at:] if holds_thinking(m)]


def in_tool_loop(view: Sequence[Message]) -> bool:
    """The next request continues a tool loop whose latest assistant message holds thinking (that
    thinking must come back, valid): that message called tools and no prompt the user typed came after
    it. Its results may not be there yet (a view built between the reply and its results, to count
    or to compact, is the same loop), and a reminder or an attachment may follow them."""
    at = next((i for i in range(len(view) - 1, -1, -1) if view[i].role == "assistant"), None)
    if at is None or not holds_thinking(view[at]) or not view[at].tool_uses:
        return False
    return not any(m.is_typed_prompt for m in view[at + 1 :])


@dataclass
class Counts:
    """Per conversation, what became of thinking (the benchmarks print them; the thinking left out, by
    message uuid, is a sticky decision in ContextState.thinking_dropped, replayed on resume)."""

    dropped_between: int = 0  # thinking-holding messages dropped outside compaction points
    dropped_at_compaction: int = 0  # ... and at compaction points
    dropped_at_collapse: int = 0  # ... and at collapse commits (a compaction point of context collapse)
    kept_at_compaction: int = 0  # thinking-holding messages kept valid across compaction points
    held: int = 0  # requests that sent an edit's previous version because a tool loop was running


@dataclass(frozen=True)
class Settled:
    messages: list[Message]
    newly_dropped: list[str]
    held: bool


def settle(
    view: list[Message],
    sent: Sequence[Message] | None,
    dropped: set[str],
    cache: dict[Any, Any] | None = None,
) -> Settled:
    """The messages to send for ``view`` after a request that sent ``sent`` (None: no request since
    the last compaction point, nothing to extend), by the policy of the module docstring. ``dropped``
    (the uuids whose thinking is left out) grows by what this call drops; ``cache`` keeps the stripped
    copies, so an unchanged message is the same object from call to call."""
    view = _drop(view, dropped, cache)
    if not sent:
        return Settled(view, [], False)
    bad = invalidated(sent, view)
    if not bad:
        return Settled(view, [], False)
    if in_tool_loop(view):
        held = _hold(view, sent)
        if held is not None:
            return Settled(held, [], True)
    dropped.update(bad)
    return Settled(_drop(view, set(bad), cache), bad, False)


def _hold(view: list[Message], sent: Sequence[Message]) -> list[Message] | None:
    """``sent`` again, then the view's messages after the last one it held (None when that one is
    gone from the view: the edit cannot wait)."""
    last = sent[-1].uuid
    at = next((i for i in range(len(view) - 1, -1, -1) if view[i].uuid == last), None)
    if at is None:
        return None
    return [*sent, *view[at + 1 :]]


def _drop(messages: list[Message], uuids: set[str], cache: dict[Any, Any] | None = None) -> list[Message]:
    if not uuids or not any(m.uuid in uuids for m in messages):
        return messages
    out = []
    for m in messages:
        if m.uuid in uuids and holds_thinking(m):
            hit = cache.get(id(m)) if cache is not None else None
            if hit is None or hit[0] is not m:
                hit = (m, without_thinking(m))
                if cache is not None:
                    cache[id(m)] = hit
            m = hit[1]
        out.append(m)
    return out


def drop_all(messages: Sequence[Message]) -> tuple[list[Message], list[str]]:
    """Every message without its thinking, and the uuids of those that held some (a client-written
    summary in front of kept turns invalidates all of their thinking)."""
    return [without_thinking(m) for m in messages], [m.uuid for m in messages if holds_thinking(m)]
