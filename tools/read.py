"""The Read tool: show a file to the model as numbered lines, or an image as an image block.

It also owns the "read before you write" bookkeeping that Write and Edit rely on:
``record_read`` notes a file's mtime in ``ctx.read_files`` and ``check_fresh`` refuses to touch a file
the model has not read, or one that changed on disk since it was read.
"""

from __future__ import annotations

import base64
import difflib
import stat
from pathlib import Path
from typing import Any

from tools.base import ToolContext, ToolError, ToolResult

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
# ~25,000 tokens at ~4 characters a token: more than that crowds out the rest of the context.
MAX_OUTPUT_CHARS = 100_000
MAX_IMAGE_BYTES = 5 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192
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
- A file must be read before it can be changed with Write or Edit.
- If you may need several files, read them in parallel in one response."""


class ReadTool:
    name = "Read"
    description = DESCRIPTION
    read_only = True
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
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
        "required": ["file_path"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = ctx.resolve(args["file_path"])
        _check_readable(path)
        media_type = IMAGE_TYPES.get(path.suffix.lower())
        try:
            if media_type:
                result = _read_image(path, media_type)
            else:
                # models sometimes count from 0; both 0 and 1 mean "from the top"
                offset = max(1, int(args.get("offset", 1)))
                result = _read_text(path, offset, int(args.get("limit", DEFAULT_LIMIT)))
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
        raise ToolError(f"{path} is not a regular file ({_kind(path)}), so Read cannot show it. "
                        "Inspect it with a Bash command instead.")


def _kind(path: Path) -> str:
    mode = path.stat().st_mode
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))
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


def _read_text(path: Path, offset: int, limit: int) -> ToolResult:
    with path.open("rb") as handle:
        if b"\0" in handle.read(BINARY_SNIFF_BYTES):
            raise ToolError(
                f"{path} is a binary file and cannot be shown as text. "
                "Inspect it with a Bash command (for example `file`, `xxd | head` or `strings`) instead."
            )
    shown, total = _slice_lines(path, offset, limit)
    if total == 0:
        return ToolResult(content=f"(The file {path} exists but is empty.)", summary="Read empty file")
    if not shown:
        return ToolResult(
            content=f"(The file {path} has {total} lines; offset {offset} is past its end.)",
            summary="Read 0 lines",
        )
    text = number_lines([_cut_long_line(line) for line in shown], offset)
    last = offset + len(shown) - 1
    if last < total:
        text += f"\n\n(Showing lines {offset}-{last} of {total}. Read on with offset={last + 1} to see more.)"
    if len(text) > MAX_OUTPUT_CHARS:
        raise ToolError(
            f"That part of {path} is too large to show at once ({len(text):,} characters, the limit is "
            f"{MAX_OUTPUT_CHARS:,}). Read a smaller section with offset and limit, or search it with Grep."
        )
    return ToolResult(content=text, summary=f"Read {len(shown)} lines")


def _slice_lines(path: Path, offset: int, limit: int) -> tuple[list[str], int]:
    """Return lines offset..offset+limit-1 (1-based) and the file's total line count."""
    shown: list[str] = []
    total = 0
    # Stream rather than read the whole file: it may be far larger than the part wanted.
    with path.open("r", encoding="utf-8", errors="replace", newline="") as handle:
        for total, raw in enumerate(handle, start=1):
            if offset <= total < offset + limit:
                shown.append(raw.rstrip("\n").rstrip("\r"))
    return shown, total


def _cut_long_line(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return line[:MAX_LINE_CHARS] + f"... [line cut: {len(line):,} characters in all]"
