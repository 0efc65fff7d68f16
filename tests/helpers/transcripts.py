"""Transcripts on disk, read back: the sessions' files under a home, and a file's records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def transcripts(home: Path) -> list[Path]:
    return sorted((home / ".compact-agent" / "projects").glob("*/*.jsonl"))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
