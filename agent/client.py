"""The Messages API client: the official SDK, imported lazily, streaming, with the retries we add.

The SDK itself retries 429 / 5xx / 529 and connection failures before a response starts. On top of
that we retry a stream that breaks mid-message (the SDK then hands back a partial message whose
``stop_reason`` is None, or raises a connection error): the whole request is sent again, and no tool
runs until a complete message has arrived, so no tool ever runs twice. Context-size errors are turned
into typed exceptions (errors.PromptTooLong, errors.MaxTokensOverflow) from the SDK's typed 400 error.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any, Callable

from core.errors import Interrupted, ModelError, classify_bad_request
from core.events import Retrying, TextDelta, ThinkingDelta
from core.messages import Message, assistant
from core.model import Request, api_model_name

STREAM_RETRIES = 3
SDK_RETRIES = 3

_import_lock = threading.Lock()
_sdk: Any = None


def sdk() -> Any:
    """The anthropic module, imported on first use (it takes ~2 s here)."""
    global _sdk
    with _import_lock:
        if _sdk is None:
            import anthropic

            _sdk = anthropic
    return _sdk


def import_in_background() -> threading.Thread:
    t = threading.Thread(target=sdk, name="sdk-import", daemon=True)
    t.start()
    return t


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
    except Exception:  # noqa: BLE001 - a missing list just means the fallback
        pass
    return "claude-sonnet-4-6"


def _block_dict(block: Any) -> dict[str, Any]:
    d = block.model_dump(exclude_none=True) if hasattr(block, "model_dump") else dict(block)
    if d.get("type") == "text":
        d = {"type": "text", "text": d.get("text", ""), **({"citations": d["citations"]} if d.get("citations") else {})}
    return d


class ModelClient:
    """One SDK client per session. ``stream`` returns a complete assistant Message or raises."""

    def __init__(self, *, api_key: str | None, auth_token: str | None, base_url: str | None,
                 on_event: Callable[[Any], None] | None = None):
        self._kwargs = {"api_key": api_key, "auth_token": auth_token, "base_url": base_url}
        self._client: Any = None
        self._lock = threading.Lock()
        self.on_event = on_event or (lambda e: None)

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                anthropic = sdk()
                kwargs = {k: v for k, v in self._kwargs.items() if v}
                if not kwargs.get("api_key") and not kwargs.get("auth_token"):
                    kwargs["api_key"] = "missing"  # the server answers 401; we report it clearly
                self._client = anthropic.Anthropic(max_retries=SDK_RETRIES, timeout=600.0, **kwargs)
            return self._client

    def context_window(self, model: str) -> int | None:
        """max_input_tokens from the Models API, or None when it can't be had."""
        try:
            info = self.client.with_options(max_retries=0, timeout=5.0).models.retrieve(api_model_name(model))
            n = getattr(info, "max_input_tokens", None)
            return int(n) if n else None
        except Exception:  # noqa: BLE001 - unreachable or unknown: the caller uses the table
            return None

    def stream(self, req: Request, *, cancel: threading.Event | None = None, emit_text: bool = True) -> Message:
        anthropic = sdk()
        last_error = ""
        for attempt in range(1, STREAM_RETRIES + 2):
            try:
                message = self._stream_once(req, cancel, emit_text)
                if message is not None:
                    return message
                last_error = "the response stream ended before the message was complete"
            except Interrupted:
                raise
            except anthropic.BadRequestError as e:
                typed = classify_bad_request(_error_text(e))
                raise typed or ModelError(f"API error 400: {_error_text(e)}", status=400) from None
            except anthropic.APIStatusError as e:
                if not _mid_stream_failure(e):
                    raise ModelError(f"API error {e.status_code}: {_error_text(e)}", status=e.status_code) from None
                last_error = f"the stream failed part way ({_error_text(e)})"
            except (anthropic.APIConnectionError, _transport_error()) as e:
                if cancel is not None and cancel.is_set():
                    raise Interrupted("interrupted") from None
                last_error = f"the connection broke: {e}"
            if attempt <= STREAM_RETRIES:
                delay = min(0.5 * 2 ** (attempt - 1), 8.0)
                self.on_event(Retrying(attempt, last_error, delay))
                if cancel is not None and cancel.wait(delay):
                    raise Interrupted("interrupted")
                elif cancel is None:
                    time.sleep(delay)
        raise ModelError(f"API request failed after {STREAM_RETRIES + 1} attempts: {last_error}", retryable=True)

    def _stream_once(self, req: Request, cancel: threading.Event | None, emit_text: bool) -> Message | None:
        """One attempt. With a cancel event the reading happens in a daemon thread, so Ctrl-C returns at
        once even while the socket is stalled (a blocked read can't be woken from outside); the
        abandoned reader stops at its next event."""
        if cancel is None:
            return self._read(req, None, emit_text)
        box: dict[str, Any] = {}

        def read() -> None:
            try:
                box["message"] = self._read(req, cancel, emit_text)
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread as is
                box["error"] = e

        reader = threading.Thread(target=read, name="model-stream", daemon=True)
        reader.start()
        while reader.is_alive():
            if cancel.wait(0.05):
                raise Interrupted("interrupted")
        if "error" in box:
            raise box["error"]
        return box["message"]

    def _read(self, req: Request, cancel: threading.Event | None, emit_text: bool) -> Message | None:
        params = req.params()
        api = self.client.beta.messages if req.betas else self.client.messages
        if req.betas:
            params["betas"] = req.betas
        cancelled = cancel.is_set if cancel is not None else (lambda: False)
        with api.stream(**params) as stream:
            try:
                for event in stream:
                    if cancelled():
                        raise Interrupted("interrupted")
                    if emit_text and event.type == "text":
                        self.on_event(TextDelta(event.text))
                    elif emit_text and event.type == "thinking":
                        self.on_event(ThinkingDelta(event.thinking))
                final = stream.get_final_message()
            except Exception:
                if cancelled():
                    raise Interrupted("interrupted") from None
                raise
        if cancelled():
            raise Interrupted("interrupted")
        if final.stop_reason is None:
            return None
        usage = final.usage.model_dump(exclude_none=True) if final.usage else None
        msg = assistant([_block_dict(b) for b in final.content], message_id=final.id, model=final.model,
                        stop_reason=final.stop_reason, usage=usage)
        applied = getattr(final, "context_management", None)
        if applied is not None:
            dumped = applied.model_dump(exclude_none=True) if hasattr(applied, "model_dump") else applied
            msg = msg.replace(extra={"contextManagement": dumped})
        return msg


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
