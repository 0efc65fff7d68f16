"""The tools a tool search found, kept across compactions (MCP tools sent with ``defer_loading``).

A deferred tool is callable while a ``tool_reference`` to it is in the conversation: in a ``tool_result``
of our ToolSearch tool, or in the API's own ``tool_search_tool_result`` block. A compaction removes those
messages, so the compaction's attachment records every tool found up to then (``Message.extra
["discoveredTools"]``, beside the ledger's snapshot). On a model that binds its thinking to the ``tools``
(preserved thinking, docs/preserved-thinking.md) the tools stay deferred and the compaction appends a ``role: "system"``
message of ``tool_addition`` blocks naming them (``additions``): the API makes a tool available from
that point on without a change to ``tools``, so the kept turns' thinking stays valid and the prompt cache
holds. On other models those tools are sent in full from that compaction point on (agent/mcp/catalog.py,
``loaded``). A resume loads the same messages and finds the same lists. No model call, no disk write.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.messages import Message

KEY = "discoveredTools"
ADDED = "addedTools"  # on the system message of tool_addition blocks (``additions``)


def referenced(messages: Iterable[Message]) -> list[str]:
    """Tool names the search results in ``messages`` point to, in order of first mention."""
    found: dict[str, None] = {}
    for m in messages:
        for block in m.content:
            for ref in _references(block):
                found.setdefault(ref, None)
    return list(found)


def recorded(messages: list[Message]) -> list[str]:
    """The list the last compaction recorded (empty before the first one)."""
    for m in reversed(messages):
        names = m.extra.get(KEY)
        if isinstance(names, list):
            return [str(n) for n in names]
    return []


def found_so_far(messages: list[Message]) -> list[str]:
    """Everything found: the last record, then what was found after it."""
    return list(dict.fromkeys([*recorded(messages), *referenced(messages)]))


def additions(names: list[str]) -> Message:
    """The system message that makes ``names`` (deferred tools of the request) available again."""
    blocks = [{"type": "tool_addition", "tool": {"type": "tool_reference", "name": n}} for n in names]
    return Message("system", blocks, kind="meta", extra={ADDED: list(names)})


def added_inline(messages: list[Message]) -> set[str]:
    """Tools made available by ``tool_addition`` blocks in the live messages (a system message of ours,
    or the ``tool_changes`` a server compaction block carries for what it summarized)."""
    names: set[str] = set()
    for m in messages:
        for block in m.content:
            changes = block.get("tool_changes") if block.get("type") == "compaction" else [block]
            for change in changes or []:
                tool = change.get("tool") if isinstance(change, dict) else None
                if change.get("type") == "tool_addition" and isinstance(tool, dict) and tool.get("name"):
                    names.add(str(tool["name"]))
    return names


def loaded(messages: list[Message]) -> list[str]:
    """The tools to send in full: those the last compaction recorded that no ``tool_addition`` made
    available again (a model without preserved thinking; a transcript from before ``additions``)."""
    inline = added_inline(messages)
    return [n for n in recorded(messages) if n not in inline]


def stamp(message: Message, before: list[Message]) -> Message:
    """The compaction's attachment carrying the tools found in ``before`` (unchanged when there are none)."""
    names = found_so_far(before)
    return message.replace(extra={**message.extra, KEY: names}) if names else message


def _references(block: Any) -> list[str]:
    if not isinstance(block, dict):
        return []
    kind = block.get("type")
    if kind == "tool_result" and isinstance(block.get("content"), list):
        return [
            str(b["tool_name"])
            for b in block["content"]
            if isinstance(b, dict) and b.get("type") == "tool_reference" and b.get("tool_name")
        ]
    if kind == "tool_search_tool_result":
        inner = block.get("content") or {}
        refs = inner.get("tool_references") if isinstance(inner, dict) else None
        return [str(r["tool_name"]) for r in refs or [] if isinstance(r, dict) and r.get("tool_name")]
    return []
