"""The Read tool on real files: numbering, paging, images, refusals, and the read-state it records."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tools.base import ToolContext, ToolError, ToolResult
from tools.read import ReadTool
from tools.runner import run_tool


def make_ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(project_dir=tmp_path, session_dir=tmp_path / ".session", cwd=tmp_path)


def read(ctx: ToolContext, path: Path | str, **extra: object) -> ToolResult:
    return ReadTool().run({"file_path": str(path), **extra}, ctx)


def test_numbers_lines_like_cat_n(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import os\n\nprint(os.sep)\n")
    result = read(make_ctx(tmp_path), tmp_path / "a.py")
    assert result == ToolResult(
        content="     1\timport os\n     2\t\n     3\tprint(os.sep)", summary="Read 3 lines"
    )


def test_last_line_without_newline_and_crlf_endings_are_shown_plainly(tmp_path: Path) -> None:
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo\r\nthree")
    assert read(make_ctx(tmp_path), tmp_path / "w.txt").content == "     1\tone\n     2\ttwo\n     3\tthree"


def test_offset_and_limit_select_a_section_and_say_how_to_go_on(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    result = read(make_ctx(tmp_path), tmp_path / "f.txt", offset=4, limit=2)
    assert result.content == (
        "     4\tline 4\n     5\tline 5\n\n(Showing lines 4-5 of 10. Read on with offset=6 to see more.)"
    )


def test_offset_reaching_the_end_has_no_continuation_note(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\nc\n")
    assert read(make_ctx(tmp_path), tmp_path / "f.txt", offset=3).content == "     3\tc"


def test_offset_zero_means_from_the_top(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\n")
    assert read(make_ctx(tmp_path), tmp_path / "f.txt", offset=0).content == "     1\ta\n     2\tb"


def test_offset_past_the_end(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("a\nb\n")
    assert read(make_ctx(tmp_path), path, offset=9).content == (
        f"(The file {path} has 2 lines; offset 9 is past its end.)"
    )


def test_default_limit_is_2000_lines(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"{n}\n" for n in range(1, 2501)))
    text = read(make_ctx(tmp_path), tmp_path / "big.txt").content
    assert isinstance(text, str)
    lines = text.split("\n")
    assert lines[0] == "     1\t1"
    assert lines[1999] == "  2000\t2000"
    assert lines[2:][-1] == "(Showing lines 1-2000 of 2500. Read on with offset=2001 to see more.)"


def test_empty_file_says_so(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("")
    assert read(make_ctx(tmp_path), path) == ToolResult(
        content=f"(The file {path} exists but is empty.)", summary="Read empty file"
    )


def test_long_lines_are_cut_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "min.js").write_text("x" * 2500 + "\nshort\n")
    text = read(make_ctx(tmp_path), tmp_path / "min.js").content
    assert text == "     1\t" + "x" * 2000 + "... [line cut: 2,500 characters in all]\n     2\tshort"


def test_output_over_the_size_cap_is_refused_with_advice(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text(("y" * 99 + "\n") * 1500)
    with pytest.raises(ToolError, match="Read a smaller section with offset and limit"):
        read(make_ctx(tmp_path), tmp_path / "wide.txt")
    # a smaller slice of the same file is fine
    assert read(make_ctx(tmp_path), tmp_path / "wide.txt", limit=10).summary == "Read 10 lines"


def test_png_comes_back_as_an_image_block(tmp_path: Path) -> None:
    data = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRfake"
    (tmp_path / "pic.PNG").write_bytes(data)
    result = read(make_ctx(tmp_path), tmp_path / "pic.PNG")
    assert result.content == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(data).decode()},
        }
    ]


def test_jpeg_media_type(tmp_path: Path) -> None:
    (tmp_path / "p.jpg").write_bytes(b"\xff\xd8\xff\xe0")
    content = read(make_ctx(tmp_path), tmp_path / "p.jpg").content
    assert isinstance(content, list)
    assert content[0]["source"]["media_type"] == "image/jpeg"


def test_images_over_5_mb_are_refused(tmp_path: Path) -> None:
    (tmp_path / "huge.png").write_bytes(b"\0" * (5 * 1024 * 1024 + 1))
    with pytest.raises(ToolError, match="images over 5 MB cannot be shown"):
        read(make_ctx(tmp_path), tmp_path / "huge.png")


def test_binary_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "prog.bin").write_bytes(b"ELF\0\1\2\3")
    with pytest.raises(ToolError, match="is a binary file"):
        read(make_ctx(tmp_path), tmp_path / "prog.bin")


def test_directory_points_to_ls_and_glob(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as info:
        read(make_ctx(tmp_path), tmp_path)
    assert str(info.value) == (
        f"{tmp_path} is a directory, not a file. List it with `ls` in the Bash tool or find files with Glob."
    )


def test_missing_file_suggests_similar_names(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("a: 1\n")
    with pytest.raises(ToolError) as info:
        read(make_ctx(tmp_path), tmp_path / "config.yml")
    assert str(info.value) == (
        f"File does not exist: {tmp_path / 'config.yml'}. Did you mean: {tmp_path / 'config.yaml'}?"
    )


def test_missing_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as info:
        read(make_ctx(tmp_path), tmp_path / "nope" / "x.txt")
    assert str(info.value) == (
        f"File does not exist: {tmp_path / 'nope' / 'x.txt'}. Its directory {tmp_path / 'nope'} does not exist either."
    )


def test_successful_reads_record_the_mtime_even_when_partial(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("a\nb\nc\n")
    ctx = make_ctx(tmp_path)
    read(ctx, path, offset=2, limit=1)
    assert ctx.read_files == {str(path.resolve()): path.stat().st_mtime}


def test_failed_reads_record_nothing(tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(b"\0\0")
    ctx = make_ctx(tmp_path)
    result = run_tool(ReadTool(), {"file_path": str(tmp_path / "b.bin")}, ctx)
    assert result.is_error
    assert ctx.read_files == {}


def test_relative_paths_resolve_against_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "n.txt").write_text("hello\n")
    ctx = make_ctx(tmp_path)
    ctx.cwd = tmp_path / "sub"
    assert read(ctx, "n.txt").content == "     1\thello"


def test_invalid_utf8_is_shown_with_replacement_characters(tmp_path: Path) -> None:
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9\n")
    assert read(make_ctx(tmp_path), tmp_path / "latin.txt").content == "     1\tcaf\ufffd"


def test_errors_reach_the_model_as_is_error_results(tmp_path: Path) -> None:
    result = run_tool(ReadTool(), {"file_path": str(tmp_path / "gone.txt")}, make_ctx(tmp_path))
    assert result.is_error
    assert result.content == f"File does not exist: {tmp_path / 'gone.txt'}."
