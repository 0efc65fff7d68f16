"""Start-up time of the REPL: process start → first prompt drawn, against `python -c "import anthropic"`.

The agent runs in a pseudo-terminal (this script answers its cursor-position requests, as a terminal
would); the clock stops when the prompt (">") appears after the banner. The SDK import is timed from
process start to exit. The runs alternate between the two, so a busy machine slows both alike; the
target is a ratio of at most 0.3.

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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")
BANNER = b"/help for commands"


def agent_command() -> list[str]:
    cli = ROOT / ".venv" / "bin" / "compact-agent"
    return [str(cli)] if cli.exists() else [sys.executable, "-m", "agent"]


def time_to_prompt(env: dict[str, str], cwd: Path, timeout: float = 30.0) -> float:
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
                return time.perf_counter() - started
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
    p, s = statistics.median(prompt), statistics.median(sdk)
    print(
        f"REPL start → first prompt:    {p * 1000:6.0f} ms median, {min(prompt) * 1000:6.0f} ms best of {runs}"
    )
    print(
        f'python -c "import anthropic": {s * 1000:6.0f} ms median, {min(sdk) * 1000:6.0f} ms best of {runs}'
    )
    print(f"ratio: {p / s:.2f} median, {min(prompt) / min(sdk):.2f} best (target ≤ 0.30)")


if __name__ == "__main__":
    main()
