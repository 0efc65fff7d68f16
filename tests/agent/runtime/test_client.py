"""The Messages API client against the loopback fake: cancel, typed errors, cache breakpoints."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from agent.runtime.sdk import ModelClient
from core.errors import Interrupted, MaxTokensOverflow, ModelError, PromptTooLong
from tests.fakeapi import Reply
from tests.helpers.client import request

# the SDK is loaded before any test here times something (conftest.py's warm_sdk)
pytestmark = pytest.mark.usefixtures("warm_sdk")


def _cancel_once_stalled(arrived: threading.Event, cancel: threading.Event) -> list[float]:
    """Sets ``cancel`` once the server holds the request (``arrived``); returns [when it was set]."""
    when: list[float] = []

    def run() -> None:
        if arrived.wait(60):
            when.append(time.monotonic())
            cancel.set()

    threading.Thread(target=run, daemon=True).start()
    return when


def test_cancel_returns_at_once_while_the_server_stalls(fake_api):
    arrived, release = threading.Event(), threading.Event()

    def stall(body):
        arrived.set()
        release.wait(30)
        return Reply.text("too late")

    fake_api.add(stall)
    client = ModelClient(api_key="test-key", auth_token=None, base_url=fake_api.url)
    cancel = threading.Event()
    when = _cancel_once_stalled(arrived, cancel)
    try:
        with pytest.raises(Interrupted):
            client.stream(request(), cancel=cancel)
        # from the cancel, not from the SDK's first import; the server holds the reply for 30 s
        assert time.monotonic() - when[0] < 10.0
    finally:
        release.set()


def test_an_abandoned_reply_shows_nothing_once_the_next_turn_has_begun(fake_api):
    """The turn's cancel event is cleared when the next turn starts: the reader of the interrupted reply,
    still waiting for it, must not show that reply then (it did, under the next prompt, in test_tmux)."""
    arrived, release = threading.Event(), threading.Event()

    def stall(body):
        arrived.set()
        release.wait(30)
        return Reply.text("THE-ABANDONED-REPLY")

    fake_api.add(stall)
    shown: list = []
    client = ModelClient(api_key="test-key", auth_token=None, base_url=fake_api.url, on_event=shown.append)
    cancel = threading.Event()
    _cancel_once_stalled(arrived, cancel)
    with pytest.raises(Interrupted):
        client.stream(request(), cancel=cancel)
    cancel.clear()  # what the next turn does first
    release.set()
    reading = [t for t in threading.enumerate() if t.name == "model-stream"]
    for reader in reading:
        reader.join(30)  # it has read the whole reply, or stopped at its first event
    assert reading and not any(t.is_alive() for t in reading)
    assert shown == []  # no piece of the abandoned reply (it streamed as TextDeltas before)


def test_context_size_errors_are_typed(fake_api):
    client = ModelClient(api_key="test-key", auth_token=None, base_url=fake_api.url)
    fake_api.prompt_too_long(actual=210_000, maximum=200_000)
    with pytest.raises(PromptTooLong) as ptl:
        client.stream(request())
    assert (ptl.value.actual, ptl.value.maximum, ptl.value.gap) == (210_000, 200_000, 10_000)
    fake_api.error(
        400,
        "invalid_request_error",
        "input length and `max_tokens` exceed context limit: 195000 + 20000 > 200000",
    )
    with pytest.raises(MaxTokensOverflow) as overflow:
        client.stream(request())
    assert overflow.value.smaller_max_tokens() == 4_000


def test_breakpoints_on_tools_system_and_tail_and_input_not_mutated(fake_api):
    client = ModelClient(api_key="test-key", auth_token=None, base_url=fake_api.url)
    req = request()
    before = repr(req)
    fake_api.reply_text("one")
    fake_api.reply_text("two")
    client.stream(req)
    reply = client.stream(req)
    assert repr(req) == before
    body = fake_api.message_requests[-1].body
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert reply.usage["cache_read_input_tokens"] > 0
    assert reply.text == "two" and reply.stop_reason == "end_turn"


def test_a_stream_without_usage_still_makes_a_reply(fake_api, tmp_path, monkeypatch):
    """message_start and message_delta with no ``usage`` (a proxy that drops it): the turn completes."""
    from agent.runtime.loop import run_turn
    from tests.helpers.session import make_session

    render = fake_api._render

    def without_usage(request, step):
        answer = render(request, step)
        if answer.events is not None:
            events = []
            for name, data in answer.events:
                data = dict(data)
                data.pop("usage", None)
                if name == "message_start":
                    data["message"] = {k: v for k, v in data["message"].items() if k != "usage"}
                events.append((name, data))
            answer.events = events
        return answer

    monkeypatch.setattr(fake_api, "_render", without_usage)
    fake_api.reply_tool("Bash", {"command": "echo hi"})
    fake_api.reply_text("no usage, no problem")
    session, _ = make_session(tmp_path, fake_api, permission_mode="bypassPermissions")
    finished = run_turn(session, "go")
    assert finished.stop_reason == "end_turn", finished.error
    assert finished.text == "no usage, no problem"
    assert session.messages[-1].usage is None


@pytest.mark.parametrize("kind", ["compaction", "background"])
def test_a_hung_side_request_is_given_up(fake_api, kind):
    """Issue 30: a compaction request (foreground or background) the server never answers waited two
    minutes and more; a side request that receives nothing for side_idle_seconds fails instead."""
    release = threading.Event()

    def hang(body):
        release.wait(60)
        return Reply.text("too late")

    fake_api.add(hang)
    client = ModelClient(
        api_key="test-key", auth_token=None, base_url=fake_api.url, retry_seconds=0.1, side_idle_seconds=0.5
    )
    try:
        with pytest.raises(ModelError) as failed:
            client.stream(replace(request(), retry=kind), emit_text=False)
        assert "timed out" in str(failed.value).lower()
    finally:
        release.set()
