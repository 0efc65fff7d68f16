"""The compaction settings, declared once: ``CompactConfig``'s fields and defaults.

agent.config.settings parses the settings files, the environment and the command line into one of these
(``Settings.compaction``); agent.runtime.wiring hands it to compaction as ``Ports.config``. Which settings key and
environment variable feeds each field is said beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CompactConfig:
    """The settings compaction reads (frozen: a conversation keeps the ones it started with)."""

    disable_compact: bool = False  # DISABLE_COMPACT / disableCompact
    auto_compact: bool = True  # autoCompactEnabled; DISABLE_AUTO_COMPACT turns it off
    autocompact_pct: float | None = None  # CLAUDE_AUTOCOMPACT_PCT_OVERRIDE / compaction.autoCompactPct
    context_window: int | None = None  # CLAUDE_CODE_AUTO_COMPACT_WINDOW / compaction.contextWindow (a cap)
    blocking_limit: int | None = None  # CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE / compaction.blockingLimit
    max_output_tokens: int | None = None  # CLAUDE_CODE_MAX_OUTPUT_TOKENS / compaction.maxOutputTokens
    compaction_model: str | None = None  # compaction.model
    session_memory: bool = True  # COMPACT_AGENT_SESSION_MEMORY / sessionMemory
    prepare_compaction: bool = True  # COMPACT_AGENT_PREPARE_COMPACTION: candidates prepared before T
    microcompact: bool = True  # COMPACT_AGENT_MICROCOMPACT / microcompact(.enabled)
    gap_minutes: float = 60.0  # microcompact.gapMinutes
    keep_recent: int = 5  # microcompact.keepRecent
    context_collapse: bool = False  # CLAUDE_CONTEXT_COLLAPSE / contextCollapse
    # server-side context editing (SPEC §4): None = off, else the contextEditing setting's parameters,
    # camelCase keys keepToolUses, triggerTokens, clearAtLeastTokens (int | None) and clearThinking
    context_editing: dict[str, Any] | None = None
    notes_template: Path | None = None  # a user's notes template, if they keep one

    @property
    def auto_enabled(self) -> bool:
        """Automatic compaction: on unless switched off, and off while context collapse manages the room."""
        return self.auto_compact and not self.disable_compact and not self.context_collapse

    @property
    def notes_enabled(self) -> bool:
        return self.session_memory and not self.disable_compact
