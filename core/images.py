"""Pictures checked as the Messages API checks them, before they are sent (issue 40).

The API refuses a whole request for one bad image block: data that isn't base64, a type other than
JPEG, PNG, GIF or WebP, bytes that aren't the type the block says, or more than 5 MB. An MCP server (or
a transcript written before these checks) can hand over any of them, and a refused request would be
refused again on every retry and after ``--continue``. ``checked(block)`` returns the block as it may be
sent: relabelled when its bytes are another accepted type, else a short text block saying why the
picture was left out. Decoded once per distinct data string (cached), so a long conversation's pictures
cost nothing after their first request.
"""

from __future__ import annotations

import base64
import binascii
import functools
from typing import Any

MAX_BYTES = 5 * 1024 * 1024  # the API's limit on one image's base64 data
ACCEPTED = ("image/jpeg", "image/png", "image/gif", "image/webp")


def sniff(data: bytes) -> str | None:
    """The picture type the bytes are, by their signature (None: none of the accepted ones)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


@functools.lru_cache(maxsize=64)
def _verdict(data: str, declared: str) -> tuple[str | None, str]:
    """(the type to send, "") for a picture the API takes, or (None, why) for one it refuses."""
    if len(data) > MAX_BYTES:
        return None, f"it is {len(data) / 1024 / 1024:.1f} MB, over the API's 5 MB for one image"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None, "its data is not valid base64"
    found = sniff(raw)
    if found is None:
        shown = declared if declared in ACCEPTED else f"{declared or 'no'} type"
        return None, f"its bytes are not a JPEG, PNG, GIF or WebP picture ({shown})"
    return found, ""


def checked(block: dict[str, Any]) -> dict[str, Any]:
    """An image block as it may be sent: unchanged, relabelled to the type its bytes are, or a text block
    saying why it was left out. Other blocks (URL and file sources too) are returned as they are."""
    source = block.get("source")
    if block.get("type") != "image" or not isinstance(source, dict) or source.get("type") != "base64":
        return block
    data, declared = source.get("data"), str(source.get("media_type") or "")
    if not isinstance(data, str):
        return _left_out("it has no data")
    kind, why = _verdict(data, declared)
    if kind is None:
        return _left_out(why)
    if kind != declared:
        return {**block, "source": {**source, "media_type": kind}}
    return block


def _left_out(why: str) -> dict[str, Any]:
    return {"type": "text", "text": f"[an image was left out: {why}]"}
