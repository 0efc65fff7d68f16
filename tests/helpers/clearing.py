"""The server's clearing of old tool results on the bench: a 5.5-family bench, a main request that reads a file, what a request asks the server to clear."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compact import request_cycle
from compact.context.context_editing import CLEAR_TOOL_USES
from core.messages import Message, tool_result_block, tool_results
from tests.fakeapi import FakeAPI, Reply
from tests.helpers.bench import Bench, make_bench
from tests.helpers.compaction import write_file

MODEL = "claude-sonnet-5-5"


def bench_for(tmp_path: Path, api: FakeAPI, preserves: bool = True, **options: Any) -> Bench:
    options.setdefault("auto_compact", False)  # clearing alone: no compaction point in these tests
    bench = make_bench(tmp_path, api, model=MODEL, window=60_000, keep_recent=2, **options)
    bench.ports.preserves_thinking = lambda: preserves
    return bench


def read_step(bench: Bench, api: FakeAPI, n: int, seen: bool = True) -> Message:
    """One main request through the pipeline: a thinking reply reading a ~3,000-token file, and its result.
    ``seen``: a summary request saw everything up to the request (as a candidate prepared ahead would:
    the clearing may reach that far; compact.context.context_editing ``advance``)."""
    path = write_file(bench, f"m{n}.py", lines=250, width=6)
    api.add(Reply.tools([("Read", {"file_path": str(path)}, f"toolu_r{n}")], thinking=f"read m{n}"))
    if seen and bench.messages:
        bench.conv.summary_seen = bench.messages[-1].uuid
    view = request_cycle.before_request(bench.conv, bench.ports)
    message = request_cycle.send(bench.conv, bench.ports, view)
    bench.add(message)
    bench.add(tool_results([tool_result_block(f"toolu_r{n}", path.read_text())]))
    return message


def cleared_through(body: dict) -> str | None:
    """The last tool use a request asks the server to clear (by how many it keeps), or None."""
    edits = (body.get("context_management") or {}).get("edits") or []
    if not edits:
        return None
    (edit,) = edits
    assert edit["type"] == CLEAR_TOOL_USES and edit["trigger"] == {"type": "tool_uses", "value": 1}
    ids = [b["id"] for m in body["messages"] for b in m["content"] if b.get("type") == "tool_use"]
    kept = edit["keep"]["value"]
    return ids[len(ids) - kept - 1] if kept < len(ids) else None
