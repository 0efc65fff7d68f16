"""Peak memory of the tools on huge inputs, next to a bare `python -c "import tools.read"`.

    Read of a 1 GB file that is one single line                          target < 50 MB
    Read of a 1 GB file of short lines, offset near its end              target < 50 MB
    Grep, content mode, over a 200 MB tree where most lines match        target < 100 MB
    A hook that prints 1.5 GB (HookRunner, the head kept, the rest on disk)   target < 100 MB
    A 200 MB Write from the model, through the real CLI (-p, fake API)   target < 8× the input

Each figure is the peak resident set (VmHWM) of a fresh Python process that makes one tool call (for the
Write, the CLI process's peak, as the kernel reports it for a waited-for child); rg's own memory and the
fake API's are not counted. The fake sends the tool input in three deltas, so the SDK's parse of each
~70 MB event is part of the Write's figure (the real API streams small deltas). The files are made in a temp directory (deleted after each case):
a repeated 1 MiB block, not a sparse file, since a file of NUL bytes is refused as binary.
The Write runs on claude-sonnet-5-5 against the 2026 profile by default (benchmarks/thinking.py; the
reply thinks, the prefix check is enforced); its requests' refusals are printed.
Run: .venv/bin/python benchmarks/memory.py [--dir DIR] [--write-only] [--profile 2026|4.x]. Exits 1 if
a target is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.fakeapi import FakeAPI  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import thinking  # noqa: E402

GB = 1 << 30
MB = 1 << 20

PEAK = """
from pathlib import Path
status = Path("/proc/self/status").read_text()
print(next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), size)
"""
BARE = "import tools.read\nsize = 0\n" + PEAK
# One tool call: argv = case ("read" or "grep"), path, [offset]. Prints peak kB and the result's length.
CALL = (
    """
import sys
from pathlib import Path
from tools.base import ToolContext
from tools.grep import GrepTool
from tools.read import ReadTool

case, path = sys.argv[1], Path(sys.argv[2])
ctx = ToolContext(project_dir=path.parent, session_dir=path.parent / "session", cwd=path.parent)
if case == "read":
    args = {"file_path": str(path)}
    if len(sys.argv) > 3:
        args.update(offset=int(sys.argv[3]), limit=100)
    result = ReadTool().run(args, ctx)
elif case == "hook":
    from agent.runtime.hooks import HookRunner

    command = "head -c 1610612736 /dev/zero | tr '\\\\0' x"
    runner = HookRunner({"Stop": [{"hooks": [{"type": "command", "command": command}]}]}, path.parent, {"PATH": "/usr/bin:/bin"}, spill_dir=path.parent)
    [outcome] = runner.run("Stop", {})
    assert outcome.ok, outcome.stderr
    result = type("R", (), {"content": outcome.stdout})
else:
    result = GrepTool().run({"pattern": "match", "output_mode": "content", "path": str(path)}, ctx)
size = len(result.content)
"""
    + PEAK
)


def measure(*args: str) -> tuple[float, float, int]:
    """(peak MB, seconds, result characters) of one tool call in a fresh process."""
    code = BARE if args[0] == "bare" else CALL
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{args[0]} failed:\n{done.stderr}")
    peak_kb, size = map(int, done.stdout.split())
    return peak_kb / 1024, elapsed, size


def big_write(base: Path, size: int, profile: str = thinking.DEFAULT) -> tuple[float, float, int]:
    """(peak MB, seconds, file bytes) of the CLI carrying out one Write of ``size`` bytes from the model."""
    import resource

    project = base / "write-project"
    project.mkdir()
    target = project / "big.txt"
    with FakeAPI(**thinking.fake(profile)) as api:
        api.reply_tool("Write", {"file_path": str(target), "content": "0123456789abcde\n" * (size // 16)})
        api.reply_text("written")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "COMPACT_AGENT_"))}
        env.update(
            HOME=str(base),
            COMPACT_AGENT_HOME=str(base / ".compact-agent"),
            ANTHROPIC_API_KEY="benchmark-key",
            ANTHROPIC_BASE_URL=api.url,
            PYTHONPATH=str(ROOT),
            COMPACT_AGENT_SESSION_MEMORY="0",
            ANTHROPIC_MODEL=thinking.model(profile),
        )
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent", "-p", "write it", "--dangerously-skip-permissions"],
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = proc.communicate()
        elapsed = time.perf_counter() - start
        tally = thinking.Tally(profile)
        tally.api(api)
        tally.transcripts(base / ".compact-agent")
        print(tally.report("the Write's requests"))
    if proc.returncode or out != b"written\n":
        raise SystemExit(f"the Write run failed:\n{err.decode(errors='replace')}")
    # the largest peak of any child waited for so far: this run's, far above the earlier cases'
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return peak, elapsed, target.stat().st_size


def write_repeated(path: Path, block: bytes, size: int) -> None:
    with path.open("wb") as out:
        for _ in range(size // len(block)):
            out.write(block)


def one_line_file(path: Path) -> Path:
    write_repeated(path, b"0123456789abcdef" * (MB // 16), GB)
    return path


def many_line_file(path: Path) -> tuple[Path, int]:
    """1 GB of 64-byte lines; returns the path and an offset 100 lines before the end."""
    block = b"".join(
        b"line %08d of a file with many short lines, 64 bytes each.\n" % n for n in range(16_384)
    )
    write_repeated(path, block, GB)
    return path, GB // 64 - 99


def tree(root: Path) -> Path:
    """200 MB: 40 directories of 20 files of 256 KB, where 7 lines in 8 match."""
    lines = [
        b"line %05d: %s\n" % (n, (b"match here" if n % 8 else b"nothing to see").ljust(40, b"."))
        for n in range(4_854)
    ]
    body = b"".join(lines)
    for d in range(40):
        (root / f"dir{d:02}").mkdir(parents=True)
        for f in range(20):
            (root / f"dir{d:02}" / f"file{f:02}.txt").write_bytes(body)
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", help="where to make the temp files (default: the system temp directory)")
    parser.add_argument("--write-only", action="store_true", help="only the 200 MB Write through the CLI")
    thinking.add_argument(parser)
    options = parser.parse_args()
    rows: list[tuple[str, float, float, int, int | None]] = []
    with tempfile.TemporaryDirectory(dir=options.dir) as tmp:
        base = Path(tmp)
        rows.append(("python -c 'import tools.read'", *measure("bare", str(base)), None))
        if options.write_only:
            rows.append(
                ("Write of 200 MB from the model (CLI)", *big_write(base, 200 * MB, options.profile), 8 * 200)
            )
            return _report(rows)

        path = one_line_file(base / "one-line.txt")
        rows.append(("Read, 1 GB in one line", *measure("read", str(path)), 50))
        path.unlink()

        path, offset = many_line_file(base / "many-lines.txt")
        rows.append((f"Read, 1 GB of lines, offset {offset:,}", *measure("read", str(path), str(offset)), 50))
        path.unlink()

        root = tree(base / "tree")
        rows.append(("Grep content, 200 MB tree, most lines", *measure("grep", str(root)), 100))
        shutil.rmtree(root)

        rows.append(("Hook printing 1.5 GB", *measure("hook", str(base / "hook-out")), 100))
        for spilled in base.glob("Stop-std*"):
            spilled.unlink()

        rows.append(
            ("Write of 200 MB from the model (CLI)", *big_write(base, 200 * MB, options.profile), 8 * 200)
        )
    return _report(rows)


def _report(rows: list[tuple[str, float, float, int, int | None]]) -> int:
    print(f"{'what':42} {'peak MB':>8} {'seconds':>8} {'result chars':>13} {'target':>8}")
    ok = True
    for name, peak, seconds, size, target in rows:
        mark = "" if target is None else ("ok" if peak < target else "OVER")
        ok &= target is None or peak < target
        print(
            f"{name:42} {peak:8.1f} {seconds:8.2f} {size:13,} {('< %d MB' % target) if target else '':>8} {mark}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
