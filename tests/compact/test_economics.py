"""compact.compaction.economics: cost-aware compaction — when a reset pays for itself, what is restored, and which call.

The arithmetic is checked on its own (break-even, the server's summary priced uncached, the cycle's
request count); then whole runs through the real agent and the loopback fake: a long read-only tool run
compacts from the notes well before T with no summary request and restores none of the files it only
read, and the same run with the setting off compacts at T as before.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from agent.runtime.loop import run_turn
from compact.compaction import compactor, economics, ledger, notes_compaction, notes_updater
from compact.compaction.notes import template_for
from core.events import CompactFailed, CompactFinished
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt
from tests.compact.test_compactor import SUMMARY_REPLY, read_round, write_file
from tests.compact.test_notes_tool_chain import NotesWriter, run, write_files
from tests.conftest import make_session
from tests.fakeapi import FakeAPI, Reply, is_compaction, is_notes_update
from tests.helpers.bench import Bench, make_bench

THINKING = "claude-sonnet-5-5"


def notes_template_text(bench: Bench) -> str:
    return template_for(bench.ports)


def said(text: str) -> Message:
    return assistant([{"type": "text", "text": text}])


PRICES = economics.Prices()  # read 0.1, write 1.25, output 5


@pytest.mark.parametrize("kind", economics.KINDS)
def test_break_even_is_where_a_reset_starts_to_pay(kind: str) -> None:
    post, fixed, left = 15_000, 4_000, 30
    even = economics.break_even(post, fixed, left, kind, PRICES)
    assert math.isfinite(even) and even > post
    assert economics.pays(math.ceil(even) + 1, post, fixed, left, kind, PRICES)
    assert not economics.pays(math.floor(even) - 1, post, fixed, left, kind, PRICES)


def test_a_call_costs_the_reset_more_and_the_server_s_summary_most() -> None:
    post, fixed, left = 15_000, 4_000, 30
    points = [economics.break_even(post, fixed, left, k, PRICES) for k in economics.KINDS]
    assert points == sorted(points) and len(set(points)) == 4  # current notes < update < summary < server
    # the server's summary is priced as an uncached read of what it summarizes: it can't pay back unless
    # the reads it saves exceed a full input price per token, ten requests at a tenth each
    assert economics.break_even(post, fixed, 10, "server", PRICES) == math.inf
    assert math.isfinite(economics.break_even(post, fixed, 11, "server", PRICES))


def test_more_requests_left_make_an_earlier_reset_pay() -> None:
    points = [economics.break_even(15_000, 4_000, n, "notes", PRICES) for n in (5, 10, 20, 40)]
    assert points == sorted(points, reverse=True)


def test_a_family_s_own_cache_price_is_used() -> None:
    sonnet55 = economics.Prices.of("claude-sonnet-5-5")  # reads at $0.10 of $2.00: a twentieth
    sonnet45 = economics.Prices.of("claude-sonnet-4-5")
    assert sonnet55.read == pytest.approx(0.05) and sonnet45.read == pytest.approx(0.1)
    assert economics.break_even(15_000, 4_000, 30, "notes", sonnet55) > economics.break_even(
        15_000, 4_000, 30, "notes", sonnet45
    )


def test_the_cycle_counts_the_replies_after_what_the_last_compaction_added() -> None:
    summary = Message("user", [{"type": "text", "text": "summary"}], kind="summary")
    kept = [said("kept one"), user_prompt("kept prompt"), said("kept two")]
    added = Message("user", [{"type": "text", "text": "working state"}], kind="meta")
    new = [user_prompt("go on"), said("a"), user_prompt("more"), said("b")]
    messages = [summary, *kept, added, *new]
    assert economics.requests_in_cycle(messages, added.uuid) == 2
    assert economics.requests_in_cycle(messages) == 4  # without the marker: everything after the summary
    assert economics.requests_in_cycle(new) == 2  # no compaction yet: the whole session


def test_the_point_is_t_when_off_and_between_the_floor_and_t_when_on(
    tmp_path: Path, fake_api: FakeAPI
) -> None:
    for name in ("off", "on", "fresh"):
        (tmp_path / name).mkdir()
    off = make_bench(tmp_path / "off", fake_api, cost_aware=False)
    on = make_bench(tmp_path / "on", fake_api)
    for bench in (off, on):
        bench.add(user_prompt("read them all"))
        for _ in range(40):  # a long cycle: 40 requests so far
            bench.add(said("next"))
            bench.add(user_prompt("more"))
    t = on.thresholds().auto_compact
    assert economics.point(off.conv, off.ports, "notes") == t
    early = economics.point(on.conv, on.ports, "notes")
    assert t * economics.FLOOR_SHARE <= early < t / 2
    assert economics.point(on.conv, on.ports, "summary") == t  # the local summary runs at T
    # one request into the cycle, nothing pays back: T
    fresh = make_bench(tmp_path / "fresh", fake_api)
    fresh.add(user_prompt("hello"))
    assert economics.point(fresh.conv, fresh.ports, "server") == t


def test_cost_aware_restore_brings_back_modified_files_only(tmp_path: Path, fake_api: FakeAPI) -> None:
    bench = make_bench(tmp_path, fake_api)
    bench.add(user_prompt("Fix the parser."))
    read_only = [write_file(bench, f"ref{i}.py") for i in range(3)]
    for path in read_only:
        read_round(bench, path)
    edited = write_file(bench, "parser.py")
    read_round(bench, edited)
    edit_id = "toolu_edit_parser"
    edit = {"file_path": str(edited), "old_string": "line 1", "new_string": "line one"}
    bench.add(
        assistant(
            [{"type": "tool_use", "id": edit_id, "name": "Edit", "input": edit}], stop_reason="tool_use"
        )
    )
    bench.add(tool_results([tool_result_block(edit_id, "The file was edited.")]))
    bench.add(said("Fixed."))
    fake_api.reply_text(SUMMARY_REPLY)

    assert compactor.compact(bench.conv, bench.ports, "auto"), [
        e for e in bench.events if isinstance(e, CompactFailed)
    ]

    restored = [m for m in bench.messages[1:] if m.kind == "meta" and ledger.SNAPSHOT_KEY not in m.extra]
    shown = [m.text for m in restored if "read from disk again" in m.text]
    assert (
        len(shown) == 1 and str(edited.resolve()) in shown[0]
    )  # the file the work changed, not the three read
    assert set(bench.tool_ctx.read_files) == {str(edited.resolve())}


def _compactions(events: list) -> list[CompactFinished]:
    return [e for e in events if isinstance(e, CompactFinished)]


@pytest.mark.fake_profile(
    "4.x",
    reason="a notes compaction mid tool loop: on the 5.5 family a compaction mid loop keeps the loop's thinking through the server's summary instead (compact/compaction/backend.py)",
)
@pytest.mark.slow
def test_a_long_read_only_run_compacts_early_from_the_notes_and_restores_nothing_it_only_read(
    tmp_path: Path,
) -> None:
    with FakeAPI() as api:
        (tmp_path / "project").mkdir()
        paths = write_files(tmp_path / "project", 50, 220)  # ~4,000 tokens a read: 50 reads pass 167K
        session, events, _ = run(tmp_path, api, paths)
        t = session.thresholds().auto_compact
        done = _compactions(events)
        assert len(done) >= 2 and all(e.method == "session-memory" for e in done)
        assert all(t * economics.FLOOR_SHARE <= e.pre_tokens < t / 2 for e in done)  # well before T
        assert not [r for r in api.message_requests if is_compaction(r.body)]  # no summary request
        restored = [m for m in session.messages if m.kind == "meta" and "read from disk again" in m.text]
        assert restored == []  # every file was only read: none is worth a copy
        updates = [r for r in api.message_requests if is_notes_update(r.body)]
        assert len(updates) <= len(done) + 1  # about one notes update per compaction, no more
        api.check()


@pytest.mark.slow
def test_with_the_setting_off_the_same_run_compacts_at_t(tmp_path: Path) -> None:
    with FakeAPI() as api:
        (tmp_path / "project").mkdir()
        paths = write_files(tmp_path / "project", 50, 220)
        session, events, _ = run(tmp_path, api, paths, cost_aware=False)
        [done] = _compactions(events)
        assert done.pre_tokens >= session.thresholds().auto_compact
        api.check()


class TurnReader:
    """Each turn: one Read per reply over its own files (no text), then a closing line."""

    def __init__(self, turns: list[list[Path]]) -> None:
        self.turns, self.turn, self.next = turns, -1, 0

    def start(self) -> None:
        self.turn, self.next = self.turn + 1, 0

    def __call__(self, body: dict) -> Reply:
        files = self.turns[self.turn]
        if self.next < len(files):
            self.next += 1
            use = {"file_path": str(files[self.next - 1])}
            return Reply(
                [{"type": "tool_use", "id": f"toolu_t{self.turn}_{self.next}", "name": "Read", "input": use}]
            )
        return Reply.text(f"Turn {self.turn + 1} read.")


def test_on_a_thinking_model_a_turn_boundary_compacts_from_the_notes_with_no_call_and_no_kept_thinking(
    tmp_path: Path,
) -> None:
    with FakeAPI(profile="2026", binding="error") as api:
        project = tmp_path / "project"
        project.mkdir()
        paths = write_files(project, 24, 110)  # ~2,000 tokens a read; T = 27,000 at a 60K window
        model = TurnReader([paths[i : i + 4] for i in range(0, 24, 4)])
        api.on(is_notes_update, NotesWriter())
        api.on(lambda body: True, model)
        session, events = make_session(
            tmp_path, api, permission_mode="bypassPermissions", model=THINKING, context_window=60_000
        )
        for k in range(6):
            model.start()
            finished = run_turn(session, f"Read batch {k + 1}.")
            assert finished.stop_reason == "end_turn", finished.error
            notes_updater.wait_for_update(session.conv, 30)
        done = _compactions(events)
        at_boundary = [e for e in done if e.method == "session-memory"]
        assert at_boundary, [e.method for e in done]
        assert all(e.pre_tokens < session.thresholds().auto_compact for e in at_boundary)
        # no summary request, and a server's summary only for a compaction inside a tool loop
        assert not [r for r in api.message_requests if is_compaction(r.body)]
        server = [r for r in api.message_requests if "compaction" in r.body]
        assert len(server) <= len(done) - len(at_boundary)
        # what each kept: the new prompt alone, so no thinking was left out and none was refused
        assert session.conv.view_ctx.thinking.dropped_at_compaction == 0
        assert api.violations == [] and api.binding.refused == [] and api.binding.fallbacks == []


def test_bare_notes_keep_only_a_prompt_after_a_finished_turn(tmp_path: Path, fake_api: FakeAPI) -> None:
    bench = make_bench(tmp_path, fake_api, session_memory=True)
    bench.add(user_prompt("Read the files."))
    read_round(bench, write_file(bench, "a.py"))
    answer = said("Read a.py.")
    bench.add(answer)
    notes = bench.conv.notes_path
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text(notes_template_text(bench) + "\nRead a.py.\n")
    bench.conv.state.last_summarized_uuid = answer.uuid
    assert notes_compaction.bare(bench.conv, bench.ports) is None  # nothing after the notes yet
    prompt = user_prompt("Now b.py.")
    bench.add(prompt)
    made = notes_compaction.bare(bench.conv, bench.ports)
    assert made is not None and made.kept == [prompt] and "Read a.py." in made.summary
    read_round(bench, write_file(bench, "b.py"))  # a tool loop began: its messages can't follow the notes
    assert notes_compaction.bare(bench.conv, bench.ports) is None
