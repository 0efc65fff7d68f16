"""Settings, built once at the CLI boundary and passed down; nothing below reads ``os.environ``.

Precedence, lowest to highest: defaults < $COMPACT_AGENT_HOME/settings.json < .claude/settings.json <
.claude/settings.local.json < environment (the process's, overlaid on the files' "env" maps) < command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "claude-sonnet-4-5"


class SettingsError(Exception):
    """A settings file or value is wrong; the message names the file and the key."""


@dataclass
class Settings:
    cwd: Path
    home: Path  # COMPACT_AGENT_HOME
    model: str = DEFAULT_MODEL
    model_explicit: bool = False  # chosen by flag/env/settings rather than the default
    permission_mode: str = "default"  # default | acceptEdits | bypassPermissions | plan
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    hooks: dict[str, Any] = field(default_factory=dict)
    # API access (never written anywhere)
    api_key: str | None = None
    auth_token: str | None = None
    base_url: str | None = None
    # compaction
    disable_compact: bool = False
    auto_compact: bool = True
    autocompact_pct: float | None = None  # CLAUDE_AUTOCOMPACT_PCT_OVERRIDE
    context_window: int | None = None  # CLAUDE_CODE_AUTO_COMPACT_WINDOW (a cap)
    blocking_limit: int | None = None  # CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE
    max_output_tokens: int | None = None  # CLAUDE_CODE_MAX_OUTPUT_TOKENS
    compaction_model: str | None = None
    session_memory: bool = True
    microcompact: bool = True
    microcompact_gap_minutes: float = 60.0
    microcompact_keep: int = 5
    context_collapse: bool = False
    # server-side context editing (SPEC §4): None = off, else the parameters
    context_editing: dict[str, Any] | None = None
    no_color: bool = False
    # where each value came from, for /config-like displays and error messages
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def project_key(self) -> str:
        return "".join(c if c.isalnum() else "-" for c in str(self.cwd))

    @property
    def project_dir(self) -> Path:
        """P in CONTRACT §4: where this directory's sessions live."""
        return self.home / "projects" / self.project_key
