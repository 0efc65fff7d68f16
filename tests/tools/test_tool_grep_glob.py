"""Grep (real ripgrep) and Glob on a small real tree: modes, flags, ordering, caps and errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tools.glob
from tools.base import ToolContext, ToolError, ToolResult
from tools.glob import GlobTool, compile_glob
from tools.grep import GrepTool
from tools.runner import run_tool


def make_ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(project_dir=tmp_path, session_dir=tmp_path / ".session", cwd=tmp_path)


def put(path: Path, text: str, mtime: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A tiny repository: files with known contents and distinct mtimes (bigger = newer)."""
    (tmp_path / ".git").mkdir()
    put(tmp_path / ".git" / "config", "needle in git internals\n", 1_000)
    put(tmp_path / ".gitignore", "build/\n", 1_000)
    put(tmp_path / "app.py", "import os\n\ndef main():\n    return 'Needle'\n", 2_000)
    put(tmp_path / "lib" / "util.py", "a = 1\nneedle = 2\nb = 3\nc = 4\n", 3_000)
    put(tmp_path / "notes.txt", "a needle here\nand a needle there\n", 4_000)
    put(tmp_path / ".config" / "hidden.py", "needle = 'hidden'\n", 1_500)
    put(tmp_path / "build" / "out.py", "needle = 'ignored'\n", 5_000)
    return tmp_path


def grep(ctx: ToolContext, pattern: str, **extra: object) -> ToolResult:
    return GrepTool().run({"pattern": pattern, **extra}, ctx)


def glob(ctx: ToolContext, pattern: str, **extra: object) -> ToolResult:
    return GlobTool().run({"pattern": pattern, **extra}, ctx)


# --- Grep --------------------------------------------------------------------------------------


def test_files_with_matches_is_the_default_newest_first(tree: Path) -> None:
    result = grep(make_ctx(tree), "needle")
    assert result == ToolResult(
        content=f"Found 3 files\n{tree}/notes.txt\n{tree}/lib/util.py\n{tree}/.config/hidden.py",
        summary="Found 3 files",
    )


def test_ignore_case(tree: Path) -> None:
    assert grep(make_ctx(tree), "needle", **{"-i": True}).content == (
        f"Found 4 files\n{tree}/notes.txt\n{tree}/lib/util.py\n{tree}/app.py\n{tree}/.config/hidden.py"
    )


def test_content_mode_shows_line_numbers_by_default(tree: Path) -> None:
    result = grep(make_ctx(tree), "needle", output_mode="content", path=str(tree / "lib"))
    assert result.content == f"{tree}/lib/util.py:2:needle = 2"


def test_content_mode_without_line_numbers(tree: Path) -> None:
    result = grep(make_ctx(tree), "needle", output_mode="content", path=str(tree / "lib"), **{"-n": False})
    assert result.content == f"{tree}/lib/util.py:needle = 2"


def test_content_mode_on_a_single_file_with_context_after(tree: Path) -> None:
    result = grep(
        make_ctx(tree), "needle", output_mode="content", path=str(tree / "lib/util.py"), **{"-A": 1}
    )
    assert result.content == "2:needle = 2\n3-b = 3"


def test_context_before_and_around(tree: Path) -> None:
    ctx = make_ctx(tree)
    path = str(tree / "lib/util.py")
    assert (
        grep(ctx, "needle", output_mode="content", path=path, **{"-B": 1}).content == "1-a = 1\n2:needle = 2"
    )
    assert grep(ctx, "needle", output_mode="content", path=path, **{"-C": 1}).content == (
        "1-a = 1\n2:needle = 2\n3-b = 3"
    )


def test_count_mode(tree: Path) -> None:
    result = grep(make_ctx(tree), "needle", output_mode="count", glob="*.txt")
    assert result == ToolResult(
        content=f"{tree}/notes.txt:2\n\nFound 2 matches in 1 files", summary="2 matches"
    )


def test_glob_and_type_filters(tree: Path) -> None:
    ctx = make_ctx(tree)
    assert grep(ctx, "needle", glob="*.txt").content == f"Found 1 file\n{tree}/notes.txt"
    assert grep(ctx, "needle", type="py").content == (
        f"Found 2 files\n{tree}/lib/util.py\n{tree}/.config/hidden.py"
    )


def test_head_limit_cuts_with_a_note(tree: Path) -> None:
    result = grep(make_ctx(tree), "needle", head_limit=1)
    assert result.content == (
        f"Found 3 files\n{tree}/notes.txt\n\n"
        "(Showing the first 1 of 3 results; raise head_limit or narrow the search.)"
    )


def test_multiline_patterns_span_lines(tree: Path) -> None:
    ctx = make_ctx(tree)
    assert grep(ctx, r"import os.def", path=str(tree / "app.py")).content == "No matches found"
    result = grep(ctx, r"import os.+def", multiline=True, path=str(tree / "app.py"))
    assert result.content == f"Found 1 file\n{tree}/app.py"


def test_pattern_starting_with_a_dash_is_not_a_flag(tmp_path: Path) -> None:
    put(tmp_path / "f.txt", "x --verbose y\n", 1_000)
    assert grep(make_ctx(tmp_path), "--verbose").content == f"Found 1 file\n{tmp_path}/f.txt"


def test_no_matches(tree: Path) -> None:
    assert grep(make_ctx(tree), "haystack") == ToolResult(content="No matches found", summary="No matches")


def test_bad_regex_is_an_error_with_ripgreps_message(tree: Path) -> None:
    result = run_tool(GrepTool(), {"pattern": "foo(("}, make_ctx(tree))
    assert result.is_error
    assert isinstance(result.content, str)
    assert result.content.startswith("Grep failed: regex parse error")
    assert result.content.endswith("error: unclosed group")


def test_unknown_file_type_is_an_error(tree: Path) -> None:
    with pytest.raises(ToolError, match="unrecognized file type"):
        grep(make_ctx(tree), "needle", type="nosuchlang")


def test_missing_path_is_an_error(tree: Path) -> None:
    with pytest.raises(ToolError) as info:
        grep(make_ctx(tree), "needle", path=str(tree / "nope"))
    assert (
        str(info.value)
        == f"Path does not exist: {tree / 'nope'}. Pass an existing file or directory as path."
    )


def test_relative_path_is_resolved_against_cwd(tree: Path) -> None:
    assert grep(make_ctx(tree), "needle", path="lib").content == f"Found 1 file\n{tree}/lib/util.py"


def test_bad_output_mode_is_rejected_by_the_runner(tree: Path) -> None:
    result = run_tool(GrepTool(), {"pattern": "x", "output_mode": "lines"}, make_ctx(tree))
    assert result.content == (
        "Invalid input for Grep: `output_mode` must be one of 'content', 'files_with_matches', 'count', "
        "got 'lines'."
    )


# --- Glob --------------------------------------------------------------------------------------


def test_recursive_glob_newest_first_skipping_git(tree: Path) -> None:
    result = glob(make_ctx(tree), "**/*.py")
    assert result == ToolResult(
        content="\n".join(
            [f"{tree}/build/out.py", f"{tree}/lib/util.py", f"{tree}/app.py", f"{tree}/.config/hidden.py"]
        ),
        summary="Found 4 files",
    )
    assert glob(make_ctx(tree), "**/config").content == "No files found"


def test_single_star_does_not_descend(tree: Path) -> None:
    assert glob(make_ctx(tree), "*.py").content == f"{tree}/app.py"


def test_leading_directories_and_path_argument(tree: Path) -> None:
    ctx = make_ctx(tree)
    assert glob(ctx, "lib/*.py").content == f"{tree}/lib/util.py"
    assert glob(ctx, "*.py", path=str(tree / "lib")).content == f"{tree}/lib/util.py"
    assert glob(ctx, f"{tree}/lib/**").content == f"{tree}/lib/util.py"


def test_braces_and_character_classes(tree: Path) -> None:
    ctx = make_ctx(tree)
    assert glob(ctx, "*.{txt,py}").content == f"{tree}/notes.txt\n{tree}/app.py"
    assert glob(ctx, "[an]*").content == f"{tree}/notes.txt\n{tree}/app.py"
    assert glob(ctx, "[!a]*.?xt").content == f"{tree}/notes.txt"


def test_no_files_found(tree: Path) -> None:
    assert glob(make_ctx(tree), "**/*.rs") == ToolResult(content="No files found", summary="No files found")


def test_results_are_capped_at_100_newest(tmp_path: Path) -> None:
    for n in range(120):
        put(tmp_path / f"f{n:03}.txt", "", 10_000 + n)
    text = glob(make_ctx(tmp_path), "*.txt").content
    assert isinstance(text, str)
    lines = text.split("\n")
    assert lines[:100] == [f"{tmp_path}/f{n:03}.txt" for n in range(119, 19, -1)]
    assert lines[100:] == [
        "(Results are truncated: showing the 100 most recently modified of 120 files. "
        "Use a more specific path or pattern.)"
    ]


def test_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as info:
        glob(make_ctx(tmp_path), "*.py", path=str(tmp_path / "nope"))
    assert str(info.value) == f"{tmp_path / 'nope'} does not exist. Pass an existing directory as path."


def test_glob_translation() -> None:
    regex = compile_glob("src/**/test_*.{py,pyi}")
    assert [bool(regex.fullmatch(p)) for p in ("src/test_a.py", "src/x/y/test_b.pyi", "src/x/a.py")] == [
        True,
        True,
        False,
    ]
    assert compile_glob("a?c").fullmatch("a/c") is None


def test_glob_matching_never_backtracks_and_agrees_with_a_regex_on_ordinary_patterns(tmp_path: Path) -> None:
    import random
    import re
    import time

    name = "a" * 80 + ".txt"
    (tmp_path / name).write_text("")
    (tmp_path / ("a" * 79 + "b")).write_text("")
    started = time.monotonic()
    found = glob(make_ctx(tmp_path), "*a*a*a*a*a*a*a*a*b")
    assert found.content == str(tmp_path / ("a" * 79 + "b"))
    assert compile_glob("**/*a*a*a*a*a*a*a*a*a*a*c").fullmatch("x/" + "a" * 5000) is None
    assert time.monotonic() - started < 30  # a backtracking matcher takes hours here

    def reference(pattern: str) -> re.Pattern[str]:  # the regex these patterns mean, for short paths
        out = (
            pattern.replace("**/", "\0").replace("*", "[^/]*").replace("?", "[^/]").replace("\0", "(?:.*/)?")
        )
        return re.compile(out)

    rng = random.Random(20)
    pieces = ["a", "b", "/", "*", "?", "**/"]
    for _ in range(3000):
        pattern = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        if re.search(r"[^/]\*\*/|\*\*\*|\*\*(?!/)", pattern):
            continue  # "**" inside a name: the reference below would read it differently
        path = "".join(rng.choice("ab/") for _ in range(rng.randint(0, 8)))
        expected = bool(reference(pattern).fullmatch(path))
        assert tools.glob._matches(tools.glob._tokens(pattern), path) == expected, (pattern, path)  # the NFA
        assert bool(compile_glob(pattern).fullmatch(path)) == expected, (
            pattern,
            path,
        )
    assert compile_glob("src/{a,b{c,d}}/*.py").fullmatch("src/bd/x.py")
    assert not compile_glob("src/{a,b{c,d}}/*.py").fullmatch("src/b/x.py")
    assert compile_glob("[!a]?.{py,md}").fullmatch("bc.md") and not compile_glob("[!a]?.py").fullmatch(
        "ac.py"
    )
