"""Counting tokens: the one measure every threshold, warning and ``/context`` uses (SPEC §1).

The authoritative number is the API's: the usage the last real assistant response reported (input +
cache creation + cache read + output), plus an estimate (core.tokens) of each message that came after
it, scaled by the calibration. A count costs O(messages after the last usage), never a walk over the
whole history, since each message caches its own estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.messages import Message
from core.tokens import usage_total


@dataclass
class Calibration:
    """How far our estimate is from the API's real count, learnt over recent requests.

    ``ratio`` is an exponential moving average of real / estimated input tokens, clamped to
    [0.5, 2.0] so one odd request (a cache quirk, a huge image) can't throw every threshold off.
    """

    ratio: float = 1.0
    alpha: float = 0.3
    samples: int = 0
    low: float = 0.5
    high: float = 2.0

    def observe(self, real: int, estimated: int) -> None:
        if real <= 0 or estimated <= 0:
            return
        sample = min(self.high, max(self.low, real / estimated))
        self.ratio = sample if self.samples == 0 else self.ratio + self.alpha * (sample - self.ratio)
        self.ratio = min(self.high, max(self.low, self.ratio))
        self.samples += 1

    def scale(self, n: int) -> int:
        return round(n * self.ratio)


def count_tokens(messages: list[Message], calibration: Calibration | None = None,
                 freed: dict[str, int] | None = None) -> int:
    """Tokens of this conversation: last reported usage + estimates of the messages after it.

    Walks backwards only as far as the last assistant message with usage. The caller passes messages
    whose usage is current: after a compaction, kept messages should carry ``usage=None`` until the
    next response, since their stored usage measured the old, longer context. ``freed`` maps a
    response's uuid to the tokens removed (snipped) after its usage was measured; they are taken off
    until a newer response reports a fresh usage.
    """
    tail = 0
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role == "assistant" and m.usage:
            estimate = calibration.scale(tail) if calibration else tail
            stale = freed.get(m.uuid, 0) if freed else 0
            return max(0, usage_total(m.usage) - stale) + estimate
        tail += m.tokens
    return calibration.scale(tail) if calibration else tail
