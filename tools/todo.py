"""TodoWrite: the model keeps its task list (Claude Code's name and schema); the list lives in the calls.

The tool itself stores nothing: the list is the input of the last successful call, which the
working-state ledger (compact.compaction.ledger) reads back from the conversation, shows the user as it changes
and puts back after every compaction. It never asks permission (it touches no file).
"""

from __future__ import annotations

from typing import Any

from core.declaration import Declaration
from tools.base import ToolContext, ToolError, ToolResult, object_schema

STATUSES = ("pending", "in_progress", "completed")

DESCRIPTION = """\
Create and update a structured task list for the current work, so progress stays visible to you and the \
user (and survives when the conversation is compacted).

- Use it for work with three or more distinct steps, or when the user gives several tasks at once. Skip \
it for a single trivial step.
- Each call sends the whole list: every task with its content (imperative: "Run the tests"), its \
activeForm (present continuous: "Running the tests") and its status: pending, in_progress or completed.
- Keep exactly one task in_progress while you work; mark a task completed as soon as it is done (not \
in batches), and only when it is fully done — not while tests fail or the work is partial.
- Remove tasks that no longer matter, and add new ones as you discover them."""
# the description at small windows, where the tools' text is a large share of the context (compact.owner)
BRIEF = "Keep the task list for work of three or more steps: each call sends every task (content, activeForm, status pending/in_progress/completed), exactly one in_progress, each marked completed as soon as it is fully done."

RESULT = (
    "The todo list has been updated ({counts}). Keep it current as you go: mark tasks in_progress when "
    "you start them and completed as soon as they are done, then carry on with the next task."
)


class TodoWriteTool:
    name = "TodoWrite"
    declaration = Declaration("nothing", records="todo", parallel=True)
    description = DESCRIPTION
    brief = BRIEF
    input_schema = object_schema(
        {
            "todos": {
                "type": "array",
                "description": "The updated todo list",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1},
                        "status": {"type": "string", "enum": list(STATUSES)},
                        "activeForm": {"type": "string", "minLength": 1},
                    },
                    "required": ["content", "status", "activeForm"],
                    "additionalProperties": False,
                },
            },
        },
        "todos",
    )

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        todos = args["todos"]
        empty = [
            i + 1 for i, t in enumerate(todos) if not t["content"].strip() or not t["activeForm"].strip()
        ]
        if empty:
            raise ToolError(
                f"Todo item {empty[0]} has an empty content or activeForm; give both as short sentences."
            )
        done = sum(t["status"] == "completed" for t in todos)
        active = sum(t["status"] == "in_progress" for t in todos)
        counts = f"{len(todos)} tasks: {done} completed, {active} in progress, {len(todos) - done - active} pending"
        return ToolResult(
            content=RESULT.format(counts=counts), summary=counts, facts={"todos": [dict(t) for t in todos]}
        )
