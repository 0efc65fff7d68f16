"""The model seam: what a request is, what a model does with it, and the facts we know about models.

``Request`` is everything one Messages API call sends. ``Model`` is the one-method protocol the rest of
the program talks to: ``agent.runtime.sdk.ModelClient`` implements it with the official SDK, and
``core.scripted.ScriptedModel`` with a script of replies (loop and pipeline tests). Model facts (what a
model accepts, output limits, window, prices) are core.models' families, so every floor can use them
without the SDK.

``Request.params`` is the one place every request passes through on its way to the SDK (main replies,
summaries, notes updates, collapses, subagents): it leaves out what the request's model refuses
(core.models.Family), whatever the builder asked for, so no kind of request can carry it.
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
from core.models import EFFORTS, NEWEST, Family, api_name, family_of
from core.models import cost_usd as _cost

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
    effort: str | None = None  # output_config.effort (None: the model's default)
    # how a failed attempt is retried: "main" (the full budget, each wait shown), "compaction" (a
    # compaction's own request in the foreground: a shorter budget, each wait shown as compaction's) or
    # "background" (a candidate or notes update: the shorter budget, quietly) or "once" (no retry: a
    # request whose failure has a ready fallback, like the server's summary)
    retry: str = "main"
    # preserved thinking's escape hatch, once a conversation needed it: "drop_block" (docs/preserved-thinking.md); it is
    # sent on every later request of that conversation, with its beta header (agent.runtime.sdk)
    block_binding: str | None = None
    # cache diagnostics: {"previous_message_id": id or None} on the main conversation's requests
    diagnostics: dict[str, Any] | None = None

    def params(self, family: Family | None = None) -> dict[str, Any]:
        """Keyword arguments for the SDK, with cache breakpoints on tools, system and the tail, and without
        anything the model refuses (core.models.Family): a thinking type it doesn't take, an effort it
        lacks, a budget out of bounds, a forced tool choice, an assistant prefill, sampling parameters, an
        output limit above its own. ``family`` is what the client learned of the model (default: the
        table's). ``betas`` is there when the request needs any of its own (the client adds its own)."""
        family = family or family_of(self.model)
        messages = self.messages
        if family.refuses_prefill and messages and messages[-1].get("role") == "assistant":
            messages = messages[:-1]  # a prefill: the model answers the user message before it instead
        p: dict[str, Any] = {
            "model": api_model_name(self.model),
            "max_tokens": min(self.max_tokens, family.max_output),
            "messages": _mark_tail(messages),
        }
        if self.system:
            p["system"] = self.system[:-1] + [{**self.system[-1], "cache_control": CACHE}]
        if self.tools:
            p["tools"] = _mark_tools(self.tools)
        choice = self.legal_tool_choice(family)
        if choice:
            p["tool_choice"] = choice
        thinking, effort = self.legal_thinking(family)
        if thinking:
            p["thinking"] = thinking
        if effort:
            p["output_config"] = {"effort": effort}
        extra = self.legal_extra_body(family, thinking)
        if extra:
            p["extra_body"] = extra
        if (thinking or {}).get("display") == "updates":
            p["betas"] = [DISPLAY_UPDATES_BETA]
        return _chained(p, self)

    def legal_tool_choice(self, family: Family) -> dict[str, Any] | None:
        """``tool_choice`` as the model takes it: a forced choice it refuses becomes "auto" (the builder
        asks for the tool in words, and copes without it)."""
        choice = self.tool_choice
        if choice and choice.get("type") in ("any", "tool") and family.refuses_forced_tool:
            return {"type": "auto"}
        return choice

    def legal_extra_body(self, family: Family, thinking: dict[str, Any] | None) -> dict[str, Any]:
        """``extra_body`` without the thinking edits of a request that doesn't think, and without the
        sampling parameters a model refuses."""
        thinks = (
            thinking is not None
            and thinking.get("type") != "disabled"
            or (thinking is None and family.thinks_by_default)
        )
        extra = self.extra_body if thinks else _without_thinking_edits(self.extra_body)
        if family.refuses_sampling:
            extra = {k: v for k, v in extra.items() if k not in ("temperature", "top_p", "top_k")}
        return extra

    def legal_thinking(self, family: Family) -> tuple[dict[str, Any] | None, str | None]:
        """(thinking, effort) as the model takes them: a type it doesn't accept is left out (its default
        then applies), between_tools only at an effort it allows, an effort it lacks lowered to the
        deepest it has below it."""
        thinking = self.valid_thinking()
        kind = (thinking or {}).get("type")
        if kind is not None and kind not in family.thinking:
            thinking = None
        effort = _offered(self.effort, family.efforts)
        if kind == "between_tools" and thinking is not None and (effort or "high") not in family.stop_efforts:
            thinking = None
        if thinking is not None and thinking.get("type") in ("between_tools", "disabled"):
            thinking = {"type": thinking["type"]}  # these take no display
        return thinking, effort

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
DISPLAY_UPDATES_BETA = "thinking-display-updates-2026-08-18"  # display "updates": the progress text


def _offered(effort: str | None, offered: tuple[str, ...]) -> str | None:
    """``effort`` if the model offers it, else the deepest level it offers below it (None: none)."""
    if effort is None or not offered or effort not in EFFORTS:
        return None
    below = [e for e in EFFORTS[: EFFORTS.index(effort) + 1] if e in offered]
    return below[-1] if below else None


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
    (None when it can't say). The SDK client (agent.runtime.sdk) and core.scripted's stand-in."""

    # told when a request's thinking did not bind and it was sent again without (a session reports it)
    on_binding_fallback: Callable[[ThinkingBindingMismatch], None]

    def context_window(self, model: str) -> int | None: ...


# --- facts about models ------------------------------------------------------------------------------


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


# the models whose thinking is bound to its prefix (preserved thinking, docs/preserved-thinking.md)
_PRESERVED = re.compile(r"^claude-(?:(?:opus|sonnet|haiku)-5-5|(?:fable|mythos)-5-[12])(?:$|-|\[)")


def preserves_thinking(model: str) -> bool:
    """Whether the model checks a thinking block against everything before it (append-only history)."""
    return bool(_PRESERVED.match(model))


def max_output_tokens(model: str) -> int:
    return family_of(model).max_output


def context_window_for(model: str) -> int:
    """The model's window: its family's, 1M for a ``[1m]`` / ``-1m`` name."""
    if "[1m]" in model or model.endswith("-1m"):
        return 1_000_000
    return family_of(model).window


# models with preserved thinking that accept the top-level ``compaction`` parameter (the provider's
# compaction pages list them): what is assumed of a model whose capabilities the Models API did not report
_ON_DEMAND_COMPACTION = (
    "claude-sonnet-5",
    "claude-opus-5",
    "claude-haiku-5",
    "claude-fable-5",
    "claude-mythos",
)


def offers_compaction(model: str, family: Family | None = None) -> bool:
    """Whether ``model`` writes the server's on-demand summary (compact.compaction.server_summary), and so binds its
    thinking to its prefix. ``family`` is what the client learned of it (core.models.learn): where the Models
    API reported ``capabilities.compaction``, that answer stands; else the name decides. A name the table
    doesn't know has the newest family's rules (core.models): it thinks unasked, so its thinking must be
    kept as the newest family's is (a summary request in its tool loop that left the thinking out was
    refused)."""
    if family is not None and family.compaction is not None:
        return family.compaction
    return api_model_name(model).startswith(_ON_DEMAND_COMPACTION) or family_of(model) is NEWEST


def api_model_name(model: str) -> str:
    return api_name(model)


def cost_usd(model: str, usage: dict[str, Any]) -> float:
    """What ``usage`` cost at the model's family's prices (core.models names the table's sources)."""
    return _cost(model, usage)
