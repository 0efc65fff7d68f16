"""The Glob tool: find files by name pattern (``**/*.py``, ``src/*.{ts,tsx}``), newest first.

Patterns are matched against paths relative to the search directory with our own small translator
(``**`` spans directories, ``*`` and ``?`` stay within one, ``[...]`` and ``{a,b}`` work as in shells).
The walk skips .git only and does not follow directory symlinks; it does not consult .gitignore.
Files ``ctx.hidden`` rejects (the user's Read deny rules) are left out, as if they did not exist.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from tools.base import ToolContext, ToolError, ToolResult

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


class GlobTool:
    name = "Glob"
    description = DESCRIPTION
    read_only = True
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The glob pattern to match files against"},
            "path": {
                "type": "string",
                "description": "The directory to search in (default: the current working directory)",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

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


def compile_glob(pattern: str) -> re.Pattern[str]:
    return re.compile(_translate(pattern))


def _translate(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        at_segment_start = i == 0 or pattern[i - 1] == "/"
        if pattern.startswith("**/", i) and at_segment_start:
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i) and at_segment_start and i + 2 == len(pattern):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            piece, i = _char_class(pattern, i)
            out.append(piece)
        elif char == "{":
            piece, i = _alternatives(pattern, i)
            out.append(piece)
        elif char == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def _char_class(pattern: str, i: int) -> tuple[str, int]:
    end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
    if end == -1:
        return re.escape("["), i + 1
    inner = pattern[i + 1 : end]
    if inner[:1] in ("!", "^"):
        inner = "^" + inner[1:]
    return "[" + inner.replace("\\", "\\\\") + "]", end + 1


def _alternatives(pattern: str, i: int) -> tuple[str, int]:
    depth, start, options = 0, i + 1, []
    for j in range(i, len(pattern)):
        if pattern[j] == "{":
            depth += 1
        elif pattern[j] == "}":
            depth -= 1
            if depth == 0:
                options.append(pattern[start:j])
                return "(?:" + "|".join(_translate(option) for option in options) + ")", j + 1
        elif pattern[j] == "," and depth == 1:
            options.append(pattern[start:j])
            start = j + 1
    return re.escape("{"), i + 1


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
