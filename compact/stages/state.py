"""The sticky decisions the stages take (``ContextState``, which the stages update as they decide), the
transcript records that carry them (built only here) and their replay on resume (``replay``).

The live message list always holds the messages as they happened; what the model sees is derived by
``compact.stages.view.build_view`` from that list plus this state. Each decision is made once, appended to
the transcript as its own record, and replayed on resume, so a resumed session sends the very same
bytes.

Transcript record types (one JSON line each; the writer adds "uuid", "timestamp", "sessionId"):
  {"type": "content-replacement", "replacements": [{"toolUseId": str, "content": str}]}
  {"type": "snip", "removedUuids": [str, ...], "reason": str}
  {"type": "microcompact", "clearedToolUseIds": [str, ...]}
  {"type": "session-memory", "lastSummarizedUuid": str}
  {"type": "collapse-commit", "collapsedUuids": [str, ...], "summary": str, "placeholderUuid": str,
   "workingState": str (optional)}
  {"type": "context-edit", "applied": [...]}          (server-side context editing report; not replayed)
  {"type": "thinking-drop", "droppedThinkingUuids": [str, ...], "where": "edit" | "compaction"}
                                                      (thinking an edit invalidated: left out from then on)
  {"type": "server-clearing", "throughToolUseId": str} (the automatic server-side clearing's point:
                                                      compact.context.context_editing)
  {"type": "refused-block", "uuid": str, "kind": str, "block": str, ...}
                                                      (a block the API refused, left out: written and
                                                      applied to the loaded messages by compact.stages.refused)
  {"type": "server-price", "price": {"uncached": f, "written": f, "read": f, "output": f}}
                                                      (what the server's summary was seen to cost:
                                                      compact.compaction.economics.observe; the newest
                                                      in the file stands)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from core.messages import Message

STATE_TYPES = (
    "content-replacement",
    "snip",
    "microcompact",
    "session-memory",
    "collapse-commit",
    "context-edit",
    "thinking-drop",
    "server-clearing",
    "refused-block",
    "server-price",
)
PRICE_KEYS = ("uncached", "written", "read", "output")
COLLAPSE_KEYS = ("collapsedUuids", "summary", "placeholderUuid")
COLLAPSE_STATE = (
    "workingState"  # optional: the span's working state as text (compact.compaction.ledger.span_text)
)


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
    # uuids of responses whose thinking an edit invalidated: left out of every request (compact.stages.binding)
    thinking_dropped: set[str] = field(default_factory=set)
    # the tool use through which the server clears old results (compact.context.context_editing's automatic
    # clearing): a resumed session asks for the same clearing, or it would send more than the window
    server_clear_through: str | None = None
    # what the server's summary was seen to cost in this conversation (compact.compaction.economics.observe);
    # None until the first one answered: cost-aware compaction prices it by its prior until then. A
    # resumed session prices compaction as the live one did
    server_price: dict[str, float] | None = None
    # what the last notes update was seen to cost beyond its cached read (economics.observe_notes); None
    # until one answered (the prior then). Not recorded: a resumed session learns it at its first update
    notes_price: dict[str, float] | None = None

    def reset_after_compaction(self, tokens: int) -> None:
        """A compaction replaces the history; decisions about dropped messages no longer matter."""
        self.tokens_at_last_nudge = tokens
        self.collapses = []
        self.freed_since_usage = {}


# --- writing -----------------------------------------------------------------------------------------


def replacement_record(replacements: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "content-replacement",
        "replacements": [{"toolUseId": k, "content": v} for k, v in replacements.items()],
    }


def snip_record(uuids: Iterable[str], reason: str) -> dict[str, Any]:
    return {"type": "snip", "removedUuids": list(uuids), "reason": reason}


def microcompact_record(tool_use_ids: Iterable[str]) -> dict[str, Any]:
    return {"type": "microcompact", "clearedToolUseIds": list(tool_use_ids)}


def notes_record(last_summarized_uuid: str) -> dict[str, Any]:
    return {"type": "session-memory", "lastSummarizedUuid": last_summarized_uuid}


def collapse_record(commit: dict[str, Any]) -> dict[str, Any]:
    rec = {"type": "collapse-commit", **{k: commit[k] for k in COLLAPSE_KEYS}}
    if commit.get(COLLAPSE_STATE):
        rec[COLLAPSE_STATE] = commit[COLLAPSE_STATE]
    return rec


def context_edit_record(applied: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "context-edit", "applied": applied}


def thinking_record(uuids: Iterable[str], where: str) -> dict[str, Any]:
    return {"type": "thinking-drop", "droppedThinkingUuids": list(uuids), "where": where}


def clearing_record(through: str) -> dict[str, Any]:
    return {"type": "server-clearing", "throughToolUseId": through}


def price_record(price: dict[str, float]) -> dict[str, Any]:
    return {"type": "server-price", "price": {k: float(price[k]) for k in PRICE_KEYS}}


def price_of(rec: dict[str, Any] | None) -> dict[str, float] | None:
    """The price a server-price record holds (None when it holds none that is whole)."""
    price = rec.get("price") if isinstance(rec, dict) else None
    if not isinstance(price, dict):
        return None
    try:
        return {k: float(price[k]) for k in PRICE_KEYS}
    except (KeyError, TypeError, ValueError):
        return None


def state_records(state: ContextState) -> list[dict[str, Any]]:
    """The records that replay ``state`` (for a session seeded from another file)."""
    recs: list[dict[str, Any]] = []
    if state.replacements:
        recs.append(replacement_record(state.replacements))
    if state.snipped:
        recs.append(snip_record(sorted(state.snipped), "imported"))
    if state.cleared:
        recs.append(microcompact_record(sorted(state.cleared)))
    recs += [collapse_record(c) for c in state.collapses]
    if state.thinking_dropped:
        recs.append(thinking_record(sorted(state.thinking_dropped), "edit"))
    if state.last_summarized_uuid:
        recs.append(notes_record(state.last_summarized_uuid))
    if state.server_clear_through:
        recs.append(clearing_record(state.server_clear_through))
    if state.server_price:
        recs.append(price_record(state.server_price))
    return recs


# --- replaying ---------------------------------------------------------------------------------------


def replay(
    records: Iterable[dict[str, Any]],
    live: list[Message],
    *,
    collapses_from: int = 0,
    last_summarized: str | None = None,
    server_price: dict[str, float] | None = None,
) -> ContextState:
    """The state the records describe, for the live list a resume rebuilt.

    Only decisions about messages still live are kept. ``records`` are in file order; the collapse
    commits among the first ``collapses_from`` of them predate the last compaction, which reset them.
    The notes marker is the newest anywhere in the file (``last_summarized``), not only among these, and
    so is the server summary's price (``server_price``; else the newest among these).
    """
    live_uuids = {m.uuid for m in live}
    tool_ids = {b.get("id") for m in live for b in m.content if b.get("type") == "tool_use"}
    state = ContextState()
    for i, rec in enumerate(records):
        kind = rec.get("type")
        if kind == "content-replacement":
            for rep in rec.get("replacements") or []:
                if isinstance(rep, dict) and rep.get("toolUseId") in tool_ids:
                    state.replacements[rep["toolUseId"]] = rep.get("content", "")
        elif kind == "snip":
            state.snipped |= set(rec.get("removedUuids") or []) & live_uuids
        elif kind == "microcompact":
            state.cleared |= set(rec.get("clearedToolUseIds") or []) & tool_ids
        elif kind == "server-clearing":
            if rec.get("throughToolUseId") in tool_ids:  # the newest one stands
                state.server_clear_through = rec["throughToolUseId"]
        elif kind == "server-price":
            state.server_price = price_of(rec) or state.server_price
        elif kind == "thinking-drop":
            state.thinking_dropped |= set(rec.get("droppedThinkingUuids") or []) & live_uuids
        elif kind == "collapse-commit" and i >= collapses_from:
            if set(rec.get("collapsedUuids") or []) & live_uuids:
                commit = {k: rec.get(k) for k in COLLAPSE_KEYS}
                if rec.get(COLLAPSE_STATE):
                    commit[COLLAPSE_STATE] = rec[COLLAPSE_STATE]
                state.collapses.append(commit)
    state.last_summarized_uuid = last_summarized
    if server_price is not None:
        state.server_price = server_price
    return state
