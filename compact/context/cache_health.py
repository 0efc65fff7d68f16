"""Cache health: each main request names its predecessor, and each prompt-cache miss is kept (docs/preserved-thinking.md).

Every request of a conversation's main loop carries ``diagnostics.previous_message_id``: the id of the
reply before it (``null`` on the first, which opts in). The server compares the two requests and, when
this one's prefix could not be read from the cache, answers why (``cache_miss_reason``: model, system,
tools or messages changed, or the predecessor is unknown). Between compaction points the history only
grows, so a miss there is a bug; at a compaction point (the history was replaced) it is expected. Each
miss is recorded in the transcript (``{"type": "cache-miss", "reason", "missedTokens",
"compactionPoint"}``), kept on the conversation for /context, and counted for the benchmarks.

No model call of its own; nothing written to disk but the record.
"""

from __future__ import annotations

from typing import Any

from compact.context.conversation import Conversation
from core.messages import Message
from core.model import Request

CACHE_MISS = "cache-miss"  # the transcript record of a miss (agent.transcript.loader skips it quietly)


def chain(conv: Conversation, req: Request) -> bool:
    """Name the predecessor on a main request; True when a compaction (or a rewind, a model switch) came
    in between: a miss is then expected."""
    req.diagnostics = {"previous_message_id": conv.last_reply_id}
    rebuilt, conv.rebuild_point = conv.rebuild_point, False
    if conv.view_ctx is not None and conv.view_ctx.at_collapse:  # a collapse commit goes out with it
        rebuilt, conv.view_ctx.at_collapse = True, False
    return rebuilt or conv.last_compaction is not conv.compaction_seen


def observe(conv: Conversation, reply: Message, at_compaction: bool) -> dict[str, Any] | None:
    """Remember the reply as the next request's predecessor; keep and record the miss it reports."""
    conv.last_reply_id = reply.message_id or conv.last_reply_id
    conv.compaction_seen = conv.last_compaction
    reason = reply.extra.get("cacheMissReason")
    if not isinstance(reason, dict):
        return None
    miss = {
        "type": CACHE_MISS,
        "reason": str(reason.get("type")),
        "missedTokens": int(reason.get("cache_missed_input_tokens") or 0),
        "compactionPoint": at_compaction,
    }
    conv.cache_misses.append(miss)
    conv.record(miss)
    return miss


def unexpected(conv: Conversation) -> list[dict[str, Any]]:
    """The misses outside compaction points: each one a bug the benchmarks report."""
    return [m for m in conv.cache_misses if not m["compactionPoint"]]
