"""The one way a child process is run: Bash commands, hooks and ripgrep all come through ``run``.

A child is a ``bash -c`` script in a process group of its own, held at the watchdog's ``Gate`` until
the watchdog knows the group (so it dies with the agent, however the agent ends). Its output is read as
it comes and handed to the caller's sinks (a ``SpillingOutput`` usually: a capped head in memory, the
rest in a file). ``run`` returns when the child is done, or stops it:

- ``until="exit"`` (Bash): done when the shell exits; a background job still holding the pipe does
  not keep the call open (what it printed within ``drain`` seconds is taken).
- ``until="eof"`` (hooks, rg): done when the shell has exited *and* closed its output. A shell that
  exited while something it left behind holds the pipes has still finished: at the deadline the
  leftovers are killed and the output so far is the outcome, not a timeout.

At the deadline, or when ``cancel`` says so, the whole group is signalled: SIGTERM and, after
``grace`` seconds, SIGKILL (``grace=0``: SIGKILL at once; children that ignore SIGTERM get it either
way). Anything that leaves ``run`` early (an exception, KeyboardInterrupt) takes the group along.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from tools.process import watchdog

POLL_SECONDS = 0.05
READ_BYTES = 65536

Sink = Callable[[bytes], None]


@dataclass(frozen=True)
class Finished:
    exit_code: int | None  # negative: killed by that signal; None only if it could not be waited for
    stopped: Literal["timeout", "cancelled"] | None = None  # set when run stopped the child


def run(
    script: str,
    args: Sequence[str] = (),
    *,
    cwd: Path,
    env: Mapping[str, str] | None,
    stdout: Sink,
    stderr: Sink | None = None,
    stdin: bytes | None = None,
    timeout: float,
    cancel: Callable[[], bool] = lambda: False,
    until: Literal["exit", "eof"] = "eof",
    grace: float = 0.0,
    drain: float = 0.2,
) -> Finished:
    """Run ``bash -c script`` with ``args`` as ``$1...`` in ``cwd`` behind the watchdog's gate.

    ``stderr=None`` merges stderr into ``stdout``; ``stdin=None`` closes it (else the bytes are fed from
    a thread, a child that does not read them is no error). Raises OSError when it cannot be started."""
    gate = watchdog.Gate()
    proc = None
    try:
        proc = subprocess.Popen(
            ["bash", "-c", gate.prefix + script, "bash", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if stderr is None else subprocess.PIPE,
            start_new_session=True,
            pass_fds=gate.fds,
        )
    finally:
        if proc is None:  # not started (whatever stopped it is raised as it was)
            gate.failed()
    pipes: list[tuple[IO[bytes], Sink]] = [(_pipe(proc.stdout), stdout)]
    if stderr is not None:
        pipes.append((_pipe(proc.stderr), stderr))
    try:
        gate.opened(proc.pid)  # from here on the watchdog kills the group if the agent dies
        if stdin is not None:
            threading.Thread(target=_feed, args=(_pipe(proc.stdin), stdin), daemon=True).start()
        with selectors.DefaultSelector() as selector:
            for pipe, sink in pipes:
                os.set_blocking(pipe.fileno(), False)
                selector.register(pipe.fileno(), selectors.EVENT_READ, sink)
            stopped, kill = _pump(proc, selector, time.monotonic() + timeout, cancel, until == "exit")
            if kill:
                _stop_group(proc, grace)
            _drain(selector, drain, wait=kill)
        return Finished(proc.wait(), stopped)
    finally:
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        watchdog.done(proc.pid)
        for pipe, _ in pipes:
            pipe.close()


def _pump(
    proc: subprocess.Popen[bytes],
    selector: selectors.BaseSelector,
    deadline: float,
    cancel: Callable[[], bool],
    until_exit: bool,
) -> tuple[Literal["timeout", "cancelled"] | None, bool]:
    """Read until the child is done; (why it was stopped, whether its group must be killed)."""
    while True:
        exited = proc.poll() is not None
        if exited and (until_exit or not selector.get_map()):
            return None, False
        if cancel():
            return "cancelled", True
        if time.monotonic() >= deadline:
            # an exited shell whose leftovers hold the pipes has finished; only the leftovers die
            return (None if exited else "timeout"), True
        if selector.get_map():
            _read_ready(selector, POLL_SECONDS)
        else:
            try:
                proc.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                pass


def _read_ready(selector: selectors.BaseSelector, wait: float) -> bool:
    """Read every pipe that has something (or its end) within ``wait`` seconds; False if none had."""
    ready = selector.select(wait)
    for key, _ in ready:
        while True:
            try:
                chunk = os.read(key.fd, READ_BYTES)
            except BlockingIOError:
                break
            if not chunk:
                selector.unregister(key.fd)
                break
            key.data(chunk)
    return bool(ready)


def _drain(selector: selectors.BaseSelector, seconds: float, wait: bool) -> None:
    """What is left in the pipes, for at most ``seconds``: until they close after a kill (``wait``),
    else only while something is there (a background job may hold them open for hours)."""
    stop_at = time.monotonic() + seconds
    while selector.get_map() and time.monotonic() < stop_at:
        pause = min(POLL_SECONDS, max(0.0, stop_at - time.monotonic())) if wait else 0.0
        if not _read_ready(selector, pause) and not wait:
            return


def _stop_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    if grace > 0:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(proc.pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _feed(pipe: IO[bytes], data: bytes) -> None:
    try:
        pipe.write(data)
    except OSError:
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _pipe(pipe: IO[bytes] | None) -> IO[bytes]:
    assert pipe is not None
    return pipe
