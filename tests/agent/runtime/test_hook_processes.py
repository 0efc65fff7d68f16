"""Hooks as processes: their own group, stopped by SIGINT in print mode, gone with the agent after kill -9,
and a hook printing far more than it may show costs disk, not memory (the head is kept, the rest spilled).

Where the agent's process is the subject (SIGINT, kill -9) the real CLI runs as a subprocess against the
fake API, and a hook writes its shell's pid to a file so the test can watch that process; what a hook's
answer does to the turn runs the CLI in this process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from agent.runtime.hooks import OUTPUT_LIMIT, HookRunner
from tests.helpers.cli import cli_env


def _start_cli(api, project: Path, home: Path, *args: str) -> subprocess.Popen[str]:
    env = cli_env(home, api)
    return subprocess.Popen(
        [sys.executable, "-m", "agent", *args],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _hanging_hook(home: Path, marker: Path, event: str = "PreToolUse") -> None:
    settings = home / ".compact-agent" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    # a child that ignores SIGTERM too: only the group's SIGKILL ends it
    command = f"trap '' TERM; echo $$ > {marker}; sleep 300"
    settings.write_text(
        json.dumps({"hooks": {event: [{"hooks": [{"type": "command", "command": command}]}]}})
    )


def _pid_from(marker: Path, proc: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + 60  # start-up, a request and the hook's start: slow on a loaded machine
    while not (marker.exists() and marker.read_text().strip()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the hook never started"
        time.sleep(0.05)
    return int(marker.read_text())


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        status = Path(f"/proc/{pid}/status")
        if status.exists() and "zombie" in status.read_text().lower():
            return True
        time.sleep(0.05)
    return False


def test_sigint_in_print_mode_stops_a_hanging_hook_and_the_run(fake_api, project, isolated_env):
    marker = project / "hook.pid"
    _hanging_hook(isolated_env, marker)
    fake_api.reply_tool("Bash", {"command": "touch ran"})
    proc = _start_cli(fake_api, project, isolated_env, "-p", "go", "--dangerously-skip-permissions")
    pid = _pid_from(marker, proc)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert time.monotonic() - started < 10
    assert _gone(pid, 5), "the hook outlived SIGINT"
    assert not (project / "ran").exists()
    assert "Traceback" not in err


def test_a_hook_dies_with_the_agent_even_after_kill_9(fake_api, project, isolated_env):
    marker = project / "hook.pid"
    _hanging_hook(isolated_env, marker, "UserPromptSubmit")
    proc = _start_cli(fake_api, project, isolated_env, "-p", "go")
    pid = _pid_from(marker, proc)
    proc.kill()
    proc.communicate(timeout=30)
    assert _gone(pid, 30), "the hook outlived the agent's kill -9"


def test_a_hook_printing_far_past_its_cap_keeps_only_the_head_in_memory(tmp_path):
    spill = tmp_path / "spill"
    spill.mkdir()
    secret = "sk-ant-" + "k" * 40
    # 48 MB of output with the key in it, split across reads at every offset the pipe happens to choose
    command = f"for i in $(seq 1 200000); do printf '%0190d {secret}\\n' $i; done"
    runner = HookRunner(
        {"Stop": [{"hooks": [{"type": "command", "command": command}]}]},
        tmp_path,
        {"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": secret},
        spill_dir=spill,
    )
    [outcome] = runner.run("Stop", {})
    assert outcome.ok
    assert outcome.stdout.startswith("(Hook stdout too large to show in full: 47,800,000 bytes")
    assert len(outcome.stdout) < OUTPUT_LIMIT + 500 and secret not in outcome.stdout
    [saved] = spill.iterdir()
    data = saved.read_bytes()
    assert data.count(b"[redacted API key]") == 200000 and secret.encode() not in data
    assert oct(saved.stat().st_mode & 0o777) == "0o600"


def test_cancel_stops_a_hook_and_the_ones_after_it(tmp_path):
    cancel = threading.Event()
    runner = HookRunner(
        {
            "Stop": [
                {
                    "hooks": [
                        {"type": "command", "command": "sleep 30"},
                        {"type": "command", "command": "echo x"},
                    ]
                }
            ]
        },
        tmp_path,
        {"PATH": "/usr/bin:/bin"},
    )
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    outcomes = runner.run("Stop", {}, cancel=cancel)
    assert time.monotonic() - started < 5
    assert [o.interrupted for o in outcomes] == [True] and not outcomes[0].ok
    assert runner.report_lines(outcomes) == []  # the turn's end says it was interrupted


def _project_hooks(project: Path, hooks: dict) -> None:
    from agent.config import trust

    (project / ".claude").mkdir(exist_ok=True)
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    trust.grant(Path(os.environ["COMPACT_AGENT_HOME"]), project)


def test_continue_false_from_a_pre_tool_use_hook_ends_the_turn(fake_api, run_cli, project):
    stop = json.dumps({"continue": False, "stopReason": "frozen for the release"})
    _project_hooks(
        project,
        {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": f"echo '{stop}'"}]}]},
    )
    fake_api.reply_tools(
        [
            ("Read", {"file_path": "a.txt"}),
            ("Bash", {"command": "touch ran"}),
            ("Bash", {"command": "touch ran2"}),
        ]
    )
    (project / "a.txt").write_text("hello\n")

    res = run_cli(fake_api, "-p", "go", "--dangerously-skip-permissions")

    assert res.code == 0, res.stderr
    assert "Stopped by a hook: frozen for the release" in res.stderr
    assert len(fake_api.message_requests) == 1  # the turn ended: no further request
    assert not (project / "ran").exists() and not (project / "ran2").exists()
    from tests.helpers.transcripts import records, transcripts

    [path] = transcripts(Path(os.environ["HOME"]))
    results = [
        b
        for r in records(path)
        if r.get("type") == "user"
        for b in r["message"]["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    assert [bool(r.get("is_error")) for r in results] == [False, True, True]  # every call answered


def test_post_tool_use_exit_2_stderr_reaches_the_model(fake_api, run_cli, project):
    _project_hooks(
        project,
        {
            "PostToolUse": [
                {"hooks": [{"type": "command", "command": "echo 'lint: line 3 is too long' >&2; exit 2"}]}
            ]
        },
    )
    fake_api.reply_tool("Bash", {"command": "echo built"})
    fake_api.reply_text("ok")

    res = run_cli(fake_api, "-p", "go", "--dangerously-skip-permissions")

    assert res.code == 0, res.stderr
    from tests.helpers.wire import result_text, tool_results_of

    [result] = tool_results_of(fake_api.message_requests[1].body)
    text = result_text(result)
    assert "built" in text and "PostToolUse hook feedback:\nlint: line 3 is too long" in text


def test_output_just_past_the_cap_is_saved_whole(tmp_path):
    spill = tmp_path / "spill"
    spill.mkdir()
    runner = HookRunner(
        {"Stop": [{"hooks": [{"type": "command", "command": "seq 1 5000"}]}]},
        tmp_path,
        {"PATH": "/usr/bin:/bin"},
        spill_dir=spill,
    )
    [outcome] = runner.run("Stop", {})
    expected = "".join(f"{i}\n" for i in range(1, 5001))  # 23,893 characters
    assert outcome.stdout.startswith("(Hook stdout too large to show in full: 23,893 bytes")
    [saved] = spill.iterdir()
    assert saved.read_text() == expected and str(saved) in outcome.stdout
