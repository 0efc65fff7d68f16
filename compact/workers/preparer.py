"""Compaction prepared in the background, so an automatic compaction costs the user no waiting (docs/compaction.md).

Triggers  ``start_if_due`` (after each main response, from compact.request_cycle.after_response): once the context
          reaches the preparation level P (below the auto-compact threshold T, chosen from measurements, see
          ``level``), one candidate is prepared per compaction cycle in a background thread: a session-notes
          update when the notes are on (compact.compaction.notes_updater), else a summary request (compact.compaction.summary's,
          text only) over the model's view as it stands (right after a compaction that left the context at P
          already, at once; the server's summary, which needs a request, after the next response — or with the
          compaction request itself when, started after it, it is predicted to keep a request waiting: ``start_with``,
          from compact.request_cycle.send). One in flight at a time; a failed one is not tried again before the next
          compaction. A summary still in flight when a compaction is applied (the notes' fallback) becomes the
          next cycle's: that compaction only replaced messages it saw, so it may replace that compaction's
          summary and attachments too (``rebase``); a newer candidate replaces an older one only when it
          completes. ``at_threshold`` (auto-compact, at T): applies the newest completed candidate that passes
          compact.compaction.candidate's checks — what it covers, by message identity, is replaced; everything after it
          stays verbatim. With none usable yet but one in flight, the compaction is put off while each request
          still fits under the blocking limit B (at most DEFER_ROOM past T); the first that would not waits for
          it, and the user is told so and for how long. With none at all (the context jumped from below P to T, or the
          candidate failed or was refused), the foreground compaction of compact.compaction.compactor.
Writes    nothing itself: the compactor writes the boundary, the summary and the kept tail.
Model calls one side request per candidate (same system, tools and message prefix: the prompt cache),
          on the short retry budget of a compaction's own requests, quietly.

    P ─────────── candidate in flight ──────────── T ── apply the ready one (wait 0) ── B
                                                    └─ not ready: carry on ─ past B: wait, say so

A candidate that was never applied is money spent: ``Stats`` counts prepared, applied, rejected and
wasted ones (benchmarks/stall.py prints them).
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from dataclasses import dataclass, field
from statistics import median
from typing import Any, Callable, ClassVar

from compact.compaction import (
    backend,
    compactor,
    economics,
    ledger,
    notes_compaction,
    notes_updater,
    server_summary,
    summary,
)
from compact.compaction.candidate import (
    REQUIRED_SUMMARY_SECTIONS,
    Candidate,
    fingerprint,
    still_covered,
    validate,
)
from compact.compaction.notes import headers, is_template, notes_text, section_name, template_for
from compact.context import context_editing, coverage
from compact.context.conversation import Conversation, Ports
from compact.context.result import Compaction
from compact.context.worker import Worker, failure
from core.events import Notice
from core.messages import Message

MIN_SHARE, MAX_SHARE = 0.30, 0.92  # P stays within these shares of T (see level)
DEFAULT_SHARE = {"notes": 0.80, "summary": 0.70, "server": 0.70}  # before anything was measured
# before a candidate of a kind was timed: its time in main steps (a notes update reads the whole
# context and writes a few edits: ~4 replies' time; a summary writes ~20K tokens: ~10)
PRIOR_STEPS = {"notes": 4.0, "summary": 10.0, "server": 10.0}
LEAD = 1.3  # margin on the expected time
STEPS_KEPT = 7  # the recent steps between responses whose medians are the usual step (Preparer.steps)
# notes and kept tail may take this share of T when applied from a prepared update (the usual one, 45%,
# keeps room for restored files; a tail that began at P holds the recent reads verbatim anyway)
PREPARED_SHARE = 0.6
# a prepared notes compaction that would leave more than this share of T waits (clear of B) for an update;
# a prepared server's summary whose kept turns weigh more gives way to one of the next request sent, when
# that one is quick (QUICK_STEPS)
LAGGING_SHARE = 0.4
QUICK_STEPS = (
    1.5  # a server's summary measured within this many steps' time is quick: waited for, it keeps one
)
MAX_REFRESH = 3  # updates of a notes candidate that lags behind, in one cycle, before a summary is prepared
CANDIDATE_TIMEOUT = 180.0  # seconds before a background summary is abandoned
# the wait a request may be expected to have for the server's summary started after the compaction
# request's reply, before that summary starts with the compaction request instead (its prefix then
# written to the cache once more): as long as an early compaction waits for its candidate
# (compact.autocompact.EARLY_WAIT)
RACE_WAIT = 1.0
# a compaction is put off, waiting for its candidate, at most this far past T (the default distance from
# T to the blocking limit): a lowered threshold (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE) is still honoured
DEFER_ROOM = 10_000
# with the server clearing old tool results, a compaction may be put off while the history as kept stays
# under this many windows (what the server counts stays under B)
RAW_ROOM = 2.0
WAIT_NOTICE = "Waiting for the compaction prepared in the background (running for {s:.0f}s)…"
HOOK_NOTICE = "PreCompact hook output added to the instructions of the compaction prepared in the background"
PREPARED = "prepared"
WORKER = "prepare"  # its name among the conversation's workers


@dataclass
class Stats:
    prepared: int = 0
    applied: int = 0
    rejected: int = 0
    wasted: int = 0
    waited: list[float] = field(default_factory=list)  # seconds the user waited at each automatic compaction
    blocked: list[float] = field(default_factory=list)  # of which blocked on a model request


@dataclass
class Preparer(Worker):
    """Per-session state: the cycle's candidate, measurements that place P, and the counts. Its thread
    (compact.context.worker) runs a summary or the server's summary; a notes candidate runs on the notes' own."""

    thread_name: ClassVar[str] = "compaction-candidate"

    clock: Callable[[], float] = time.monotonic
    cycle: int = -1  # id of conv.last_compaction when this cycle's candidate was started
    kind: str = ""  # "notes" | "summary" | "server" for the cycle's candidate
    started_at: float = 0.0
    ready: Candidate | None = None
    failed: str = ""  # why the cycle's candidate failed ("" when it did not)
    last_rejected: str = ""  # the reason the last candidate was refused (shown by /summary and /context)
    seconds: dict[str, float] = field(default_factory=dict)  # measured time per kind of candidate
    # the last STEPS_KEPT steps between responses, (seconds, tokens added): their medians give the step's
    # time and size, and the growth rate is their ratio (``growth``)
    steps: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=STEPS_KEPT))
    last: tuple[float, int] | None = None
    step: int = 0  # the last response's growth in tokens
    notes_done: bool = False  # this cycle's notes update has finished (its edits and marker are in)
    refreshed: int = 0  # updates of this cycle's notes candidate since it was started (MAX_REFRESH)
    # after a compaction applied while the next summary was in flight: (what that compaction added —
    # its summary and attachments —, what it dropped); the next one saw all it dropped, so it may
    # replace what stood in for those messages too
    rebase: tuple[frozenset[str], frozenset[str]] | None = None
    stats: Stats = field(default_factory=Stats)
    # the cycle whose prepared server's summary gave way to a newer one (once a cycle), which is waited
    # for at T, not put off again
    lagged: int = -2
    caught_up: int = -2  # the cycle whose lagging notes were brought up to date at T (once a cycle)
    covered_at: int = 0  # the context's size when this cycle's last notes update was started
    # this cycle's server's summary is started over the compaction request itself, as it is sent
    # (``start_with``): started after its reply, it was predicted to keep a request waiting (``_race_lost``)
    with_request: bool = False
    # what the server's summary started that way summarized, by fingerprint: applied only over a request
    # that sent exactly that (a retry that changed a message would bind the kept thinking elsewhere)
    sent_prints: tuple[str, ...] = ()

    @property
    def step_seconds(self) -> float:
        """The usual time between two responses (the median of the recent steps; 0 before any)."""
        return median(dt for dt, _ in self.steps) if self.steps else 0.0

    @property
    def step_tokens(self) -> float:
        """The usual growth of one step in tokens (the median of the recent steps; 0 before any)."""
        return median(grown for _, grown in self.steps) if self.steps else 0.0

    @property
    def growth(self) -> float:
        """Tokens per second: the usual step's size over its usual time, so a step's size times the steps a
        candidate takes is the growth while it is prepared (0 before any step was measured)."""
        seconds = self.step_seconds
        return self.step_tokens / seconds if seconds > 0 else 0.0

    # the server's summary prepared ahead (kind "server"): its Compaction, kept turns still to be filled in
    server_ready: Compaction | None = None
    # the PreCompact hooks ran when this cycle's candidate was started: their instructions went into
    # its request and their lines are shown with the compaction (None: they have not run this cycle)
    hook_lines: list[str] | None = None
    custom: list[str] = field(default_factory=list)  # the instructions they and CLAUDE.md gave


def _preparer(conv: Conversation) -> Preparer:
    with conv.lock:
        p = conv.workers.get(WORKER)
        if not isinstance(p, Preparer):
            p = conv.workers[WORKER] = Preparer()
        return p


def preparer(conv: Conversation) -> Preparer | None:
    """The conversation's preparer, if it has one yet."""
    p = conv.workers.get(WORKER)
    return p if isinstance(p, Preparer) else None


def level(p: Preparer, threshold: int, blocking: int, kind: str) -> int:
    """The preparation level P: the blocking limit B (a compaction may be put off until close to it)
    minus the tokens the conversation is expected to add while a candidate of this kind is prepared —
    its measured time (before the first, PRIOR_STEPS main steps' time) × the measured growth rate ×
    LEAD — within 30–92% of T (the later it starts, the shorter the verbatim tail it leaves: the cap
    was 85%, which left text-turn sessions a longer tail than needed, 1.03–1.06x the bill). At a 200K
    window with a model that answers in 2 s, a notes update taking 8 s and a summary 20 s, a text-turn
    session starts notes at the cap and a summary in the 80s; a tool chain adding ~5,500 tokens a step
    at a 100K window starts a summary at the 30% floor, right after the previous compaction."""
    lead = _lead(p, kind)
    if lead is None:
        return int(threshold * DEFAULT_SHARE[kind])
    # the last response before B where a compaction can still be put off is one step short of it
    start = blocking - lead
    return int(min(threshold * MAX_SHARE, max(threshold * MIN_SHARE, start)))


def _lead(p: Preparer, kind: str) -> float | None:
    """The tokens the conversation is expected to add while a candidate of this kind is prepared, and
    one step more (None before anything was measured)."""
    seconds = p.seconds.get(kind)
    if seconds is None and p.step_seconds > 0:
        seconds = PRIOR_STEPS[kind] * p.step_seconds
    if seconds is None or p.growth <= 0:
        return None
    return p.step + seconds * p.growth * LEAD


def _due(p: Preparer, point: int, threshold: int, blocking: int, kind: str) -> int:
    """Where this cycle's candidate starts: the preparation level, or, for an early compaction (a point
    below T), the point itself when the candidate would still be ready before T. Below T nothing forces
    a compaction, so it need not be prepared ahead; started ahead, the notes would lag behind the results
    read meanwhile by the time it pays, and what they never saw stays whole in the tail, written to the
    cache once more. The server's summary starts a step before the point (see below)."""
    lead = _lead(p, kind)
    if point < threshold and kind in economics.EARLY_KINDS and (lead is None or point + lead < threshold):
        # the server's summary stands for the request just sent and is applied at the next one, the
        # first past the point when one more step like the last reaches it: nothing it keeps was sent before
        return point - p.step if kind == "server" else point
    return level(p, point, blocking, kind)


def _cycle(conv: Conversation) -> int:
    return id(conv.last_compaction) if conv.last_compaction is not None else 0


def active(conv: Conversation, ports: Ports) -> bool:
    """Whether this conversation prepares its compactions ahead (auto-compact on, not a side request)."""
    return ports.config.auto_enabled and ports.config.prepare_compaction


# --- before T --------------------------------------------------------------------------------------------


def start_if_due(conv: Conversation, ports: Ports, tokens: int) -> bool:
    """Measure growth; start this cycle's candidate once the context reaches P. True while this cycle's
    candidate owns the notes (the notes' own schedule must then not start another update)."""
    p = _preparer(conv)
    _measure(p, tokens)
    if not active(conv, ports) or conv.compacting:
        return False
    threshold, blocking = conv.window.thresholds().auto_compact, _limit(conv)
    kind = _kind(conv, ports)
    t = threshold
    if (
        ports.config.cost_aware
    ):  # prepared ahead of where a compaction pays for itself (compact.compaction.economics)
        threshold = economics.point(conv, ports, kind, threshold)
    due = _due(p, threshold, t, blocking, kind)
    if kind == "server" and ports.config.cost_aware and not economics.turn_compacted(conv):
        # a turn's first compaction inside its tool loop: below half of T the turn may yet end, and the
        # next prompt compacts from the notes with no call and no kept thinking (request_cycle.turn_end_notes)
        due = max(due, int(t * economics.BOUNDARY_SHARE))
    if p.cycle == _cycle(conv):
        if p.kind == "notes" and p.notes_done:
            # an update taken before the notes' level (one that started right after the last compaction)
            # is far behind by T: the one from the level is in just before the limit
            early = p.covered_at < level(p, threshold, blocking, "notes") <= tokens
            missing = _notes_plan(conv, ports) is None
            if (
                (missing or early)
                and not p.failed
                and p.refreshed < MAX_REFRESH
                and not _still_template(conv, ports)
                and notes_compaction.could_serve(conv, ports)
            ):
                # the notes lag behind what the tail would keep whole (nothing leaves unseen): brought up
                # to date, they serve — one more update of this cycle's candidate, not a summary
                p.refreshed += 1
                _refresh(conv, ports, p, tokens)
            elif (
                missing
                and not p.failed
                and not p.running
                and tokens >= level(p, threshold, blocking, "summary")
            ):
                _start_summary(conv, ports, p, p.custom)  # the notes can't serve this compaction: summarize
        return p.kind == "notes"
    if p.running or tokens < due:
        return False  # (one in flight at a time: an older one, overtaken by a compaction, ends first)
    if kind == "server" and backend.server_plan(conv, ports) is None:
        return False  # the server's summary needs a request sent since the compaction point: next time
    return _start(conv, ports, p, tokens)


def _refresh(conv: Conversation, ports: Ports, p: Preparer, tokens: int) -> None:
    """One more update of this cycle's notes candidate, timed from now (``seconds["notes"]`` is one
    update's time: timed from the candidate's start it was the whole cycle's, ~3x, which put the level at
    its floor and the last update too late)."""
    p.notes_done, p.started_at, p.covered_at = False, p.clock(), tokens
    notes_updater.update_in_background(conv, ports, on_done=lambda ok: _notes_done(p, ok))


def _still_template(conv: Conversation, ports: Ports) -> bool:
    """The notes hold nothing yet (an update found nothing worth noting): another update won't make them
    serve, the summary does."""
    text = notes_text(conv.notes_path)
    return text is None or is_template(text, template_for(ports))


def _start(
    conv: Conversation, ports: Ports, p: Preparer, tokens: int, plan: backend.ServerPlan | None = None
) -> bool:
    """Start this cycle's candidate; True when it is a notes update. ``plan``: the server's summary over
    the request about to be sent (``start_with``), else over the last one sent when it serves."""
    if p.ready is not None or p.kind:
        _discard(p)  # the previous cycle's, never used
    p.cycle, p.failed, p.rebase, p.last_rejected, p.refreshed = _cycle(conv), "", None, "", 0
    p.with_request, p.sent_prints = False, ()
    p.started_at = p.clock()
    # the PreCompact hooks run now, so what they print goes into this candidate's request (run at the
    # threshold, instructions would leave the candidate unusable and the user waiting)
    p.custom, p.hook_lines = compactor.pre_compact(ports, "auto", None)
    if p.hook_lines:
        ports.emit(Notice(HOOK_NOTICE, "info"))
    plan = plan or backend.server_plan(conv, ports)
    if plan is not None:
        _start_server(conv, ports, p, plan)
        return False
    if _notes_usable(conv, ports) and not p.hook_lines:  # the notes can't follow instructions
        p.kind, p.notes_done, p.covered_at = "notes", False, tokens
        p.stats.prepared += 1
        notes_updater.update_in_background(conv, ports, on_done=lambda ok: _notes_done(p, ok))
        return True
    _start_summary(conv, ports, p, p.custom)
    return False


def candidate_ready(conv: Conversation) -> bool:
    """Whether this cycle's candidate has completed (its call is paid for: applying it costs none)."""
    p = preparer(conv)
    if p is None or p.cycle != _cycle(conv) or p.failed:
        return False
    return p.server_ready is not None or p.ready is not None or (p.kind == "notes" and p.notes_done)


def candidate_state(conv: Conversation) -> tuple[str, str]:
    """This cycle's candidate as the decision sees it (compact.decision.decide): ("" | "running" |
    "ready" | "failed", its kind)."""
    p = preparer(conv)
    if p is None or p.cycle != _cycle(conv) or not p.kind:
        return "", ""
    if p.failed:
        return "failed", p.kind
    return ("ready" if candidate_ready(conv) else "running"), p.kind


def _kind(conv: Conversation, ports: Ports) -> str:
    """The kind of candidate this cycle would start (compact.compaction.backend's choice, asked ahead)."""
    if backend.server_expected(conv, ports):
        return "server"
    return "notes" if _notes_usable(conv, ports) else "summary"


def _start_server(conv: Conversation, ports: Ports, p: Preparer, plan: backend.ServerPlan) -> None:
    """The server's summary of the last request's messages, in a daemon thread (the documented recipe:
    summarize what was sent, keep working, replace exactly that when it returns)."""
    p.kind = "server"
    p.stats.prepared += 1
    before = _saw(conv, plan.sent[-1].uuid if plan.sent else None)  # its request is sent now
    p.start(
        _serve,
        conv,
        ports,
        p,
        plan.sent,
        server_summary.instructions(p.custom),
        before,
        timeout=CANDIDATE_TIMEOUT,
    )


def _serve(
    conv: Conversation,
    ports: Ports,
    p: Preparer,
    sent: list[Message],
    instructions: str | None,
    before: str | None = None,
) -> None:
    try:
        p.server_ready = server_summary.summarize(conv, ports, sent, [], instructions, cancel=p.cancel)
        p.seconds["server"] = p.clock() - p.started_at
    except Exception as e:  # noqa: BLE001 - a failed candidate costs this cycle's preparation, nothing else
        p.failed = failure(e)
        conv.summary_seen = before  # it read nothing for good: the clearing goes no further on its word


def _measure(p: Preparer, tokens: int) -> None:
    """One step between two responses. Its time and size are kept as a pair and the level reads their
    medians: one step far longer than the rest (the first after start-up, which waits for the SDK's
    import; one across a pause of the user's) moves neither, where smoothing the rate and the time apart
    multiplied the slow step's time by the fast steps' rate and put P at its floor (30-session-memory:
    a summary of 43K prepared and applied in a 167K threshold's first turn)."""
    now = p.clock()
    if p.last is not None:
        dt, grown = now - p.last[0], tokens - p.last[1]
        p.step = max(0, grown)
        if dt > 0 and grown > 0:  # a compaction in between shrank it: no measure
            p.steps.append((dt, grown))
    p.last = (now, tokens)


def _notes_usable(conv: Conversation, ports: Ports) -> bool:
    w = conv.workers.get("notes")
    return ports.config.notes_enabled and not (w is not None and getattr(w, "reported", False))


def _notes_done(p: Preparer, ok: bool) -> None:
    p.seconds["notes"] = p.clock() - p.started_at
    p.notes_done = True
    if not ok:
        p.failed = "the notes update failed"


def _discard(p: Preparer) -> None:
    if (p.ready is not None or p.server_ready is not None or p.kind == "notes") and not p.failed:
        p.stats.wasted += 1
    p.ready, p.server_ready, p.kind = None, None, ""


def _start_summary(conv: Conversation, ports: Ports, p: Preparer, custom: list[str]) -> None:
    """Snapshot the view on this thread; the request runs in a daemon thread."""
    with conv.lock:
        view = conv.view()
    seen_messages = list(view.messages)
    covers = len(seen_messages)
    while covers and seen_messages[covers - 1].role == "assistant" and seen_messages[covers - 1].tool_uses:
        covers -= 1  # calls still waiting for their results: seen, not covered
    if covers == 0:
        return
    request_messages = notes_updater._without_open_calls(list(view.tagged))
    seen = tuple((m.uuid, fingerprint(m)) for m in seen_messages)
    replaced = sum(m.tokens for m in seen_messages[:covers])
    p.kind, p.started_at = "summary", p.clock()
    p.stats.prepared += 1
    p.start(
        _summarize,
        conv,
        ports,
        p,
        request_messages,
        custom,
        seen,
        covers,
        replaced,
        timeout=CANDIDATE_TIMEOUT,
    )


def _saw(conv: Conversation, last: str | None) -> str | None:
    """A summary request is sent over the messages up to ``last`` (a uuid): it reads them whole, so the
    server's clearing may reach that far (compact.context.context_editing ``advance``). Returns what
    stood before (put back if the request fails: no later move then relies on it)."""
    before = conv.summary_seen
    if not last:
        return before
    with conv.lock:
        live = list(conv.messages)
    if coverage.covered_count(live, last) > coverage.covered_count(live, conv.summary_seen):
        conv.summary_seen = last
    return before


def _summarize(
    conv: Conversation,
    ports: Ports,
    p: Preparer,
    messages: list[Message],
    custom: list[str],
    seen: tuple[tuple[str, str], ...],
    covers: int,
    replaced: int,
    before: str | None = None,
) -> None:
    try:
        req = summary.summary_request(ports, messages, summary.build_instruction(custom))
        # no retry: a failure costs only this cycle's preparation and the compaction at T has its own
        # (retried in the background, a candidate stays in flight for the whole budget, and the
        # compaction it holds back is put off all that while)
        req.retry = "once"
        reply = ports.model.stream(req, cancel=p.cancel, emit_text=False)
        ports.account(reply)
        text = summary.check_reply(reply)
        if p.ready is not None:
            p.stats.wasted += 1  # a newer one replaces an older one, unused, when it completes
        p.ready = Candidate(
            method="summary",
            summary=text,
            seen=seen,
            covers=covers,
            replaced_tokens=replaced,
            stop_reason=reply.stop_reason,
            raw=reply.text,
            seconds=p.clock() - p.started_at,
            usage=dict(reply.usage or {}),
        )
        p.seconds["summary"] = p.ready.seconds
    except Exception as e:  # noqa: BLE001 - a failed candidate costs this cycle's preparation, nothing else
        p.failed = failure(e)
        conv.summary_seen = before  # it read nothing for good: the clearing goes no further on its word


# --- at T ------------------------------------------------------------------------------------------------


def at_threshold(
    conv: Conversation, ports: Ports, tokens: int, compact: Callable[..., bool], counted: int | None = None
) -> bool:
    """Compact at T from a prepared candidate when there is a usable one; True when the conversation was
    replaced. ``compact`` is compact.compaction.compactor.compact (passed in: the compactor calls back into us).
    ``tokens``: what the history weighs; ``counted``: what the server counts of it (less, when it clears
    old tool results: compact.context.context_editing) — the blocking limit holds that, so a compaction waiting
    for its candidate is put off while ``counted`` stays clear of B (and the history within RAW_ROOM
    windows: past it, a failed candidate's fallback would have too much to summarize)."""
    p = _preparer(conv)
    th = conv.window.thresholds()
    threshold, limit = th.auto_compact, _limit(conv)
    counted = tokens if counted is None else min(tokens, counted)
    clear = counted + max(p.step, (limit - threshold) // 4) < limit and tokens < RAW_ROOM * th.window
    cycle_ok = p.cycle == _cycle(conv)
    made = _usable(conv, ports, p) if cycle_ok else None
    if (
        made is not None
        and clear
        and p.kind == "notes"
        and p.caught_up != _cycle(conv)
        and _lagging(conv, ports, made)
    ):
        # what the notes never saw stays whole (nothing leaves unseen): when that is most of the tail,
        # bring the notes up to date first, in the background, while the context is clear of B. Once a
        # cycle: a session that grows faster than an update can follow lags again by the time it is in
        # (33-stall: 4 steps of 6.5K while an update ran), and chasing it again and again ran the
        # history to RAW_ROOM windows, where the user waited for the last one (6 s); the notes as they
        # stand then serve, the tail they never saw kept whole
        p.caught_up = _cycle(conv)
        _refresh(conv, ports, p, tokens)
        return False
    if (
        made is not None
        and clear
        and p.kind == "server"
        and _server_lagging(conv, p, made)
        and p.lagged != _cycle(conv)
    ):
        # the server's summary of an early request keeps everything sent since, verbatim: applied now it
        # would leave most of T (24-env-manual: 24.0K -> 24.2K at a 27K threshold, larger by the server's
        # count). Clear of B, it gives way to a summary of the next request sent, asked for after its
        # reply (start_if_due: a new cycle), which keeps that reply's step alone
        _discard(p)
        p.cycle, p.lagged = -1, _cycle(conv)  # once a cycle; the new one is waited for
        return False
    if made is not None:
        return _apply(conv, ports, p, made, compact, waited=0.0)
    in_flight = cycle_ok and (p.running or (p.kind == "notes" and not p.notes_done))
    # the one a lagging server's summary gave way to in this cycle is waited for
    awaited = in_flight and p.kind == "server" and p.lagged == _cycle(conv)
    if in_flight and clear and not awaited:
        return False  # not ready yet and still clear of B: carry on, it will be soon
    if in_flight and not awaited and counted < limit and tokens < RAW_ROOM * th.window:
        # this request still fits under B: it goes, and the first one that would not fit waits for the
        # candidate if it must — a step's time less than waiting here, and the same step kept either way
        # (33-stall --rules 2026: the user waited 2.7 s here for a summary the next request would have
        # waited 0.6 s for; waiting here only when it was due within a step still cost the rest)
        return False
    if clear and counted < tokens and active(conv, ports) and not (cycle_ok and p.failed) and not awaited:
        # none started yet (the server's summary needs a request sent since the last compaction point),
        # and the server clears what keeps it clear of B: start one after the next response, not the
        # user's wait now
        return False
    if in_flight:
        waited = _wait(conv, ports, p)
        made = _usable(conv, ports, p)
        if made is not None:
            return _apply(conv, ports, p, made, compact, waited=waited)
    note = f"prepared candidate refused: {p.last_rejected}" if p.last_rejected and cycle_ok else ""
    if cycle_ok and (p.ready is not None or p.kind):
        _discard(p)
    started = p.clock()
    done = compact(conv, ports, "auto", note=note)
    p.stats.waited.append(p.clock() - started)
    p.stats.blocked.append(p.stats.waited[-1])  # its own request, mostly
    return done


def apply_ready(conv: Conversation, ports: Ports, compact: Callable[..., bool]) -> bool:
    """An early compaction (compact.decision.decide): this cycle's completed candidate, applied if it
    passes its checks; True when the conversation was replaced. Nothing runs in its place: a refused one
    is recorded, and the decision is made again at the next request — no foreground compaction, no wait."""
    p = _preparer(conv)
    if p.cycle != _cycle(conv):
        return False
    made = _usable(conv, ports, p)
    if made is None:
        return False
    if p.kind == "notes" and 2 * notes_compaction.leaves(conv, ports, made) > conv.view().raw_tokens:
        return False  # the notes cover too little yet to free half: the decision is made again next time
    return _apply(conv, ports, p, made, compact, waited=0.0)


def _lagging(conv: Conversation, ports: Ports, made: Compaction) -> bool:
    """A notes compaction would leave more than LAGGING_SHARE of T: the notes cover too little of the
    recent tail, whose results no update saw and which it keeps whole."""
    threshold = conv.window.thresholds().auto_compact
    return notes_compaction.leaves(conv, ports, made) > threshold * LAGGING_SHARE


def _server_lagging(conv: Conversation, p: Preparer, made: Compaction) -> bool:
    """Whether the prepared server's summary lags: its kept turns weigh more than LAGGING_SHARE of T and
    more than the one step a summary of the next request keeps, and the server's summaries were
    measured to take no longer than QUICK_STEPS steps' time: that one is waited for at the next request
    for a fraction of a step. A slower one would keep as much by the time it is in and keep the user
    waiting (issue 31's stall): then the prepared one is applied."""
    seconds = p.seconds.get("server")
    if seconds is None or p.step_seconds <= 0 or seconds > QUICK_STEPS * p.step_seconds:
        return False
    threshold = conv.window.thresholds().auto_compact
    kept = conv.calibration.scale(sum(m.tokens for m in made.kept))  # the server's unit, as T
    steps = sum(1 for m in made.kept if m.role == "assistant")
    return kept > threshold * LAGGING_SHARE and steps > 1


def _limit(conv: Conversation) -> int:
    """How far a compaction may be put off: the blocking limit, at most DEFER_ROOM past T."""
    th = conv.window.thresholds()
    return min(th.blocking, th.auto_compact + DEFER_ROOM)


def _wait(conv: Conversation, ports: Ports, p: Preparer) -> float:
    """Wait (Ctrl-C ends it) for the candidate in flight; the seconds waited."""
    started = p.clock()
    ports.emit(Notice(WAIT_NOTICE.format(s=max(0.0, started - p.started_at)), "info"))
    worker = p if p.kind in ("summary", "server") else conv.workers.get("notes")
    while isinstance(worker, Worker) and worker.busy and not conv.cancel.is_set():
        if p.kind == "notes" and p.notes_done:
            break  # its edits and marker are in; the thread only winds down
        worker.join(0.02)
    return p.clock() - started


def finish_soon(conv: Conversation, limit: float) -> float:
    """Before an early compaction: wait for this cycle's candidate in flight (the notes update or the
    server's summary) when it is expected to end within ``limit`` seconds by its kind's measured time (the
    first of a kind: not known, tried) — and at most that long (Ctrl-C ends it). Its call is paid for already;
    applied one request later, the result read meanwhile stays whole in the kept tail, unseen by it, and
    is written to the cache once more. The seconds waited (0 when it is not expected to end that soon)."""
    p = _preparer(conv)
    if p.cycle != _cycle(conv) or p.kind not in ("notes", "server") or p.failed or candidate_ready(conv):
        return 0.0
    started = p.clock()
    expected = p.seconds.get(p.kind)
    if expected is not None and expected - (started - p.started_at) > limit:
        return 0.0
    worker = p if p.kind == "server" else conv.workers.get("notes")
    while (
        isinstance(worker, Worker)
        and worker.busy
        and not candidate_ready(conv)
        and not conv.cancel.is_set()
        and p.clock() - started < limit
    ):
        worker.join(min(0.02, max(0.0, limit - (p.clock() - started))))
    return p.clock() - started


def _usable(conv: Conversation, ports: Ports, p: Preparer) -> Compaction | None:
    """The compaction the cycle's completed candidate gives now, checked; None when there is none (a
    refused one is recorded in ``last_rejected`` and counted)."""
    made = None
    if p.kind == "server" and p.server_ready is not None:
        made = _from_server(conv, p, p.server_ready)
    elif p.kind == "summary" and p.ready is not None:  # the newest completed one (a newer may be running)
        made = _from_summary(conv, ports, p, p.ready)
    elif p.kind == "notes" and p.notes_done and not p.failed:
        made = _from_notes(conv, ports, p)
    if made is not None and not backend.keeps_thinking_valid(made):
        _reject(p, "its kept turns end in a tool loop whose thinking a summary written here would invalidate")
        return None
    return made


def _reject(p: Preparer, reason: str) -> None:
    p.last_rejected = reason
    p.stats.rejected += 1
    p.ready, p.server_ready, p.kind, p.failed = None, None, "", reason


def _from_summary(conv: Conversation, ports: Ports, p: Preparer, c: Candidate) -> Compaction | None:
    with conv.lock:
        view = conv.view()
        live = list(conv.messages)
    n = still_covered(c, view.messages, _stands_in(p, c))
    if n == 0:
        _reject(p, "the messages it covered changed meanwhile")
        return None
    covered = view.messages[:n]
    said = ledger.derive(live, "").prompts  # what the user typed, never an earlier summary
    reason = validate(
        c, required=REQUIRED_SUMMARY_SECTIONS, user_texts=said, replaced_tokens=sum(m.tokens for m in covered)
    )
    if reason:
        _reject(p, reason)
        return None
    # from here on the rule is the notes' one (compact.context.coverage): the last message it still covers is
    # its "summarized up to here"; only what comes before may go, everything after stays verbatim
    marker = covered[-1].uuid
    first_uncovered = coverage.covered_count(live, marker)
    scale = notes_compaction.window_scale(conv.window.thresholds().auto_compact)
    start = notes_compaction.kept_start(
        live,
        first_uncovered,
        min_tokens=int(notes_compaction.KEEP_MIN_TOKENS * scale),
        max_tokens=int(notes_compaction.KEEP_MAX_TOKENS * scale),
    )
    if first_uncovered == 0 or start == 0 or coverage.uncovered_before(live, start, marker):
        _reject(p, "the messages it covered are gone")
        return None
    kept = live[start:]
    segment = {"headUuid": kept[0].uuid, "anchorUuid": "", "tailUuid": kept[-1].uuid} if kept else None
    return Compaction(
        method="summary",
        summary=c.summary,
        kept=kept,
        preserved_segment=segment,
        usage=c.usage,
        seen_through=marker,
    )


def _from_server(conv: Conversation, p: Preparer, made: Compaction) -> Compaction | None:
    """The server's block in place of exactly the messages it summarized; everything after them kept."""
    with conv.lock:
        live = list(conv.messages)
    last = made.summarized[-1] if made.summarized else None
    at = next((i for i in range(len(live) - 1, -1, -1) if live[i].uuid == last), None)
    if at is None or at + 1 >= len(live) or live[at + 1].role != "assistant":
        _reject(p, "the messages it summarized are gone")
        return None
    if p.sent_prints and not _sent_as_summarized(conv, p):
        _reject(p, "the request it was started with went out changed")
        return None
    return dataclasses.replace(made, kept=live[at + 1 :])


def _sent_as_summarized(conv: Conversation, p: Preparer) -> bool:
    """The server's summary started with a request (``start_with``): the last request sent begins with
    exactly what it summarized (between compaction points each request extends the one before)."""
    ctx = conv.view_ctx
    sent = ctx.sent_tagged if ctx is not None else None
    if not sent or len(sent) < len(p.sent_prints):
        return False
    return tuple(fingerprint(m) for m in sent[: len(p.sent_prints)]) == p.sent_prints


def _stands_in(p: Preparer, c: Candidate) -> frozenset[str]:
    """What the compaction applied while ``c`` was prepared added in place of messages ``c`` saw all
    of (its summary, its attachments, rebuilt at every compaction): ``c`` may replace those too."""
    if p.rebase is None:
        return frozenset()
    added, dropped = p.rebase
    seen = {u for u, _ in c.seen}
    return added if dropped <= seen else frozenset()


def _from_notes(conv: Conversation, ports: Ports, p: Preparer) -> Compaction | None:
    made = _notes_plan(conv, ports)
    if made is None:
        return None  # the summary path of this cycle takes over (start_if_due)
    required = [section_name(h) for h in headers(template_for(ports))]
    with conv.lock:
        kept_from = len(conv.messages) - len(made.kept)
        replaced = sum(m.tokens for m in conv.messages[:kept_from])
        live = list(conv.messages)
    c = Candidate("session-memory", made.summary, (), 0, replaced)
    said = ledger.derive(live, "").prompts
    reason = validate(c, required=required, user_texts=said, template=template_for(ports))
    if reason:
        _reject(p, reason)
        return None
    return made


def _notes_plan(conv: Conversation, ports: Ports) -> Compaction | None:
    try:
        return notes_compaction.plan(conv, ports, share=PREPARED_SHARE)
    except OSError:
        return None


def _apply(
    conv: Conversation,
    ports: Ports,
    p: Preparer,
    made: Compaction,
    compact: Callable[..., bool],
    waited: float,
) -> bool:
    started = p.clock()
    before = {m.uuid for m in conv.messages}
    done = compact(conv, ports, "auto", prepared=made, note=PREPARED, waited=waited, hooked=p.hook_lines)
    p.stats.waited.append(waited + p.clock() - started)
    p.stats.blocked.append(waited)
    if done:
        p.stats.applied += 1
        p.ready, p.server_ready, p.kind, p.last_rejected = None, None, "", ""
        if p.running:  # a summary still in flight becomes the new cycle's candidate
            after = {m.uuid for m in conv.messages}
            kept = {m.uuid for m in made.kept}
            p.cycle, p.kind = _cycle(conv), "summary"
            p.rebase = (frozenset(after - before), frozenset(before - kept))
        else:
            _start_next(conv, ports, p)
    return done


def _start_next(conv: Conversation, ports: Ports, p: Preparer) -> None:
    """Start the next cycle's candidate at once when the compaction left the context at its level
    already (a session growing fast at a small window: its summary needs every step it can get), not
    one response later. The server's summary needs a request: it starts after the next response, or,
    when that is predicted to keep a request waiting more than RACE_WAIT, with the compaction request
    itself (``start_with``)."""
    tokens = conv.view().tokens
    kind = _kind(conv, ports)
    if kind == "server" and backend.server_plan(conv, ports) is None:
        p.with_request = _race_lost(conv, ports, p)
        return
    if tokens >= level(p, conv.window.thresholds().auto_compact, _limit(conv), kind):
        _start(conv, ports, p, tokens)


def _race_lost(conv: Conversation, ports: Ports, p: Preparer) -> bool:
    """At a compaction point whose next candidate is the server's summary: whether, started after the
    compaction request's reply, it is expected (by its measured time) to be in more than RACE_WAIT after
    the first request that would pass the limit is due — which would wait for it that long. Measured:
    the usual step's time and growth, the server's summary's time, and what the compaction request
    leaves once the server's clearing moves as far as that summary lets it (all but the newest results).
    The first request after the compaction point is step 1; the candidate started after its reply is in
    one step plus its time later. Nothing measured: not lost (it starts after the reply, as before)."""
    took, step, grown = p.seconds.get("server"), p.step_seconds, p.step_tokens
    if took is None or step <= 0 or grown <= 0:
        return False
    view = conv.view()
    at = view.tokens
    if context_editing.automatic_on(ports):
        # once the summary has read the compaction request, the next request's clearing reaches all of
        # its results but the newest (counted here as kept beside that request's own new result: about
        # one result more than the server will count, so a close race counts as lost)
        msgs, point = view.messages, conv.state.server_clear_through
        moved = context_editing.advance(
            msgs,
            point,
            at,
            conv.window.thresholds().auto_compact,
            ports.config.keep_recent,
            rewritten=True,
            seen=len(msgs),
        )
        freed = context_editing.clearable_tokens(msgs, moved) - context_editing.clearable_tokens(msgs, point)
        at -= conv.calibration.scale(max(0, freed))
    # the steps that fit under the limit after the compaction request: the first that would not fit
    # waits for the candidate if it is not in (at_threshold)
    fit = max(0, int((_limit(conv) - 1 - at) // grown))
    return step + took - (fit + 1) * step > RACE_WAIT


def start_with(conv: Conversation, ports: Ports, sent: list[Message]) -> bool:
    """The compaction request after a compaction is about to be sent over ``sent`` (its messages, tagged):
    when this cycle's server's summary started after its reply was predicted to keep a request waiting
    (``_race_lost``), start it now, over exactly those messages — one step earlier. Its prefix is not in
    the prompt cache yet (the compaction request writes it, and a cache entry serves only once a
    response has begun): one more write of it, paid only where the user would otherwise wait. True when
    it started."""
    p = preparer(conv)
    if p is None or not p.with_request:
        return False
    p.with_request = False
    if p.running or p.cycle == _cycle(conv) or not sent or not active(conv, ports) or conv.compacting:
        return False
    if not backend.server_expected(conv, ports):
        return False
    _start(conv, ports, p, conv.view().raw_tokens, plan=backend.ServerPlan(list(sent), []))
    p.sent_prints = tuple(fingerprint(m) for m in sent)
    return True


def describe(conv: Conversation, ports: Ports) -> str:
    """One line for /context: whether a candidate is ready and what it covers."""
    p = preparer(conv)
    if not active(conv, ports):
        return ""
    if p is None:
        return "Prepared compaction: none yet"
    if p.cycle == _cycle(conv) and p.kind == "server" and p.server_ready is not None:
        return f"Prepared compaction: the server's summary, ready · covers {len(p.server_ready.summarized)} messages"
    if p.cycle == _cycle(conv) and p.kind == "summary" and p.ready is not None:
        c = p.ready
        return f"Prepared compaction: a summary, ready · covers {c.covers} messages ({c.replaced_tokens:,} tokens)"
    if p.cycle == _cycle(conv) and (p.running or (p.kind == "notes" and not p.notes_done)):
        what = {"notes": "notes update", "server": "server's summary"}.get(p.kind, "summary")
        return f"Prepared compaction: a {what} in progress"
    if p.cycle == _cycle(conv) and p.kind == "notes":
        marker = conv.state.last_summarized_uuid
        return f"Prepared compaction: the session notes, ready · cover up to message {marker or '-'}"
    refused = f" · last one refused: {p.last_rejected}" if p.last_rejected else ""
    return f"Prepared compaction: none yet{refused}"


def stats(conv: Conversation) -> dict[str, Any]:
    p = preparer(conv)
    return vars(p.stats) if p is not None else vars(Stats())
