"""The system prompt: who the agent is, its environment, and the project's CLAUDE.md files.

CLAUDE.md files are read from disk for every request, so an edit — or a compaction — never loses them.
"""

from __future__ import annotations

import platform
from datetime import date
from pathlib import Path

INTRO = """You are Compact Agent, a coding assistant working in the user's terminal. You help with software \
engineering work: reading and changing code, running commands, finding bugs, explaining systems.

How to work:
- Use the tools to look before you act: read files before changing them, search instead of guessing.
- Keep answers short and concrete; the user reads them in a terminal. Use Markdown sparingly.
- Prefer small, correct edits with Edit over rewriting whole files. Never invent file contents.
- Run tests or commands when that is the way to know something works, and report what happened honestly.
- Ask before doing anything destructive or irreversible that the user did not request.
- Tool results may be shortened to save context: a <persisted-output> block names a file holding the full \
output (read it with Read and offset/limit), and "[Old tool result content cleared]" means an old result \
was dropped — run the tool again if you need it.
- Every message the user typed ends with an [id:…] tag. When earlier turns are no longer useful (a finished \
side task, a large exploration), you may remove them from your context with the Snip tool and those ids."""


def memory_files(cwd: Path, home: Path) -> list[Path]:
    """The CLAUDE.md files that exist, user-level first."""
    candidates = [home / "CLAUDE.md", cwd / "CLAUDE.md", cwd / ".claude" / "CLAUDE.md"]
    return [p for p in candidates if p.is_file()]


def read_memory(cwd: Path, home: Path) -> list[tuple[Path, str]]:
    out = []
    for path in memory_files(cwd, home):
        try:
            out.append((path, path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return out


def environment_text(cwd: Path, model: str, today: date | None = None) -> str:
    is_git = any((p / ".git").exists() for p in [cwd, *cwd.parents])
    return "\n".join(
        [
            "<env>",
            f"Working directory: {cwd}",
            f"Is directory a git repo: {'Yes' if is_git else 'No'}",
            f"Platform: {platform.system().lower()}",
            f"Today's date: {(today or date.today()).isoformat()}",
            f"Model: {model}",
            "</env>",
        ]
    )


def build_system(cwd: Path, home: Path, model: str, today: date | None = None) -> list[dict]:
    """System blocks: the stable intro + environment, then the project instructions (if any)."""
    blocks = [{"type": "text", "text": INTRO + "\n\n" + environment_text(cwd, model, today)}]
    memory = read_memory(cwd, home)
    if memory:
        parts = ["Instructions from the user's CLAUDE.md files. Follow them; they override defaults."]
        parts += [f"Contents of {path}:\n\n{text.strip()}" for path, text in memory]
        blocks.append({"type": "text", "text": "\n\n".join(parts)})
    return blocks


def compact_instructions(cwd: Path, home: Path) -> str:
    """The body of a "Compact Instructions" section in CLAUDE.md, if any (appended to summary instructions)."""
    for _, text in read_memory(cwd, home):
        lines = text.splitlines()
        for i, line in enumerate(lines):
            stripped = line.strip()
            if stripped.startswith("#") and stripped.lstrip("#").strip().lower() == "compact instructions":
                level = len(stripped) - len(stripped.lstrip("#"))
                body = []
                for nxt in lines[i + 1 :]:
                    s = nxt.strip()
                    if s.startswith("#") and len(s) - len(s.lstrip("#")) <= level:
                        break
                    body.append(nxt)
                return "\n".join(body).strip()
    return ""
