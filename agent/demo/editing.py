"""Server-side context editing, as the scripted server plays it (``context_management``; docs/compaction.md).

A request may ask the server to edit what the model reads before it reads it; the client's history is
not touched and the client sends it whole again next time. Two edits, as the SDK's types describe them:

``clear_tool_uses_20250919``  once the request's input reaches ``trigger`` (input tokens, default
                              100,000, or a number of tool uses), the results of the oldest tool uses
                              are replaced by a placeholder, all but the ``keep`` most recent (tool uses,
                              default 3) and those of ``exclude_tools``; with ``clear_tool_inputs`` (true,
                              or a list of tool names) their inputs too. Nothing is cleared unless at
                              least ``clear_at_least`` input tokens would go.
``clear_thinking_20251015``   thinking blocks of all but the ``keep`` most recent assistant turns that
                              hold some (``{"type": "thinking_turns", "value": n}``, or ``"all"``).

``apply`` returns the body the model reads and the applied edits (``context_management.applied_edits``
of the response: what each cleared, counted in input tokens). The server counts, bills and checks the
window on that body; the prefix check of preserved thinking reads the request as the client sent it,
so clearing is no edit of the history (agent.demo.binding).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
PLACEHOLDER = "[tool result cleared by the server's context editing]"
DEFAULT_TRIGGER = 100_000
DEFAULT_KEEP = 3


def apply(
    body: dict[str, Any], count: Callable[[dict[str, Any]], int]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the body the model reads, the applied edits); the body itself when it asks for no editing."""
    config = body.get("context_management") if isinstance(body, dict) else None
    if not isinstance(config, dict):
        return body, []
    edited = {k: v for k, v in body.items() if k != "context_management"}
    edited["messages"] = copy.deepcopy(body.get("messages") or [])
    applied: list[dict[str, Any]] = []
    for edit in config.get("edits") or []:
        if not isinstance(edit, dict):
            continue
        before = count(edited)
        if edit.get("type") == CLEAR_TOOL_USES:
            cleared = _clear_tool_uses(edited, edit, before, count)
            if cleared:
                applied.append(
                    {
                        "type": CLEAR_TOOL_USES,
                        "cleared_tool_uses": cleared,
                        "cleared_input_tokens": before - count(edited),
                    }
                )
        elif edit.get("type") == CLEAR_THINKING:
            turns = _clear_thinking(edited, edit.get("keep"))
            if turns:
                applied.append(
                    {
                        "type": CLEAR_THINKING,
                        "cleared_thinking_turns": turns,
                        "cleared_input_tokens": before - count(edited),
                    }
                )
    return edited, applied


def _value(param: Any, default: int) -> int:
    return int(param["value"]) if isinstance(param, dict) and "value" in param else default


def _uses(body: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Every tool use of the conversation, oldest first, with the block holding its result (or None)."""
    results: dict[str, dict[str, Any]] = {}
    uses: list[dict[str, Any]] = []
    for message in body["messages"]:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                uses.append(block)
            elif block.get("type") == "tool_result":
                results[str(block.get("tool_use_id"))] = block
    return [(use, results.get(str(use.get("id")))) for use in uses]


def _clear_tool_uses(
    body: dict[str, Any], edit: dict[str, Any], before: int, count: Callable[[dict[str, Any]], int]
) -> int:
    """Clear in place; the number of tool uses cleared (0: not triggered, or too little to clear)."""
    uses = _uses(body)
    trigger = edit.get("trigger")
    if isinstance(trigger, dict) and trigger.get("type") == "tool_uses":
        if len(uses) < _value(trigger, 0):
            return 0
    elif before < _value(trigger, DEFAULT_TRIGGER):
        return 0
    keep = _value(edit.get("keep"), DEFAULT_KEEP)
    excluded = set(edit.get("exclude_tools") or [])
    inputs = edit.get("clear_tool_inputs")
    old = uses[: max(0, len(uses) - keep)]
    saved = copy.deepcopy(body["messages"])
    cleared = 0
    for use, result in old:
        if use.get("name") in excluded:
            continue
        touched = False
        if result is not None and result.get("content") != PLACEHOLDER:
            result["content"] = PLACEHOLDER
            result.pop("is_error", None)
            touched = True
        if (inputs is True or (isinstance(inputs, list) and use.get("name") in inputs)) and use.get("input"):
            use["input"] = {}
            touched = True
        cleared += touched
    if cleared and before - count(body) < _value(edit.get("clear_at_least"), 0):
        body["messages"] = saved  # not worth a cache write: nothing is cleared
        return 0
    return cleared


def _clear_thinking(body: dict[str, Any], keep: Any) -> int:
    """Leave out the thinking of all but the ``keep`` most recent assistant turns holding some."""
    if keep == "all" or (isinstance(keep, dict) and keep.get("type") == "all"):
        return 0
    kept = _value(keep, 1)
    turns = [
        m
        for m in body["messages"]
        if m.get("role") == "assistant"
        and isinstance(m.get("content"), list)
        and any(
            isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking") for b in m["content"]
        )
    ]
    old = turns[: max(0, len(turns) - kept)]
    for m in old:
        m["content"] = [
            b
            for b in m["content"]
            if not (isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking"))
        ]
    return len(old)
