"""The scripted model (core.scripted) as the compaction tests drive it, on compact's floor: replies chosen by
what a request is (a summary, a notes update, a collapse span's summary), and a request's texts read back.

No wire here: where the request's JSON as sent, the server's count or its own summary is what a test is
about, the test is on the fake Messages API (tests/fakeapi.py) under tests/agent/.

    model = RoutedModel()
    model.on(is_notes_update, "Noted.")                          # every notes update, before the script
    model.steps.append(reply_text(SUMMARY_REPLY))                # then the script, in order
    bench = make_bench(tmp_path, model_api=model)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from core.errors import Interrupted, ModelError
from core.messages import Message, new_uuid
from core.model import Request
from core.scripted import ScriptedModel, ScriptExhausted, Step, reply_text

Predicate = Callable[[Request], bool]


@dataclass
class Route:
    predicate: Predicate
    step: Step
    once: bool = False
    served: int = 0
    hits: list[Request] = field(default_factory=list)  # the requests it answered


class RoutedModel(ScriptedModel):
    """A ScriptedModel that answers a request a route takes (``on``) before its script: the first route
    whose predicate holds answers (a ``once`` route only its first request); any other request takes the
    script's next step. A route's step is a step of the script's kinds, or a text: a new reply of that
    text for each request it answers."""

    def __init__(self, steps: Any = (), window: int | None = None) -> None:
        super().__init__(steps, window)
        self.routes: list[Route] = []

    def on(self, predicate: Predicate, step: Step | str, *, once: bool = False) -> Route:
        if isinstance(step, str):
            text = step
            step = lambda req: reply_text(text)  # noqa: E731 - a reply of its own each time
        route = Route(predicate, step, once)
        self.routes.append(route)
        return route

    def stream(
        self, req: Request, *, cancel: threading.Event | None = None, emit_text: bool = True
    ) -> Message:
        """The route's or the script's answer; as the client does, a request whose ``cancel`` is set
        before its reply is in raises Interrupted (a Ctrl-C, a background request's deadline)."""
        with self._lock:
            route = next(
                (r for r in self.routes if not (r.once and r.served) and r.predicate(req)),
                None,
            )
            self.requests.append(req)
            if route is not None:
                route.served += 1
                route.hits.append(req)
                step = route.step
            elif self.steps:
                step = self.steps.pop(0)
            else:
                raise ScriptExhausted(f"request {len(self.requests)} has no scripted reply")
        outcome = _answer(step, req, cancel)
        if isinstance(outcome, BaseException):
            raise outcome
        # a route answers many requests: each reply a message of its own
        fresh = outcome.uuid if route is None else new_uuid()
        return outcome.replace(uuid=fresh, model=outcome.model or req.model)


def _answer(step: Step, req: Request, cancel: threading.Event | None) -> Message | BaseException:
    """What a step answers; with ``cancel``, Interrupted once it is set first."""
    if not callable(step) or isinstance(step, (Message, BaseException)):
        return step
    if cancel is None:
        return step(req)
    box: list[Message | BaseException] = []

    def run() -> None:
        try:
            box.append(step(req))
        except BaseException as e:  # noqa: BLE001 - handed to the caller, as the step raised it
            box.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    while worker.is_alive() and not cancel.is_set():
        worker.join(0.01)
    if box:
        return box[0]
    return Interrupted("interrupted")


def reply_blocks(blocks: list[dict[str, Any]], **usage: int) -> Message:
    """An assistant reply of these blocks (it asks for its tool calls when it makes any)."""
    stop = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
    return reply_text("").replace(content=blocks, stop_reason=stop, usage=reply_text("", **usage).usage)


def api_error(status: int, message: str = "the API refused the request") -> ModelError:
    """What the client raises for an HTTP error the API answered (no retry left)."""
    return ModelError(f"API Error: {status} {message}", status=status)


def _texts(content: Any, *, deep: bool) -> Iterator[str]:
    for block in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
        kind = block.get("type")
        if kind == "text":
            yield block.get("text", "")
        elif deep and kind == "tool_result":
            yield from _texts(block.get("content"), deep=True)
        elif deep and kind == "tool_use":
            yield json.dumps(block.get("input"))
        elif deep and kind == "thinking":
            yield block.get("thinking", "")


def last_user_text(req: Request) -> str:
    """The text blocks of the request's last user message, joined by newlines ("" when there is none)."""
    users = [m for m in req.messages if m.get("role") == "user"]
    return "\n".join(_texts(users[-1].get("content"), deep=False)) if users else ""


def request_text(req: Request) -> str:
    """Everything textual in a request: system, texts, tool inputs and results, thinking."""
    parts = list(_texts(req.system, deep=True))
    for message in req.messages:
        parts.extend(_texts(message.get("content"), deep=True))
    return "\n".join(parts)


def is_compaction(req: Request) -> bool:
    """A compaction's full summary request: its instruction asks for <analysis> and <summary>."""
    text = last_user_text(req)
    return "<analysis>" in text and "<summary>" in text


def is_notes_update(req: Request) -> bool:
    """A session-notes update: its instruction names the notes file."""
    return "summary.md" in last_user_text(req)


def read_paths(req: Request) -> list[str]:
    """The files a request's conversation has read, in order (its Read calls' paths)."""
    return [
        b["input"]["file_path"]
        for m in req.messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("type") == "tool_use" and b["name"] == "Read"
    ]


def no_tools(req: Request) -> bool:
    """A request that may call no tool (a summary's, a candidate's)."""
    return (req.tool_choice or {}).get("type") == "none"
