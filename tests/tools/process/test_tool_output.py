"""Capped tool output (tools.process.spill): the head in memory, the whole stream in a private file, and what
Bash makes of a really large output."""

from __future__ import annotations

import stat
from pathlib import Path

from tools.base import ToolContext
from tools.bash import BashTool
from tools.process.spill import HEAD_BYTES, SpillingOutput


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_output_that_fits_stays_in_memory(tmp_path: Path) -> None:
    with SpillingOutput(tmp_path / "results", "x", head_bytes=10) as out:
        out.write(b"12345")
        out.write(b"")
        out.write(b"67890")
    assert (out.spilled, bytes(out.head), out.text(), out.total_bytes, out.total_lines) == (
        False,
        b"1234567890",
        "1234567890",
        10,
        1,
    )
    assert not (tmp_path / "results").exists()


def test_overflow_spills_everything_to_one_private_file(tmp_path: Path) -> None:
    pieces = [b"ab\n", b"cd", b"e\nfgh", b"\n" * 3, b"ijklmnopqrstuvwxyz" * 100]
    with SpillingOutput(tmp_path / "session" / "tool-results", "grep", head_bytes=8) as out:
        for piece in pieces:
            out.write(piece)
    assert out.path is not None
    assert out.path.parent == tmp_path / "session" / "tool-results"
    assert out.path.name.startswith("grep-") and out.path.suffix == ".txt"
    assert list(out.path.parent.iterdir()) == [out.path]
    assert out.path.read_bytes() == b"".join(pieces)
    assert bytes(out.head) == b"ab\ncde\nf"
    assert out.text() == "ab\ncde\n"  # whole lines only, once it spilled
    assert (out.total_bytes, out.total_lines) == (1813, 6)
    assert (mode(out.path), mode(out.path.parent), mode(out.path.parent.parent)) == (0o600, 0o700, 0o700)


def test_each_spill_gets_its_own_file(tmp_path: Path) -> None:
    paths = []
    for _ in range(3):
        with SpillingOutput(tmp_path, "bash", head_bytes=1) as out:
            out.write(b"xyz")
        paths.append(out.path)
    assert len(set(paths)) == 3


def test_note_says_what_is_shown_and_where_the_rest_is(tmp_path: Path) -> None:
    with SpillingOutput(tmp_path, "grep", head_bytes=4) as out:
        out.write(b"a\nb\nc\nd\n")
    assert out.spill_note(2, hint=", or narrow the search") == (
        "(Output too large to show in full: 8 bytes in 4 lines; the first 2 lines are shown. All of it is "
        f"saved in {out.path} - Read that file with offset and limit to see the rest, or narrow the search.)"
    )


def test_bash_result_stays_small_whatever_the_command_prints(tmp_path: Path) -> None:
    ctx = ToolContext(project_dir=tmp_path, session_dir=tmp_path / "session", cwd=tmp_path)
    # 40 MB in 400,000 lines of 100 bytes
    result = BashTool().run({"command": "yes $(printf '%099d' 0) | head -n 400000"}, ctx)
    assert isinstance(result.content, str)
    assert len(result.content) < HEAD_BYTES + 1000
    [spilled] = (tmp_path / "session" / "tool-results").iterdir()
    assert spilled.stat().st_size == 40_000_000
    first_line = result.content.split("\n", 1)[0]
    assert first_line == (
        f"(Output too large to show in full: 40,000,000 bytes in 400,000 lines; the first 10,485 lines are "
        f"shown. All of it is saved in {spilled} - Read that file with offset and limit to see the rest.)"
    )
    assert result.summary == "400000 lines of output"
