"""Routes and replies for the fake Messages API (tests/fakeapi.py) in the compaction tests on the wire
(tests/agent/): the fake's counterparts of what tests/helpers/collapse.py and scripted.py give a scripted model.
On the agent floor (the fake's server is agent/demo's): no tests/compact/ file imports it."""

from __future__ import annotations

from itertools import count
from pathlib import Path
from typing import Any

from tests.fakeapi import Reply, last_user_text
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
