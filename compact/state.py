"""The sticky decisions the cheap stages take, kept per session and replayed from the transcript.

The live message list always holds the messages as they happened; what the model sees is derived by
``compact.pipeline.prepare`` from that list plus this state. Each decision is made once, recorded in the
transcript as its own record (types below), and replayed on resume, so a resumed session sends the very
same bytes.

Transcript record types (one JSON line each, plus "uuid", "timestamp", "sessionId"):
  {"type": "content-replacement", "replacements": [{"toolUseId": str, "content": str}]}
  {"type": "snip", "removedUuids": [str, ...], "reason": str}
  {"type": "microcompact", "clearedToolUseIds": [str, ...]}
  {"type": "session-memory", "lastSummarizedUuid": str}
  {"type": "collapse-commit", "collapsedUuids": [str, ...], "summary": str, "placeholderUuid": str}
  {"type": "context-edit", "applied": [...]}          (server-side context editing report)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ContextState:
    # tool_use_id -> the exact replacement text sent instead of the result
    replacements: dict[str, str] = field(default_factory=dict)
    # tool_use_ids whose results the budget looked at and kept inline (never revisited)
    inline: set[str] = field(default_factory=set)
    # uuids of messages removed by Snip
    snipped: set[str] = field(default_factory=set)
    # tool_use_ids whose results microcompact cleared
    cleared: set[str] = field(default_factory=set)
    # session memory: the last message the notes cover
    last_summarized_uuid: str | None = None
    # context collapse commits: list of {"collapsedUuids", "summary", "placeholderUuid"}
    collapses: list[dict[str, Any]] = field(default_factory=list)
    # token count when the last snip / nudge / compaction happened (for the snip nudge)
    tokens_at_last_nudge: int = 0
    # uuid of a response -> tokens snipped after its usage was measured (that usage counts them still)
    freed_since_usage: dict[str, int] = field(default_factory=dict)

    def reset_after_compaction(self, tokens: int) -> None:
        """A compaction replaces the history; decisions about dropped messages no longer matter."""
        self.tokens_at_last_nudge = tokens
        self.collapses = []
        self.freed_since_usage = {}
