"""The Edit tool: replace an exact string in a file the model has read, keeping its line endings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.declaration import Declaration
from tools.base import ToolContext, ToolError, ToolResult, object_schema
from tools.read import check_fresh, number_lines, record_read
from tools.write import line_delta, write_text

SNIPPET_CONTEXT_LINES = 4

DESCRIPTION = """\
Replace exact text in a file.

- You must have read the file with the Read tool in this session first, and it must not have changed \
since.
- old_string must match the file exactly, including whitespace and indentation. Copy it from the Read \
output without the line-number prefix (the number and the tab before each line).
- The edit fails if old_string occurs more than once: include more surrounding lines to make it unique, \
or set replace_all to true to change every occurrence (handy for renaming a variable).
- new_string must differ from old_string.
- An empty old_string with a file_path that does not exist creates that file with new_string as its \
content.
- The file's line endings (LF or CRLF) are kept.
- Prefer editing existing files to writing new ones."""
# the description at small windows, where the tools' text is a large share of the context (compact.owner)
BRIEF = "Replace exact text in a file read this session: old_string must match once, exactly (no line-number prefix), unless replace_all; new_string must differ. An empty old_string on a missing path creates the file."


class EditTool:
    name = "Edit"
    declaration = Declaration(
        "writes", "file_path", "file_path", show_summary=True, clearable=True, records="edit", restorable=True
    )
    description = DESCRIPTION
    brief = BRIEF
    input_schema = object_schema(
        {
            "file_path": {"type": "string", "description": "The absolute path of the file to change"},
            "old_string": {"type": "string", "description": "The exact text to replace"},
            "new_string": {"type": "string", "description": "The text to put in its place"},
            "replace_all": {
                "type": "boolean",
                "default": False,
                "description": "Replace every occurrence of old_string (default false)",
            },
        },
        "file_path",
        "old_string",
        "new_string",
    )

    def check(self, args: dict[str, Any], ctx: ToolContext) -> None:
        """Raise the ToolError ``run`` would raise, changing nothing (asked before a permission prompt)."""
        _plan(args, ctx)

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path, updated, position, length, count, created = _plan(args, ctx)
        result = _finish(path, updated, position, length, ctx, count=count, created=created)
        added, removed = line_delta(args["old_string"], args["new_string"])
        result.facts = {"added": added * count, "removed": removed * count}
        return result


def _plan(args: dict[str, Any], ctx: ToolContext) -> tuple[Path, str, int, int, int, bool]:
    """What the edit would write: (path, new text, where the change starts, its length, count, created)."""
    path = ctx.resolve(args["file_path"])
    old, new = args["old_string"], args["new_string"]
    if old == new:
        raise ToolError("old_string and new_string are the same, so there is nothing to change.")
    if not path.exists():
        _create(path, old)
        return path, new, 0, len(new), 1, True
    if path.is_dir():
        raise ToolError(f"{path} is a directory; give the path of a file to edit.")
    check_fresh(ctx, path)
    text = _read_utf8(path)
    if old == "":
        if text:
            raise ToolError(
                f"old_string is empty but {path} already has content. Quote the text to replace, "
                "or use Write to replace the whole file."
            )
        return path, new, 0, len(new), 1, False
    if "\r\n" in text:
        old, new = _to_crlf(old), _to_crlf(new)
    updated, position = _replace(text, old, new, bool(args.get("replace_all", False)))
    return path, updated, position, len(new), text.count(old), False


def _create(path: Path, old: str) -> None:
    if old != "":
        raise ToolError(
            f"File does not exist: {path}. To create a new file use Write, or Edit with an empty old_string."
        )


def _replace(text: str, old: str, new: str, replace_all: bool) -> tuple[str, int]:
    """Return the new text and where the first replacement starts."""
    count = text.count(old)
    if count == 0:
        raise ToolError(
            "old_string was not found in the file. It must match exactly, including whitespace and "
            "indentation; Read the file again to copy the current text."
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in the file. Add more surrounding lines to old_string so it "
            "matches exactly one place, or set replace_all to true to change all of them."
        )
    position = text.find(old)
    return text.replace(old, new), position


def _finish(
    path: Path,
    text: str,
    position: int,
    length: int,
    ctx: ToolContext,
    *,
    count: int = 1,
    created: bool = False,
) -> ToolResult:
    write_text(path, text)
    record_read(ctx, path)
    if created:
        head = f"Created {path}."
    else:
        head = f"Edited {path} ({count} replacement{'s' if count != 1 else ''})."
    snippet = _snippet(text, position, length)
    body = f"{head} The edited region now reads:\n{snippet}" if snippet else head
    return ToolResult(content=body, summary=f"Edited {path.name}" if not created else f"Created {path.name}")


def _snippet(text: str, position: int, length: int) -> str:
    """Numbered lines around text[position:position+length], a few lines of context either side."""
    lines = text.split("\n")
    first = text.count("\n", 0, position)
    # a replacement ending in a newline does not reach into the following line
    last = first + text[position : position + length].rstrip("\r\n").count("\n")
    start = max(0, first - SNIPPET_CONTEXT_LINES)
    end = min(len(lines), last + SNIPPET_CONTEXT_LINES + 1)
    shown = [line.rstrip("\r") for line in lines[start:end]]
    if shown and shown[-1] == "" and end == len(lines):
        shown.pop()  # the empty "line" after a final newline is not a line
    return number_lines(shown, start + 1)


def _read_utf8(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{path} is not UTF-8 text, so Edit cannot change it safely. Use a Bash command instead."
        ) from exc


def _to_crlf(text: str) -> str:
    # Normalise first so text that already has CRLF does not become CR CR LF.
    return text.replace("\r\n", "\n").replace("\n", "\r\n")
