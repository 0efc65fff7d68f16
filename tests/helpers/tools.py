"""A tool context on a temporary directory, for running the tools directly."""

from __future__ import annotations

from pathlib import Path

from tools.base import ToolContext


def make_ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(project_dir=tmp_path, session_dir=tmp_path / ".session", cwd=tmp_path)
