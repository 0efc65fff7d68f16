"""Crashes (docs/files.md, docs/files.md): the CLI killed with SIGKILL in the middle of a tool call or of a
compaction, and a transcript whose last line was torn. ``--continue`` must then send a valid request, and
nothing the transcript held before the crash may be lost or rewritten."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

from tests.fakeapi import FakeAPI, Reply, Route, is_compaction, request_text
from tests.helpers.cli import kill_tree, runs_under, wait_for
from tests.helpers.compaction import make_files
from tests.helpers.transcripts import has_tool_use, records, the_transcript, transcripts

SUMMARY = (
    "<analysis>thinking it over</analysis>\n"
    "<summary>1. Primary Request and Intent: SUMMARY-AFTER-CRASH read the project files.</summary>"
)
NO_NOTES = {"COMPACT_AGENT_SESSION_MEMORY": "0"}


def ends_with_prompt(body: dict, prompt: str) -> bool:
    """The last user message ends with ``prompt`` (reminders the agent attaches aside)."""
    texts = [
        b["text"]
        for b in body["messages"][-1]["content"]
        if b.get("type") == "text" and not b["text"].startswith("<system-reminder>")
    ]
    return body["messages"][-1]["role"] == "user" and bool(texts) and texts[-1].startswith(prompt)


def valid_json_lines(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


# --- kill -9 during a tool call ------------------------------------------------------------------------------


def test_kill_during_a_tool_call_then_continue(spawn, run_cli, isolated_env: Path) -> None:
    with FakeAPI() as api:
        api.reply_tool("Bash", {"command": "sleep 30"}, id="toolu_sleeping")
        proc = spawn(api, "-p", "Wait for the slow command.", "--dangerously-skip-permissions")
        path = wait_for(lambda: (p := the_transcript(isolated_env)) and has_tool_use(p) and p)
        wait_for(lambda: runs_under(proc.pid, "sleep 30"))  # the command is running now
        before = path.read_bytes()
        kill_tree(proc)
        assert proc.returncode == -signal.SIGKILL
        assert path.read_bytes().startswith(before)

        api.reply_text("Carrying on without the slow command.")
        res = run_cli(api, "-p", "go on", "--continue")
    assert res.code == 0, res.stderr
    assert res.stdout == "Carrying on without the slow command.\n"
    assert api.violations == []
    body = api.message_requests[-1].body
    assert "Wait for the slow command." in request_text(body)
    assert ends_with_prompt(body, "go on")
    uses = [b["id"] for m in body["messages"] for b in m["content"] if b.get("type") == "tool_use"]
    results = [
        b["tool_use_id"] for m in body["messages"] for b in m["content"] if b.get("type") == "tool_result"
    ]
    assert uses == results  # dropped, or answered: never dangling
    after = path.read_bytes()
    assert after.startswith(before)  # nothing recorded before the kill is lost or rewritten
    assert [r["uuid"] for r in valid_json_lines(after)][: len(valid_json_lines(before))] == [
        r["uuid"] for r in valid_json_lines(before)
    ]
    assert [p for p in transcripts(isolated_env)] == [path]


# --- kill -9 while a compaction waits for its summary ---------------------------------------------------------


def test_kill_during_a_compaction_then_continue(spawn, run_cli, project: Path, isolated_env: Path) -> None:
    paths = make_files(project, 8)
    # T = 27,000 tokens; compaction in the foreground at T (as before background preparation), so the kill
    # comes while the agent waits for the summary, and the continued run compacts before anything else
    # The LLM summary, which the test holds up (the 5.5 family's tool loop would otherwise get the server's).
    env = {
        **NO_NOTES,
        "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "15",
        "COMPACT_AGENT_PREPARE_COMPACTION": "0",
        "COMPACT_AGENT_SERVER_COMPACTION": "0",
    }
    asked, release = threading.Event(), threading.Event()

    def slow_summary(body: dict) -> Reply:
        asked.set()
        release.wait(30)
        return Reply.text(SUMMARY)

    reads = iter(paths)

    def reader(body: dict) -> Reply:
        nxt = next(reads, None)
        return Reply.tool("Read", {"file_path": str(nxt)}) if nxt else Reply.text("All files read.")

    with FakeAPI() as api:
        route = api.on(is_compaction, slow_summary)
        api.on(lambda body: True, reader)
        proc = spawn(api, "-p", "Read every file. EARLY-PROMPT-MARK", env=env)
        assert asked.wait(120), "no compaction was asked for"
        path = the_transcript(isolated_env)
        before = path.read_bytes()
        kill_tree(proc)
        release.set()
        killed = path.read_bytes()
        assert killed.startswith(before)
        recs = valid_json_lines(killed)
        for i, rec in enumerate(recs):  # no half compaction: a boundary is always followed by its summary
            if rec.get("subtype") == "compact_boundary":
                assert i + 1 < len(recs) and recs[i + 1].get("isCompactSummary"), "boundary without summary"

        api.routes[api.routes.index(route)] = Route(is_compaction, Reply.text(SUMMARY))
        sent_before = len(api.message_requests)
        res = run_cli(api, "-p", "go on", "--continue", env=env)
    assert res.code == 0, res.stderr
    assert api.violations == []
    after = path.read_bytes()
    assert after.startswith(killed)
    read_before = [
        b["input"]["file_path"]
        for r in recs
        if r.get("type") == "assistant"
        for b in r["message"]["content"]
        if b.get("type") == "tool_use"
    ]
    assert read_before  # the pre-compaction reads are intact in the file
    assert "EARLY-PROMPT-MARK" in after.decode()
    # the continued context is still over T: it compacts (the prompt with it), then goes on from the summary
    sent = [r.body for r in api.message_requests[sent_before:]]
    assert is_compaction(sent[0]) and "go on" in request_text(sent[0])
    assert "EARLY-PROMPT-MARK" in request_text(sent[0])
    # the early history is gone; the early prompt survives only as the user's words in the working state
    text = request_text(sent[1])
    assert "SUMMARY-AFTER-CRASH" in text and text.count("EARLY-PROMPT-MARK") == 1
    assert "<user-message>\nRead every file. EARLY-PROMPT-MARK\n</user-message>" in text
    assert res.stdout == "All files read.\n"


def test_a_boundary_without_its_summary_still_resumes(run_cli, fake_api: FakeAPI, isolated_env: Path) -> None:
    """A crash between the boundary line and the summary line (the two are separate appends)."""
    fake_api.reply_text("First answer.")
    assert run_cli(fake_api, "-p", "PRE-BOUNDARY-PROMPT").code == 0
    [path] = transcripts(isolated_env)
    last = records(path)[-1]
    boundary = {
        "parentUuid": None,
        "logicalParentUuid": last["uuid"],
        "isSidechain": False,
        "type": "system",
        "subtype": "compact_boundary",
        "content": "Conversation compacted",
        "sessionId": last["sessionId"],
        "uuid": "b0b0b0b0-0000-4000-8000-000000000001",
        "timestamp": last["timestamp"],
        "compactMetadata": {"trigger": "auto", "preTokens": 170000},
    }
    with open(path, "a") as f:
        f.write(json.dumps(boundary) + "\n")
    before = path.read_bytes()
    fake_api.reply_text("Second answer.")
    res = run_cli(fake_api, "-p", "go on", "--continue")
    assert res.code == 0, res.stderr
    assert fake_api.violations == []
    body = fake_api.message_requests[-1].body
    assert "PRE-BOUNDARY-PROMPT" in request_text(body) and "First answer." in request_text(body)
    assert ends_with_prompt(body, "go on")
    assert path.read_bytes().startswith(before)


# --- a torn last line ----------------------------------------------------------------------------------------


def test_a_torn_last_line_is_skipped_with_a_warning(run_cli, fake_api: FakeAPI, isolated_env: Path) -> None:
    fake_api.reply_text("The answer is 42.")
    assert run_cli(fake_api, "-p", "What is the answer?").code == 0
    [path] = transcripts(isolated_env)
    whole = path.read_bytes()
    torn = json.dumps(
        {
            "parentUuid": records(path)[-1]["uuid"],
            "type": "user",
            "message": {"role": "user", "content": "this line was cut off by the crash"},
        }
    ).encode()[:60]
    path.write_bytes(whole + torn)

    fake_api.reply_text("Still 42.")
    res = run_cli(fake_api, "-p", "go on", "--continue")
    assert res.code == 0, res.stderr
    assert res.stdout == "Still 42.\n"
    assert "incomplete" in res.stderr and "skipped" in res.stderr
    assert fake_api.violations == []
    body = fake_api.message_requests[-1].body
    assert "What is the answer?" in request_text(body) and "The answer is 42." in request_text(body)
    assert "cut off" not in request_text(body)
    after = path.read_bytes()
    assert after.startswith(whole + torn)  # the torn bytes stay; our next record starts on a line of its own
    lines = after[len(whole) :].split(b"\n")
    assert lines[0] == torn
    assert all(json.loads(line) for line in lines[1:] if line)
    # and a third run over the repaired file warns the same and works
    fake_api.reply_text("Yes, 42.")
    again = run_cli(fake_api, "-p", "sure?", "--continue")
    assert again.code == 0, again.stderr
    assert fake_api.violations == []
