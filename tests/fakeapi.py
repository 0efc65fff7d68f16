"""A fake Anthropic Messages API on 127.0.0.1, spoken to by the official SDK unchanged.

The server itself (HTTP, SSE, steps, token estimate) is the package's scripted server,
agent/demo/server.py, which ``compact-agent --demo`` also runs; this module adds what tests need on top:
a script and routes, validation with recorded violations, prompt-cache accounting and the checks.

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
   The model family's rules are the profile's (``FakeAPI(profile="2026")``: the 5.5 family, whose
   replies are shaped as that family's are; ``"4.x"``: the budget rules; see agent/demo/server.py).
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

Preserved thinking (``binding="error"``, the default; ``"off"`` checks nothing, for a test about something
else): on the 2026 models each thinking block is bound to its prefix and a request that changed it is
refused with the API's 400 text, or with ``drop_block`` has the blocks left out and listed
(agent/demo/binding.py). ``api.binding`` counts refusals, ``fallbacks`` and cache misses; ``check()``
fails on a refusal (a violation) and on any drop_block fallback. Mid-conversation ``role: "system"``
messages are valid on those models.

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
import os
import re
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agent.demo.binding import Binding, preserves_thinking  # noqa: F401 - Binding re-exported
from agent.demo.server import (  # noqa: F401 - re-exported: the tests import these from here
    DEFAULT_MODELS,
    ERROR_DEFAULTS,
    PROFILES,
    Answer,
    Error,
    PromptTooLong,
    Reply,
    Request,
    ScriptedAPI,
    Step,
    Tokenizer,
    error_answer,
    estimate_tokens,
    last_user_text,
    model_info,
    new_id,
    referenced_tools,
    request_text,
    stream_events,
    text_block,
    thinking_block,
    tool_use_block,
)
from agent.demo.server import blocks_of as _blocks
from agent.demo.server import clean as _clean
from agent.demo.server import tagged_blocks as _tagged_blocks
from agent.demo.server import tokens_of_chars as _tokens
from agent.demo.server import units as _units

# the names these had when they lived here
_Answer = Answer
_error_answer = error_answer
_new_id = new_id
_ERROR_DEFAULTS = ERROR_DEFAULTS

# FAKEAPI_REFUSALS_LOG=path: every refused request of every fake in the process is appended there (one
# line each), so a benchmark run can show it sent none
REFUSALS_LOG = os.environ.get("FAKEAPI_REFUSALS_LOG")
# The profile a fake plays when its maker names none: the 5.5 family's rules ("2026"), the models people
# run today; FAKEAPI_PROFILE=4.x runs a whole suite or benchmark on the budget rules instead
DEFAULT_PROFILE = os.environ.get("FAKEAPI_PROFILE") or "2026"
# Every fake made in this process, for tests/conftest.py's check after each test (no refusal, no
# drop_block fallback the test did not expect); weak, so a finished test's fakes are not kept alive
LIVE: weakref.WeakSet[FakeAPI] = weakref.WeakSet()

UNSCRIPTED = "unexpected request: the script is empty"  # the server's 500 when no step is left

# --------------------------------------------------------------------------------------------------
# Script steps


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


# --------------------------------------------------------------------------------------------------
# Prompt cache

CACHE_LOOKBACK = 20  # blocks before a breakpoint the API checks for an earlier cache entry


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
# Which side request a body is (the tests route and count them by these)


def is_compaction(body: dict) -> bool:
    """A compaction's full summary request: its instruction asks for <analysis> and <summary>."""
    text = last_user_text(body)
    return "<analysis>" in text and "<summary>" in text


def is_server_compaction(body: dict) -> bool:
    """A request for the server's on-demand summary (the top-level ``compaction`` parameter): the fake
    answers it itself (``Compactions``), no script step."""
    return "compaction" in body


def is_notes_update(body: dict) -> bool:
    """A session-notes update: its instruction names the notes file."""
    return "summary.md" in last_user_text(body)


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
    problems += _deferred_problems(body)
    problems += _system_problems(body.get("system"))
    problems += _message_problems(body.get("messages"), system_messages=preserves_thinking(body.get("model")))
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


def _deferred_problems(body: dict) -> list[str]:
    """Tool search's rules: some tool is sent in full, a deferred tool carries no cache breakpoint, and
    every ``tool_reference`` names a tool of the request."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    if not any(t.get("defer_loading") for t in tools):
        return []
    problems = []
    if all(t.get("defer_loading") for t in tools):
        problems.append("tools: at least one tool must not have defer_loading")
    problems += [
        f"tools.{i}: a deferred tool cannot have cache_control"
        for i, t in enumerate(tools)
        if t.get("defer_loading") and t.get("cache_control")
    ]
    names = {t.get("name") for t in tools}
    problems += [f"tool_reference to unknown tool {name}" for name in sorted(referenced_tools(body) - names)]
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


def _message_problems(messages: Any, *, system_messages: bool = False) -> list[str]:
    if not isinstance(messages, list) or not messages:
        return ["messages: at least one message is required"]
    if messages[0].get("role") != "user" and not _opens_with_compaction(messages[0]):
        return ['messages: first message must use the "user" role']
    problems = []
    seen_tool_ids: set[str] = set()
    for i, message in enumerate(messages):
        where, role, last = f"messages.{i}", message.get("role"), i == len(messages) - 1
        if role == "system" and system_messages:
            problems += _system_message_problems(messages, i)
            continue
        if role not in ("user", "assistant"):
            problems.append(f"{where}.role: Input should be 'user', 'assistant' or 'system'")
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


def _opens_with_compaction(message: Any) -> bool:
    """An assistant message that starts with a compaction block the server wrote may open the messages."""
    blocks = _blocks(message.get("content")) if isinstance(message, dict) else []
    return message.get("role") == "assistant" and bool(blocks) and blocks[0].get("type") == "compaction"


def _system_message_problems(messages: list[dict], i: int) -> list[str]:
    """A mid-conversation ``role: "system"`` message (the 2026 models): after a user turn (or another
    system message that follows one), text only, never empty."""
    where, message = f"messages.{i}", messages[i]
    before = next((m.get("role") for m in reversed(messages[:i]) if m.get("role") != "system"), None)
    if before != "user":
        return [f"{where}: a system message may only follow a user message"]
    content = message.get("content")
    if not content:
        return [f"{where}: system messages must have non-empty content"]
    problems = []
    for j, block in enumerate(_blocks(content)):
        if not isinstance(block, dict) or block.get("type") not in ("text", "tool_addition", "tool_removal"):
            problems.append(f"{where}.content.{j}: system messages may hold only text blocks")
        else:
            problems += _text_problems(block, f"{where}.content.{j}")
    return problems


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
# The fake itself


class FakeAPI(ScriptedAPI):
    """A scripted Messages API server with checks; see the module docstring. Thread-safe."""

    def __init__(
        self,
        *,
        context_window: int | None = None,
        models: list[dict] | None = None,
        cache_min_tokens: int = 0,
        tokenizer: Tokenizer | None = None,
        profile: str | None = None,
        binding: str = "error",
    ) -> None:
        super().__init__(
            context_window=context_window,
            models=models,
            tokenizer=tokenizer,
            profile=profile or DEFAULT_PROFILE,
            binding=binding,
        )
        self.script: list[Step] = []
        self.routes: list[Route] = []
        self.violations: list[str] = []
        self.cache = PromptCache(cache_min_tokens, tokenizer)
        self.refusals_expected = False
        LIVE.add(self)

    def start(self) -> FakeAPI:
        return super().start()

    def __enter__(self) -> FakeAPI:
        return self.start()

    def env(self) -> dict[str, str]:
        """Environment variables that point the SDK at this server."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": "test-key"}

    def client(self, on_event: Callable[[Any], None] | None = None) -> Any:
        """The agent's SDK client (agent.runtime.sdk.ModelClient, default retry budget) pointed at this
        server: the wire for a test below the agent floor (tests/helpers/bench.py), which imports no agent."""
        from agent.runtime.sdk import ModelClient

        return ModelClient(api_key="test-key", auth_token=None, base_url=self.url, on_event=on_event)

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
        default_type, default_message = ERROR_DEFAULTS.get(status, ("api_error", f"Error {status}"))
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

    def conversation(self, marker: str, responder: Step) -> Route:
        """Route one conversation's requests by its first user message: those whose first message holds
        ``marker`` (a subagent's task prompt, say) are answered by ``responder``, whatever the script holds."""
        return self.on(lambda body: marker in first_user_text(body), responder)

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

    def expect_refusals(self) -> FakeAPI:
        """Declare that this fake is meant to refuse requests (a test of a refusal and what follows it):
        tests/conftest.py then leaves its violations to the test. Without it, any request a fake refused
        and the test did not clear from ``violations`` fails the test."""
        self.refusals_expected = True
        return self

    def unexpected(self) -> list[str]:
        """What tests/conftest.py fails a test on, and forgets once reported: the refusals (unless
        expected) and drop_block fallbacks this fake recorded that the test left in place. A request
        the script had no step for is the test's scripting, not a refusal: ``check()`` fails on it."""
        with self._lock:
            refused = [v for v in self.violations if UNSCRIPTED not in v]
            found = [] if self.refusals_expected else [f"refused: {v}" for v in refused]
            found += [f"drop_block fallback: {f}" for f in self.binding.fallbacks]
            if not self.refusals_expected:
                self.violations.clear()
            self.binding.fallbacks.clear()
        return found

    def check(self) -> None:
        """No violations (a request the prefix check refused is one), no drop_block fallback, and nothing
        left unconsumed. A test of the fallback itself clears ``binding.fallbacks`` once it has looked."""
        assert self.violations == [], f"FakeAPI violations: {self.violations}"
        assert self.binding.fallbacks == [], f"FakeAPI: drop_block fallbacks taken: {self.binding.fallbacks}"
        self.assert_done()

    # -- the server's hooks (called from handler threads) ----------------------------------------

    def _violation(self, request: Request, problem: str) -> None:
        with self._lock:
            number = next(n for n, seen in enumerate(self.requests, 1) if seen is request)
            self.violations.append(f"{request.method} {request.path} (request {number}): {problem}")
            if REFUSALS_LOG:  # a benchmark run counts every refusal of every fake it starts
                with open(REFUSALS_LOG, "a", encoding="utf-8") as log:
                    log.write(f"{self.profile.name}\t{problem}\n")

    def _problems(self, request: Request, *, count_only: bool) -> list[str]:
        problems = validate(request.body, count_only=count_only) + self._beta_problems(request)
        problems += self._family_problems(request) + self.compactions.problems(request.body)
        return problems if count_only else problems + self._model_problems(request.body)

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

    def _next_step(self, body: dict) -> Step | None:
        for route in self.routes:
            if not route.spent and route.predicate(body):
                route.hits.append(body)
                return route.responder
        return self.script.pop(0) if self.script else None

    def _usage(self, body: dict) -> dict:
        return self.cache.account(body)


def read_paths(body: dict) -> list[str]:
    """The files a request's conversation has read, in order (its Read calls' paths)."""
    return [
        b["input"]["file_path"]
        for m in body["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("type") == "tool_use" and b["name"] == "Read"
    ]


def first_user_text(body: dict) -> str:
    """The text of a request's first message (the prompt that opened its conversation)."""
    messages = body.get("messages") or []
    if not messages:
        return ""
    return "\n".join(b.get("text", "") for b in _blocks(messages[0].get("content")) if isinstance(b, dict))


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


def server_tool_search(query: str, found: list[str], then: tuple[str, dict] | None = None) -> list[dict]:
    """An assistant message's content as the API writes it when its own tool search ran (the server's
    ``tool_search_tool_bm25``): the search call, its result naming ``found``, then optionally a call of
    one found tool."""
    use_id = new_id("srvtoolu")
    blocks = [
        {"type": "server_tool_use", "id": use_id, "name": "tool_search_tool_bm25", "input": {"query": query}},
        {
            "type": "tool_search_tool_result",
            "tool_use_id": use_id,
            "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": n} for n in found],
            },
        },
    ]
    if then is not None:
        blocks.append(tool_use_block(*then))
    return blocks
