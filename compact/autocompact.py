"""Auto-compact: whether to compact before a model call, the whole policy in one place (SPEC §6).

Triggers: every model call of the main conversation (tool loops included), never inside a side request
or while a compaction runs:
  auto-compact on      the context at or over the threshold T (compact.decision.thresholds), or, with cost-aware
                       compaction (on by default), over the point where a reset pays for itself by the
                       prompt cache's arithmetic (compact.compaction.economics; never below 25% of T);
  context collapse on  (auto-compact is then off) the view at the blocking limit, or over T with nothing
                       collapse could take (one long turn has no old spans): compacting at T then beats
                       carrying a view over T up to the blocking limit (benchmarks/cost.py).
Skips: while the circuit breaker is open (compact.decision.breaker: 3 failures in a row; said once), and when
nothing was added since the last compaction (compacting the same content again would only fail again).
Drops / keeps / writes: as compact.compaction.compactor. Model calls: those of one compaction, or none when a
candidate prepared in the background (compact.workers.preparer) is applied.
"""

from __future__ import annotations

from compact.compaction import backend, compactor, economics, notes_compaction
from compact.context.conversation import Conversation, Ports
from compact.decision import thresholds
from compact.decision.breaker import MAX_FAILURES
from compact.workers import preparer
from compact.workers.collapse_worker import collapser
from core.messages import Message


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


def threshold_reached(conv: Conversation, ports: Ports, tokens: int) -> bool:
    """Auto-compact is on, no compaction is running, and ``tokens`` reach the compaction point (T, or
    earlier where a reset pays for itself: ``point``)."""
    if not ports.config.auto_enabled or conv.compacting:
        return False
    th = ports.thresholds().auto_compact
    if tokens >= th:
        return True
    return ports.config.cost_aware and (early(conv, ports, tokens) or at_boundary(conv, ports, tokens))


def early(conv: Conversation, ports: Ports, tokens: int) -> bool:
    """A compaction before T pays for itself (compact.compaction.economics) and needs no call made now: the notes are
    current, or this cycle's candidate is prepared or being prepared (compact.workers.preparer applies it when it
    is ready). Otherwise the preparation starts first: a compaction in the foreground here would pay for
    a call the arithmetic did not count (a fold of the notes, a summary) and make the user wait."""
    kind = "notes-current" if preparer.candidate_ready(conv) else next_kind(conv, ports)  # paid for: no call
    if kind != "notes-current" and not preparer.has_candidate(conv):
        return False
    return tokens >= economics.point(conv, ports, kind, ports.thresholds().auto_compact)


def at_boundary(conv: Conversation, ports: Ports, tokens: int) -> bool:
    """On a model that keeps its thinking, a turn boundary where the notes cover everything before the
    new prompt, past BOUNDARY_SHARE of T (or the point where a compaction pays): compacting here from the
    notes keeps no turn that holds thinking and makes no call, where the compaction the coming turn would
    reach otherwise is the server's summary, priced as an uncached read of the whole context."""
    if not ports.config.cost_aware or not backend.server_expected(conv, ports):
        return False
    th = ports.thresholds().auto_compact
    if tokens < min(th * economics.BOUNDARY_SHARE, economics.point(conv, ports, "notes-current", th)):
        return False
    return notes_compaction.bare(conv, ports) is not None


def next_kind(conv: Conversation, ports: Ports) -> str:
    """The kind of call the next automatic compaction makes, as compact.compaction.economics prices it: the server's
    summary where kept turns hold thinking, the notes (with no call when they are current already), else
    the local summary."""
    if backend.server_expected(conv, ports):
        return "server"
    if not ports.config.notes_enabled:
        return "summary"
    return "notes-current" if notes_compaction.plan(conv, ports) is not None else "notes"


def due(conv: Conversation, ports: Ports, tokens: int, view: list[Message] | None = None) -> bool:
    """Whether an automatic compaction runs now, for a view of ``tokens`` (its ``messages`` when collapse
    is on); the breaker's notice is emitted here, the first time it is found open."""
    c = ports.config
    th = ports.thresholds()
    if c.auto_enabled:
        if not threshold_reached(conv, ports, tokens):
            return False
        if conv.breaker.open:
            conv.breaker.say_once(ports.emit)
            return False
    elif not c.context_collapse or c.disable_compact:
        return False
    elif thresholds.level(tokens, th).blocking:
        return True
    elif tokens < th.auto_compact:
        return False
    else:
        worker = collapser(conv)
        if worker is None or worker.can_help(view or []):
            return False
    return should_compact(
        max(tokens, th.auto_compact) if c.auto_enabled else tokens,  # at T or at the point (just checked)
        th.auto_compact,
        failures=conv.breaker.failures,
        new_content=not compactor.nothing_new_since_compaction(conv),
    )


def maybe_autocompact(
    conv: Conversation,
    ports: Ports,
    tokens: int,
    view: list[Message] | None = None,
    counted: int | None = None,
) -> bool:
    """Compact when the policy says so; True when the conversation was replaced. With auto-compact on, a
    candidate prepared in the background is applied when there is one (compact.workers.preparer: no model
    call, or the compaction put off while it is still being prepared); the foreground one otherwise.
    ``tokens`` is what the history weighs as kept; ``counted``, what the server counts of it (less when
    it clears old tool results), decides how long a compaction may be put off."""
    if not due(conv, ports, tokens, view):
        return False
    if ports.config.auto_enabled and at_boundary(conv, ports, tokens):
        return compactor.compact(conv, ports, "auto")  # from the notes, now: no call, no one waits
    if ports.config.auto_enabled:
        return preparer.at_threshold(conv, ports, tokens, compactor.compact, counted=counted)
    return compactor.compact(conv, ports, "auto")
