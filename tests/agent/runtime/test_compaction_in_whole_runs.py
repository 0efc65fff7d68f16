"""Compaction in whole runs of the agent (a Session and its loop on the fake API): notes over long tool-only runs, early compaction and what it restores, a thinking model's turn boundary, the ledger over real tool runs, a failing notes update, the count after a reactive compaction."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.frontend import commands
from agent.runtime.loop import run_turn
from agent.runtime.tool_exec import run_tools
from compact.compaction import compactor, economics, ledger, notes_updater, restore
from compact.compaction import notes as notes_doc
from compact.compaction.ledger import Command, FileChange, Ledger
from compact.compaction.notes_template import TEMPLATE
from compact.decision import thresholds
from compact.request_cycle import overhead_tokens
from compact.workers import preparer
from core import tokens as core_tokens
from core.events import CompactFinished, CompactStarted, TodosChanged, TokenState
from core.messages import Message, assistant, user_prompt
from tests.fakeapi import (
    Error,
    FakeAPI,
    Reply,
    estimate_tokens,
    is_compaction,
    is_notes_update,
    last_user_text,
    read_paths,
)
from tests.helpers.compaction import (
    SUMMARY_REPLY,
    TODOS,
    conversation,
    of_type,
)
from tests.helpers.notes import (
    guide,
    read_round,
    warnings,
)
from tests.helpers.session import make_session

THINKING = "claude-sonnet-5-5"


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
        # no summary request, and a server's summary only for a compaction inside a tool loop or for a
        # candidate prepared in the background that no compaction used (yet: one started after the last
        # turn's reply, in flight or not by now, is why a bare count failed 4 runs in 16 at b394d09)
        prepared = preparer.preparer(session.conv)
        assert prepared is not None and prepared.join(30)
        assert not [r for r in api.message_requests if is_compaction(r.body)]
        server = [r for r in api.message_requests if "compaction" in r.body]
        unused = prepared.stats.prepared - prepared.stats.applied
        assert len(server) <= len(done) - len(at_boundary) + unused
        # what each kept: the new prompt alone, so no thinking was left out and none was refused
        assert session.conv.view_ctx.thinking.dropped_at_compaction == 0
        assert api.violations == [] and api.binding.refused == [] and api.binding.fallbacks == []


def test_api_errors_are_reported_once_and_the_conversation_goes_on(tmp_path, api):
    from agent.runtime.loop import run_turn
    from tests.helpers.session import make_session

    session, events = make_session(tmp_path, api, session_id="sid")  # the whole loop runs here
    notes_route = api.on(is_notes_update, Error(500, "api_error", "notes backend down"))
    session.add(user_prompt("read the sources"))
    read_round(session, 12_000)
    api.reply_text("Here is what I found.")
    api.reply_text("And here is more.")

    # the loop calls after_response after each reply: the update starts, fails, and the turn is unaffected
    assert run_turn(session, "what did you find?").text == "Here is what I found."
    assert notes_updater.wait_for_update(session.conv, 30)
    finished = run_turn(session, "more?")
    assert finished.stop_reason == "end_turn" and finished.text == "And here is more."
    assert notes_updater.wait_for_update(session.conv, 30)
    assert notes_updater.update_notes(session.conv, session.ports) is False  # later failures are not reported
    assert len(notes_route.hits) >= 1  # a background update retries on an eighth of the budget: 0.25 s here
    [warning] = warnings(events)
    assert "Session notes were not updated" in warning and "500" in warning
    assert notes_doc.notes_text(session.notes_path) == TEMPLATE
    assert session.state.last_summarized_uuid is None
    api.check()


def call(session: Any, name: str, args: dict[str, Any]) -> Message:
    """One assistant tool call run for real, both messages recorded as the loop records them."""
    use = {"type": "tool_use", "id": f"toolu_{len(session.messages):03d}", "name": name, "input": args}
    session.add(assistant([use], stop_reason="tool_use"))
    result = run_tools(session, [use])
    session.add(result)
    return result


def test_the_ledger_follows_real_tool_runs(tmp_path: Path, fake_api: FakeAPI) -> None:
    session, events = make_session(tmp_path, fake_api, permission_mode="bypassPermissions")
    project = session.tool_ctx.project_dir
    a, b = project / "a.py", project / "b.py"
    b.write_text("".join(f"b{i}\n" for i in range(30)))
    session.add(user_prompt("Fix a.py and keep b.py as it is. Never run rm."))
    call(session, "Write", {"file_path": str(a), "content": "x = 1\ny = 2\n"})
    call(session, "Read", {"file_path": str(a)})
    call(session, "Edit", {"file_path": str(a), "old_string": "y = 2\n", "new_string": "y = 3\nz = 4\n"})
    call(session, "Read", {"file_path": str(b), "offset": 10, "limit": 5})
    call(session, "Bash", {"command": "echo nope; exit 2"})
    call(session, "Bash", {"command": "mkdir -p sub && cd sub && echo moved"})
    call(session, "Bash", {"command": "echo nope; exit 2"})
    call(session, "TodoWrite", {"todos": TODOS})
    times = [m.timestamp for m in session.messages if m.kind == "tool_results"]

    state = ledger.derive(session.messages, str(project))

    assert state == Ledger(
        cwd=str(project / "sub"),
        modified={str(a): FileChange(edits=2, added=4, removed=1, last=times[2])},
        read={str(a): "whole file", str(b): "lines 10-14"},
        commands=[  # each command's latest result only
            Command("mkdir -p sub && cd sub && echo moved", 0, "moved", times[5]),
            Command("echo nope; exit 2", 2, "nope", times[6]),
        ],
        todos=TODOS,
        prompts=["Fix a.py and keep b.py as it is. Never run rm."],
        named=[str(a), str(b)],
    )
    assert of_type(events, TodosChanged) == [TodosChanged(tuple(TODOS))]
    text = ledger.render(state)
    assert f"- {a}: 2 edits, +4 -1 lines, last changed {times[2]}" in text
    assert "- [exit 2] $ echo nope; exit 2\n    → nope" in text
    assert "- [x] Fix the parser\n- [>] Run the tests (in progress)" in text
    # /state shows the same, with the user's words
    shown = commands.run(session, "/state").text
    assert "- [x] Fix the parser\n- [>] Run the tests (in progress)" in shown
    assert f"- {a}: 2 edits, +4 -1 lines, last changed {times[2]}" in shown
    assert "- Fix a.py and keep b.py as it is. Never run rm." in shown
    assert "<" not in shown and "not instructions from the system" not in shown  # the model's wrapping
    assert shown.endswith("state: 1 modified file, 2 read, 2 commands, 2 todos, 1 user message")


def test_todowrite_never_asks(tmp_path: Path, fake_api: FakeAPI) -> None:
    session, _ = make_session(tmp_path, fake_api)  # default mode: edits and commands would ask
    assert session.permissions.check("TodoWrite", {"todos": TODOS}).behavior == "allow"


def test_rereading_a_restored_unchanged_file_is_answered_from_the_restore(
    tmp_path: Path, fake_api: FakeAPI
) -> None:
    session, _ = make_session(
        tmp_path, fake_api, permission_mode="bypassPermissions", session_memory=False, cost_aware=False
    )  # read files restored (cost-aware compaction restores only modified ones)
    project = session.tool_ctx.project_dir
    path = project / "m.py"
    path.write_text("".join(f"line {i}\n" for i in range(40)))
    session.add(user_prompt("look at m.py"))
    call(session, "Bash", {"command": "seq 1 600"})  # what the compaction takes away (else it has nothing to)
    call(session, "Read", {"file_path": str(path)})
    fake_api.reply_text(SUMMARY_REPLY)
    assert compactor.compact(session.conv, session.ports, "manual")
    assert str(path) in session.conv.restored

    short = call(session, "Read", {"file_path": str(path)}).tool_results[0]["content"]
    assert short == restore.UNCHANGED.format(path=path, first=1, last=40)
    part = call(session, "Read", {"file_path": str(path), "offset": 5, "limit": 3}).tool_results[0]["content"]
    assert part.startswith("     5\tline 4")  # another range: read for real
    path.write_text("changed\n")
    again = call(session, "Read", {"file_path": str(path)}).tool_results[0]["content"]
    assert again.startswith("     1\tchanged")  # changed on disk since: read for real


def test_reactive_compaction_calibrates_against_the_view_actually_sent(tmp_path):
    from agent.runtime.loop import run_turn
    from tests.helpers.compaction import SUMMARY_REPLY
    from tests.helpers.session import make_session

    with FakeAPI() as api:
        session, _ = make_session(tmp_path, api, auto_compact=False, session_memory=False)
        conversation(session, [f"f{i}.py" for i in range(30)])
        api.prompt_too_long(actual=210_000, maximum=200_000)
        api.reply_text(SUMMARY_REPLY)
        api.reply_text("Carrying on.")

        assert run_turn(session, "go on").stop_reason == "end_turn"

        reply = session.messages[-1]
        sent = session.conv.view().tagged[:-1]  # the compacted view the retry carried
        real = sum(
            reply.usage[k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        expected = real / (overhead_tokens(session.request([])) + sum(m.tokens for m in sent))
        assert 0.5 < expected < 2.0
        assert session.conv.calibration.samples == 1
        assert abs(session.conv.calibration.ratio - expected) < 1e-9


NOTES_PATH = re.compile(r"(/\S+/session-memory/summary\.md)")


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


THRESHOLD = 27_000  # min(⌊180,000 · 15%⌋, 167,000)

TOLERANCE = 0.05


def block_text(block: Any) -> str:
    """What a content-counting server tokenizes in one block."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        return block.get("text", "")
    if kind == "tool_use":
        return block.get("name", "") + json.dumps(block.get("input", {}))
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
    return json.dumps(block)  # a tool definition, anything else


def server_tokenizer(factor: float) -> Any:
    """The server's count of a block. Each request repeats the history before it, so a text's count is
    kept, not encoded again: 2,800 of the 5,500 encodings a run made were of texts already counted (3.7 of
    the run's 7.8 s of CPU went to encoding)."""
    enc = core_tokens.encoding()

    @functools.cache
    def count(text: str) -> int:
        return round(factor * len(enc.encode_ordinary(text)))

    return lambda block: count(block_text(block))


def source(n: int, functions: int) -> str:
    return "".join(
        f"def handler_{n}_{i}(request):\n    return respond(request, code={i * 7 + n})\n"
        for i in range(functions)
    )


class Reader:
    """Reads one file per reply; answers summary requests with a short summary; stops after ``total``."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths, self.next = paths, 0

    def __call__(self, body: dict) -> Reply:
        if "<summary>" in last_user_text(body):
            return Reply.text("<summary>1. Primary Request and Intent: read every handler file.</summary>")
        if self.next < len(self.paths):
            self.next += 1
            return Reply.tool("Read", {"file_path": str(self.paths[self.next - 1])})
        return Reply.text("All handlers read.")


def server_count(api: FakeAPI, session: Any, api_messages: list[dict]) -> int:
    params = session.request(api_messages).params()
    return estimate_tokens(
        {"system": params.get("system"), "tools": params.get("tools"), "messages": params["messages"]},
        api.tokenizer,
    )


def near(ours: int, theirs: int) -> bool:
    return abs(ours - theirs) <= TOLERANCE * theirs


@pytest.mark.parametrize("factor", [0.5, 1.6])
def test_counts_and_the_compaction_moment_follow_the_servers_tokenizer(tmp_path: Path, factor: float) -> None:
    # the 4.x profile: replies as scripted, so the counts compared are the files' (a 5.5-family reply's
    # signed thinking blocks are counted by test_effort's requests)
    with FakeAPI(tokenizer=server_tokenizer(factor), profile="4.x") as api:
        session, events = make_session(  # a 200K window: THRESHOLD is 15% of it
            tmp_path,
            api,
            autocompact_pct=15,
            session_memory=False,
            cost_aware=False,  # the moment checked is T's (cost-aware compaction comes earlier when it pays)
            permission_mode="bypassPermissions",
            model="claude-sonnet-4-5",
            model_explicit=True,
        )
        project = session.settings.cwd
        # files of about 450 tokens as the server counts them: each read is a small step (< 2% of T),
        # and 1.3 T of them in all gets past the threshold once, whatever the factor
        functions = round(18 / factor)
        paths = []
        for n in range(round(1.3 * THRESHOLD / 450)):
            path = project / f"handler_{n:02d}.py"
            path.write_text(source(n, functions))
            paths.append(path)
        api.on(lambda body: True, Reader(paths))
        before_compaction: list[int] = []

        def watch(event: Any) -> None:
            events.append(event)
            if isinstance(event, CompactStarted):  # what the server would count for the compacted view
                before_compaction.append(server_count(api, session, session.conv.view().api))

        session.emit = watch
        finished = run_turn(session, "Read every handler file, one at a time.")
        assert finished.stop_reason == "end_turn", finished.error

        main = [r.body for r in api.message_requests if "<summary>" not in last_user_text(r.body)]
        served = [estimate_tokens(body, api.tokenizer) for body in main]
        shown = [e.tokens for e in events if isinstance(e, TokenState)]
        assert len(shown) == len(served)
        # the bar's number before each request is the server's count of that request, from the second on
        off = [
            (i, ours, theirs)
            for i, (ours, theirs) in enumerate(zip(shown, served, strict=True))
            if i and not near(ours, theirs)
        ]
        assert off == []

        [done] = [e for e in events if isinstance(e, CompactFinished)]
        [pre_server] = before_compaction
        at = next(i for i, body in enumerate(main) if "This session continues" in json.dumps(body))
        # not one request too late: the previous request was under T, give or take the calibrated count's
        # own error right at the line (with TodoWrite among the tools, 27,001 served where we counted 26,975)
        assert served[at - 1] < THRESHOLD * 1.005
        assert THRESHOLD * (1 - TOLERANCE) <= pre_server <= THRESHOLD * (1 + TOLERANCE)  # ... nor late
        assert near(done.pre_tokens, pre_server)
        assert near(done.post_tokens, served[at])  # "a → b": b is what the next request really was

        usage = commands.context_usage(session)
        assert near(usage.used, server_count(api, session, session.conv.view().api))
        api.check()
