"""The model's view of the conversation, and the one diagram of the order around a request (docs/compaction.md).

Before every model call of the main conversation (tool loops included), compact.request_cycle runs::

    live messages after the last compaction boundary
          │
          ▼   the view (compact.stages.view.build_view), the registered stages of compact.stages.view.STAGES in order:
    budget              (compact.stages.budget)         large results → file on disk + preview       no model call
          │
          ▼
    snip                (compact.stages.snip)           drop the turns the model snipped             no model call
          │
          ▼
    microcompact        (compact.stages.micro)          cache cold → clear old tool outputs          no model call
          │
          ▼
    collapse            (compact.workers.collapse_worker) opt-in: old spans → short summaries         worker's side requests
          │             then View.tokens (untagged: what thresholds see); " [id:…]" tags, API copy only
          ▼
    settle              (compact.stages.binding)        not a stage: the view must extend what the    no model call
          │                                      last request sent; an edit waits while a tool
          │                                      loop runs, else the thinking it invalidates is
          │                                      left out, once
          ▼
    auto-compact        (compact.autocompact)    the policy says so: notes first, else the    0 or 1 (+PTL retries)
          │                                      LLM summary (compact.compaction.compactor)
          ▼
    snip nudge          (compact.stages.snip)           a reminder once the context grew ~10k        no model call
          │
          ▼
    token state         → TokenState event (the warning bar); at the blocking limit B: ContextLimitReached
          │
          ▼
    send                the request; prompt too long → reactive compaction once per turn, then again;
          │             max_tokens overflow → once more with a smaller max_tokens; the reply's usage
          │             calibrates the estimate (the server's count of the whole request against ours)
          ▼
    after_response      session notes updated in the background (compact.compaction.notes_updater), unless a
                        compaction is due next and the notes as they are already serve it

The live message list is never rewritten; ``build_view`` derives what is sent from it plus the sticky
decisions in ``ContextState`` by running ``STAGES``, the registered stages, in list order (the first
part of the diagram; a test keeps the two in step, and compact/README.md says how to add a stage). Then
the untagged view is counted (``View.tokens``: what thresholds see) and the typed prompts get their
" [id:xxxxxx]" tags in the API copy only (``View.tagged``, ``View.api``).

A stage is a ``Stage``: a name, a function from messages to messages that never mutates its input and
never separates a tool_use from its tool_result (tests/compact/test_invariants.py checks each registered one),
and its part of the reuse fingerprint (whatever decision or setting of its own would change its output
for the same input). Per-message stages keep the order and the uuids of what they keep, so they can
run on the newest messages only; a ``whole`` stage (context collapse) sees the whole view on every
call, after them.

Two kinds of reuse keep a call in a running session at O(new messages): each stage may keep a
per-message cache (``ctx.cache(name)``, tied to the state), and when the list only grew since the last
call and no stage's fingerprint changed in between, the previous call's view is kept and only the last
round onwards goes through the per-message stages again (checked by object identity, so the live list
must be append-only and its messages never mutated — both are the contract already). A stage that
needs the whole list after all raises ``Redo``. Treat a ``View``'s lists as read-only.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from compact.decision.config import CompactConfig
from compact.decision.tokens import Calibration, cleared, count_tokens
from compact.stages import binding
from compact.stages.budget import apply_budget
from compact.stages.micro import cache_expired, microcompact
from compact.stages.snip import apply_snips, tag_prompts
from compact.stages.state import ContextState, microcompact_record, replacement_record, thinking_record
from core.messages import Message, to_api

# a worker that runs as a whole stage (the collapser): (view, ctx) -> view
StageWorker = Callable[[list[Message], "ViewContext"], list[Message]]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _no_record(record: dict[str, Any]) -> None:
    return None


@dataclass
class ViewContext:
    """What the stages read: the state, where results go, the clock, their settings and caches."""

    state: ContextState
    results_dir: Path
    now: Callable[[], datetime] = _utcnow
    # the conversation's settings: a stage reads its own row here (compact/README.md, "To add a stage")
    config: CompactConfig = field(default_factory=CompactConfig)
    microcompact_enabled: bool = True
    gap_minutes: float = 60.0
    keep_recent: int = 5
    # appends one transcript record ({"type": ..., payload}); the caller adds uuid/timestamp/sessionId
    record: Callable[[dict[str, Any]], Any] = _no_record
    calibration: Calibration | None = None
    # the workers of whole stages, by stage name (compact.start puts the collapser here when it is on)
    workers: dict[str, StageWorker] = field(default_factory=dict)
    # reuse the previous call's work when the list only grew (the live list is append-only)
    incremental: bool = True
    # what the last request sent since the last compaction point (None: none yet), which the next one
    # must extend (compact.stages.binding); set by compact.request_cycle.send, cleared by the compactor
    sent: list[Message] | None = None
    sent_tagged: list[Message] | None = None  # the same as tagged: what the server's summary replaces
    thinking: binding.Counts = field(default_factory=binding.Counts)
    # the view about to go out first differs from what was sent at a collapse commit's placeholder: the
    # next request is a compaction point of context collapse (read and cleared by compact.context.cache_health)
    at_collapse: bool = False
    _memo: Any = field(default=None, repr=False)
    _caches: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _cache_owner: Any = field(default=None, repr=False)

    def cache(self, stage: str) -> dict[str, Any]:
        """The per-message memo of one stage; emptied if the state object is swapped."""
        if self._cache_owner is not self.state:
            self._caches.clear()
            self._cache_owner = self.state
        return self._caches.setdefault(stage, {})


@dataclass(frozen=True)
class Step:
    """Where a pass starts: ``start`` is the index of the first input message the stage is given (0: all
    of them); ``before`` is the view of the messages before it, kept from the previous call."""

    start: int = 0
    before: list[Message] = field(default_factory=list)


WHOLE = Step()


class Redo(Exception):
    """Raised by a per-message stage that needs the whole list this time (the view is rebuilt)."""


def _no_fingerprint(ctx: ViewContext) -> tuple[Any, ...]:
    return ()


def _always(ctx: ViewContext) -> bool:
    return True


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[list[Message], ViewContext, Step], list[Message]]
    # what of the stage's own decisions and settings changes its output for the same input
    fingerprint: Callable[[ViewContext], tuple] = _no_fingerprint
    whole: bool = False  # sees the whole view every call, after the per-message stages
    active: Callable[[ViewContext], bool] = _always


@dataclass
class View:
    messages: list[Message]  # the model's view, without the [id:…] tags
    tagged: list[Message]  # the same with the tags: what is sent
    tokens: int  # as the server counts it (what server-side clearing leaves)

    @cached_property
    def raw_tokens(self) -> int:
        """The history as it is kept and sent, old tool results the server clears included (compact.decision.tokens):
        what compaction is due at, and what a compaction request sends."""
        return self.tokens + cleared(self.messages)

    @cached_property
    def api(self) -> list[dict[str, Any]]:
        return to_api(self.tagged)


# --- the registered stages, in order ------------------------------------------------------------------


def _budget(messages: list[Message], ctx: ViewContext, step: Step) -> list[Message]:
    """compact.stages.budget: large tool results to a file on disk, a preview in the view."""
    result = apply_budget(messages, ctx.state, None, ctx.results_dir, cache=ctx.cache("budget"))
    if result.new_replacements:
        ctx.record(replacement_record(result.new_replacements))
    return result.messages


def _budget_fingerprint(ctx: ViewContext) -> tuple[Any, ...]:
    return (len(ctx.state.replacements), len(ctx.state.inline))


def _snip(messages: list[Message], ctx: ViewContext, step: Step) -> list[Message]:
    """compact.stages.snip: drop the turns the model snipped (the Snip tool records them)."""
    return apply_snips(messages, ctx.state)


def _snip_fingerprint(ctx: ViewContext) -> tuple[Any, ...]:
    return (len(ctx.state.snipped),)


def _micro(messages: list[Message], ctx: ViewContext, step: Step) -> list[Message]:
    """compact.stages.micro: once the prompt cache has gone cold, clear old tool outputs (decided on a whole pass)."""
    now = ctx.now()
    if (
        step.start
        and ctx.microcompact_enabled
        and cache_expired(step.before + messages, now, ctx.gap_minutes)
    ):
        raise Redo  # rare: the cache went cold; redo it all
    result = microcompact(
        messages,
        ctx.state,
        now,
        ctx.gap_minutes,
        ctx.keep_recent,
        ctx.microcompact_enabled and not step.start,
        cache=ctx.cache("micro"),
    )
    if result.newly_cleared:
        ctx.record(microcompact_record(result.newly_cleared))
    return result.messages


def _micro_fingerprint(ctx: ViewContext) -> tuple[Any, ...]:
    return (len(ctx.state.cleared), ctx.microcompact_enabled, ctx.gap_minutes, ctx.keep_recent)


def _collapse(messages: list[Message], ctx: ViewContext, step: Step) -> list[Message]:
    """compact.workers.collapse_worker: committed spans behind placeholders; commits and the worker's start."""
    worker = ctx.workers.get("collapse")
    return worker(messages, ctx) if worker is not None else messages


def _collapse_on(ctx: ViewContext) -> bool:
    return "collapse" in ctx.workers


STAGES: list[Stage] = [
    Stage("budget", _budget, _budget_fingerprint),
    Stage("snip", _snip, _snip_fingerprint),
    Stage("microcompact", _micro, _micro_fingerprint),
    Stage("collapse", _collapse, whole=True, active=_collapse_on),
]


# --- building the view ----------------------------------------------------------------------------------


def build_view(messages: list[Message], ctx: ViewContext) -> View:
    """Derive the request's view of ``messages`` (those after the last boundary); see module docstring."""
    return _settle(_build(messages, ctx, reuse=ctx.incremental), ctx)


def _settle(view: View, ctx: ViewContext) -> View:
    """The view as the previous request allows it (compact.stages.binding): an edit of what was sent waits
    while a tool loop runs, else the thinking it invalidates is left out, recorded once."""
    s = binding.settle(view.messages, ctx.sent, ctx.state.thinking_dropped, ctx.cache("binding"))
    if s.newly_dropped and _at_collapse(s.messages, ctx):
        # a collapse commit is a compaction point of its own (a summary the client wrote in front of
        # the turns after it): what it invalidates is counted there, not as an edit between points
        ctx.thinking.dropped_at_collapse += len(s.newly_dropped)
        ctx.record(thinking_record(s.newly_dropped, "collapse"))
    elif s.newly_dropped:
        ctx.thinking.dropped_between += len(s.newly_dropped)
        ctx.record(thinking_record(s.newly_dropped, "edit"))
    if s.held:
        ctx.thinking.held += 1
    elif ctx.sent and _at_collapse(s.messages, ctx):
        # set when the commit goes out, not when it is made: a running tool loop holds it back until then
        ctx.at_collapse = True
    if s.messages is view.messages:
        return view
    tagged = tag_prompts(s.messages, cache=ctx.cache("tags"))
    return View(s.messages, tagged, count_tokens(s.messages, ctx.calibration, ctx.state.freed_since_usage))


def _at_collapse(view: list[Message], ctx: ViewContext) -> bool:
    """Whether the first edit of what was sent is a collapse commit's placeholder (``view`` as settled:
    the thinking left out before is left out of it too)."""
    at = binding.first_edit(ctx.sent or [], view)
    placeholders = {c.get("placeholderUuid") for c in ctx.state.collapses}
    return at is not None and at < len(view) and view[at].uuid in placeholders


def _build(messages: list[Message], ctx: ViewContext, reuse: bool) -> View:
    previous: _Memo | None = ctx._memo if reuse else None
    start = previous.reusable(messages, ctx) if previous else None
    memo = previous if previous is not None and start is not None else _Memo()
    start = start or 0
    kept = bisect_left(memo.view_src, start)
    step = Step(start, memo.view[:kept])
    active = [s for s in STAGES if s.active(ctx)]
    tail = messages[start:]
    try:
        for stage in active:
            if not stage.whole:
                tail = stage.run(tail, ctx, step)
    except Redo:
        return _build(messages, ctx, reuse=False)
    view = step.before + tail if start else tail
    src = memo.view_src[:kept] + _sources(messages, start, tail)
    whole = [s for s in active if s.whole]
    late = view
    for stage in whole:
        late = stage.run(late, ctx, WHOLE)
    if whole:
        tagged = tag_prompts(late, cache=ctx.cache("tags"))
    else:
        tagged = memo.tagged[:kept] + tag_prompts(tail, cache=ctx.cache("tags"))
    if ctx.incremental:
        ctx._memo = _Memo(list(messages), view, src, tagged, fingerprint(ctx))
    return View(late, tagged, count_tokens(late, ctx.calibration, ctx.state.freed_since_usage))


def _sources(messages: list[Message], start: int, tail: list[Message]) -> list[int]:
    """The input index of each message the per-message stages kept (they keep order and uuids)."""
    if len(tail) == len(messages) - start:
        return list(range(start, len(messages)))
    index = {m.uuid: start + i for i, m in enumerate(messages[start:])}
    return [index[m.uuid] for m in tail]


def fingerprint(ctx: ViewContext) -> tuple[Any, ...]:
    """What must not change for the previous call's view to be reused: the state object, where results go,
    which stages run and each stage's own part."""
    parts = tuple((s.name, s.active(ctx), s.fingerprint(ctx)) for s in STAGES)
    return (id(ctx.state), str(ctx.results_dir), parts)


@dataclass
class _Memo:
    """The last call's input and outputs, reused when the next input only appends messages."""

    inputs: list[Message] = field(default_factory=list)
    view: list[Message] = field(default_factory=list)  # after the per-message stages
    view_src: list[int] = field(default_factory=list)  # input index of each view message
    tagged: list[Message] = field(default_factory=list)  # view with tags (only without whole stages)
    fingerprint: tuple[Any, ...] = ()

    def reusable(self, messages: list[Message], ctx: ViewContext) -> int | None:
        """Where to resume: the start of the last round of the previous input, or None to redo all."""
        n = len(self.inputs)
        if not n or len(messages) < n or self.fingerprint != fingerprint(ctx):
            return None
        if not all(map(operator.is_, self.inputs, messages)):  # C-speed identity check of the prefix
            return None
        start = n
        # the last round may still grow (budget decides per round) and needs its assistant (tool names)
        while start > 0 and messages[start - 1].role == "user":
            start -= 1
        return max(0, start - 1)
