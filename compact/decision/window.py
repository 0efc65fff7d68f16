"""The window compaction works in, and its thresholds, owned here (issue 37 item 2).

Followed from its settings: the model's window (the Models API, else the table: ``model_window``, a
fact about the model the session gives, as it gives the model's name) is capped by
``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` (``CompactConfig.context_window``) and lowered by what a
prompt-too-long answer taught (``learn``); the model's output reserve, ``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``
(``autocompact_pct``), the blocking override and auto-compact on or off then give the thresholds
(compact.decision.thresholds.compute). Every part of compaction asks ``Window.thresholds()`` — the
conversation holds its window (compact.start builds it from the ports' model facts and the one
``CompactConfig``) — and the session asks it too, for the warning bar: nobody hands compaction its
thresholds.

A threshold the user set (the percentage, or a window cap below the model's) is a promise
(``user_set``): below it no local summary runs and nobody waits (compact.decision.decide).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from compact.decision.config import CompactConfig
from compact.decision.thresholds import Thresholds, compute


def _default_window() -> int:
    return 200_000


def _default_output() -> int:
    return 32_000


@dataclass
class Window:
    """One conversation's window: the model's facts (callables: ``/model`` may switch the model), the
    settings, and a lower limit the server told us about."""

    config: CompactConfig
    model_window: Callable[[], int] = _default_window
    max_output: Callable[[], int] = _default_output
    learned: int | None = None  # a smaller window a prompt-too-long answer gave (compact.request_cycle)

    def size(self) -> int:
        """The model's window, or less when the conversation learned a lower limit."""
        full = self.model_window()
        return min(full, self.learned) if self.learned else full

    def thresholds(self) -> Thresholds:
        c = self.config
        return compute(
            self.size(),
            self.max_output(),
            window_cap=c.context_window,
            pct=c.autocompact_pct,
            blocking_override=c.blocking_limit,
            auto_enabled=c.auto_enabled,
        )

    def learn(self, maximum: int | None) -> bool:
        """Take a limit the server reported as the window from now on; True when it lowered it."""
        if not maximum or maximum >= self.thresholds().window:
            return False
        self.learned = maximum
        return True

    @property
    def user_set(self) -> bool:
        """Whether the user set the threshold: the percentage, or a window cap under the model's."""
        c = self.config
        pct = c.autocompact_pct is not None and 0 < c.autocompact_pct < 100
        cap = bool(c.context_window) and (c.context_window or 0) < self.model_window()
        return pct or cap
