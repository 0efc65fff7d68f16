"""The small things a daily user notices (issue 41, item 6): plurals, paths, /context at 80 columns,
/compact on a tiny context, no /compact advice with compaction off. Each against the fake API and a
real session."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from agent.frontend import commands
from agent.frontend.ui import Renderer
from agent.runtime.loop import run_turn
from core.events import ToolFinished, ToolStarted
from tests.helpers.frontend import chat, new_session
from tools.base import ToolContext
from tools.grep import GrepTool
from tools.read import ReadTool


def screen(*events, width: int = 80, cwd: Path | None = None) -> str:
    buf = io.StringIO()
    renderer = Renderer(Console(file=buf, width=width, color_system=None, force_terminal=False))
    renderer.cwd = cwd
    for e in events:
        renderer(e) if not isinstance(e, commands.Result) else renderer.result(e)
    return buf.getvalue()


def test_one_is_singular(project: Path) -> None:
    (project / "one.txt").write_text("just one\n")
    ctx = ToolContext(project_dir=project, session_dir=project / ".s", cwd=project)
    assert ReadTool().run({"file_path": str(project / "one.txt")}, ctx).summary == "Read 1 line"
    found = GrepTool().run({"pattern": "just", "output_mode": "content"}, ctx)
    assert found.summary == "1 line"
    files = GrepTool().run({"pattern": "just"}, ctx)
    assert files.summary == "Found 1 file"


def test_results_of_our_tools_show_paths_under_the_project_relative(project: Path) -> None:
    path = project / "src" / "a_rather_long_module_name_for_wrapping.py"
    out = screen(
        ToolStarted("t1", "Write", {"file_path": str(path), "content": "x = 1\n"}),
        ToolFinished("t1", "Write", f"Created {path} (1 line).", False, f"Wrote 1 line to {path}"),
        ToolStarted("t2", "Glob", {"pattern": "**/*.py"}),
        ToolFinished("t2", "Glob", f"{path}\n{project / 'b.py'}", False, "Found 2 files"),
        cwd=project,
    )
    assert "Wrote 1 line to src/a_rather_long_module_name_for_wrapping.py" in out
    assert "⎿  src/a_rather_long_module_name_for_wrapping.py" in out and "b.py" in out
    assert str(project) not in out


def test_compact_with_focus_on_a_tiny_context_makes_no_call(fake_api, project: Path) -> None:
    session = new_session(fake_api, project)
    chat(session, "hello", "hi there")
    before = len(fake_api.message_requests)
    result = commands.run(session, "/compact focus on the parser")
    assert result.ok and result.text.startswith("Nothing worth compacting: the conversation is ")
    assert len(fake_api.message_requests) == before and session.last_compaction is None


def test_with_compaction_off_the_context_limit_does_not_advise_compact(fake_api, project: Path) -> None:
    session = new_session(fake_api, project, DISABLE_COMPACT="1", CLAUDE_CODE_AUTO_COMPACT_WINDOW="50000")
    chat(session, "read everything", "done", tokens=49_000)
    finished = run_turn(session, "and more")
    assert finished.stop_reason == "context_limit", finished
    assert "/compact" not in finished.error and "/clear" in finished.error


def test_context_fits_80_columns_with_the_memory_files_under_their_row(fake_api, project: Path) -> None:
    (project / "CLAUDE.md").write_text("Be brief. " * 300)
    nested = project / "a" / "very" / "deeply" / "nested" / "folder" / "of" / "the" / "project"
    nested.mkdir(parents=True)
    session = new_session(fake_api, project)
    chat(session, "hello", "hi", tokens=5_000)
    out = screen(commands.run(session, "/context"))
    lines = out.splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines), out
    memory = next(i for i, line in enumerate(lines) if "Memory files:" in line)
    assert "└ CLAUDE.md: " in lines[memory + 1] and "Messages:" in lines[memory + 2]


def test_context_at_the_limit_shows_no_free_space_and_names_the_way_out(fake_api, project: Path) -> None:
    session = new_session(fake_api, project, DISABLE_COMPACT="1", CLAUDE_CODE_AUTO_COMPACT_WINDOW="50000")
    chat(session, "read everything", "done", tokens=49_000)
    usage = commands.run(session, "/context")
    free = next(c for c in usage.categories if c.key == "free")
    assert free.tokens == 0 and "Context limit reached" in usage.text
    assert re.search(r"Free space: 0 tokens", screen(usage))


def test_a_markdown_results_heading_breaks_between_words() -> None:
    """/summary's heading at 80 columns left its colon alone on the next line, cut by the terminal."""
    heading = "Summary from the last compaction (manual · server's summary · 14k → 5.4k tokens):"
    out = screen(commands.Result(f"{heading}\n\nThe user asked for a **long** reply.", markdown=True))
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    assert lines[:2] == [
        "Summary from the last compaction (manual · server's summary · 14k → 5.4k",
        "tokens):",
    ], out
