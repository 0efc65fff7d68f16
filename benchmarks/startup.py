"""Start-up figures, as ratios to `python -c "import anthropic"` measured in the same run.

    compact-agent --version                       target ≤ 0.35×
    compact-agent -p: process start → first request reaching the fake server   target ≤ 1.3×

Each figure is the median of N runs (default 7). Run: python benchmarks/startup.py [N] [--profile 2026|4.x]
(benchmarks/thinking.py: print mode on claude-sonnet-5-5 against the 2026 profile by default; its requests'
refusals are printed).
"""

from __future__ import annotations

import argparse
import os
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

sys.path.insert(0, str(ROOT / "benchmarks"))
import thinking  # noqa: E402


def timed(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def first_request(env: dict[str, str], cwd: str, api: FakeAPI) -> float:
    """Seconds from spawning `compact-agent -p` to the first POST /v1/messages arriving."""
    arrived = threading.Event()
    api.on(lambda body: (arrived.set(), False)[1], None)  # type: ignore[arg-type]
    api.reply_text("ok")
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent", "-p", "hi"],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    arrived.wait(60)
    elapsed = time.perf_counter() - start
    proc.wait(60)
    api.routes.clear()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=int, default=7)
    thinking.add_argument(parser)
    args = parser.parse_args()
    runs = args.runs
    with tempfile.TemporaryDirectory() as tmp, FakeAPI(**thinking.fake(args.profile)) as api:
        # without PYTHONDONTWRITEBYTECODE: our bytecode is cached after the first run, as the SDK's is by pip
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "CLAUDE_")) and k != "PYTHONDONTWRITEBYTECODE"
        }
        env.update(api.env(), HOME=tmp, COMPACT_AGENT_HOME=f"{tmp}/state", PYTHONPATH=str(ROOT))
        env["ANTHROPIC_MODEL"] = thinking.model(args.profile)  # the family the fake plays
        cwd = tmp
        sdk, version, first = [], [], []
        for _ in range(runs):  # interleaved, so machine noise hits all three alike
            sdk.append(timed([sys.executable, "-c", "import anthropic"], env, cwd))
            version.append(timed([sys.executable, "-m", "agent", "--version"], env, cwd))
            first.append(first_request(env, cwd, api))
        base = statistics.median(sdk)
        rows = [
            ("python -c 'import anthropic'", base, None),
            ("compact-agent --version", statistics.median(version), 0.35),
            ("compact-agent -p → first request", statistics.median(first), 1.3),
        ]
        print(f"{'what':40} {'median s':>9} {'ratio':>7} {'target':>7}")
        ok = True
        for name, value, target in rows:
            ratio = value / base
            mark = "" if target is None else ("ok" if ratio <= target else "OVER")
            ok &= target is None or ratio <= target
            print(f"{name:40} {value:9.3f} {ratio:6.2f}× {('≤ %.2f×' % target) if target else '':>7} {mark}")
        tally = thinking.Tally(args.profile)
        tally.api(api)
        tally.transcripts(Path(tmp))
        print(tally.report("print mode's requests"))
    return 0 if ok and tally.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
