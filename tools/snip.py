"""The Snip tool: the model removes old user turns from its own context (docs/compaction.md).

The tool only validates its input and hands the ids to ``ctx.services["snip"]``, a callable the query
loop provides (``compact.stages.snip.perform_snip`` bound to the live conversation) that plans, records and
applies the snip and returns the sentence for the model. It touches nothing but the agent's own
context, so it never asks permission (the permission rules allow any tool they don't know).
"""

from __future__ import annotations

from typing import Any

from core.declaration import Declaration
from core.errors import SnipError
from tools.base import ToolContext, ToolError, ToolResult, object_schema

DESCRIPTION = """\
Remove earlier turns of this conversation from your context, to make room for new work.

- Every user message ends with a tag like [id:a1b2c3]. Pass the ids of the turns to remove.
- A turn is the user message with that tag and everything after it up to the next user message: your \
replies, tool calls and their results. All of it goes.
- The current turn can't be removed.
- Snip turns whose details you no longer need (finished tasks, long outputs you have already used). \
The full conversation stays in the transcript, but you won't see the snipped part again.
"""
# the description at small windows, where the tools' text is a large share of the context (compact.owner)
BRIEF = "Remove earlier turns from your context by the [id:...] tags that end each user message: a turn is that message and everything up to the next one. Not the current turn; the transcript keeps them."


class SnipTool:
    name = "Snip"
    declaration = Declaration("nothing", key_arg="ids", show_summary=True, records="nothing")
    description = DESCRIPTION
    brief = BRIEF
    input_schema = object_schema(
        {
            "ids": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "description": "The ids of the turns to remove, as in their [id:...] tags.",
            },
            "reason": {"type": "string", "description": "Why these turns are no longer needed (optional)."},
        },
        "ids",
    )

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ids = args.get("ids")
        if isinstance(ids, str):
            ids = [ids]
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i.strip() for i in ids):
            raise ToolError('ids must be a non-empty list of turn ids, e.g. ["a1b2c3"].')
        service = ctx.services.get("snip")
        if service is None:
            raise ToolError("Snip is not available in this session.")
        reason = args.get("reason") if isinstance(args.get("reason"), str) else None
        try:
            answer = service(ids, reason)
        except SnipError as e:  # unknown ids, the current turn: a sentence the model can act on
            raise ToolError(str(e)) from e
        if isinstance(answer, Exception):
            raise ToolError(str(answer))
        text = str(answer)
        return ToolResult(text, summary=text)
