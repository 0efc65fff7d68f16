"""The working state survives every compaction, whatever the summary says (issue 14 §1), end to end.

A scripted model keeps a todo list, writes one file, edits another, runs a command that fails with exit
code 3, then reads big files until the context has to be compacted. Every summary it writes is the same
poor sentence. The first request after each kind of compaction — automatic summary, session-memory
notes, reactive (prompt too long), /compact — must still name every modified path, the failing command
with its exit code, the user's first-prompt constraint word for word and the todo list.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.config.settings import Settings
from agent.runtime.lifecycle import open_session
from agent.runtime.loop import run_turn
from compact.compaction import ledger
from compact.compaction.notes_template import SECTIONS
from compact.decision.config import CompactConfig
from tests.fakeapi import FakeAPI, Reply, is_compaction, is_notes_update, last_user_text, request_text
from tests.helpers.session import make_session
from tests.helpers.transcripts import records, transcripts

POOR = "We worked on some code."
CONSTRAINT = (
    "Rename f0_0 to first_handler. CONSTRAINT-9k: never touch tests/legacy_test.py and never run git push."
)
FAIL_CMD = "python3 -c \"import sys; print('boom: parse failed'); sys.exit(3)\""
TODOS = [
    {"content": "Rename the handler", "status": "in_progress", "activeForm": "Renaming the handler"},
    {"content": "Run the tests", "status": "pending", "activeForm": "Running the tests"},
    {"content": "Write a helper", "status": "completed", "activeForm": "Writing a helper"},
]
WORDS = "alpha beta gamma delta parser token stream buffer index value".split()
NOTES_PATH = re.compile(r"(/\S+/session-memory/summary\.md)")
# the client's own compactions, whose summary is the poor one below (the server's summary, which the 5.5
# family's tool loops get by default, is tests/agent/runtime/test_compaction_backends.py's)
LOCAL = {"COMPACT_AGENT_SERVER_COMPACTION": "0"}
ENV = {"COMPACT_AGENT_SESSION_MEMORY": "0", **LOCAL}


def make_files(project: Path, count: int) -> list[Path]:
    """Source files of 250 lines, about 5,500 tokens each as Read shows them."""
    (project / "src").mkdir(exist_ok=True)
    paths = []
    for n in range(count):
        lines = [
            f"def f{n}_{i}(x): return {' '.join(WORDS[(i * 7 + j + n) % 10] for j in range(9))!r}"
            for i in range(250)
        ]
        path = project / "src" / f"module_{n:02d}.py"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


class Refactorer:
    """The scripted model: todo, write, failing command, read + edit, then reads until done."""

    def __init__(self, project: Path, paths: list[Path]):
        self.helper = project / "src" / "helper.py"
        first = paths[0]
        self.steps: list[Reply] = [
            Reply.tool("TodoWrite", {"todos": TODOS}),
            Reply.tool("Write", {"file_path": str(self.helper), "content": "def helper():\n    return 1\n"}),
            Reply.tool("Bash", {"command": FAIL_CMD}),
            Reply.tool("Read", {"file_path": str(first)}),
            Reply.tool(
                "Edit",
                {"file_path": str(first), "old_string": "def f0_0(x)", "new_string": "def first_handler(x)"},
            ),
            *[Reply.tool("Read", {"file_path": str(p)}) for p in paths[1:]],
        ]
        self.modified = [self.helper, first]
        self.done = 0

    def __call__(self, body: dict) -> Reply:
        if self.done < len(self.steps):
            self.done += 1
            return self.steps[self.done - 1]
        return Reply.text("All done.")


class PoorNotes:
    """Answers notes updates with one poor line in Current State (an Edit of the notes file)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, body: dict) -> Reply:
        self.n += 1
        path = NOTES_PATH.search(last_user_text(body)).group(1)  # type: ignore[union-attr]
        guide = f"_{dict(SECTIONS)['Current State']}_"
        text = Path(path).read_text()
        if guide not in text:
            return Reply.text("Nothing to change.")
        return Reply.tool("Edit", {"file_path": path, "old_string": guide, "new_string": f"{guide}\n{POOR}"})


def working_state(text: str) -> str:
    [block] = re.findall(r"<working-state>\n.*?</working-state>", text, re.S)
    return block


def assert_state_survives(body: dict, model: Refactorer) -> None:
    text = request_text(body)
    state = working_state(text)
    for path in model.modified:
        assert f"- {path}: 1 edit, " in state
    assert f"- [exit 3] $ {FAIL_CMD}\n    → boom: parse failed" in state
    assert "- [>] Rename the handler (in progress)\n- [ ] Run the tests\n- [x] Write a helper" in state
    assert re.search(
        r"<user-message( current-request=\"true\"| latest-request=\"true\" answered=\"true\")?>\n"
        + re.escape(CONSTRAINT)
        + "\n</user-message>",
        text,
    )


def first_after(api: FakeAPI, start: int) -> dict:
    """The first main request served after index ``start`` of the requests."""
    return next(
        r.body
        for r in api.message_requests[start + 1 :]
        if r.status == 200 and not is_compaction(r.body) and not is_notes_update(r.body)
    )


def boundaries(home: Path) -> list[dict[str, Any]]:
    [path] = transcripts(home)
    return [r for r in records(path) if r.get("subtype") == "compact_boundary"]


def test_auto_summary_compaction_keeps_the_working_state(run_cli, project: Path, isolated_env: Path) -> None:
    model = Refactorer(project, make_files(project, 9))
    with FakeAPI() as api:
        api.on(is_compaction, Reply.text(POOR))
        api.on(lambda body: True, model)
        res = run_cli(
            api,
            "-p",
            CONSTRAINT,
            "--dangerously-skip-permissions",
            # compaction at T in the foreground, so that every summary request here is one that is applied
            # (prepared candidates are refused for this summary's missing sections: tests/compact/test_preparer.py)
            env={**ENV, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "15", "COMPACT_AGENT_PREPARE_COMPACTION": "0"},
        )
    assert res.code == 0, res.stderr
    assert api.violations == []
    compactions = [i for i, r in enumerate(api.message_requests) if is_compaction(r.body)]
    assert len(compactions) == 2
    for at in compactions:  # the second compaction summarizes the first one's attachment: nothing is lost
        side = last_user_text(api.message_requests[at].body)
        assert "A working-state record will be attached after the summary" in side
        after = first_after(api, at)
        assert POOR in request_text(after)
        assert_state_survives(after, model)
    # the compaction lines say how much of the state was attached
    # (how many reads come before each depends on the size of the system prompt and the tools)
    lines = re.findall(
        r"s · state: 2 modified files, (\d+) read, 1 command, 3 todos, 1 user message\n", res.stderr
    )
    assert len(lines) == 2 and int(lines[0]) < int(lines[1]) == 4 + int(lines[0])
    assert boundaries(isolated_env)[0]["compactMetadata"]["trigger"] == "auto"


def test_with_compaction_prepared_in_the_background_the_working_state_survives_too(
    run_cli, project: Path, isolated_env: Path
) -> None:
    model = Refactorer(project, make_files(project, 9))
    with FakeAPI() as api:
        api.on(is_compaction, Reply.text(POOR))
        api.on(lambda body: True, model)
        res = run_cli(
            api,
            "-p",
            CONSTRAINT,
            "--dangerously-skip-permissions",
            env={**ENV, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "15"},
        )
    assert res.code == 0, res.stderr
    assert api.violations == []
    assert len(boundaries(isolated_env)) == 2
    last = [
        r.body for r in api.message_requests if not is_compaction(r.body) and not is_notes_update(r.body)
    ][-1]
    assert POOR in request_text(last)
    assert_state_survives(last, model)


def test_reactive_compaction_keeps_the_working_state(run_cli, project: Path, isolated_env: Path) -> None:
    model = Refactorer(project, make_files(project, 12))
    with FakeAPI(context_window=60_000) as api:
        api.on(is_compaction, Reply.text(POOR))
        api.on(lambda body: True, model)
        res = run_cli(
            api, "-p", CONSTRAINT, "--dangerously-skip-permissions", env={**ENV, "DISABLE_AUTO_COMPACT": "1"}
        )
    assert res.code == 0, res.stderr
    too_long = next(
        i for i, r in enumerate(api.message_requests) if r.status == 400 and not is_compaction(r.body)
    )
    assert_state_survives(first_after(api, too_long), model)
    assert len(boundaries(isolated_env)) == 1


def test_manual_compact_keeps_the_working_state(run_cli, project: Path, isolated_env: Path) -> None:
    model = Refactorer(project, make_files(project, 4))
    env = {**ENV, "DISABLE_AUTO_COMPACT": "1"}
    with FakeAPI() as api:
        api.on(is_compaction, Reply.text(POOR))
        api.on(lambda body: True, model)
        assert run_cli(api, "-p", CONSTRAINT, "--dangerously-skip-permissions", env=env).code == 0
        manual = run_cli(api, "-p", "/compact", "--continue", env=env)
        assert manual.code == 0, manual.stderr
        at = len(api.message_requests) - 1
        nxt = run_cli(api, "-p", "What is next?", "--continue", env=env)
    assert nxt.code == 0, nxt.stderr
    after = first_after(api, at)
    assert_state_survives(after, model)
    # the new request is live, after the attachment; the constraint is the user's earlier words now
    assert "What is next?" in json.dumps(after["messages"][-1])
    assert boundaries(isolated_env)[0]["compactMetadata"]["trigger"] == "manual"


@pytest.mark.fake_profile(
    "4.x",
    reason="a notes compaction mid tool loop keeps a tail; on the 5.5 family that tail's thinking can't follow a client-written summary, so the loop is summarized whole instead (compact/compaction/backend.py)",
)
def test_notes_compaction_keeps_the_working_state(run_cli, project: Path, isolated_env: Path) -> None:
    model = Refactorer(project, make_files(project, 12))
    notes = PoorNotes()
    with FakeAPI() as api:
        api.on(is_notes_update, notes)
        api.on(is_compaction, Reply.text(POOR))
        api.on(lambda body: True, model)
        res = run_cli(
            api,
            "-p",
            CONSTRAINT,
            "--dangerously-skip-permissions",
            env={"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "30", **LOCAL},
            timeout=180,
        )
    assert res.code == 0, res.stderr
    assert api.violations == []
    assert notes.n >= 1, res.stderr
    sent = [r.body for r in api.message_requests]
    assert not any(is_compaction(b) for b in sent)  # compacted from the notes, no summary request
    # one compaction, or two when the notes updates (background) land late on a loaded machine: each from
    # the notes (no summary request above), each automatic; the first one's request keeps the state
    found = boundaries(isolated_env)
    main = [i for i, b in enumerate(sent) if not is_notes_update(b)]
    at = next(
        i
        for i in main
        if POOR in json.dumps(sent[i]["messages"][0]) and "<working-state>" in request_text(sent[i])
    )
    assert found and all(b["compactMetadata"]["trigger"] == "auto" for b in found)
    assert_state_survives(sent[at], model)


# --- resume ---------------------------------------------------------------------------------------------------


def test_resume_rebuilds_the_same_ledger(tmp_path: Path, fake_api: FakeAPI) -> None:
    project = tmp_path / "project"
    project.mkdir()
    model = Refactorer(project, make_files(project, 9))
    fake_api.on(is_compaction, Reply.text(POOR))
    fake_api.on(lambda body: True, model)
    session, events = make_session(
        tmp_path, fake_api, permission_mode="bypassPermissions", session_memory=False, autocompact_pct=15
    )
    assert run_turn(session, CONSTRAINT).stop_reason == "end_turn"
    assert session.last_compaction is not None
    live = ledger.derive(session.messages, str(project))
    assert [c.command for c in live.commands] == [FAIL_CMD]
    assert live.todos == TODOS and set(live.modified) == {str(p) for p in model.modified}

    settings = Settings(
        cwd=project,
        home=tmp_path / "home",
        base_url=fake_api.url,
        api_key="test-key",
        compaction=CompactConfig(session_memory=False, autocompact_pct=15),
    )
    again = open_session(settings, emit=lambda e: None, ask=None, resume=session.session_id)
    assert ledger.derive(again.messages, str(project)) == live
    # and the same attachment bytes: the resumed list holds the very message the live one sent
    [attached] = [m for m in again.messages if ledger.SNAPSHOT_KEY in m.extra]
    [live_attached] = [m for m in session.messages if ledger.SNAPSHOT_KEY in m.extra]
    assert attached.content == live_attached.content and attached.uuid == live_attached.uuid
