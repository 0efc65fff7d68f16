"""A session's requests while the SDK is still being imported: the same Messages API call over the standard
library's HTTP client, so a prompt typed the moment the REPL appears does not wait ~1-2 s for ``import
anthropic`` (benchmarks/startup_repl.py: "first prompt typed at once"), nor, while the REPL imports the SDK
in the background, do its turn's next requests after each tool call (agent.runtime.sdk.ModelClient._quick:
main requests, as long as each got its whole answer; the first that did not goes to the SDK, and so does
every later one). Without an import in the background (print mode) only the first goes this way.

Only the happy path is taken here. The request is sent only as the SDK would send it (a plain JSON body, no
proxy in the environment). An error answer is handed back whole (``ErrorAnswer``): the SDK makes its own
exception of it, so it is reported and retried as ever, and the request is not sent twice; when no answer
came at all (``Handover``), the SDK sends the request and says what went wrong. The
events are given to the reader as objects with the SDK's attribute names (``Event``), so one reader
(agent.runtime.sdk._Reply) puts the message together whichever way it came.

While the foreground prepares and sends this request, the background import is held (``hold_imports``):
both run Python under one GIL, and the import would otherwise take most of the foreground's share. A hold
stops it where its next module starts (an audit hook on "exec": ~4,000 of them in the SDK and the
tokenizer, most under 3 ms apart, the longest ~120 ms); while holds keep coming (keys typed, less than
``TYPING_GAP`` apart) it is held at its next Python call instead (a profile function on that thread). That
function is set only then: run at every call, it cost the import ~80% more CPU (1.72 s instead of 0.93 s
for the SDK, its client and the tokenizer), which an import nobody types through never needed, nor one
the foreground waits for (``waiting_for_imports``). A hold ends by itself after ``HOLD_LIMIT`` seconds,
so a module the foreground waits for (one the held import had started) can never stall it for long.
"""

from __future__ import annotations

import http.client  # here, at start-up: imported later it could wait on the held import's module lock
import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator
from urllib.parse import urlsplit

from core.private import redact

API_VERSION = "2023-06-01"
DEFAULT_BASE = "https://api.anthropic.com"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
BODY_KEYS = frozenset(
    {"model", "max_tokens", "messages", "system", "tools", "tool_choice", "thinking", "output_config",
     "metadata", "temperature", "top_p", "top_k", "stop_sequences", "context_management", "container",
     "mcp_servers", "service_tier", "diagnostics", "extra_body", "betas"}
)  # fmt: skip
HOLD_LIMIT = 0.5  # seconds a hold on the background import lasts at most
HOLD_SAFETY = 5.0
TYPING_GAP = 0.3  # seconds: holds closer than this (keys typed) hold the import at every call, not per module


class Handover(Exception):
    """Not for this path, or no answer came: the SDK sends the request instead."""


class ErrorAnswer(Exception):
    """The server answered with an error: what it sent, for the SDK to make its exception of."""

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes, url: str) -> None:
        super().__init__(f"status {status}")
        self.status, self.headers, self.body, self.url = status, headers, body, url


class Event:
    """A JSON object read with the SDK's attribute names (``event.delta.text``); a missing name is None."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        value = self._data.get(name)
        return Event(value) if isinstance(value, dict) else value

    def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
        return _without_none(self._data) if exclude_none else dict(self._data)


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def usable(params: dict[str, Any], environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """Whether this request can go this way: only body keys, no proxy to go through."""
    return set(params) <= BODY_KEYS and not any(environ.get(v) for v in PROXY_VARIABLES)


@contextmanager
def events(
    params: dict[str, Any],
    *,
    api_key: str | None,
    auth_token: str | None,
    base_url: str | None,
    timeout: float,
) -> Iterator[Iterator[Event]]:
    """POST /v1/messages with ``stream: true``; yields the stream's events. Raises Handover when the
    answer is not a 200 event stream (nothing of it read), OSError or http.client's errors when the
    connection fails once the stream has started."""
    body = dict(params)
    betas = body.pop("betas", None) or []
    body.update(body.pop("extra_body", None) or {})
    body["stream"] = True
    headers = {**_headers(api_key, auth_token, betas), "accept": "text/event-stream"}
    connection = _connection(base_url, timeout)
    path = _base_path(base_url) + "/v1/messages" + ("?beta=true" if betas else "")
    try:
        try:
            connection.request("POST", path, json.dumps(body, ensure_ascii=False).encode(), headers)
            release_imports()  # the request is out: the background import may go on
            response = connection.getresponse()
        except (OSError, http.client.HTTPException) as e:
            raise Handover(redact(str(e), tuple(s for s in (api_key, auth_token) if s))) from None
        kind = response.getheader("content-type") or ""
        if response.status != 200:
            url = f"{_base(base_url).geturl()}/v1/messages"
            raise ErrorAnswer(response.status, response.getheaders(), response.read(), url)
        if not kind.startswith("text/event-stream"):
            raise Handover(f"not an event stream: {kind}")
        yield _read_events(response)
    finally:
        release_imports()
        connection.close()


def get_json(
    path: str, *, api_key: str | None, auth_token: str | None, base_url: str | None, timeout: float
) -> dict[str, Any]:
    """GET ``path`` of the API (the Models API at a session's start, before the SDK is there); raises
    Handover for anything but a 200 JSON object."""
    connection = _connection(base_url, timeout)
    headers = _headers(api_key, auth_token, [])
    try:
        connection.request("GET", _base_path(base_url) + path, headers=headers)
        response = connection.getresponse()
        if response.status != 200:
            raise Handover(f"status {response.status}")
        found = json.loads(response.read())
    except (OSError, http.client.HTTPException, ValueError) as e:
        raise Handover(type(e).__name__) from None
    finally:
        connection.close()
    if not isinstance(found, dict):
        raise Handover("not an object")
    return found


def _base(base_url: str | None) -> Any:
    url = urlsplit((base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE).rstrip("/"))
    if url.scheme not in ("http", "https") or not url.hostname:
        raise Handover(f"not an http(s) base URL: {url.geturl()}")
    return url


def _base_path(base_url: str | None) -> str:
    return str(_base(base_url).path)


def _connection(base_url: str | None, timeout: float) -> Any:
    url = _base(base_url)
    if url.scheme == "https":
        return http.client.HTTPSConnection(url.hostname, url.port, timeout=timeout, context=_tls())
    return http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)


def _headers(api_key: str | None, auth_token: str | None, betas: list[str]) -> dict[str, str]:
    headers = {
        "content-type": "application/json",
        "accept": "application/json",
        "anthropic-version": API_VERSION,
        "user-agent": "compact-agent",
    }
    if api_key:
        headers["x-api-key"] = api_key
    elif auth_token:
        headers["authorization"] = f"Bearer {auth_token}"
    else:
        raise Handover("no credentials")
    if betas:
        headers["anthropic-beta"] = ",".join(betas)
    return headers


class StreamError(Exception):
    """An ``error`` event after the stream started (the SDK reports it as a status error with 200)."""


def _read_events(response: Any) -> Iterator[Event]:
    data: list[str] = []
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
            continue
        if line or not data:
            continue
        payload = json.loads("\n".join(data))
        data = []
        if not isinstance(payload, dict):
            continue
        if payload.get("type") == "error":
            error = payload.get("error") or {}
            raise StreamError(str(error.get("message") if isinstance(error, dict) else error))
        if payload.get("type") in ("ping", None):
            continue
        yield Event(payload)


def _tls() -> Any:
    import ssl

    try:  # the SDK's httpx trusts certifi's roots: the same roots here
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        return ssl.create_default_context()


# --- holding the background import ------------------------------------------------------------------

_go = threading.Event()
_go.set()
_holdable: int | None = None  # the thread holds may stop (the warm-up's), while they may
_hooked = False  # the audit hook is in (it can't be taken out: while no thread is holdable it does nothing)
_typing_until = 0.0  # holds have come till about then: until then the import is held at every call


def _pause(frame: Any, event: str, arg: Any) -> None:
    """The warm-up thread's profile function while holds come: at each call, wait while a hold is on."""
    if not _go.is_set() and event == "call":
        _go.wait(HOLD_SAFETY)  # the hold's timer ends it; this bound only if that timer never ran


def _at_module(event: str, args: tuple[Any, ...]) -> None:
    """The audit hook: code is about to run as a module's (an "exec"). On the holdable thread: with a hold
    on, wait here, and be held at every call while holds come; once they have stopped, at modules only."""
    if event != "exec" or threading.get_ident() != _holdable:
        return
    if not _go.is_set():
        sys.setprofile(_pause)
        _go.wait(HOLD_SAFETY)
    elif time.monotonic() > _typing_until:
        sys.setprofile(None)


def holdable() -> None:
    """Let holds stop this thread (the background warm-up calls it first; see the module doc)."""
    global _holdable, _hooked
    _holdable = threading.get_ident()
    if not _hooked:
        sys.addaudithook(_at_module)
        _hooked = True


def done_holding() -> None:
    global _holdable
    _holdable = None
    sys.setprofile(None)


def hold_imports(limit: float = HOLD_LIMIT) -> None:
    """The foreground is about to prepare a request (or is reading keys): the background import waits
    (see the module doc), ``limit`` seconds at most."""
    global _typing_until
    _typing_until = time.monotonic() + limit + TYPING_GAP
    _go.clear()
    timer = threading.Timer(limit, _go.set)
    timer.daemon = True
    timer.start()


def release_imports() -> None:
    _go.set()


def waiting_for_imports() -> None:
    """The foreground waits for the import now (a request that needs the SDK): no hold keeps it, and it
    runs at full speed from its next module on."""
    global _typing_until
    _typing_until = 0.0
    _go.set()
