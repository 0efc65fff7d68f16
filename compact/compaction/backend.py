"""Which backend a compaction uses, chosen so that no thinking it keeps is invalid (docs/preserved-thinking.md).

    the turns it would keep hold no thinking     session notes, else the local summary (as before)
    they do, the model offers on-demand          the server's summary (compact.compaction.server_summary) of exactly
    compaction, and a request was sent since     the messages of the last request sent; what came after
    the last compaction point                    them is kept verbatim, its thinking valid
    otherwise, or the server's summary failed    the local summary; the kept turns' thinking is left out
                                                 (compact.compaction.compactor), and a tool loop in progress is
                                                 summarized whole — its latest assistant message cannot
                                                 come back without its thinking

The background preparation (compact.workers.preparer) asks the same questions of the same state.
"""

from __future__ import annotations

from dataclasses import dataclass

from compact.context.conversation import Conversation, Ports
from compact.context.result import Compaction
from compact.stages import binding
from core.messages import Message


@dataclass(frozen=True)
class ServerPlan:
    """What a server summary would replace (``sent``, tagged as it was sent) and keep (live messages)."""

    sent: list[Message]
    kept: list[Message]


def server_plan(conv: Conversation, ports: Ports) -> ServerPlan | None:
    """The server's summary for a compaction now, when the rules above choose it; else None."""
    ctx = conv.view_ctx
    if (
        ctx is None
        or not ctx.sent_tagged
        or not ports.config.server_compaction
        or not ports.offers_compaction()
    ):
        return None
    last = ctx.sent_tagged[-1].uuid
    with conv.lock:
        live = list(conv.messages)
    at = next((i for i in range(len(live) - 1, -1, -1) if live[i].uuid == last), None)
    if at is None:
        return None
    kept = live[at + 1 :]
    if not kept or kept[0].role != "assistant" or not any(binding.holds_thinking(m) for m in kept):
        return None  # nothing kept holds thinking: the notes or the local summary keep nothing worse
    return ServerPlan(list(ctx.sent_tagged), kept)


def server_expected(conv: Conversation, ports: Ports) -> bool:
    """Whether the server's summary will be the backend once a request has been sent: the model offers
    it and its latest reply holds thinking (right after a compaction no request was sent yet)."""
    if not ports.config.server_compaction or not ports.offers_compaction():
        return False
    with conv.lock:
        last = next((m for m in reversed(conv.messages) if m.role == "assistant"), None)
    return last is not None and binding.holds_thinking(last)


def tool_loop_running(view: list[Message]) -> bool:
    """A local compaction now may keep no tail: the loop's latest assistant message would follow a
    client-written summary without the thinking the API requires of it."""
    return binding.in_tool_loop(view)


def keeps_thinking_valid(c: Compaction) -> bool:
    """Whether a compaction made ahead may be applied: the server's always; a local one unless its kept
    turns end in a tool loop that holds thinking (left out, the API refuses the loop's next request)."""
    return c.stand_in is not None or not binding.in_tool_loop(c.kept)
