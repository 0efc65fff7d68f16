"""Which messages the session notes cover: the one check before anything leaves the context (docs/compaction.md).

The notes stand only for what a completed notes update saw. That is tracked by message identity: the
state's "summarized up to here" uuid (``ContextState.last_summarized_uuid``) names the last live message
an update covered; every message up to it is covered, nothing after it is. A marker that is not in the
live list (a resumed session whose marker was compacted away, notes from elsewhere, no update yet)
covers nothing: it is never read as "everything before the kept tail".

At each compaction the covered point moves to the new list (``covered_after``): on the notes path the
summary message *is* the notes, so it is covered, and so are the kept messages up to the old marker
(and the compaction's own attachments, rebuilt at every compaction, when the whole tail was covered).
On the summary path nothing of the new list is covered: the LLM summary holds what the notes never
saw until an update reads it.

    live list   [m0 m1 … marker | u1 u2 …]      covered_count = index(marker) + 1
    may drop    only [0, start) with start ≤ covered_count (``uncovered_before``  == [])
"""

from __future__ import annotations

from core.messages import Message


def covered_count(messages: list[Message], marker: str | None) -> int:
    """How many leading messages of ``messages`` the notes cover: through the marker; 0 without one."""
    if not marker:
        return 0
    return next((i + 1 for i, m in enumerate(messages) if m.uuid == marker), 0)


def uncovered_before(messages: list[Message], start: int, marker: str | None) -> list[Message]:
    """The messages before ``start`` that no completed notes update saw: dropping them would lose them.

    A compaction (or a prepared candidate) that keeps ``messages[start:]`` and puts the notes in place
    of the rest is allowed only when this is empty."""
    return messages[covered_count(messages, marker) : max(0, start)]


def covered_after(
    summary: Message, kept: list[Message], added: list[Message], marker: str | None, notes_path: bool
) -> str | None:
    """The "summarized up to here" uuid for the list a compaction leaves: ``[summary, *kept, *added]``.

    Summary path: None (the LLM summary is news to the notes). Notes path: the old marker if it is
    still among the kept messages; the last attachment when the marker was the last kept message (the
    attachments are rebuilt from the tool calls and the disk at every compaction); else the summary
    message, which is the notes themselves.
    """
    if not notes_path:
        return None
    if not kept:  # everything was dropped, so everything was covered
        return (added[-1] if added else summary).uuid
    position = covered_count(kept, marker)
    if position == len(kept):
        return (added[-1] if added else kept[-1]).uuid
    return kept[position - 1].uuid if position else summary.uuid


def unseen_results(messages: list[Message], seen: int) -> frozenset[str]:
    """The tool calls whose results sit after the first ``seen`` messages: no notes update or summary
    request saw them, so a compaction may not clear them (compact.compaction.compactor)."""
    return frozenset(
        str(b.get("tool_use_id"))
        for m in messages[max(0, seen) :]
        for b in m.content
        if b.get("type") == "tool_result"
    )


def seen_count(messages: list[Message], notes_marker: str | None, summary_seen: str | None) -> int:
    """How many leading messages a completed notes update (its marker) or summary request (the newest
    message it saw, ``Conversation.summary_seen``) saw whole: the server's clearing stops there."""
    return max(covered_count(messages, notes_marker), covered_count(messages, summary_seen))
