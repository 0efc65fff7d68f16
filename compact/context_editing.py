"""Server-side context editing: microcompact's cache-warm path (SPEC §4), as request parameters.

Triggers: on the server, when a request's input passes ``triggerTokens``; we only build the public
``context_management`` parameter (with its beta header) from the ``contextEditing`` setting.
Drops (server side, in what the model reads): the oldest tool uses' results beyond the
``keepToolUses`` most recent, at least ``clearAtLeastTokens`` at a time; with extended thinking on,
thinking blocks of all but the last assistant turn.
Keeps: the local message list, unchanged; the response reports the applied edits, which the caller
records as a context-edit transcript record.
Writes to disk: no. Model calls: none of its own.
"""

from __future__ import annotations

from typing import Any

BETA = "context-management-2025-06-27"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"

DEFAULTS = {"triggerTokens": 100_000, "keepToolUses": 3, "clearAtLeastTokens": 20_000, "clearThinking": True}


def request_params(config: dict[str, Any] | None, thinking_enabled: bool) -> tuple[dict[str, Any], list[str]]:
    """(extra_body, betas) for a main request; ({}, []) when context editing is off.

    ``config`` is the ``contextEditing`` setting: enabled (default true when the setting exists),
    triggerTokens, keepToolUses, clearAtLeastTokens (0 = leave it to the server), clearThinking,
    excludeTools (tool names whose results are never cleared).
    """
    if not config or not config.get("enabled", True):
        return {}, []
    c = {**DEFAULTS, **{k: v for k, v in config.items() if v is not None}}
    clear_tools: dict[str, Any] = {
        "type": CLEAR_TOOL_USES,
        "trigger": {"type": "input_tokens", "value": int(c["triggerTokens"])},
        "keep": {"type": "tool_uses", "value": int(c["keepToolUses"])},
    }
    if int(c["clearAtLeastTokens"]) > 0:
        clear_tools["clear_at_least"] = {"type": "input_tokens", "value": int(c["clearAtLeastTokens"])}
    if c.get("excludeTools"):
        clear_tools["exclude_tools"] = list(c["excludeTools"])
    edits: list[dict[str, Any]] = [clear_tools]
    if thinking_enabled and c["clearThinking"]:
        # the API wants the thinking edit listed first
        edits.insert(0, {"type": CLEAR_THINKING, "keep": {"type": "thinking_turns", "value": 1}})
    return {"context_management": {"edits": edits}}, [BETA]


def applied_edits(response: Any) -> list[dict[str, Any]]:
    """The edits the server reports having applied (``context_management.applied_edits``), or []."""
    if isinstance(response, dict):
        cm = response.get("context_management")
    else:
        cm = getattr(response, "context_management", None)
    if cm is None:
        return []
    edits = cm.get("applied_edits") if isinstance(cm, dict) else getattr(cm, "applied_edits", None)
    out = []
    for e in edits or []:
        if isinstance(e, dict):
            out.append(e)
        elif hasattr(e, "model_dump"):
            out.append(e.model_dump())
    return out
