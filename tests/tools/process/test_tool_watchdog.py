"""Bash commands die with the agent (tools.process.watchdog), checked with real processes: an agent process
killed with SIGKILL mid-command, one that exits normally, and a watchdog that is itself killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tools.base import ToolContext
from tools.bash import BashTool
from tools.process import watchdog

ROOT = Path(__file__).resolve().parents[3]

AGENT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tools.process import watchdog
    from tools.base import ToolContext
    from tools.bash import BashTool

    here = Path(sys.argv[1])
    ctx = ToolContext(project_dir=here, session_dir=here / "session", cwd=here)
    print(BashTool().run({"command": sys.argv[2]}, ctx).content, flush=True)
    print(watchdog.watchdog_pid(), flush=True)
    sys.stdin.read()  # exit when the test says so
""")


def stat_of(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, process group) of a live process; None once it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if fields[0] == "Z" else (fields[0], int(fields[1]), int(fields[2]))


def processes() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def group_members(pgid: int) -> list[int]:
    return [pid for pid in processes() if (s := stat_of(pid)) is not None and s[2] == pgid]


def watchdogs_of(parent: int) -> list[int]:
    found = []
    for pid in processes():
        s = stat_of(pid)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if s is not None and s[1] == parent and b"watchdog.py" in cmdline:
            found.append(pid)
    return found


def wait_for(check, seconds: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def start_agent(tmp_path: Path, command: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", AGENT, str(tmp_path), command],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_sigkill_of_the_agent_kills_the_running_command_and_its_background_jobs(tmp_path: Path) -> None:
    agent = start_agent(tmp_path, "echo $$ > pgid; sleep 300 & echo $! > bg.pid; sleep 300")
    try:
        assert wait_for(lambda: (tmp_path / "bg.pid").exists() and (tmp_path / "bg.pid").read_text())
        pgid = int((tmp_path / "pgid").read_text())
        assert wait_for(lambda: len(group_members(pgid)) == 3)  # bash and both sleeps
        assert wait_for(lambda: len(watchdogs_of(agent.pid)) == 1)
        [dog] = watchdogs_of(agent.pid)
        members = group_members(pgid)
        time.sleep(0.2)  # the agent registers the group right after starting it
    finally:
        os.kill(agent.pid, signal.SIGKILL)
        agent.wait()
        assert agent.stdin is not None and agent.stdout is not None
        agent.stdin.close()
        agent.stdout.close()
    assert wait_for(lambda: all(stat_of(pid) is None for pid in members))
    assert wait_for(lambda: stat_of(dog) is None)
    assert group_members(pgid) == []


def test_when_the_agent_exits_its_background_jobs_and_the_watchdog_go_too(tmp_path: Path) -> None:
    agent = start_agent(tmp_path, "sleep 300 > /dev/null 2>&1 & echo $! > bg.pid; echo launched")
    assert agent.stdout is not None
    assert agent.stdout.readline() == "launched\n"
    dog = int(agent.stdout.readline())
    assert watchdogs_of(agent.pid) == [dog]
    background = int((tmp_path / "bg.pid").read_text())
    assert stat_of(background) is not None  # the call returned; its background job runs on
    agent.communicate(timeout=30)
    assert agent.returncode == 0
    assert wait_for(lambda: stat_of(background) is None)
    assert wait_for(lambda: stat_of(dog) is None)


def ctx_for(tmp_path: Path) -> ToolContext:
    return ToolContext(project_dir=tmp_path, session_dir=tmp_path / "session", cwd=tmp_path)


def test_one_watchdog_in_a_session_of_its_own(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    BashTool().run({"command": "true"}, ctx)
    first = watchdog.watchdog_pid()
    assert first is not None and stat_of(first) is not None
    assert os.getsid(first) == first  # Ctrl-C at the terminal reaches the agent, not the watchdog
    BashTool().run({"command": "true"}, ctx)
    assert watchdog.watchdog_pid() == first


def test_close_kills_what_is_still_running_and_stops_the_watchdog(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    BashTool().run({"command": "sleep 300 > /dev/null 2>&1 & echo $! > bg.pid"}, ctx)
    dog = watchdog.watchdog_pid()
    assert dog is not None
    watchdog.close()
    assert wait_for(lambda: stat_of(int((tmp_path / "bg.pid").read_text())) is None)
    assert stat_of(dog) is None
    assert BashTool().run({"command": "echo again"}, ctx).content == "again"  # a new one starts


def test_a_killed_watchdog_is_replaced_and_told_every_group(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    BashTool().run({"command": "sleep 300 > /dev/null 2>&1 & echo $! > bg.pid"}, ctx)
    background = int((tmp_path / "bg.pid").read_text())
    old = watchdog.watchdog_pid()
    assert old is not None
    os.kill(old, signal.SIGKILL)
    assert wait_for(lambda: stat_of(old) is None)
    assert BashTool().run({"command": "echo still works"}, ctx).content == "still works"
    new = watchdog.watchdog_pid()
    assert new not in (None, old)
    assert stat_of(background) is not None
    watchdog.close()  # the new watchdog knew the older group: closing it kills the background job
    assert wait_for(lambda: stat_of(background) is None)


def _gated(tmp_path: Path, gate: watchdog.Gate) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["bash", "-c", gate.prefix + "touch ran; ls /proc/self/fd > fds"],
        cwd=tmp_path,
        pass_fds=gate.fds,
        start_new_session=True,
    )


def test_a_gated_child_runs_only_once_the_watchdog_knows_its_group(tmp_path: Path) -> None:
    gate = watchdog.Gate()
    proc = _gated(tmp_path, gate)
    # bash has started and sits in the gate's read, the command not run
    assert wait_for(lambda: "pipe" in Path(f"/proc/{proc.pid}/wchan").read_text())
    assert not (tmp_path / "ran").exists() and proc.poll() is None
    gate.opened(proc.pid)
    assert proc.wait(timeout=30) == 0 and (tmp_path / "ran").exists()
    assert watchdog.watchdog_pid() is not None
    assert (tmp_path / "fds").read_text().split() == [
        "0",
        "1",
        "2",
        "3",
    ]  # the gate's pipe closed (3: ls's dir)
    watchdog.done(proc.pid)


def test_a_gated_child_whose_agent_dies_first_never_runs(tmp_path: Path) -> None:
    gate = watchdog.Gate()
    proc = _gated(tmp_path, gate)
    gate.failed()  # what the kernel does to the agent's end of the pipe when it is killed
    assert proc.wait(timeout=30) == 125
    assert not (tmp_path / "ran").exists()
