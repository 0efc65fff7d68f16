"""Grep reads rg's output as a stream (real ripgrep, real files): awkward file names, hidden files in
every output mode, and output too large to show, which is saved whole to a file the result names."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools.base import ToolContext, ToolResult
from tools.glob import GlobTool
from tools.grep import GrepTool, find_rg
from tools.process import spill as output_module

ROOT = Path(__file__).resolve().parents[2]


def make_ctx(tmp_path: Path, hidden: object = None) -> ToolContext:
    return ToolContext(project_dir=tmp_path, session_dir=tmp_path / ".session", cwd=tmp_path, hidden=hidden)  # type: ignore[arg-type]


def put(path: Path, text: str, mtime: float = 1_000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return path


def grep(ctx: ToolContext, pattern: str, **extra: object) -> ToolResult:
    return GrepTool().run({"pattern": pattern, **extra}, ctx)


def plain_rg(*args: str) -> list[str]:
    """What rg itself prints (no --null): the lines Grep must show when nothing is hidden."""
    done = subprocess.run(
        [find_rg(), "--hidden", "--color", "never", "--no-heading", *args], capture_output=True, text=True
    )
    return [line for line in done.stdout.splitlines() if line]


def content(result: ToolResult) -> str:
    assert isinstance(result.content, str)
    return result.content


def check_separators(lines: list[str]) -> None:
    assert lines[0] != "--" and lines[-1] != "--"
    assert all(not (a == b == "--") for a, b in zip(lines, lines[1:]))


BODY = "".join(f"{'needle' if n % 4 == 0 else 'hay'} {n}\n" for n in range(1, 13))


@pytest.fixture
def odd_tree(tmp_path: Path) -> Path:
    """Files whose names hold ":", "-" and digits, each with three matches and context lines."""
    for name in ("a:1:b.txt", "x-2-y.txt", "12:34", "plain.txt", "sub/c:d-3.txt"):
        put(tmp_path / "tree" / name, BODY)
    return tmp_path / "tree"


@pytest.mark.parametrize(
    "flags",
    [
        {},
        {"-n": False},
        {"-C": 1},
        {"-A": 2, "-n": False},
        {"-B": 1, "-i": True},
    ],
)
def test_content_lines_are_rgs_own_whatever_the_file_names(odd_tree: Path, flags: dict[str, object]) -> None:
    shown = content(grep(make_ctx(odd_tree), "needle", output_mode="content", **flags)).split("\n")
    rg_flags = ["--no-line-number" if flags.get("-n") is False else "--line-number"]
    for letter in "ABC":
        if f"-{letter}" in flags:
            rg_flags += [f"-{letter}", str(flags[f"-{letter}"])]
    expected = plain_rg(*rg_flags, *(["-i"] if flags.get("-i") else []), "needle", str(odd_tree))
    # rg searches files in parallel, so compare regardless of the order of files
    assert sorted(shown) == sorted(expected)


def test_files_and_count_modes_with_odd_names(odd_tree: Path) -> None:
    ctx = make_ctx(odd_tree)
    files = content(grep(ctx, "needle")).split("\n")
    assert files[0] == "Found 5 files"
    assert sorted(files[1:]) == sorted(plain_rg("--files-with-matches", "needle", str(odd_tree)))
    counts = content(grep(ctx, "needle", output_mode="count")).split("\n")
    assert sorted(counts[:-2]) == sorted(plain_rg("--count", "--with-filename", "needle", str(odd_tree)))
    assert counts[-2:] == ["", "Found 15 matches in 5 files"]


def test_hidden_files_leave_no_trace_in_any_mode(odd_tree: Path) -> None:
    # a newline in a hidden file's name must not let the part after it pass for another file
    put(odd_tree / "new\nline.txt", BODY)
    secret = {str(odd_tree / "a:1:b.txt"), str(odd_tree / "new\nline.txt"), str(odd_tree / "sub/c:d-3.txt")}
    asked: list[Path] = []

    def hidden(path: Path) -> bool:
        asked.append(path)
        return str(path) in secret

    ctx = make_ctx(odd_tree, hidden)
    files = content(grep(ctx, "needle")).split("\n")
    assert files[0] == "Found 3 files"
    assert sorted(files[1:]) == sorted(str(odd_tree / n) for n in ("x-2-y.txt", "12:34", "plain.txt"))
    assert {str(p) for p in asked} == secret | set(files[1:])
    assert content(grep(ctx, "needle", output_mode="count")).endswith("Found 9 matches in 3 files")
    for flags in ({}, {"-C": 1}, {"-C": 5, "-n": False}):
        lines = content(grep(ctx, "needle", output_mode="content", **flags)).split("\n")
        visible = [str(odd_tree / name) for name in ("x-2-y.txt", "12:34", "plain.txt")]
        from_file = {
            next((p for p in visible if line.startswith((p + ":", p + "-"))), line)
            for line in lines
            if line != "--"
        }
        assert from_file == set(visible)
        assert len([line for line in lines if "needle" in line]) == 9
        check_separators(lines)


def test_separators_between_groups_survive_hiding(tmp_path: Path) -> None:
    put(tmp_path / "d" / "open.txt", "needle 1\nx\nx\nx\nx\nneedle 6\n")
    put(tmp_path / "d" / "secret.txt", "needle\n")
    ctx = make_ctx(tmp_path, lambda p: p.name == "secret.txt")
    result = grep(ctx, "needle", output_mode="content", path=str(tmp_path / "d"), **{"-A": 1})
    assert (
        content(result) == f"{tmp_path}/d/open.txt:1:needle 1\n{tmp_path}/d/open.txt-2-x\n--\n"
        f"{tmp_path}/d/open.txt:6:needle 6"
    )


def test_a_hidden_file_searched_directly_has_no_matches(tmp_path: Path) -> None:
    path = put(tmp_path / ".env", "KEY=needle\n")
    ctx = make_ctx(tmp_path, lambda p: p == path)
    for mode in ("content", "files_with_matches", "count"):
        assert grep(ctx, "needle", path=str(path), output_mode=mode) == ToolResult(
            content="No matches found", summary="No matches"
        )


def test_glob_leaves_hidden_files_out(tmp_path: Path) -> None:
    put(tmp_path / "a.py", "", 3_000)
    put(tmp_path / "secret" / "key.py", "", 2_000)
    put(tmp_path / "b.py", "", 1_000)
    ctx = make_ctx(tmp_path, lambda p: "secret" in p.parts)
    assert GlobTool().run({"pattern": "**/*.py"}, ctx).content == f"{tmp_path}/a.py\n{tmp_path}/b.py"
    assert GlobTool().run({"pattern": "secret/*"}, ctx).content == "No files found"


def test_output_too_large_is_saved_whole_and_the_result_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(output_module, "HEAD_BYTES", 2000)
    tree = tmp_path / "t"
    put(tree / "one.txt", "".join(f"needle {n}\n" for n in range(1, 201)))
    result = grep(make_ctx(tmp_path), "needle", output_mode="content", path=str(tree), **{"-C": 1})
    [saved] = (tmp_path / ".session" / "tool-results").iterdir()
    assert saved.name.startswith("grep-")
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    whole = "".join(f"{tree}/one.txt:{n}:needle {n}\n" for n in range(1, 201))
    assert saved.read_text() == whole
    fits = whole[:2000].rsplit("\n", 1)[0]  # whole lines within the first 2,000 bytes
    shown = fits.count("\n") + 1
    assert content(result) == (
        f"(Output too large to show in full: {len(whole):,} bytes in 200 lines; the first {shown} lines "
        f"are shown. All of it is saved in {saved} - Read that file with offset and limit to see the rest, "
        f"or narrow the search.)\n{fits}"
    )
    assert result.summary == "200 lines"


def test_huge_file_lists_show_the_newest_of_their_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a head of four and a half lines, whatever the temporary directory's length (xdist's is longer)
    head = len(f"{tmp_path}/t/f00.txt\n") * 9 // 2
    monkeypatch.setattr(output_module, "HEAD_BYTES", head)
    for n in range(40):
        put(tmp_path / "t" / f"f{n:02}.txt", "needle\n", 1_000 + n)
    result = content(grep(make_ctx(tmp_path), "needle", head_limit=3))
    note, found, *paths, blank, cut = result.split("\n")
    [saved] = (tmp_path / ".session" / "tool-results").iterdir()
    in_head = saved.read_text()[:head].split("\n")[:-1]
    assert found == "Found 40 files"
    assert note.startswith("(Output too large to show in full: ") and str(saved) in note
    assert "the first 3 lines are shown" in note
    assert paths == sorted(in_head, reverse=True)[:3]  # newer files have higher numbers here
    assert sorted(saved.read_text().split("\n")[:-1]) == [f"{tmp_path}/t/f{n:02}.txt" for n in range(40)]
    assert (blank, cut) == ("", "(Showing the first 3 of 40 results; raise head_limit or narrow the search.)")


def test_a_normal_result_writes_no_file(tmp_path: Path) -> None:
    put(tmp_path / "t" / "a.txt", "needle\n" * 2000)  # 2,000 lines of ~100 bytes: under the head
    result = grep(make_ctx(tmp_path), "needle", output_mode="content", path=str(tmp_path / "t"))
    assert result.summary == "2000 lines"
    assert not (tmp_path / ".session").exists()


PEAK_SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tools.base import ToolContext
    from tools.grep import GrepTool

    root = Path(sys.argv[1])
    ctx = ToolContext(project_dir=root, session_dir=root / "session", cwd=root)
    text = GrepTool().run({"pattern": "line", "output_mode": "content", "path": str(root / "t")}, ctx).content
    status = Path("/proc/self/status").read_text()
    peak_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    print(len(text), peak_kb)
""")


def test_memory_stays_bounded_on_a_huge_search(tmp_path: Path) -> None:
    body = "".join(
        f"line {n:06} of a file that matches on every line, padded to eighty bytes\n" for n in range(10_000)
    )
    for n in range(60):  # 60 files of 800 KB: about 55 MB of output
        put(tmp_path / "t" / f"f{n:02}.txt", body)
    done = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    length, peak_kb = map(int, done.stdout.split())
    assert length < output_module.HEAD_BYTES + 1000
    [saved] = (tmp_path / "session" / "tool-results").iterdir()
    assert saved.stat().st_size > 50_000_000
    assert peak_kb < 60 * 1024


def test_rgs_note_on_a_binary_file_stays_with_that_file(tmp_path: Path) -> None:
    late_nul = (
        "needle first\n" + "filler\n" * 100_000 + "x\0y\nneedle after\n"
    )  # the NUL is past rg's first read
    put(tmp_path / "t" / "open.bin", late_nul)
    put(tmp_path / "t" / "secret.bin", late_nul)
    ctx = make_ctx(tmp_path, lambda p: p.name == "secret.bin")
    result = grep(ctx, "needle", output_mode="content", path=str(tmp_path / "t"))
    [note] = [line for line in plain_rg("-n", "needle", str(tmp_path / "t")) if "open.bin: WARNING" in line]
    assert content(result) == f"{tmp_path}/t/open.bin:1:needle first\n{note}"
