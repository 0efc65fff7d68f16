"""Microcompact, time-based: clear old tool outputs once the prompt cache has expired (docs/compaction.md).

Triggers: the last assistant message is older than ``gap_minutes`` (60) before now — the server's
prompt cache is cold, so changing old content costs nothing extra. Off with
``COMPACT_AGENT_MICROCOMPACT=0`` (``enabled=False``).
Drops: the content of the tool results of compactable tools (Read, Bash, Grep, Glob, Edit, Write,
WebFetch, WebSearch), images included, except the ``keep_recent`` (5) most recent; each becomes
"[Old tool result content cleared]". A result already shorter than that marker is left as it is.
Keeps: every tool_use block (pairs stay valid; the model can re-run a call), all text, all other
tools' results.
Writes to disk: no (the caller records ``newly_cleared`` as a microcompact transcript record).
Model calls: none.

The decision is sticky: cleared ids go to ``ContextState.cleared`` and every later request sends the
marker for them, gap or not, so the new cache prefix stays stable.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from compact.stages.state import ContextState
from core.declaration import declaration_of
from core.messages import Block, Message
from core.tokens import LONGEST_TOKEN_BYTES, block_tokens, estimate_text

CLEARED = "[Old tool result content cleared]"


@functools.cache
def _cleared_tokens() -> int:
    """The marker's size, counted on first use: the tokenizer loads in ~0.2 s (~1 s while the SDK is being
    imported in the background), which the REPL must not pay before drawing its prompt."""
    return estimate_text(CLEARED)


def _clearable(tool: str) -> bool:
    """Its old results may be cleared (its declaration says so; a tool nobody declared: no)."""
    d = declaration_of(tool)
    return d is not None and d.clearable


# at a compaction, the recent results its kept tail keeps may take this share of T (in_tail)
TAIL_RESULTS_SHARE = 0.10


@dataclass
class MicroResult:
    messages: list[Message]
    newly_cleared: list[str] = field(default_factory=list)


def parse_time(stamp: str) -> datetime | None:
    try:
        t = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def cache_expired(messages: list[Message], now: datetime, gap_minutes: float) -> bool:
    """True when the last assistant message is more than ``gap_minutes`` old."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant":
            t = parse_time(messages[i].timestamp)
            if t is None:
                return False
            if now.tzinfo is None:
                now = now.replace(tzinfo=timezone.utc)
            return now - t > timedelta(minutes=gap_minutes)
    return False


def microcompact(
    messages: list[Message],
    state: ContextState,
    now: datetime,
    gap_minutes: float = 60,
    keep_recent: int = 5,
    enabled: bool = True,
    cache: dict[str, Any] | None = None,
) -> MicroResult:
    """Clear old compactable results when the cache is cold; always apply earlier clearings."""
    newly: list[str] = []
    if enabled and cache_expired(messages, now, gap_minutes):
        newly = stale_results(messages, state, keep_recent)
        state.cleared.update(newly)
    if not state.cleared:
        return MicroResult(list(messages), newly)
    cache = {} if cache is None else cache
    # the cleared set only ever grows, so its size tells whether a cached answer is still current
    version = len(state.cleared)
    out = []
    for m in messages:
        if m.role == "user":
            hit = cache.get(m.uuid)
            if hit is None or hit[0] is not m or hit[1] != version:
                hit = (m, version, _cleared(m, state.cleared))
                cache[m.uuid] = hit
            m = hit[2]
        out.append(m)
    return MicroResult(out, newly)


def stale_results(
    messages: list[Message],
    state: ContextState,
    keep_recent: int = 5,
    budget: int | None = None,
    *,
    ratio: float = 1.0,
    unseen: frozenset[str] = frozenset(),
) -> list[str]:
    """Tool results microcompact would clear now if the cache were cold: the compactable ones answered
    in ``messages`` except the ``keep_recent`` most recent, not cleared yet. With a token ``budget`` the
    recent ones kept must also fit in it (the newest is always kept). A compaction rewrites the cached
    prefix anyway, so the kept tail loses them in the same stroke (compact.compaction.compactor, ``in_tail``).
    ``ratio`` turns our estimate into the server's count (the budget is in the server's unit); the results
    of the calls in ``unseen`` are never cleared."""
    # the answered calls' results; only the few recent ones a budget weighs are ever measured (a resumed
    # session's first request would otherwise tokenize every result of its tail to clear nearly all)
    results: dict[str, Block] = {}
    for m in messages:
        if m.role == "user":
            for b in m.content:
                if b.get("type") == "tool_result":
                    results[str(b.get("tool_use_id"))] = b
    ids = [
        b["id"]
        for m in messages
        if m.role == "assistant"
        for b in m.content
        if b.get("type") == "tool_use" and _clearable(str(b.get("name"))) and b.get("id") in results
    ]
    keep = min(len(ids), max(0, keep_recent))
    if budget is not None and keep > 1:
        used, n = 0, 0
        for i in reversed(ids[len(ids) - keep :]):
            size = _cleared_tokens() if i in state.cleared else block_tokens(results[i])
            size = round(size * ratio)
            if n and used + size > budget:
                break
            used, n = used + size, n + 1
        keep = n
    return [i for i in ids[: len(ids) - keep] if i not in state.cleared and i not in unseen]


def in_tail(
    messages: list[Message],
    state: ContextState,
    keep_recent: int,
    threshold: int,
    *,
    ratio: float = 1.0,
    unseen: frozenset[str] = frozenset(),
) -> list[str]:
    """What a compaction clears in the tail it keeps: microcompact's rule, with the recent results it
    keeps held to TAIL_RESULTS_SHARE of T as the server counts them (``ratio``: our estimate to its
    count) — the tail is written to the cache afresh either way, and a tail begun early (a candidate
    prepared ahead) would otherwise bring back a long run of reads. Nothing leaves unseen: the results
    of the calls in ``unseen`` (no notes update or summary request saw them) stay."""
    budget = int(threshold * TAIL_RESULTS_SHARE)
    return stale_results(messages, state, keep_recent, budget=budget, ratio=ratio, unseen=unseen)


def size_after(messages: list[Message], cleared: Iterable[str]) -> int:
    """The messages' tokens once the results of these calls are cleared (what the view will count)."""
    gone = set(cleared)
    return sum(
        _cleared_tokens() * len(m.tool_results)
        if m.tool_results and all(b.get("tool_use_id") in gone for b in m.tool_results)
        else m.tokens
        for m in messages
    )


def without_calls(messages: list[Message], ids: list[str]) -> list[Message]:
    """The messages with these tool calls left out: what still shows a file once their results are cleared."""
    if not ids:
        return messages
    drop = set(ids)
    return [
        m.replace(content=[b for b in m.content if not (b.get("type") == "tool_use" and b.get("id") in drop)])
        if any(b.get("id") in drop for b in m.tool_uses)
        else m
        for m in messages
    ]


def _cleared(m: Message, cleared: set[str]) -> Message:
    blocks: list[Block] = []
    changed = False
    for b in m.content:
        if b.get("type") == "tool_result" and b.get("tool_use_id") in cleared and _worth_clearing(b):
            b = {**b, "content": CLEARED}
            changed = True
        blocks.append(b)
    return m.replace(content=blocks) if changed else m


def clearable(tool: str) -> bool:
    """Whether microcompact may clear this tool's results."""
    return _clearable(tool)


def holds_output(block: Block) -> bool:
    """Whether a tool_result block still holds its output (not cleared, not a few words)."""
    return _worth_clearing(block)


def _worth_clearing(block: Block) -> bool:
    content = block.get("content", "")
    if isinstance(content, list):
        if any(b.get("type") != "text" for b in content):
            return True  # images and documents cost 2,000 tokens each
        content = "\n".join(b.get("text", "") for b in content)
    if content == CLEARED or len(content) <= len(CLEARED):
        return False
    # no token of the encoding is longer than LONGEST_TOKEN_BYTES (a character is a byte or more), so a
    # text that many times the marker's tokens long outweighs it for sure; only a short one needs measuring
    if len(content) > LONGEST_TOKEN_BYTES * _cleared_tokens():
        return True
    return estimate_text(content) > _cleared_tokens()
