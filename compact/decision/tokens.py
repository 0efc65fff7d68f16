"""Counting tokens: the one measure every threshold, warning and ``/context`` uses (docs/compaction.md).

The authoritative number is the API's: the usage the last real assistant response reported (input +
cache creation + cache read + output), plus an estimate (core.tokens) of each message that came after
it, scaled by the calibration. With no reported usage to stand on (a new session, right after a
compaction) the estimate covers the whole request: the system prompt and tool definitions
(``Calibration.overhead``) as well as the messages. A count costs O(messages after the last usage),
never a walk over the whole history, since each message caches its own estimate.

Server-side clearing (``clear_tool_uses``, compact.context.context_editing) makes two numbers of one history:
what the server counts (old tool results cleared: the usage it reports, what the window and the
blocking limit hold) and what the history weighs as the client keeps and sends it, ``raw`` (what a
compaction request, which can't clear, must send). A response's usage records the tokens its edits
cleared (``CLEARED``); ``cleared`` reads them back.

Calibration compares like with like: the server's count of a whole request against our estimate of
that same whole request (system, tools, messages). The ratio is the quotient of size-weighted sums that
fade with each new request, so a tiny request (a first prompt, almost all system prompt) moves it
little and a large one a lot; it starts at 1 and is clamped to [0.25, 4].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from core.messages import Message
from core.tokens import usage_total

CLEARED = "cleared_input_tokens"  # in a response's usage: what the server's clearing left out of its count


@dataclass
class Calibration:
    """How the server counts compared with our estimate, learnt from whole requests (module docstring)."""

    fade: float = 0.7  # weight of the past at each new request
    low: float = 0.25
    high: float = 4.0
    samples: int = 0
    # estimated tokens of the system prompt and tool definitions of the current request; None: not
    # known yet, ``overhead_source`` tells on first need (so start-up doesn't load the tokenizer)
    overhead: int | None = None
    overhead_source: Callable[[], int] | None = field(default=None, repr=False, compare=False)
    # the server's count of the messages after the last usage (count_tokens) against our estimate of them
    tail_ratio: float | None = None
    _real: float = 0.0
    _estimated: float = 0.0

    def observe(self, real: int, estimated: int) -> None:
        """One request: the server counted ``real`` input tokens where we estimated ``estimated``."""
        if real <= 0 or estimated <= 0:
            return
        self.tail_ratio = None  # a usage measured the messages the count stood for
        self._real = self._real * self.fade + real
        self._estimated = self._estimated * self.fade + estimated
        self.samples += 1

    @property
    def ratio(self) -> float:
        if not self._estimated:
            return 1.0
        return min(self.high, max(self.low, self._real / self._estimated))

    def scale(self, n: int) -> int:
        return round(n * self.ratio)

    def measured(self, real: int, estimated: int) -> None:
        """The server counted ``real`` tokens (count_tokens) for messages no usage has measured yet, which
        we estimated at ``estimated``: until the next usage, such messages are scaled by that ratio."""
        if real > 0 and estimated > 0:
            self.tail_ratio = min(self.high, max(self.low, real / estimated))

    def scale_tail(self, n: int) -> int:
        """Tokens of messages after the last usage, as the server counts them."""
        return round(n * self.tail_ratio) if self.tail_ratio is not None else self.scale(n)

    def fixed_tokens(self) -> int:
        """Estimated tokens of the system prompt and tools (asked of ``overhead_source`` once if unknown)."""
        if self.overhead is None:
            if self.overhead_source is None:
                return 0
            self.overhead = self.overhead_source()
        return self.overhead


def count_tokens(
    messages: list[Message], calibration: Calibration | None = None, freed: dict[str, int] | None = None
) -> int:
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
            estimate = calibration.scale_tail(tail) if calibration else tail
            stale = freed.get(m.uuid, 0) if freed else 0
            return max(0, usage_total(m.usage) - stale) + estimate
        tail += m.tokens
    return calibration.scale(calibration.fixed_tokens() + tail) if calibration else tail


def cleared(messages: list[Message]) -> int:
    """Tokens the server's clearing left out of the last reported usage (0 when it cleared nothing): the
    history as the client keeps it weighs ``count_tokens(...) + cleared(...)``."""
    for m in reversed(messages):
        if m.role == "assistant" and m.usage:
            return int(m.usage.get(CLEARED) or 0)
    return 0
