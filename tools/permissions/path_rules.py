"""Paths as permission rules see them: gitignore-like rule patterns, and a path's spellings.

A rule pattern is relative to the project directory, ``/x`` from the project root, ``//x`` from the
filesystem root, ``~/x`` from the home directory; a pattern without a slash matches a name at any depth; a
pattern matching a directory covers everything below it. A path is compared as written (normalised) and
with symlinks resolved, so a link can neither dodge a deny rule nor widen an allow rule.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tools.shell.reads import SHAPE_ANY, SHAPE_NAME, SHAPE_ONE


def normal(path: Path) -> Path:
    return Path(os.path.normpath(path))


def path_forms(path: Path) -> list[Path]:
    """The path normalised as written and with symlinks resolved (one entry when they agree). The
    resolved form is taken from the path as given, so ``link/..`` goes through the link as the kernel does."""
    plain = normal(path)
    real = Path(os.path.realpath(path))
    return [plain] if real == plain else [plain, real]


def below(path: Path, base: Path) -> Path | None:
    """``path`` relative to ``base`` (as written or resolved) when it is inside it, else None."""
    for b in {normal(base), Path(os.path.realpath(base))}:
        if path.is_relative_to(b):
            return path.relative_to(b)
    return None


def inside(target: Path, dirs: list[Path]) -> bool:
    """Inside one of ``dirs`` once symlinks are resolved, so a link cannot lead out of the project."""
    real = Path(os.path.realpath(target))
    return any(real.is_relative_to(os.path.realpath(d)) for d in dirs)


def pattern_regexes(pattern: str, project_dir: Path, user_home: Path | None) -> list[re.Pattern[str]]:
    """Absolute-path regexes for one rule pattern (one per spelling of its base directory)."""
    if pattern.startswith("//"):
        bases, rest = [Path("/")], pattern[2:]
    elif pattern == "~" or pattern.startswith("~/"):
        if user_home is None:
            return []  # no home directory known: "~/" rules cannot match anything
        bases, rest = path_forms(user_home), pattern[2:]
    elif pattern.startswith("/"):
        bases, rest = path_forms(project_dir), pattern[1:]
    else:
        bases, rest = path_forms(project_dir), pattern.removeprefix("./")
    rest = rest.rstrip("/")
    if "/" not in rest and not pattern.startswith(("/", "~")):
        rest = "**/" + rest  # like .gitignore: a bare name matches at any depth
    body = _glob_regex(rest) if rest else ""
    out = []
    for base in bases:
        prefix = re.escape(base.as_posix().rstrip("/"))
        # the pattern matches the path itself or any directory above it (a denied folder covers its files)
        out.append(re.compile(f"{prefix}/{body}(?:/.*)?" if body else f"{prefix}(?:/.*)?"))
    return out


def pattern_root(pattern: str, project_dir: Path, user_home: Path | None) -> Path | None:
    """The directory (or file) a rule pattern's literal head names: every path the pattern matches lies
    at or below it (the project for a bare name, which matches at any depth); None without a home."""
    if pattern.startswith("//"):
        base, rest = Path("/"), pattern[2:]
    elif pattern == "~" or pattern.startswith("~/"):
        if user_home is None:
            return None
        base, rest = user_home, pattern[2:]
    elif pattern.startswith("/"):
        base, rest = project_dir, pattern[1:]
    else:
        base, rest = project_dir, pattern.removeprefix("./")
    rest = rest.rstrip("/")
    if "/" not in rest and not pattern.startswith(("/", "~")):
        return base  # a bare name: anywhere in the project
    literal = []
    for part in rest.split("/"):
        if re.search(r"[*?\[]", part):
            break
        literal.append(part)
    return base.joinpath(*literal) if literal else base


def pattern_shapes(pattern: str, project_dir: Path, user_home: Path | None) -> list[str]:
    """The rule pattern as shapes (``tools.shell.reads``): literal characters and wildcards, wide enough to
    cover every path ``pattern_regexes`` matches, for asking whether a word known only when it runs may
    name a path the rule covers."""
    if pattern.startswith("//"):
        bases, rest = [Path("/")], pattern[2:]
    elif pattern == "~" or pattern.startswith("~/"):
        if user_home is None:
            return []
        bases, rest = path_forms(user_home), pattern[2:]
    elif pattern.startswith("/"):
        bases, rest = path_forms(project_dir), pattern[1:]
    else:
        bases, rest = path_forms(project_dir), pattern.removeprefix("./")
    rest = rest.rstrip("/")
    anywhere = "/" not in rest and not pattern.startswith(("/", "~"))
    body, i = [], 0
    while i < len(rest):
        if rest.startswith("**", i):
            body.append(SHAPE_ANY)  # "**/" may be nothing at all: the slash goes with it
            i += 3 if rest.startswith("**/", i) else 2
        elif rest[i] == "*":
            body.append(SHAPE_NAME)
            i += 1
        elif rest[i] == "?" or (rest[i] == "[" and rest.find("]", i + 2) != -1):
            body.append(SHAPE_ONE)
            i = rest.find("]", i + 2) + 1 if rest[i] == "[" else i + 1
        else:
            body.append(rest[i])
            i += 1
    text = "".join(body)
    heads = ["", SHAPE_ANY + "/"] if anywhere else [""]  # a bare name matches at any depth
    out = []
    for base in bases:
        for head in heads:
            stem = (
                f"{base.as_posix().rstrip('/')}/{head}{text}".rstrip("/") if text or head else base.as_posix()
            )
            out += [stem, f"{stem.rstrip('/')}/{SHAPE_ANY}"]  # the path, or anything below it
    return out


def _glob_regex(pattern: str) -> str:
    """Translate a gitignore-style glob (``**``, ``*``, ``?``, ``[...]``) to a regex over posix paths."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            inner = pattern[i + 1 : end]
            if inner.startswith("!"):
                inner = "^" + inner[1:]
            out.append("[" + inner.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)
