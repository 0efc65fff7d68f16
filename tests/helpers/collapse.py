"""Context collapse on the bench: a bench with collapse on, turns of a given size, the span summaries a scripted model gives, the placeholders in a view (the fake API's counterparts, for tests on the wire: tests/helpers/wire.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compact.decision.tokens import count_tokens
from compact.stages import collapse
from compact.workers import collapse_worker
from core.events import Notice
from core.messages import (
    Message,
    assistant,
    tool_result_block,
    tool_results,
    user_prompt,
)
from core.model import Request
from core.scripted import reply_text
from tests.helpers.bench import Bench, make_bench
from tests.helpers.compaction import WORDS
from tests.helpers.scripted import last_user_text

SHARED = "One part of the conversation above is being taken out"


def is_collapse_text(text: str) -> bool:
    """A request's last user text is a collapse span's summary request."""
    return collapse_worker.INSTRUCTION.splitlines()[0] in text or SHARED in text


def is_collapse_request(req: Request) -> bool:
    return is_collapse_text(last_user_text(req))


SESSION_ID = "0c0a1a5e-1111-4222-8333-444455556666"


def collapse_bench(tmp: Path, api: Any, **kw: Any) -> Bench:
    """A bench with context collapse on in a 60K window (this file's preset of make_bench), on ``api``: a
    scripted model or the fake API."""
    kw = {"session_id": SESSION_ID, "context_collapse": True, "context_window": 60_000, **kw}
    return make_bench(tmp, api, **kw)


def text_of(tokens: int, seed: int) -> str:
    return " ".join(WORDS[(seed + i * 3) % 10] for i in range(tokens))


def add_turn(bench: Bench, n: int, size: int = 3_000) -> list[Message]:
    """A prompt, one Read call, its result (about ``size`` tokens) and a closing reply."""
    call = f"toolu_turn{n:03d}"
    ms = [
        user_prompt(f"Turn {n}: check module_{n}.py"),
        assistant(
            [{"type": "tool_use", "id": call, "name": "Read", "input": {"file_path": f"module_{n}.py"}}],
            stop_reason="tool_use",
        ),
        tool_results([tool_result_block(call, text_of(size, n))]),
        assistant([{"type": "text", "text": f"module_{n}.py is fine."}]),
    ]
    for m in ms:
        bench.add(m)
    return ms


def fill(bench: Bench, tokens: int, start: int = 0, size: int = 3_000) -> list[list[Message]]:
    """Add turns until the request (system and tools included, as the view counts) holds ``tokens``."""
    out = []
    while count_tokens(bench.messages, bench.conv.calibration) < tokens:
        out.append(add_turn(bench, start + len(out), size))
    return out


def summary_text(n: int) -> str:
    return f"SUMMARY-{n}: read a module, it was fine."


def summaries() -> Any:
    """A scripted model's span summaries, numbered from 1."""
    n = iter(range(1, 1000))
    return lambda req: reply_text(summary_text(next(n)))


def placeholders(messages: list[Message]) -> list[Message]:
    return [m for m in messages if collapse.is_placeholder(m)]


def notices(events: list[Any]) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice)]


def plain(value: Any) -> Any:
    """A request's messages without cache breakpoints (they move from request to request)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
