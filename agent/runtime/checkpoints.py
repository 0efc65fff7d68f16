"""The files the agent changed, kept so ``/rewind`` can put the code back, and counted for ``/cost``.

Before a tool that writes a file (its declaration says so: Edit, Write, ...) runs, the file's bytes (or
that it did not exist) are kept once per prompt, in the session's folder (``checkpoints/``, 0600), with a
line in ``checkpoints/index.jsonl`` naming the prompt, the path and the lines the change added and removed.
The folder outlives the process, so a resumed session can still go back and still counts its changes.
``restore`` puts each file back as it was before the earliest of the given prompts changed it (a file the
agent created is removed). Files over ``CAP`` bytes are neither kept nor counted.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.declaration import declaration_of
from core.private import make_private_dirs, open_private, write_private

CAP = 5 * 1024 * 1024  # bytes of a file kept for a rewind


@dataclass
class Before:
    path: Path
    data: bytes | None  # None: the file did not exist


def before(name: str, args: dict[str, Any]) -> Before | None:
    """The file a writing call is about to change, as it is now (None: not a writing call, or too big)."""
    decl = declaration_of(name)
    key = decl.path_arg if decl is not None and decl.writes_files else None
    raw = args.get(key) if key else None
    if not isinstance(raw, str) or not raw:
        return None
    path = Path(raw)
    try:
        if path.is_file():
            if path.stat().st_size > CAP:
                return None
            return Before(path, path.read_bytes())
        return Before(path, None) if not path.exists() else None
    except OSError:
        return None


def after(folder: Path, prompt: str, was: Before) -> tuple[int, int]:
    """Keep ``was`` for a rewind (first change of the file under ``prompt`` only) and count the change:
    (lines added, lines removed)."""
    try:
        now = was.path.read_bytes() if was.path.is_file() else None
    except OSError:
        now = None
    if now == was.data:
        return 0, 0
    added, removed = _counted(was.data, now)
    index = folder / "index.jsonl"
    entries = _entries(folder)
    backup: str | None = None
    first = not any(e.get("prompt") == prompt and e.get("path") == str(was.path) for e in entries)
    make_private_dirs(folder)
    if first and was.data is not None:
        backup = f"{len(entries):05d}.bak"
        fd = open_private(folder / backup, os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, "wb") as f:
            f.write(was.data)
    entry = {
        "prompt": prompt,
        "path": str(was.path),
        "first": first,
        "backup": backup,
        "added": added,
        "removed": removed,
    }
    if not index.exists():
        write_private(index, "")
    with open(index, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
    return added, removed


def totals(folder: Path) -> tuple[int, int]:
    """Lines added and removed by the agent's file changes in this session, resumes included."""
    entries = _entries(folder)
    return sum(int(e.get("added") or 0) for e in entries), sum(int(e.get("removed") or 0) for e in entries)


def changed_since(folder: Path, prompts: list[str]) -> list[Path]:
    """The files changed under any of ``prompts``."""
    wanted = set(prompts)
    return list(dict.fromkeys(Path(e["path"]) for e in _entries(folder) if e.get("prompt") in wanted))


def restore(folder: Path, prompts: list[str]) -> list[Path]:
    """Put back each file changed under ``prompts`` as it was before the first of those changes; the
    paths restored."""
    wanted = set(prompts)
    earliest: dict[str, dict[str, Any]] = {}
    for entry in _entries(folder):
        if entry.get("prompt") in wanted and entry.get("first") and entry["path"] not in earliest:
            earliest[entry["path"]] = entry
    done: list[Path] = []
    for raw, entry in earliest.items():
        path = Path(raw)
        try:
            if entry.get("backup") is None:
                path.unlink(missing_ok=True)
            else:
                data = (folder / entry["backup"]).read_bytes()
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
        except OSError:
            continue
        done.append(path)
    return done


def _entries(folder: Path) -> list[dict[str, Any]]:
    try:
        lines = (folder / "index.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            out.append(entry)
    return out


def _counted(old: bytes | None, new: bytes | None) -> tuple[int, int]:
    a = (old or b"").decode("utf-8", "replace").splitlines()
    b = (new or b"").decode("utf-8", "replace").splitlines()
    added = removed = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op in ("replace", "delete"):
            removed += i2 - i1
        if op in ("replace", "insert"):
            added += j2 - j1
    return added, removed
