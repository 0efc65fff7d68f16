"""Preserved thinking on the bench: a 5.5-family bench (the fake binds every thinking block to its prefix), its steps and what it sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compact import request_cycle
from core.messages import Message, tool_result_block, tool_results
from tests.fakeapi import FakeAPI, Reply
from tests.helpers.bench import Bench, make_bench
from tests.helpers.compaction import write_file

MODEL = "claude-sonnet-5-5"  # preserved thinking: the fake binds every thinking block to its prefix


def thinking_bench(tmp_path: Path, api: FakeAPI, **options: Any) -> Bench:
    bench = make_bench(tmp_path, api, model=MODEL, **options)
    bench.ports.offers_compaction = lambda: True
    return bench


def step(bench: Bench, reply: Reply, api: FakeAPI) -> Message:
    """One main request through the pipeline (compact.request_cycle), its reply recorded as the loop would."""
    api.add(reply)
    view = request_cycle.before_request(bench.conv, bench.ports)
    message = request_cycle.send(bench.conv, bench.ports, view)
    bench.add(message)
    return message


def read_step(bench: Bench, api: FakeAPI, name: str, lines: int = 40) -> Message:
    """A thinking reply that reads a file, then the file's content as its result."""
    path = write_file(bench, name, lines=lines)
    reply = Reply.tools(
        [("Read", {"file_path": str(path)}, f"toolu_{name.replace('.', '_')}")], thinking=f"read {name}"
    )
    message = step(bench, reply, api)
    bench.add(tool_results([tool_result_block(message.tool_uses[0]["id"], path.read_text())]))
    return message


def sent_messages(api: FakeAPI) -> list[dict]:
    return api.message_requests[-1].body["messages"]
