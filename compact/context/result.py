"""What a compaction method hands back before the common finishing steps (compact.compaction.compactor.finish).

Both methods — the full LLM summary (compact.compaction.summary) and the session-memory notes
(compact.session_memory) — produce a ``Compaction``; the compactor then writes the boundary and the
summary record, restores files, runs the hooks, swaps the live list and applies the post-compaction guard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.messages import Message


@dataclass
class Compaction:
    method: str  # "summary" | "session-memory" | "server-summary"
    summary: str  # the summary body (no <analysis>), as it will appear in the summary message
    kept: list[Message] = field(default_factory=list)  # messages kept verbatim, in order
    # {"headUuid", "anchorUuid", "tailUuid"} when messages are kept (anchor = the summary message)
    preserved_segment: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None  # usage of the summary request, if one was made
    # the server's summary (compact.compaction.server_summary): the message holding its compaction block, sent
    # first in place of the messages it summarized (their uuids), instead of a summary user message
    stand_in: Message | None = None
    summarized: list[str] = field(default_factory=list)
    # the last message the summary or notes saw (a candidate prepared ahead, the notes' marker); None:
    # every message it replaces and keeps (a summary made now). What comes after it was not seen: its
    # tool results are never cleared at this compaction
    seen_through: str | None = None
