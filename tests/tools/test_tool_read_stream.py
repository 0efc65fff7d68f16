"""Read streams its file: the same output as reading it whole, whatever the chunk boundaries, and
bounded memory on a huge one-line file (measured in a real subprocess)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools import read as read_module
from tools.base import ToolContext, ToolError, ToolResult
from tools.read import ReadTool, number_lines

ROOT = Path(__file__).resolve().parents[2]


def make_ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(project_dir=tmp_path, session_dir=tmp_path / ".session", cwd=tmp_path)


def whole_file_read(path: Path, offset: int, limit: int) -> str:
    """What Read showed before it streamed: Python's own line iteration over the whole text."""
    shown: list[str] = []
    total = 0
    with path.open("r", encoding="utf-8", errors="replace", newline="") as handle:
        for total, raw in enumerate(handle, start=1):
            if offset <= total < offset + limit:
                shown.append(raw.rstrip("\n").rstrip("\r"))
    if total == 0:
        return f"(The file {path} exists but is empty.)"
    if not shown:
        return f"(The file {path} has {total} lines; offset {offset} is past its end.)"
    cut = read_module.MAX_LINE_CHARS
    lines = [
        line if len(line) <= cut else line[:cut] + f"... [line cut: {len(line):,} characters in all]"
        for line in shown
    ]
    text = number_lines(lines, offset)
    last = offset + len(shown) - 1
    if last < total:
        text += f"\n\n(Showing lines {offset}-{last} of {total}. Read on with offset={last + 1} to see more.)"
    if len(text) > read_module.MAX_OUTPUT_CHARS:
        return f"too large: {len(text):,} characters"
    return text


def streamed_read(ctx: ToolContext, path: Path, offset: int, limit: int) -> str:
    try:
        content = ReadTool().run({"file_path": str(path), "offset": offset, "limit": limit}, ctx).content
    except ToolError as exc:
        size = re.search(r"at once \(([\d,]+) characters", str(exc))
        assert size is not None, exc
        return f"too large: {size[1]} characters"
    assert isinstance(content, str)
    return content


# bytes that exercise every line ending, a multi-byte character, and invalid UTF-8
PIECES = [b"a", b"bc", b"\n", b"\r", b"\r\n", b"\xc3\xa9", b"\xe2\x82\xac", b"\xff", b"\xc3", b"xxxxxxx"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.lists(st.sampled_from(PIECES), max_size=60).map(b"".join),
    chunk=st.integers(min_value=1, max_value=9),
    offset=st.integers(min_value=1, max_value=8),
    limit=st.integers(min_value=1, max_value=12),
)
def test_streaming_matches_reading_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, chunk: int, offset: int, limit: int
) -> None:
    # tiny chunks and caps, so that line ends, characters, cut lines and the output cap straddle reads
    monkeypatch.setattr(read_module, "BINARY_SNIFF_BYTES", chunk)
    monkeypatch.setattr(read_module, "READ_CHUNK_BYTES", chunk)
    monkeypatch.setattr(read_module, "MAX_LINE_CHARS", 4)
    monkeypatch.setattr(read_module, "MAX_OUTPUT_CHARS", 60)
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    assert streamed_read(make_ctx(tmp_path), path, offset, limit) == whole_file_read(path, offset, limit)


def test_crlf_split_between_two_reads_is_one_line_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_module, "BINARY_SNIFF_BYTES", 4)
    monkeypatch.setattr(read_module, "READ_CHUNK_BYTES", 4)
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo\r\n\r\nfour")
    result = ReadTool().run({"file_path": str(tmp_path / "w.txt")}, make_ctx(tmp_path))
    assert result == ToolResult(
        content="     1\tone\n     2\ttwo\n     3\t\n     4\tfour", summary="Read 4 lines"
    )


def test_a_line_longer_than_many_reads_is_cut_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "one-line.txt"
    path.write_bytes(b"x" * 1_000_000 + b"\nend\n")
    result = ReadTool().run({"file_path": str(path)}, make_ctx(tmp_path))
    assert (
        result.content == "     1\t" + "x" * 2000 + "... [line cut: 1,000,000 characters in all]\n     2\tend"
    )


def test_offset_near_the_end_of_a_long_file(tmp_path: Path) -> None:
    path = tmp_path / "many.txt"
    path.write_text("".join(f"line {n}\n" for n in range(1, 300_001)))
    result = ReadTool().run({"file_path": str(path), "offset": 299_999, "limit": 5}, make_ctx(tmp_path))
    assert result == ToolResult(content="299999\tline 299999\n300000\tline 300000", summary="Read 2 lines")


def test_an_interrupted_read_stops(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("a\n" * 10)
    ctx = make_ctx(tmp_path)
    ctx.cancel.set()
    with pytest.raises(ToolError, match="was interrupted"):
        ReadTool().run({"file_path": str(path)}, ctx)


PEAK_SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tools.base import ToolContext
    from tools.read import ReadTool

    path = Path(sys.argv[1])
    ctx = ToolContext(project_dir=path.parent, session_dir=path.parent / "s", cwd=path.parent)
    text = ReadTool().run({"file_path": str(path)}, ctx).content
    status = Path("/proc/self/status").read_text()
    peak_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    print(len(text), peak_kb)
""")


def test_memory_stays_small_on_a_huge_single_line(tmp_path: Path) -> None:
    path = tmp_path / "huge.txt"
    block = b"0123456789abcdef" * 65_536  # 1 MiB
    with path.open("wb") as out:
        for _ in range(128):
            out.write(block)
    done = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, str(path)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    length, peak_kb = map(int, done.stdout.split())
    assert length == len("     1\t") + 2000 + len("... [line cut: 134,217,728 characters in all]")
    assert peak_kb < 50 * 1024
