"""The Glob tool: find files by name pattern (``**/*.py``, ``src/*.{ts,tsx}``), newest first.

Patterns are matched against paths relative to the search directory with our own small matcher
(``**`` spans directories, ``*`` and ``?`` stay within one, ``[...]`` and ``{a,b}`` work as in shells),
which runs in time linear in the path for a given pattern: no pattern can make it backtrack.
The walk skips .git only and does not follow directory symlinks; it does not consult .gitignore.
Files ``ctx.hidden`` rejects (the user's Read deny rules) are left out, as if they did not exist.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from core.declaration import Declaration
from tools.base import ToolContext, ToolError, ToolResult, object_schema

MAX_RESULTS = 100
SKIPPED_DIRS = frozenset({".git"})
_MAGIC = set("*?[{")

DESCRIPTION = """\
Find files whose paths match a glob pattern, fast on codebases of any size.

- Patterns such as "**/*.js", "src/**/*.ts" or "*.{json,yaml}": `**` matches any number of \
directories, `*` anything within one name.
- path is the directory to search (default: the current working directory); leave it out rather than \
passing "null" or "undefined".
- Returns absolute paths of matching files, most recently modified first, at most 100.
- To search file contents use Grep. For open-ended searches that may take several rounds, combine \
Glob and Grep across several calls; run independent searches in parallel."""
# the description at small windows, where the tools' text is a large share of the context (compact.owner)
BRIEF = 'Find files by a glob pattern ("**/*.py"); path defaults to the working directory. Absolute paths, newest first, at most 100.'


class GlobTool:
    name = "Glob"
    declaration = Declaration("reads", "path", "pattern", clearable=True, records="search", parallel=True)
    description = DESCRIPTION
    brief = BRIEF
    input_schema = object_schema(
        {
            "pattern": {"type": "string", "description": "The glob pattern to match files against"},
            "path": {
                "type": "string",
                "description": "The directory to search in (default: the current working directory)",
            },
        },
        "pattern",
    )

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        start = ctx.resolve(args["path"]) if args.get("path") else ctx.cwd
        base, pattern = split_base(start, args["pattern"])
        base = Path(os.path.abspath(base))  # tidy "a/../b" so the reported paths are clean
        if not base.is_dir():
            what = "is not a directory" if base.exists() else "does not exist"
            raise ToolError(f"{base} {what}. Pass an existing directory as path.")
        found = find_files(base, pattern, ctx)
        if not found:
            return ToolResult(content="No files found", summary="No files found")
        return _format(_newest_first(found))


def split_base(start: Path, pattern: str) -> tuple[Path, str]:
    """Move the pattern's leading literal directories (or an absolute prefix) into the base path."""
    parts = pattern.split("/")
    base = Path("/") if pattern.startswith("/") else start
    if pattern.startswith("/"):
        parts = parts[1:]
    while len(parts) > 1 and parts[0] and not _MAGIC & set(parts[0]):
        base = base / parts.pop(0)
    return base, "/".join(parts)


def find_files(base: Path, pattern: str, ctx: ToolContext) -> list[str]:
    """Absolute paths of files under ``base`` whose relative path matches ``pattern``."""
    regex = compile_glob(pattern)
    # Without ** a pattern cannot match deeper than its own number of directory levels.
    max_depth = None if "**" in pattern else pattern.count("/")
    found: list[str] = []
    for root, dirs, files in os.walk(base):
        if ctx.cancelled:
            raise ToolError("The file search was interrupted.")
        rel_root = Path(root).relative_to(base)
        depth = len(rel_root.parts)
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and (max_depth is None or depth < max_depth)]
        for name in files:
            relative = (rel_root / name).as_posix()
            if regex.fullmatch(relative):
                path = os.path.join(root, name)
                if ctx.hidden is None or not ctx.hidden(Path(path)):
                    found.append(path)
    return found


MAX_ALTERNATIVES = 1024  # patterns a {a,b} pattern may expand to; more is no file-name pattern

# tokens of one brace-free pattern
_LIT, _ONE, _CLASS, _STAR, _DIRS, _REST = range(6)


class GlobMatcher:
    """A glob matched by walking its tokens with a set of live positions (a Thompson NFA): time grows
    with path length × pattern length, never exponentially, so ``*a*a*a*a*a*a*b`` over long names
    (which sends a backtracking regex into minutes) takes microseconds. ``{a,b}`` is expanded first."""

    def __init__(self, pattern: str) -> None:
        self.alternatives = [_tokens(p) for p in _expand(pattern)]
        # with at most two unbounded parts a regex can't backtrack badly, and runs in C: most patterns
        # ("**/*.py", "src/*.ts") take that road, and only the others walk the tokens in Python
        self.regexes = [_regex(tokens) for tokens in self.alternatives]

    def fullmatch(self, path: str) -> bool | None:
        for tokens, regex in zip(self.alternatives, self.regexes):
            if regex.fullmatch(path) if regex is not None else _matches(tokens, path):
                return True
        return None


def compile_glob(pattern: str) -> GlobMatcher:
    return GlobMatcher(pattern)


def _expand(pattern: str) -> list[str]:
    """The brace-free patterns ``{a,b}`` stands for (an unclosed brace is literal)."""
    out = [""]
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            out = [o + pattern[i : i + 2] for o in out]
            i += 2
            continue
        if char == "{" and (options := _brace_options(pattern, i)) is not None:
            choices, i = options
            out = [o + e for o in out for choice in choices for e in _expand(choice)]
            if len(out) > MAX_ALTERNATIVES:
                raise ToolError(f"The pattern expands to more than {MAX_ALTERNATIVES} alternatives.")
            continue
        out = [o + char for o in out]
        i += 1
    return out


def _brace_options(pattern: str, i: int) -> tuple[list[str], int] | None:
    depth, start, options = 0, i + 1, list[str]()
    for j in range(i, len(pattern)):
        if pattern[j] == "{":
            depth += 1
        elif pattern[j] == "}":
            depth -= 1
            if depth == 0:
                return [*options, pattern[start:j]], j + 1
        elif pattern[j] == "," and depth == 1:
            options.append(pattern[start:j])
            start = j + 1
    return None


def _tokens(pattern: str) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        at_segment_start = i == 0 or pattern[i - 1] == "/"
        if pattern.startswith("**/", i) and at_segment_start:
            out.append((_DIRS, None))  # zero or more whole directories
            i += 3
        elif pattern.startswith("**", i) and at_segment_start and i + 2 == len(pattern):
            out.append((_REST, None))
            i += 2
        elif char == "*":
            if not out or out[-1][0] != _STAR:  # "**" inside a name is one "*"
                out.append((_STAR, None))
            i += 1
        elif char == "?":
            out.append((_ONE, None))
            i += 1
        elif char == "[" and (end := _class_end(pattern, i)) != -1:
            out.append((_CLASS, _char_class(pattern[i + 1 : end])))
            i = end + 1
        elif char == "\\" and i + 1 < len(pattern):
            out.append((_LIT, pattern[i + 1]))
            i += 2
        else:
            out.append((_LIT, char))
            i += 1
    return out


_REGEX = {_ONE: "[^/]", _STAR: "[^/]*", _DIRS: "(?:.*/)?", _REST: ".*"}


def _regex(tokens: list[tuple[int, Any]]) -> re.Pattern[str] | None:
    if sum(kind in (_STAR, _DIRS, _REST) for kind, _ in tokens) > 2:
        return None
    parts = [
        re.escape(value) if kind == _LIT else value.pattern if kind == _CLASS else _REGEX[kind]
        for kind, value in tokens
    ]
    return re.compile("".join(parts))


def _char_class(written: str) -> re.Pattern[str]:
    """``[...]`` (``[!...]`` and ``[^...]`` negated) as a regex; a ToolError when it is none."""
    inner = "^" + written[1:] if written[:1] in ("!", "^") else written
    try:
        return re.compile("[" + inner.replace("\\", "\\\\") + "]")
    except re.error as exc:
        raise ToolError(f"The pattern has a bad character class [{written}]: {exc}.") from None


def _class_end(pattern: str, i: int) -> int:
    return pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)


def _matches(tokens: list[tuple[int, Any]], path: str) -> bool:
    # a state is (token index, inside): inside a "**/" that has consumed something not yet ended by "/"
    end = len(tokens)
    states = _closure(tokens, {(0, False)})
    for char in path:
        following: set[tuple[int, bool]] = set()
        for k, _inside in states:
            if k != end:
                following.update(_step(tokens[k], k, char))
        if not following:
            return False
        states = _closure(tokens, following)
    return (end, False) in states


def _step(token: tuple[int, Any], k: int, char: str) -> tuple[tuple[int, bool], ...]:
    """The states token ``k`` leads to on ``char``."""
    kind, value = token
    if kind == _LIT:
        return ((k + 1, False),) if char == value else ()
    if kind == _ONE:
        return ((k + 1, False),) if char != "/" else ()
    if kind == _CLASS:
        return ((k + 1, False),) if value.fullmatch(char) else ()
    if kind == _STAR:
        return ((k, False),) if char != "/" else ()
    if kind == _DIRS:
        return ((k, True), (k + 1, False)) if char == "/" else ((k, True),)
    return ((k, False),)  # _REST


def _closure(tokens: list[tuple[int, Any]], states: set[tuple[int, bool]]) -> set[tuple[int, bool]]:
    """States reachable without consuming: past a "*", a "**" or a "**/" that matches nothing."""
    todo = list(states)
    out = set(states)
    while todo:
        k, inside = todo.pop()
        if k < len(tokens) and not inside and tokens[k][0] in (_STAR, _DIRS, _REST):
            if (k + 1, False) not in out:
                out.add((k + 1, False))
                todo.append((k + 1, False))
    return out


def _newest_first(paths: list[str]) -> list[str]:
    def mtime(path: str) -> float:
        try:
            return os.stat(path).st_mtime
        except OSError:
            return 0.0

    return sorted(sorted(paths), key=mtime, reverse=True)


def _format(paths: list[str]) -> ToolResult:
    total = len(paths)
    text = "\n".join(paths[:MAX_RESULTS])
    if total > MAX_RESULTS:
        text += (
            f"\n(Results are truncated: showing the {MAX_RESULTS} most recently modified of {total} files. "
            "Use a more specific path or pattern.)"
        )
    return ToolResult(content=text, summary=f"Found {total} file{'s' if total != 1 else ''}")
