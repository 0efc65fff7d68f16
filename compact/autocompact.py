"""Auto-compact: compact before a model call once the context reaches the threshold T (SPEC §6).

Triggers: every model call of the main conversation (tool loops included), when auto-compact is on
and the context is at or over T (compact.thresholds). Never inside a side request.
Skips: after 3 consecutive failed automatic compactions (the circuit breaker; said once, reset by any
success), and when nothing was added since the last compaction (compacting the same content again
would only fail again).
Drops / keeps / writes: as compact.compactor. Model calls: those of one compaction, or none when a
candidate prepared in the background (compact.preparer) is applied.
"""

from __future__ import annotations

from compact import compactor, preparer
from compact.conversation import Conversation, Ports
from core.events import Notice

MAX_FAILURES = 3
BREAKER_NOTICE = (
    "Auto-compact failed {n} times in a row, so it is off for the rest of this session. "
    "Run /compact to try again, or /clear to start afresh."
)


def should_compact(
    tokens: int,
    threshold: int,
    *,
    enabled: bool = True,
    failures: int = 0,
    new_content: bool = True,
    max_failures: int = MAX_FAILURES,
) -> bool:
    """Whether an automatic compaction should run now (pure; the policy in one place)."""
    return enabled and tokens >= threshold and failures < max_failures and new_content


def maybe_autocompact(conv: Conversation, ports: Ports, tokens: int) -> bool:
    """Compact when the policy says so; True when the conversation was replaced."""
    if not ports.config.auto_enabled or conv.compacting:
        return False
    threshold = ports.thresholds().auto_compact
    if tokens < threshold:
        return False
    if conv.compact_failures >= MAX_FAILURES:
        if not conv.compact_failures_reported:
            conv.compact_failures_reported = True
            ports.emit(Notice(BREAKER_NOTICE.format(n=conv.compact_failures), "warning"))
        return False
    if not should_compact(
        tokens,
        threshold,
        failures=conv.compact_failures,
        new_content=not compactor.nothing_new_since_compaction(conv),
    ):
        return False
    # a candidate prepared in the background when there is one; the foreground compaction otherwise
    return preparer.at_threshold(conv, ports, tokens, compactor.compact)
