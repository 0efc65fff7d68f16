"""Transcripts on disk, read back: the sessions' files under a home, and a file's records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def transcripts(home: Path) -> list[Path]:
    return sorted((home / ".compact-agent" / "projects").glob("*/*.jsonl"))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def the_transcript(home: Path) -> Path | None:
    found = transcripts(home)
    return found[0] if found else None


def has_tool_use(path: Path | None) -> bool:
    return path is not None and '"type":"tool_use"' in path.read_text()


def session_records(home: Path) -> list[dict]:
    [path] = sorted((home / ".compact-agent" / "projects").glob("*/*.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
