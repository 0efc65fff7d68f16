"""A fake Anthropic Messages API on 127.0.0.1, spoken to by the official SDK unchanged.

Tests start a ``FakeAPI`` (a real ``ThreadingHTTPServer`` on an ephemeral loopback port), point the SDK
at ``api.url`` and script what the "model" says::

    with FakeAPI() as api:
        api.reply_tool("Read", {"file_path": "/x"})
        api.reply_text("done")
        client = anthropic.Anthropic(base_url=api.url, api_key="test-key")
        ...                                   # run the agent
        api.check()                           # no violations, no unconsumed steps

Endpoints: ``POST /v1/messages`` (JSON, or SSE when ``"stream": true``), ``POST /v1/messages/count_tokens``,
``GET /v1/models`` and ``GET /v1/models/{id}``.

How a ``POST /v1/messages`` is answered, in order:

1. The request is validated like the real API does (``validate``). A bad request gets a 400
   ``invalid_request_error`` *and* is recorded in ``api.violations`` - the agent must never send one.
2. If ``api.context_window`` is set and the estimate exceeds it, the answer is prompt-too-long; no step
   is consumed.
3. The first matching route registered with ``api.on(predicate, responder)`` answers.
4. Otherwise the next step of ``api.script`` answers. An empty script answers 500 and records an
   "unexpected request" violation.

Token estimate (``estimate_tokens``): each tool, system block and message content block is serialised
as compact JSON with sorted keys, ``cache_control`` and null fields removed, tagged with its role and
message index; the estimate is ceil(total characters / 4). It is deterministic, so a test can compute
it for a body and set a limit just below or above it. ``FakeAPI(tokenizer=...)`` replaces it with a
server-side tokenizer of the test's choosing (tokens of each cleaned block), for the calibration tests.

Prompt caching (``PromptCache``): blocks are taken in the API's order tools -> system -> messages. At each
``cache_control`` breakpoint the hash of the prefix up to it is stored. A later request reads the cache
from the longest stored prefix that ends at a breakpoint or up to 20 blocks before one (the API's
lookback); the part from there up to its last breakpoint is written (``cache_creation_input_tokens``) and
the rest is plain ``input_tokens``. The three always add up to the estimate.

Streams: ``message_start``, ``ping``, then per block ``content_block_start`` / deltas /
``content_block_stop``, then ``message_delta`` and ``message_stop``. ``drop_after=N`` on a reply sends the
first N of those events and closes the socket without ending the chunked body, as a dropped network
connection looks; on a non-streaming request it hangs up without any response. ``Reply.raw_tool`` streams
a tool input's JSON text as given (invalid JSON, a lone surrogate escape), and ``Error(headers=...)`` sends
headers of the test's choosing (a ``retry-after`` alone, ``x-should-retry``).

What the SDK (anthropic 2.12.0 on httpx2) makes of the failures, as the tests pin down:

- dropped stream: iterating, ``get_final_message()`` and ``until_done()`` raise a raw
  ``httpx2.RemoteProtocolError`` - not an ``anthropic`` exception, and not retried by the SDK. The
  partial message is still in ``stream.current_message_snapshot`` with ``stop_reason`` None.
- dropped non-streaming request: ``anthropic.APIConnectionError``, which the SDK retries.
- SSE ``error`` event after a 200 (``stream_error``): ``anthropic.APIStatusError`` with ``status_code``
  200; the error type is only in ``exc.body["error"]["type"]``.
- 429 / 529 carry ``retry-after: 0`` and ``retry-after-ms: 1`` so SDK retries are instant; a 500 has no
  such header and the SDK backs off about half a second.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import re
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# --------------------------------------------------------------------------------------------------
# Content blocks and request helpers

_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):06d}"


def text_block(text: str) -> dict:
    return {"type": "text", "text": text}


def tool_use_block(name: str, input: dict, id: str | None = None) -> dict:
    return {"type": "tool_use", "id": id or _new_id("toolu"), "name": name, "input": input}


def thinking_block(thinking: str, signature: str = "fake-signature") -> dict:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def _blocks(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [text_block(content)]
    return list(content or [])


def _texts(content: Any, *, deep: bool) -> Iterator[str]:
    """Text of a content value; ``deep`` also yields tool inputs, tool results and thinking."""
    for block in _blocks(content):
        kind = block.get("type")
        if kind == "text":
            yield block.get("text", "")
        elif deep and kind == "tool_result":
            yield from _texts(block.get("content"), deep=True)
        elif deep and kind == "tool_use":
            yield json.dumps(block.get("input"))
        elif deep and kind == "thinking":
            yield block.get("thinking", "")


def last_user_text(body: dict) -> str:
    """The text blocks of the last user message, joined by newlines ("" when there is none)."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    return "\n".join(_texts(users[-1].get("content"), deep=False)) if users else ""


def request_text(body: dict) -> str:
    """Everything textual in a request: system, texts, tool inputs and results, thinking."""
    parts = list(_texts(body.get("system"), deep=True))
    for message in body.get("messages") or []:
        parts.extend(_texts(message.get("content"), deep=True))
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------------
# Script steps


@dataclass
class Reply:
    """An assistant message. ``stop_reason`` None means "tool_use" if it calls a tool, else "end_turn"."""

    content: list[dict]
    stop_reason: str | None = None
    usage: dict | None = None  # merged over the computed usage
    context_management: dict | None = None  # e.g. {"applied_edits": [...]}
    drop_after: int | None = None  # SSE events sent before the connection is cut
    stream_error: tuple[str, str] | None = None  # (type, message) sent as an SSE error at drop_after
    raw_inputs: dict[str, str] | None = None  # tool_use id -> the input_json_delta text streamed, as is

    @classmethod
    def raw_tool(cls, name: str, raw_json: str, *, id: str | None = None, **kw: Any) -> Reply:
        """A tool call whose streamed input is ``raw_json`` verbatim (invalid JSON, say)."""
        block = tool_use_block(name, {}, id)
        return cls([block], raw_inputs={block["id"]: raw_json}, **kw)

    @classmethod
    def text(cls, text: str, *, thinking: str | None = None, **kw: Any) -> Reply:
        return cls([*_thinking(thinking), text_block(text)], **kw)

    @classmethod
    def tool(
        cls, name: str, input: dict, *, id: str | None = None, text: str | None = None, **kw: Any
    ) -> Reply:
        return cls.tools([(name, input, id)], text=text, **kw)

    @classmethod
    def tools(
        cls, calls: list[tuple], *, text: str | None = None, thinking: str | None = None, **kw: Any
    ) -> Reply:
        """Parallel tool calls; each call is ``(name, input)`` or ``(name, input, id)``."""
        uses = [tool_use_block(*call) for call in calls]
        return cls([*_thinking(thinking), *([text_block(text)] if text else []), *uses], **kw)


def _thinking(thinking: str | None) -> list[dict]:
    return [thinking_block(thinking)] if thinking else []


@dataclass
class Error:
    status: int
    type: str
    message: str
    retry_after: float | None = None  # seconds; sent as retry-after and retry-after-ms
    headers: dict[str, str] | None = None  # sent as well (e.g. only a retry-after)


@dataclass
class PromptTooLong:
    """400 "prompt is too long: A tokens > B maximum"; A defaults to the estimate, B to the window."""

    actual: int | None = None
    maximum: int | None = None


Step = Reply | Error | PromptTooLong | Callable[[dict], Any]

_ERROR_DEFAULTS = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Permission denied"),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


@dataclass
class Route:
    """A side channel: requests matching ``predicate`` are answered by ``responder``."""

    predicate: Callable[[dict], bool]
    responder: Step
    once: bool = False
    hits: list[dict] = field(default_factory=list)

    @property
    def spent(self) -> bool:
        return self.once and bool(self.hits)


@dataclass
class Request:
    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-cased names
    body: Any
    status: int | None = None  # status of the answer given


# --------------------------------------------------------------------------------------------------
# Token estimate and prompt cache

CACHE_LOOKBACK = 20  # blocks before a breakpoint the API checks for an earlier cache entry


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k != "cache_control" and v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _tagged_blocks(body: dict) -> list[tuple[list, Any]]:
    tagged: list[tuple[list, Any]] = [(["tool"], tool) for tool in body.get("tools") or []]
    tagged += [(["system"], block) for block in _blocks(body.get("system"))]
    for index, message in enumerate(body.get("messages") or []):
        tagged += [([message.get("role"), index], block) for block in _blocks(message.get("content"))]
    return tagged


def _units(body: dict) -> list[tuple[str, bool]]:
    """(canonical text, carries a cache breakpoint) for every cacheable block, in cache order."""
    return [
        (
            json.dumps([*tag, _clean(block)], separators=(",", ":"), sort_keys=True, ensure_ascii=False),
            isinstance(block, dict) and block.get("cache_control") is not None,
        )
        for tag, block in _tagged_blocks(body)
    ]


# a server's own tokenizer: the tokens of one block (a tool definition, a system or content block)
Tokenizer = Callable[[Any], int]


def _tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def estimate_tokens(body: dict, tokenizer: Tokenizer | None = None) -> int:
    """The fake's input-token count for a request (see the module docstring), or ``tokenizer``'s."""
    if tokenizer is not None:
        return sum(tokenizer(_clean(block)) for _, block in _tagged_blocks(body))
    return _tokens(sum(len(text) for text, _ in _units(body)))


class PromptCache:
    """Prefix hashes written at cache breakpoints, and the usage split they imply."""

    def __init__(self, min_tokens: int = 0, tokenizer: Tokenizer | None = None) -> None:
        self.min_tokens = min_tokens
        self.tokenizer = tokenizer
        self._stored: set[str] = set()

    def account(self, body: dict) -> dict:
        units = _units(body)
        blocks = [block for _, block in _tagged_blocks(body)]
        digest = hashlib.sha256(str(body.get("model")).encode())
        hashes, tokens, chars, counted = [digest.hexdigest()], [0], 0, 0
        for (text, _), block in zip(units, blocks, strict=True):
            digest.update(text.encode())
            chars += len(text)
            if self.tokenizer is not None:
                counted += self.tokenizer(_clean(block))
            hashes.append(digest.hexdigest())
            tokens.append(counted if self.tokenizer is not None else _tokens(chars))
        # Boundary k is the end of block k-1; a breakpoint on block k-1 caches the prefix up to k.
        breakpoints = [k for k, (_, marked) in enumerate(units, 1) if marked and tokens[k] >= self.min_tokens]
        candidates = {k for b in breakpoints for k in range(max(1, b - CACHE_LOOKBACK), b + 1)}
        read_at = max((k for k in candidates if hashes[k] in self._stored), default=0)
        write_to = max(breakpoints, default=0)
        self._stored.update(hashes[k] for k in breakpoints)
        read = tokens[read_at]
        written = max(0, tokens[write_to] - read)
        return {
            "input_tokens": tokens[-1] - read - written,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
        }


# --------------------------------------------------------------------------------------------------
# Validation: what the real API refuses


_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def validate(body: Any, *, count_only: bool = False) -> list[str]:
    """Problems the real API would answer with 400; ``count_only`` is for count_tokens (no max_tokens)."""
    if not isinstance(body, dict):
        return ["request body must be a JSON object"]
    problems = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model: Field required")
    if not count_only:
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            problems.append("max_tokens: Field required")
        elif max_tokens < 1:
            problems.append("max_tokens: Input should be greater than or equal to 1")
    problems += _tool_problems(body.get("tools"))
    problems += _system_problems(body.get("system"))
    problems += _message_problems(body.get("messages"))
    marks = sum(1 for _, marked in _units(body) if marked)
    if marks > 4:
        problems.append(f"A maximum of 4 blocks with cache_control may be provided. Found {marks}.")
    return problems


def _tool_problems(tools: Any) -> list[str]:
    if tools is None:
        return []
    names = [tool.get("name") for tool in tools]
    problems = [
        f"tools.{i}.name: String should match pattern '{_TOOL_NAME.pattern}'"
        for i, name in enumerate(names)
        if not isinstance(name, str) or not _TOOL_NAME.match(name)
    ]
    if len(set(names)) != len(names):
        problems.append("tools: Tool names must be unique.")
    return problems


def _system_problems(system: Any) -> list[str]:
    if system is None or isinstance(system, str):
        return []
    return [problem for i, block in enumerate(system) for problem in _text_problems(block, f"system.{i}")]


def _text_problems(block: dict, where: str) -> list[str]:
    text = block.get("text")
    if block.get("type") != "text":
        return []
    if not isinstance(text, str) or text == "":
        return [f"{where}.text: text content blocks must be non-empty"]
    if not text.strip():
        return [f"{where}.text: text content blocks must contain non-whitespace text"]
    return []


def _message_problems(messages: Any) -> list[str]:
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    if messages[0].get("role") != "user":
        return ['messages: first message must use the "user" role']
    problems = []
    seen_tool_ids: set[str] = set()
    for i, message in enumerate(messages):
        where, role, last = f"messages.{i}", message.get("role"), i == len(messages) - 1
        if role not in ("user", "assistant"):
            problems.append(f"{where}.role: Input should be 'user' or 'assistant'")
            continue
        content = message.get("content")
        if not content and not (last and role == "assistant"):
            problems.append(
                f"{where}: all messages must have non-empty content "
                "except for the optional final assistant message"
            )
            continue
        if isinstance(content, str) and content and not content.strip():
            problems.append(f"{where}.content: text content blocks must contain non-whitespace text")
        blocks = _blocks(content)
        for j, block in enumerate(blocks):
            problems += _block_problems(block, role, f"{where}.content.{j}", seen_tool_ids)
        if role == "user":
            problems += _result_order_problems(blocks, where)
        if (
            last
            and role == "assistant"
            and blocks
            and blocks[-1].get("type") == "text"
            and blocks[-1].get("text", "") != blocks[-1].get("text", "").rstrip()
        ):
            problems.append("messages: final assistant content cannot end with trailing whitespace")
    return problems + _pairing_problems(messages)


def _block_problems(block: Any, role: str, where: str, seen_tool_ids: set[str]) -> list[str]:
    if not isinstance(block, dict) or "type" not in block:
        return [f"{where}: content blocks must be objects with a type"]
    kind = block["type"]
    if kind == "text":
        return _text_problems(block, where)
    if kind == "tool_use":
        if role != "assistant":
            return [f"{where}: tool_use blocks may only appear in assistant messages"]
        if block.get("id") in seen_tool_ids:
            return [f"{where}: `tool_use` ids must be unique: {block.get('id')}"]
        seen_tool_ids.add(block.get("id"))
        if not isinstance(block.get("input"), dict):
            return [f"{where}.input: Input should be a valid dictionary"]
    if kind == "tool_result":
        if role != "user":
            return [f"{where}: tool_result blocks may only appear in user messages"]
        inner = block.get("content")
        if isinstance(inner, list):
            return [p for k, b in enumerate(inner) for p in _text_problems(b, f"{where}.content.{k}")]
    return []


def _result_order_problems(blocks: list[dict], where: str) -> list[str]:
    kinds = [block.get("type") for block in blocks if isinstance(block, dict)]
    if any(a != "tool_result" and b == "tool_result" for a, b in itertools.pairwise(kinds)):
        return [f"{where}: tool_result blocks must come before any other content in a user message"]
    return []


def _ids_of(message: dict | None, kind: str, key: str) -> list[str]:
    if message is None:
        return []
    return [
        b.get(key) for b in _blocks(message.get("content")) if isinstance(b, dict) and b.get("type") == kind
    ]


def _pairing_problems(messages: list[dict]) -> list[str]:
    problems = []
    for i, message in enumerate(messages):
        following = messages[i + 1] if i + 1 < len(messages) else None
        previous = messages[i - 1] if i > 0 else None
        if message.get("role") == "assistant":
            answered = (
                set(_ids_of(following, "tool_result", "tool_use_id"))
                if following and following.get("role") == "user"
                else set()
            )
            missing = [t for t in _ids_of(message, "tool_use", "id") if t not in answered]
            if missing:
                problems.append(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
        else:
            results = _ids_of(message, "tool_result", "tool_use_id")
            offered = (
                set(_ids_of(previous, "tool_use", "id"))
                if previous and previous.get("role") == "assistant"
                else set()
            )
            orphans = [t for t in results if t not in offered]
            if orphans:
                problems.append(
                    f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{', '.join(orphans)}. Each `tool_result` block must have a corresponding "
                    "`tool_use` block in the previous message."
                )
            if len(set(results)) != len(results):
                problems.append(f"messages.{i}: each tool_use id may be answered by one tool_result only")
    return problems


# --------------------------------------------------------------------------------------------------
# Wire format


def _output_tokens(content: list[dict]) -> int:
    chars = sum(len(b.get("text") or b.get("thinking") or json.dumps(b.get("input", ""))) for b in content)
    return max(1, _tokens(chars))


def _pieces(text: str, parts: int = 3) -> list[str]:
    size = max(1, math.ceil(len(text) / parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _block_events(index: int, block: dict, raw_inputs: dict[str, str] | None = None) -> list[tuple[str, dict]]:
    kind = block["type"]
    if kind == "text":
        start, deltas = text_block(""), [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
    elif kind == "tool_use":
        start = {**block, "input": {}}
        raw = (raw_inputs or {}).get(block["id"])
        deltas = [
            {"type": "input_json_delta", "partial_json": p}
            for p in _pieces(raw if raw is not None else json.dumps(block["input"]))
        ]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:  # redacted_thinking and anything else arrive whole
        start, deltas = block, []
    return [
        ("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
        *[
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ],
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


def stream_events(message: dict, raw_inputs: dict[str, str] | None = None) -> list[tuple[str, dict]]:
    """The SSE events (name, data) that stream ``message`` (tool inputs in ``raw_inputs`` as given)."""
    opening = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**message["usage"], "output_tokens": 1},
    }
    opening.pop("context_management", None)
    closing: dict = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    }
    if message.get("context_management") is not None:
        closing["context_management"] = message["context_management"]
    return [
        ("message_start", {"type": "message_start", "message": opening}),
        ("ping", {"type": "ping"}),
        *[event for i, block in enumerate(message["content"]) for event in _block_events(i, block, raw_inputs)],
        ("message_delta", closing),
        ("message_stop", {"type": "message_stop"}),
    ]


@dataclass
class _Answer:
    """What the handler writes: JSON, an SSE stream, or nothing at all (a hang-up)."""

    status: int
    payload: Any = None
    events: list[tuple[str, dict]] | None = None
    cut_after: int | None = None
    stream_error: tuple[str, str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hang_up: bool = False


def _error_answer(status: int, kind: str, message: str, headers: dict | None = None) -> _Answer:
    return _Answer(
        status, {"type": "error", "error": {"type": kind, "message": message}}, headers=headers or {}
    )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path, _, query = self.path.partition("?")
        headers = {name.lower(): value for name, value in self.headers.items()}
        answer = self.server.api._answer(self.command, path, query, headers, raw)
        try:
            self._write(answer)
        except OSError:  # the client went away first
            self.close_connection = True

    def _write(self, answer: _Answer) -> None:
        if answer.hang_up:
            self.close_connection = True
            return
        request_id = _new_id("req")
        self.send_response(answer.status)
        self.send_header("request-id", request_id)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        if answer.events is None:
            data = json.dumps(answer.payload).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for n, (name, data) in enumerate(answer.events):
            if n == answer.cut_after:
                break
            self._chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n")
        if answer.stream_error:
            kind, message = answer.stream_error
            error = {"type": "error", "error": {"type": kind, "message": message}}
            self._chunk(f"event: error\ndata: {json.dumps(error)}\n\n")
        elif answer.cut_after is not None:
            # No terminating chunk: to the client this is a connection dropped mid-body.
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    api: FakeAPI

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up on idle keep-alive connections is normal; anything else is worth a traceback.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


# --------------------------------------------------------------------------------------------------
# The fake itself


DEFAULT_MODELS = ("claude-sonnet-4-6", "claude-opus-4-1", "claude-sonnet-4-5", "claude-haiku-4-5")


def model_info(id: str, max_input_tokens: int = 200_000, max_tokens: int = 64_000) -> dict:
    return {
        "type": "model",
        "id": id,
        "display_name": id.replace("-", " ").title(),
        "created_at": "2025-01-01T00:00:00Z",
        "lifecycle": "active",
        "max_input_tokens": max_input_tokens,
        "max_tokens": max_tokens,
    }


class FakeAPI:
    """A scripted Messages API server; see the module docstring. Thread-safe."""

    def __init__(
        self,
        *,
        context_window: int | None = None,
        models: list[dict] | None = None,
        cache_min_tokens: int = 0,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.context_window = context_window
        self.tokenizer = tokenizer
        self.models: dict[str, dict] = {m["id"]: m for m in models or [model_info(i) for i in DEFAULT_MODELS]}
        self.script: list[Step] = []
        self.routes: list[Route] = []
        self.requests: list[Request] = []
        self.violations: list[str] = []
        self.cache = PromptCache(cache_min_tokens, tokenizer)
        self._lock = threading.RLock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeAPI:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.api = self
        # A short poll interval keeps close() (which waits for one poll) from adding 0.5 s per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), name="fakeapi", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        assert self._server is not None, "FakeAPI is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def env(self) -> dict[str, str]:
        """Environment variables that point the SDK at this server."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": "test-key"}

    # -- scripting -------------------------------------------------------------------------------

    def add(self, step: Step) -> Step:
        with self._lock:
            self.script.append(step)
        return step

    def reply(
        self,
        content: list[dict] | str,
        *,
        stop_reason: str | None = None,
        usage: dict | None = None,
        context_management: dict | None = None,
    ) -> Reply:
        return self.add(Reply(_blocks(content), stop_reason, usage, context_management))

    def reply_text(self, text: str, *, usage: dict | None = None, thinking: str | None = None) -> Reply:
        return self.add(Reply.text(text, usage=usage, thinking=thinking))

    def reply_tool(self, name: str, input: dict, *, id: str | None = None, text: str | None = None) -> Reply:
        return self.add(Reply.tool(name, input, id=id, text=text))

    def reply_tools(self, calls: list[tuple], *, text: str | None = None) -> Reply:
        return self.add(Reply.tools(calls, text=text))

    def error(
        self,
        status: int,
        type: str | None = None,
        message: str | None = None,
        *,
        retry_after: float | None = None,
    ) -> Error:
        """An error answer; 429 and 529 carry a tiny retry-after unless told otherwise."""
        default_type, default_message = _ERROR_DEFAULTS.get(status, ("api_error", f"Error {status}"))
        if retry_after is None and status in (429, 529):
            retry_after = 0
        return self.add(Error(status, type or default_type, message or default_message, retry_after))

    def prompt_too_long(self, actual: int | None = None, maximum: int | None = None) -> PromptTooLong:
        return self.add(PromptTooLong(actual, maximum))

    def drop_stream(self, after_events: int = 3, reply: Reply | str | None = None) -> Reply:
        """A reply whose stream is cut after ``after_events`` SSE events (message_start is the first)."""
        step = _as_reply(reply, "This reply is cut off before it ends")
        step.drop_after = after_events
        return self.add(step)

    def stream_error(
        self,
        after_events: int = 3,
        type: str = "overloaded_error",
        message: str = "Overloaded",
        reply: Reply | str | None = None,
    ) -> Reply:
        """A reply whose stream turns into an SSE ``error`` event after ``after_events`` events."""
        step = _as_reply(reply, "This reply fails part way")
        step.drop_after, step.stream_error = after_events, (type, message)
        return self.add(step)

    def on(self, predicate: Callable[[dict], bool], responder: Step, *, once: bool = False) -> Route:
        """Answer matching /v1/messages requests before the script; a ``once`` route must fire.

        A persistent route repeats the very same step, so if it calls tools give it a callable that
        builds a fresh ``Reply`` each time - repeated tool_use ids are a violation.
        """
        route = Route(predicate, responder, once)
        with self._lock:
            self.routes.append(route)
        return route

    # -- checks ----------------------------------------------------------------------------------

    @property
    def message_requests(self) -> list[Request]:
        return [r for r in self.requests if r.method == "POST" and r.path == "/v1/messages"]

    def assert_done(self) -> None:
        with self._lock:
            left = [*self.script, *[r.responder for r in self.routes if r.once and not r.hits]]
        assert not left, f"FakeAPI: {len(left)} scripted step(s) never requested: {left!r}"

    def check(self) -> None:
        """No violations and nothing left unconsumed."""
        assert self.violations == [], f"FakeAPI violations: {self.violations}"
        self.assert_done()

    # -- answering (called from handler threads) ------------------------------------------------

    def _answer(self, method: str, path: str, query: str, headers: dict[str, str], raw: bytes) -> _Answer:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        request = Request(method, path, query, headers, body)
        with self._lock:
            self.requests.append(request)
            outcome = self._guarded(request, self._dispatch)
        # Callable steps run outside the lock: a slow responder must not hold up concurrent requests.
        answer = outcome if isinstance(outcome, _Answer) else self._guarded(request, self._render, outcome)
        request.status = answer.status
        return answer

    def _guarded(self, request: Request, fn: Callable, *args: Any) -> Any:
        try:
            return fn(request, *args)
        except Exception as exc:  # a broken test script must fail the test, not hang the client
            return self._refuse(request, 500, "api_error", f"FakeAPI crashed: {exc!r}")

    def _violation(self, request: Request, problem: str) -> None:
        with self._lock:
            number = next(n for n, seen in enumerate(self.requests, 1) if seen is request)
            self.violations.append(f"{request.method} {request.path} (request {number}): {problem}")

    def _refuse(self, request: Request, status: int, kind: str, problem: str) -> _Answer:
        self._violation(request, problem)
        return _error_answer(status, kind, problem)

    def _dispatch(self, request: Request) -> _Answer | Step:
        """An answer, or for /v1/messages the step that will answer (rendered outside the lock)."""
        if not (request.headers.get("x-api-key") or request.headers.get("authorization")):
            return self._refuse(request, 401, "authentication_error", "x-api-key header is required")
        if "anthropic-version" not in request.headers:
            return self._refuse(request, 400, "invalid_request_error", "anthropic-version header is required")
        route = (request.method, request.path)
        if route == ("GET", "/v1/models"):
            data = list(self.models.values())
            return _Answer(
                200,
                {
                    "data": data,
                    "has_more": False,
                    "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None,
                },
            )
        if request.method == "GET" and request.path.startswith("/v1/models/"):
            model = self.models.get(request.path.removeprefix("/v1/models/"))
            if model is None:
                return _error_answer(404, "not_found_error", f"model: {request.path.rsplit('/', 1)[1]}")
            return _Answer(200, model)
        if route == ("POST", "/v1/messages/count_tokens"):
            problems = validate(request.body, count_only=True) + self._beta_problems(request)
            if problems:
                return self._refuse(request, 400, "invalid_request_error", problems[0])
            return _Answer(200, {"input_tokens": estimate_tokens(request.body, self.tokenizer)})
        if route == ("POST", "/v1/messages"):
            return self._messages(request)
        return self._refuse(
            request, 404, "not_found_error", f"no such endpoint: {request.method} {request.path}"
        )

    def _beta_problems(self, request: Request) -> list[str]:
        betas = request.headers.get("anthropic-beta", "")
        if (
            isinstance(request.body, dict)
            and "context_management" in request.body
            and "context-management-" not in betas
        ):
            return ["context_management: Extra inputs are not permitted (needs the context-management beta)"]
        return []

    def _model_problems(self, body: Any) -> list[str]:
        """Limits of a model this fake knows; unknown model names are accepted."""
        model = self.models.get(body.get("model")) if isinstance(body, dict) else None
        limit, asked = (model or {}).get("max_tokens"), body.get("max_tokens") if model else None
        if isinstance(asked, int) and limit is not None and asked > limit:
            return [
                f"max_tokens: {asked} > {limit}, which is the maximum allowed number of output tokens "
                f"for {body['model']}"
            ]
        return []

    def _messages(self, request: Request) -> _Answer | Step:
        body = request.body
        problems = validate(body) + self._beta_problems(request) + self._model_problems(body)
        if problems:
            for problem in problems:
                self._violation(request, problem)
            return _error_answer(400, "invalid_request_error", problems[0])
        tokens = estimate_tokens(body, self.tokenizer)
        if self.context_window is not None and tokens > self.context_window:
            return PromptTooLong(tokens, self.context_window)
        step = self._next_step(body)
        if step is None:
            return self._refuse(request, 500, "api_error", "unexpected request: the script is empty")
        return step

    def _next_step(self, body: dict) -> Step | None:
        for route in self.routes:
            if not route.spent and route.predicate(body):
                route.hits.append(body)
                return route.responder
        return self.script.pop(0) if self.script else None

    def _render(self, request: Request, step: Step) -> _Answer:
        body = request.body
        while callable(step) and not isinstance(step, Reply | Error | PromptTooLong):
            step = step(body)
        if isinstance(step, PromptTooLong):
            actual = step.actual if step.actual is not None else estimate_tokens(body, self.tokenizer)
            maximum = step.maximum or self.context_window or self._max_input(body)
            return _error_answer(
                400, "invalid_request_error", f"prompt is too long: {actual} tokens > {maximum} maximum"
            )
        if isinstance(step, Error):
            headers = (
                {}
                if step.retry_after is None
                else {
                    "retry-after": str(math.ceil(step.retry_after)),
                    "retry-after-ms": str(max(1, round(step.retry_after * 1000))),  # the SDK ignores 0
                }
            )
            return _error_answer(step.status, step.type, step.message, {**headers, **(step.headers or {})})
        if not isinstance(step, Reply):
            raise TypeError(f"FakeAPI: not a script step: {step!r}")
        with self._lock:
            message = self._message(step, body)
        if not body.get("stream"):
            return _Answer(200, hang_up=step.drop_after is not None, payload=message)
        return _Answer(
            200, events=stream_events(message, step.raw_inputs), cut_after=step.drop_after,
            stream_error=step.stream_error,
        )

    def _max_input(self, body: dict) -> int:
        return self.models.get(body.get("model"), {}).get("max_input_tokens", 200_000)

    def _message(self, reply: Reply, body: dict) -> dict:
        has_tool = any(b.get("type") == "tool_use" for b in reply.content)
        usage = {
            **self.cache.account(body),
            "output_tokens": _output_tokens(reply.content),
            **(reply.usage or {}),
        }
        message = {
            "id": _new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": reply.content,
            "stop_reason": reply.stop_reason or ("tool_use" if has_tool else "end_turn"),
            "stop_sequence": None,
            "usage": usage,
        }
        if reply.context_management is not None:
            message["context_management"] = reply.context_management
        return message


def _as_reply(reply: Reply | str | None, default: str) -> Reply:
    if isinstance(reply, Reply):
        return reply
    return Reply.text(reply or default)


@contextlib.contextmanager
def running(**kwargs: Any) -> Iterator[FakeAPI]:
    """A started FakeAPI that, when the block ends without an error, checks it was used cleanly.

    Meant to be wrapped by a pytest fixture: ``with running() as api: yield api``.
    """
    with FakeAPI(**kwargs) as api:
        yield api
    api.check()
