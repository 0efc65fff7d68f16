"""Transcripts under stress, through the real CLI: a full disk (RLIMIT_FSIZE stands in for it) and two
runs resuming the same session at once, as processes (a limit on the process, two processes at once);
inputs too large for the window, in this process (run_cli). One clear line, never a traceback; nothing
vanishes, nothing is glued.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import threading
from pathlib import Path

from tests.fakeapi import Reply, last_user_text
from tests.helpers.cli import CliResult, cli_env
from tests.helpers.transcripts import records, transcripts

QUIET = {"COMPACT_AGENT_SESSION_MEMORY": "0"}


def _env(api, home: Path) -> dict[str, str]:
    return cli_env(home, api, QUIET)


def _cli(
    api, project: Path, home: Path, *args: str, fsize: int | None = None
) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        if fsize is not None:  # files may not grow past this: writes fail with EFBIG, as on a full disk
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        cwd=project,
        env=_env(api, home),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )


def _chain_ok(path: Path) -> bool:
    recs = [r for r in records(path) if r.get("type") in ("user", "assistant")]
    return all(b.get("parentUuid") == a.get("uuid") for a, b in zip(recs, recs[1:]))


def test_a_full_disk_is_one_clear_line_and_continue_works_once_there_is_room(
    fake_api, project, isolated_env, run_cli
):
    fake_api.reply_tool("Bash", {"command": "seq 1 3000"})

    full = _cli(fake_api, project, isolated_env, "-p", "go", "--dangerously-skip-permissions", fsize=12000)
    assert full.returncode == 1
    assert (
        full.stderr.strip().splitlines()[-1].startswith("compact-agent: Can't write the session transcript")
    )
    assert "Traceback" not in full.stderr and "internal error" not in full.stderr

    still_full = _cli(fake_api, project, isolated_env, "-p", "more", "--continue", fsize=12000)
    assert still_full.returncode == 1 and "Traceback" not in still_full.stderr
    assert "Can't write the session transcript" in still_full.stderr

    fake_api.reply_text("room again")
    room = run_cli(fake_api, "-p", "and now", "--continue", env=QUIET)  # no limit: this process will do
    assert room.code == 0, room.stderr
    assert room.stdout == "room again\n" and "Traceback" not in room.stderr
    [path] = transcripts(isolated_env)
    parsed, torn = [], 0
    for line in path.read_text().splitlines():
        try:
            parsed.append(json.loads(line))
        except ValueError:
            torn += 1
    assert torn == 1  # the line the full disk cut; every record after it starts on a line of its own
    said = [b["text"] for b in parsed[-1]["message"]["content"] if b["type"] == "text"]
    assert said == ["room again"]  # after the model's thinking, which the 5.5 family always sends
    fake_api.check()


def test_two_resumes_of_one_session_at_once_keep_both_conversations(fake_api, project, isolated_env, run_cli):
    fake_api.reply_text("first answer")
    first = run_cli(fake_api, "-p", "start", env=QUIET)
    assert first.code == 0, first.stderr
    [path] = transcripts(isolated_env)
    session_id = path.stem

    inside, b_done = threading.Event(), threading.Event()

    def slow(body: dict) -> Reply:
        inside.set()
        b_done.wait(60)  # A holds the session until B has run (a fixed pause lost the race under load)
        return Reply.text("reply to A")

    fake_api.on(lambda b: "prompt A" in last_user_text(b), slow, once=True)
    fake_api.on(lambda b: "prompt B" in last_user_text(b), lambda b: Reply.text("reply to B"), once=True)
    env = _env(fake_api, isolated_env)
    a = subprocess.Popen(
        [sys.executable, "-m", "agent", "-p", "prompt A", "--resume", session_id],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert inside.wait(60)
    b = run_cli(fake_api, "-p", "prompt B", "--resume", session_id, env=QUIET)  # while A, a process, holds it
    b_done.set()
    a_out, a_err = a.communicate(timeout=60)
    assert a.returncode == 0 and a_out == "reply to A\n", a_err
    assert b.code == 0 and b.stdout == "reply to B\n", b.stderr
    assert "open in another process" in b.stderr

    files = transcripts(isolated_env)
    assert len(files) == 2
    texts = {f: f.read_text() for f in files}
    original = texts[path]
    assert "prompt A" in original and "reply to A" in original and "prompt B" not in original
    [copy] = [f for f in files if f != path]
    assert "start" in texts[copy] and "prompt B" in texts[copy] and "reply to B" in texts[copy]
    assert "prompt A" not in texts[copy]
    assert all(_chain_ok(f) for f in files)
    fake_api.check()


def test_a_tool_input_larger_than_the_window_is_cut_in_the_history_and_the_session_goes_on(
    fake_api, project, isolated_env, run_cli
):
    content = "".join(f"line {i:06d} of a file far larger than the window\n" for i in range(12_000))  # 600k
    fake_api.reply_tool("Write", {"file_path": str(project / "big.txt"), "content": content})
    fake_api.reply_text("written")
    small = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "60000", **QUIET}

    def run(*args: str) -> CliResult:
        return run_cli(fake_api, *args, env=small)

    res = run("-p", "write the big file", "--dangerously-skip-permissions")
    assert res.code == 0, res.stderr
    assert res.stdout == "written\n"
    assert (project / "big.txt").read_text() == content  # the tool had the whole input
    after = json.dumps(fake_api.message_requests[1].body["messages"])
    assert len(after) < 60_000 and "more characters cut from the conversation history" in after
    [path] = transcripts(isolated_env)
    assert len(path.read_text()) < 100_000  # the transcript holds the cut input too

    fake_api.reply_text("still going")
    again = run("-p", "and now?", "--continue")
    assert again.code == 0 and again.stdout == "still going\n", again.stderr
    assert "too long" not in again.stderr
    fake_api.check()


def test_a_todowrite_of_50000_items_is_cut_in_the_history_and_continue_works(fake_api, run_cli):
    """Issue 30: a list of many short items escaped the cut (only long strings were cut), so every
    --continue hit the context limit. A long list keeps its head and a note; the todo ledger lists its
    head and counts the rest."""
    todos = [
        {"content": f"task {i}", "activeForm": f"doing task {i}", "status": "pending"} for i in range(50_000)
    ]
    fake_api.reply_tool("TodoWrite", {"todos": todos})
    fake_api.reply_text("planned")
    small = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "60000", **QUIET}

    def run(*args: str) -> CliResult:
        return run_cli(fake_api, *args, env=small)

    res = run("-p", "plan it", "--dangerously-skip-permissions")
    assert (res.code, res.stdout) == (0, "planned\n"), res.stderr
    after = json.dumps(fake_api.message_requests[1].body["messages"])
    assert len(after) < 60_000 and "more items cut from the conversation history" in after
    fake_api.reply_text("still going")
    again = run("-p", "and now?", "--continue")
    assert (again.code, again.stdout) == (0, "still going\n"), again.stderr
    fake_api.reply_text("compacted summary")  # /compact in print mode: the summary request, then exit
    third = run("-p", "/compact", "--continue")
    assert third.code == 0, third.stderr
    later = [json.dumps(r.body) for r in fake_api.message_requests[3:]]
    assert all(len(body) < 120_000 for body in later)
    fake_api.check()


def test_continue_cuts_a_too_large_input_an_older_transcript_holds(fake_api, project, isolated_env, run_cli):
    """A transcript written before inputs were cut (one input past the window): --continue still works."""
    from agent.config.settings import load_settings
    from core.messages import assistant, tool_result_block, tool_results, user_prompt
    from core.transcript_writer import TranscriptWriter

    settings = load_settings(cwd=project, environ=_env(fake_api, isolated_env), cli={})
    store = settings.project_dir
    store.mkdir(parents=True, exist_ok=True)
    huge = "y" * 1_200_000  # ~300k tokens: more than the whole window
    with TranscriptWriter(
        store / "0b5e3c1e-1111-4222-8333-444455556666.jsonl", "s", str(project), "0.1"
    ) as w:
        w.append_message(user_prompt("write it"))
        w.append_message(
            assistant(
                [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Write",
                        "input": {"file_path": "f", "content": huge},
                    }
                ],
                stop_reason="tool_use",
            )
        )
        w.append_message(tool_results([tool_result_block("toolu_1", "Created f")]))
        w.append_message(assistant([{"type": "text", "text": "done"}]))
    fake_api.reply_text("continuing fine")
    res = run_cli(fake_api, "-p", "next", "--continue", env=QUIET)
    assert res.code == 0 and res.stdout == "continuing fine\n", res.stderr
    sent = json.dumps(fake_api.message_requests[-1].body["messages"])
    assert len(sent) < 50_000 and "cut from the conversation history" in sent
    fake_api.check()
