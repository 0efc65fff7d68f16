"""The Bash tool with real subprocesses: output, exit codes, persistent cwd, timeouts, cancel, env."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tests.helpers.tools import make_ctx
from tools.base import ToolContext, ToolError, ToolResult
from tools.bash import BashTool
from tools.process import spill as output_module
from tools.runner import run_tool


def bash(ctx: ToolContext, command: str, **extra: object) -> ToolResult:
    return BashTool().run({"command": command, **extra}, ctx)


def process_gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def wait_until_gone(pid: int, seconds: float = 2.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process_gone(pid):
            return True
        time.sleep(0.02)
    return False


def test_stdout_and_stderr_are_combined(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    result = bash(ctx, "echo out; echo err >&2; echo more")
    assert result == ToolResult(
        content="out\nerr\nmore", summary="3 lines of output", facts={"exitCode": 0, "cwd": str(ctx.cwd)}
    )


def test_no_output_is_said_explicitly(tmp_path: Path) -> None:
    assert bash(make_ctx(tmp_path), "true").content == "(Bash completed with no output)"


def test_non_zero_exit_is_reported_but_not_raised(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    result = bash(ctx, "echo failing; exit 3")
    assert result == ToolResult(
        content="failing\nExit code 3",
        is_error=True,
        summary="Exit code 3",
        facts={"exitCode": 3, "cwd": str(ctx.cwd)},
    )


def test_non_zero_exit_without_output(tmp_path: Path) -> None:
    assert bash(make_ctx(tmp_path), "false").content == "Exit code 1"


def test_runs_in_the_context_working_directory(tmp_path: Path) -> None:
    assert bash(make_ctx(tmp_path), "pwd -P").content == str(tmp_path.resolve())


def test_cd_persists_between_calls(tmp_path: Path) -> None:
    (tmp_path / "sub" / "inner").mkdir(parents=True)
    ctx = make_ctx(tmp_path)
    bash(ctx, "cd sub")
    assert ctx.cwd == (tmp_path / "sub").resolve()
    assert bash(ctx, "pwd").content == str((tmp_path / "sub").resolve())
    bash(ctx, "cd inner && ls")
    assert bash(ctx, "pwd").content == str((tmp_path / "sub" / "inner").resolve())


def test_cd_persists_even_when_the_command_exits_with_an_error(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    ctx = make_ctx(tmp_path)
    assert bash(ctx, "cd sub; exit 4").is_error
    assert ctx.cwd == (tmp_path / "sub").resolve()


def test_only_the_directory_persists_not_variables(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    bash(ctx, "export FOO=bar")
    assert bash(ctx, 'echo "[${FOO-}]"').content == "[]"


def test_a_deleted_working_directory_falls_back_to_the_project(tmp_path: Path) -> None:
    (tmp_path / "doomed").mkdir()
    ctx = make_ctx(tmp_path)
    bash(ctx, "cd doomed")
    (tmp_path / "doomed").rmdir()
    result = bash(ctx, "pwd -P")
    assert result.content == (
        f"(The working directory {(tmp_path / 'doomed').resolve()} no longer exists; ran in {tmp_path} instead.)\n"
        f"{tmp_path.resolve()}"
    )
    assert ctx.cwd == tmp_path.resolve()


def test_stdin_is_closed(tmp_path: Path) -> None:
    start = time.monotonic()
    assert bash(make_ctx(tmp_path), "cat; read -r line || echo no-input").content == "no-input"
    assert time.monotonic() - start < 10  # the command (or its child) sleeps 20-30 s


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    start = time.monotonic()
    with pytest.raises(ToolError) as info:
        bash(ctx, "echo started; sleep 30 & echo $! > bg.pid; sleep 30", timeout=500)
    assert time.monotonic() - start < 10  # the command (or its child) sleeps 20-30 s
    assert (
        str(info.value)
        == "Command timed out after 500 ms and was stopped. Output before it stopped:\nstarted"
    )
    assert wait_until_gone(int((tmp_path / "bg.pid").read_text()))


def test_timeout_also_kills_children_that_ignore_sigterm(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    with pytest.raises(ToolError, match="timed out after 300 ms"):
        bash(ctx, "(trap '' TERM; sleep 30) & echo $! > bg.pid; wait", timeout=300)
    assert wait_until_gone(int((tmp_path / "bg.pid").read_text()))


def test_cancel_from_another_thread_stops_the_command(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    threading.Timer(0.3, ctx.cancel.set).start()
    start = time.monotonic()
    result = run_tool(BashTool(), {"command": "sleep 30"}, ctx)
    assert time.monotonic() - start < 10  # the command (or its child) sleeps 20-30 s
    assert result.is_error
    assert (
        result.content == "Command was interrupted by the user and stopped. It printed nothing before that."
    )


def test_background_jobs_do_not_hold_the_call_open(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    start = time.monotonic()
    result = bash(ctx, "sleep 20 & echo $! > bg.pid; echo launched")
    assert time.monotonic() - start < 10  # the command (or its child) sleeps 20-30 s
    assert result.content == "launched"
    os.kill(int((tmp_path / "bg.pid").read_text()), 9)


def test_api_credentials_are_hidden_from_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok-secret")
    monkeypatch.setenv("SOME_SETTING", "kept")
    result = bash(
        make_ctx(tmp_path), 'echo "${ANTHROPIC_API_KEY-unset} ${ANTHROPIC_AUTH_TOKEN-unset} $SOME_SETTING"'
    )
    assert result.content == "unset unset kept"


def test_positional_parameters_of_the_wrapper_do_not_leak(tmp_path: Path) -> None:
    assert bash(make_ctx(tmp_path), 'echo "[$#]"').content == "[0]"


def test_syntax_errors_report_the_line_of_the_command(tmp_path: Path) -> None:
    result = bash(make_ctx(tmp_path), "echo ok\nif then")
    assert result.is_error
    assert isinstance(result.content, str)
    assert "line 2: syntax error" in result.content
    assert result.content.endswith("Exit code 2")


def test_huge_output_shows_a_head_and_spills_all_of_it_to_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(output_module, "HEAD_BYTES", 1000)
    ctx = make_ctx(tmp_path)
    result = bash(ctx, "seq 1 2000")  # 8,893 bytes, of which lines 1-277 are exactly the first 1,000
    [spilled] = (tmp_path / ".session" / "tool-results").iterdir()
    assert spilled.name.startswith("bash-")
    assert spilled.read_text() == "".join(f"{n}\n" for n in range(1, 2001))
    assert result == ToolResult(
        content=(
            "(Output too large to show in full: 8,893 bytes in 2,000 lines; the first 277 lines are shown. "
            f"All of it is saved in {spilled} - Read that file with offset and limit to see the rest.)\n"
            + "\n".join(str(n) for n in range(1, 278))
        ),
        summary="2000 lines of output",
        facts={"exitCode": 0, "cwd": str(ctx.cwd)},
    )


def test_a_huge_single_line_shows_its_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output_module, "HEAD_BYTES", 1000)
    ctx = make_ctx(tmp_path)
    result = bash(ctx, "head -c 5000 /dev/zero | tr '\\0' 'a'; exit 1")
    [spilled] = (tmp_path / ".session" / "tool-results").iterdir()
    assert spilled.read_text() == "a" * 5000
    assert result == ToolResult(
        content=(
            "(Output too large to show in full: 5,000 bytes in 1 line; the first 1,000 bytes of its first "
            f"line are shown. All of it is saved in {spilled} - Read that file with offset and limit to see "
            "the rest.)\n" + "a" * 1000 + "\nExit code 1"
        ),
        is_error=True,
        summary="Exit code 1",
        facts={"exitCode": 1, "cwd": str(ctx.cwd)},
    )


def test_output_that_fits_writes_no_file(tmp_path: Path) -> None:
    assert bash(make_ctx(tmp_path), "seq 1 20000").summary == "20000 lines of output"  # 108,894 bytes
    assert not (tmp_path / ".session").exists()


def test_timeout_above_the_maximum_is_rejected_by_the_runner(tmp_path: Path) -> None:
    result = run_tool(BashTool(), {"command": "true", "timeout": 600_001}, make_ctx(tmp_path))
    assert result == ToolResult(
        content="Invalid input for Bash: `timeout` must be at most 600000, got 600001.",
        is_error=True,
        summary="invalid input",
    )
