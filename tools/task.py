"""Task: the model hands a piece of work to a subagent that runs in its own context (docs/subagents.md).

The tool holds Claude Code's input schema and the description listing the agent types; it validates the
input and hands it to ``ctx.services["task"]``, which the agent provides (agent.runtime.subagents runs the
subagent's loop). Keeping the loop out of here keeps tools/ below agent/. The answer comes back as the
tool's result: the subagent's final text, then a line with its id and usage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.declaration import Declaration
from tools.base import ToolContext, ToolError, ToolResult

NAME = "Task"

INTRO = """\
Hand a self-contained task to a subagent that works in its own, fresh context and reports back.

- The subagent sees only your prompt (and the environment), never this conversation: say everything it \
needs (the goal, file paths, what to report and in what shape).
- Use it for searches and explorations that would read many files: only its final answer comes back, \
so your context stays small.
- Several Task calls in one message run at the same time (up to 4); their results come back in order.
- A subagent cannot start subagents of its own.
- Its final message is returned to you, not shown to the user: tell the user what matters.

Agent types (subagent_type):"""


@dataclass(frozen=True)
class AgentType:
    """What the description says about one agent type."""

    name: str
    description: str
    tools: str  # "All tools", "Read, Grep, Glob, Bash (read-only)", ...


def describe(types: list[AgentType]) -> str:
    lines = [INTRO] + [f"- {t.name}: {t.description} (Tools: {t.tools})" for t in types]
    return "\n".join(lines)


class TaskTool:
    name = NAME
    declaration = Declaration(
        "nothing", key_arg="description", show_summary=True, records="answer", parallel=True
    )

    def __init__(self, types: list[AgentType], withheld: dict[str, str] | None = None) -> None:
        self.types = types
        self.withheld = withheld or {}  # name -> the file of an agent the trust rules leave out
        self.description = describe(types)
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "description": {
                    "type": "string",
                    "description": "A short (3-5 word) description of the task",
                },
                "prompt": {"type": "string", "description": "The task for the agent to perform"},
                "subagent_type": {
                    "type": "string",
                    "description": "The type of specialized agent to use for this task",
                },
            },
            "required": ["description", "prompt", "subagent_type"],
            "additionalProperties": False,
        }

    def check(self, args: dict[str, Any], ctx: ToolContext) -> None:
        if not str(args.get("prompt", "")).strip():
            raise ToolError("The Task prompt is empty: say what the subagent should do and report.")
        names = [t.name for t in self.types]
        name = args.get("subagent_type")
        if name not in names and name in self.withheld:
            raise ToolError(
                f"The agent {name} is defined in {self.withheld[name]}, and this project is not trusted, so "
                "its agents are not available. Use another agent type, or ask the user to trust the project."
            )
        if args.get("subagent_type") not in names:
            raise ToolError(
                f"There is no agent type {args.get('subagent_type')!r}. Available: {', '.join(names)}."
            )

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.check(args, ctx)
        service = ctx.services.get("task")
        if service is None:
            raise ToolError("Subagents are not available here (a subagent cannot start another one).")
        result = service(args)
        if not isinstance(result, ToolResult):
            raise ToolError(str(result))
        return result
