"""The Read tool: show a file to the model as numbered lines, or an image as an image block.

Text is streamed: the file is read and decoded in chunks of ``READ_CHUNK_BYTES``, lines are counted as
they pass, and only the wanted lines (each cut to ``MAX_LINE_CHARS``) are kept, so memory stays small
for a file of any size, even one made of a single 1 GB line.

It also owns the "read before you write" bookkeeping that Write and Edit rely on:
``record_read`` notes a file's mtime in ``ctx.read_files`` and ``check_fresh`` refuses to touch a file
the model has not read, or one that changed on disk since it was read.
"""

from __future__ import annotations

import base64
import codecs
import difflib
import re
import stat
import threading
from pathlib import Path
from typing import Any

from core.declaration import Declaration
from tools.base import ToolContext, ToolError, ToolResult, object_schema

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
# ~25,000 tokens at ~4 characters a token: more than that crowds out the rest of the context.
MAX_OUTPUT_CHARS = 100_000
MAX_IMAGE_BYTES = 5 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192
# Text is read and decoded this much at a time, so memory stays small however long the file or a line.
READ_CHUNK_BYTES = 256 * 1024
_LINE_END = re.compile("\r\n|\r|\n")
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}

DESCRIPTION = """\
Read a file from the local filesystem.

- file_path must be an absolute path.
- By default up to 2000 lines are returned, starting at the top. For long files pass offset (the 1-based \
line number to start at) and limit (how many lines) to read a section at a time.
- Output is numbered like `cat -n`: the line number, a tab, then the line. The numbers and the tab are \
not part of the file; leave them out when you quote text in Edit's old_string.
- Lines longer than 2000 characters are cut short.
- Images (PNG, JPEG, GIF, WebP) are shown to you as images.
- It reads files only: list a directory with the Glob tool or `ls` in Bash.
- At most 100,000 characters come back per call (images up to 5 MB); binary files other than images \
are refused.
- A file must be read before it can be changed with Write or Edit.
- If you may need several files, read them in parallel in one response."""
# the description at small windows, where the tools' text is a large share of the context (compact.owner)
BRIEF = "Read a file by absolute path: numbered lines (the number and tab are not part of the file), up to 2000 from offset/limit; images are shown. A file must be read before Edit or Write changes it."


class ReadTool:
    name = "Read"
    declaration = Declaration(
        "reads",
        "file_path",
        "file_path",
        show_summary=True,
        clearable=True,
        result_limit=float("inf"),
        records="read",
        restorable=True,
        parallel=True,
    )
    description = DESCRIPTION
    brief = BRIEF
    input_schema = object_schema(
        {
            "file_path": {"type": "string", "description": "The absolute path of the file to read"},
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "The 1-based line number to start reading from. Use it for long files",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "How many lines to read. Use it for long files",
            },
        },
        "file_path",
    )

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = ctx.resolve(args["file_path"])
        if ctx.hidden is not None and ctx.hidden(path):  # the check passed its name; another is denied
            raise ToolError(
                f"{path} is another name (a hard link) of a file a Read deny rule covers, or has names "
                "outside the project that can't be checked, so it is not read."
            )
        _check_readable(path)
        media_type = IMAGE_TYPES.get(path.suffix.lower())
        try:
            if media_type:
                result = _read_image(path, media_type)
            else:
                # models sometimes count from 0; both 0 and 1 mean "from the top"
                offset = max(1, int(args.get("offset", 1)))
                result = _read_text(path, offset, int(args.get("limit", DEFAULT_LIMIT)), ctx.cancel)
        except PermissionError as exc:
            raise ToolError(f"Permission denied: {path} cannot be read by this user.") from exc
        record_read(ctx, path)
        return result


def record_read(ctx: ToolContext, path: Path) -> None:
    """Remember that the model has seen ``path`` as it is on disk now."""
    resolved = path.resolve()
    ctx.read_files.pop(str(resolved), None)  # re-insert so the dict's order is the order of recency
    ctx.read_files[str(resolved)] = resolved.stat().st_mtime


def check_fresh(ctx: ToolContext, path: Path) -> None:
    """Refuse to change an existing file the model has not read, or that changed since it read it."""
    resolved = path.resolve()
    seen = ctx.read_files.get(str(resolved))
    if seen is None:
        raise ToolError(f"{resolved} has not been read yet. Read it with the Read tool first, then retry.")
    if resolved.stat().st_mtime != seen:
        raise ToolError(
            f"{resolved} was modified since you last read it (by the user or another program). "
            "Read it again before changing it."
        )


def number_lines(lines: list[str], first: int) -> str:
    """Format lines like ``cat -n``: the number right-aligned in six columns, a tab, the line."""
    return "\n".join(f"{number:>6}\t{line}" for number, line in enumerate(lines, start=first))


def _check_readable(path: Path) -> None:
    if path.is_dir():
        raise ToolError(
            f"{path} is a directory, not a file. List it with `ls` in the Bash tool or find files with Glob."
        )
    if not path.exists():
        raise ToolError(_missing_file_message(path))
    if not path.is_file():
        # opening a FIFO blocks until someone writes to it, a device may never end: neither is a file
        raise ToolError(
            f"{path} is not a regular file ({_kind(path)}), so Read cannot show it. "
            "Inspect it with a Bash command instead."
        )


def _kind(path: Path) -> str:
    mode = path.stat().st_mode
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a file")


def _missing_file_message(path: Path) -> str:
    message = f"File does not exist: {path}."
    if not path.parent.is_dir():
        return message + f" Its directory {path.parent} does not exist either."
    try:
        names = [child.name for child in path.parent.iterdir()]
    except OSError:
        return message
    similar = difflib.get_close_matches(path.name, names, n=3, cutoff=0.6)
    if similar:
        listed = ", ".join(str(path.parent / name) for name in similar)
        message += f" Did you mean: {listed}?"
    return message


def _read_image(path: Path, media_type: str) -> ToolResult:
    size = path.stat().st_size
    if size > MAX_IMAGE_BYTES:
        raise ToolError(
            f"{path} is an image of {size / 1_048_576:.1f} MB; images over 5 MB cannot be shown. "
            "Resize it first (for example with a Bash command) and read the smaller copy."
        )
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    block = {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return ToolResult(content=[block], summary=f"Read image {path.name} ({size} bytes)")


def _read_text(path: Path, offset: int, limit: int, cancel: threading.Event) -> ToolResult:
    lines = _LineWindow(offset, limit)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    with path.open("rb") as handle:
        chunk = handle.read(BINARY_SNIFF_BYTES)
        if b"\0" in chunk:
            raise ToolError(
                f"{path} is a binary file and cannot be shown as text. "
                "Inspect it with a Bash command (for example `file`, `xxd | head` or `strings`) instead."
            )
        while chunk:
            if cancel.is_set():
                raise ToolError(f"Reading {path} was interrupted.")
            lines.feed(decoder.decode(chunk))
            chunk = handle.read(READ_CHUNK_BYTES)
    lines.feed(decoder.decode(b"", final=True))
    lines.finish()
    total = lines.total
    if total == 0:
        return ToolResult(content=f"(The file {path} exists but is empty.)", summary="Read empty file")
    if not lines.shown_count:
        return ToolResult(
            content=f"(The file {path} has {total} lines; offset {offset} is past its end.)",
            summary="Read 0 lines",
        )
    last = offset + lines.shown_count - 1
    note = ""
    if last < total:
        note = f"\n\n(Showing lines {offset}-{last} of {total}. Read on with offset={last + 1} to see more.)"
    size = lines.chars + len(note)
    if size > MAX_OUTPUT_CHARS:
        raise ToolError(
            f"That part of {path} is too large to show at once ({size:,} characters, the limit is "
            f"{MAX_OUTPUT_CHARS:,}). Read a smaller section with offset and limit, or search it with Grep."
        )
    return ToolResult(
        content=number_lines(lines.shown, offset) + note,
        summary=f"Read {lines.shown_count} line{'' if lines.shown_count == 1 else 's'}",
    )


class _LineWindow:
    """Lines ``first .. first+limit-1`` (1-based) of a text that arrives in pieces, already cut to
    ``MAX_LINE_CHARS``, and the count of all its lines.

    Lines end at "\\n", "\\r\\n" or a lone "\\r" (what Python's universal newlines split on). Only the
    first ``MAX_LINE_CHARS`` characters of a wanted line are kept, and only while the numbered output
    stays under ``MAX_OUTPUT_CHARS`` (past that the call fails anyway; its size is still counted, for
    the error message). Pieces holding no wanted line are only counted, with ``str.count``.
    """

    def __init__(self, first: int, limit: int) -> None:
        self.first, self.end = first, first + limit
        self.number = 1  # the line now being read
        self.started = False  # it has at least one character
        self.head: list[str] = []  # its first MAX_LINE_CHARS characters, when it is wanted
        self.head_chars = 0
        self.length = 0  # its length so far, when it is wanted
        self.after_cr = False  # the last piece ended in "\r", so a "\n" starting the next one is part of it
        self.shown: list[str] = []
        self.shown_count = 0
        self.chars = 0  # len(number_lines(all wanted lines, first))
        self.total = 0

    def feed(self, text: str) -> None:
        if not text:
            return
        if self.after_cr and text[0] == "\n":
            text = text[1:]
        self.after_cr = text.endswith("\r")
        ends = _count_line_ends(text)
        if self.number + ends < self.first or self.number >= self.end:
            self._count(text, ends)
        elif ends:
            self._scan(text)
        else:
            self._add(text, 0, len(text))

    def finish(self) -> None:
        if self.started:
            self._end_line()
        self.total = self.number - 1

    def _count(self, text: str, ends: int) -> None:
        if not ends:
            self.started = self.started or bool(text)
            return
        self.number += ends
        self.started = max(text.rfind("\n"), text.rfind("\r")) < len(text) - 1

    def _scan(self, text: str) -> None:
        start = 0
        for match in _LINE_END.finditer(text):
            self._add(text, start, match.start())
            self._end_line()
            start = match.end()
        self._add(text, start, len(text))

    def _add(self, text: str, start: int, stop: int) -> None:
        if start == stop:
            return
        self.started = True
        if not self.first <= self.number < self.end:
            return
        take = min(stop - start, MAX_LINE_CHARS - self.head_chars)
        if take > 0:
            self.head.append(text[start : start + take])
            self.head_chars += take
        self.length += stop - start

    def _end_line(self) -> None:
        if self.first <= self.number < self.end:
            self._show("".join(self.head), self.length)
        self.number += 1
        self.started = False
        self.head, self.head_chars, self.length = [], 0, 0

    def _show(self, head: str, length: int) -> None:
        line = head if length <= MAX_LINE_CHARS else head + f"... [line cut: {length:,} characters in all]"
        self.chars += len(f"{self.number:>6}\t") + len(line) + (1 if self.shown_count else 0)
        self.shown_count += 1
        if self.chars <= MAX_OUTPUT_CHARS:
            self.shown.append(line)
        else:
            self.shown = []  # the call will fail: no need to hold what cannot be shown


def _count_line_ends(text: str) -> int:
    # "in" is a memchr, far faster than count: most chunks have no "\r", and a long line's none at all
    if "\r" in text:
        return text.count("\n") + text.count("\r") - text.count("\r\n")
    return text.count("\n") if "\n" in text else 0
