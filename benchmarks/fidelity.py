"""What survives a compaction: the working state in the request that follows it, with a poor summary.

Three scripted sessions (benchmarks/scripted.py: a refactor across files, debugging with failing tests
and commands, a long exploration) run through the real agent and the loopback fake at a 50K window,
once per compaction path: full summary (session memory off), notes (session memory on), context
collapse (its turns cut into turns of two replies, since collapse takes only whole old turns), reactive
(the fake answers "prompt is too long", auto-compact off) and /compact (between turns). Every summary, note and span summary the fake writes is "We worked on some code."

After each compaction the next main request is searched (system, texts, tool inputs and results) for:

  modified paths   every file written or edited so far (absolute or project-relative path), in the
                   request or in the complete list it names (the ledger over its budget)
  failing cmds     every command that failed and has not succeeded since, with its exit code near it
  last 10 cmds     the last ten commands run
  constraints      every rule the user set in a prompt so far, verbatim
  todo             every item of the last TodoWrite list (n/a when the agent has no TodoWrite tool)

Run: .venv/bin/python benchmarks/fidelity.py [--scenario NAME] [--mode MODE] [--profile 2026|4.x]
[--cost-aware off] (off: compaction at T as before cost-aware compaction, for a side-by-side figure).
Prints per path and item the share of items kept over all compactions, and the totals. About half a
minute; the background preparation's timing moves a compaction now and then between runs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scripted  # noqa: E402
import thinking  # noqa: E402

from tests.fakeapi import request_text  # noqa: E402

ITEMS = ("modified paths", "failing cmds", "last 10 cmds", "constraints", "todo")
NEAR = 3_000  # characters after a command (or 300 before) in which its exit code must be named


def exit_code_near(text: str, command: str, code: int) -> bool:
    named = re.compile(rf"(?i)exit(?:ed)?(?:[ _-]?(?:code|status))?\s*[:=]?\s*(?:with\s+)?{code}\b")
    for found in re.finditer(re.escape(command), text):
        if named.search(text, max(0, found.start() - 300), found.end() + NEAR):
            return True
    return False


def score(checkpoint: scripted.Checkpoint, one_read: bool = False) -> dict[str, tuple[int, int] | None]:
    """(kept, total) per item for one compaction; None where the item does not apply. A modified path
    also counts when it is in the complete list the request names; ``one_read``: every item does (the
    second figure printed: what is one Read away, not in the request itself)."""
    f = checkpoint.facts
    lists = checkpoint.lists  # the complete lists the request names (one Read away)
    text = request_text(checkpoint.body) + ("\n" + lists if one_read else "")

    def named(path: str) -> bool:
        rel = re.sub(r"^.*/project/", "", path)
        return path in text or rel in text or path in lists

    kept: dict[str, tuple[int, int] | None] = {
        "modified paths": (sum(named(p) for p in f.modified), len(f.modified)),
        "failing cmds": (
            sum(exit_code_near(text, c, k) or exit_code_near(text, _json(c), k) for c, k in f.failing),
            len(f.failing),
        ),
        "last 10 cmds": (sum(c in text or _json(c) in text for c in f.recent), len(f.recent)),
        "constraints": (sum(c in text for c in f.constraints), len(f.constraints)),
        "todo": None if f.todo is None else (sum(t in text for t in f.todo), len(f.todo)),
    }
    return kept


def _json(command: str) -> str:
    return json.dumps(command)[1:-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=[s.name for s in scripted.SCENARIOS])
    parser.add_argument("--mode", choices=list(scripted.MODES))
    parser.add_argument(
        "--cost-aware",
        choices=["on", "off"],
        default="on",
        help="cost-aware compaction (the default) or off: compaction at T as before, for a side-by-side figure",
    )
    thinking.add_argument(parser)
    args = parser.parse_args()
    settings = {} if args.cost_aware == "on" else {"cost_aware": False}
    scenarios = [s for s in scripted.SCENARIOS if args.scenario in (None, s.name)]
    modes = [m for m in scripted.MODES if args.mode in (None, m)]
    table: dict[str, dict[str, list[int]]] = {}
    counts: dict[str, int] = {}
    how: dict[str, list[str]] = {}
    problems: list[str] = []
    misses = 0
    tallies: dict[str, thinking.Tally] = {}
    one_read = [0, 0]  # every item counted in the request or in the complete lists it names
    for mode in modes:
        row = table.setdefault(mode, {item: [0, 0] for item in ITEMS})
        for scenario in scenarios:
            result = scripted.run(
                scenario, mode, settings, short_turns=mode == "collapse", profile=args.profile
            )
            problems += [f"{scenario.name}/{mode}: {e}" for e in result.errors]
            tallies.setdefault(mode, thinking.Tally(args.profile)).add(result.thinking)
            misses += len(result.misses)
            counts[mode] = counts.get(mode, 0) + len(result.checkpoints)
            how.setdefault(mode, []).extend(result.methods)
            for checkpoint in result.checkpoints:
                for got in score(checkpoint, one_read=True).values():
                    if got is not None:
                        one_read[0], one_read[1] = one_read[0] + got[0], one_read[1] + got[1]
                for item, got in score(checkpoint).items():
                    if got is None:
                        row[item][1] = -1 if row[item][1] <= 0 else row[item][1]
                        continue
                    row[item][0] += got[0]
                    row[item][1] = max(row[item][1], 0) + got[1]
    width = 15
    print(
        f"{'path':<10} {'compactions':>11} "
        + " ".join(f"{i:>{width}}" for i in ITEMS)
        + f" {'total':>{width}}"
    )
    grand = [0, 0]
    for mode, row in table.items():
        cells, total = [], [0, 0]
        for item in ITEMS:
            k, n = row[item]
            if n < 0:
                cells.append(f"{'n/a':>{width}}")
                continue
            total[0] += k
            total[1] += n
            cells.append(f"{_pct(k, n):>{width}}")
        grand[0] += total[0]
        grand[1] += total[1]
        print(f"{mode:<10} {counts.get(mode, 0):>11} " + " ".join(cells) + f" {_pct(*total):>{width}}")
    print(
        f"\nall paths: {_pct(*grand)} of {grand[1]} items kept over {sum(counts.values())} compactions "
        f"(scenarios: {', '.join(s.name for s in scenarios)}; summary, notes and span summaries: "
        f'"{scripted.POOR}")'
    )
    print(
        f"counting what the complete lists the request names hold for every item (one Read away, not in "
        f"the request): {_pct(*one_read)}"
    )
    for mode, used in how.items():
        print(f"{mode}: " + ", ".join(f"{used.count(m)} {m}" for m in sorted(set(used))))
    overall = thinking.Tally(args.profile)
    for mode, tally in tallies.items():
        print(tally.line(mode))
        overall.add(tally)
    print(overall.line("all paths") + f"; prompt-cache misses between compaction points: {misses}")
    for problem in problems:
        print(f"problem: {problem}")
    return 1 if problems else 0


def _pct(kept: int, total: int) -> str:
    return f"{100 * kept / total:.0f}% ({kept}/{total})" if total else "-"


if __name__ == "__main__":
    sys.exit(main())
