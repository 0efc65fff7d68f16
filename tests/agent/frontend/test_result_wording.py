"""How a tool's result reads on screen: singular for one, paths under the project shown relative, a
markdown result's heading broken between words at 80 columns."""

from __future__ import annotations

from pathlib import Path

from agent.frontend import commands
from core.events import ToolFinished, ToolStarted
from tests.helpers.frontend import screen
from tools.base import ToolContext
from tools.grep import GrepTool
from tools.read import ReadTool


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
