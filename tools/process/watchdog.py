"""Commands die with the agent: a tiny watchdog process SIGKILLs the process groups of Bash commands
when the agent process goes away, however it goes (exit, crash, SIGKILL).

Each Bash command runs in a process group of its own. The first Bash call starts the watchdog
(``python -I -S tools/process/watchdog.py``, in a session of its own so the terminal's Ctrl-C and hang-up reach
only the agent) with its stdin a pipe from the agent. Bash sends ``+PGID`` when a command starts and
``-PGID`` when it has ended leaving nothing behind. A group that background jobs (``server &``) keep
alive stays registered, so those die with the agent too. The watchdog forgets groups that have emptied
on their own (it checks every second). When its stdin reaches end of file, which the kernel brings
about when the agent exits or is killed, or when its parent changes, it SIGKILLs every group still
registered and exits: it never outlives the agent. A command that leaves its group (``setsid``,
``set -m``) leaves this protection too. A child is held at a ``Gate`` until its group is registered,
so a kill between its start and its registration can't leave it running: it then never runs.

This file is both the agent's side (``watch``, ``done``, ``close``) and, run as a script, the
watchdog; the script part uses nothing but the standard library.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading

CHECK_SECONDS = 1.0

_lock = threading.Lock()
_process: subprocess.Popen[bytes] | None = None
_watched: set[int] = set()


def watch(pgid: int) -> None:
    """Have the process group ``pgid`` killed if the agent dies before it ends."""
    with _lock:
        _watched.add(pgid)
        _send(f"+{pgid}\n")


class Gate:
    """Holds a child back until the watchdog knows its group, so no kill -9 of the agent can fall between
    the child starting and its registration: the child's shell first reads a line from a pipe
    (``prefix``, passed with ``fds``) that the agent writes only once the group is registered
    (``opened``). If the agent dies before, the read meets end of file and the child exits 125 without
    running anything."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        self.fds = (self._read,)
        self.prefix = f"read -r -u {self._read} _ || exit 125; exec {self._read}<&-; "

    def opened(self, pid: int) -> None:
        """The child ``pid`` (its group's leader) was started: register it, then let it run."""
        os.close(self._read)
        try:
            watch(pid)
            os.write(self._write, b"\n")
        except OSError:
            pass  # the child is gone already (killed before it read): nothing to let through
        finally:
            os.close(self._write)

    def failed(self) -> None:
        """The child could not be started."""
        os.close(self._read)
        os.close(self._write)


def done(pgid: int) -> None:
    """The command of group ``pgid`` has returned; forget the group unless something in it still runs."""
    if _group_alive(pgid):
        return  # background jobs: still the watchdog's to kill, and to forget once they end
    with _lock:
        _watched.discard(pgid)
        _send(f"-{pgid}\n")


def close() -> None:
    """Stop the watchdog now, killing the groups it still watches (what the agent's exit does anyway)."""
    global _process
    with _lock:
        process, _process = _process, None
        _watched.clear()
    if process is not None:
        assert process.stdin is not None
        process.stdin.close()
        process.wait()


def watchdog_pid() -> int | None:
    return _process.pid if _process is not None else None


def _send(line: str) -> None:
    # Called with _lock held. A watchdog that is gone (someone killed it) is replaced at the next
    # "+", and the new one is told every group still watched.
    global _process
    if _process is not None and _process.poll() is None and _write(_process, line):
        return
    if line.startswith("-"):
        return
    try:
        _process = _start()
    except OSError:
        _process = None  # no watchdog: commands still run, only without this protection
        return
    _write(_process, "".join(f"+{pgid}\n" for pgid in _watched))


def _write(process: subprocess.Popen[bytes], line: str) -> bool:
    assert process.stdin is not None
    try:
        process.stdin.write(line.encode("ascii"))
    except OSError:
        return False
    return True


def _start() -> subprocess.Popen[bytes]:
    # -I: neither this directory (tools/ has a glob.py) nor the environment changes what Python loads;
    # -S: no site-packages, so it starts fast. Its own session: no terminal signals.
    return subprocess.Popen(
        [sys.executable, "-I", "-S", os.path.abspath(__file__)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd="/",
        bufsize=0,
        start_new_session=True,
    )


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, though not ours to signal (a setuid program)
    return True


def main() -> None:
    """The watchdog: read +PGID / -PGID lines until end of file, then SIGKILL the groups left."""
    parent = os.getppid()
    groups: set[int] = set()
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], CHECK_SECONDS)
        if ready:
            data = os.read(0, 4096)
            if not data:
                break
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                if line[:1] == b"+" and line[1:].isdigit():
                    groups.add(int(line[1:]))
                elif line[:1] == b"-" and line[1:].isdigit():
                    groups.discard(int(line[1:]))
        if os.getppid() != parent:
            break  # the agent is gone even if something still holds the pipe open
        groups = {pgid for pgid in groups if _group_alive(pgid)}
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass


if __name__ == "__main__":
    main()
