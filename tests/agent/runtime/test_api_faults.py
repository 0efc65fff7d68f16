"""Faults of the API, end to end against the loopback fake: a tool input the model streamed as invalid JSON
comes back to it as an error result; overloaded / 5xx / 429 answers are retried with backoff for the
retry budget, after the server's retry-after; Ctrl-C ends the wait; nothing listening gives one line."""

from __future__ import annotations

import json
import re
import signal
import socket
import threading
import time
from typing import Any

import pytest

from agent.runtime.sdk import BACKOFF_CAP, INVALID_INPUT, ModelClient, tool_input
from core.errors import Interrupted, ModelError
from core.events import Retrying
from core.model import Request
from tests.fakeapi import Error, FakeAPI, Reply

# the SDK is loaded before any test here times something (conftest.py's warm_sdk)
pytestmark = pytest.mark.usefixtures("warm_sdk")


def request() -> Request:
    return Request(
        model="claude-sonnet-4-6",
        system=[{"type": "text", "text": "sys"}],
        tools=[],
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        max_tokens=100,
    )


def client_for(api: FakeAPI, retry_seconds: float = 10.0, events: list[Any] | None = None) -> ModelClient:
    return ModelClient(
        api_key="test-key",
        auth_token=None,
        base_url=api.url,
        retry_seconds=retry_seconds,
        on_event=(events.append if events is not None else None),
        jitter=lambda: 0.0,
    )


def results_of(body: dict) -> list[dict]:
    return [
        b
        for m in body["messages"]
        if m["role"] == "user"
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


# --- tool input that is not valid JSON -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('{"command": "echo hi" oops}', "Expecting ',' delimiter"),
        ('{"command": "echo \\ud800"}', "surrogates not allowed"),
        ('["echo", "hi"]', "a JSON list, not an object"),
    ],
)
def test_invalid_tool_input_json_is_kept_as_text(raw: str, problem: str) -> None:
    kept = tool_input(raw)
    assert list(kept) == [INVALID_INPUT]
    assert kept[INVALID_INPUT]["text"] == raw and problem in kept[INVALID_INPUT]["error"]
    json.dumps(kept, ensure_ascii=False).encode("utf-8")  # sendable and recordable
    assert tool_input('{"command": "echo \\u00e9"}') == {"command": "echo é"}
    assert tool_input("") == {}


@pytest.mark.parametrize("raw", ['{"command": "touch made" oops}', '{"command": "touch \\ud800made"}'])
def test_a_tool_input_that_is_not_json_comes_back_as_an_error_result(
    run_cli, fake_api: FakeAPI, project, raw: str
) -> None:
    fake_api.add(Reply.raw_tool("Bash", raw, id="toolu_bad"))
    fake_api.reply_tool("Bash", {"command": "echo fixed"}, id="toolu_good")
    fake_api.reply_text("Done after resending.")
    res = run_cli(fake_api, "-p", "make a file", "--dangerously-skip-permissions")
    assert res.code == 0, res.stderr
    assert res.stdout == "Done after resending.\n"
    assert "internal error" not in res.stderr
    [bad] = results_of(fake_api.message_requests[1].body)
    assert bad["tool_use_id"] == "toolu_bad" and bad["is_error"] is True
    assert bad["content"].startswith("The tool input was not valid JSON (")
    assert bad["content"].endswith("Send the call again, with its input as one valid JSON object.")
    [good] = results_of(fake_api.message_requests[2].body)[1:]
    assert good["content"] == "fixed"
    assert not list(project.glob("made*"))  # the broken call never ran
    fake_api.check()
    # the call, as recorded, resumes into a valid request
    fake_api.reply_text("Resumed.")
    again = run_cli(fake_api, "-p", "more", "--continue")
    assert again.code == 0, again.stderr
    fake_api.check()


# --- retries -------------------------------------------------------------------------------------------------


def test_backoff_doubles_to_a_cap_with_jitter() -> None:
    fixed = ModelClient(api_key="k", auth_token=None, base_url=None, jitter=lambda: 0.0)
    assert [fixed.backoff(n) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, BACKOFF_CAP, BACKOFF_CAP]
    shortest = ModelClient(api_key="k", auth_token=None, base_url=None, jitter=lambda: 1.0)
    assert shortest.backoff(3) == 1.5


def test_persistent_overload_is_retried_until_the_budget_runs_out(fake_api: FakeAPI) -> None:
    events: list[Any] = []
    fake_api.on(lambda body: True, Error(529, "overloaded_error", "Overloaded", headers={}))
    started = time.monotonic()
    with pytest.raises(ModelError) as err:
        client_for(fake_api, retry_seconds=6.0, events=events).stream(request())
    elapsed = time.monotonic() - started
    # waits 0.5, 1, 2 (3.5 s in all); the next one, 4 s, would end after the 6 s budget. The 2.5 s left
    # over are for the four requests themselves, which take seconds on a loaded machine (a 3 s budget
    # with 1 s over was spent by the first request alone there, and no retry was made)
    assert [(e.attempt, e.delay) for e in events] == [(1, 0.5), (2, 1.0), (3, 2.0)]
    assert all(e.reason == "API error 529: Overloaded" for e in events)
    assert len(fake_api.message_requests) == 4
    assert elapsed >= 3.5  # it waited; the events above show there was no fourth wait
    assert re.fullmatch(r"API error 529: Overloaded \(gave up after 4 attempts in [4-6] s\)", str(err.value))


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after-ms": "1200", "retry-after": "9"}, 1.2),  # the finer one wins
        ({"retry-after": "1"}, 1.0),
    ],
)
def test_retry_after_is_honoured(fake_api: FakeAPI, headers: dict[str, str], wait: float) -> None:
    events: list[Any] = []
    fake_api.add(Error(429, "rate_limit_error", "Slow down", headers=headers))
    fake_api.reply_text("after the wait")
    started = time.monotonic()
    reply = client_for(fake_api, events=events).stream(request())
    elapsed = time.monotonic() - started
    assert reply.text == "after the wait"
    assert [e for e in events if isinstance(e, Retrying)] == [Retrying(1, "API error 429: Slow down", wait)]
    assert wait <= elapsed < 6.0  # the coarser header asked for 9 s
    first, second = fake_api.message_requests
    assert first.status == 429 and second.status == 200


def test_a_retry_after_beyond_the_budget_gives_up_at_once(fake_api: FakeAPI) -> None:
    fake_api.add(Error(529, "overloaded_error", "Overloaded", headers={"retry-after": "30"}))
    started = time.monotonic()
    with pytest.raises(ModelError) as err:
        client_for(fake_api, retry_seconds=5.0).stream(request())
    assert time.monotonic() - started < 10.0  # far under the 30 s it was asked to wait
    assert "the server asked to wait 30 s, longer than the 5 s retry budget" in str(err.value)


def test_errors_no_retry_can_mend_are_not_retried(fake_api: FakeAPI) -> None:
    events: list[Any] = []
    fake_api.error(401, "authentication_error", "invalid x-api-key")
    fake_api.add(Error(503, "api_error", "Down for good", headers={"x-should-retry": "false"}))
    for message in ("API error 401: invalid x-api-key", "API error 503: Down for good"):
        with pytest.raises(ModelError) as err:
            client_for(fake_api, events=events).stream(request())
        assert str(err.value) == message
    assert events == [] and len(fake_api.message_requests) == 2


def test_cancel_ends_the_wait_at_once(fake_api: FakeAPI) -> None:
    fake_api.add(Error(529, "overloaded_error", "Overloaded", headers={"retry-after": "20"}))
    cancel = threading.Event()
    events: list[Any] = []

    def on_event(event: Any) -> None:
        events.append(event)
        threading.Timer(0.2, cancel.set).start()

    client = ModelClient(
        api_key="test-key", auth_token=None, base_url=fake_api.url, retry_seconds=60, on_event=on_event
    )
    started = time.monotonic()
    with pytest.raises(Interrupted):
        client.stream(request(), cancel=cancel)
    assert time.monotonic() - started < 10.0  # the wait was 20 s
    assert [e.delay for e in events] == [20.0]
    assert len(fake_api.message_requests) == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_nothing_listening_ends_in_one_line_naming_the_url(run_cli) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    res = run_cli(None, "-p", "hi", env={"ANTHROPIC_BASE_URL": url, "COMPACT_AGENT_RETRY_SECONDS": "2"})
    assert time.monotonic() - started < 30
    assert res.code == 1 and res.stdout == ""
    *retries, last = res.stderr.splitlines()
    assert 1 <= len(retries) <= 2  # waits of about 0.5 s and 1 s fit in the 2 s budget
    for k, line in enumerate(retries, 2):
        assert re.fullmatch(
            rf"Retrying in [\d.]+s \(attempt {k}\) · cannot connect to {url} \(Connection refused\)", line
        ), line
    assert last.startswith(f"compact-agent: cannot connect to {url} (Connection refused; gave up after ")


def test_print_mode_shows_each_retry_on_stderr(run_cli, fake_api: FakeAPI) -> None:
    fake_api.add(Error(529, "overloaded_error", "Overloaded", headers={"retry-after": "1"}))
    fake_api.reply_text("made it")
    res = run_cli(fake_api, "-p", "hi", "--output-format", "json")
    assert res.code == 0, res.stderr
    assert res.json()["result"] == "made it"
    assert res.stderr == "Retrying in 1s (attempt 2) · API error 529: Overloaded\n"


def test_ctrl_c_in_print_mode_ends_a_retry_wait_at_once(spawn) -> None:  # noqa: F811
    with FakeAPI() as api:
        api.on(lambda body: True, Error(529, "overloaded_error", "Overloaded", headers={"retry-after": "30"}))
        proc = spawn(api, "-p", "hi")
        assert proc.stderr is not None
        line = proc.stderr.readline()  # printed just before the wait starts
        assert line == "Retrying in 30s (attempt 2) · API error 529: Overloaded\n"
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        assert time.monotonic() - started < 10.0  # the wait was 30 s
        assert proc.returncode == 130
        assert err.splitlines()[-1] == "compact-agent: Interrupted by user"
        assert len(api.message_requests) == 1


def test_the_repl_shows_the_wait_rounded_and_the_next_attempt() -> None:
    from tests.helpers.frontend import render

    assert (
        render(Retrying(2, "API error 529: Overloaded", 3.7412))
        == "Retrying in 3.7s… (attempt 3) · API error 529: Overloaded\n"
    )


def test_a_side_request_retries_without_announcing_it(fake_api: FakeAPI) -> None:
    """Notes and summaries stream no reply: a Retrying event would restart the main reply on screen."""
    events: list[Any] = []
    fake_api.error(529)
    fake_api.reply_text("summary")
    assert client_for(fake_api, events=events).stream(request(), emit_text=False).text == "summary"
    assert events == [] and len(fake_api.message_requests) == 2
