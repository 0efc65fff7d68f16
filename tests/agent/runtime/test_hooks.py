import json
import time
from pathlib import Path

import pytest

from agent.runtime.hooks import HookOutcome, HookRunner, base_payload, matches


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "project"
    path.mkdir()
    return path


def runner(project, config, **env):
    return HookRunner(config, project, {"PATH": "/usr/bin:/bin", **env})


def group(*commands, matcher=None, timeout=None):
    hooks = [{"type": "command", "command": c, **({"timeout": timeout} if timeout else {})} for c in commands]
    return {"hooks": hooks} if matcher is None else {"matcher": matcher, "hooks": hooks}


def outputs(outcomes):
    return [o.stdout.strip() for o in outcomes]


@pytest.mark.parametrize(
    ("matcher", "value", "expected"),
    [
        (None, "auto", True),
        ("", "auto", True),
        ("*", "manual", True),
        ("auto", "auto", True),
        ("auto", "manual", False),
        ("auto", "autox", False),
        ("Edit|Write", "Write", True),
        ("Edit|Write", "Bash", False),
        ("Bash(", "Bash(", True),
        ("Bash(", "Bash", False),
        ("auto", None, True),
        ("mcp__.*", "mcp__fs__read", True),
    ],
)
def test_matches(matcher, value, expected):
    assert matches(matcher, value) is expected


def test_matcher_selects_groups_in_order(project):
    config = {
        "PreCompact": [
            group("echo any"),
            group("echo auto", matcher="auto"),
            group("echo manual", matcher="manual"),
            group("echo both", matcher="auto|manual"),
        ]
    }
    r = runner(project, config)
    assert outputs(r.run("PreCompact", {}, "auto")) == ["any", "auto", "both"]
    assert outputs(r.run("PreCompact", {}, "manual")) == ["any", "manual", "both"]
    assert r.run("PostCompact", {}, "auto") == []
    assert r.has_hooks("PreCompact", "auto") and not r.has_hooks("SessionStart", "startup")


def test_events_without_match_value_run_every_group(project):
    r = runner(project, {"Stop": [group("echo one", matcher="whatever"), group("echo two")]})
    assert outputs(r.run("Stop", {})) == ["one", "two"]


def test_non_command_hooks_are_skipped(project):
    r = runner(
        project,
        {"Stop": [{"hooks": [{"type": "prompt", "prompt": "x"}, {"type": "command", "command": "echo ok"}]}]},
    )
    assert outputs(r.run("Stop", {})) == ["ok"]


def test_payload_on_stdin_project_dir_and_cwd(project, tmp_path):
    seen = tmp_path / "seen.json"
    command = f'cat > {seen}; echo "$CLAUDE_PROJECT_DIR|$(pwd)|$EXTRA"'
    r = runner(project, {"PreCompact": [group(command)]}, EXTRA="from-environ")
    payload = {
        **base_payload("sid-1", tmp_path / "t.jsonl", project, "PreCompact"),
        "trigger": "manual",
        "custom_instructions": "keep the tests ✓",
    }
    [outcome] = r.run("PreCompact", payload, "manual")
    assert json.loads(seen.read_text()) == {
        "session_id": "sid-1",
        "transcript_path": str(tmp_path / "t.jsonl"),
        "cwd": str(project),
        "hook_event_name": "PreCompact",
        "trigger": "manual",
        "custom_instructions": "keep the tests ✓",
    }
    assert outcome.stdout == f"{project}|{project}|from-environ\n"
    assert (outcome.exit_code, outcome.timed_out, outcome.ok, outcome.event) == (0, False, True, "PreCompact")


def test_failure_is_reported_and_later_hooks_still_run(project):
    r = runner(
        project, {"PreCompact": [group("echo first", "echo 'bad thing\nmore' >&2; exit 3", "echo last")]}
    )
    outcomes = r.run("PreCompact", {}, "auto")
    assert [(o.exit_code, o.ok) for o in outcomes] == [(0, True), (3, False), (0, True)]
    assert HookRunner.report_lines(outcomes) == [
        "PreCompact hook \"echo 'bad thing more' >&2; exit 3\" failed (exit 3): bad thing"
    ]
    assert HookRunner.context_text(outcomes) == "first\n\nlast"


def test_long_commands_are_shortened_in_reports(project):
    command = "exit 4; " + "x" * 100
    [outcome] = runner(project, {"Stop": [group(command)]}).run("Stop", {})
    assert HookRunner.report_lines([outcome]) == [f'Stop hook "{command[:59]}…" failed (exit 4)']


def test_failure_without_stderr(project):
    outcomes = runner(project, {"Stop": [group("false")]}).run("Stop", {})
    assert HookRunner.report_lines(outcomes) == ['Stop hook "false" failed (exit 1)']


def test_timeout_kills_the_whole_group_quickly(project):
    pid_file = project / "child.pid"  # hooks run in the project directory
    r = runner(
        project, {"PreCompact": [group("sleep 30 & echo $! > child.pid; echo started; wait", timeout=1)]}
    )
    started = time.monotonic()
    [outcome] = r.run("PreCompact", {}, "auto")
    assert time.monotonic() - started < 10  # the hook's child sleeps 30 s
    assert (outcome.exit_code, outcome.timed_out, outcome.ok) == (None, True, False)
    assert outcome.stdout == "started\n"
    assert HookRunner.report_lines([outcome]) == [
        'PreCompact hook "sleep 30 & echo $! > child.pid; echo started; wait" timed out after 1s'
    ]
    assert _gone(int(pid_file.read_text()))


def test_plain_sleep_times_out(project):
    started = time.monotonic()
    [outcome] = runner(project, {"Stop": [group("sleep 30", timeout=1)]}).run("Stop", {})
    assert outcome.timed_out and time.monotonic() - started < 10  # the hook sleeps 30 s
    assert 0.9 < outcome.duration < 10


def test_hook_that_exits_but_leaves_a_child_holding_output(project, tmp_path):
    pid_file = tmp_path / "child.pid"
    r = runner(project, {"Stop": [group(f"sleep 30 & echo $! > {pid_file}; echo done", timeout=1)]})
    [outcome] = r.run("Stop", {})
    assert (outcome.exit_code, outcome.timed_out, outcome.stdout) == (0, False, "done\n")
    assert _gone(int(pid_file.read_text()))


def test_command_that_cannot_start(tmp_path):
    r = HookRunner({"Stop": [group("echo hi")]}, tmp_path / "missing-dir", {})
    [outcome] = r.run("Stop", {})
    assert outcome.exit_code == 127 and not outcome.ok
    assert outcome.stderr.startswith("could not start the hook: ")
    assert HookRunner.report_lines([outcome])[0].startswith(
        'Stop hook "echo hi" failed (exit 127): could not start'
    )


def test_hook_ignoring_a_large_stdin_payload(project):
    r = runner(project, {"Stop": [group("echo fine")]})
    [outcome] = r.run("Stop", {"blob": "x" * 1_000_000})
    assert (outcome.ok, outcome.stdout) == (True, "fine\n")


def test_context_text_uses_json_additional_context(project):
    json_out = json.dumps(
        {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "ctx"}}
    )
    r = runner(
        project, {"SessionStart": [group(f"echo '{json_out}'", "echo '  plain  '", "echo hidden; exit 1")]}
    )
    assert HookRunner.context_text(r.run("SessionStart", {}, "compact")) == "ctx\n\nplain"


def test_blocked(project):
    r = runner(
        project,
        {
            "PreToolUse": [
                group("exit 0", matcher="Bash"),
                group("echo 'no rm please' >&2; exit 2", matcher="Bash"),
            ]
        },
    )
    assert HookRunner.blocked(r.run("PreToolUse", {}, "Bash")) == "no rm please"
    assert HookRunner.blocked(r.run("PreToolUse", {}, "Read")) is None
    deny = json.dumps(
        {"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "nope"}}
    )
    r = runner(project, {"PreToolUse": [group(f"echo '{deny}'")]})
    assert HookRunner.blocked(r.run("PreToolUse", {}, "Edit")) == "nope"
    r = runner(project, {"PreToolUse": [group("exit 1")]})
    assert HookRunner.blocked(r.run("PreToolUse", {}, "Edit")) is None


def test_outcome_ok():
    base = dict(event="Stop", command="x", stdout="", stderr="", duration=0.1, timeout=600.0)
    assert HookOutcome(exit_code=0, timed_out=False, **base).ok
    assert not HookOutcome(exit_code=1, timed_out=False, **base).ok
    assert not HookOutcome(exit_code=None, timed_out=True, **base).ok


def test_base_payload(tmp_path):
    assert base_payload("s", tmp_path / "a.jsonl", Path("/w"), "SessionStart") == {
        "session_id": "s",
        "transcript_path": str(tmp_path / "a.jsonl"),
        "cwd": "/w",
        "hook_event_name": "SessionStart",
    }


def _gone(pid: int, wait: float = 2.0) -> bool:
    """The process no longer exists or is a zombie waiting to be reaped."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return True
        time.sleep(0.05)
    return False
