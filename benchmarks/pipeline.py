"""How much build_view() costs next to serialising the request it goes into.

For synthetic sessions of 500 to 4,000 messages (~150K tokens at 2,000: prompts, parallel tool calls,
results from a few lines to huge, responses with usage) it measures, in steady state (a second call
after a warm first one, as in a running session where only new messages arrive):

  view     — compact.stages.view.build_view(), token count included
  dumps    — one json.dumps of the same request's messages
  turn     — one more turn: append a tool call, its result and a response, then build the view again

Run: .venv/bin/python benchmarks/pipeline.py [--repeat N]. Exits 1 if building the view costs more than one
json.dumps at any size.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compact.stages.state import ContextState  # noqa: E402
from compact.stages.view import ViewContext, build_view  # noqa: E402
from core.messages import Message  # noqa: E402
from core.tokens import estimate_text  # noqa: E402

SIZES = (500, 1_000, 2_000, 4_000)
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
WORDS = (
    "the function returns a list of values from the parser and we check each one against "
    "the expected output before writing the file to disk so tests pass"
).split()
TOOLS = ("Bash", "Read", "Grep", "Glob", "Edit")


class Session:
    """Builds a realistic conversation, message by message, with a clock and API usage."""

    def __init__(self, seed: int):
        self.rnd = random.Random(seed)
        self.t = NOW - timedelta(minutes=30)
        self.n = 0
        self.context = 3_000  # system prompt and tools

    def _stamp(self) -> dict:
        self.n += 1
        self.t += timedelta(seconds=1)
        return {
            "uuid": f"{self.rnd.getrandbits(32):08x}-0000-4000-8000-{self.n:012x}",
            "timestamp": self.t.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }

    def words(self, n: int) -> str:
        return " ".join(self.rnd.choice(WORDS) for _ in range(n))

    def output(self) -> str:
        r = self.rnd.random()
        lines = 1 if r < 0.6 else 4 if r < 0.9 else 18 if r < 0.995 else 700
        return "".join(f"src/pkg/module_{i}.py:{i * 7}: {self.words(6)}\n" for i in range(lines))

    def prompt(self) -> Message:
        return Message(
            "user",
            [{"type": "text", "text": self.words(self.rnd.randint(8, 40))}],
            kind="prompt",
            **self._stamp(),
        )

    def response(self, blocks: list[dict], new_tokens: int) -> Message:
        self.context += new_tokens
        usage = {
            "input_tokens": 5,
            "cache_creation_input_tokens": 400,
            "cache_read_input_tokens": self.context,
            "output_tokens": 120,
        }
        return Message(
            "assistant",
            blocks,
            kind="response",
            message_id=f"msg_{self.n}",
            model="claude-bench",
            stop_reason="tool_use" if blocks[-1]["type"] == "tool_use" else "end_turn",
            usage=usage,
            **self._stamp(),
        )

    def round(self) -> list[Message]:
        k = self.rnd.choice((1, 1, 1, 1, 2, 3))
        ids = [f"toolu_{self.n}_{i}" for i in range(k)]
        uses = [
            {
                "type": "tool_use",
                "id": i,
                "name": self.rnd.choice(TOOLS),
                "input": {"command": self.words(5), "path": "src/pkg/module.py"},
            }
            for i in ids
        ]
        call = self.response([{"type": "text", "text": self.words(20)}, *uses], 150)
        outputs = [self.output() for _ in ids]
        results = Message(
            "user",
            [
                {"type": "tool_result", "tool_use_id": i, "content": o}
                for i, o in zip(ids, outputs, strict=True)
            ],
            kind="tool_results",
            **self._stamp(),
        )
        self.context += sum(len(o) for o in outputs) // 4
        return [call, results]

    def history(self, size: int) -> list[Message]:
        out: list[Message] = []
        while len(out) < size:
            out.append(self.prompt())
            for _ in range(self.rnd.randint(1, 6)):
                out += self.round()
            out.append(self.response([{"type": "text", "text": self.words(60)}], 100))
        return out[:size]


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Median seconds of ``repeat`` calls."""
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def measure(size: int, repeat: int, tmp: Path) -> dict:
    session = Session(size)
    messages = session.history(size)
    ctx = ViewContext(ContextState(), tmp / f"s{size}" / "tool-results", now=lambda: NOW)
    t0 = time.perf_counter()
    warm = build_view(messages, ctx)
    first = time.perf_counter() - t0
    api = warm.api
    estimate = sum(m.tokens for m in warm.messages)
    steady = timed(lambda: build_view(messages, ctx).tokens, repeat)
    cold = ViewContext(ctx.state, ctx.results_dir, now=lambda: NOW, incremental=False)
    build_view(messages, cold)
    no_reuse = timed(lambda: build_view(messages, cold).tokens, repeat)
    dumps = timed(lambda: json.dumps(api), repeat)
    to_api_time = timed(lambda: build_view(messages, ctx).api, repeat)
    turn_samples = []
    grown = list(messages)
    for _ in range(repeat):
        new = [*session.round(), session.response([{"type": "text", "text": session.words(30)}], 80)]
        grown = grown + new
        t0 = time.perf_counter()
        _ = build_view(grown, ctx).tokens
        turn_samples.append(time.perf_counter() - t0)
    return {
        "size": size,
        "tokens": estimate,
        "first": first,
        "steady": steady,
        "no_reuse": no_reuse,
        "dumps": dumps,
        "with_api": to_api_time,
        "turn": statistics.median(turn_samples),
        "persisted": len(ctx.state.replacements),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=25)
    args = parser.parse_args()
    estimate_text("load the encoding before timing anything")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            rows.append(measure(size, args.repeat, Path(tmp)))
    print(
        f"{'messages':>8} {'~tokens':>8} {'persisted':>9} {'first ms':>9} {'view ms':>10} "
        f"{'dumps ms':>9} {'ratio':>6} {'no-reuse ms':>11} {'ratio':>6} {'+to_api ms':>10} {'turn ms':>8}"
    )
    worst = 0.0
    for r in rows:
        ratio = r["steady"] / r["dumps"]
        ratio2 = r["no_reuse"] / r["dumps"]
        worst = max(worst, ratio, ratio2)
        print(
            f"{r['size']:>8} {r['tokens']:>8,} {r['persisted']:>9} {r['first'] * 1e3:>9.1f} "
            f"{r['steady'] * 1e3:>10.3f} {r['dumps'] * 1e3:>9.3f} {ratio:>6.3f} {r['no_reuse'] * 1e3:>11.3f} "
            f"{ratio2:>6.3f} {r['with_api'] * 1e3:>10.3f} "
            f"{r['turn'] * 1e3:>8.3f}"
        )
    print(
        "\nfirst: the first build_view() (tokenizes, writes large outputs to disk); view: steady-state "
        "build_view() incl. token count;\nratio: view / one json.dumps of the request's messages; no-reuse: "
        "the same with ViewContext(incremental=False)\n(per-message caches only); +to_api: build_view() "
        "and building the API messages; turn: append a round and a response, then build_view()."
    )
    if worst > 1.0:
        print(f"FAIL: build_view() costs {worst:.2f}x a json.dumps of the request")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
