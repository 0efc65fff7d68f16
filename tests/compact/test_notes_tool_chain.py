"""Session notes in an autonomous run: the model calls tools reply after reply and writes no text.

The notes' "summarized up to here" must still land (on the results before the calls of the last reply),
so at the threshold the agent compacts from the notes — no summary request — keeping the recent tail
verbatim; the tail and the notes scale with the window, leaving room for the restored files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.runtime.loop import run_turn
from compact.compaction import notes_updater
from compact.compaction.notes_template import SECTIONS
from compact.decision import thresholds
from core.events import CompactFinished
from tests.conftest import make_session
from tests.fakeapi import FakeAPI, Reply, is_compaction, is_notes_update, last_user_text, read_paths

NOTES_PATH = re.compile(r"(/\S+/session-memory/summary\.md)")


def guide(name: str) -> str:
    return f"_{dict(SECTIONS)[name]}_"


def write_files(project: Path, count: int, lines: int) -> list[Path]:
    paths = []
    for n in range(count):
        path = project / f"module_{n:02d}.py"
        path.write_text(
            "".join(
                f"def step_{n}_{i}(state): return advance(state, {i}, 'stage-{n}')\n" for i in range(lines)
            )
        )
        paths.append(path)
    return paths


class ToolOnlyModel:
    """One Read per reply, no text at all, then a closing line."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths, self.next = paths, 0

    def __call__(self, body: dict) -> Reply:
        if self.next < len(self.paths):
            self.next += 1
            return Reply(
                [
                    {
                        "type": "tool_use",
                        "id": f"toolu_read_{self.next:03d}",
                        "name": "Read",
                        "input": {"file_path": str(self.paths[self.next - 1])},
                    }
                ]
            )
        return Reply.text("Done reading.")


class NotesWriter:
    """Answers a notes update with one Edit naming the last file the update saw read."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []

    def __call__(self, body: dict) -> Reply:
        self.bodies.append(body)
        path = NOTES_PATH.search(last_user_text(body)).group(1)
        reads = read_paths(body)
        return Reply(
            [
                {
                    "type": "tool_use",
                    "id": f"toolu_notes_{len(self.bodies)}",
                    "name": "Edit",
                    "input": {
                        "file_path": path,
                        "old_string": guide("Current State"),
                        "new_string": f"{guide('Current State')}\nRead through "
                        f"{Path(reads[-1]).name if reads else 'nothing'}.",
                    },
                }
            ]
        )


def run(
    tmp_path: Path, api: FakeAPI, paths: list[Path], **settings: Any
) -> tuple[Any, list[Any], NotesWriter]:
    writer = NotesWriter()
    api.on(is_notes_update, writer)
    api.on(is_compaction, Reply.text("<summary>should not be needed</summary>"))
    api.on(lambda body: True, ToolOnlyModel(paths))
    session, events = make_session(tmp_path, api, permission_mode="bypassPermissions", **settings)
    finished = run_turn(session, "Read every module, one per reply.")
    assert finished.stop_reason == "end_turn", finished.error
    return session, events, writer


@pytest.mark.fake_profile(
    "4.x",
    reason="the notes compaction of a tool-only run: on the 5.5 family a compaction mid tool loop keeps the loop's thinking through the server's summary instead (compact/compaction/backend.py; test_backends)",
)
@pytest.mark.slow
def test_a_long_tool_only_run_compacts_from_the_notes(tmp_path: Path) -> None:
    with FakeAPI() as api:
        (tmp_path / "project").mkdir(exist_ok=True)
        paths = write_files(tmp_path / "project", 50, 220)  # ~4,000 tokens a read: 50 reads pass 167K
        session, events, writer = run(tmp_path, api, paths, cost_aware=False)  # at T
        assert not [r for r in api.message_requests if is_compaction(r.body)]
        [done] = [e for e in events if isinstance(e, CompactFinished)]
        assert done.method == "session-memory" and done.pre_tokens >= 167_000
        assert done.post_tokens < 0.5 * 167_000
        assert len(writer.bodies) >= 1  # one update, at 90% of T (notes_updater.update_levels)
        # the tail after the summary is the end of the history before it, word for word
        main = [r.body for r in api.message_requests if not is_notes_update(r.body)]
        first_after = next(i for i, b in enumerate(main) if "This session continues" in json.dumps(b))
        before, after = main[first_after - 1], main[first_after]
        kept_reads = read_paths(after)
        history = read_paths(before) + [p for p in kept_reads if p not in read_paths(before)]  # + the newest
        assert len(kept_reads) >= 2 and kept_reads == history[-len(kept_reads) :]
        # the last update before the compaction covered every read the tail does not hold
        updates_before = [b for b in writer.bodies if "This session continues" not in json.dumps(b)]
        covered = set(read_paths(updates_before[-1]))
        dropped = history[: -len(kept_reads)]
        assert dropped and set(dropped) <= covered
        api.check()


@pytest.mark.fake_profile(
    "4.x",
    reason="the notes compaction of a tool-only run: on the 5.5 family a compaction mid tool loop keeps the loop's thinking through the server's summary instead (compact/compaction/backend.py; test_backends)",
)
def test_at_a_small_window_notes_and_tail_leave_room_for_restored_files(tmp_path: Path) -> None:
    with FakeAPI() as api:
        (tmp_path / "project").mkdir(exist_ok=True)
        paths = write_files(tmp_path / "project", 40, 60)  # ~1,100 tokens a read; T = 27,000 at 60K
        session, events, writer = run(tmp_path, api, paths, context_window=60_000, cost_aware=False)
        assert not [r for r in api.message_requests if is_compaction(r.body)]
        finished = [e for e in events if isinstance(e, CompactFinished)]
        assert finished and all(e.method == "session-memory" for e in finished)
        threshold = session.thresholds().auto_compact
        assert threshold == 27_000
        assert all(e.post_tokens < 0.75 * threshold for e in finished)  # well under: no compaction loop
        restored = [m for m in session.messages if m.kind == "meta" and "read from disk again" in m.text]
        assert restored  # room was left for the files


def test_the_tail_range_scales_with_the_window() -> None:
    assert thresholds.window_scale(167_000) == 1.0
    assert thresholds.window_scale(900_000) == 1.0
    assert thresholds.window_scale(27_000) == pytest.approx(27_000 / 167_000)


def notes_updater_wait(session: Any) -> None:
    assert notes_updater.wait_for_update(session.conv, 30)


PRICE = {
    "input_tokens": 1.0,
    "cache_creation_input_tokens": 1.25,
    "cache_read_input_tokens": 0.1,
    "output_tokens": 5.0,
}


def billed(usage: dict[str, int]) -> float:
    """Token equivalents under the prompt-cache price model (benchmarks/cost.py)."""
    return sum(weight * usage.get(key, 0) for key, weight in PRICE.items())


SENTENCE = "The work so far went through the modules in order and recorded what each step returned. "


class RealisticNotesWriter(NotesWriter):
    """A notes update of a real model's size: about 250 output tokens."""

    def __call__(self, body: dict) -> Reply:
        reply = super().__call__(body)
        reply.content[0]["input"]["new_string"] += "\n" + SENTENCE * 12
        return reply


@pytest.mark.fake_profile(
    "4.x",
    reason="the notes' cost on the 4.x rules; on the 5.5 family mid-loop compactions are the server's summary, so no notes update is sent in a tool-only run there (compact.compaction.economics), yet the run with the notes on still bills 1.016x the run without (168,306 vs 165,645 at 7606103: open, in the closing note)",
)
def test_session_memory_never_costs_more_than_without_it(tmp_path: Path) -> None:
    """A 36-reply tool-only run at a 60K window, billed from the usage the fake reports (prompt cache
    included) for every request: with the notes on it costs no more than with them off. Summaries and
    notes edits are of a real model's size (about 1,200 and 250 output tokens)."""
    costs, side = {}, {}
    for on in (True, False):
        with FakeAPI() as api:
            base = tmp_path / ("on" if on else "off")
            (base / "project").mkdir(parents=True)
            paths = write_files(base / "project", 36, 60)  # 36 replies, one Read each
            writer = RealisticNotesWriter()
            api.on(is_notes_update, writer)
            api.on(is_compaction, Reply.text(f"<summary>{SENTENCE * 60}</summary>"))
            api.on(lambda body: True, ToolOnlyModel(paths))
            session, events = make_session(
                base, api, permission_mode="bypassPermissions", context_window=60_000, session_memory=on
            )
            finished = run_turn(session, "Read every module, one per reply.")
            assert finished.stop_reason == "end_turn", finished.error
            notes_updater_wait(session)
            assert [e for e in events if isinstance(e, CompactFinished)]
            # every request the fake answered is in the bill: main, notes updates, summaries
            costs[on], side[on] = billed(session.usage_total), len(writer.bodies)
            api.check()
    assert side[True] > 0 and side[False] == 0
    assert costs[True] <= costs[False], f"with session memory {costs[True]:,.0f}, without {costs[False]:,.0f}"
