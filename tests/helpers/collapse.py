"""Context collapse on the bench: a bench with collapse on, turns of a given size, the span summaries the fake gives, the placeholders in a view."""

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
from tests.fakeapi import FakeAPI, Reply, last_user_text
from tests.helpers.bench import Bench, make_bench

WORDS = "alpha beta gamma delta parser token stream buffer index value".split()

SHARED = "One part of the conversation above is being taken out"


def is_collapse_request(body: dict) -> bool:
    text = last_user_text(body)
    return collapse_worker.INSTRUCTION.splitlines()[0] in text or SHARED in text


SESSION_ID = "0c0a1a5e-1111-4222-8333-444455556666"


def collapse_bench(tmp: Path, api: FakeAPI, **kw: Any) -> Bench:
    """A bench with context collapse on in a 60K window (this file's preset of make_bench)."""
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


def summaries() -> Any:
    n = iter(range(1, 1000))
    return lambda body: Reply.text(f"SUMMARY-{next(n)}: read a module, it was fine.")


def placeholders(messages: list[Message]) -> list[Message]:
    return [m for m in messages if collapse.is_placeholder(m)]


def notices(events: list[Any]) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice)]


def make_files(project: Path, count: int, lines: int = 120) -> list[Path]:
    """Source files of about 2,600 tokens each as Read shows them."""
    paths = []
    for n in range(count):
        body = [
            f"def f{n}_{i}(x): return {' '.join(WORDS[(i * 7 + j + n) % 10] for j in range(9))!r}"
            for i in range(lines)
        ]
        path = project / "src" / f"module_{n:02d}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(body) + "\n")
        paths.append(path)
    return paths


def plain(value: Any) -> Any:
    """A request's messages without cache breakpoints (they move from request to request)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


class Model:
    """Each turn reads its batch of files, one Read per reply, then says it is done."""

    def __init__(self, batches: list[list[Path]]):
        self.batches, self.turn, self.pos = batches, 0, 0

    def __call__(self, body: dict) -> Reply:
        if self.turn >= len(self.batches):
            return Reply.text("All read.")
        batch = self.batches[self.turn]
        if self.pos < len(batch):
            self.pos += 1
            return Reply.tool("Read", {"file_path": str(batch[self.pos - 1])})
        self.turn, self.pos = self.turn + 1, 0
        return Reply.text(f"Batch {self.turn} read.")
