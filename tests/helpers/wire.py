"""Routes and replies for the fake Messages API (tests/fakeapi.py) in the compaction tests on the wire
(tests/agent/): the fake's counterparts of what tests/helpers/collapse.py and scripted.py give a scripted model.
On the agent floor (the fake's server is agent/demo's): no tests/compact/ file imports it."""

from __future__ import annotations

import json
from itertools import count
from pathlib import Path
from typing import Any

from tests.fakeapi import (
    Reply,
    last_user_text,
    model_info,
)
from tests.helpers.collapse import is_collapse_text, summary_text


def is_collapse_body(body: dict) -> bool:
    """A request body the fake received is a collapse span's summary request."""
    return is_collapse_text(last_user_text(body))


def collapse_summaries() -> Any:
    """The fake's span summaries, numbered from 1."""
    n = count(1)
    return lambda body: Reply.text(summary_text(next(n)))


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


class Reader:
    """The scripted model: one Read per request until every file is read, then ``final`` (fresh replies)."""

    def __init__(self, paths: list[Path], final: str = "All files read."):
        self.paths, self.next, self.final = list(paths), 0, final

    def __call__(self, body: dict) -> Reply:
        if self.next < len(self.paths):
            self.next += 1
            return Reply.tool("Read", {"file_path": str(self.paths[self.next - 1])})
        return Reply.text(self.final)


def plain(messages: list[dict]) -> list[dict]:
    """Messages without cache_control (the breakpoint moves with the tail) and without the snip nudge (a
    reminder recorded as the context grows, sent from the request after the one that added it)."""
    out = json.loads(json.dumps(messages).replace(', "cache_control": {"type": "ephemeral"}', ""))
    for m in out:
        m["content"] = [b for b in m["content"] if not b.get("text", "").startswith("<system-reminder>")]
    return out


def tool_results_of(body: dict) -> list[dict]:
    last = body["messages"][-1]
    return [b for b in last["content"] if b.get("type") == "tool_result"]


def result_text(block: dict) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def tool_result(body: dict) -> dict:
    return next(b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result")


MODEL = "claude-sonnet-5-5"


WINDOW = 60_000


PROMPT = "Read every file in the project, one at a time."


FINAL = "All files read."


def sonnet(compaction: bool) -> dict:
    """Sonnet 5.5 at a small window, its capabilities as the Models API reports them, with or without the
    top-level compaction parameter."""
    from agent.demo.server import capabilities

    caps = capabilities(MODEL)
    caps["compaction"] = {"supported": compaction, "summarize": {"supported": compaction}}
    return {**model_info(MODEL, WINDOW), "capabilities": caps}
