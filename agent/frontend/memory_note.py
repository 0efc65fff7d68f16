"""``# note`` in the REPL: the user adds a line to a memory file (CLAUDE.md), read with every request.

Two places, as in Claude Code: the project's ``CLAUDE.md`` (shared with the repository) and the user's
``~/.claude/CLAUDE.md`` (every project). The note is appended as a Markdown list item; a file created
here is private to the user (0600, like every file the agent creates).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.config.settings import Settings

CHOICES = ("project", "user")


def note_of(line: str) -> str:
    """The note in a "# ..." line ("" when there is none)."""
    return line.strip()[1:].strip() if line.strip().startswith("#") else ""


def targets(settings: Settings) -> dict[str, Path]:
    user_home = settings.user_home or Path.home()
    return {"project": Path(settings.cwd) / "CLAUDE.md", "user": Path(user_home) / ".claude" / "CLAUDE.md"}


def add(path: Path, note: str) -> None:
    """Append ``- note`` to ``path``, on a line of its own."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_APPEND | os.O_RDWR, 0o600)
    try:
        size = os.fstat(fd).st_size
        ends_open = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        os.write(fd, (("\n" if ends_open else "") + f"- {' '.join(note.split())}\n").encode())
    finally:
        os.close(fd)
