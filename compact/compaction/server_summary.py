"""The server's on-demand summary: a compaction that keeps the kept turns' thinking valid (docs/preserved-thinking.md).

Triggers: a compaction whose kept turns hold thinking, on a model that offers on-demand compaction
(compact.compaction.backend chooses it).
Drops: exactly the messages of a request already sent (the last main request: ``ViewContext.sent``);
the server writes one ``compaction`` block that later requests send first, in their place.
Keeps: every message after them, unchanged (the reply to that request first, so the first kept message
has the other role); the working state, the user's words, restored files and hook context follow as
appended ``role: "system"`` messages, after the kept turns — never between the block and them.
Writes to disk: nothing (the compactor writes once the block is in hand).
Model calls: one request (beta ``compact-2026-09-04``, top-level ``compaction: {type: "summarize"}``,
no ``context_management``: the two can't be combined). Any failure — one of the nine ``compaction_*``
error codes, a 529 (``compaction_unavailable``), a block with no summary (``content: null``), another
stop reason — raises CompactionError, and the compactor falls back to a local compaction.

What a summary really cost is in its response's ``usage`` (the compaction step's ``iterations`` entry):
each one is taken in (compact.compaction.economics.observe) as the price cost-aware compaction plans the
next one with.
"""

from __future__ import annotations

import threading
from typing import Any

from compact.compaction import economics
from compact.context.conversation import Conversation, Ports
from compact.context.result import Compaction
from compact.stages.state import price_record
from core.errors import CompactionError, Interrupted, ModelError
from core.messages import Message, to_api

BETA = "compact-2026-09-04"
METHOD = "server-summary"
STOP_REASON = "compaction"
BLOCK = "compaction"
# the error codes of a failed compaction request (error.details.error_code), from the SDK's types
ERROR_CODES = (
    "compaction_block_ambiguous",
    "compaction_block_misplaced",
    "compaction_content_mismatch",
    "compaction_incomplete_turn",
    "compaction_nothing_to_summarize",
    "compaction_signature_invalid",
    "compaction_too_many_tool_references",
    "compaction_tool_changes_mismatch",
    "compaction_unavailable",
)


# sent only with custom instructions (/compact's, a PreCompact hook's, CLAUDE.md's): ``instructions``
# replaces the server's own prompt, so it must say the whole job
PROMPT = """\
Write a summary of this conversation that can replace it: afterwards only the summary and the most \
recent turns remain, and the work must go on from them without asking the user to repeat anything. \
Cover what the user asked for and why, the decisions taken, the files and code involved (exact paths \
and names), errors met and how they were fixed, every correction the user made, what is still to do, \
and precisely what was in progress at the end. Keep every rule or constraint the user stated word for \
word. Plain text only."""


def instructions(custom: list[str]) -> str | None:
    """The ``instructions`` of a compaction request: None (the server's own prompt) unless there are
    custom instructions, then a whole prompt of ours with them appended."""
    extra = [c.strip() for c in custom if c and c.strip()]
    if not extra:
        return None
    return PROMPT + "\n\nAdditional instructions:\n" + "\n\n".join(extra)


def is_compaction(m: Message) -> bool:
    """A message holding the server's compaction block (it stands for what it summarized)."""
    return m.role == "assistant" and any(b.get("type") == BLOCK for b in m.content)


def request(ports: Ports, sent: list[Message], instructions: str | None = None) -> Any:
    """The compaction request over exactly the messages ``sent`` (as tagged and sent before)."""
    req = ports.request(to_api(sent))
    config: dict[str, Any] = {"type": "summarize"}
    if instructions and instructions.strip():
        config["instructions"] = instructions.strip()
    req.extra_body = {"compaction": config}
    req.betas = [BETA]
    req.retry = "once"  # a 529 or a lost stream: the local compaction at once, not a wait
    return req


def billed(usage: dict[str, Any] | None) -> dict[str, Any]:
    """The usage to count for a compaction request: its ``compaction`` iterations (the top-level fields
    leave them out) added to the top-level ones."""
    usage = dict(usage or {})
    keys = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    for it in usage.pop("iterations", None) or []:
        if isinstance(it, dict) and it.get("type") == "compaction":
            for k in keys:
                usage[k] = int(usage.get(k) or 0) + int(it.get(k) or 0)
    return usage


def block_of(reply: Message) -> dict[str, Any]:
    """The compaction block a reply brought, or CompactionError saying why there is none to use."""
    blocks = [b for b in reply.content if b.get("type") == BLOCK]
    if reply.stop_reason != STOP_REASON or len(blocks) != 1:
        raise CompactionError(f"the server's summary came back without its block (stop: {reply.stop_reason})")
    block = blocks[0]
    if not isinstance(block.get("content"), str) or not block["content"].strip():
        raise CompactionError("the server's summary came back empty (content null)")
    return {k: v for k, v in block.items() if v is not None}


def summarize(
    conv: Conversation,
    ports: Ports,
    sent: list[Message],
    kept: list[Message],
    instructions: str | None,
    cancel: threading.Event | None = None,
) -> Compaction:
    """Ask the server to summarize ``sent``; the Compaction that puts its block in their place and keeps
    ``kept`` verbatim. CompactionError on any failure (errors.Interrupted on Ctrl-C, or when ``cancel``
    is set: a candidate prepared in the background has its own)."""
    req = request(ports, sent, instructions)
    try:
        reply = ports.model.stream(req, cancel=cancel or conv.cancel, emit_text=False)
    except Interrupted:
        raise
    except ModelError as e:
        raise CompactionError(f"the server's summary failed: {e}") from None
    ports.account(reply.replace(usage=billed(reply.usage)))
    seen = economics.observe(reply.usage)
    if seen is not None:
        conv.state.server_price = seen
        conv.record(price_record(seen))  # a resumed session prices the next one the same way
    block = block_of(reply)
    stand_in = Message("assistant", [block], kind="compaction", model=reply.model, stop_reason=STOP_REASON)
    return Compaction(
        method=METHOD,
        summary=block["content"],
        kept=list(kept),
        usage=reply.usage,
        stand_in=stand_in,
        summarized=[m.uuid for m in sent],
    )
