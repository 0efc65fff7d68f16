"""Names defined at the top of a module (functions, classes, constants) that nothing uses: no other line of
the code, its tests, benchmarks or scripts names them. Prints each as ``path:line name`` and exits 1 when
there is any (scripts/check runs it).

    .venv/bin/python scripts/dead_names.py

A name is used when it appears as a word anywhere but its own definition line (an import, a call, a
string naming it for a lookup). Names Python or a library calls by convention (``main``, ``run``,
dunders) and functions a decorator registers are not listed.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = ("core", "tools", "compact", "agent")
READERS = (*CODE, "tests", "benchmarks", "scripts")
CONVENTIONAL = {"main", "app"}


def definitions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, int]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not node.decorator_list:  # a decorator registers it (a slash command, a fixture)
                found.append((node.name, node.lineno))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [(t.id, node.lineno) for t in targets if isinstance(t, ast.Name)]
    return [(n, line) for n, line in found if not (n.startswith("__") or n in CONVENTIONAL)]


def main() -> int:
    words: Counter[str] = Counter()
    for folder in READERS:
        for path in (ROOT / folder).rglob("*.py"):
            words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", path.read_text()))
    dead = []
    for folder in CODE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name, line in definitions(path):
                if words[name] <= 1:
                    dead.append(f"{path.relative_to(ROOT)}:{line} {name}")
    print("\n".join(dead) if dead else "no dead names")
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main())
