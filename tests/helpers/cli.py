"""The CLI from a test: its environment, in this process or as a process, and waiting on what it does."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the checkout

# environment variables no test inherits from the shell that runs the suite (isolated_env, cli_env)
SCRUBBED = ("ANTHROPIC_", "CLAUDE_", "COMPACT_AGENT_", "DISABLE_COMPACT", "DISABLE_AUTO_COMPACT", "NO_COLOR")


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        return json.loads(self.stdout.strip().splitlines()[-1])


def cli_env(home: Path, api: Any = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the real CLI in a test: this process's without our variables (SCRUBBED), HOME and
    COMPACT_AGENT_HOME under ``home``, a test key, the fake API's URL if there is one, and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED)}
    env.update(
        {
            "HOME": str(home),
            "COMPACT_AGENT_HOME": str(home / ".compact-agent"),
            "ANTHROPIC_API_KEY": "test-key",
            "PYTHONPATH": str(ROOT),
        }
    )
    if api is not None:
        env["ANTHROPIC_BASE_URL"] = api.url
    env.update(extra or {})
    return env


def run_process(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str | None, timeout: float = 120
) -> CliResult:
    """``python -m agent`` with ``args`` as a real subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "agent", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def _join(thread: threading.Thread, deadline: float) -> None:
    """``thread.join`` up to ``deadline``; a thread whose ``start()`` was called but which is not yet running
    is listed by ``threading.enumerate`` and can't be joined yet: wait for it to begin (a loaded machine
    makes that moment long enough to see)."""
    while True:
        try:
            thread.join(max(0.0, deadline - time.monotonic()))
            return
        except RuntimeError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)


def run_in_process(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str | None, timeout: float = 120
) -> CliResult:
    """``agent.cli.main`` with ``args``, as a process would run it: ``env`` as the whole environment,
    ``cwd`` as the working directory, ``stdin`` (else an empty, closed one) and the output captured; then
    what a process's exit does: notes updates in flight are waited for (the exit hook), the watchdog's
    groups die, the transcripts' locks are released, and the threads the run started are given ``timeout`` to end (a daemon thread dies
    with a process: here one still running fails the test rather than outlive it)."""
    from agent.cli import main
    from compact.compaction import notes_updater
    from core import transcript_writer as writer
    from tools.process import watchdog

    saved = (dict(os.environ), os.getcwd(), sys.argv, sys.stdin, sys.stdout, sys.stderr)
    before = set(threading.enumerate())
    locked = set(writer._locks)
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.argv = ["compact-agent", *args]
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin or ""), out, err
        try:
            main()
        except SystemExit as e:
            code = e.code
    finally:
        notes_updater.wait_at_exit()
        watchdog.close()
        for path in set(writer._locks) - locked:  # an exit closes the descriptors: the transcripts' locks go
            os.close(writer._locks.pop(path)[0])
        # the run's threads end under the run's environment, as in a process: restoring it first changed
        # os.environ under a thread still reading it (the SDK's proxy scan: KeyError 'PYTHONPATH')
        left = _join_started(before, time.monotonic() + timeout)
        os.environ.clear()
        os.environ.update(saved[0])
        os.chdir(saved[1])
        sys.argv, sys.stdin, sys.stdout, sys.stderr = saved[2:]
    assert not left, f"the run left {left[0].name} running"
    number = code if isinstance(code, int) else (0 if code is None else 1)
    if isinstance(code, str):
        err.write(code + "\n")
    return CliResult(number, out.getvalue(), err.getvalue())


def _join_started(before: set[threading.Thread], deadline: float) -> list[threading.Thread]:
    """Join the threads the agent started since ``before`` until ``deadline``; those still running."""
    started = [t for t in set(threading.enumerate()) - before if _ours(t)]
    for thread in started:
        _join(thread, deadline)
    return [t for t in started if t.is_alive()]


def _ours(thread: threading.Thread) -> bool:
    """Whether the agent started ``thread`` (not the fake API's server, which serves its connections)."""
    target = getattr(thread, "_target", None)
    return getattr(target, "__module__", "").split(".")[0] in ("agent", "compact", "tools", "core")


def wait_for(condition: Callable[[], Any], timeout: float = 60) -> Any:
    """Poll ``condition`` until it returns something true (returned), failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def runs_under(pid: int, command: str) -> bool:
    """Whether a process whose command line contains ``command`` runs below ``pid`` (read from /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    for child in parents:
        p = parents[child]
        while p > 1 and p != pid:
            p = parents.get(p, 0)
        if p == pid and command in _cmdline(child):
            return True
    return False


def _cmdline(pid: int) -> str:
    try:
        return (
            (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


SECRET = "sk-ant-test-SECRET-0123456789"


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (the Bash tool runs its commands in their own session)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def kill_tree(proc: subprocess.Popen[str]) -> None:
    """SIGKILL: the CLI's process group first (as a crash would), then whatever it had started."""
    below = descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGKILL)
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.communicate(timeout=30)
