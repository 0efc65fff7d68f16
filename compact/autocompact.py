"""Auto-compact: the executor of the one decision (compact.decision.decide) before every main request.

Triggers: every model call of the main conversation (tool loops included), never inside a side request
or while a compaction runs. ``facts`` gathers what the decision is made from — the context as the
history weighs it, the window's thresholds (compact.decision.window: compaction's own), the breaker,
the backend the next compaction would use (compact.compaction.backend), whether the notes are current,
this cycle's prepared candidate (compact.workers.preparer), where a compaction with no call pays for
itself (compact.compaction.economics) — and ``decide`` says what happens and why:
  early     below T, no call: from the notes as they are (``notes_compaction.plan``), at a turn
            boundary they cover (``bare``), or the prepared notes / server's summary applied; a
            candidate refused at its checks leaves the conversation as it is. Past the point where the
            prepared one pays, while it is in flight and expected to end within EARLY_WAIT, the request
            waits for it that long at most (preparer.finish_soon) — never below a threshold the user set
  at T      the prepared candidate when usable, else put off while it is prepared and the request still
            fits under the blocking limit, else the foreground compaction (compact.compaction.compactor)
  context collapse on (auto-compact then off): at the blocking limit, or over T with nothing collapse
            could take.
The decision goes with the compaction (``conv.decision``): the compactor records it on the boundary and
shows an early one's reason. Drops / keeps / writes: as compact.compaction.compactor. Model calls: those
of one compaction at T, none for an early one.
"""

from __future__ import annotations

from compact.compaction import backend, compactor, economics, notes_compaction
from compact.context.conversation import Conversation, Ports
from compact.decision.breaker import MAX_FAILURES
from compact.decision.decide import EARLY, EARLY_PREPARED, Decision, Facts, decide
from compact.workers import preparer
from compact.workers.collapse_worker import collapser
from core.messages import Message

# seconds an early compaction waits, at most, for its prepared candidate when that is about to end
# (compact.workers.preparer.finish_soon); never below a threshold the user set
EARLY_WAIT = 1.0


def should_compact(
    tokens: int,
    threshold: int,
    *,
    enabled: bool = True,
    failures: int = 0,
    new_content: bool = True,
    max_failures: int = MAX_FAILURES,
) -> bool:
    """The pure core of the policy: at or over T, breaker closed, something new to compact."""
    return enabled and tokens >= threshold and failures < max_failures and new_content


def facts(
    conv: Conversation,
    ports: Ports,
    tokens: int,
    view: list[Message] | None = None,
) -> Facts:
    """What the decision before a request is made from (see compact.decision.decide.Facts)."""
    c, window = ports.config, conv.window
    th = window.thresholds()
    kind = next_kind(conv, ports) if c.auto_enabled or c.context_collapse else "summary"
    if kind == "notes-current" and c.cost_aware and tokens < th.auto_compact:
        made = notes_compaction.plan(conv, ports)
        if made is None or 2 * notes_compaction.leaves(conv, ports, made) > tokens:
            kind = "notes"  # below T the notes serve only a compaction that frees half: they cover too little yet
    state = preparer.candidate_state(conv)
    paid = boundary_point = post = left = 0
    boundary = False
    if c.auto_enabled and c.cost_aware and not conv.compacting:
        paid = economics.point(conv, ports, "notes-current", th.auto_compact)
        post, left = economics.post_estimate(conv, th.auto_compact)[0], economics.requests_left(conv)
        if backend.server_expected(conv, ports):
            boundary_point = min(int(th.auto_compact * economics.BOUNDARY_SHARE), paid)
            boundary = tokens >= boundary_point and notes_compaction.bare(conv, ports) is not None
    can_help = True
    if c.context_collapse and not c.auto_enabled:
        worker = collapser(conv)
        can_help = worker is not None and worker.can_help(view or [])
    return Facts(
        tokens=tokens,
        threshold=th.auto_compact,
        blocking=th.blocking,
        auto=c.auto_enabled,
        collapse=c.context_collapse and not c.disable_compact,
        collapse_can_help=can_help,
        disabled=c.disable_compact,
        compacting=conv.compacting,
        breaker_open=conv.breaker.open,
        new_content=not compactor.nothing_new_since_compaction(conv),
        cost_aware=c.cost_aware,
        backend="notes" if kind == "notes-current" else kind,
        notes_current=kind == "notes-current",
        candidate=state[0],
        candidate_kind=state[1],
        paid_point=paid,
        boundary=boundary,
        boundary_point=boundary_point,
        post=post,
        left=left,
        user_threshold=window.user_set,
    )


def decision(conv: Conversation, ports: Ports, tokens: int, view: list[Message] | None = None) -> Decision:
    """The one decision for a context of ``tokens`` (compact.decision.decide)."""
    return decide(facts(conv, ports, tokens, view))


def threshold_reached(conv: Conversation, ports: Ports, tokens: int) -> bool:
    """Whether the decision for ``tokens`` is to compact now (auto-compact on)."""
    return ports.config.auto_enabled and decision(conv, ports, tokens).compacts


def next_kind(conv: Conversation, ports: Ports) -> str:
    """The kind of call the next automatic compaction makes, as compact.compaction.economics prices it: the server's
    summary where kept turns hold thinking, the notes (with no call when they are current already), else
    the local summary."""
    if backend.server_expected(conv, ports):
        return "server"
    if not ports.config.notes_enabled:
        return "summary"
    return "notes-current" if notes_compaction.plan(conv, ports) is not None else "notes"


def maybe_autocompact(
    conv: Conversation,
    ports: Ports,
    tokens: int,
    view: list[Message] | None = None,
    counted: int | None = None,
) -> bool:
    """Run what the decision says; True when the conversation was replaced. ``tokens`` is what the
    history weighs as kept; ``counted``, what the server counts of it (less when it clears old tool
    results), decides how long a compaction at T may be put off."""
    d = decision(conv, ports, tokens, view)
    if _worth_a_moment(conv, ports, d) and preparer.finish_soon(conv, EARLY_WAIT):
        d = decision(conv, ports, tokens, view)
    if d.source == "breaker" and tokens >= conv.window.thresholds().auto_compact:
        conv.breaker.say_once(ports.emit)
    if not d.compacts:
        return False
    conv.decision = d
    try:
        return _run(conv, ports, d, tokens, counted)
    finally:
        conv.decision = None


def _worth_a_moment(conv: Conversation, ports: Ports, d: Decision) -> bool:
    """Nothing now, below T, past the point from which a prepared candidate pays, while it is in flight,
    and the user set no threshold (below theirs nobody waits)."""
    if (
        d.compacts
        or d.source == "breaker"
        or not d.point
        or d.tokens >= conv.window.thresholds().auto_compact
    ):
        return False
    if conv.window.user_set or not ports.config.cost_aware:
        return False
    state, kind = preparer.candidate_state(conv)
    return state == "running" and kind in EARLY_PREPARED and d.tokens >= d.point


def _run(conv: Conversation, ports: Ports, d: Decision, tokens: int, counted: int | None) -> bool:
    if d.source == "boundary" or d.action == EARLY:
        if d.source == "prepared":
            return preparer.apply_ready(conv, ports, compactor.compact)
        made = (
            notes_compaction.bare(conv, ports)
            if d.source == "boundary"
            else notes_compaction.plan(conv, ports)
        )
        # no call and no wait: the notes as they are, or nothing
        return made is not None and compactor.compact(conv, ports, "auto", prepared=made, calls=False)
    if ports.config.auto_enabled:
        return preparer.at_threshold(conv, ports, tokens, compactor.compact, counted=counted)
    return compactor.compact(conv, ports, "auto")
