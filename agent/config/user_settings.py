"""/config's changes: the settings a user may change from the REPL, as Claude Code's /config lets them,
written to the user's own settings file (``$COMPACT_AGENT_HOME/settings.json``, 0600, replaced whole).

Each changeable setting is one of the settings rows (agent.config.settings.TABLE): its key, its default
and its doc come from there, and a value typed is checked by the row's own kind, so a value /config
writes is one the next start reads without a warning. ``CHANGEABLE`` lists which keys, and what a typed
answer may be.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.config.settings import TABLE, Settings
from core.models import EFFORT_NAMES
from core.private import replace_private
from core.setting import FALSE_WORDS, TRUE_WORDS, Bad, Row


@dataclass(frozen=True)
class Changeable:
    key: str
    choices: tuple[str, ...]  # what may be typed ("" in it: any text, as for the model)
    live: bool = True  # applies to this session at once (else from the next start)


ON_OFF = ("on", "off")
CHANGEABLE = (
    Changeable("model", ("",)),
    Changeable("autoCompactEnabled", ON_OFF),
    Changeable("alwaysThinkingEnabled", ON_OFF),
    Changeable("effortLevel", EFFORT_NAMES),
    Changeable("permissions.defaultMode", ("default", "acceptEdits", "plan")),
    Changeable("noColor", ON_OFF, live=False),
    Changeable("autoMemoryEnabled", ON_OFF, live=False),
)


def row_of(key: str) -> Row:
    return next(r for r in TABLE if r.key == key)


def find(name: str) -> Changeable | None:
    """A changeable setting by its key (any case) or its number in ``CHANGEABLE`` (from 1)."""
    name = name.strip()
    if name.isdigit():
        return CHANGEABLE[int(name) - 1] if 1 <= int(name) <= len(CHANGEABLE) else None
    return next((c for c in CHANGEABLE if c.key.lower() == name.lower()), None)


def current(s: Settings, key: str) -> Any:
    row = row_of(key)
    return getattr(getattr(s, row.owner) if row.owner else s, row.name)


def shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "auto" if value is None else str(value)


def parse(item: Changeable, typed: str) -> Any:
    """The value to write for what was typed; ValueError says what is expected."""
    text = typed.strip()
    row = row_of(item.key)
    if item.choices == ON_OFF:
        if text.lower() in TRUE_WORDS:
            return True
        if text.lower() in FALSE_WORDS and text:
            return False
        raise ValueError("on or off")
    if item.choices != ("",) and text not in item.choices:
        raise ValueError("one of " + ", ".join(item.choices))
    if not text:
        raise ValueError(row.kind.expected)
    try:
        return row.kind.check(text)
    except Bad as e:
        raise ValueError(str(e) or row.kind.expected) from e


def settings_file(s: Settings) -> Path:
    return Path(s.home) / "settings.json"


def write(s: Settings, key: str, value: Any) -> Path:
    """``key`` set to ``value`` in the user's settings file, the rest of it kept; the file stays 0600.
    A file that is not a JSON object is not overwritten (OSError says so)."""
    path = settings_file(s)
    data: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8") or "{}")
        except ValueError as e:
            raise OSError(f"{path} is not valid JSON ({e}); fix it by hand first") from e
        if not isinstance(loaded, dict):
            raise OSError(f"{path} is not a JSON object; fix it by hand first")
        data = loaded
    *parents, last = key.split(".")
    holder = data
    for part in parents:
        if not isinstance(holder.get(part), dict):
            holder[part] = {}
        holder = holder[part]
    if key == "effortLevel" and value == "auto":
        holder.pop(last, None)  # auto: the model's own default, what no value means
    else:
        holder[last] = value
    replace_private(path, json.dumps(data, indent=2) + "\n")
    return path


def overridden(s: Settings, key: str) -> str | None:
    """Where the value in effect comes from when a source above the user's file decides it (the
    project's files, the environment, a flag): a value written there would not apply. None when the
    user's file (or nothing above it) decides."""
    source = s.report.sources.get(row_of(key).name, "")
    mine = {str(settings_file(s))}
    if s.user_home is not None:
        mine.add(str(Path(s.user_home) / ".claude" / "settings.json"))  # below ours: ours wins over it
    return source if source and source not in mine and not source.startswith("default") else None
