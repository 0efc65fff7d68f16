"""Auto-compact thresholds and the warning state (docs/compaction.md). Pure arithmetic, no I/O.

W  context window (Models API, else table), capped by CLAUDE_CODE_AUTO_COMPACT_WINDOW
E  effective window  = W − min(max output tokens, 20,000)
T  auto-compact      = E − 13,000, or min(⌊E·p/100⌋, T) with CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=p
warning shown from T − 20,000 (error colour from T − 10,000), blocking B = E − 3,000
When auto-compact is off, E takes T's place in the warning math.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.events import TokenState

SUMMARY_OUTPUT_RESERVE = 20_000
AUTOCOMPACT_BUFFER = 13_000
WARNING_BUFFER = 20_000
ERROR_BUFFER = 10_000
BLOCKING_BUFFER = 3_000
# the least auto-compact threshold worth running with: a compacted conversation (system prompt, tools,
# summary, restored files) must fit under it with room to work, or every request would compact again
MIN_AUTO_COMPACT = 10_000


@dataclass(frozen=True)
class Thresholds:
    window: int
    effective: int
    auto_compact: int
    warning: int
    error: int
    blocking: int
    auto_enabled: bool

    @property
    def reference(self) -> int:
        """The number percentages are taken against: T when auto-compact is on, else E."""
        return self.auto_compact if self.auto_enabled else self.effective


def compute(
    window: int,
    max_output: int,
    *,
    window_cap: int | None = None,
    pct: float | None = None,
    blocking_override: int | None = None,
    auto_enabled: bool = True,
) -> Thresholds:
    w = min(window, window_cap) if window_cap else window
    effective = w - min(max_output, SUMMARY_OUTPUT_RESERVE)
    auto = effective - AUTOCOMPACT_BUFFER
    if pct is not None and 0 < pct <= 100:
        auto = min(int(effective * pct / 100), auto)
    reference = auto if auto_enabled else effective
    blocking = blocking_override if blocking_override else effective - BLOCKING_BUFFER
    return Thresholds(
        window=w,
        effective=effective,
        auto_compact=auto,
        warning=reference - WARNING_BUFFER,
        error=reference - ERROR_BUFFER,
        blocking=blocking,
        auto_enabled=auto_enabled,
    )


def smallest_window() -> int:
    """The smallest window cap that leaves T >= MIN_AUTO_COMPACT whatever the model's output reserve."""
    return SUMMARY_OUTPUT_RESERVE + AUTOCOMPACT_BUFFER + MIN_AUTO_COMPACT


@dataclass(frozen=True)
class Level:
    tokens: int
    percent_left: int
    warning: bool
    error: bool
    blocking: bool
    over_auto: bool


def level(tokens: int, th: Thresholds) -> Level:
    ref = th.reference
    percent = max(0, round((ref - tokens) / ref * 100)) if ref > 0 else 0
    return Level(
        tokens=tokens,
        percent_left=percent,
        warning=tokens >= th.warning,
        error=tokens >= th.error,
        blocking=tokens >= th.blocking,
        over_auto=th.auto_enabled and tokens >= th.auto_compact,
    )


def token_state(tokens: int, th: Thresholds) -> TokenState:
    """The warning bar's numbers for a count of ``tokens`` (the TokenState event)."""
    lv = level(tokens, th)
    return TokenState(
        tokens=tokens,
        window=th.window,
        threshold=th.auto_compact,
        warning=lv.warning,
        error=lv.error,
        blocking=lv.blocking,
        percent_left=lv.percent_left,
        auto_compact=th.auto_enabled,
    )


def warning_text(lv: Level, th: Thresholds) -> str:
    """The line under the input; empty below the warning level."""
    if lv.blocking:
        return "Context limit reached · /compact or /clear to continue"
    if not lv.warning:
        return ""
    if th.auto_enabled:
        return f"Context left until auto-compact: {lv.percent_left}%"
    return f"Context low ({lv.percent_left}% remaining) · Run /compact to compact & continue"


REFERENCE_THRESHOLD = 167_000  # T of a 200K window: the budgets of compaction's parts are sized for it


def window_scale(threshold: int) -> float:
    """How a budget sized for the reference window shrinks with T (never growing past the reference)."""
    return max(0.0, min(1.0, threshold / REFERENCE_THRESHOLD))
