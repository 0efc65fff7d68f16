"""The Write tool: create a file, or replace the whole of one the model has already read."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from core.declaration import Declaration
from tools.base import ToolContext, ToolError, ToolResult, object_schema
from tools.read import check_fresh, record_read

DESCRIPTION = """\
Write a file to the local filesystem, replacing it entirely if it already exists.

- file_path must be an absolute path. Missing parent directories are created.
- To overwrite an existing file you must have read it with the Read tool in this session, and it must \
not have changed since; otherwise the write is refused.
- To change part of an existing file prefer the Edit tool: it sends only the change.
- Do not create documentation or README files unless the user asks for them."""
# the description at small windows, where the tools' text is a large share of the context (compact.owner)
BRIEF = "Write a whole file by absolute path (parents created). An existing file must be read first; prefer Edit for changes; no docs or READMEs unless asked."


class WriteTool:
    name = "Write"
    declaration = Declaration(
        "writes", "file_path", "file_path", show_summary=True, clearable=True, records="edit", restorable=True
    )
    description = DESCRIPTION
    brief = BRIEF
    input_schema = object_schema(
        {
            "file_path": {"type": "string", "description": "The absolute path of the file to write"},
            "content": {"type": "string", "description": "The complete new content of the file"},
        },
        "file_path",
        "content",
    )

    def check(self, args: dict[str, Any], ctx: ToolContext) -> None:
        """Raise the ToolError ``run`` would raise, changing nothing (asked before a permission prompt)."""
        path = ctx.resolve(args["file_path"])
        if path.is_dir():
            raise ToolError(f"{path} is a directory; give the path of a file to write.")
        if path.exists():
            check_fresh(ctx, path)

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = ctx.resolve(args["file_path"])
        content: str = args["content"]
        existed = path.exists()
        self.check(args, ctx)
        before = path.read_text(encoding="utf-8", errors="replace") if existed else ""
        write_text(path, content)
        record_read(ctx, path)
        lines = count_lines(content)
        amount = f"{lines} line{'' if lines == 1 else 's'}"
        verb = "Updated" if existed else "Created"
        added, removed = line_delta(before, content)
        return ToolResult(
            content=f"{verb} {path} ({amount}).",
            summary=f"Wrote {amount} to {path}",
            facts={"added": added, "removed": removed},
        )


def write_text(path: Path, content: str) -> None:
    """Write ``content`` exactly as given (no newline translation), creating parent directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(content)


DIFF_LIMIT = 2 * 1024 * 1024  # characters: past this a line diff costs far more than the count says


def line_delta(before: str, after: str) -> tuple[int, int]:
    """Lines added and removed going from ``before`` to ``after`` (as a line diff counts them).

    Huge files are not diffed (a line diff of 200 MB takes gigabytes and minutes): every line of the
    new text counts as added and every line of the old as removed."""
    if not before or len(before) + len(after) > DIFF_LIMIT:
        return (count_lines(after), count_lines(before)) if before != after else (0, 0)
    old, new = before.splitlines(), after.splitlines()
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed


def count_lines(content: str) -> int:
    if not content:
        return 0
    return content.count("\n") + (0 if content.endswith("\n") else 1)
