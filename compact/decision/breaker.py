"""The circuit breaker of automatic compaction (docs/compaction.md): after 3 failed ones in a row, no more.

Failures of automatic compactions (auto and reactive) count; so does one the post-compaction guard
(compact.compaction.guard) finds did not help. Any compaction that helps resets it. Once open it says so once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from core.events import Event, Notice

MAX_FAILURES = 3
NOTICE = (
    "Auto-compact failed {n} times in a row, so it is off for the rest of this session. "
    "Run /compact to try again, or /clear to start afresh."
)


@dataclass
class Breaker:
    failures: int = 0  # consecutive failed automatic compactions
    reported: bool = False  # the notice was shown since it opened

    @property
    def open(self) -> bool:
        return self.failures >= MAX_FAILURES

    def failed(self) -> None:
        self.failures += 1

    def reset(self) -> None:
        self.failures = 0
        self.reported = False

    def say_once(self, emit: Callable[[Event], None]) -> None:
        """Tell the user, the first time it is found open, that auto-compact is off."""
        if not self.reported:
            self.reported = True
            emit(Notice(NOTICE.format(n=self.failures), "warning"))
