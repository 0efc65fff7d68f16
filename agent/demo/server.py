"""A Messages API server on 127.0.0.1 whose model is a script: the demo's model, and the tests' fake.

The official SDK talks to it unchanged (``ANTHROPIC_BASE_URL`` = ``api.url``, any API key). Endpoints:
``POST /v1/messages`` (JSON, or SSE when ``"stream": true``), ``POST /v1/messages/count_tokens``,
``GET /v1/models`` and ``GET /v1/models/{id}``.

What the model says is a *step*, asked of ``respond(body)`` for every ``POST /v1/messages``: a ``Reply``
(text, thinking, tool calls; optionally cut after N stream events or turned into an SSE error), an
``Error`` (any status; 429 / 529 with a retry-after), ``PromptTooLong``, or a callable that makes one
from the body. It runs outside the server's lock, so a slow step does not hold up other requests. A
request larger than ``context_window`` (when set) is answered prompt-too-long without asking.

Token counts (``estimate_tokens``): each tool (a deferred one only once a tool search found it), system block and message content block is serialised as
compact JSON with sorted keys, ``cache_control`` and null fields removed, tagged with its role and
message index; the count is ceil(total characters / 4). Deterministic, so a caller can compute it for a
body; ``tokenizer=`` replaces it with a per-block tokenizer.

Streams: ``message_start``, ``ping``, then per block ``content_block_start`` / deltas /
``content_block_stop``, then ``message_delta`` and ``message_stop``. Text arrives in three pieces per
block, or in pieces of about ``chunk`` characters with ``pace`` seconds between deltas (the demo).
``Reply.raw_tool`` streams a tool input's JSON text as given (invalid JSON, a lone surrogate escape), and
``Error(headers=...)`` sends headers of the caller's choosing (a ``retry-after`` alone, ``x-should-retry``).

Extended thinking is checked as the real API checks it (``Thinking``): every thinking block the server
streams carries a signature it can verify, and a request that thinks is refused (400) when a thinking
block's text or signature was altered, when a redacted block's data is not one it issued, when the
thinking of the assistant turn a tool loop continues was dropped, when the budget is below 1024 or not
below max_tokens, or when it comes with a forced tool_choice or a temperature other than 1.

Server-side context editing (``context_management``: clearing old tool results or thinking) is applied
as agent.demo.editing plays it: the server counts, bills and checks the window on the body as cleared,
reports ``context_management.applied_edits``, and reads the history as sent for the prefix check.

Model families (``profile=``): ``"4.x"`` plays the rules above; ``"2026"`` (the default: the demo's
model and the tests' fakes answer as the models people run today) plays the 5.5 family — the
settings it refuses, thinking on by default with a signed thinking block on every reply, the text written
before tool calls inside thinking blocks, the ``display`` rule, and ``capabilities`` in the Models API.
The rules and the reply shaping live in ``Profile4x`` / ``Profile2026`` (see their section).

Subclasses add checks through four hooks: ``_problems`` (what the real API would refuse with a 400),
``_violation`` (called for each refusal), ``_next_step`` (where steps come from) and ``_usage``
(the usage split). tests/fakeapi.py's ``FakeAPI`` is one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import json
import math
import secrets
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent.demo import editing
from agent.demo.binding import Binding

# --------------------------------------------------------------------------------------------------
# Content blocks and request helpers

_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):06d}"


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(name: str, input: dict[str, Any], id: str | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": id or new_id("toolu"), "name": name, "input": input}


DEFAULT_SIGNATURE = "fake-signature"  # replaced by the server's own signature when sent


def thinking_block(thinking: str, signature: str = DEFAULT_SIGNATURE) -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def blocks_of(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [text_block(content)]
    return list(content or [])


def _texts(content: Any, *, deep: bool) -> Iterator[str]:
    """Text of a content value; ``deep`` also yields tool inputs, tool results and thinking."""
    for block in blocks_of(content):
        kind = block.get("type")
        if kind == "text":
            yield block.get("text", "")
        elif deep and kind == "tool_result":
            yield from _texts(block.get("content"), deep=True)
        elif deep and kind == "tool_use":
            yield json.dumps(block.get("input"))
        elif deep and kind == "thinking":
            yield block.get("thinking", "")


def last_user_text(body: dict[str, Any]) -> str:
    """The text blocks of the last user message, joined by newlines ("" when there is none)."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    return "\n".join(_texts(users[-1].get("content"), deep=False)) if users else ""


def request_text(body: dict[str, Any]) -> str:
    """Everything textual in a request: system, texts, tool inputs and results, thinking."""
    parts = list(_texts(body.get("system"), deep=True))
    for message in body.get("messages") or []:
        parts.extend(_texts(message.get("content"), deep=True))
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------------
# Steps


@dataclass
class Reply:
    """An assistant message. ``stop_reason`` None means "tool_use" if it calls a tool, else "end_turn"."""

    content: list[dict[str, Any]]
    stop_reason: str | None = None
    usage: dict[str, Any] | None = None  # merged over the computed usage
    context_management: dict[str, Any] | None = None  # e.g. {"applied_edits": [...]}
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
        cls, name: str, input: dict[str, Any], *, id: str | None = None, text: str | None = None, **kw: Any
    ) -> Reply:
        return cls.tools([(name, input, id)], text=text, **kw)

    @classmethod
    def tools(
        cls, calls: list[tuple[Any, ...]], *, text: str | None = None, thinking: str | None = None, **kw: Any
    ) -> Reply:
        """Parallel tool calls; each call is ``(name, input)`` or ``(name, input, id)``."""
        uses = [tool_use_block(*call) for call in calls]
        return cls([*_thinking(thinking), *([text_block(text)] if text else []), *uses], **kw)


def _thinking(thinking: str | None) -> list[dict[str, Any]]:
    return [thinking_block(thinking)] if thinking else []


@dataclass
class Error:
    status: int
    type: str
    message: str
    retry_after: float | None = None  # seconds; sent as retry-after and retry-after-ms
    headers: dict[str, str] | None = None  # sent as well (e.g. only a retry-after)
    details: dict[str, Any] | None = None  # the error's ``details`` (an ``error_code``, say)


@dataclass
class PromptTooLong:
    """400 "prompt is too long: A tokens > B maximum"; A defaults to the estimate, B to the window."""

    actual: int | None = None
    maximum: int | None = None


Step = Reply | Error | PromptTooLong | Callable[[dict[str, Any]], Any]

ERROR_DEFAULTS = {
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
class Request:
    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-cased names
    body: Any
    status: int | None = None  # status of the answer given
    # thinking blocks the prefix check left out of this request (agent.demo.binding), as the API lists them
    input_transformations: list[dict[str, Any]] = field(default_factory=list)
    # server-side context editing (agent.demo.editing): the body the model reads, counted and billed
    # (None: the body as sent), and the edits applied (None: the request asked for none)
    effective: Any = None
    applied_edits: list[dict[str, Any]] | None = None
    message: dict[str, Any] | None = (
        None  # the message a reply sent (as shaped by the profile), for tests to read
    )


# --------------------------------------------------------------------------------------------------
# Token estimate


def clean(value: Any) -> Any:
    """A block as the count sees it: no ``cache_control``, no null fields."""
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items() if k != "cache_control" and v is not None}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def referenced_tools(body: dict[str, Any]) -> set[str]:
    """Deferred tools made available in this conversation: found by a tool search (``tool_reference``
    blocks), or added mid-conversation (``tool_addition`` blocks of a system message, or of a compaction
    block's ``tool_changes``)."""
    found: set[str] = set()
    for message in body.get("messages") or []:
        for block in blocks_of(message.get("content")):
            if not isinstance(block, dict):
                continue
            changes = block.get("tool_changes") if block.get("type") == "compaction" else [block]
            for change in changes if isinstance(changes, list) else []:
                tool = change.get("tool") if isinstance(change, dict) else None
                if change.get("type") == "tool_addition" and isinstance(tool, dict):
                    if tool.get("type") == "tool_reference" and tool.get("name"):
                        found.add(str(tool["name"]))
            inner = block.get("content")
            if block.get("type") == "tool_search_tool_result" and isinstance(inner, dict):
                inner = inner.get("tool_references")
            for ref in inner if isinstance(inner, list) else []:
                if isinstance(ref, dict) and ref.get("type") == "tool_reference":
                    found.add(str(ref.get("tool_name")))
    return found


def counted_tools(body: dict[str, Any]) -> list[Any]:
    """The tools the model's context holds: a deferred one (``defer_loading``) only once a search found it."""
    tools = body.get("tools") or []
    found = referenced_tools(body) if any(t.get("defer_loading") for t in tools) else set()
    return [t for t in tools if not t.get("defer_loading") or t.get("name") in found]


def tagged_blocks(body: dict[str, Any]) -> list[tuple[list[Any], Any]]:
    """Every tool, system block and message block, in the API's order, tagged with where it is."""
    tagged: list[tuple[list[Any], Any]] = [(["tool"], tool) for tool in counted_tools(body)]
    tagged += [(["system"], block) for block in blocks_of(body.get("system"))]
    for index, message in enumerate(body.get("messages") or []):
        tagged += [([message.get("role"), index], block) for block in blocks_of(message.get("content"))]
    return tagged


def units(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """(canonical text, carries a cache breakpoint) for every cacheable block, in cache order."""
    return [
        (
            json.dumps([*tag, clean(block)], separators=(",", ":"), sort_keys=True, ensure_ascii=False),
            isinstance(block, dict) and block.get("cache_control") is not None,
        )
        for tag, block in tagged_blocks(body)
    ]


# a server's own tokenizer: the tokens of one block (a tool definition, a system or content block)
Tokenizer = Callable[[Any], int]


def tokens_of_chars(chars: int) -> int:
    return math.ceil(chars / 4)


def estimate_tokens(body: dict[str, Any], tokenizer: Tokenizer | None = None) -> int:
    """The server's input-token count for a request (see the module docstring), or ``tokenizer``'s."""
    if tokenizer is not None:
        return sum(tokenizer(clean(block)) for _, block in tagged_blocks(body))
    return tokens_of_chars(sum(len(text) for text, _ in units(body)))


# --------------------------------------------------------------------------------------------------
# Wire format


def _output_tokens(content: list[dict[str, Any]]) -> int:
    chars = sum(len(b.get("text") or b.get("thinking") or json.dumps(b.get("input", ""))) for b in content)
    return max(1, tokens_of_chars(chars))


def _pieces(text: str, parts: int = 3) -> list[str]:
    size = max(1, math.ceil(len(text) / parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _block_events(
    index: int, block: dict[str, Any], raw_inputs: dict[str, str] | None = None, chunk: int | None = None
) -> list[tuple[str, dict[str, Any]]]:
    kind = block["type"]
    if kind == "text":
        parts = max(3, math.ceil(len(block["text"]) / chunk)) if chunk else 3
        start, deltas = (
            text_block(""),
            [{"type": "text_delta", "text": p} for p in _pieces(block["text"], parts)],
        )
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
    elif kind == "compaction":  # the summary arrives as a delta, the rest with the start
        start = {k: v for k, v in block.items() if k != "content"}
        deltas = [{"type": "compaction_delta", "content": c} for c in [block.get("content")] if c is not None]
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


def stream_events(
    message: dict[str, Any], raw_inputs: dict[str, str] | None = None, chunk: int | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events (name, data) that stream ``message`` (tool inputs in ``raw_inputs`` as given, text
    in pieces of about ``chunk`` characters)."""
    opening = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {**message["usage"], "output_tokens": 1},
    }
    opening.pop("context_management", None)
    closing: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    }
    if message.get("context_management") is not None:
        closing["context_management"] = message["context_management"]
    return [
        ("message_start", {"type": "message_start", "message": opening}),
        ("ping", {"type": "ping"}),
        *[
            event
            for i, block in enumerate(message["content"])
            for event in _block_events(i, block, raw_inputs, chunk)
        ],
        ("message_delta", closing),
        ("message_stop", {"type": "message_stop"}),
    ]


@dataclass
class Answer:
    """What the handler writes: JSON, an SSE stream, or nothing at all (a hang-up)."""

    status: int
    payload: Any = None
    events: Iterable[tuple[str, dict[str, Any]]] | None = None
    cut_after: int | None = None
    stream_error: tuple[str, str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hang_up: bool = False
    pace: float = 0.0  # seconds before each content delta but the first of a stream


def error_answer(
    status: int,
    kind: str,
    message: str,
    headers: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> Answer:
    error: dict[str, Any] = {"type": kind, "message": message}
    if details:
        error["details"] = details
    return Answer(status, {"type": "error", "error": error}, headers=headers or {})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # every event of a stream is a small write of its own: with Nagle's algorithm on, each one after the
    # first waited for the client's delayed acknowledgement (40 ms on Linux), about 45 ms a request on
    # loopback (61 requests of a tool loop: 7.0 s -> 4.0 s wall)
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # no access log on the terminal
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if len(raw) < length:  # the client went away mid-send (killed, or exiting): not a request at all
            self.close_connection = True
            return
        path, _, query = self.path.partition("?")
        headers = {name.lower(): value for name, value in self.headers.items()}
        answer = self.server.api._answer(self.command, path, query, headers, raw)
        try:
            self._write(answer)
        except OSError:  # the client went away first
            self.close_connection = True

    def _write(self, answer: Answer) -> None:
        if answer.hang_up:
            self.close_connection = True
            return
        request_id = new_id("req")
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
        deltas = 0
        for n, (name, event) in enumerate(answer.events):
            if n == answer.cut_after:
                break
            if name == "content_block_delta" and answer.pace:
                deltas += 1
                if deltas > 1:
                    threading.Event().wait(answer.pace)
            self._chunk(f"event: {name}\ndata: {json.dumps(event)}\n\n")
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
    api: ScriptedAPI

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up on idle keep-alive connections is normal; anything else is worth a traceback.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


# --------------------------------------------------------------------------------------------------
# Extended thinking


class Thinking:
    """Signs the thinking the server sends, and finds what the real API would refuse in a request."""

    MIN_BUDGET = 1024

    def __init__(self) -> None:
        self._key = secrets.token_hex(16)
        self._redacted: set[str] = set()
        self._given: set[tuple[str, str]] = set()
        self._sent: dict[
            str, list[dict[str, Any]]
        ] = {}  # tool_use id -> the thinking blocks of its reply, as sent
        # signature -> the effort of a between_tools request that got the block (its conversation's effort)
        self._between_tools: dict[str, str] = {}

    def sign(self, text: str, nonce: str | None = None) -> str:
        """A signature for ``text``; each one the server issues has its own nonce, so two blocks of the
        same text (or both empty, as an omitted display sends them) are still told apart."""
        nonce = nonce if nonce is not None else secrets.token_hex(6)
        return f"sig_{nonce}_" + hashlib.sha256(f"{self._key}\0{nonce}\0{text}".encode()).hexdigest()[:40]

    def signed(self, text: str, signature: str) -> bool:
        """Whether ``signature`` is one this server made for ``text``."""
        nonce = signature.split("_")[1] if signature.count("_") >= 2 else ""
        return signature == self.sign(text, nonce)

    def issue(
        self, content: list[dict[str, Any]], between_tools_effort: str | None = None
    ) -> list[dict[str, Any]]:
        """The reply's content with each thinking block signed; remembers what each tool call came with
        (and, for a between_tools request, the effort its blocks were given at)."""
        out = []
        for block in content:
            if block.get("type") == "thinking" and block.get("signature") == DEFAULT_SIGNATURE:
                block = {**block, "signature": self.sign(block.get("thinking", ""))}
            elif block.get("type") == "thinking":  # a script's own signature: valid with this text
                self._given.add((str(block.get("thinking", "")), str(block.get("signature"))))
            elif block.get("type") == "redacted_thinking":
                self._redacted.add(str(block.get("data")))
            out.append(block)
            if between_tools_effort is not None and block.get("type") == "thinking":
                self._between_tools[str(block["signature"])] = between_tools_effort
        thought = [b for b in out if b.get("type") in ("thinking", "redacted_thinking")]
        for block in out:
            if block.get("type") == "tool_use":
                self._sent[block["id"]] = thought  # [] when the script gave the reply no thinking
        return out

    def accept(self, text: str, signature: str) -> None:
        """Take a thinking block the real model wrote before this server started (an imported transcript)
        as valid, as the real API would: its text and signature still may not change."""
        self._given.add((text, signature))

    def problems(self, body: Any, *, always: bool = False) -> list[str]:
        """What the API refuses about a request's thinking: a budget's limits, and (when the request thinks:
        a budget, or ``always`` for a family that thinks by default) altered blocks and a tool loop's
        dropped thinking."""
        if not isinstance(body, dict):
            return []
        param = _thinking_param(body)
        if always:  # the family's own rules judge the parameter (Profile2026.problems)
            problems = []
        elif param.get("type") == "enabled":
            problems = self._param_problems(body, param)
        else:
            return []
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        for i, message in enumerate(messages):
            if message.get("role") != "assistant":
                continue
            for j, block in enumerate(blocks_of(message.get("content"))):
                problems += self._block_problems(block, f"messages.{i}.content.{j}")
        return problems + self._loop_problems(messages, by_shape=not always)

    def effort_problems(self, body: dict[str, Any], effort: str) -> list[str]:
        """A between_tools request must keep the effort its conversation's earlier blocks were given at."""
        for message in body.get("messages") or []:
            for block in blocks_of(message.get("content")) if isinstance(message, dict) else []:
                was = (
                    self._between_tools.get(str(block.get("signature"))) if isinstance(block, dict) else None
                )
                if was is not None and was != effort:
                    return [
                        f'The effort may not change within a conversation that uses "thinking.type.between_tools" '
                        f'(it began at "{was}", this request asks for "{effort}").'
                    ]
        return []

    def _param_problems(self, body: dict[str, Any], param: dict[str, Any]) -> list[str]:
        budget, max_tokens = param.get("budget_tokens"), body.get("max_tokens")
        problems = []
        if not isinstance(budget, int) or budget < self.MIN_BUDGET:
            problems.append(
                f"thinking.budget_tokens: Input should be greater than or equal to {self.MIN_BUDGET}"
            )
        elif isinstance(max_tokens, int) and budget >= max_tokens:
            problems.append("`max_tokens` must be greater than `thinking.budget_tokens`")
        if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
            problems.append("Thinking may not be enabled when tool_choice forces tool use.")
        if body.get("temperature", 1) != 1:
            problems.append("`temperature` may only be set to 1 when thinking is enabled.")
        return problems

    def _block_problems(self, block: Any, where: str) -> list[str]:
        if not isinstance(block, dict):
            return []
        if block.get("type") == "thinking":
            text, signature = str(block.get("thinking", "")), str(block.get("signature"))
            if not self.signed(text, signature) and (text, signature) not in self._given:
                return [f"{where}: Invalid `signature` in `thinking` block"]
        elif block.get("type") == "redacted_thinking" and str(block.get("data")) not in self._redacted:
            return [f"{where}: Invalid `data` in `redacted_thinking` block"]
        return []

    def _loop_problems(self, messages: list[dict[str, Any]], by_shape: bool = True) -> list[str]:
        """The assistant turn a tool loop continues must come back with its thinking, first and whole.
        ``by_shape``: calls this server never made are checked by their shape too (a request with a
        budget: the 4.x rules; the 2026 profile checks only its own calls, since tests build histories
        of such calls by hand)."""
        if len(messages) < 2 or messages[-1].get("role") != "user":
            return []
        last = messages[-2]
        results = [b for b in blocks_of(messages[-1].get("content")) if b.get("type") == "tool_result"]
        if last.get("role") != "assistant" or not results:
            return []
        content = blocks_of(last.get("content"))
        uses = [b.get("id") for b in content if b.get("type") == "tool_use"]
        if not uses:
            return []
        sent = next((self._sent[u] for u in uses if u in self._sent), None)
        if sent is None and not by_shape:
            return []
        if sent is None:
            # calls this server never made (another server's, before a restart, or an imported
            # transcript's): the API checks the shape, as it does for its own, a thinking block first
            first_kind = content[0].get("type") if content else None
            sent_ok = first_kind in ("thinking", "redacted_thinking")
        else:
            clean = [{k: v for k, v in b.items() if k != "cache_control"} for b in content[: len(sent)]]
            sent_ok = clean == sent
        if not sent_ok:
            first = content[0].get("type") if content else "nothing"
            return [
                f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{first}`. When `thinking` is enabled, a final `assistant` message must start "
                "with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)."
            ]
        return []


# --------------------------------------------------------------------------------------------------
# Pictures, as the real API checks them (written from its error texts, apart from the agent's own check in
# core/images.py: a fake that shared the agent's code would agree with it whatever it did)

IMAGE_LIMIT = 5 * 1024 * 1024
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


def image_problems(body: Any) -> list[str]:
    """The 400s the API gives for image blocks: anywhere in a message, or inside a tool_result."""
    if not isinstance(body, dict):
        return []
    problems: list[str] = []
    for i, message in enumerate(body.get("messages") or []):
        for j, block in enumerate(blocks_of(message.get("content") if isinstance(message, dict) else None)):
            where = f"messages.{i}.content.{j}"
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                for k, inner in enumerate(block["content"]):
                    problems += _image_problem(inner, f"{where}.content.{k}")
            else:
                problems += _image_problem(block, where)
    return problems


def _image_problem(block: Any, where: str) -> list[str]:
    if not isinstance(block, dict) or block.get("type") != "image":
        return []
    source = block.get("source") or {}
    if source.get("type") != "base64":
        return []
    kind, data = source.get("media_type"), source.get("data")
    if kind not in IMAGE_TYPES:
        return [
            f"{where}.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' "
            "or 'image/webp'"
        ]
    if not isinstance(data, str):
        return [f"{where}.image.source.base64.data: Field required"]
    if len(data) > IMAGE_LIMIT:
        return [
            f"{where}.image.source.base64: image exceeds 5 MB maximum: {len(data)} bytes > {IMAGE_LIMIT} bytes"
        ]
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return [f"{where}.image.source.base64.data: The image data is not valid base64"]
    if not raw.startswith(_MAGIC[kind]) or (kind == "image/webp" and raw[8:12] != b"WEBP"):
        return [f"{where}.image.source.base64.data: Image does not match the provided media type {kind}"]
    return []


# --------------------------------------------------------------------------------------------------
# Model families: what a request may hold (``problems``) and how a reply comes back (``shape``)
#
# Two profiles. ``PROFILE_4X`` is the 4.x rules this server always played: a thinking budget is checked
# (Thinking._param_problems) and a reply is what the script says. ``PROFILE_2026`` plays the 5.5 family
# (Sonnet / Opus / Haiku 5.5, Fable 5.x) as the provider's pages describe it (models/sonnet-5-5/
# migration-guide and whats-new-sonnet-5-5, models/opus-5-5/overview, build-with-claude/thinking):
#
# - refused (400): thinking ``enabled`` (a budget) and ``disabled``; a sampling parameter (temperature
#   other than 1, top_p, top_k); an assistant prefill (a final assistant message); a forced tool_choice
#   (``any``, ``tool``); an effort level the model lacks; ``between_tools`` on a model that can't turn
#   thinking off, above high effort, or with an effort other than the one its conversation began with;
#   ``display: "updates"`` without its beta header;
# - thinking is on by default (adaptive): every reply starts with a signed thinking block, and the text a
#   reply writes before its tool calls comes back inside thinking blocks ("progress" blocks), not text;
# - the display rule: ``omitted`` (the default) empties every thinking text (the signature stays);
#   ``summarized`` returns it all; ``updates`` returns the progress text and empties the reasoning;
#   ``between_tools`` leaves out the reasoning and returns the progress text.

DISPLAY_UPDATES_BETA = "thinking-display-updates-2026-08-18"
EFFORTS = ("low", "medium", "high", "xhigh", "max")
BETWEEN_TOOLS_EFFORTS = ("low", "medium", "high")
DEFAULT_EFFORT = "high"  # the API's default effort on the family
REASONING_TEXT = "Working out what the request needs."  # the reasoning a scripted reply did not give


def capabilities(model_id: str) -> dict[str, Any]:
    """``capabilities`` as the Models API reports them for a 5.5-family model (SDK: BetaModelCapabilities)."""
    can_stop = "sonnet-5-5" in model_id or "haiku-5-5" in model_id  # Opus 5.5 and Fable can't turn it off

    def yes(flag: bool) -> dict[str, Any]:
        return {"supported": flag}

    return {
        "thinking": {
            "supported": True,
            "types": {
                "adaptive": yes(True),
                "between_tools": yes(can_stop),
                "disabled": yes(False),
                "enabled": yes(False),
            },
        },
        "effort": {"supported": True, **{level: yes(True) for level in EFFORTS}},
        "compaction": {"supported": True, "summarize": yes(True)},
    }


def offers_compaction(model: dict[str, Any] | None) -> bool:
    """Whether a model this fake knows takes the top-level ``compaction`` parameter: as its capabilities
    say (a model entry may carry its own), else yes (every model of the family does)."""
    caps = (model or {}).get("capabilities")
    node = caps.get("compaction") if isinstance(caps, dict) else None
    if not isinstance(node, dict):
        return True
    return bool(node.get("supported")) and bool((node.get("summarize") or {}).get("supported"))


class Profile4x:
    """The 4.x rules: nothing beyond the thinking checks every profile makes; replies as scripted."""

    name = "4.x"
    thinks_by_default = False

    def problems(
        self, body: dict[str, Any], headers: dict[str, str], model: dict[str, Any] | None
    ) -> list[str]:
        return []

    def shape(self, content: list[dict[str, Any]], body: dict[str, Any]) -> list[dict[str, Any]]:
        return content

    def model_info(self, info: dict[str, Any]) -> dict[str, Any]:
        return info


def _thinking_param(body: dict[str, Any]) -> dict[str, Any]:
    param = body.get("thinking")
    return param if isinstance(param, dict) else {}


def effort_of(body: dict[str, Any]) -> str:
    config = body.get("output_config")
    effort = config.get("effort") if isinstance(config, dict) else None
    return str(effort) if effort is not None else DEFAULT_EFFORT


def _refused_controls(body: dict[str, Any]) -> list[str]:
    """What the 5.5 family refuses outside thinking: sampling parameters, a forced tool, a prefill."""
    problems = []
    for name in ("temperature", "top_p", "top_k"):
        value = body.get(name)
        if value is not None and not (name == "temperature" and value == 1):
            problems.append(f"`{name}` is not supported for this model. Remove it from the request.")
    choice = (body.get("tool_choice") or {}).get("type")
    if choice in ("any", "tool"):
        problems.append(
            f'tool_choice.type "{choice}" is not supported for this model. Use "auto" or "none", and ask '
            "for the tool in the prompt."
        )
    messages = body.get("messages")
    if isinstance(messages, list) and messages and (messages[-1] or {}).get("role") == "assistant":
        problems.append("Prefilling assistant messages is not supported for this model.")
    return problems


class Profile2026:
    """The 5.5 family's rules (see the section comment above)."""

    name = "2026"
    thinks_by_default = True

    def problems(
        self, body: dict[str, Any], headers: dict[str, str], model: dict[str, Any] | None
    ) -> list[str]:
        problems = self._thinking_problems(body, str(body.get("model")), model)
        effort = effort_of(body)
        if effort not in EFFORTS:
            problems.append(f"output_config.effort: Input should be {', '.join(repr(e) for e in EFFORTS)}")
        if _thinking_param(body).get("display") == "updates" and DISPLAY_UPDATES_BETA not in headers.get(
            "anthropic-beta", ""
        ):
            problems.append(f'thinking.display "updates" requires the {DISPLAY_UPDATES_BETA} beta header.')
        return problems + _refused_controls(body)

    def _thinking_problems(
        self, body: dict[str, Any], model_id: str, model: dict[str, Any] | None
    ) -> list[str]:
        kind = _thinking_param(body).get("type", "adaptive")
        problems = []
        if kind == "enabled":
            problems.append(
                '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" '
                'and "output_config.effort" to control thinking behavior.'
            )
        elif kind == "disabled":
            hint = (
                'Use "thinking.type.between_tools" to turn off up-front thinking.'
                if self._can_stop(model_id, model)
                else 'Use "thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
            )
            problems.append(f'"thinking.type.disabled" is not supported for this model. {hint}')
        elif kind == "between_tools":
            problems += self._between_tools_problems(body, model_id, model)
        elif kind != "adaptive":
            problems.append(f"thinking.type: Input tag '{kind}' does not match any of the expected tags")
        return problems

    @staticmethod
    def _can_stop(model_id: str, model: dict[str, Any] | None) -> bool:
        caps = (model or {}).get("capabilities") or capabilities(model_id)
        return bool(caps["thinking"]["types"]["between_tools"]["supported"])

    def _between_tools_problems(
        self, body: dict[str, Any], model_id: str, model: dict[str, Any] | None
    ) -> list[str]:
        if not self._can_stop(model_id, model):
            return [
                '"thinking.type.between_tools" is not supported for this model. Use "thinking.type.adaptive" '
                'and "output_config.effort" to control thinking behavior.'
            ]
        effort = effort_of(body)
        if effort not in BETWEEN_TOOLS_EFFORTS:
            return [
                f'"thinking.type.between_tools" is not supported at effort "{effort}". Use effort "low", '
                '"medium" or "high", or "thinking.type.adaptive".'
            ]
        return []

    def shape(self, content: list[dict[str, Any]], body: dict[str, Any]) -> list[dict[str, Any]]:
        """The scripted content as the family returns it (see the section comment)."""
        param = _thinking_param(body)
        kind, display = param.get("type", "adaptive"), param.get("display") or "omitted"
        calls = any(b.get("type") == "tool_use" for b in content)
        reasoning = [b for b in content if b.get("type") in ("thinking", "redacted_thinking")]
        if kind != "between_tools" and not reasoning:
            reasoning = [thinking_block(REASONING_TEXT)]
        shown_reasoning = display == "summarized"
        shown_progress = display in ("summarized", "updates") or kind == "between_tools"
        out = [] if kind == "between_tools" else [_shown(b, shown_reasoning) for b in reasoning]
        for block in content:
            if block.get("type") in ("thinking", "redacted_thinking"):
                continue
            if block.get("type") == "text" and calls:  # text between tool calls: a progress block
                block = _shown(thinking_block(block["text"]), shown_progress)
            out.append(block)
        return out

    def model_info(self, info: dict[str, Any]) -> dict[str, Any]:
        """A model's entry as the Models API reports it: with the capabilities it was given, else the
        family's."""
        return {**info, "capabilities": info.get("capabilities") or capabilities(info["id"])}


def _shown(block: dict[str, Any], shown: bool) -> dict[str, Any]:
    """A thinking block as the display returns it: its text, or empty (the signature is made for it)."""
    if block.get("type") != "thinking" or shown:
        return block
    return {**block, "thinking": ""}


PROFILE_4X = Profile4x()
PROFILE_2026 = Profile2026()
Profile = Profile4x | Profile2026
PROFILES: dict[str, Profile] = {"4.x": PROFILE_4X, "2026": PROFILE_2026}


# --------------------------------------------------------------------------------------------------
# The server


DEFAULT_MODELS = (
    "claude-sonnet-4-6",
    "claude-opus-4-1",
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
    "claude-sonnet-5-5",
    "claude-opus-5-5",
    "claude-haiku-5-5",
    "claude-fable-5-2",
)


def _limits(id: str) -> tuple[int, int]:
    """The window and output limit the fake reports: 200K / 64K for every model, the 5.5 family's
    included (its real 1M / 128K are core.models' table). The tests and benchmarks exercise compaction
    at the 200K window they always had; a test that wants other limits lists its models."""
    return 200_000, 64_000


# --------------------------------------------------------------------------------------------------
# On-demand compaction (the top-level ``compaction`` parameter, beta compact-2026-09-04)

COMPACTION_BETA = "compact-2026-09-04"
COMPACTED = "compaction"  # the stop reason of a compaction request's answer
# what a failed compaction request answers, by error code (the SDK's compaction_*_error types)
COMPACTION_ERRORS = {
    "compaction_block_ambiguous": "messages holds more than one compaction block with content",
    "compaction_block_misplaced": "the compaction block must be the first block of the conversation",
    "compaction_content_mismatch": "the compaction block's content differs from what its signature recorded",
    "compaction_encrypted_content_invalid": "the compaction block's encrypted_content can't be read",
    "compaction_incomplete_turn": "the compaction request ends on an unfinished assistant turn",
    "compaction_nothing_to_summarize": "messages holds no user or assistant content to summarize",
    "compaction_signature_invalid": "the compaction block's signature does not verify",
    "compaction_too_many_tool_references": "the conversation references too many distinct tools",
    "compaction_tool_changes_mismatch": "the compaction block's tool_changes differ from those returned",
    "compaction_unavailable": "the compaction could not be completed; retry the request",
}


def compaction_error(code: str) -> Error:
    """The answer of a compaction request that failed with ``code`` (529 for the transient one)."""
    status, kind = (
        (529, "overloaded_error") if code == "compaction_unavailable" else (400, "invalid_request_error")
    )
    return Error(
        status,
        kind,
        COMPACTION_ERRORS[code],
        retry_after=0 if status == 529 else None,
        details={"error_code": code},
    )


def _message_blocks(message: Any) -> list[dict[str, Any]]:
    return (
        [b for b in blocks_of(message.get("content")) if isinstance(b, dict)]
        if isinstance(message, dict)
        else []
    )


class Compactions:
    """The server's side of on-demand compaction: answers a compaction request with one signed block,
    remembers what each block summarized (``summarized_by``: what a prefix check needs to see a block
    as the messages it stands for), and finds what the real API refuses about blocks sent back.

    ``fail(code)`` makes the next compaction request fail with that error code; ``fail(None)`` makes it
    answer a block with ``content: null`` (a summary that could not be written)."""

    def __init__(self) -> None:
        self._key = secrets.token_hex(16)
        self._summarized: dict[str, list[dict[str, Any]]] = {}  # signature -> the messages it stands for
        self._failures: list[str | None] = []
        self._lock = threading.Lock()
        self.delay = 0.0  # seconds the server takes to write a summary (benchmarks play a real pace)
        self.served = 0  # blocks written
        self.requested = 0  # compaction requests answered (failures too)

    def sign(self, content: str, nonce: str) -> str:
        return f"csig_{nonce}_" + hashlib.sha256(f"{self._key}\0{nonce}\0{content}".encode()).hexdigest()[:40]

    def _verifies(self, signature: str, content: str) -> bool:
        nonce = signature.split("_")[1] if signature.count("_") >= 2 else ""
        return signature == self.sign(content, nonce)

    def fail(self, code: str | None) -> None:
        self._failures.append(code)

    def issue(self, messages: list[dict[str, Any]], content: str) -> dict[str, Any]:
        """A signed block standing for ``messages``, remembered as such (what the endpoint answers)."""
        with self._lock:
            # a nonce of its own: two compactions that write the same text are still two blocks (one may
            # stand for messages that hold the other)
            signature = self.sign(content, secrets.token_hex(6))
            self._summarized[signature] = messages
            self.served += 1
        return {
            "type": "compaction",
            "content": content,
            "encrypted_content": "enc_" + signature[-16:],
            "signature": signature,
        }

    def summarized_by(self, block: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The messages a compaction block stands for, as they were sent (None: not one we wrote)."""
        return self._summarized.get(str(block.get("signature")))

    def refusal(self, headers: dict[str, str], body: dict[str, Any]) -> str | None:
        if COMPACTION_BETA not in headers.get("anthropic-beta", ""):
            return f"compaction: Extra inputs are not permitted (needs the {COMPACTION_BETA} beta)"
        if "context_management" in body:
            return "compaction: cannot be combined with context_management"
        config = body.get("compaction")
        if not isinstance(config, dict) or config.get("type") != "summarize":
            return "compaction.type: Input should be 'summarize'"
        return None

    def answer(self, body: dict[str, Any], tokens: int, cache: dict[str, Any] | None = None) -> Step:
        """The step answering a compaction request of ``tokens``; ``cache`` is the prompt cache's split of
        them (the compaction step reads the cache like any request over the same prefix)."""
        self.requested += 1
        billed = {"input_tokens": tokens, **(cache or {})}
        if self._failures:
            code = self._failures.pop(0)
            if code is not None:
                return compaction_error(code)
            return Reply(
                [{"type": "compaction", "content": None, "encrypted_content": None}],
                COMPACTED,
                {"input_tokens": tokens},
            )
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        if last.get("role") == "assistant" and any(
            b.get("type") == "tool_use" for b in _message_blocks(last)
        ):
            return compaction_error("compaction_incomplete_turn")
        block = self.issue(messages, self._summary(messages))
        if self.delay:  # answered outside the server's lock, after the delay
            delay, reply = self.delay, Reply([block], COMPACTED, billed)
            return lambda body: (threading.Event().wait(delay), reply)[1]
        return Reply([block], COMPACTED, billed)

    def message(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        """The answer: nothing in the top-level usage, the compaction's own tokens in ``iterations``."""
        usage = reply.usage or {}
        written = sum(len(str(b.get("content") or "")) for b in reply.content) // 4 + 1
        iteration = {
            "type": "compaction",
            "input_tokens": usage.get("input_tokens", 0),
            "output_tokens": written,
            "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
            "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
        }
        return {
            "id": new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": reply.content,
            "stop_reason": COMPACTED,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
                "iterations": [iteration],
            },
        }

    def problems(self, body: Any) -> list[str]:
        """What the real API refuses about compaction blocks in a request's messages."""
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list):
            return []
        problems, with_content = [], 0
        for i, message in enumerate(messages):
            for j, block in enumerate(_message_blocks(message)):
                if block.get("type") != "compaction":
                    continue
                where = f"messages.{i}.content.{j}"
                if (i, j) != (0, 0) or message.get("role") != "assistant":
                    problems.append(
                        f"{where}: compaction_block_misplaced: {COMPACTION_ERRORS['compaction_block_misplaced']}"
                    )
                if block.get("content") is None:
                    continue
                with_content += 1
                error = self._block_error(block)
                if error is not None:
                    problems.append(f"{where}: {error}: {COMPACTION_ERRORS[error]}")
        if with_content > 1:
            problems.append(
                f"messages: compaction_block_ambiguous: {COMPACTION_ERRORS['compaction_block_ambiguous']}"
            )
        return problems

    def _block_error(self, block: dict[str, Any]) -> str | None:
        """What is wrong with a compaction block that holds a summary: its encrypted content, its signature
        (not one this server gave), or its content (not what it signed); None when nothing is."""
        signature = str(block.get("signature"))
        encrypted = block.get("encrypted_content")
        if encrypted is not None and signature in self._summarized and encrypted != "enc_" + signature[-16:]:
            return "compaction_encrypted_content_invalid"
        if signature not in self._summarized:
            return "compaction_signature_invalid"
        if not self._verifies(signature, str(block["content"])):
            return "compaction_content_mismatch"
        return None

    @staticmethod
    def _summary(messages: list[dict[str, Any]]) -> str:
        """A plain, deterministic summary: what the user asked, first and last, and the size of it."""
        asked = [
            b.get("text", "")
            for m in messages
            if m.get("role") == "user"
            for b in _message_blocks(m)
            if b.get("type") == "text" and b.get("text", "").strip()
        ]
        first = asked[0][:400] if asked else "(nothing)"
        latest = asked[-1][:400] if asked else "(nothing)"
        return (
            f"Summary of the conversation so far ({len(messages)} messages). "
            f"The user first asked: {first}\nThe latest request: {latest}"
        )


def model_info(id: str, max_input_tokens: int = 200_000, max_tokens: int = 64_000) -> dict[str, Any]:
    return {
        "type": "model",
        "id": id,
        "display_name": id.replace("-", " ").title(),
        "created_at": "2025-01-01T00:00:00Z",
        "lifecycle": "active",
        "max_input_tokens": max_input_tokens,
        "max_tokens": max_tokens,
    }


class ScriptedAPI:
    """A Messages API server whose replies come from ``respond(body)``; see the module docstring."""

    def __init__(
        self,
        respond: Callable[[dict[str, Any]], Step | None] | None = None,
        *,
        context_window: int | None = None,
        models: list[dict[str, Any]] | None = None,
        tokenizer: Tokenizer | None = None,
        chunk: int | None = None,
        pace: float = 0.0,
        profile: str = "2026",
        binding: str = "off",
    ) -> None:
        self.respond = respond
        self.profile: Profile = PROFILES[profile]
        self.context_window = context_window
        self.tokenizer = tokenizer
        self.chunk, self.pace = chunk, pace
        self.models: dict[str, dict[str, Any]] = {
            m["id"]: m for m in models or [model_info(i, *_limits(i)) for i in DEFAULT_MODELS]
        }
        self.requests: list[Request] = []
        # a model id the server does not list is answered 404, as the API does (off: any name is served,
        # as the demo's scripted model and the tests' own model names need)
        self.strict_models = False
        self.thinking = Thinking()
        self.binding = Binding(binding)  # preserved thinking's prefix check; "off" until the agent passes it
        self.compactions = Compactions()
        self.binding.compaction_origin = self.compactions.summarized_by  # a block reads as what it replaced
        self._lock = threading.RLock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Any:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.api = self
        # A short poll interval keeps close() (which waits for one poll) from adding 0.5 s per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), name="scripted-api", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        assert self._server is not None, "the server is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- hooks for subclasses ----------------------------------------------------------------------

    def _problems(self, request: Request, *, count_only: bool) -> list[str]:
        """Why the real API would refuse this request with a 400 (its thinking, the profile's rules, its
        pictures)."""
        return (
            self._family_problems(request)
            + self.compactions.problems(request.body)
            + image_problems(request.body)
        )

    def _family_problems(self, request: Request) -> list[str]:
        """The thinking checks and the model family's request rules (the profile)."""
        body = request.body
        if not isinstance(body, dict):
            return []
        problems = self.thinking.problems(body, always=self.profile.thinks_by_default)
        model = self.models.get(str(body.get("model")))
        problems += self.profile.problems(body, request.headers, model)
        if self.profile.thinks_by_default and _thinking_param(body).get("type") == "between_tools":
            problems += self.thinking.effort_problems(body, effort_of(body))
        return problems

    def _violation(self, request: Request, problem: str) -> None:
        """Called for every refused request (a test's fake records them)."""

    def _next_step(self, body: dict[str, Any]) -> Step | None:
        return self.respond(body) if self.respond is not None else None

    def _usage(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "input_tokens": estimate_tokens(body, self.tokenizer),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }

    # -- answering (called from handler threads) ------------------------------------------------

    def _answer(self, method: str, path: str, query: str, headers: dict[str, str], raw: bytes) -> Answer:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        request = Request(method, path, query, headers, body)
        with self._lock:
            self.requests.append(request)
            outcome = self._guarded(request, self._dispatch)
        # Callable steps run outside the lock: a slow responder must not hold up concurrent requests.
        answer = outcome if isinstance(outcome, Answer) else self._guarded(request, self._render, outcome)
        request.status = answer.status
        return answer

    def _guarded(self, request: Request, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(request, *args)
        except Exception as exc:  # a broken script must show as an error, not hang the client
            return self._refuse(request, 500, "api_error", f"{type(self).__name__} crashed: {exc!r}")

    def _refuse(self, request: Request, status: int, kind: str, problem: str) -> Answer:
        self._violation(request, problem)
        return error_answer(status, kind, problem)

    def _dispatch(self, request: Request) -> Answer | Step:
        """An answer, or for /v1/messages the step that will answer (rendered outside the lock)."""
        if not (request.headers.get("x-api-key") or request.headers.get("authorization")):
            return self._refuse(request, 401, "authentication_error", "x-api-key header is required")
        if "anthropic-version" not in request.headers:
            return self._refuse(request, 400, "invalid_request_error", "anthropic-version header is required")
        route = (request.method, request.path)
        if route == ("GET", "/v1/models"):
            data = [self.profile.model_info(m) for m in self.models.values()]
            return Answer(
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
                return error_answer(404, "not_found_error", f"model: {request.path.rsplit('/', 1)[1]}")
            return Answer(200, self.profile.model_info(model))
        if route == ("POST", "/v1/messages/count_tokens"):
            problems = self._problems(request, count_only=True)
            if problems:
                return self._refuse(request, 400, "invalid_request_error", problems[0])
            return Answer(200, {"input_tokens": estimate_tokens(request.body, self.tokenizer)})
        if route == ("POST", "/v1/messages"):
            return self._messages(request)
        return self._refuse(
            request, 404, "not_found_error", f"no such endpoint: {request.method} {request.path}"
        )

    def _messages(self, request: Request) -> Answer | Step:
        body = request.body
        named = body.get("model") if isinstance(body, dict) else None
        if self.strict_models and isinstance(named, str) and named not in self.models:
            return error_answer(404, "not_found_error", f"model: {named}")  # as the API answers a typo
        problems = self._problems(request, count_only=False)
        if problems:
            for problem in problems:
                self._violation(request, problem)
            return error_answer(400, "invalid_request_error", problems[0])
        checked = self.binding.check(body, request.headers.get("anthropic-beta", ""))
        if checked.refusal is not None:
            self._violation(request, checked.refusal)
            return error_answer(400, "invalid_request_error", checked.refusal)
        request.input_transformations = checked.transformations
        if (
            isinstance(body, dict)
            and isinstance(body.get("context_management"), dict)
            and "compaction" not in body
        ):
            # what the model reads, counts and is billed: the history as cleared; the prefix check above
            # read it as sent (clearing is no edit of it)
            request.effective, request.applied_edits = editing.apply(
                body, lambda b: estimate_tokens(b, self.tokenizer)
            )
        tokens = estimate_tokens(request.effective or body, self.tokenizer)
        if self.context_window is not None and tokens > self.context_window:
            return PromptTooLong(tokens, self.context_window)
        if isinstance(body, dict) and "compaction" in body:
            return self._compaction(request, body, tokens)
        step = self._next_step(body)
        if step is None:
            return self._refuse(request, 500, "api_error", "unexpected request: the script is empty")
        return step

    def _compaction(self, request: Request, body: dict[str, Any], tokens: int) -> Answer | Step:
        """A request for the server's summary: refused as the API refuses it, else summarized."""
        refused = self.compactions.refusal(request.headers, body)
        if refused is None and not offers_compaction(self.models.get(str(body.get("model")))):
            refused = "compaction: this model does not support on-demand compaction"
        if refused is not None:
            return self._refuse(request, 400, "invalid_request_error", refused)
        return self.compactions.answer(body, tokens, self._usage(body))

    def _render(self, request: Request, step: Step) -> Answer:
        body = request.body
        while callable(step) and not isinstance(step, Reply | Error | PromptTooLong):
            step = step(body)
        if isinstance(step, PromptTooLong):
            actual = step.actual if step.actual is not None else estimate_tokens(body, self.tokenizer)
            maximum = step.maximum or self.context_window or self._max_input(body)
            return error_answer(
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
            return error_answer(
                step.status, step.type, step.message, {**headers, **(step.headers or {})}, step.details
            )
        if not isinstance(step, Reply):
            raise TypeError(f"not a script step: {step!r}")
        with self._lock:
            message = self._message(step, request.effective or body)  # counted as the model read it
            message.update(self.binding.issue(body, message["content"], message["id"]))  # bound as sent
            if request.input_transformations:
                message["input_transformations"] = request.input_transformations
            if request.applied_edits is not None and "context_management" not in message:
                message["context_management"] = {"applied_edits": request.applied_edits}
            request.message = message
        if not body.get("stream"):
            return Answer(200, hang_up=step.drop_after is not None, payload=message)
        return Answer(
            200,
            events=stream_events(message, step.raw_inputs, self.chunk),
            cut_after=step.drop_after,
            stream_error=step.stream_error,
            pace=self.pace,
        )

    def _max_input(self, body: dict[str, Any]) -> int:
        return int(self.models.get(str(body.get("model")), {}).get("max_input_tokens", 200_000))

    def _message(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        if reply.stop_reason == COMPACTED:  # the server's summary: billed in usage.iterations only
            return self.compactions.message(reply, body)
        shaped = self.profile.shape(reply.content, body)
        stopped = _thinking_param(body).get("type") == "between_tools" and self.profile.thinks_by_default
        content = self.thinking.issue(shaped, effort_of(body) if stopped else None)
        reply = Reply(**{**reply.__dict__, "content": content})
        has_tool = any(b.get("type") == "tool_use" for b in reply.content)
        usage = {**self._usage(body), "output_tokens": _output_tokens(reply.content), **(reply.usage or {})}
        message = {
            "id": new_id("msg"),
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
