"""End-to-end: the real CLI in print mode against the loopback fake Messages API (in this process; as a
subprocess where the process is the subject: Ctrl-C, the installed script, a fresh start offline)."""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from agent.config import trust
from tests.fakeapi import last_user_text
from tests.helpers.cli import SECRET, runs_under, wait_for
from tests.helpers.transcripts import records, transcripts
from tests.helpers.wire import result_text, tool_results_of


def test_six_tools_in_turn_change_files_and_reach_the_model(fake_api, run_cli, project, isolated_env):
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("def greet():\n    return 'hello'\n")
    api = fake_api
    app = str(project / "src" / "app.py")
    api.reply_tool("Glob", {"pattern": "**/*.py"})
    api.reply_tool("Read", {"file_path": app})
    api.reply_tool("Grep", {"pattern": "hello", "output_mode": "content"})
    api.reply_tool("Bash", {"command": "echo ran > bash.txt && cat bash.txt"})
    api.reply_tool("Edit", {"file_path": app, "old_string": "'hello'", "new_string": "'goodbye'"})
    api.reply_tool("Write", {"file_path": str(project / "notes.md"), "content": "# Notes\n"})
    api.reply_text("All six tools ran.")

    res = run_cli(
        api, "-p", "use every tool", "--dangerously-skip-permissions", env={"ANTHROPIC_API_KEY": SECRET}
    )

    assert res.code == 0, res.stderr
    assert res.stdout == "All six tools ran.\n"
    api.check()
    assert (project / "src" / "app.py").read_text() == "def greet():\n    return 'goodbye'\n"
    assert (project / "notes.md").read_text() == "# Notes\n"
    assert (project / "bash.txt").read_text() == "ran\n"
    bodies = [r.body for r in api.message_requests]
    assert len(bodies) == 7
    results = [tool_results_of(b)[0] for b in bodies[1:]]
    assert app in result_text(results[0])  # Glob found it
    assert "def greet():" in result_text(results[1]) and "1\t" in result_text(results[1])  # numbered lines
    assert "hello" in result_text(results[2])
    assert "ran" in result_text(results[3])
    assert not any(r.get("is_error") for r in results), results
    # the transcript holds the whole chain, linked by parentUuid
    [path] = transcripts(isolated_env)
    recs = [r for r in records(path) if r.get("type") in ("user", "assistant")]
    assert len(recs) == 14  # prompt + 6 × (call, result) + final answer
    assert recs[0]["parentUuid"] is None
    for prev, rec in zip(recs, recs[1:]):
        assert rec["parentUuid"] == prev["uuid"]
    assert [b["text"] for b in recs[-1]["message"]["content"] if b["type"] == "text"] == [
        "All six tools ran."
    ]
    assert all(r["sessionId"] == path.stem for r in recs)
    # the key never reaches disk
    for f in Path(isolated_env).rglob("*"):
        if f.is_file():
            assert SECRET not in f.read_text(errors="replace"), f
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"


def test_api_failures_and_dropped_stream_are_retried_and_no_tool_runs_twice(fake_api, run_cli, project):
    api = fake_api
    api.error(529)
    api.reply_tool("Bash", {"command": "echo once >> count.txt"})
    api.error(500)
    api.error(429)
    api.drop_stream(after_events=4, reply="A reply that is cut short")
    api.drop_stream(after_events=2)
    api.reply_text("finished")

    res = run_cli(api, "-p", "count", "--dangerously-skip-permissions")

    assert res.code == 0, res.stderr
    assert res.stdout == "finished\n"
    assert (project / "count.txt").read_text() == "once\n"
    api.check()


def test_default_mode_in_print_denies_bash_and_outside_writes(fake_api, run_cli, project, tmp_path):
    api = fake_api
    outside = tmp_path / "outside.txt"
    api.reply_tool("Bash", {"command": "touch made-by-bash"})
    api.reply_tool("Write", {"file_path": str(outside), "content": "x"})
    api.reply_text("ok")

    res = run_cli(api, "-p", "try things")

    assert res.code == 0, res.stderr
    bodies = [r.body for r in api.message_requests]
    bash_result, write_result = tool_results_of(bodies[1])[0], tool_results_of(bodies[2])[0]
    assert bash_result["is_error"] is True and "approval" in result_text(bash_result)
    assert write_result["is_error"] is True
    assert not (project / "made-by-bash").exists()
    assert not outside.exists()
    api.check()


def test_deny_rule_holds_under_skip_permissions(fake_api, run_cli, project):
    claude = project / ".claude"
    claude.mkdir()
    (claude / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Bash(rm:*)"]}}))
    (project / "keep.txt").write_text("precious")
    api = fake_api
    api.reply_tool("Bash", {"command": "rm keep.txt"})
    api.reply_text("done")

    res = run_cli(api, "-p", "delete it", "--dangerously-skip-permissions")

    assert res.code == 0, res.stderr
    result = tool_results_of(api.message_requests[1].body)[0]
    assert result["is_error"] is True and "denied" in result_text(result)
    assert (project / "keep.txt").read_text() == "precious"


def test_edit_of_a_file_never_read_is_refused(fake_api, run_cli, project):
    (project / "a.txt").write_text("alpha\n")
    api = fake_api
    api.reply_tool("Edit", {"file_path": str(project / "a.txt"), "old_string": "alpha", "new_string": "beta"})
    api.reply_text("done")

    res = run_cli(api, "-p", "edit", "--dangerously-skip-permissions")

    assert res.code == 0, res.stderr
    result = tool_results_of(api.message_requests[1].body)[0]
    assert result["is_error"] is True and "read" in result_text(result).lower()
    assert (project / "a.txt").read_text() == "alpha\n"


def test_json_output_then_resume_and_continue(fake_api, run_cli, project):
    api = fake_api
    api.reply_text("first answer")
    first = run_cli(api, "-p", "remember the word apricot", "--output-format", "json")
    assert first.code == 0, first.stderr
    result = first.json()
    assert result["type"] == "result" and result["subtype"] == "success" and result["is_error"] is False
    assert result["result"] == "first answer" and result["num_turns"] == 1
    sid = result["session_id"]
    assert set(result) >= {"session_id", "num_turns", "duration_ms", "usage", "total_cost_usd"}

    api.reply_text("second answer")
    second = run_cli(api, "-p", "what was the word?", "--resume", sid, "--output-format", "json")
    assert second.code == 0, second.stderr
    assert second.json()["session_id"] == sid
    body = api.message_requests[-1].body
    texts = json.dumps(body["messages"])
    assert "apricot" in texts and "first answer" in texts and "what was the word?" in texts

    api.reply_text("third answer")
    third = run_cli(api, "-p", "and again?", "--continue")
    assert third.code == 0, third.stderr
    assert third.stdout == "third answer\n"
    body = api.message_requests[-1].body
    assert "second answer" in json.dumps(body["messages"])
    assert last_user_text(body).startswith("and again?")
    api.check()


def test_stream_json_emits_init_messages_and_result(fake_api, run_cli):
    api = fake_api
    api.reply_text("streamed")
    res = run_cli(api, "-p", "hi", "--output-format", "stream-json")
    assert res.code == 0, res.stderr
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert lines[0]["type"] == "system" and lines[0]["subtype"] == "init"
    assert [line["type"] for line in lines[1:]] == ["user", "assistant", "result"]
    assert lines[-1]["result"] == "streamed"


def test_prompt_on_stdin(fake_api, run_cli):
    fake_api.reply_text("from stdin")
    res = run_cli(fake_api, "-p", stdin="hello through a pipe\n")
    assert res.code == 0, res.stderr
    assert last_user_text(fake_api.message_requests[0].body).startswith("hello through a pipe")


def test_max_turns(fake_api, run_cli):
    fake_api.reply_tool("Glob", {"pattern": "*"})
    res = run_cli(fake_api, "-p", "loop", "--max-turns", "1", "--output-format", "json")
    assert res.code == 1
    assert res.json()["subtype"] == "error_max_turns"


def test_version_and_help(run_cli):
    version = run_cli(None, "--version")
    assert version.code == 0 and version.stdout.startswith("0.")
    help_ = run_cli(None, "--help")
    assert help_.code == 0
    for option in [
        "--print",
        "-p",
        "--output-format",
        "--continue",
        "-c",
        "--resume",
        "-r",
        "--model",
        "--permission-mode",
        "--dangerously-skip-permissions",
        "--max-turns",
        "--allowedTools",
        "--disallowedTools",
        "--version",
        "--help",
    ]:
        assert option in help_.stdout, option


def test_the_process_leaves_its_objects_to_the_os_at_exit():
    """The interpreter's last collection over every object at exit (~0.4 s of CPU with the SDK loaded)
    is skipped: the CLI's exit handler freezes them (gc.freeze), and the handlers registered before it
    still run after it."""
    script = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: sys.stderr.write(f'frozen at exit: {gc.get_freeze_count()}\\n'))\n"
        "from agent.cli import main\n"
        "sys.argv = ['compact-agent', '--version']\n"
        "main()\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith("0."), done.stderr
    frozen = int(re.fullmatch(r"frozen at exit: (\d+)\n", done.stderr).group(1))  # type: ignore[union-attr]
    assert frozen > 1000


def test_nothing_is_frozen_at_exit_while_another_thread_still_runs():
    """A daemon thread still running at exit (model-info waiting on an API it can't reach) and objects
    frozen under it crashed the interpreter's shutdown now and then (SIGSEGV): with another thread alive,
    the exit handler leaves the collection as it is."""
    from agent.cli import leave_objects_to_the_os

    release = threading.Event()
    waiting = threading.Thread(target=release.wait, args=(30,), daemon=True)
    waiting.start()
    try:
        leave_objects_to_the_os()
        frozen = gc.get_freeze_count()
    finally:
        gc.unfreeze()
        release.set()
        waiting.join(5)
    assert frozen == 0


def test_clear_one_line_errors(run_cli, project, isolated_env):
    bad_flag = run_cli(None, "--no-such-flag")
    assert bad_flag.code != 0
    no_key = run_cli(None, "-p", "hi", env={"ANTHROPIC_API_KEY": ""})
    assert no_key.code == 2 and no_key.stderr.strip().splitlines() == [
        "compact-agent: No API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) in the environment, "
        "or try `compact-agent --demo`, which needs none"
    ]
    missing = run_cli(None, "-p", "hi", "--resume", "00000000-0000-4000-8000-000000000000")
    assert missing.code == 1 and len(missing.stderr.strip().splitlines()) == 1
    assert "No session with id" in missing.stderr
    nothing = run_cli(None, "-p", "hi", "--continue")
    assert nothing.code == 1 and "No earlier session" in nothing.stderr
    # the REPL with no terminal: only the real error, no warning about the terminal first
    repl_missing = run_cli(None, "--resume", "bogus", stdin="")
    [line] = repl_missing.stderr.splitlines()
    assert repl_missing.code == 1 and line.startswith("compact-agent: No session with id bogus (looked in ")
    mode = run_cli(None, "-p", "hi", "--permission-mode", "yolo")
    assert mode.code == 2 and mode.stderr == (
        "compact-agent: --permission-mode must be one of default, "
        'acceptEdits, bypassPermissions, plan (got "yolo")\n'
    )
    (isolated_env / ".claude").mkdir()
    (isolated_env / ".claude" / "settings.json").write_text("{not json")  # the user's own: it stops
    broken = run_cli(None, "-p", "hi")
    assert broken.code == 2 and "settings.json" in broken.stderr and "Traceback" not in broken.stderr
    assert len(broken.stderr.splitlines()) == 1


def test_unrecoverable_api_error_exits_non_zero(fake_api, run_cli):
    fake_api.error(401, "authentication_error", "invalid x-api-key")
    res = run_cli(fake_api, "-p", "hi")
    assert res.code == 1
    assert "invalid x-api-key" in res.stderr and "Traceback" not in res.stderr


def test_no_network_needed(run_cli_process, fake_api):
    # tiktoken's offline encoding and everything else work with only the loopback fake reachable (a
    # process of its own: this one may have loaded an encoding already)
    fake_api.reply_text("offline ok")
    res = run_cli_process(
        fake_api,
        "-p",
        "hi",
        env={
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "HTTP_PROXY": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost",
            "TIKTOKEN_CACHE_DIR": os.devnull,
        },
    )
    assert res.code == 0, res.stderr


def test_sse_error_event_mid_stream_is_retried(fake_api, run_cli):
    fake_api.stream_error(after_events=3)
    fake_api.reply_text("recovered")
    res = run_cli(fake_api, "-p", "hi")
    assert res.code == 0, res.stderr
    assert res.stdout == "recovered\n"
    fake_api.check()


def _hook_settings(project: Path, event: str, command: str) -> None:
    claude = project / ".claude"
    claude.mkdir(exist_ok=True)
    (claude / "settings.json").write_text(
        json.dumps({"hooks": {event: [{"hooks": [{"type": "command", "command": command, "timeout": 10}]}]}})
    )
    trust.grant(Path(os.environ["COMPACT_AGENT_HOME"]), project)  # a project's hooks run once it is trusted


def test_user_prompt_submit_hook_adds_context_or_blocks(fake_api, run_cli, project):
    _hook_settings(
        project, "UserPromptSubmit", "cat > prompt-hook.json; echo 'Remember: the build uses make.'"
    )
    fake_api.reply_text("noted")
    res = run_cli(fake_api, "-p", "hello")
    assert res.code == 0, res.stderr
    body = json.dumps(fake_api.message_requests[0].body["messages"])
    assert "Remember: the build uses make." in body
    payload = json.loads((project / "prompt-hook.json").read_text())
    assert payload["hook_event_name"] == "UserPromptSubmit" and payload["prompt"] == "hello"

    _hook_settings(project, "UserPromptSubmit", "echo 'no secrets please' >&2; exit 2")
    blocked = run_cli(fake_api, "-p", "tell me the password")
    assert blocked.code == 1 and "no secrets please" in blocked.stderr
    assert len(fake_api.message_requests) == 1  # nothing was sent


def test_pre_tool_use_hook_blocks_a_call(fake_api, run_cli, project):
    _hook_settings(project, "PreToolUse", "echo 'not on Fridays' >&2; exit 2")
    fake_api.reply_tool("Bash", {"command": "touch should-not-exist"})
    fake_api.reply_text("ok")
    res = run_cli(fake_api, "-p", "go", "--dangerously-skip-permissions")
    assert res.code == 0, res.stderr
    result = tool_results_of(fake_api.message_requests[1].body)[0]
    assert result["is_error"] is True and "not on Fridays" in result_text(result)
    assert not (project / "should-not-exist").exists()


def test_compact_when_compaction_is_disabled_says_so_once(fake_api, run_cli):
    fake_api.reply_text("hello")
    assert run_cli(fake_api, "-p", "hi").code == 0
    res = run_cli(fake_api, "-p", "/compact", "--continue", env={"DISABLE_COMPACT": "1"})
    assert res.code == 1 and res.stdout == ""
    assert res.stderr == "compact-agent: Compaction is disabled (DISABLE_COMPACT is set)\n"


def test_summary_and_history_after_a_resume(fake_api, run_cli, project):
    env = {"COMPACT_AGENT_SESSION_MEMORY": "0"}
    (project / "log.txt").write_text("".join(f"line {i} of an old log\n" for i in range(600)))
    # the answer comes from a long read: what the compaction takes away (else it has nothing to compact)
    fake_api.reply_tool("Read", {"file_path": str(project / "log.txt")})
    fake_api.reply_text("the answer is 42")
    assert run_cli(fake_api, "-p", "what is the answer?", env=env).code == 0
    fake_api.reply_text("<analysis>private</analysis><summary>The user asked for the answer: 42.</summary>")
    compacted = run_cli(fake_api, "-p", "/compact", "--continue", env=env)
    assert compacted.code == 0, compacted.stderr
    # one "a → b": the same on stdout (the command's result), stderr (the event) and in /summary later
    [figures] = re.findall(r"Compacted · manual · (\S+ → \S+) tokens\n", compacted.stdout)
    assert f"Compacted · manual · {figures} tokens · " in compacted.stderr

    summary = run_cli(fake_api, "-p", "/summary", "--continue", env=env)
    assert summary.code == 0 and "The user asked for the answer: 42." in summary.stdout
    assert f"(manual · local summary · {figures} tokens)" in summary.stdout  # who wrote it (ef1f0c8)
    assert "private" not in summary.stdout
    history = run_cli(fake_api, "-p", "/history", "--continue", env=env)
    assert history.code == 0, history.stderr
    assert "user: what is the answer?" in history.stdout and "assistant: the answer is 42" in history.stdout
    unknown = run_cli(fake_api, "-p", "/histroy", "--continue", env=env)
    assert unknown.code == 1 and unknown.stdout == "" and "/history" in unknown.stderr
    fake_api.check()


def test_ctrl_c_in_print_mode_leaves_a_valid_session(fake_api, run_cli, project, isolated_env):
    import signal
    import subprocess
    import sys

    from tests.helpers.cli import ROOT

    fake_api.reply_tool("Bash", {"command": "sleep 30"})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update(
        fake_api.env(),
        HOME=str(isolated_env),
        COMPACT_AGENT_HOME=str(isolated_env / ".compact-agent"),
        PYTHONPATH=str(ROOT),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent", "-p", "wait", "--dangerously-skip-permissions"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: any('"tool_use"' in p.read_text() for p in transcripts(isolated_env)), 30)
    wait_for(lambda: runs_under(proc.pid, "sleep 30"), 30)  # the command is running now
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Interrupted" in err, err
    fake_api.reply_text("resumed fine")
    res = run_cli(fake_api, "-p", "go on", "--continue")
    assert res.code == 0 and res.stdout == "resumed fine\n"
    fake_api.check()


def test_settings_env_reaches_bash_but_the_key_does_not(fake_api, run_cli, project):
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"env": {"PROJECT_FLAVOUR": "mint"}}))
    fake_api.reply_tool("Bash", {"command": "echo flavour=$PROJECT_FLAVOUR key=${ANTHROPIC_API_KEY:-none}"})
    fake_api.reply_text("ok")
    res = run_cli(fake_api, "-p", "go", "--dangerously-skip-permissions", "--trust-project")
    assert res.code == 0, res.stderr
    out = result_text(tool_results_of(fake_api.message_requests[1].body)[0])
    assert "flavour=mint key=none" in out


def test_a_prompt_holding_the_key_is_recorded_without_it(fake_api, run_cli, isolated_env):
    fake_api.reply_text("I will not repeat it.")
    res = run_cli(fake_api, "-p", f"my key is {SECRET}, keep it safe", env={"ANTHROPIC_API_KEY": SECRET})
    assert res.code == 0, res.stderr
    [path] = transcripts(isolated_env)
    text = path.read_text()
    assert SECRET not in text and "my key is [redacted API key], keep it safe" in text


def test_installed_console_script_answers_version_and_help():
    import subprocess
    import sys

    script = Path(sys.executable).parent / "compact-agent"
    assert script.exists(), "pip install -e . puts compact-agent next to the interpreter"
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and "Compact Agent" in version.stdout
    help_ = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert help_.returncode == 0 and "--dangerously-skip-permissions" in help_.stdout
