"""The first request while the SDK is still loading (agent/runtime/first_request.py): the same call over the
standard library, the same message put together, and anything but a 200 stream handed to the SDK."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from agent.runtime import first_request
from agent.runtime import sdk as client_module
from agent.runtime.sdk import ModelClient
from core.errors import PromptTooLong
from tests.helpers.client import request

QUICK = "compact-agent"  # the user-agent the standard library's way sends (the SDK sends its own)


@pytest.fixture
def sdk_not_loaded(monkeypatch, warm_sdk):
    """As in a process a moment after start: the SDK's module is not there yet (it is, for the handover),
    and nothing imports it in the background (print mode; the REPL's: import_to_come)."""
    monkeypatch.setattr(client_module, "_sdk", None)
    monkeypatch.setattr(client_module, "_in_background", False)


def _shape(message) -> list[dict]:
    return [{k: v for k, v in b.items() if k not in ("id", "signature")} for b in message.content]


def test_the_first_request_goes_without_the_sdk_and_makes_the_same_message(fake_api, sdk_not_loaded):
    for _ in range(2):
        fake_api.reply_tool("Read", {"file_path": "a.py"}, text="Reading it.")
    shown: list[object] = []
    client = ModelClient(api_key="test-key", auth_token=None, base_url=fake_api.url, on_event=shown.append)
    first = client.stream(request(), cancel=threading.Event())
    second = client.stream(request(), cancel=threading.Event())
    one, two = fake_api.message_requests
    assert one.headers.get("user-agent") == QUICK and two.headers.get("user-agent") != QUICK
    assert one.body == two.body  # the same parameters either way
    assert one.body["stream"] is True and one.headers["anthropic-version"] == first_request.API_VERSION
    assert _shape(first) == _shape(second) and first.tool_uses[0]["input"] == {"file_path": "a.py"}
    assert first.stop_reason == second.stop_reason  # the second read the first's prompt cache:
    assert first.usage["cache_creation_input_tokens"] == second.usage["cache_read_input_tokens"] > 0
    assert len(shown) % 2 == 0 and shown[: len(shown) // 2] == shown[len(shown) // 2 :]


def test_while_the_sdk_is_imported_in_the_background_every_main_request_goes_without_it(
    fake_api, sdk_not_loaded
):
    """The REPL's first prompt: its request, then the next after its tool call, both the standard library's
    way; the second waited for the SDK's import (~1 s of CPU, begun once the first was sent)."""
    client_module.import_to_come()  # (sdk_not_loaded puts it back)
    fake_api.reply_tool("Read", {"file_path": "a.py"})
    fake_api.reply_text("Read it.")
    client = ModelClient(api_key="test-key", auth_token=None, base_url=fake_api.url)
    assert client.stream(request(), cancel=threading.Event()).tool_uses
    assert client.stream(request(), cancel=threading.Event()).text == "Read it."
    assert [r.headers.get("user-agent") for r in fake_api.message_requests] == [QUICK, QUICK]


def test_after_an_error_answer_the_requests_go_through_the_sdk(fake_api, sdk_not_loaded):
    client_module.import_to_come()
    client = ModelClient(api_key="test-key", auth_token=None, base_url=fake_api.url)
    fake_api.prompt_too_long(actual=210_000, maximum=200_000)
    with pytest.raises(PromptTooLong):
        client.stream(request())
    fake_api.reply_text("fine")
    assert client.stream(request()).text == "fine"
    assert [r.headers.get("user-agent") == QUICK for r in fake_api.message_requests] == [True, False]


def test_an_error_answer_becomes_the_sdks_exception_and_is_not_sent_twice(fake_api, sdk_not_loaded):
    client = ModelClient(api_key="test-key", auth_token=None, base_url=fake_api.url)
    fake_api.prompt_too_long(actual=210_000, maximum=200_000)
    with pytest.raises(PromptTooLong) as ptl:
        client.stream(request())
    assert (ptl.value.actual, ptl.value.maximum) == (210_000, 200_000)
    [quick] = fake_api.message_requests
    assert quick.headers.get("user-agent") == QUICK


def test_a_server_error_is_retried_through_the_sdk(fake_api, sdk_not_loaded):
    client = ModelClient(api_key="test-key", auth_token=None, base_url=fake_api.url, jitter=lambda: 1.0)
    fake_api.error(529)
    fake_api.reply_text("fine")
    assert client.stream(request()).text == "fine"
    assert [r.headers.get("user-agent") == QUICK for r in fake_api.message_requests] == [True, False]


def test_a_proxy_in_the_environment_leaves_it_to_the_sdk(fake_api, sdk_not_loaded, monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    fake_api.reply_text("fine")
    client = ModelClient(api_key="test-key", auth_token=None, base_url=fake_api.url)
    assert client.stream(request()).text == "fine"
    assert fake_api.message_requests[0].headers.get("user-agent") != QUICK


def _module(calls: list[str], said: str) -> None:
    """What an import does: run code as a module's (the audit event "exec")."""
    exec("calls.append(said)", {"calls": calls, "said": said})


def _warm(calls: list[str], said: str = "after the hold") -> threading.Thread:
    """A warm-up thread that holds may stop, importing one module."""

    def warm() -> None:
        first_request.holdable()
        try:
            _module(calls, said)
        finally:
            first_request.done_holding()

    t = threading.Thread(target=warm)
    t.start()
    return t


def test_a_hold_on_the_background_import_ends_by_itself():
    """A held warm-up thread waits where its next module starts, and goes on once released or after the
    limit."""
    calls: list[str] = []
    first_request.hold_imports(limit=30)
    t = _warm(calls)
    t.join(0.3)
    assert t.is_alive() and calls == []
    first_request.release_imports()
    t.join(5)
    assert calls == ["after the hold"]
    first_request.hold_imports(limit=0.2)  # never released: the timer ends it
    _warm(calls).join(5)
    assert calls == ["after the hold"] * 2


def test_once_a_hold_has_come_the_warm_up_is_held_at_every_call():
    """A user typing while the SDK loads: after the first hold, the next ones stop the import at its next
    Python call, not only at its next module."""
    calls: list[str] = []
    again = threading.Event()

    def warm() -> None:
        first_request.holdable()
        try:
            _module(calls, "module")
            again.wait(5)
            calls.append("call")
        finally:
            first_request.done_holding()

    first_request.hold_imports(limit=30)
    t = threading.Thread(target=warm)
    t.start()
    try:
        t.join(0.3)
        assert calls == []
        first_request.release_imports()
        deadline = time.monotonic() + 5
        while calls != ["module"]:
            assert time.monotonic() < deadline, calls
            time.sleep(0.01)
        first_request.hold_imports(limit=30)
        again.set()
        t.join(0.3)
        assert t.is_alive() and calls == ["module"]  # held at a call: no module started since
    finally:
        first_request.release_imports()
    t.join(5)
    assert calls == ["module", "call"]


def test_a_quiet_users_import_runs_without_a_profile_function():
    """No hold, no profile function: run at every call of the import, it cost the import ~80% more CPU
    (the SDK, its client and the tokenizer: 1.72 s instead of 0.93 s)."""
    seen: list[object] = []

    def warm() -> None:
        first_request.holdable()
        try:
            _module([], "a module")
            seen.append(sys.getprofile())
        finally:
            first_request.done_holding()

    t = threading.Thread(target=warm)
    t.start()
    t.join(5)
    assert seen == [None]


def test_once_the_holds_stop_the_import_is_held_at_modules_only(monkeypatch):
    """Keys typed, then none: the profile function goes where the next module starts."""
    monkeypatch.setattr(first_request, "TYPING_GAP", 0.0)
    seen: list[object] = []

    def warm() -> None:
        first_request.holdable()
        try:
            _module([], "held till the limit")
            seen.append(sys.getprofile())
            time.sleep(0.2)  # no hold comes
            _module([], "the next module")
            seen.append(sys.getprofile())
        finally:
            first_request.done_holding()

    first_request.hold_imports(limit=0.1)
    t = threading.Thread(target=warm)
    t.start()
    t.join(5)
    assert len(seen) == 2 and seen[0] is not None and seen[1] is None


def test_a_request_that_waits_for_the_sdk_lets_its_held_import_go_on(sdk_not_loaded):
    """A second prompt sent while the SDK still loads: its sending holds the import (up to 0.5 s), then its
    request waits for the SDK. Waiting for it lifts the hold, rather than wait, held, for nothing, and the
    import runs at full speed from its next module on."""
    calls: list[str] = []
    seen: list[object] = []

    def warm() -> None:
        first_request.holdable()
        try:
            _module(calls, "not held")
            seen.append(sys.getprofile())
        finally:
            first_request.done_holding()

    first_request.hold_imports(limit=30)
    try:
        assert client_module.sdk() is not None  # (imported already here: warm_sdk)
        t = threading.Thread(target=warm)
        t.start()
        t.join(5)
        assert calls == ["not held"] and seen == [None]
    finally:
        first_request.release_imports()
