"""``/init``: a starting CLAUDE.md made from what the repository shows, without asking the model.

What is read: the README's first paragraph, the build files that name commands (pyproject.toml, package.json
scripts, a Makefile's targets, Cargo.toml, go.mod), the languages by file count and the top-level folders
(git's file list when there is one, else a walk that skips hidden and dependency folders). What is written
is a short page of facts with headings to fill in; an existing CLAUDE.md is never touched.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

from agent.config.project import read_small

LANGUAGES = {
    ".py": "Python", ".ts": "TypeScript", ".tsx": "TypeScript", ".js": "JavaScript", ".jsx": "JavaScript",
    ".go": "Go", ".rs": "Rust", ".java": "Java", ".kt": "Kotlin", ".rb": "Ruby", ".php": "PHP", ".c": "C",
    ".h": "C", ".cc": "C++", ".cpp": "C++", ".hpp": "C++", ".cs": "C#", ".swift": "Swift", ".sh": "Shell",
    ".scala": "Scala", ".ex": "Elixir", ".exs": "Elixir", ".lua": "Lua", ".dart": "Dart",
}  # fmt: skip
SKIPPED_DIRS = {"node_modules", "target", "dist", "build", "venv", ".venv", "__pycache__", "vendor"}
WALK_LIMIT = 5_000  # files looked at without git


def starter(root: Path) -> str:
    """The starting CLAUDE.md for the project at ``root``."""
    files = _files(root)
    lines = [f"# {root.name}", ""]
    about = _readme_paragraph(root)
    lines += [about, ""] if about else ["(What this project is, in a sentence or two.)", ""]
    languages = Counter(LANGUAGES[p.suffix] for p in files if p.suffix in LANGUAGES)
    if languages:
        counted = ", ".join(
            f"{name} ({n} file{'s' if n != 1 else ''})" for name, n in languages.most_common(4)
        )
        lines += [f"Languages: {counted}.", ""]
    commands = _commands(root)
    lines += ["## Commands", ""]
    lines += [f"- {what}: `{cmd}`" for what, cmd in commands] or ["- (how to build, test and lint)"]
    lines += ["", "## Layout", ""]
    tops = Counter(p.parts[0] for p in files if len(p.parts) > 1)
    lines += [f"- `{name}/`: {n} file{'s' if n != 1 else ''}" for name, n in sorted(tops.items())[:15]]
    if not tops:
        lines.append("- (the main folders and what each holds)")
    lines += [
        "",
        "## Conventions",
        "",
        "- (style, naming, what to avoid; anything a newcomer gets wrong)",
        "",
    ]
    return "\n".join(lines)


def _files(root: Path) -> list[Path]:
    """The project's files, relative to ``root``: git's list, else a bounded walk."""
    try:
        out = subprocess.run(
            ["git", "ls-files"], cwd=root, capture_output=True, text=True, timeout=10, check=True
        ).stdout
        listed = [Path(line) for line in out.splitlines() if line]
        if listed:
            return listed
    except (OSError, subprocess.SubprocessError):
        pass
    found: list[Path] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") or part in SKIPPED_DIRS for part in rel.parts):
            continue
        if path.is_file():
            found.append(rel)
            if len(found) >= WALK_LIMIT:
                break
    return found


def _readme_paragraph(root: Path) -> str:
    for name in ("README.md", "README.rst", "README.txt", "README"):
        text = read_small(root / name)
        if not text:
            continue
        paragraph: list[str] = []
        for line in text.splitlines():
            stripped = line.strip()
            if not stripped:
                if paragraph:
                    break
                continue
            if stripped.startswith(("#", "=", "[!", "![", "<", "---")):
                continue
            paragraph.append(stripped)
        return " ".join(paragraph)[:400]
    return ""


def _commands(root: Path) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    package = read_small(root / "package.json")
    if package:
        try:
            scripts = json.loads(package).get("scripts") or {}
        except (ValueError, AttributeError):
            scripts = {}
        found += [(name, f"npm run {name}") for name in scripts if name in ("build", "test", "lint", "dev")]
    pyproject = read_small(root / "pyproject.toml")
    if pyproject is not None:
        if "pytest" in pyproject or (root / "tests").is_dir():
            found.append(("test", "python -m pytest"))
        if "ruff" in pyproject:
            found.append(("lint", "ruff check ."))
        if "mypy" in pyproject:
            found.append(("types", "mypy"))
    makefile = read_small(root / "Makefile")
    if makefile:
        targets = re.findall(r"^([A-Za-z][\w-]*):", makefile, re.MULTILINE)
        found += [
            (t, f"make {t}") for t in dict.fromkeys(targets) if t in ("build", "test", "lint", "check", "all")
        ]
    if (root / "Cargo.toml").is_file():
        found += [("build", "cargo build"), ("test", "cargo test")]
    if (root / "go.mod").is_file():
        found += [("build", "go build ./..."), ("test", "go test ./...")]
    return list(dict.fromkeys(found))
