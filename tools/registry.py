"""The list of tools the agent offers, and their schemas in the shape the Messages API wants.

``builtin_tools()`` returns a fresh list each call; the caller extends it with tools that need the
session (Snip is appended by the loop) before passing it to ``tool_schemas``. Building the list is
cheap: no tool does any work until it runs.

Importing this module declares every built-in tool (core.declaration): the permission engine, the UI,
the stages and the ledger find a tool's declaration by its name. A new tool is a module with its class
(name, description, schema, declaration, run) and its line in ``BUILT_IN`` below.
"""

from __future__ import annotations

from typing import Any

from core.declaration import declare
from tools.base import Tool
from tools.bash import BashTool
from tools.edit import EditTool
from tools.glob import GlobTool
from tools.grep import GrepTool
from tools.read import ReadTool
from tools.snip import SnipTool
from tools.task import TaskTool
from tools.todo import TodoWriteTool
from tools.write import WriteTool

# the tools offered to every session, in the order the model sees them
BUILT_IN: tuple[type[Tool], ...] = (
    BashTool,
    GlobTool,
    GrepTool,
    ReadTool,
    EditTool,
    WriteTool,
    TodoWriteTool,
)
# tools a session adds itself (they need it to be built), declared here all the same
SESSION_TOOLS: tuple[type[Tool], ...] = (SnipTool, TaskTool)
for _tool in (*BUILT_IN, *SESSION_TOOLS):
    declare(_tool.name, _tool.declaration)


def builtin_tools() -> list[Tool]:
    """New instances of the built-in tools, in the order they are offered to the model."""
    return [tool() for tool in BUILT_IN]


def tool_schemas(tools: list[Tool], *, brief: bool = False) -> list[dict[str, Any]]:
    """The ``tools`` parameter of a Messages API request. ``brief``: the short descriptions of the tools
    that have one (the input schemas are the same), for windows where the full text would take a large
    share of the context (compact.owner.ConversationOwner.brief_tools)."""
    return [
        {
            "name": tool.name,
            "description": (getattr(tool, "brief", "") if brief else "") or tool.description,
            "input_schema": tool.input_schema,
        }
        for tool in tools
    ]


def get(tools: list[Tool], name: str) -> Tool | None:
    """The tool called ``name``, or None when the model asks for one that does not exist."""
    return next((tool for tool in tools if tool.name == name), None)
