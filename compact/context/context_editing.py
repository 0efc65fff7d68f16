"""Server-side context editing: microcompact's cache-warm path (docs/compaction.md), and the clearing that keeps a
history with preserved thinking small without editing it (docs/preserved-thinking.md), as request parameters.

Two sources. The ``contextEditing`` setting, when the user sets it (``request_params``). Else, on a
model with preserved thinking (``automatic``): ``clear_tool_uses`` alone, up to a point the agent
moves (``advance``): once what the server counts reaches AUTO_TRIGGER of the auto-compact threshold T,
to all but the ``microcompact.keepRecent`` newest uses (fewer when their results would fill more than
AUTO_KEEP_SHARE of T), when that clears at least AUTO_AT_LEAST of T — and never past what a notes
update or summary request saw (``seen``): a result leaves what the model reads only once something that
stands for it has read it.
The request says it by how many uses to keep, so the server clears the same uses from request to
request and the cached prefix holds between moves (a server-side trigger on the growing history would
clear one more result, and rewrite the prefix after it, on every request). The local history
is never touched — a stage clearing results there would be an edit that invalidates the thinking after
it — so the server counts less while the history the client keeps grows: compaction is due on what
the history weighs (compact.decision.tokens ``raw``), while the blocking limit holds what the server counts.
No ``clear_thinking``: preserved thinking comes back whole and keeps the cache.

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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from core.messages import Message

if TYPE_CHECKING:
    from compact.context.conversation import Ports

BETA = "context-management-2025-06-27"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"

# never cleared: a tool search's results hold the tool_reference that makes a deferred tool callable
KEEP_TOOLS = ("ToolSearch",)
# of T: the server clears from here (well below the blocking limit while a compaction waits)
AUTO_TRIGGER = 0.9
AUTO_KEEP_SHARE = 0.4  # of T: the newest results kept may fill no more (at a 43K window T is 10,000)
AUTO_AT_LEAST = 0.2  # of T: never less at a time (each clearing is a cache write of what follows)

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


def automatic(messages: Sequence[Message], through: str | None) -> tuple[dict[str, Any], list[str]]:
    """(extra_body, betas) of the automatic clearing for a request over ``messages``: the server clears
    the results of every tool use up to and including ``through`` (a tool_use id), by keeping the
    number that follow it — the same uses from request to request, so the cached prefix holds until
    the point moves (``advance``). Nothing when no point is set or it is gone (a compaction point)."""
    ids = _use_ids(messages)
    if through is None or through not in ids:
        return {}, []
    edit: dict[str, Any] = {
        "type": CLEAR_TOOL_USES,
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": len(ids) - ids.index(through) - 1},
        "exclude_tools": list(KEEP_TOOLS),
    }
    return {"context_management": {"edits": [edit]}}, [BETA]


def advance(
    messages: Sequence[Message],
    through: str | None,
    counted: int,
    threshold: int,
    keep: int,
    rewritten: bool = False,
    seen: int | None = None,
) -> str | None:
    """The new clearing point (a tool_use id), or ``through`` unchanged: it moves once what the server
    counts reaches AUTO_TRIGGER of T, to all but the ``keep`` newest uses, and only when that clears at
    least AUTO_AT_LEAST of T more (each move rewrites the cached prefix after it). ``rewritten``: the
    request writes its whole prefix anyway (the first after a compaction point): it moves then whatever
    the count, for free. ``seen``: how many leading messages a notes update or summary request saw whole
    — the clearing never reaches past them, so no result leaves the context unseen (issue 38)."""
    if counted < threshold * AUTO_TRIGGER and not rewritten:
        return through
    ids = _use_ids(messages)
    done = ids.index(through) + 1 if through in ids else 0
    upto = len(ids) - _kept(messages, ids, keep, int(threshold * AUTO_KEEP_SHARE))
    if seen is not None:
        upto = min(upto, _answered(messages[:seen]))
    if upto <= done:
        return through
    freed = _results_tokens(messages, set(ids[done:upto]))
    return ids[upto - 1] if freed >= threshold * AUTO_AT_LEAST else through


def _answered(messages: Sequence[Message]) -> int:
    """How many of the leading tool uses have their results in ``messages``."""
    ids = _use_ids(messages)
    answered = {
        b.get("tool_use_id")
        for m in messages
        if m.role == "user"
        for b in m.content
        if b.get("type") == "tool_result"
    }
    return next((i for i, use in enumerate(ids) if use not in answered), len(ids))


def _kept(messages: Sequence[Message], ids: list[str], keep: int, room: int) -> int:
    """How many of the newest uses keep their results: ``keep``, fewer when their results would fill more
    than ``room`` (a small window), never none."""
    sizes = {
        b.get("tool_use_id"): m.tokens
        for m in messages
        if m.role == "user"
        for b in m.content
        if b.get("type") == "tool_result"
    }
    n, used = 0, 0
    for use in reversed(ids):
        used += sizes.get(use, 0)
        if n >= max(1, keep) or (n and used > room):
            break
        n += 1
    return max(1, n)


def clearable_tokens(messages: Sequence[Message], through: str | None) -> int:
    """Estimated tokens of the results the server clears up to ``through`` (0 when none)."""
    ids = _use_ids(messages)
    if through is None or through not in ids:
        return 0
    return _results_tokens(messages, set(ids[: ids.index(through) + 1]))


def _results_tokens(messages: Sequence[Message], uses: set[str]) -> int:
    return sum(
        m.tokens
        for m in messages
        if m.role == "user"
        and any(b.get("type") == "tool_result" and b.get("tool_use_id") in uses for b in m.content)
    )


def _use_ids(messages: Sequence[Message]) -> list[str]:
    return [
        str(b.get("id"))
        for m in messages
        if m.role == "assistant"
        for b in m.content
        if b.get("type") == "tool_use"
    ]


def for_request(
    config: dict[str, Any] | None,
    *,
    thinking_enabled: bool,
    clears: bool,
    messages: Sequence[Message] = (),
    through: str | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """(extra_body, betas) for a request over the main history: the user's ``contextEditing`` when set
    (``false`` included), else the automatic clearing when ``clears`` (a model with preserved thinking)."""
    if config is None and clears:
        return automatic(messages, through)
    return request_params(config, thinking_enabled)


def automatic_on(ports: Ports) -> bool:
    """Whether the automatic clearing is on: a model with preserved thinking, no contextEditing set,
    compaction not disabled, and no context collapse (opt-in: it manages the room its own way)."""
    c = ports.config
    off = c.disable_compact or c.context_collapse
    return c.context_editing is None and not off and ports.preserves_thinking()


def for_ports(
    ports: Ports, thinking_enabled: bool = False, messages: Sequence[Message] = (), through: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The context editing a request over the main history carries (main requests, notes updates)."""
    return for_request(
        ports.config.context_editing,
        thinking_enabled=thinking_enabled,
        clears=automatic_on(ports),
        messages=messages,
        through=through,
    )


def clears(ports: Ports) -> bool:
    """Whether requests over the main history may ask the server to clear some of it."""
    return automatic_on(ports) or bool(request_params(ports.config.context_editing, False)[0])


def cleared_tokens(applied: list[dict[str, Any]]) -> int:
    """Input tokens the applied edits left out of the server's count."""
    return sum(int(e.get("cleared_input_tokens") or 0) for e in applied)


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
