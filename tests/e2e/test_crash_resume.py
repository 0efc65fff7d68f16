"""The agent killed with SIGKILL while a Bash command runs: the command's process group dies with it
(tools.process.watchdog), and ``--continue`` tells the model the call was interrupted (agent.transcript.loader) with an
error result it records, so a second resume sends the very same request. Also: ``--resume`` of files
that hold no session records is refused with one line."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from agent.transcript.loader import INTERRUPTED_BY_STOP
from tests.fakeapi import FakeAPI, request_text
from tests.helpers.cli import wait_for
from tests.helpers.transcripts import has_tool_use, records, the_transcript, transcripts


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def results_for(body: dict, tool_use_id: str) -> list[dict]:
    return [
        b
        for m in body["messages"]
        if m["role"] == "user"
        for b in m["content"]
        if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_use_id
    ]


def test_kill_9_during_bash_kills_its_group_and_continue_reports_the_interrupted_call(
    spawn,  # noqa: F811 - the fixture imported above
    run_cli,
    project: Path,
    isolated_env: Path,
) -> None:
    command = "echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait"
    with FakeAPI() as api:
        api.reply_tool("Bash", {"command": command}, id="toolu_killed")
        proc = spawn(api, "-p", "Run the slow command.", "--dangerously-skip-permissions")
        path = wait_for(lambda: (p := the_transcript(isolated_env)) and has_tool_use(p) and p)
        wait_for(lambda: (project / "child.pid").exists() and (project / "child.pid").read_text().strip())
        shell, child = int((project / "shell.pid").read_text()), int((project / "child.pid").read_text())
        assert alive(shell) and alive(child)
        assert os.getpgid(child) == shell != os.getpgid(proc.pid)  # a group of its own, not the CLI's

        os.kill(proc.pid, signal.SIGKILL)  # only the agent: no help from the test for its children
        proc.communicate(timeout=30)
        assert wait_for(lambda: not alive(shell) and not alive(child), timeout=30)
        before = path.read_bytes()

        api.reply_text("I see the command was cut short.")
        res = run_cli(api, "-p", "what happened?", "--continue")
        assert res.code == 0, res.stderr
        assert res.stdout == "I see the command was cut short.\n"
        assert "stopped during a tool call (Bash)" in res.stderr
        body = api.message_requests[-1].body
        [result] = results_for(body, "toolu_killed")
        assert result == {
            "type": "tool_result",
            "tool_use_id": "toolu_killed",
            "content": INTERRUPTED_BY_STOP,
            "is_error": True,
        }
        assert "what happened?" in request_text(body)
        assert api.violations == []

        after = path.read_bytes()
        assert after.startswith(before)  # recorded by appending
        answer = next(r for r in records(path)[len(before.splitlines()) :] if r["type"] == "user")
        assert answer["message"]["content"][0]["tool_use_id"] == "toolu_killed"
        assert answer["parentUuid"] == json.loads(before.splitlines()[-1])["uuid"]

        # a second resume sends the same history (the answer is read back, not made up again)
        api.reply_text("Still cut short.")
        again = run_cli(api, "-p", "and now?", "--continue")
        assert again.code == 0, again.stderr
        assert "stopped during a tool call" not in again.stderr
        second = api.message_requests[-1].body
        assert second["messages"][:2] == body["messages"][:2]
        assert results_for(second, "toolu_killed") == [result]
        assert api.violations == []
    assert transcripts(isolated_env) == [path]


def test_resume_of_a_file_without_session_records_is_refused(
    run_cli, fake_api: FakeAPI, tmp_path: Path
) -> None:
    files = {
        "notes.txt": b"just some notes\nnothing to see\n",
        "blob.bin": bytes(range(256)) * 40,
        "other.jsonl": b'{"event": "start", "ts": 1}\n{"type": "metric", "value": 3}\n',
        "empty.jsonl": b"",
        "deep.jsonl": b"[" * 100_000 + b"]" * 100_000 + b"\n",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        res = run_cli(fake_api, "-p", "hello", "--resume", str(tmp_path / name))
        assert res.code != 0, name
        assert (
            res.stderr == f"compact-agent: {tmp_path / name} holds no session records (not a transcript?); "
            "nothing to resume\n"
        ), name
        assert res.stdout == ""
    assert fake_api.message_requests == []


def test_a_transcript_with_a_torn_last_line_still_resumes(
    run_cli, fake_api: FakeAPI, isolated_env: Path, tmp_path: Path
) -> None:
    fake_api.reply_text("First.")
    assert run_cli(fake_api, "-p", "REMEMBER-THIS").code == 0
    [path] = transcripts(isolated_env)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(path.read_bytes() + b'{"type":"user","mess')
    fake_api.reply_text("Second.")
    res = run_cli(fake_api, "-p", "go on", "--resume", str(copy))
    assert res.code == 0, res.stderr
    assert "REMEMBER-THIS" in request_text(fake_api.message_requests[-1].body)


def test_a_call_answered_before_the_stop_is_not_answered_again(run_cli, fake_api: FakeAPI) -> None:
    fake_api.reply_tool("Bash", {"command": "echo done"}, id="toolu_done")
    fake_api.reply_text("Finished.")
    assert run_cli(fake_api, "-p", "run it", "--dangerously-skip-permissions").code == 0
    fake_api.reply_text("Yes.")
    res = run_cli(fake_api, "-p", "again?", "--continue")
    assert res.code == 0, res.stderr
    assert "stopped during a tool call" not in res.stderr
    [result] = results_for(fake_api.message_requests[-1].body, "toolu_done")
    assert result["content"] == "done" and "is_error" not in result
