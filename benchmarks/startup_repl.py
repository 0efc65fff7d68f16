"""Start-up time of the REPL: process start → first prompt drawn, against `python -c "import anthropic"`;
and the first minute: a prompt typed the moment the REPL appears → its request at the server, against the
same prompt typed once the REPL has sat idle.

The agent runs in a pseudo-terminal (this script answers its cursor-position requests, as a terminal
would); the clock stops when the prompt (">") appears after the banner. The SDK import is timed from
process start to exit. The runs alternate between the two, so a busy machine slows both alike; the
target is a ratio of at most 0.3. For the first prompt the agent talks to the tests' fake Messages API
(tests/fakeapi.py) in this process: the clock starts when the line's Enter is written to the terminal and
stops when POST /v1/messages arrives; "at once" types it as soon as the prompt is drawn, "idle" after
IDLE_SECONDS. Target: at once ≤ 1.3 × idle.

    .venv/bin/python benchmarks/startup_repl.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakeapi import FakeAPI  # noqa: E402

IDLE_SECONDS = 6.0  # long enough for every background import to be over on a loaded machine
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")
BANNER = b"/help for commands"


def agent_command() -> list[str]:
    cli = ROOT / ".venv" / "bin" / "compact-agent"
    return [str(cli)] if cli.exists() else [sys.executable, "-m", "agent"]


def time_to_prompt(env: dict[str, str], cwd: Path, timeout: float = 30.0) -> float:
    return run_agent(env, cwd, timeout)[0]


def first_request(env: dict[str, str], cwd: Path, api: FakeAPI, idle: float) -> float:
    """Seconds from the Enter of a prompt typed ``idle`` seconds after the REPL appeared to its request
    arriving at the fake."""
    arrived = threading.Event()
    api.on(lambda body: (arrived.set(), False)[1], None)  # type: ignore[arg-type]
    api.reply_text("ok")
    try:
        return run_agent(env, cwd, 30.0, typed=(idle, arrived))[1]
    finally:
        api.routes.clear()
        api.script.clear()


def run_agent(
    env: dict[str, str], cwd: Path, timeout: float, typed: tuple[float, threading.Event] | None = None
) -> tuple[float, float]:
    """(process start → prompt drawn, Enter typed → request arrived: 0 without ``typed``)."""
    master, slave = pty.openpty()
    started = time.perf_counter()
    proc = subprocess.Popen(
        agent_command(),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=cwd,
        close_fds=True,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""
    try:
        while time.perf_counter() - started < timeout:
            ready, _, _ = select.select([master], [], [], 0.01)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if b"\x1b[6n" in chunk:  # answer cursor-position requests as a terminal would
                os.write(master, b"\x1b[1;1R")
            seen += chunk
            text = ANSI.sub(b"", seen)
            at = text.find(BANNER)
            if at >= 0 and b">" in text[at + len(BANNER) :]:
                drawn = time.perf_counter() - started
                if typed is None:
                    return drawn, 0.0
                wait, arrived = typed
                end = time.perf_counter() + wait
                while time.perf_counter() < end:  # keep reading (and answering) what the agent writes
                    if select.select([master], [], [], 0.01)[0]:
                        os.read(master, 65536)
                os.write(master, b"say ok")
                sent = time.perf_counter()
                os.write(master, b"\r")
                while not arrived.is_set():
                    if time.perf_counter() - sent > timeout:
                        raise RuntimeError("the first request never came")
                    if select.select([master], [], [], 0.005)[0]:
                        chunk = os.read(master, 65536)
                        if b"\x1b[6n" in chunk:
                            os.write(master, b"\x1b[1;1R")
                    arrived.wait(0.001)
                return drawn, time.perf_counter() - sent
        raise RuntimeError(f"no prompt within {timeout}s; output so far: {ANSI.sub(b'', seen)[-500:]!r}")
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(master)


def time_sdk_import(env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import anthropic"], env=env, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        project.mkdir(parents=True)
        env = {
            k: v
            for k, v in os.environ.items()
            # PYTHONDONTWRITEBYTECODE would make every run compile our sources again, while the SDK's
            # bytecode was written by pip: both are timed with their caches, as an install has them
            if not k.startswith(("ANTHROPIC_", "CLAUDE_", "COMPACT_AGENT_"))
            and k != "PYTHONDONTWRITEBYTECODE"
        }
        env.update(
            {
                "HOME": str(home),
                "COMPACT_AGENT_HOME": str(home / ".compact-agent"),
                "ANTHROPIC_API_KEY": "test-key",
                "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
                "TERM": "xterm-256color",
                "PYTHONPATH": str(ROOT),
            }
        )
        time_to_prompt(env, project)  # warm the file cache and the bytecode
        time_sdk_import(env)
        prompt, sdk = [], []
        for _ in range(runs):  # interleaved, so a busy machine slows both alike
            prompt.append(time_to_prompt(env, project))
            sdk.append(time_sdk_import(env))
        at_once, idle = [], []
        with FakeAPI() as api:
            env.update(api.env())
            for _ in range(runs):
                at_once.append(first_request(env, project, api, 0.0))
                idle.append(first_request(env, project, api, IDLE_SECONDS))
    p, s = statistics.median(prompt), statistics.median(sdk)
    print(
        f"REPL start → first prompt:    {p * 1000:6.0f} ms median, {min(prompt) * 1000:6.0f} ms best of {runs}"
    )
    print(
        f'python -c "import anthropic": {s * 1000:6.0f} ms median, {min(sdk) * 1000:6.0f} ms best of {runs}'
    )
    print(f"ratio: {p / s:.2f} median, {min(prompt) / min(sdk):.2f} best (target ≤ 0.30)")
    a, i = statistics.median(at_once), statistics.median(idle)
    print(f"first prompt typed at once → first request: {a * 1000:6.0f} ms median (runs: {_ms(at_once)})")
    print(f"the same prompt typed when idle → request:  {i * 1000:6.0f} ms median (runs: {_ms(idle)})")
    print(f"ratio: {a / i:.2f} median (target ≤ 1.30)")


def _ms(values: list[float]) -> str:
    return ", ".join(f"{v * 1000:.0f}" for v in values)


if __name__ == "__main__":
    main()
