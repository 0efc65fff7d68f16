"""How long resuming takes: a ~30 MB transcript with 60 compactions against a tiny session.

SPEC §12 asks that a long session resume about as fast as a short one. This script writes both in a
temporary directory with ``TranscriptWriter`` (our own record format), then times ``load_transcript``
on each (median of several runs) and prints the figures and their ratio.

    .venv/bin/python benchmarks/resume.py [--repeat N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.messages import assistant, meta, new_uuid, tool_result_block, tool_results, user_prompt  # noqa: E402
from agent.transcript import TranscriptWriter, load_transcript  # noqa: E402

MODEL = "claude-sonnet-4-5"
COMPACTIONS = 60
CYCLE_BYTES = 490_000  # transcript bytes between two boundaries -> ~30 MB in all
LIVE_TAIL_BYTES = 340_000  # ~85K tokens of text after the last boundary
WORDS = ("def class return import value result path file test error self data list dict index "
         "token message session compact boundary summary context record load write append").split()


def _text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        line = " ".join(rng.choice(WORDS) for _ in range(12))
        out.append(line)
        n += len(line) + 1
    return "\n".join(out)[:size]


def _usage(rng: random.Random, context: int) -> dict[str, int]:
    return {"input_tokens": 3, "cache_creation_input_tokens": rng.randint(200, 4000),
            "cache_read_input_tokens": context, "output_tokens": rng.randint(50, 600)}


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
        add(assistant([{"type": "text", "text": _text(rng, rng.randint(30, 300))},
                       {"type": "tool_use", "id": tid, "name": "Read",
                        "input": {"file_path": f"/src/{rng.choice(WORDS)}.py"}}],
                      message_id="msg_" + new_uuid()[:20], model=MODEL, stop_reason="tool_use",
                      usage=_usage(rng, context)))
        body = _text(rng, rng.randint(1500, 6000))
        add(tool_results([tool_result_block(tid, body)]))
        if rng.random() < 0.08:
            w.append_record({"type": "content-replacement",
                             "replacements": [{"toolUseId": tid, "content": "[output saved to disk]\n" + body[:2000]}]})
        if rng.random() < 0.05:
            w.append_record({"type": "microcompact", "clearedToolUseIds": [tid]})
    add(assistant([{"type": "text", "text": _text(rng, rng.randint(200, 1500))}],
                  message_id="msg_" + new_uuid()[:20], model=MODEL, usage=_usage(rng, context)))
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
            segment = {"headUuid": kept[0], "anchorUuid": summary.uuid, "tailUuid": kept[-1]} if kept else None
            w.append_boundary("auto", 160_000 + rng.randint(0, 9000), last, segment)
            w.append_message(summary.replace(kind="summary"))
            w.append_message(meta("Restored file /src/context.py:\n" + _text(rng, 3000)))


def write_tiny(path: Path, rng: random.Random) -> None:
    with TranscriptWriter(path, path.stem, "/bench", "0.1.0") as w:
        w.append_message(user_prompt("hello"))
        w.append_message(assistant([{"type": "text", "text": "Hi! What shall we work on?"}],
                                   message_id="msg_tiny", model=MODEL, usage=_usage(rng, 3000)))


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--keep", type=Path, help="write the transcripts here and leave them")
    args = ap.parse_args(argv)
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
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
    print(f"long transcript : {size / 1e6:.1f} MB, {lines:,} lines, {COMPACTIONS} compactions, "
          f"{tail / 1e3:,.0f} KB after the last boundary (written in {built:.1f} s)")
    print(f"  load_transcript: {big * 1e3:8.2f} ms  ({n_big} live messages)")
    print("tiny transcript : 2 messages")
    print(f"  load_transcript: {small * 1e3:8.2f} ms  ({n_small} live messages)")
    print(f"ratio long/tiny : {big / small:8.1f}x  (difference {1e3 * (big - small):.1f} ms; median of {args.repeat})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
