"""How long resuming takes: a ~30 MB transcript with 60 compactions against a tiny session.

docs/files.md asks that a long session resume about as fast as a short one. This script writes both with
``TranscriptWriter`` (our own record format) and measures two things, each as long vs tiny:

1. ``load_transcript`` in this process (median of ``--repeat`` runs);
2. the whole CLI: ``compact-agent -p hi --resume <id>`` started as a process, timed from the spawn to
   the first ``POST /v1/messages`` reaching a loopback FakeAPI (median of ``--cli-runs``, long and tiny
   interleaved so machine noise hits both alike). Target: long/tiny ≤ 1.2× (Claude Code: 1.24×).

For (2) the transcripts are written into ``$COMPACT_AGENT_HOME/projects/<key>/`` of a temporary home, as
the CLI's own sessions of a temporary project directory. Each run appends its prompt and reply to the
session it resumed; that is a few hundred bytes, nothing next to 30 MB.

    .venv/bin/python benchmarks/resume.py [--repeat N] [--cli-runs N] [--keep DIR] [--profile 2026|4.x]

The CLI runs on the 5.5 family (benchmarks/thinking.py: ``ANTHROPIC_MODEL=claude-sonnet-5-5``, the fake on
the 2026 profile with the prefix check enforced) and the resumed requests' refusals are printed; the
transcripts are synthetic and hold no thinking (a block the fake did not sign would be a forgery), so
no thinking can be dropped here: the figure is that a resumed request is not refused.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.transcript.loader import load_transcript  # noqa: E402
from core.messages import assistant, meta, new_uuid, tool_result_block, tool_results, user_prompt  # noqa: E402
from core.transcript_writer import TranscriptWriter  # noqa: E402
from tests.fakeapi import FakeAPI, Reply  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import thinking  # noqa: E402

MODEL = "claude-sonnet-4-5"
COMPACTIONS = 60
CYCLE_BYTES = 490_000  # transcript bytes between two boundaries -> ~30 MB in all
LIVE_TAIL_BYTES = 340_000  # ~85K tokens of text after the last boundary
WORDS = (
    "def class return import value result path file test error self data list dict index "
    "token message session compact boundary summary context record load write append"
).split()


def _text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        line = " ".join(rng.choice(WORDS) for _ in range(12))
        out.append(line)
        n += len(line) + 1
    return "\n".join(out)[:size]


def _usage(rng: random.Random, context: int) -> dict[str, int]:
    return {
        "input_tokens": 3,
        "cache_creation_input_tokens": rng.randint(200, 4000),
        "cache_read_input_tokens": context,
        "output_tokens": rng.randint(50, 600),
    }


def _turn(w: TranscriptWriter, rng: random.Random, context: int) -> tuple[int, list[str]]:
    """One prompt, a few tool calls with results of a few KB, and a final reply; returns bytes, uuids."""
    uuids: list[str] = []
    size = 0

    def add(m):  # type: ignore[no-untyped-def]
        nonlocal size
        rec = w.append_message(m)
        uuids.append(m.uuid)
        size += sum(len(str(b)) for b in rec["message"]["content"]) + 400

    add(user_prompt(_text(rng, rng.randint(40, 400))))
    for _ in range(rng.randint(2, 6)):
        tid = "toolu_" + new_uuid().replace("-", "")[:24]
        add(
            assistant(
                [
                    {"type": "text", "text": _text(rng, rng.randint(30, 300))},
                    {
                        "type": "tool_use",
                        "id": tid,
                        "name": "Read",
                        "input": {"file_path": f"/src/{rng.choice(WORDS)}.py"},
                    },
                ],
                message_id="msg_" + new_uuid()[:20],
                model=MODEL,
                stop_reason="tool_use",
                usage=_usage(rng, context),
            )
        )
        body = _text(rng, rng.randint(1500, 6000))
        add(tool_results([tool_result_block(tid, body)]))
        if rng.random() < 0.08:
            w.append_record(
                {
                    "type": "content-replacement",
                    "replacements": [{"toolUseId": tid, "content": "[output saved to disk]\n" + body[:2000]}],
                }
            )
        if rng.random() < 0.05:
            w.append_record({"type": "microcompact", "clearedToolUseIds": [tid]})
    add(
        assistant(
            [{"type": "text", "text": _text(rng, rng.randint(200, 1500))}],
            message_id="msg_" + new_uuid()[:20],
            model=MODEL,
            usage=_usage(rng, context),
        )
    )
    w.append_record({"type": "session-memory", "lastSummarizedUuid": uuids[-1]})
    return size, uuids


def write_long(path: Path, rng: random.Random) -> None:
    with TranscriptWriter(path, path.stem, "/bench", "0.1.0", sync_boundaries=False) as w:
        for n in range(COMPACTIONS + 1):
            written = 0
            target = LIVE_TAIL_BYTES if n == COMPACTIONS else CYCLE_BYTES
            turns: list[list[str]] = []
            while written < target:
                size, uuids = _turn(w, rng, 20_000 + written // 4)
                written += size
                turns.append(uuids)
            if n == COMPACTIONS:
                break
            last = w.last_uuid
            kept = turns[-1] if n % 2 else None  # every other compaction keeps the last turn verbatim
            summary = meta(_text(rng, 8000))
            segment = (
                {"headUuid": kept[0], "anchorUuid": summary.uuid, "tailUuid": kept[-1]} if kept else None
            )
            w.append_boundary("auto", 160_000 + rng.randint(0, 9000), last, segment)
            w.append_message(summary.replace(kind="summary"))
            w.append_message(meta("Restored file /src/context.py:\n" + _text(rng, 3000)))


def write_tiny(path: Path, rng: random.Random) -> None:
    with TranscriptWriter(path, path.stem, "/bench", "0.1.0") as w:
        w.append_message(user_prompt("hello"))
        w.append_message(
            assistant(
                [{"type": "text", "text": "Hi! What shall we work on?"}],
                message_id="msg_tiny",
                model=MODEL,
                usage=_usage(rng, 3000),
            )
        )


def median_load(path: Path, repeat: int) -> tuple[float, int]:
    times = []
    count = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        loaded = load_transcript(path, model=MODEL)
        times.append(time.perf_counter() - t0)
        count = len(loaded.messages)
        assert not loaded.warnings, loaded.warnings
    return statistics.median(times), count


def first_request(api: FakeAPI, session_id: str, env: dict[str, str], cwd: Path) -> float:
    """Seconds from spawning ``compact-agent -p hi --resume ID`` to its first /v1/messages request."""
    arrived = threading.Event()
    api.routes.clear()
    api.on(lambda body: (arrived.set(), False)[1], None)  # type: ignore[arg-type]
    api.on(lambda body: True, Reply.text("ok"))
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent", "-p", "hi", "--resume", session_id],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if not arrived.wait(120):
        proc.kill()
        raise SystemExit(f"no request arrived: {proc.communicate()[1].decode()[-2000:]}")
    elapsed = time.perf_counter() - start
    _, err = proc.communicate(timeout=120)
    if proc.returncode:
        raise SystemExit(f"compact-agent failed ({proc.returncode}): {err.decode()[-2000:]}")
    return elapsed


def cli_figures(where: Path, runs: int, profile: str = thinking.DEFAULT) -> None:
    home, project = where / "home", where / "project"
    project.mkdir(parents=True, exist_ok=True)
    key = "".join(c if c.isalnum() else "-" for c in str(project.resolve()))
    store = home / "projects" / key
    rng = random.Random(11)
    long_id, tiny_id = new_uuid(), new_uuid()
    write_long(store / f"{long_id}.jsonl", rng)
    write_tiny(store / f"{tiny_id}.jsonl", rng)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "COMPACT_AGENT_"))
    }
    env["ANTHROPIC_MODEL"] = thinking.model(profile)  # the family the fake plays
    tally = thinking.Tally(profile)
    with FakeAPI(**thinking.fake(profile)) as api:
        env.update(api.env(), HOME=str(where), COMPACT_AGENT_HOME=str(home), PYTHONPATH=str(ROOT))
        first_request(api, tiny_id, env, project)  # warm the page cache and the bytecode
        first_request(api, long_id, env, project)
        big, small = [], []
        for _ in range(runs):
            big.append(first_request(api, long_id, env, project))
            small.append(first_request(api, tiny_id, env, project))
    tally.api(api)
    tally.transcripts(store)
    b, t = statistics.median(big), statistics.median(small)
    size = (store / f"{long_id}.jsonl").stat().st_size
    print(f"compact-agent -p hi --resume ID: process start → first request (median of {runs}, interleaved)")
    print(f"  long ({size / 1e6:.1f} MB) : {b:8.3f} s   [{', '.join(f'{x:.2f}' for x in sorted(big))}]")
    print(f"  tiny            : {t:8.3f} s   [{', '.join(f'{x:.2f}' for x in sorted(small))}]")
    ratio = b / t
    print(
        f"  ratio long/tiny : {ratio:8.2f}x  target ≤ 1.20x (Claude Code: 1.24x)  {'ok' if ratio <= 1.2 else 'OVER'}"
    )
    print(tally.report("resumed requests"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--cli-runs", type=int, default=7, help="CLI runs each, long and tiny (0 skips them)")
    ap.add_argument("--keep", type=Path, help="write the transcripts here and leave them")
    thinking.add_argument(ap)
    args = ap.parse_args(argv)
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        long_path, tiny_path = where / f"{new_uuid()}.jsonl", where / f"{new_uuid()}.jsonl"
        t0 = time.perf_counter()
        write_long(long_path, rng)
        write_tiny(tiny_path, rng)
        built = time.perf_counter() - t0
        big, n_big = median_load(long_path, args.repeat)
        small, n_small = median_load(tiny_path, args.repeat)
        loaded = load_transcript(long_path, model=MODEL)
        lines, size = loaded.all_records_count, long_path.stat().st_size
        tail = size - loaded.boundary_offset
        print(
            f"long transcript : {size / 1e6:.1f} MB, {lines:,} lines, {COMPACTIONS} compactions, "
            f"{tail / 1e3:,.0f} KB after the last boundary (written in {built:.1f} s)"
        )
        print(f"  load_transcript: {big * 1e3:8.2f} ms  ({n_big} live messages)")
        print("tiny transcript : 2 messages")
        print(f"  load_transcript: {small * 1e3:8.2f} ms  ({n_small} live messages)")
        print(
            f"ratio long/tiny : {big / small:8.1f}x  (difference {1e3 * (big - small):.1f} ms; "
            f"median of {args.repeat})"
        )
        if args.cli_runs:
            cli_figures(where / "cli", args.cli_runs, args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
