"""What happens to the context before a main request, decided in one place, with its reason (issue 38).

``decide(facts) -> Decision`` is pure: the facts about the conversation and its window, gathered by the
executor above it (compact.autocompact ``facts``), in; what happens and why, out:

  none      nothing now: below the next decision point (``Decision.point``, which /context shows),
            auto-compact off, the breaker open, nothing new since the last compaction, one running
  early     below T, a compaction that makes no model call and keeps nobody waiting, because it pays
            for itself now (compact.compaction.economics): from the notes, current now (``notes``); at a
            turn boundary the notes cover, on a model that keeps its thinking (``boundary``); or the notes
            update or the server's summary prepared in the background, ready (``prepared``). A prepared
            local summary waits for T: it keeps nothing verbatim
  notes     at T: from the session notes
  server    at T: the server's summary
  summary   at T: a local summary
  reactive  the server refused the request as too long: one compaction, then the retry

At T the executor applies a prepared candidate when one passes its checks (compact.workers.preparer),
puts the compaction off while one is in flight and the context is clear of the blocking limit, and runs
the decided backend in the foreground otherwise. Below T nothing runs in the foreground: an early
compaction whose candidate is refused at its checks becomes nothing (the refusal is recorded), never a
local summary; past the point where a prepared candidate pays, while it is still in flight and expected
to end within a second, the executor waits for it at most that second (compact.autocompact EARLY_WAIT)
— except below a threshold the user set (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE, the window cap), which is kept:
no local summary and no wait below it.

The decision of a compaction is written on its boundary (``record``) and an early one is shown in one
line (``line``): why, and what it saves on each later request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NONE, EARLY, REACTIVE = "none", "early", "reactive"
# the prepared candidates an early compaction may apply: they keep the recent turns verbatim
EARLY_PREPARED = ("notes", "server")
BACKEND_TEXT = {"notes": "the session notes", "server": "the server's summary", "summary": "a local summary"}


@dataclass(frozen=True)
class Facts:
    """What the decision is made from; every figure in the server's unit (tokens it counts)."""

    tokens: int  # what the history weighs as kept (a compaction replaces that)
    threshold: int  # T (compact.decision.window)
    blocking: int  # B
    auto: bool = True  # auto-compact on
    collapse: bool = False  # context collapse on (auto-compact then off)
    collapse_can_help: bool = True  # collapse has old spans it could still take
    disabled: bool = False  # DISABLE_COMPACT
    compacting: bool = False  # a compaction is running (no recursion)
    breaker_open: bool = False
    new_content: bool = True  # something was added since the last compaction
    cost_aware: bool = True
    backend: str = "summary"  # the next compaction's backend: "notes" | "server" | "summary"
    notes_current: bool = False  # a notes compaction with no call is possible now
    candidate: str = ""  # this cycle's prepared candidate: "" | "running" | "ready" | "failed"
    candidate_kind: str = ""  # "notes" | "summary" | "server"
    paid_point: int = (
        0  # from where a compaction with no call pays (economics.point, "notes-current"); T when none
    )
    boundary: bool = False  # a turn boundary the notes cover on a model that keeps its thinking
    boundary_point: int = 0  # where that compaction starts to pay (min(BOUNDARY_SHARE × T, paid_point))
    post: int = 0  # what a compaction is expected to leave (economics.post_estimate)
    left: int = 0  # the requests expected before the work ends (economics.requests_in_cycle)
    user_threshold: bool = False  # the user set T (compact.decision.window.user_set)
    refused: bool = False  # the server refused the request as too long
    reactive_used: bool = False  # this turn's reactive compaction ran already


@dataclass(frozen=True)
class Decision:
    action: str  # NONE | EARLY | "notes" | "server" | "summary" | REACTIVE
    reason: str
    source: str = ""  # EARLY: "notes" | "boundary" | "prepared"; NONE: "breaker" when the breaker holds it
    point: int = 0  # the context size of the next decision point (0: none)
    tokens: int = 0  # the context it was made at
    saves: int = 0  # EARLY: tokens fewer on each later request

    @property
    def compacts(self) -> bool:
        return self.action != NONE

    def record(self) -> dict[str, Any]:
        """What the compact boundary records of it."""
        out: dict[str, Any] = {"action": self.action, "reason": self.reason, "tokens": self.tokens}
        if self.source:
            out["source"] = self.source
        if self.saves:
            out["saves"] = self.saves
        return out

    def line(self) -> str:
        """One line on screen for an early compaction ("" for any other)."""
        if self.action != EARLY:
            return ""
        return f"Compacted early: {self.reason}"


def decide(f: Facts) -> Decision:
    """What happens before the next request (see the module docstring)."""
    t, at = f.threshold, f.tokens
    if f.disabled:
        return Decision(NONE, "compaction is disabled (DISABLE_COMPACT)", tokens=at)
    if f.refused:
        if f.reactive_used:
            return Decision(NONE, "the reactive compaction of this turn ran already", tokens=at)
        return Decision(REACTIVE, "the server refused the request as too long", tokens=at)
    if f.compacting:
        return Decision(NONE, "a compaction is running", tokens=at)
    if not f.auto:
        return _collapse(f) if f.collapse else Decision(NONE, "automatic compaction is off", tokens=at)
    if at >= t:
        if f.breaker_open:
            return Decision(NONE, "automatic compaction stopped after 3 failures", "breaker", tokens=at)
        if not f.new_content:
            return Decision(NONE, "nothing new since the last compaction", point=t, tokens=at)
        if f.boundary:  # a turn boundary the notes cover: from them, no call, no kept thinking
            return Decision(
                "notes",
                f"at the threshold ({at:,} of {t:,} tokens), a turn boundary the notes cover",
                "boundary",
                point=t,
                tokens=at,
            )
        return Decision(f.backend, f"at the threshold ({at:,} of {t:,} tokens)", point=t, tokens=at)
    if f.breaker_open:
        return Decision(NONE, "automatic compaction stopped after 3 failures", "breaker", tokens=at)
    if not f.cost_aware or not f.new_content:
        return Decision(NONE, "below the threshold", point=t, tokens=at)
    early = _early(f)
    if early is not None:
        return early
    return Decision(NONE, "below the next decision point", point=next_point(f), tokens=at)


def _early(f: Facts) -> Decision | None:
    """An early compaction with no call and no wait, when one pays now (None otherwise)."""
    at = f.tokens
    saves = max(0, at - f.post)
    pays = f"~{f.left} more requests × {saves:,} fewer tokens each" if f.left else f"{saves:,} fewer tokens"
    if f.boundary and f.boundary_point and at >= f.boundary_point:
        why = (
            f"a turn boundary the session notes cover, at {at:,} of {f.threshold:,} tokens: compacting "
            f"here makes no call and keeps no turn's thinking ({pays})"
        )
        return Decision(EARLY, why, "boundary", tokens=at, saves=saves)
    ready = f.candidate == "ready" and f.candidate_kind in EARLY_PREPARED
    if ready and f.paid_point and at >= f.paid_point:
        what = BACKEND_TEXT[f.candidate_kind]
        why = (
            f"{what}, prepared in the background, pays for itself from {f.paid_point:,} tokens "
            f"(now {at:,} of {f.threshold:,}): {pays}"
        )
        return Decision(EARLY, why, "prepared", tokens=at, saves=saves)
    if f.notes_current and f.backend == "notes" and f.paid_point and at >= f.paid_point:
        why = (
            f"the session notes are current and a compaction from them pays for itself from "
            f"{f.paid_point:,} tokens (now {at:,} of {f.threshold:,}): {pays}"
        )
        return Decision(EARLY, why, "notes", tokens=at, saves=saves)
    return None


def next_point(f: Facts) -> int:
    """The context size at which the next compaction may happen: T, or earlier where one with no call
    would pay (the notes current, a candidate ready or on its way, a turn boundary)."""
    points = [f.threshold]
    if f.auto and f.cost_aware and f.paid_point:
        if f.notes_current or (f.candidate in ("ready", "running") and f.candidate_kind in EARLY_PREPARED):
            points.append(f.paid_point)
        if f.boundary and f.boundary_point:
            points.append(f.boundary_point)
    return min(points)


def _collapse(f: Facts) -> Decision:
    """Context collapse on (auto-compact off): compact at the blocking limit, or over T when collapse has
    nothing left to take (one long turn has no old spans)."""
    at, t = f.tokens, f.threshold
    if at >= f.blocking:  # the request would be refused: compact whatever the breaker says
        return Decision(
            f.backend, f"context collapse at the blocking limit ({at:,} of {f.blocking:,} tokens)", tokens=at
        )
    if at >= t and not f.collapse_can_help:
        why = f"over the threshold ({at:,} of {t:,} tokens) with nothing context collapse could take"
    else:
        return Decision(NONE, "context collapse manages the room", point=f.blocking, tokens=at)
    if f.breaker_open:
        return Decision(NONE, "automatic compaction stopped after 3 failures", "breaker", tokens=at)
    if not f.new_content:
        return Decision(NONE, "nothing new since the last compaction", tokens=at)
    return Decision(f.backend, why, tokens=at)


def describe(d: Decision, threshold: int) -> str:
    """/context's line: the next decision point and what happens there."""
    if d.compacts:
        return f"Next compaction: now ({d.reason})"
    if not d.point:
        return f"Next compaction: none ({d.reason})"
    early = " (early: it pays for itself there)" if d.point < threshold else ""
    return f"Next compaction: at {d.point:,} tokens{early}; now {d.tokens:,}"
