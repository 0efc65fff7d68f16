"""Checking a memory against the working tree as it is now, by content, before it is served.

Each memory's ``check`` names what it relies on, and this module looks at it (reading files, never running
anything):

- ``make``: the target is defined in the makefile make would read in that directory, or a file it
  includes (a target left in a file the Makefile no longer includes is gone, though its lines are the same);
  the recipe is the one cited. Another recipe → refreshed with the new one; the cited recipe under another
  target name → refreshed with the new name; neither → stale.
- ``tool``: a linter, test runner or type checker run directly: the paths it was given still exist, and the
  configuration it had is still there and still the one the tool reads (``config``).
- ``config``: the cited section of a tool's configuration still says the cited lines, and no file the tool
  reads first has appeared (pytest.ini in front of pyproject.toml's ``[tool.pytest.ini_options]``).
- ``lines``: the file exists and the cited lines still say what they said (moved: refreshed with the new
  line numbers; changed or deleted: stale).
- ``script``: the script or module a ``python`` command ran exists; ``npm``: package.json still has the script.

A memory in the user's own words has nothing in the tree to check: it is served as theirs, with its time.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
MAX_INCLUDE_DEPTH = 8
MAX_FILE_BYTES = 2_000_000
_TARGET = re.compile(r"^([^\s#:=$.][^#:=$]*?|\.[A-Za-z][^#:=$]*?)\s*::?(?!=)(.*)$")
_INCLUDE = re.compile(r"^\s*(-?include|sinclude)\s+(.+?)\s*$")

# where each tool reads its configuration, in the order it looks (the first found wins):
# (file, section or "" for the whole file, a pattern the section must match in that file)
CONFIG_ORDER: dict[str, list[tuple[str, str]]] = {
    "pytest": [
        ("pytest.ini", ""),
        (".pytest.ini", ""),
        ("pyproject.toml", "tool.pytest.ini_options"),
        ("tox.ini", "pytest"),
        ("setup.cfg", "tool:pytest"),
    ],
    "ruff": [(".ruff.toml", ""), ("ruff.toml", ""), ("pyproject.toml", "tool.ruff")],
    "mypy": [("mypy.ini", ""), (".mypy.ini", ""), ("pyproject.toml", "tool.mypy"), ("setup.cfg", "mypy")],
    "flake8": [(".flake8", "flake8"), ("setup.cfg", "flake8"), ("tox.ini", "flake8")],
    "black": [("pyproject.toml", "tool.black")],
    "isort": [(".isort.cfg", ""), ("pyproject.toml", "tool.isort"), ("setup.cfg", "isort")],
    "pylint": [("pylintrc", ""), (".pylintrc", ""), ("pyproject.toml", "tool.pylint")],
    "coverage": [(".coveragerc", ""), ("pyproject.toml", "tool.coverage")],
}


@dataclass
class Verdict:
    state: str  # current | refreshed | stale
    reason: str = ""
    text: str = ""  # the refreshed memory's text
    check: dict[str, Any] | None = None  # and its check
    cited: tuple[str, str, str] | None = None  # (path, lines, content) the refresh rests on


class Tree:
    """The working tree, each file read once per load."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._text: dict[Path, str | None] = {}
        self._targets: dict[tuple[str, str], tuple[dict[str, tuple[str, int, list[str]]], list[str]]] = {}

    def path(self, rel: str) -> Path:
        p = Path(rel)
        return p if p.is_absolute() else self.root / p

    def read(self, rel: str | Path) -> str | None:
        p = self.path(str(rel))
        if p not in self._text:
            try:
                if p.stat().st_size > MAX_FILE_BYTES:
                    self._text[p] = None
                else:
                    self._text[p] = p.read_text(encoding="utf-8", errors="replace")
            except OSError:
                self._text[p] = None
        return self._text[p]

    def exists(self, rel: str) -> bool:
        p = self.path(rel)
        return p in self._text and self._text[p] is not None or p.exists()

    # --- make -----------------------------------------------------------------------------------------
    def makefile(self, directory: str, name: str = "") -> str | None:
        names = (name,) if name else MAKEFILES
        for n in names:
            rel = str(Path(directory) / n) if directory not in ("", ".") else n
            if self.read(rel) is not None:
                return rel
        return None

    def make_targets(
        self, directory: str, name: str = ""
    ) -> tuple[dict[str, tuple[str, int, list[str]]], list[str]]:
        """target -> (file, line, recipe lines) as make reads the makefile of ``directory``; and the files read."""
        if (directory, name) not in self._targets:
            self._targets[(directory, name)] = self._make_targets(directory, name)
        return self._targets[(directory, name)]

    def _make_targets(
        self, directory: str, name: str
    ) -> tuple[dict[str, tuple[str, int, list[str]]], list[str]]:
        top = self.makefile(directory, name)
        targets: dict[str, tuple[str, int, list[str]]] = {}
        files: list[str] = []
        if top is not None:
            self._visit_makefile(top, 0, directory, targets, files)
        return targets, files

    def _visit_makefile(
        self,
        rel: str,
        depth: int,
        directory: str,
        targets: dict[str, tuple[str, int, list[str]]],
        files: list[str],
    ) -> None:
        """The targets of one makefile, and of the files it includes, into ``targets`` (the first wins)."""
        if rel in files or depth > MAX_INCLUDE_DEPTH:
            return
        text = self.read(rel)
        if text is None:
            return
        files.append(rel)
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            inc = _INCLUDE.match(lines[i])
            if inc:
                for included in _included(inc.group(2), directory):
                    self._visit_makefile(included, depth + 1, directory, targets, files)
                i += 1
                continue
            m = _TARGET.match(lines[i]) if not lines[i].startswith("\t") else None
            if m is None:
                i += 1
                continue
            recipe, end = _recipe_at(lines, i + 1)
            for target in m.group(1).split():
                if not target.startswith(".") and target not in targets:
                    targets[target] = (rel, i + 1, recipe)
            i = end

    def files_defining(self, target: str) -> list[str]:
        """Makefile-like files under the root (two levels) that define ``target``, read or not."""
        found = []
        for pattern in ("*.mk", "*/*.mk", "*/Makefile", "*/makefile"):
            for p in sorted(self.root.glob(pattern)):
                text = self.read(str(p.relative_to(self.root)))
                if text and re.search(rf"^{re.escape(target)}\s*::?(?!=)", text, re.M):
                    found.append(str(p.relative_to(self.root)))
        return found

    # --- configuration ---------------------------------------------------------------------------------
    def section(self, rel: str, section: str) -> tuple[int, int, str] | None:
        """(first line, last line, text) of ``[section]`` in an ini/toml file (the whole file when "")."""
        text = self.read(rel)
        if text is None:
            return None
        lines = text.splitlines()
        if not section:
            return (1, len(lines), text) if text.strip() else None
        head = re.compile(rf"^\s*\[{re.escape(section)}\]\s*$")
        for i, line in enumerate(lines):
            if head.match(line):
                j = i + 1
                while j < len(lines) and not re.match(r"^\s*\[[^\]]+\]\s*$", lines[j]):
                    j += 1
                while j > i + 1 and not lines[j - 1].strip():
                    j -= 1
                return i + 1, j, "\n".join(lines[i:j])
        return None

    def config_in_effect(self, tool: str) -> tuple[str, str] | None:
        """(file, section) the tool reads now, or None."""
        for rel, section in CONFIG_ORDER.get(tool, []):
            if self.section(rel, section) is not None:
                return rel, section
        return None


def _lines(text: str, start: int, end: int) -> str:
    return "\n".join(text.splitlines()[start - 1 : end])


def find_lines(text: str, content: str) -> int | None:
    """The first line number where ``content`` (whole lines, stripped) is found in ``text``."""
    want = [line.strip() for line in content.splitlines()]
    if not want or not any(want):
        return None
    have = [line.strip() for line in text.splitlines()]
    for i in range(len(have) - len(want) + 1):
        if have[i : i + len(want)] == want:
            return i + 1
    return None


def check(memory_check: dict[str, Any], tree: Tree) -> Verdict:
    kind = memory_check.get("kind")
    if kind == "make":
        return _check_make(memory_check, tree)
    if kind == "tool":
        return _check_tool(memory_check, tree)
    if kind == "config":
        return _check_config(memory_check, tree)
    if kind == "lines":
        return _check_lines(memory_check, tree)
    if kind == "script":
        path = str(memory_check.get("path", ""))
        if any(tree.exists(p) for p in memory_check.get("candidates") or [path]):
            return Verdict("current")
        return Verdict("stale", f"{path} no longer exists")
    if kind == "npm":
        text = tree.read(str(Path(memory_check.get("dir") or ".") / "package.json"))
        try:
            scripts = json.loads(text or "{}").get("scripts") or {}
        except (ValueError, AttributeError):
            scripts = {}
        name = memory_check.get("script", "")
        if name in scripts:
            return Verdict("current")
        return Verdict("stale", f"package.json no longer has the script {name!r}")
    return Verdict("current")


def _check_make(c: dict[str, Any], tree: Tree) -> Verdict:
    directory, target, name = c.get("dir") or ".", c["target"], c.get("makefile") or ""
    recipe = list(c.get("recipe") or [])
    targets, files = tree.make_targets(directory, name)
    if not files:
        return Verdict("stale", f"there is no makefile in {directory} any more")
    found = targets.get(target)
    if found is not None:
        rel, line, now = found
        if now == recipe or not recipe:
            return Verdict("current")
        shown = "; ".join(now) or "(no recipe)"
        text = f"`{c['command']}` runs `{shown}`"
        return Verdict(
            "refreshed",
            f"the recipe of `{target}` changed ({rel}:{line})",
            text,
            {**c, "recipe": now},
            (rel, f"{line}-{line + len(now)}", "\n".join([f"{target}:", *now])),
        )
    if recipe:  # the same recipe under another name: the target was renamed
        for other, (rel, line, now) in targets.items():
            if now == recipe:
                command = re.sub(rf"(?<![\w-]){re.escape(target)}(?![\w-])", other, c["command"])
                text = f"`{command}` runs `{'; '.join(now)}`"
                return Verdict(
                    "refreshed",
                    f"`{target}` is now called `{other}` ({rel}:{line}, same recipe)",
                    text,
                    {**c, "target": other, "command": command},
                    (rel, f"{line}-{line + len(now)}", "\n".join([f"{other}:", *now])),
                )
    elsewhere = [f for f in tree.files_defining(target) if f not in files]
    if elsewhere:
        return Verdict(
            "stale",
            f"{elsewhere[0]} still defines `{target}`, but {files[0]} no longer includes it: `make {target}` fails",
        )
    return Verdict("stale", f"`{target}` is no longer a target of {files[0]} (or the files it includes)")


def _check_tool(c: dict[str, Any], tree: Tree) -> Verdict:
    for p in c.get("paths") or []:
        if not tree.exists(p):
            return Verdict("stale", f"{p}, which `{c.get('command', '')}` was given, no longer exists")
    cfg = c.get("config")
    if cfg:
        return _check_config(cfg, tree)
    return Verdict("current")


def _check_config(c: dict[str, Any], tree: Tree) -> Verdict:
    tool, rel, section, content = c.get("tool", ""), c["path"], c.get("section", ""), c.get("content", "")
    if tree.read(rel) is None:
        return Verdict("stale", f"{rel} no longer exists")
    found = tree.section(rel, section)
    where = f"{rel} [{section}]" if section else rel
    if found is None:
        now = tree.config_in_effect(tool)
        also = f"; {tool} now reads {now[0]}" if now else ""
        return Verdict("stale", f"{where} no longer configures {tool}{also}")
    effect = tree.config_in_effect(tool)
    if effect is not None and effect != (rel, section):
        return Verdict(
            "stale",
            f"{effect[0]} now configures {tool} and is read before {where}, whose lines are unchanged "
            "but no longer apply",
        )
    start, end, text = found
    if content and find_lines(text, content) is None:
        shown = " / ".join(line.strip() for line in text.splitlines()[1:4])
        return Verdict("stale", f"{where} no longer says what was cited; it says now: {shown}")
    return Verdict("current")


def _check_lines(c: dict[str, Any], tree: Tree) -> Verdict:
    rel, content, start = c["path"], c.get("content", ""), int(c.get("start") or 0)
    text = tree.read(rel)
    if text is None:
        return Verdict("stale", f"{rel} no longer exists")
    if not content:
        return Verdict("current")
    n = len(content.splitlines())
    if start and _lines(text, start, start + n - 1).strip() == content.strip():
        return Verdict("current")
    found = find_lines(text, content)
    if found is not None:
        lines = str(found) if n == 1 else f"{found}-{found + n - 1}"
        return Verdict(
            "refreshed",
            f"the cited lines moved to {rel}:{lines}",
            "",
            {**c, "start": found},
            (rel, lines, content),
        )
    return Verdict("stale", f"{rel}:{start}-{start + n - 1} no longer says what was cited")


def _included(words: str, directory: str) -> list[str]:
    """The files an ``include`` line names that can be read as written (no variables, no patterns)."""
    base = directory if directory not in ("", ".") else ""
    return [str(Path(base) / w) if base else w for w in words.split() if "$" not in w and "*" not in w]


def _recipe_at(lines: list[str], start: int) -> tuple[list[str], int]:
    """The recipe lines from ``start`` (tab-indented, blank lines between them skipped) and where it ends."""
    recipe, j = [], start
    while j < len(lines) and (lines[j].startswith("\t") or not lines[j].strip()):
        if lines[j].strip():
            recipe.append(lines[j].strip())
        j += 1
    return recipe, j
