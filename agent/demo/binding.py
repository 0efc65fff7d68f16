"""Preserved thinking's prefix check and cache diagnostics, as the scripted server plays them (docs/preserved-thinking.md).

On the models with preserved thinking (the 5.5 family, Fable and Mythos 5.x) a ``thinking`` or
``redacted_thinking`` block is bound to what came before it when it was produced: the top-level
``system``, the ``tools`` (those without ``defer_loading``) and every earlier message, ``cache_control``
markers aside. ``Binding`` remembers, for each block the server hands out, a digest of that prefix and the
thinking blocks that stood before it. A later request is checked block by block:

- the content before the block (thinking left out) must digest the same;
- the thinking blocks before it must be the ones that stood there, except that the oldest may have been
  removed (removing thinking from earlier turns oldest first is allowed; leaving one out between others,
  or moving one, is not);
- a ``compaction`` block stands for exactly the messages it summarized: ``compaction_origin`` maps it
  back to them (the on-demand compaction endpoint fills it in), and the check reads those in its place;
- a block another model produced is dropped without an error (``model_binding_mismatch``): a model reads
  only its own family's thinking here.

What a failing block does depends on ``mode`` and the request: ``"off"`` checks nothing; ``"error"`` (the
real API's default for accounts since 2026-08-31) refuses the request with the API's 400 text, unless the
request asks for ``thinking.block_binding.prefix_mismatch_behavior: "drop_block"`` (with the beta header
``thinking-binding-controls-2026-08-01``): then the failing blocks, and the rest of their turn's run of
thinking blocks, are left out and listed in the response's ``input_transformations``.
Appending never breaks anything: new messages, ``role: "system"`` messages, a new block at the end.

Counters a test or benchmark reads: ``refused`` (requests refused by the check), ``fallbacks``
(requests that took the drop_block path), ``dropped`` (blocks left out for either reason),
``cache_misses`` (the diagnostics' reasons).

Cache diagnostics: a request with ``diagnostics: {previous_message_id}`` is compared with the request
that produced that message (model, system, tools, then whether its messages are a prefix of this one's)
and the response carries ``diagnostics.cache_miss_reason`` when the prefix could not be reused
(``null`` diagnostics when it could, or when no previous id was named).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

BINDING_BETA = "thinking-binding-controls-2026-08-01"
MODES = ("off", "error")
THINKING_KINDS = ("thinking", "redacted_thinking")
# models whose thinking is bound to its prefix (the provider's list for the prefix check)
PRESERVED = re.compile(r"^claude-(?:(?:opus|sonnet|haiku)-5-5|(?:fable|mythos)-5-[12])(?:$|-|\[)")


def preserves_thinking(model: object) -> bool:
    return isinstance(model, str) and bool(PRESERVED.match(model))


def family(model: str) -> str:
    """Whose thinking a model reads: its own family's (claude-sonnet-5-5-20261001 -> claude-sonnet-5-5)."""
    match = PRESERVED.match(model)
    return match.group(0).rstrip("-[") if match else model


def mismatch_text(path: str, kind: str) -> str:
    """The API's 400 text for a block that failed the prefix check."""
    field_name = "data" if kind == "redacted_thinking" else "signature"
    return (
        f"{path}: Invalid `{field_name}` in `{kind}` block. The block is bound to a different conversation. "
        'Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
    )


HEADER_TEXT = (
    "thinking.block_binding: this field is part of a beta; send the header "
    f"`anthropic-beta: {BINDING_BETA}` to use it"
)


def _canon(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _canon(v) for k, v in value.items() if k != "cache_control" and v is not None}
    if isinstance(value, list):
        return [_canon(v) for v in value]
    return value


def _text(value: Any) -> str:
    # ASCII escapes: a tool input may hold a lone surrogate (a file name that isn't UTF-8), which
    # would not encode to bytes for the digest
    return json.dumps(_canon(value), sort_keys=True, separators=(",", ":"))


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def key_of(block: dict[str, Any]) -> str | None:
    """What identifies a thinking block: its signature (or a redacted block's data)."""
    value = block.get("data") if block.get("type") == "redacted_thinking" else block.get("signature")
    return str(value) if value else None


@dataclass
class Bound:
    digest: str  # of the non-thinking content before the block
    before: tuple[str, ...]  # the thinking blocks that stood before it, oldest first
    model: str


@dataclass
class Fingerprint:
    model: str
    system: str
    tools: str
    messages: list[str]
    tokens: list[int]  # cumulative, estimated, after each message


@dataclass
class Outcome:
    """The check of one request: a refusal, or the body to use and what was left out of it."""

    refusal: str | None = None
    body: dict[str, Any] | None = None
    transformations: list[dict[str, Any]] = field(default_factory=list)


class Binding:
    """The prefix check and cache diagnostics; see the module docstring. Thread-safe."""

    def __init__(self, mode: str = "off") -> None:
        if mode not in MODES:
            raise ValueError(f"binding mode must be one of {MODES}, not {mode!r}")
        self.mode = mode
        self._bound: dict[str, Bound] = {}
        self._prints: dict[str, Fingerprint] = {}
        self._lock = threading.Lock()
        # a compaction block -> the messages it stands for (None: unknown, read as the block itself)
        self.compaction_origin: Callable[[dict[str, Any]], list[dict[str, Any]] | None] = lambda block: None
        self.refused: list[str] = []
        self.fallbacks: list[list[dict[str, Any]]] = []
        self.dropped: list[dict[str, Any]] = []
        self.cache_misses: list[dict[str, Any]] = []

    # -- the walk -----------------------------------------------------------------------------------

    def _units(self, body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any] | None, str | None]]:
        """(canonical text, the thinking block or None, its path in the request or None), in prefix order;
        a compaction block yields the messages it stands for (their thinking with no path)."""
        yield "system:" + _text(_blocks(body.get("system"))), None, None
        tools = [t for t in body.get("tools") or [] if not (isinstance(t, dict) and t.get("defer_loading"))]
        yield "tools:" + _text(tools), None, None
        for i, message in enumerate(body.get("messages") or []):
            yield from self._message_units(message, f"messages.{i}")

    def _message_units(
        self, message: Any, where: str | None
    ) -> Iterator[tuple[str, dict[str, Any] | None, str | None]]:
        if not isinstance(message, dict):
            return
        role = str(message.get("role"))
        opened = False
        for j, block in enumerate(_blocks(message.get("content"))):
            if not isinstance(block, dict):
                continue
            if block.get("type") in THINKING_KINDS:
                yield "", block, f"{where}.content.{j}" if where else None
                continue
            origin = self.compaction_origin(block) if block.get("type") == "compaction" else None
            if origin is not None:
                for replaced in origin:
                    yield from self._message_units(replaced, None)
                opened = False
                continue
            if not opened:  # a message with no content but thinking leaves no mark of its own
                yield f"role:{role}", None, None
                opened = True
            yield _text(block), None, None

    # -- the check ------------------------------------------------------------------------------------

    def check(self, body: Any, betas: str) -> Outcome:
        """Check a /v1/messages request before it is answered."""
        if not isinstance(body, dict):
            return Outcome(body=body)
        param = body.get("thinking")
        binding = param.get("block_binding") if isinstance(param, dict) else None
        if binding is not None and BINDING_BETA not in betas:
            return Outcome(refusal=HEADER_TEXT)
        if self.mode == "off" or not preserves_thinking(body.get("model")):
            return Outcome(body=body)
        behavior = (binding or {}).get("prefix_mismatch_behavior") or "error"
        failing = self._failing(body)
        if not failing:
            return Outcome(body=body)
        wrong_prefix = [(path, kind) for path, kind, reason in failing if reason == "prefix_binding_mismatch"]
        if wrong_prefix and behavior != "drop_block":
            path, kind = wrong_prefix[0]
            with self._lock:
                self.refused.append(path)
            return Outcome(refusal=mismatch_text(path, kind))
        transformations = [
            {"type": "thinking_dropped", "path": path, "reason": reason} for path, _, reason in failing
        ]
        with self._lock:
            if wrong_prefix:
                self.fallbacks.append(transformations)
            self.dropped.extend(transformations)
        return Outcome(
            body=_without(body, {t["path"] for t in transformations}), transformations=transformations
        )

    def _failing(self, body: dict[str, Any]) -> list[tuple[str, str, str]]:
        """(path, kind, reason) of each thinking block the request may not send as it is."""
        digest = hashlib.sha256()
        seen: list[str] = []
        failing: list[tuple[str, str, str]] = []
        failed_turn: str | None = None  # the message whose run of thinking blocks is being dropped
        model = family(str(body.get("model")))
        for text, block, path in self._units(body):
            if block is None:
                digest.update(text.encode() + b"\0")
                failed_turn = None
                continue
            key = key_of(block)
            bound = self._bound.get(key) if key else None
            if path is not None and bound is not None:
                turn = path.rsplit(".content.", 1)[0]
                if bound.model != model:
                    failing.append((path, block["type"], "model_binding_mismatch"))
                elif failed_turn == turn or not _still_bound(bound, digest.hexdigest(), seen):
                    failing.append((path, block["type"], "prefix_binding_mismatch"))
                    failed_turn = turn
            if key:
                seen.append(key)
        return failing

    # -- what the server hands out -------------------------------------------------------------------

    def issue(self, body: dict[str, Any], content: list[dict[str, Any]], message_id: str) -> dict[str, Any]:
        """Bind the reply's thinking blocks to their prefix; the response fields the check adds."""
        fields: dict[str, Any] = {}
        if not isinstance(body, dict):
            return fields
        model = str(body.get("model"))
        if preserves_thinking(model):
            self._bind(body, content, family(model))
        if "diagnostics" in body:
            fields["diagnostics"] = self._diagnose(body, message_id)
        return fields

    def _bind(self, body: dict[str, Any], content: list[dict[str, Any]], model: str) -> None:
        digest = hashlib.sha256()
        seen: list[str] = []
        reply = {"role": "assistant", "content": content}
        units = [*self._units(body), *self._message_units(reply, "reply")]
        with self._lock:
            for text, block, path in units:
                if block is None:
                    digest.update(text.encode() + b"\0")
                    continue
                key = key_of(block)
                if key is None:
                    continue
                if path is not None and path.startswith("reply."):
                    self._bound[key] = Bound(digest.hexdigest(), tuple(seen), model)
                seen.append(key)

    def _diagnose(self, body: dict[str, Any], message_id: str) -> dict[str, Any] | None:
        wanted = (body.get("diagnostics") or {}).get("previous_message_id")
        now = _fingerprint(body)
        with self._lock:
            self._prints[message_id] = now
            before = self._prints.get(wanted) if wanted else None
        if not wanted:
            return None
        reason = _miss(before, now)
        if reason is None:
            return None
        with self._lock:
            self.cache_misses.append(reason)
        return {"cache_miss_reason": reason}


def _still_bound(bound: Bound, digest: str, seen: list[str]) -> bool:
    """Same content before the block, and the thinking before it is what was there less the oldest."""
    if bound.digest != digest:
        return False
    if len(seen) > len(bound.before):
        return False
    return tuple(seen) == bound.before[len(bound.before) - len(seen) :]


def _without(body: dict[str, Any], paths: set[str]) -> dict[str, Any]:
    """The body with the blocks at ``paths`` left out (a copy; the request as recorded stays whole)."""
    messages = []
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(p.startswith(f"messages.{i}.content.") for p in paths):
            content = [b for j, b in enumerate(content) if f"messages.{i}.content.{j}" not in paths]
            message = {**message, "content": content}
        messages.append(message)
    return {**body, "messages": messages}


def _fingerprint(body: dict[str, Any]) -> Fingerprint:
    messages = [_text(m) for m in body.get("messages") or []]
    tokens, total = [], 0
    for text in messages:
        total += -(-len(text) // 4)
        tokens.append(total)
    return Fingerprint(
        str(body.get("model")),
        _text(_blocks(body.get("system"))),
        _text(body.get("tools") or []),
        messages,
        tokens,
    )


def _miss(before: Fingerprint | None, now: Fingerprint) -> dict[str, Any] | None:
    """The cache_miss_reason of ``now`` against the request named as its predecessor (None: no miss)."""
    if before is None:
        return {"type": "previous_message_not_found"}
    prefix = -(-(len(before.system) + len(before.tools)) // 4) + (before.tokens[-1] if before.tokens else 0)
    if before.model != now.model:
        return {"type": "model_changed", "cache_missed_input_tokens": prefix}
    if before.system != now.system:
        return {"type": "system_changed", "cache_missed_input_tokens": prefix}
    if before.tools != now.tools:
        return {"type": "tools_changed", "cache_missed_input_tokens": prefix}
    if now.messages[: len(before.messages)] != before.messages:
        same = next(
            (k for k, (a, b) in enumerate(zip(before.messages, now.messages, strict=False)) if a != b),
            min(len(before.messages), len(now.messages)),
        )
        kept = before.tokens[same - 1] if same else 0
        missed = (before.tokens[-1] if before.tokens else 0) - kept
        return {"type": "messages_changed", "cache_missed_input_tokens": missed}
    return None
