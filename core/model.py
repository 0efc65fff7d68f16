"""The model seam: what a request is, what a model does with it, and the facts we know about models.

``Request`` is everything one Messages API call sends. ``Model`` is the one-method protocol the rest of
the program talks to: ``agent.runtime.client.ModelClient`` implements it with the official SDK, and
``core.scripted.ScriptedModel`` with a script of replies (loop and pipeline tests). Model facts (output limits,
window, prices) are plain tables here so that every floor can use them without the SDK.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.errors import ThinkingBindingMismatch
from core.messages import Message

CACHE = {"type": "ephemeral"}


@dataclass
class Request:
    model: str
    system: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    max_tokens: int
    betas: list[str] = field(default_factory=list)
    extra_body: dict[str, Any] = field(default_factory=dict)
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    # how a failed attempt is retried: "main" (the full budget, each wait shown), "compaction" (a
    # compaction's own request in the foreground: a shorter budget, each wait shown as compaction's) or
    # "background" (a candidate or notes update: the shorter budget, quietly) or "once" (no retry: a
    # request whose failure has a ready fallback, like the server's summary)
    retry: str = "main"
    # preserved thinking's escape hatch, once a conversation needed it: "drop_block" (SPEC §17); it is
    # sent on every later request of that conversation, with its beta header (agent.runtime.client)
    block_binding: str | None = None
    # cache diagnostics: {"previous_message_id": id or None} on the main conversation's requests
    diagnostics: dict[str, Any] | None = None

    def params(self) -> dict[str, Any]:
        """Keyword arguments for the SDK, with cache breakpoints on tools, system and the tail."""
        p: dict[str, Any] = {
            "model": api_model_name(self.model),
            "max_tokens": self.max_tokens,
            "messages": _mark_tail(self.messages),
        }
        if self.system:
            p["system"] = self.system[:-1] + [{**self.system[-1], "cache_control": CACHE}]
        if self.tools:
            p["tools"] = _mark_tools(self.tools)
        if self.tool_choice:
            p["tool_choice"] = self.tool_choice
        thinking = self.valid_thinking()
        if thinking:
            p["thinking"] = thinking
        extra = self.extra_body if thinking else _without_thinking_edits(self.extra_body)
        if extra:
            p["extra_body"] = extra
        return _chained(p, self)

    def valid_thinking(self) -> dict[str, Any] | None:
        """``thinking`` as the API accepts it: a budget of at least MIN_THINKING and below max_tokens
        (cut down after max_tokens shrank), and none with a forced tool choice."""
        if not self.thinking or self.thinking.get("type") != "enabled":
            return self.thinking
        if (self.tool_choice or {}).get("type") in ("any", "tool"):
            return None
        budget = min(int(self.thinking.get("budget_tokens", 0)), self.max_tokens - 1)
        return {**self.thinking, "budget_tokens": budget} if budget >= MIN_THINKING else None


MIN_THINKING = 1024  # the API's smallest thinking budget
BINDING_BETA = "thinking-binding-controls-2026-08-01"  # thinking.block_binding needs it


def _chained(p: dict[str, Any], req: Request) -> dict[str, Any]:
    """The parameters that tie a request to its conversation: the escape hatch of preserved thinking
    (the models that have it think by default, so naming ``thinking`` changes nothing else) and the
    predecessor named for cache diagnostics. A request of such a conversation sent to an older model (a
    ``compactionModel`` of the 4.x family) carries neither: its mid-conversation system messages go as
    user text, which is all that model accepts."""
    if not preserves_thinking(api_model_name(req.model)):
        p["messages"] = [_as_user(m) if m.get("role") == "system" else m for m in p["messages"]]
    elif req.block_binding:
        thinking = dict(p.get("thinking") or {"type": "adaptive"})
        thinking["block_binding"] = {"prefix_mismatch_behavior": req.block_binding}
        p["thinking"] = thinking
    if req.diagnostics is not None:
        p["diagnostics"] = dict(req.diagnostics)
    return p


def _as_user(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    return {"role": "user", "content": blocks}


def _without_thinking_edits(extra: dict[str, Any]) -> dict[str, Any]:
    """extra_body without a clear-thinking context edit (the API refuses one when thinking is off)."""
    edits = (extra.get("context_management") or {}).get("edits")
    if not edits:
        return extra
    kept = [e for e in edits if not str(e.get("type", "")).startswith("clear_thinking")]
    return {**extra, "context_management": {**extra["context_management"], "edits": kept}}


def in_context(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool definitions the model's context holds: a deferred one (``defer_loading``) is not there
    until a tool search finds it, and the API does not count it."""
    return [t for t in tools if not t.get("defer_loading")]


def _mark_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The breakpoint goes on the last tool sent in full: deferred tools (``defer_loading``) are not part
    of the cached prefix, so one of them can't end it."""
    last = max((i for i, t in enumerate(tools) if not t.get("defer_loading")), default=None)
    if last is None:
        return list(tools)
    return [{**t, "cache_control": CACHE} if i == last else t for i, t in enumerate(tools)]


def _mark_tail(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Put a cache breakpoint on the last cacheable block of the last message (copying, not mutating)."""
    if not messages:
        return messages
    last = messages[-1]
    blocks = list(last["content"])
    for i in range(len(blocks) - 1, -1, -1):
        if blocks[i].get("type") not in ("thinking", "redacted_thinking"):
            blocks[i] = {**blocks[i], "cache_control": CACHE}
            break
    return messages[:-1] + [{**last, "content": blocks}]


class Model(Protocol):
    """Sends a request and returns the complete assistant message, or raises a core.errors.ModelError
    (Interrupted when ``cancel`` is set). ``emit_text`` streams text deltas to the user as events."""

    def stream(
        self, req: Request, *, cancel: threading.Event | None = None, emit_text: bool = True
    ) -> Message: ...


class ModelService(Model, Protocol):
    """What a session asks of its model: the requests, and the window the provider reports for a model
    (None when it can't say). The SDK client (agent.runtime.client) and core.scripted's stand-in."""

    # told when a request's thinking did not bind and it was sent again without (a session reports it)
    on_binding_fallback: Callable[[ThinkingBindingMismatch], None]

    def context_window(self, model: str) -> int | None: ...


# --- facts about models ------------------------------------------------------------------------------

_MAX_OUTPUT = [  # (prefix, max output tokens)
    ("claude-opus-4-1", 32_000),
    ("claude-opus-4-2", 32_000),
    ("claude-opus-4-0", 32_000),
    ("claude-opus-4-20", 32_000),
    ("claude-3-5", 8_192),
    ("claude-3", 4_096),
]
_PRICES = [  # (substring, input, output) USD per million tokens
    ("opus-4-1", 15.0, 75.0),
    ("opus-4-0", 15.0, 75.0),
    ("opus-4-2", 15.0, 75.0),
    ("opus", 5.0, 25.0),
    ("haiku-3", 0.25, 1.25),
    ("haiku", 1.0, 5.0),
    ("sonnet", 3.0, 15.0),
]


@contextmanager
def deadline(seconds: float) -> Iterator[threading.Event]:
    """A cancel event that sets itself after ``seconds``: a side request streamed with it is abandoned
    then (the background workers' requests, which nobody waits on)."""
    cancel = threading.Event()
    timer = threading.Timer(seconds, cancel.set)
    timer.daemon = True
    timer.start()
    try:
        yield cancel
    finally:
        timer.cancel()


# the models whose thinking is bound to its prefix (preserved thinking, SPEC §17)
_PRESERVED = re.compile(r"^claude-(?:(?:opus|sonnet|haiku)-5-5|(?:fable|mythos)-5-[12])(?:$|-|\[)")


def preserves_thinking(model: str) -> bool:
    """Whether the model checks a thinking block against everything before it (append-only history)."""
    return bool(_PRESERVED.match(model))


def max_output_tokens(model: str) -> int:
    for prefix, n in _MAX_OUTPUT:
        if model.startswith(prefix):
            return n
    return 64_000


def context_window_for(model: str) -> int:
    return 1_000_000 if "[1m]" in model or model.endswith("-1m") else 200_000


# models with preserved thinking that accept the top-level ``compaction`` parameter (the provider's
# compaction pages list them); the Models API's capabilities.compaction says so where it is reported
_ON_DEMAND_COMPACTION = (
    "claude-sonnet-5",
    "claude-opus-5",
    "claude-haiku-5",
    "claude-fable-5",
    "claude-mythos",
)


def offers_compaction(model: str) -> bool:
    """Whether ``model`` writes the server's on-demand summary (compact.server_summary)."""
    return api_model_name(model).startswith(_ON_DEMAND_COMPACTION)


def api_model_name(model: str) -> str:
    return model.replace("[1m]", "")


def cost_usd(model: str, usage: dict[str, Any]) -> float:
    price_in, price_out = 3.0, 15.0
    for key, i, o in _PRICES:
        if key in model:
            price_in, price_out = i, o
            break
    tokens_in = usage.get("input_tokens", 0) or 0
    write = usage.get("cache_creation_input_tokens", 0) or 0
    read = usage.get("cache_read_input_tokens", 0) or 0
    out = usage.get("output_tokens", 0) or 0
    return (tokens_in * price_in + write * price_in * 1.25 + read * price_in * 0.1 + out * price_out) / 1e6
