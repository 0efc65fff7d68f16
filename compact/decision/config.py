"""The compaction settings, declared once: each ``CompactConfig`` field is one row (core.setting) with its
default, settings-file key, environment variable, kind and doc.

agent.config.settings parses the settings files, the environment and the command line into one of these
(``Settings.compaction``) from those rows; agent.runtime.wiring hands it to compaction as ``Ports.config``.
A new setting of compaction is one more field here (docs/settings.md's table is regenerated from it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.setting import (
    BOOL,
    NONNEGATIVE_INT,
    POSITIVE_INT,
    TEXT,
    Bad,
    Kind,
    number,
    setting,
    update_value,
    when_set,
)


def _context_editing(value: Any) -> dict[str, Any]:
    """contextEditing: true/false, or an object of the server-side clearing's parameters (docs/compaction.md)."""
    if isinstance(value, bool):
        return {"enabled": value}
    if not isinstance(value, dict):
        raise Bad("true, false or an object", value)
    kinds = {
        "enabled": BOOL,
        "clearThinking": BOOL,
        "keepToolUses": NONNEGATIVE_INT,
        "clearAtLeastTokens": NONNEGATIVE_INT,
        "triggerTokens": POSITIVE_INT,
    }
    out: dict[str, Any] = {}
    for name, kind in kinds.items():
        if name in value:
            try:
                out[name] = kind.check(value[name])
            except Bad as bad:
                raise Bad(bad.expected, bad.value, f".{name}") from None
    return out


def _editing_params(merged: dict[str, Any]) -> dict[str, Any] | None:
    """An object turns context editing on unless it says "enabled": false; None is off."""
    if not merged.get("enabled", bool(merged)):
        return None
    names = ("triggerTokens", "keepToolUses", "clearAtLeastTokens", "clearThinking")
    return {name: merged.get(name) for name in names}  # clearThinking None: on when thinking


@dataclass(frozen=True)
class CompactConfig:
    """The settings compaction reads (frozen: a conversation keeps the ones it started with)."""

    disable_compact: bool = setting(
        False,
        key="disableCompact",
        env="DISABLE_COMPACT",
        kind=when_set(True),
        doc="no compaction at all; /compact says it is disabled",
    )
    auto_compact: bool = setting(
        True,
        key="autoCompactEnabled",
        env="DISABLE_AUTO_COMPACT",
        kind=when_set(False),
        doc="automatic compaction (DISABLE_AUTO_COMPACT=1 turns it off); /compact and prompt-too-long recovery still work",
    )
    autocompact_pct: float | None = setting(
        None,
        key="compaction.autoCompactPct",
        env="CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
        kind=number("a number in (0, 100]", lambda v: 0 < v <= 100),
        doc="auto-compact at this % of the effective window (only lowers the threshold)",
    )
    context_window: int | None = setting(
        None,
        key="compaction.contextWindow",
        env="CLAUDE_CODE_AUTO_COMPACT_WINDOW",
        kind=POSITIVE_INT,
        doc="cap the context window used for all threshold math (at least 43,000; smaller is refused at start)",
    )
    blocking_limit: int | None = setting(
        None,
        key="compaction.blockingLimit",
        env="CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE",
        kind=POSITIVE_INT,
        doc="replace the blocking limit",
    )
    max_output_tokens: int | None = setting(
        None,
        key="compaction.maxOutputTokens",
        env="CLAUDE_CODE_MAX_OUTPUT_TOKENS",
        kind=POSITIVE_INT,
        doc="max output tokens of main-loop requests",
    )
    compaction_model: str | None = setting(
        None,
        key="compaction.model",
        kind=TEXT,
        doc="model for summaries and notes (default: the session's model, sharing its prompt cache)",
    )
    session_memory: bool = setting(
        True,
        key="sessionMemory",
        env="COMPACT_AGENT_SESSION_MEMORY",
        kind=BOOL,
        doc="background notes and notes-based compaction",
    )
    prepare_compaction: bool = setting(
        True,
        key="prepareCompaction",
        env="COMPACT_AGENT_PREPARE_COMPACTION",
        kind=BOOL,
        doc="prepare automatic compactions in the background before the threshold (off: the foreground compaction at it)",
    )
    server_compaction: bool = setting(
        True,
        key="serverSummary",
        env="COMPACT_AGENT_SERVER_COMPACTION",
        kind=BOOL,
        doc="the server's on-demand summary where kept turns hold thinking (off: always a local compaction, "
        "the kept turns' thinking left out)",
    )
    cost_aware: bool = setting(
        True,
        key="costAwareCompaction",
        env="COMPACT_AGENT_COST_AWARE",
        kind=BOOL,
        doc="compact as soon as a reset pays for itself by the prompt cache's arithmetic (from 15% of the "
        "threshold), and restore only files that pay (off: compact at the threshold, restore recent files)",
    )
    microcompact: bool = setting(
        True,
        key="microcompact.enabled",
        env="COMPACT_AGENT_MICROCOMPACT",
        kind=BOOL,
        shorthand=True,
        doc="time-based clearing of old tool results once the prompt cache has gone cold",
    )
    gap_minutes: float = setting(
        60.0,
        key="microcompact.gapMinutes",
        kind=number("a positive number of minutes", lambda v: v > 0),
        doc="minutes without a request after which the cache counts as cold",
    )
    keep_recent: int = setting(
        5,
        key="microcompact.keepRecent",
        kind=NONNEGATIVE_INT,
        doc="the most recent tool results microcompact keeps",
    )
    context_collapse: bool = setting(
        False,
        key="contextCollapse",
        env="CLAUDE_CONTEXT_COLLAPSE",
        kind=BOOL,
        doc="context collapse: old spans summarized in the background (opt-in)",
    )
    # server-side context editing (docs/compaction.md): None = off, else the contextEditing setting's parameters,
    # camelCase keys keepToolUses, triggerTokens, clearAtLeastTokens (int | None) and clearThinking
    context_editing: dict[str, Any] | None = setting(
        None,
        key="contextEditing",
        kind=Kind("true, false or an object", _context_editing),
        merge=update_value,
        finish=_editing_params,
        shown_default="false",
        doc="server-side context editing, the cache-warm path: true or "
        "{keepToolUses, triggerTokens, clearAtLeastTokens, clearThinking}",
    )
    notes_template: Path | None = None  # a user's notes template, if they keep one (agent.runtime.wiring)

    @property
    def auto_enabled(self) -> bool:
        """Automatic compaction: on unless switched off, and off while context collapse manages the room."""
        return self.auto_compact and not self.disable_compact and not self.context_collapse

    @property
    def notes_enabled(self) -> bool:
        return self.session_memory and not self.disable_compact
