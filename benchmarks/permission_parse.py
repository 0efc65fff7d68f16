"""Bash permission check time stays bounded: adversarial input costs a small multiple of an ordinary
command, and big input costs time in proportion to its size, never more.

    worst deeply nested input / ordinary command           target ≤ 25×  (every check answers, none raises)
    big input at four times the size / at the size (worst)  target ≤ 10×  (linear: 4×, quadratic: 16×)

The nested corpus is $(...), subshells, groups, arithmetic, if, bash -c, ${:-} and wrappers hundreds deep;
the big corpus is many commands, a long pipeline, a long word, many arithmetic uses and subscripts (the
code-evaluating forms of issue 20) and many global options. Each figure is the fastest of N runs (default
5: on a busy machine the fastest run is the least disturbed), ratios taken within one run; a nested
input's ratio is taken against the ordinary command timed in turn with it (the two runs alternate), so a
machine under load slows both alike. A line nested deeper than the words' limit (tools.shell.reader
``_MAX_NESTING``) is refused after a scan, before any parse. Run: python benchmarks/permission_parse.py [N]
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tools.registry  # noqa: E402, F401  (declares the built-in tools, as a session does)
from tests.helpers.permissions import RuleSettings  # noqa: E402
from tools.permissions.engine import Permissions  # noqa: E402

ORDINARY = "git status && pytest -q tests/test_a.py 2>&1 | tail -20"
READ_DENY = ["Read(.env)", "Read(~/.ssh/**)"]
NESTED = {
    "400-deep $( )": "echo " + "$(" * 400 + "x" + ")" * 400,
    "2000-deep ( )": "(" * 2000 + "rm f" + ")" * 2000,
    "1000-deep { }": "{ " * 1000 + "rm f;" + " }" * 1000,
    "1000-deep (( ))": "echo $((" + "(" * 1000 + "1" + ")" * 1000 + "))",
    "500-deep if": "if true; then " * 500 + "rm f" + "; fi" * 500,
    "60-deep bash -c": "bash -c " + "'bash -c \"" * 60,
    "800-deep ${:-}": "x=" + "${y:-" * 800 + "}" * 800,
    "200 wrappers": "timeout 5 " * 200 + "rm f",
    # just under the words' limit (tools.shell.reader _MAX_NESTING): parsed and walked
    "60-deep if": "if true; then " * 60 + "rm f" + "; fi" * 60,
    "60-deep $( )": "echo " + "$(" * 60 + "x" + ")" * 60,
    "60-deep ( )": "(" * 60 + "rm f" + ")" * 60,
    "30-deep for/$( )": "for i in a; do echo $(" * 30 + "rm f" + "); done" * 30,
}
BIG = {  # each builds its input at size n
    "commands": lambda n: "; ".join(f"echo {i}" for i in range(n)),
    "pipeline": lambda n: " | ".join(["cat"] * n),
    "word": lambda n: "echo " + "a" * (50 * n),
    "arithmetic uses": lambda n: "y=$(cat f); " + "; ".join(f"echo $((y + {i}))" for i in range(n)),
    "subscripts": lambda n: "; ".join(f"echo ${{a[i{i}]}}" for i in range(n)),
    "sed commands": lambda n: "sed '" + ";".join(f"s/a{i}/b/g" for i in range(n)) + "' f",
    "git globals": lambda n: "git " + "--no-pager " * n + "push",
}


def check_seconds(perms: Permissions, command: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        perms.check("Bash", {"command": command})
        times.append(time.perf_counter() - start)
    return min(times)


def paired_seconds(perms: Permissions, command: str, runs: int) -> tuple[float, float]:
    """(ordinary, command): each the fastest of ``runs``, timed in turn with each other."""
    ordinary, other = [], []
    for _ in range(runs):
        for text, times in ((ORDINARY, ordinary), (command, other)):
            start = time.perf_counter()
            perms.check("Bash", {"command": text})
            times.append(time.perf_counter() - start)
    return min(ordinary), min(other)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        settings = RuleSettings(
            cwd=project,
            home=Path(tmp) / "agent-home",
            user_home=Path(tmp) / "home",
            deny=["Bash(rm:*)", "Bash(git push:*)"],
            allow=["Bash(echo:*)", "Bash(cat:*)", "Bash(git status:*)", "Bash(pytest:*)", "Bash(tail:*)"],
        )
        perms = Permissions(settings)
        perms.check("Bash", {"command": ORDINARY})  # load the grammar outside the timings
        ordinary = check_seconds(perms, ORDINARY, max(runs, 20))
        print(f"ordinary command: {ordinary * 1e3:.3f} ms  ({ORDINARY})")
        # the same with Read deny rules in force: every read of the line is judged (tools.shell.reads)
        reading = Permissions(dataclasses.replace(settings, deny=[*settings.deny, *READ_DENY]))
        reading.check("Bash", {"command": ORDINARY})
        print(
            f"  with {', '.join(READ_DENY)}: {check_seconds(reading, ORDINARY, max(runs, 20)) * 1e3:.3f} ms"
        )
        worst_name, worst, worst_ratio = "", 0.0, 0.0
        for name, command in NESTED.items():
            beside, seconds = paired_seconds(perms, command, max(runs, 20))
            behavior = perms.check("Bash", {"command": command}).behavior
            print(f"  {name:18} {seconds * 1e3:8.2f} ms  {seconds / beside:7.1f}x  -> {behavior}")
            if seconds / beside > worst_ratio:
                worst_name, worst, worst_ratio = name, seconds, seconds / beside
        print(f"worst nested: {worst_name}, {worst * 1e3:.2f} ms = {worst_ratio:.1f}x the ordinary command")
        growth_name, growth = "", 0.0
        for name, build in BIG.items():
            small, large = (check_seconds(perms, build(n), runs) for n in (1000, 4000))
            print(
                f"  {name:18} n=1000 {small * 1e3:7.1f} ms, n=4000 {large * 1e3:7.1f} ms  ({large / small:.2f}x)"
            )
            if large / small > growth:
                growth_name, growth = name, large / small
        print(f"worst growth at four times the size: {growth_name}, {growth:.2f}x")


if __name__ == "__main__":
    main()
