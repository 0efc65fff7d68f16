"""The sessions of a project directory: newest first, with a first prompt and a message count, read cheaply.

Used by ``--continue`` (the newest), ``/resume`` (the list), "Resumed session … (N messages)" (the same
count) and ``/cost`` of a resumed session (the usage recorded before this process). Each file is read for at most its first
64 KB, so listing a directory of long sessions stays instant.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from core.messages import from_record
from core.transcript_writer import MESSAGE_TYPES, SIDE_USAGE


@dataclass(frozen=True)
class SessionInfo:
    path: Path
    session_id: str
    mtime: datetime
    first_prompt: str
    message_count: int  # exact for small files, estimated from the first 64 KB for big ones


def _transcripts(project_dir: Path) -> list[tuple[float, Path]]:
    found = []
    try:
        entries = list(os.scandir(project_dir))
    except OSError:
        return []
    for e in entries:
        if e.name.endswith(".jsonl") and e.is_file():
            st = e.stat()
            if st.st_size > 0:
                found.append((st.st_mtime, Path(e.path)))
    found.sort(key=lambda t: t[0], reverse=True)
    return found


def latest_session(project_dir: Path) -> Path | None:
    """The most recently modified non-empty ``*.jsonl`` directly in ``project_dir``."""
    found = _transcripts(Path(project_dir))
    return found[0][1] if found else None


_HEAD_BYTES = 64 * 1024
_COMMAND = re.compile(r"<command-name>(.*?)</command-name>(?:.*?<command-args>(.*?)</command-args>)?", re.S)
_WRAPPER = re.compile(r"<(ide_[a-z_]+|system-reminder|local-command-[a-z]+)>.*?</\1>", re.S)


def _prompt_text(rec: dict[str, Any]) -> str:
    m = from_record(rec)
    if m is None or not m.is_typed_prompt or rec.get("isSidechain"):
        return ""
    text = m.text
    if cmd := _COMMAND.search(text):
        text = f"{cmd.group(1)} {cmd.group(2) or ''}"
    text = _WRAPPER.sub("", text)
    if text.lstrip().startswith("<") or text.startswith("Caveat:"):
        return ""
    return " ".join(text.split())


def list_sessions(project_dir: Path) -> list[SessionInfo]:
    """The sessions in ``project_dir``, newest first; reads at most about 64 KB of each file."""
    out = []
    for mtime, path in _transcripts(Path(project_dir)):
        try:
            info = _session_info(path, mtime)
        except OSError:
            continue
        out.append(info)
    return out


def session_info(path: Path, size: int | None = None) -> SessionInfo:
    """One session's entry as /resume lists it (of the file's first ``size`` bytes when given).

    "Resumed session … (N messages)" takes N from here too, so the two counts agree.
    """
    return _session_info(path, path.stat().st_mtime, size)


SIDE_USAGE_NEEDLE = f'"type":"{SIDE_USAGE}"'.encode()


def earlier_usage(
    path: Path, size: int, subagents: list[tuple[str, str, dict[str, Any]]] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(model, usage) of each model response recorded in the first ``size`` bytes of a transcript, and
    of each ``side-usage`` record (summary and notes requests, replies cut short: agent.runtime.session;
    those of subagents also go to ``subagents`` as (agent id, model, usage)).

    A response Claude Code streamed as several records repeats its usage on each: counted once.
    """
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    with open(path, "rb") as f:
        data = f.read(size)
    for line in data.split(b"\n"):
        if b'"usage"' not in line or not (b'"type":"assistant"' in line or SIDE_USAGE_NEEDLE in line):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("type") == SIDE_USAGE and isinstance(rec.get("usage"), dict):
            found[str(rec.get("uuid") or len(found))] = (str(rec.get("model") or ""), rec["usage"])
            if rec.get("agentId") and subagents is not None:  # a Task's subagent: /cost's line of its own
                subagents.append((str(rec["agentId"]), str(rec.get("model") or ""), rec["usage"]))
            continue
        message = rec.get("message") if isinstance(rec, dict) and not rec.get("isSidechain") else None
        if isinstance(message, dict) and isinstance(message.get("usage"), dict):
            key = str(message.get("id") or rec.get("uuid") or len(found))
            found[key] = (str(message.get("model") or ""), message["usage"])
    return list(found.values())


def _session_info(path: Path, mtime: float, limit: int | None = None) -> SessionInfo:
    size = path.stat().st_size if limit is None else min(limit, path.stat().st_size)
    first = ""
    read = count = 0
    with open(path, "rb") as f:
        while read < min(_HEAD_BYTES, size):
            line = f.readline(min(4 * 1024 * 1024, size - read))
            if not line:
                break
            read += len(line)
            if b'"type":"user"' not in line and b'"type":"assistant"' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("type") in MESSAGE_TYPES and not rec.get("isSidechain"):
                count += 1
                first = first or _prompt_text(rec)
    if read < size and read:
        count = round(count * size / read)
    if len(first) > 80:
        first = first[:79] + "…"
    when = datetime.fromtimestamp(mtime, tz=timezone.utc)
    return SessionInfo(path, path.stem, when, first, count)
