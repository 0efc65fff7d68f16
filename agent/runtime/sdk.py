"""The Messages API client: the official SDK, imported lazily, streaming, with the retries we make.

Retries are ours, not the SDK's (its ``max_retries`` is 0): a 408 / 409 / 429 / 5xx / 529 answer, a
connection that can't be made or breaks, or a stream that breaks mid-message (the whole request is sent
again; no tool runs until a complete message has arrived, so no tool ever runs twice) are retried with
capped exponential backoff and jitter, or after the server's ``retry-after(-ms)``, for up to
``retry_seconds`` in all (a compaction's own requests and background ones: an eighth of it). Each wait of
the main reply and of a foreground compaction's request is announced with a ``Retrying`` event (other
side requests wait quietly), and every wait ends at once when the cancel event is set. The stream is read event by event here (not by the SDK's accumulator), so a tool input that
is not valid JSON becomes an input the tool runner answers with an error instead of ending the turn.
Context-size errors are turned into typed exceptions (errors.PromptTooLong, errors.MaxTokensOverflow) from
the SDK's typed 400 error.
"""

from __future__ import annotations

import difflib
import email.utils
import json
import random
import re
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from agent.runtime import first_request
from core.errors import Interrupted, ModelError, RefusedSetting, ThinkingBindingMismatch, classify_bad_request
from core.events import Retrying, TextDelta, ThinkingDelta
from core.messages import Message, assistant
from core.model import BINDING_BETA, Request, api_model_name
from core.models import PICKER, Family, corrected, family_of, learn
from core.private import redact, secrets_of
from core.tokens import load_encoding

# a side request (a compaction's summary, foreground or background, a notes update) that receives nothing
# for this long is given up: the server sends events, pings included, far more often while it works
SIDE_IDLE_SECONDS = 45.0
RETRY_SECONDS = 120.0  # the default budget: how long, in all, to keep retrying one request
# a compaction's own requests (and background candidates) get this share of it: a failed compaction
# costs nothing, the next one can try again, and with the breaker (3 failures) an always-failing
# summary endpoint costs a session 3 x 15 s at the default budget instead of 3 x 120 s
SIDE_RETRY_SHARE = 0.125
BACKOFF_FIRST = 0.5  # seconds before the second attempt; doubled each time up to BACKOFF_CAP
BACKOFF_CAP = 20.0
JITTER = 0.25  # each backoff wait is shortened by up to this fraction, at random
RETRY_STATUSES = frozenset({408, 409, 429})  # and every status >= 500 (529 overloaded included)
DROP_BLOCK = "drop_block"  # preserved thinking's escape hatch (docs/preserved-thinking.md)
# a tool_use input that was not valid JSON is kept under this key, so the runner can answer it
INVALID_INPUT = "_invalid_json_input"

_import_lock = threading.Lock()
_sdk: Any = None
_when_loaded: list[Callable[[], Any]] = []  # called by the background import once the SDK is in
_in_background = False  # the SDK is imported in the background, now or soon (import_to_come)


COUNT_SECONDS = 10.0  # a token count that takes longer is given up (the estimate stands)


def sdk() -> Any:
    """The anthropic module, imported on first use (it takes ~1-2 s). A caller that waits for it lets the
    background import go on: a hold on it (first_request.hold_imports: a prompt's request is being
    prepared) would only keep that caller waiting, up to the hold's limit, for nothing."""
    if _sdk is None:
        first_request.waiting_for_imports()
    return _import()


def _import() -> Any:
    global _sdk
    with _import_lock:
        if _sdk is None:
            import anthropic

            _sdk = anthropic
    return _sdk


def import_in_background() -> threading.Thread:
    """Import the SDK, then load the tokenizer (~0.2 s), off the thread that draws the prompt."""
    import_to_come()
    t = threading.Thread(target=_warm_up, name="sdk-import", daemon=True)
    t.start()
    return t


def import_to_come() -> None:
    """The SDK is imported in the background, now or soon (the REPL's, once the user is quiet): until it
    is in, main requests go the standard library's way rather than wait for it (ModelClient._quick)."""
    global _in_background
    _in_background = True


def _warm_up() -> None:
    first_request.holdable()  # a first request being sent holds this thread at its next call
    try:
        _import()  # first: held at any module (or call), it never keeps a prompt typed at once waiting long
        for ready in list(_when_loaded):
            ready()
        _when_loaded.clear()
        load_encoding()  # its ~0.1 s in one native call can't be held: after the likeliest moment
    finally:
        first_request.done_holding()


def sdk_loaded() -> bool:
    return _sdk is not None


# --- models ---------------------------------------------------------------------------------------


def default_model() -> str:
    """The newest plain Sonnet alias the installed SDK lists (claude-sonnet-4-5 retires 2026-11-30).

    Read from the SDK's model list file without importing the SDK (that import takes seconds).
    """
    try:
        import importlib.util

        spec = importlib.util.find_spec("anthropic")
        source = Path(spec.origin).parent / "types" / "model.py"  # type: ignore[union-attr, arg-type]
        names = re.findall(r"claude-sonnet-(\d+)(?:-(\d))?(?=[\"'])", source.read_text())
        best = max(((int(a), int(b or 0)) for a, b in names), default=None)
        if best:
            return f"claude-sonnet-{best[0]}" + (f"-{best[1]}" if best[1] else "")
    except (ImportError, AttributeError, TypeError, OSError, UnicodeDecodeError):  # no list: the fallback
        pass
    return "claude-sonnet-4-6"


def _block_dict(block: Any) -> dict[str, Any]:
    d = block.model_dump(exclude_none=True) if hasattr(block, "model_dump") else dict(block)
    if d.get("type") == "text":
        d = {
            "type": "text",
            "text": d.get("text", ""),
            **({"citations": d["citations"]} if d.get("citations") else {}),
        }
    return d


class ModelClient:
    """One SDK client per session. ``stream`` returns a complete assistant Message or raises."""

    def __init__(
        self,
        *,
        api_key: str | None,
        auth_token: str | None,
        base_url: str | None,
        on_event: Callable[[Any], None] | None = None,
        retry_seconds: float = RETRY_SECONDS,
        jitter: Callable[[], float] = random.random,
        side_idle_seconds: float = SIDE_IDLE_SECONDS,
    ):
        self._kwargs = {"api_key": api_key, "auth_token": auth_token, "base_url": base_url}
        self._client: Any = None
        self._quick_used = False  # a request went the standard library's way (first_request)
        # one that way got anything but a whole answer: that one and every later one go through the SDK
        self._handed_over = False
        # --fallback-model: an overloaded (529) main request is not retried on another model than this one;
        # the loop sends it again on this one (agent.runtime.session.fall_back)
        self.fallback_model: str | None = None
        self._lock = threading.Lock()
        self.on_event = on_event or (lambda e: None)
        # what the Models API said of each model (core.models.learn): every request of this client
        # follows it; a model not asked about (or not answered) follows core.models' table
        self._families: dict[str, Family] = {}
        # settings the API refused for a model although its family offered them (the Models API said so):
        # left out of every later request for that model (core.models.corrected)
        self._refused: dict[str, frozenset[str]] = {}
        self.retry_seconds = retry_seconds
        self.side_idle_seconds = side_idle_seconds
        self._jitter = jitter
        if _sdk is None:  # the background import builds the SDK's client (~0.1 s) off the first request
            this = weakref.ref(self)  # a client dropped meanwhile (/clear, a test) is not kept alive
            _when_loaded.append(lambda: (made := this()) is not None and made.client)
        # told when a request's thinking failed the prefix check and is sent again with drop_block: the
        # session keeps the setting for the rest of the conversation and says so (agent.runtime.session)
        self.on_binding_fallback: Callable[[ThinkingBindingMismatch], None] = lambda e: None

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                anthropic = sdk()
                kwargs = {k: v for k, v in self._kwargs.items() if v}
                if not kwargs.get("api_key") and not kwargs.get("auth_token"):
                    kwargs["api_key"] = "missing"  # the server answers 401; we report it clearly
                self._client = anthropic.Anthropic(max_retries=0, timeout=600.0, **kwargs)
            return self._client

    def context_window(self, model: str) -> int | None:
        """max_input_tokens from the Models API, or None when it can't be had."""
        n = self.model_info(model).get("max_input_tokens")
        return int(n) if isinstance(n, int) and n > 0 else None

    def model_info(self, model: str) -> dict[str, Any]:
        """What ``GET /v1/models/{id}`` says of the model (limits, ``capabilities``), taught to
        core.models so every later request follows it; {} when it can't be had."""
        path = f"/v1/models/{quote(api_model_name(model), safe='')}"
        if _sdk is None and first_request.usable({}):  # at start: no need to wait for the SDK
            try:
                found = first_request.get_json(path, timeout=5.0, **self._kwargs)
            except first_request.Handover:  # unreachable or unknown: the table's facts stand
                return {}
        else:
            try:
                retrieve = self.client.with_options(max_retries=0, timeout=5.0).models.retrieve
                found = _dump(retrieve(api_model_name(model)))
            except sdk().APIError:  # unreachable or unknown: the table's facts stand
                return {}
        self._families[api_model_name(model)] = learn(model, found)
        return found

    def offered_models(self) -> list[str]:
        """The model ids ``GET /v1/models`` lists ([] when it can't be had)."""
        try:
            page = self.client.with_options(max_retries=0, timeout=5.0).models.list(limit=100)
            return [str(m.id) for m in page.data if getattr(m, "id", None)]
        except sdk().APIError:  # unreachable: the caller falls back on the table's picker
            return []

    def unknown_model(self, model: str) -> list[str] | None:
        """When the API says it has no model ``model`` (404): the ids it does offer (the table's picker
        when it won't list them); None when it knows the model, or can't be asked."""
        anthropic = sdk()
        try:
            info = self.client.with_options(max_retries=0, timeout=5.0).models.retrieve(api_model_name(model))
        except anthropic.NotFoundError:
            return self.offered_models() or [m for _, m, _ in PICKER]
        except anthropic.APIError:  # unreachable or refused: the request will say
            return None
        self._families[api_model_name(model)] = learn(model, _dump(info))
        return None

    def family(self, model: str) -> Family:
        """What ``model`` accepts: as the Models API said, else as core.models' table says, less what the
        API refused for it."""
        name = api_model_name(model)
        return corrected(
            self._families.get(name) or family_of(model), model, self._refused.get(name, frozenset())
        )

    def _unlearn(self, req: Request, e: RefusedSetting) -> bool:
        """The API refused a setting the model's family offered: from now on the family goes without it.
        False when it was refused already (the request could not have carried it)."""
        name = api_model_name(req.model)
        refused = self._refused.get(name, frozenset())
        if e.setting in refused:
            return False
        self._refused[name] = refused | {e.setting}
        after = req.params(self.family(req.model))
        # only worth another try when the request goes without it now (else it is refused again)
        if e.setting == "effort":
            return "output_config" not in after
        return (after.get("thinking") or {}).get("type") != e.setting

    def learn_in_background(self, model: str) -> threading.Thread:
        """Ask the Models API about ``model`` off the caller's thread (a session's start: the first
        prompt never waits on it)."""
        t = threading.Thread(target=self.model_info, args=(model,), name="model-info", daemon=True)
        t.start()
        return t

    def stream(
        self, req: Request, *, cancel: threading.Event | None = None, emit_text: bool = True
    ) -> Message:
        if not self._quick(req):
            sdk()  # the first import takes seconds: not part of the retry budget
        started = time.monotonic()
        # "once": a request with a ready fallback (the server's summary: a local one) is not retried
        share = {"main": 1.0, "once": 0.0}.get(req.retry, SIDE_RETRY_SHARE)
        budget = self.retry_seconds * share
        attempt = 0
        while True:
            attempt += 1
            try:
                outcome = self._attempt(req, cancel, emit_text)
            except RefusedSetting as e:
                # a setting the family offered (the Models API said so) and the model refuses: never a dead
                # session while a request without it can be sent
                if not self._unlearn(req, e):
                    raise
                continue
            except ThinkingBindingMismatch as e:
                # sending it again as it is can't work (the history still holds the change): once, with
                # the invalid thinking dropped by the server; never a dead session
                if req.block_binding:
                    raise
                req.block_binding = DROP_BLOCK
                self.on_binding_fallback(e)
                continue
            if isinstance(outcome, Message):
                return outcome
            failure = outcome
            delay = failure.wait if failure.wait is not None else self.backoff(attempt)
            if (
                not failure.retry
                or time.monotonic() - started + delay > budget
                or self._falls_back(req, failure)
            ):
                raise failure.give_up(attempt, time.monotonic() - started, delay, budget)
            self._wait_to_retry(req, failure, attempt, delay, cancel, emit_text)

    def _wait_to_retry(
        self,
        req: Request,
        failure: _Failure,
        attempt: int,
        delay: float,
        cancel: threading.Event | None,
        emit_text: bool,
    ) -> None:
        """Say why a request waits (a compaction: the user is waiting for it; the main request), then wait
        ``delay`` or until the turn is cancelled."""
        if req.retry == "compaction":  # the user is waiting for it: say why
            self.on_event(Retrying(attempt, failure.reason, delay, compaction=True))
        elif emit_text:  # other side requests (notes, candidates) wait quietly
            self.on_event(Retrying(attempt, failure.reason, delay))
        if cancel is not None and cancel.wait(delay):
            raise Interrupted("interrupted")
        elif cancel is None:
            time.sleep(delay)

    def _falls_back(self, req: Request, failure: _Failure) -> bool:
        fallback = self.fallback_model
        return (
            failure.status == 529
            and req.retry == "main"
            and fallback is not None
            and api_model_name(fallback) != api_model_name(req.model)
        )

    def count(self, req: Request) -> int | None:
        """The server's count of a request's input tokens (``POST /v1/messages/count_tokens``: no output,
        not billed), which compaction calibrates its estimate on (compact.request_cycle ``measure``); None
        when it can't be had quickly — the estimate then stands."""
        try:
            params = req.params(self.family(req.model))
            betas = [b for b in params.pop("betas", []) if b]
            keep = ("model", "messages", "system", "tools", "tool_choice", "thinking")
            body = {k: params[k] for k in keep if k in params}
            client = self.client.with_options(timeout=COUNT_SECONDS, max_retries=0)
            if betas:
                result = client.beta.messages.count_tokens(**body, betas=betas)
            else:
                result = client.messages.count_tokens(**body)
            return int(result.input_tokens)
        except (sdk().APIError, TypeError):  # a count is an improvement, never a failure (TypeError: a
            return None  # parameter this SDK's count_tokens doesn't take)

    def backoff(self, attempt: int) -> float:
        """The wait after failed attempt ``attempt``: doubling from BACKOFF_FIRST, capped, with jitter."""
        return min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** (attempt - 1)) * (1 - JITTER * self._jitter())

    def _said(self, e: Any) -> str:
        """What the server said, without the credentials: an error message may echo the key (issue 30),
        and it is shown on stderr and recorded."""
        return redact(_error_text(e), secrets_of(self._kwargs.get("api_key"), self._kwargs.get("auth_token")))

    def _quick(self, req: Request) -> bool:
        """Whether this request may go the standard library's way (agent.runtime.first_request): a main
        request sent while the SDK is still to come: the first one, and while the SDK is imported in the
        background (the REPL's: a prompt typed at once, then its turn's next requests after each tool
        call), every one, as long as each got its whole answer."""
        return (
            req.retry == "main"
            and not self._handed_over
            and _sdk is None
            and (_in_background or not self._quick_used)
        )

    def _attempt(self, req: Request, cancel: threading.Event | None, emit_text: bool) -> Message | _Failure:
        """One attempt: the message, or what went wrong (raises what no retry can mend)."""
        quick = self._quick(req)
        if quick:
            self._quick_used = True
        else:
            sdk()
        try:
            try:
                message = self._stream_once(req, cancel, emit_text, quick=quick)
            except first_request.ErrorAnswer as answer:  # what the SDK would have raised, made by the SDK
                raise self._status_error(answer) from None  # (handed over below, as every failure)
            if message is not None:
                return message
            self._handed_over = self._handed_over or quick
            return _Failure("the response stream ended before the message was complete")
        except Interrupted:
            raise
        except first_request.Handover:  # no answer came: the SDK sends it, and says what went wrong
            self._handed_over = True
            return self._attempt(req, cancel, emit_text)
        except first_request.StreamError as e:
            self._handed_over = True
            return _Failure(f"the stream failed part way ({self._said(e)})")
        except Exception as e:  # noqa: BLE001 - sorted below; what is none of these is raised as it was
            self._handed_over = self._handed_over or quick
            return self._failure(e, cancel, req.model)

    def _status_error(self, answer: first_request.ErrorAnswer) -> Exception:
        """The SDK's own exception for an error answer the standard library's way received."""
        import httpx2

        request = httpx2.Request("POST", answer.url)
        response = httpx2.Response(
            answer.status, headers=answer.headers, content=answer.body, request=request
        )
        return self.client._make_status_error_from_response(response)

    def _failure(self, e: Exception, cancel: threading.Event | None, model: str) -> _Failure:
        """What one attempt's exception means: a failure to retry (or not), or raised as it is."""
        anthropic = sdk()
        if isinstance(e, anthropic.BadRequestError):
            typed = classify_bad_request(self._said(e))
            code = getattr(e, "error_code", None)  # e.g. a compaction request's compaction_* code
            named = f" ({code})" if isinstance(code, str) and code else ""
            raise typed or ModelError(f"API error 400{named}: {self._said(e)}", status=400) from None
        if isinstance(e, anthropic.NotFoundError) and self._said(e).startswith("model:"):
            offered = self.offered_models() or [m for _, m, _ in PICKER]  # a typo: say what there is
            raise ModelError(unknown_model_text(model, offered), status=404) from None
        if isinstance(e, anthropic.APIStatusError):
            if _mid_stream_failure(e):
                return _Failure(f"the stream failed part way ({self._said(e)})")
            headers = getattr(getattr(e, "response", None), "headers", None) or {}
            return _Failure(
                f"API error {e.status_code}: {self._said(e)}",
                status=e.status_code,
                retry=_should_retry(e.status_code, headers),
                wait=_retry_after(headers),
            )
        if isinstance(e, (anthropic.APIConnectionError, _transport_error(), OSError)) or (
            type(e).__module__ == "http.client"
        ):
            if cancel is not None and cancel.is_set():
                raise Interrupted("interrupted") from None
            if _cannot_connect(e):
                cause = e.__cause__ or e
                return _Failure(f"cannot connect to {self.client.base_url} ({_errno_text(cause)})")
            return _Failure(f"the connection broke: {self._said(e)}")
        raise e

    def _stream_once(
        self, req: Request, cancel: threading.Event | None, emit_text: bool, quick: bool = False
    ) -> Message | None:
        """One attempt. With a cancel event the reading happens in a daemon thread, so Ctrl-C returns at
        once even while the socket is stalled (a blocked read can't be woken from outside); the
        abandoned reader stops at its next event."""
        reply = _Reply(progress=self.family(req.model).progress_in_thinking)
        if cancel is None:
            return self._read(req, None, emit_text, reply, quick)
        box: dict[str, Any] = {}
        # the reader's own stop: the turn's cancel event is cleared for the next turn, and a reader still
        # waiting for its answer then must not show that answer under the next prompt
        abandoned = threading.Event()

        def read() -> None:
            try:
                box["message"] = self._read(req, abandoned, emit_text, reply, quick)
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread as is
                box["error"] = e

        reader = threading.Thread(target=read, name="model-stream", daemon=True)
        reader.start()
        # woken by the reader's end, looking at Ctrl-C every 50 ms: waiting on the cancel event instead
        # noticed the answer up to 50 ms late, 25 ms a request on average
        while reader.is_alive():
            if cancel.is_set():
                abandoned.set()
                raise Interrupted("interrupted", usage=dict(reply.usage) or None)  # billed though cut short
            reader.join(0.05)
        if cancel.is_set():  # cancelled just as the reader ended
            raise Interrupted("interrupted", usage=dict(reply.usage) or None)
        if "error" in box:
            raise box["error"]
        return box["message"]

    def _read(
        self,
        req: Request,
        cancel: threading.Event | None,
        emit_text: bool,
        reply: _Reply,
        quick: bool = False,
    ) -> Message | None:
        params = req.params(self.family(req.model))
        betas = [*req.betas, *[b for b in params.pop("betas", []) if b not in req.betas]]
        if req.block_binding and BINDING_BETA not in betas:
            betas.append(BINDING_BETA)
        cancelled = cancel.is_set if cancel is not None else (lambda: False)
        if quick:
            if not first_request.usable(params):
                raise first_request.Handover("parameters the SDK must send")
            stream = first_request.events(
                {**params, **({"betas": betas} if betas else {})},
                timeout=600.0,
                **self._kwargs,
            )
            return self._consume(stream, cancelled, emit_text, reply)
        client = self.client
        if req.retry != "main":  # a compaction's or a background request: a hung one is given up (issue 30)
            client = client.with_options(timeout=self.side_idle_seconds)
        api = client.beta.messages if betas else client.messages
        if betas:
            params["betas"] = betas
        return self._consume(api.create(**params, stream=True), cancelled, emit_text, reply)

    def _consume(
        self, stream: Any, cancelled: Callable[[], bool], emit_text: bool, reply: _Reply
    ) -> Message | None:
        with stream as events:
            try:
                for event in events:
                    if cancelled():
                        raise Interrupted("interrupted")
                    shown = reply.add(event)
                    if emit_text and shown is not None:
                        self.on_event(shown)
            except Exception:
                if cancelled():
                    raise Interrupted("interrupted") from None
                raise
        if cancelled():
            raise Interrupted("interrupted")
        return reply.message()


def unknown_model_text(model: str, offered: list[str]) -> str:
    """What a model id the API doesn't have is answered with: the ids it has, the nearest first."""
    near = difflib.get_close_matches(api_model_name(model), offered, n=1, cutoff=0.6)
    hint = f" Did you mean {near[0]}?" if near else ""
    return (
        f"The API has no model named {model}.{hint} The models it offers: {', '.join(offered)} "
        "(aliases: sonnet, opus, haiku, fable). Pick one with /model, or start with --model."
    )


def _dump(value: Any) -> dict[str, Any]:
    """A pydantic model (or dict) from the SDK as a dict of its set fields; {} for None or anything else."""
    if hasattr(value, "model_dump"):
        dumped = value.model_dump(exclude_none=True)
        return dumped if isinstance(dumped, dict) else {}
    return {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else {}


class _Reply:
    """A streamed response put together event by event (what the SDK's accumulator does, except that a
    tool input which is not valid JSON does not end the stream)."""

    def __init__(self, *, progress: bool = False) -> None:
        # the model writes its progress between tool calls in thinking blocks (core.models.Family): their
        # text is shown as text, as a 4.x model's text between tool calls was
        self.progress = progress
        self._said = False  # progress text was shown already: the next block starts a new paragraph
        self.head: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        # streamed pieces, joined once at the end: adding each to a growing string copies it every
        # time, which for a 200 MB tool input is quadratic in time and many times the memory
        self.json: dict[int, list[str]] = {}
        self.parts: dict[tuple[int, str], list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.context_management: Any = None

    def add(self, event: Any) -> TextDelta | ThinkingDelta | None:
        kind = event.type
        # a server may leave out fields the SDK's types declare (usage above all): what is missing is
        # read as absent, never as an AttributeError that would end the turn
        if kind == "message_start":
            self.head = _dump(getattr(event, "message", None))
            self.usage = dict(self.head.get("usage") or {})
        elif kind == "content_block_start":
            self.blocks[event.index] = event.content_block.model_dump(exclude_none=True)
        elif kind == "content_block_delta":
            return self._delta(self.blocks[event.index], event.index, event.delta)
        elif kind == "message_delta":
            dropped = getattr(event, "input_transformations", None)
            if dropped:
                self.head["input_transformations"] = [_dump(t) for t in dropped]
            self.stop_reason = getattr(getattr(event, "delta", None), "stop_reason", None)
            self.usage.update(_dump(getattr(event, "usage", None)))
            applied = getattr(event, "context_management", None)
            if applied is not None:
                self.context_management = (
                    applied.model_dump(exclude_none=True) if hasattr(applied, "model_dump") else applied
                )
        return None

    def _delta(self, block: dict[str, Any], index: int, delta: Any) -> TextDelta | ThinkingDelta | None:
        kind = delta.type
        if kind == "text_delta":
            self.parts.setdefault((index, "text"), [block.get("text", "")]).append(delta.text)
            return TextDelta(delta.text)
        if kind == "input_json_delta":
            self.json.setdefault(index, []).append(delta.partial_json)
        elif kind == "thinking_delta":
            return self._thinking(block, index, delta.thinking)
        elif kind == "signature_delta":
            block["signature"] = delta.signature
        elif (
            kind == "compaction_delta"
        ):  # the server's summary (compact.compaction.server_summary), in pieces
            if getattr(delta, "content", None) is not None:
                self.parts.setdefault((index, "content"), [block.get("content") or ""]).append(delta.content)
            if getattr(delta, "encrypted_content", None) is not None:
                block["encrypted_content"] = delta.encrypted_content
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.citation.model_dump(exclude_none=True))
        return None

    def _thinking(self, block: dict[str, Any], index: int, words: str) -> TextDelta | ThinkingDelta | None:
        """Thinking words: shown as thinking, or, on a model that thinks its progress, as the reply's text."""
        parts = self.parts.setdefault((index, "thinking"), [block.get("thinking", "")])
        parts.append(words)
        if not self.progress:
            return ThinkingDelta(words)
        if not words:
            return None
        first = not "".join(parts[:-1])  # this block's first words
        text = ("\n\n" if first and self._said else "") + words
        self._said = True
        return TextDelta(text)

    def message(self) -> Message | None:
        """The complete message; None when the stream ended before its stop reason came."""
        if self.stop_reason is None:
            return None
        for (index, key), parts in self.parts.items():
            self.blocks[index][key] = "".join(parts)
        self.parts.clear()
        content = []
        for index in sorted(self.blocks):
            block = _block_dict(self.blocks[index])
            if index in self.json:  # popped: the pieces are freed before the whole is parsed
                block["input"] = tool_input("".join(self.json.pop(index)))
            content.append(block)
        msg = assistant(
            content,
            message_id=self.head.get("id"),
            model=self.head.get("model"),
            stop_reason=self.stop_reason,
            usage=self.usage or None,
        )
        extra = {}
        if self.context_management is not None:
            extra["contextManagement"] = self.context_management
        # what the server left out of the request (preserved thinking), and why the cache missed
        if self.head.get("input_transformations"):
            extra["inputTransformations"] = self.head["input_transformations"]
        miss = (self.head.get("diagnostics") or {}).get("cache_miss_reason")
        if miss:
            extra["cacheMissReason"] = miss
        return msg.replace(extra=extra) if extra else msg


def tool_input(raw: str) -> dict[str, Any]:
    """A streamed tool input; one that is not a JSON object of valid Unicode is kept, as text that can be
    sent and recorded, under INVALID_INPUT with the reason."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # a lone surrogate can't be sent or recorded
        problem = "" if isinstance(value, dict) else f"a JSON {type(value).__name__}, not an object"
    except (ValueError, RecursionError) as e:  # UnicodeEncodeError is a ValueError
        problem = str(e) or type(e).__name__
    if not problem:
        return value
    return {
        INVALID_INPUT: {"text": raw.encode("utf-8", "backslashreplace").decode("utf-8"), "error": problem}
    }


class _Failure:
    """What went wrong in one attempt, and whether (and when) another may mend it."""

    def __init__(
        self, reason: str, *, status: int | None = None, retry: bool = True, wait: float | None = None
    ) -> None:
        self.reason, self.status, self.retry, self.wait = reason, status, retry, wait

    def give_up(self, attempts: int, elapsed: float, delay: float, budget: float) -> ModelError:
        if not self.retry:
            return ModelError(self.reason, status=self.status)
        why = f"gave up after {attempts} attempt{'s' if attempts > 1 else ''} in {elapsed:.0f} s"
        if self.wait is not None and delay > budget:
            why += f"; the server asked to wait {delay:.0f} s, longer than the {budget:g} s retry budget"
        reason = f"{self.reason[:-1]}; {why})" if self.reason.endswith(")") else f"{self.reason} ({why})"
        return ModelError(reason, status=self.status, retryable=True)


def _should_retry(status: int, headers: Any) -> bool:
    hint = str(headers.get("x-should-retry", "")).lower()
    if hint in ("true", "false"):
        return hint == "true"
    return status in RETRY_STATUSES or status >= 500


def _retry_after(headers: Any) -> float | None:
    """The wait the server asks for (retry-after-ms, else retry-after in seconds or as an HTTP date)."""
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _cannot_connect(e: BaseException) -> bool:
    """No connection was made at all (refused, unknown host), as opposed to one that broke."""
    cause = e.__cause__ or e
    return type(cause).__name__ in ("ConnectError", "ConnectTimeout")


def _errno_text(e: BaseException) -> str:
    text = str(e)
    return re.sub(r"^\[Errno -?\d+\]\s*", "", text).strip() or type(e).__name__


def _transport_error() -> type[Exception]:
    """The HTTP library's transport error (a stream cut mid-body surfaces as one, unwrapped by the SDK)."""
    try:
        import httpx2

        return httpx2.TransportError
    except ImportError:  # older SDKs use httpx
        import httpx  # type: ignore[import-not-found]

        return httpx.TransportError


def _mid_stream_failure(e: Any) -> bool:
    """An SSE error event after the stream started (the SDK reports it with the stream's status, 200)."""
    return e.status_code == 200


def _error_text(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(getattr(e, "message", e))
