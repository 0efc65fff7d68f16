"""A request as the SDK client is given one, for the client's tests."""

from __future__ import annotations

from core.model import Request


def request(text: str = "hi") -> Request:
    return Request(
        model="claude-sonnet-4-6",
        system=[{"type": "text", "text": "sys"}],
        tools=[{"name": "T", "description": "d", "input_schema": {"type": "object"}}],
        messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
        max_tokens=1000,
    )
