"""Write and Edit on real files: read-before-write, staleness checks, uniqueness, line endings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.base import ToolContext, ToolError, ToolResult
from tools.edit import EditTool
from tools.read import ReadTool
from tools.runner import run_tool
from tools.write import WriteTool


def make_ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(project_dir=tmp_path, session_dir=tmp_path / ".session", cwd=tmp_path)


def read(ctx: ToolContext, path: Path) -> None:
    ReadTool().run({"file_path": str(path)}, ctx)


def write(ctx: ToolContext, path: Path, content: str) -> ToolResult:
    return WriteTool().run({"file_path": str(path), "content": content}, ctx)


def edit(ctx: ToolContext, path: Path, old: str, new: str, **extra: object) -> ToolResult:
    return EditTool().run({"file_path": str(path), "old_string": old, "new_string": new, **extra}, ctx)


def touch_later(path: Path) -> None:
    """Change the file behind the model's back, with an mtime that surely differs."""
    path.write_text(path.read_text() + "extra\n")
    stat = path.stat()
    os.utime(path, (stat.st_atime, stat.st_mtime + 5))


# --- Write -------------------------------------------------------------------------------------


def test_write_creates_a_new_file_and_its_directories(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    path = tmp_path / "new" / "deep" / "f.txt"
    result = write(ctx, path, "a\nb\n")
    assert result == ToolResult(
        content=f"Created {path} (2 lines).",
        summary=f"Wrote 2 lines to {path}",
        facts={"added": 2, "removed": 0},
    )
    assert path.read_text() == "a\nb\n"
    assert ctx.read_files == {str(path.resolve()): path.stat().st_mtime}


def test_write_keeps_content_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "crlf.txt"
    write(make_ctx(tmp_path), path, "x\r\ny")
    assert path.read_bytes() == b"x\r\ny"


def test_overwriting_an_unread_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("old\n")
    with pytest.raises(ToolError) as info:
        write(make_ctx(tmp_path), path, "new\n")
    assert str(info.value) == f"{path} has not been read yet. Read it with the Read tool first, then retry."
    assert path.read_text() == "old\n"


def test_overwriting_after_reading_works(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("old\n")
    ctx = make_ctx(tmp_path)
    read(ctx, path)
    assert write(ctx, path, "new\n").content == f"Updated {path} (1 line)."
    assert path.read_text() == "new\n"


def test_overwriting_a_file_changed_since_it_was_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("old\n")
    ctx = make_ctx(tmp_path)
    read(ctx, path)
    touch_later(path)
    with pytest.raises(ToolError, match="was modified since you last read it"):
        write(ctx, path, "new\n")


def test_writing_to_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="is a directory"):
        write(make_ctx(tmp_path), tmp_path, "x")


def test_a_file_just_written_can_be_written_again(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    path = tmp_path / "f.txt"
    write(ctx, path, "1\n")
    write(ctx, path, "2\n")
    assert path.read_text() == "2\n"


# --- Edit --------------------------------------------------------------------------------------


def test_edit_replaces_a_unique_string_and_shows_the_region(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("".join(f"line{n}\n" for n in range(1, 13)))
    ctx = make_ctx(tmp_path)
    read(ctx, path)
    result = edit(ctx, path, "line6\n", "six\nSIX\n")
    assert result == ToolResult(
        content=(
            f"Edited {path} (1 replacement). The edited region now reads:\n"
            "     2\tline2\n     3\tline3\n     4\tline4\n     5\tline5\n     6\tsix\n     7\tSIX\n"
            "     8\tline7\n     9\tline8\n    10\tline9\n    11\tline10"
        ),
        summary="Edited m.py",
        facts={"added": 2, "removed": 1},
    )
    assert path.read_text().splitlines()[4:8] == ["line5", "six", "SIX", "line7"]
    assert ctx.read_files[str(path.resolve())] == path.stat().st_mtime


def test_edit_requires_a_read_first(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("abc\n")
    with pytest.raises(ToolError, match="has not been read yet"):
        edit(make_ctx(tmp_path), path, "abc", "xyz")


def test_edit_refuses_a_file_changed_since_read(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("abc\n")
    ctx = make_ctx(tmp_path)
    read(ctx, path)
    touch_later(path)
    with pytest.raises(ToolError, match="Read it again before changing it"):
        edit(ctx, path, "abc", "xyz")


def test_consecutive_edits_need_no_reread(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("a b c\n")
    ctx = make_ctx(tmp_path)
    read(ctx, path)
    edit(ctx, path, "a", "A")
    edit(ctx, path, "b", "B")
    assert path.read_text() == "A B c\n"


def test_non_unique_old_string_names_the_count_and_the_ways_out(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("x = 1\nx = 1\nx = 1\n")
    ctx = make_ctx(tmp_path)
    read(ctx, path)
    with pytest.raises(ToolError) as info:
        edit(ctx, path, "x = 1", "x = 2")
    assert str(info.value) == (
        "old_string occurs 3 times in the file. Add more surrounding lines to old_string so it matches "
        "exactly one place, or set replace_all to true to change all of them."
    )
    assert path.read_text() == "x = 1\nx = 1\nx = 1\n"


def test_replace_all_changes_every_occurrence(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("foo(1)\nbar\nfoo(2)\n")
    ctx = make_ctx(tmp_path)
    read(ctx, path)
    result = edit(ctx, path, "foo", "baz", replace_all=True)
    assert path.read_text() == "baz(1)\nbar\nbaz(2)\n"
    assert isinstance(result.content, str)
    assert result.content.startswith(f"Edited {path} (2 replacements).")


def test_missing_old_string_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("hello\n")
    ctx = make_ctx(tmp_path)
    read(ctx, path)
    with pytest.raises(ToolError, match="old_string was not found in the file"):
        edit(ctx, path, "goodbye", "hi")


def test_identical_old_and_new_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="are the same"):
        edit(make_ctx(tmp_path), tmp_path / "f.txt", "a", "a")


def test_crlf_files_keep_their_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "win.txt"
    path.write_bytes(b"first\r\nsecond\r\nthird\r\n")
    ctx = make_ctx(tmp_path)
    read(ctx, path)
    result = edit(ctx, path, "first\nsecond\n", "one\ntwo\n")
    assert path.read_bytes() == b"one\r\ntwo\r\nthird\r\n"
    assert result.content == (
        f"Edited {path} (1 replacement). The edited region now reads:\n"
        "     1\tone\n     2\ttwo\n     3\tthird"
    )


def test_empty_old_string_creates_a_missing_file(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    path = tmp_path / "pkg" / "new.py"
    result = edit(ctx, path, "", "print('hi')\n")
    assert path.read_text() == "print('hi')\n"
    assert result == ToolResult(
        content=f"Created {path}. The edited region now reads:\n     1\tprint('hi')",
        summary="Created new.py",
        facts={"added": 1, "removed": 0},
    )
    assert str(path.resolve()) in ctx.read_files


def test_empty_old_string_on_a_file_with_content_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("data\n")
    ctx = make_ctx(tmp_path)
    read(ctx, path)
    with pytest.raises(ToolError, match="already has content"):
        edit(ctx, path, "", "more")


def test_editing_a_missing_file_with_old_string_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="File does not exist"):
        edit(make_ctx(tmp_path), tmp_path / "none.txt", "a", "b")


def test_edit_errors_become_is_error_results(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("abc\n")
    result = run_tool(
        EditTool(), {"file_path": str(path), "old_string": "abc", "new_string": "x"}, make_ctx(tmp_path)
    )
    assert result.is_error
    assert result.content == f"{path} has not been read yet. Read it with the Read tool first, then retry."
