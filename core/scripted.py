"""A model that answers from a script: the ``Model`` seam (core/model.py) with no network and no SDK.

Loop and pipeline tests give it the replies they want, in order, and read back what was asked::

    model = ScriptedModel([reply_tool("Bash", {"command": "ls"}), reply_text("done")])
    session = make_session(tmp_path, model=model)       # tests/helpers/session.py
    run_turn(session, "list the files")
    assert len(model.requests) == 2

A step is an assistant ``Message``, or an exception to raise in its place (a ``ModelError`` for a failed
request), or a function of the ``Request`` that returns either. A request past the end of the script is
a test's mistake, so it raises ``ScriptExhausted``, which is no ``ModelError``: nothing retries it, and
the turn ends in an error that names it. Where the wire matters (retries, streaming, the SDK's errors, the
request's JSON) tests use the loopback fake API instead (tests/fakeapi.py).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable
from typing import Any, Union

from core.errors import ThinkingBindingMismatch
from core.messages import Message, assistant
from core.model import Request

Step = Union[Message, BaseException, Callable[[Request], Union[Message, BaseException]]]

_ids = itertools.count(1)


class ScriptExhausted(AssertionError):
    """The model was asked once more than its script answers."""


class ScriptedModel:
    """Answers each request with the next step of its script; ``requests`` holds every request asked."""

    def __init__(self, steps: Iterable[Step] = (), window: int | None = None) -> None:
        self.steps = list(steps)
        self.requests: list[Request] = []
        self.window = window
        self._lock = threading.Lock()  # background workers ask from threads of their own
        self.on_binding_fallback: Callable[[ThinkingBindingMismatch], None] = lambda e: None  # never happens

    def stream(
        self, req: Request, *, cancel: threading.Event | None = None, emit_text: bool = True
    ) -> Message:
        with self._lock:
            self.requests.append(req)
            if not self.steps:
                raise ScriptExhausted(f"request {len(self.requests)} has no scripted reply")
            step = self.steps.pop(0)
        outcome = step(req) if callable(step) and not isinstance(step, (Message, BaseException)) else step
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome.replace(model=outcome.model or req.model)

    def context_window(self, model: str) -> int | None:
        """What a Models API would say of the window (None: the caller uses its table)."""
        return self.window

    @property
    def left(self) -> int:
        """Steps not yet asked for (a test that scripted exactly what runs expects 0)."""
        return len(self.steps)


def reply_text(text: str, **usage: int) -> Message:
    """An assistant reply that ends the turn with ``text``."""
    return assistant([{"type": "text", "text": text}], message_id=_message_id(), usage=_usage(usage))


def reply_tool(name: str, tool_input: dict[str, Any], text: str = "", **usage: int) -> Message:
    """An assistant reply that calls one tool (after ``text``, when given)."""
    return reply_tools([(name, tool_input)], text, **usage)


def reply_tools(calls: list[tuple[str, dict[str, Any]]], text: str = "", **usage: int) -> Message:
    """An assistant reply that calls several tools at once."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for name, tool_input in calls:
        blocks.append(
            {"type": "tool_use", "id": f"toolu_scripted{next(_ids):05d}", "name": name, "input": tool_input}
        )
    return assistant(blocks, message_id=_message_id(), stop_reason="tool_use", usage=_usage(usage))


def _message_id() -> str:
    return f"msg_scripted{next(_ids):05d}"


def _usage(usage: dict[str, int]) -> dict[str, int]:
    return {
        "input_tokens": usage.get("input_tokens", 10),
        "output_tokens": usage.get("output_tokens", 5),
        **usage,
    }
