"""The model's view of the conversation, derived before every request (SPEC §0).

The live message list is never rewritten; ``prepare`` builds what is sent from it plus the sticky
decisions in ``ContextState``, cheapest stage first::

    live messages after the last compaction boundary
          │
          ▼
    budget        (compact.budget)    large results → file on disk + preview     record: content-replacement
          │
          ▼
    snip          (compact.snip)      drop the turns the model snipped           (recorded by the Snip service)
          │
          ▼
    microcompact  (compact.micro)     cache cold → clear old tool outputs        record: microcompact
          │
          ▼
    late stages   (ctx.late_stages)   context collapse, auto-compact, ... in list order
          │
          ├──────────────► count_tokens → Prepared.tokens     (untagged: what thresholds see)
          ▼
    tag prompts   (compact.snip)      " [id:xxxxxx]" on typed prompts, API copy only
          │
          ▼
    Prepared.api = to_api(...)        the request's ``messages`` (built on first access)

Stages up to microcompact make no model call; each is a function that never mutates its input and
never separates a tool_use from its tool_result. Two kinds of reuse keep a call in a running session
at O(new messages): each stage keeps a per-message cache (in the context, tied to its state), and
when the list only grew since the last call and no decision changed in between, the previous call's
view is kept and only the last round onwards is processed again (checked by object identity, so the
live list must be append-only and its messages never mutated — both are the contract already).
Treat a ``Prepared``'s lists as read-only.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from compact.budget import apply_budget
from compact.micro import cache_expired, microcompact
from compact.snip import apply_snips, tag_prompts
from compact.state import ContextState, microcompact_record, replacement_record
from compact.tokens import Calibration, count_tokens
from core.messages import Message, to_api

LateStage = Callable[[list[Message], "PrepareContext"], list[Message]]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _no_record(record: dict) -> None:
    return None


@dataclass
class PrepareContext:
    state: ContextState
    results_dir: Path
    now: Callable[[], datetime] = _utcnow
    microcompact_enabled: bool = True
    gap_minutes: float = 60.0
    keep_recent: int = 5
    # appends one transcript record ({"type": ..., payload}); the caller adds uuid/timestamp/sessionId
    record: Callable[[dict[str, Any]], Any] = _no_record
    late_stages: list[LateStage] = field(default_factory=list)
    calibration: Calibration | None = None
    # reuse the previous call's work when the list only grew (the live list is append-only)
    incremental: bool = True
    _memo: Any = field(default=None, repr=False)
    _caches: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _cache_owner: Any = field(default=None, repr=False)

    def cache(self, stage: str) -> dict[str, Any]:
        """The per-message memo of one stage; emptied if the state object is swapped."""
        if self._cache_owner is not self.state:
            self._caches.clear()
            self._cache_owner = self.state
        return self._caches.setdefault(stage, {})


@dataclass
class Prepared:
    messages: list[Message]  # the model's view, without the [id:…] tags
    tagged: list[Message]  # the same with the tags: what is sent
    tokens: int

    @cached_property
    def api(self) -> list[dict[str, Any]]:
        return to_api(self.tagged)


def prepare(messages: list[Message], ctx: PrepareContext) -> Prepared:
    """Derive the request's view of ``messages`` (those after the last boundary); see module docstring."""
    return _prepare(messages, ctx, reuse=ctx.incremental)


def _prepare(messages: list[Message], ctx: PrepareContext, reuse: bool) -> Prepared:
    previous: _Memo | None = ctx._memo if reuse else None
    start = previous.reusable(messages, ctx) if previous else None
    memo = previous if previous is not None and start is not None else _Memo()
    start = start or 0
    state = ctx.state
    budget = apply_budget(messages[start:], state, None, ctx.results_dir, cache=ctx.cache("budget"))
    if budget.new_replacements:
        ctx.record(replacement_record(budget.new_replacements))
    kept = bisect_left(memo.view_src, start)
    tail = apply_snips(budget.messages, state)
    tail_src = (
        [start + i for i, m in enumerate(budget.messages) if m.uuid not in state.snipped]
        if state.snipped
        else list(range(start, len(messages)))
    )
    view = memo.view[:kept] + tail
    now = ctx.now()
    if start and ctx.microcompact_enabled and cache_expired(view, now, ctx.gap_minutes):
        return _prepare(messages, ctx, reuse=False)  # rare: the cache went cold; redo it all
    micro = microcompact(
        view if not start else tail,
        state,
        now,
        ctx.gap_minutes,
        ctx.keep_recent,
        ctx.microcompact_enabled and not start,
        cache=ctx.cache("micro"),
    )
    if micro.newly_cleared:
        ctx.record(microcompact_record(micro.newly_cleared))
    view = memo.view[:kept] + micro.messages if start else micro.messages
    src = memo.view_src[:kept] + tail_src
    if ctx.late_stages:
        late = view
        for stage in ctx.late_stages:
            late = stage(late, ctx)
        tagged = tag_prompts(late, cache=ctx.cache("tags"))
    else:
        late = view
        tagged = memo.tagged[:kept] + tag_prompts(view[kept:], cache=ctx.cache("tags"))
    if ctx.incremental:
        ctx._memo = _Memo(list(messages), view, src, tagged, _fingerprint(ctx))
    return Prepared(late, tagged, count_tokens(late, ctx.calibration, state.freed_since_usage))


@dataclass
class _Memo:
    """The last call's input and outputs, reused when the next input only appends messages."""

    inputs: list[Message] = field(default_factory=list)
    view: list[Message] = field(default_factory=list)  # after microcompact, before late stages
    view_src: list[int] = field(default_factory=list)  # input index of each view message
    tagged: list[Message] = field(default_factory=list)  # view with tags (only without late stages)
    fingerprint: tuple = ()

    def reusable(self, messages: list[Message], ctx: PrepareContext) -> int | None:
        """Where to resume: the start of the last round of the previous input, or None to redo all."""
        n = len(self.inputs)
        if not n or len(messages) < n or self.fingerprint != _fingerprint(ctx):
            return None
        if not all(map(operator.is_, self.inputs, messages)):  # C-speed identity check of the prefix
            return None
        start = n
        # the last round may still grow (budget decides per round) and needs its assistant (tool names)
        while start > 0 and messages[start - 1].role == "user":
            start -= 1
        return max(0, start - 1)


def _fingerprint(ctx: PrepareContext) -> tuple:
    s = ctx.state
    return (
        id(s),
        len(s.replacements),
        len(s.inline),
        len(s.snipped),
        len(s.cleared),
        str(ctx.results_dir),
        ctx.microcompact_enabled,
        ctx.gap_minutes,
        ctx.keep_recent,
        len(ctx.late_stages),
    )
