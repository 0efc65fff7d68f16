"""MCP tool names (``mcp__<server>__<tool>``) and the permission rules that name them: one definition for
the client that makes the names and the permission engine that matches rules against them (issue 40).

A name must say which server a tool belongs to, so a rule on a server covers exactly that server's tools:

- a server's name, as it appears in tool names (``server_name``), has only letters, digits, ``_`` and
  ``-``; it may not hold ``__`` or end in ``_`` (``mcp__my__srv__x`` would read as server ``my``) and is at
  most ``SERVER_LIMIT`` characters, so a shortened tool name never cuts into it. A configured name that
  breaks this is refused (``name_problem``) and the server doesn't start;
- a tool name longer than the API's 64 characters keeps its start and gets a digest of the whole;
- a rule is ``mcp__*``, ``mcp__S``, ``mcp__S__*`` or ``mcp__S__T``; ``T`` is the tool's own name (or its
  name as sent), compared exactly. Any other form can never match and is reported (``rule_problem``).
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp__"
NAME_LIMIT = 64  # the Messages API's limit on a tool's name
SERVER_LIMIT = 32
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")


def server_name(name: str) -> str:
    """A name as it appears in tool names: letters, digits, ``_`` and ``-`` (anything else becomes ``_``)."""
    return _NAME_OK.sub("_", name)


def name_problem(name: str) -> str | None:
    """Why a configured server name can't be used in tool names, or None."""
    shown = server_name(name)
    if not shown.strip("_-"):
        return f'the server name "{name}" has no letter or digit'
    if "__" in shown or shown.endswith("_"):
        return (
            f'the server name "{name}" holds "__" or ends in "_" (as "{shown}"), so its tools\' names '
            '("mcp__<server>__<tool>") would read as another server\'s and rules could not tell them apart; '
            "rename it"
        )
    if len(shown) > SERVER_LIMIT:
        return f'the server name "{name}" is longer than {SERVER_LIMIT} characters; shorten it'
    return None


def tool_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``, within the API's 64 characters."""
    full = f"{PREFIX}{server_name(server)}__{server_name(tool)}"
    if len(full) <= NAME_LIMIT:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{full[: NAME_LIMIT - 9]}_{digest}"


def split(name: str) -> tuple[str, str] | None:
    """(server, tool part) of an ``mcp__server__tool`` name; None for other tools."""
    if not name.startswith(PREFIX):
        return None
    server, sep, rest = name[len(PREFIX) :].partition("__")
    return (server, rest) if sep else None


def rule_problem(rule_tool: str) -> str | None:
    """Why an ``mcp__...`` rule can never match a tool, or None for the four forms that can."""
    if rule_tool == f"{PREFIX}*":
        return None
    body = rule_tool[len(PREFIX) :]
    server, sep, tool = body.partition("__")
    if not server:
        return f'"{rule_tool}" names no server'
    if "*" in server:
        return f'"{rule_tool}": a server is named exactly ("mcp__*" covers every server)'
    if server_name(server) != server or name_problem(server):
        return f'"{rule_tool}": "{server}" is not a name a server\'s tools can have'
    if not sep:
        return None
    if tool == "*":
        return None
    if not tool or "*" in tool:
        return (
            f'"{rule_tool}": a tool is named exactly; use "{PREFIX}{server}__*" for every tool of "{server}"'
        )
    return None


def rule_matches(rule_tool: str, name: str) -> bool:
    """Whether the rule (its tool part: ``mcp__S__T``...) covers the tool called ``name``."""
    if rule_tool == f"{PREFIX}*":
        return name.startswith(PREFIX)
    parts = split(name)
    if parts is None or rule_problem(rule_tool) is not None:
        return False
    server, tool = parts
    rule_server, sep, rule_tool_part = rule_tool[len(PREFIX) :].partition("__")
    if rule_server != server:
        return False
    if not sep or rule_tool_part == "*":
        return True
    return rule_tool_part == tool or tool_name(server, rule_tool_part) == name
