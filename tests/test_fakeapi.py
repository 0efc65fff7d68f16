"""The fake Messages API, driven by the official SDK through a real loopback socket.

These are the fake's mechanics (SSE framing, scripts and routes, validation, retries, dropped streams),
on replies as scripted: the ``api`` fixture plays the 4.x profile, which sends a script's blocks as
they are. How the 5.5 family (the default profile) shapes the same replies is tests/test_fake_family.py's.
"""

from __future__ import annotations

import threading

import anthropic
import httpx2
import pytest

from tests.fakeapi import (
    FakeAPI,
    Reply,
    estimate_tokens,
    last_user_text,
    model_info,
    request_text,
    running,
    thinking_block,
    tool_use_block,
)

MODEL = "claude-sonnet-4-6"
HI = [{"role": "user", "content": "hi"}]


pytestmark = pytest.mark.fake_api(profile="4.x")  # this file is about that profile


@pytest.fixture
def client(api):
    # max_retries=0: a test that wants the SDK's retries asks for them explicitly.
    with anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=0) as sdk:
        yield sdk


def stream(client, messages=HI, **kw):
    with client.messages.stream(model=MODEL, max_tokens=1000, messages=messages, **kw) as s:
        return s.get_final_message()


def tool_round(tool_id="toolu_1"):
    """A valid history: question, tool call, its result."""
    return [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": [tool_use_block("Read", {"file_path": "/x"}, id=tool_id)]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "data"}]},
    ]


# -- replies -----------------------------------------------------------------------------------------


def test_text_stream(api, client):
    api.reply_text("hello there, friend")
    with client.messages.stream(model=MODEL, max_tokens=100, messages=HI) as s:
        pieces = list(s.text_stream)
        final = s.get_final_message()
        request_id = s.request_id
    assert len(pieces) > 1 and "".join(pieces) == "hello there, friend"
    assert [b.model_dump(include={"type", "text"}) for b in final.content] == [
        {"type": "text", "text": "hello there, friend"}
    ]
    assert final.stop_reason == "end_turn"
    assert final.usage.input_tokens == estimate_tokens({"messages": HI})
    assert final.usage.output_tokens == 5
    assert request_id.startswith("req_")
    api.check()


def test_tool_use_stream_reassembles_input_json(api, client):
    tool_input = {"file_path": "/src/app.py", "offset": 10, "limit": 200}
    api.reply_tool("Read", tool_input, id="toolu_abc", text="Let me look.")
    final = stream(client)
    assert final.stop_reason == "tool_use"
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert (final.content[1].id, final.content[1].name, final.content[1].input) == (
        "toolu_abc",
        "Read",
        tool_input,
    )
    api.check()


def test_parallel_tool_calls_in_one_message(api, client):
    api.reply_tools([("Bash", {"command": "ls"}), ("Bash", {"command": "pwd"})])
    final = stream(client)
    assert [(b.name, b.input) for b in final.content] == [
        ("Bash", {"command": "ls"}),
        ("Bash", {"command": "pwd"}),
    ]
    assert final.content[0].id != final.content[1].id
    api.check()


def test_thinking_block_streams_with_signature(api, client):
    api.reply([thinking_block("step by step", signature="sig-1"), {"type": "text", "text": "42"}])
    final = stream(client)
    assert (final.content[0].thinking, final.content[0].signature, final.content[1].text) == (
        "step by step",
        "sig-1",
        "42",
    )
    api.check()


def test_non_stream_create(api, client):
    api.reply_tool("Grep", {"pattern": "def "})
    message = client.messages.create(model=MODEL, max_tokens=100, messages=HI)
    assert message.stop_reason == "tool_use"
    assert message.content[0].input == {"pattern": "def "}
    assert api.requests[0].body == {"model": MODEL, "max_tokens": 100, "messages": HI}
    api.check()


def test_beta_stream_reports_context_management(api, client):
    edits = {
        "applied_edits": [
            {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2, "cleared_input_tokens": 500}
        ]
    }
    api.reply("ok", context_management=edits)
    management = {"edits": [{"type": "clear_tool_uses_20250919"}]}
    with client.beta.messages.stream(
        model=MODEL,
        max_tokens=100,
        messages=HI,
        context_management=management,
        betas=["context-management-2025-06-27"],
    ) as s:
        final = s.get_final_message()
    assert final.context_management.applied_edits[0].cleared_tool_uses == 2
    assert "context-management-2025-06-27" in api.requests[0].headers["anthropic-beta"]
    assert api.requests[0].body["context_management"] == management
    api.check()


def test_context_management_without_the_beta_header_is_refused(api, client):
    api.expect_refusals()
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(
            model=MODEL, max_tokens=100, messages=HI, extra_body={"context_management": {"edits": []}}
        )
    assert "context_management" in api.violations[0]


def test_count_tokens_matches_the_estimate(api, client):
    body = {"messages": tool_round(), "system": "be brief"}
    counted = client.messages.count_tokens(model=MODEL, **body)
    assert counted.input_tokens == estimate_tokens(body) > 0
    api.check()


def test_models_list_and_retrieve(client):
    assert [m.id for m in client.models.list()][:2] == ["claude-sonnet-4-6", "claude-opus-4-1"]
    model = client.models.retrieve(MODEL)
    assert (model.max_input_tokens, model.max_tokens) == (200_000, 64_000)
    with pytest.raises(anthropic.NotFoundError):
        client.models.retrieve("claude-nonexistent")


def test_models_are_configurable():
    with FakeAPI(models=[model_info("small", max_input_tokens=8000)]) as api:
        with anthropic.Anthropic(base_url=api.url, api_key="k") as sdk:
            assert sdk.models.retrieve("small").max_input_tokens == 8000


# -- errors and retries ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_class", "error_type"),
    [
        (400, anthropic.BadRequestError, "invalid_request_error"),
        (413, anthropic.ContentTooLargeError, "request_too_large"),
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (529, anthropic.OverloadedError, "overloaded_error"),
    ],
)
def test_error_statuses_surface_as_sdk_exceptions(api, client, status, error_class, error_type):
    api.error(status)
    with pytest.raises(error_class) as caught:
        stream(client)
    assert caught.value.status_code == status
    assert caught.value.body["error"]["type"] == error_type
    assert isinstance(caught.value, anthropic.APIStatusError)
    api.check()


def test_rate_limit_carries_a_small_retry_after(api, client):
    api.error(429)
    with pytest.raises(anthropic.RateLimitError) as caught:
        stream(client)
    assert caught.value.response.headers["retry-after"] == "0"


def test_prompt_too_long_names_both_numbers(api, client):
    api.prompt_too_long(maximum=1000)
    api.prompt_too_long(actual=250_000, maximum=200_000)
    with pytest.raises(anthropic.BadRequestError) as first:
        stream(client)
    with pytest.raises(
        anthropic.BadRequestError, match=r"prompt is too long: 250000 tokens > 200000 maximum"
    ):
        stream(client)
    assert first.value.body["error"] == {
        "type": "invalid_request_error",
        "message": f"prompt is too long: {estimate_tokens({'messages': HI})} tokens > 1000 maximum",
    }
    api.check()


@pytest.mark.parametrize("status", [529, 429])
def test_sdk_retries_consume_script_steps(api, status):
    api.error(status)
    api.reply_text("second time lucky")
    with anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=2) as sdk:
        with sdk.messages.stream(model=MODEL, max_tokens=10, messages=HI) as s:
            assert s.get_final_message().content[0].text == "second time lucky"
    assert [r.status for r in api.requests] == [status, 200]
    api.check()


def test_dropped_stream_raises_a_raw_transport_error(api, client):
    # What the SDK does when the connection drops mid-stream (observed with anthropic 2.12.0 / httpx2):
    # the chunked body ends early, so iterating the stream -- and therefore get_final_message() --
    # raises httpx2.RemoteProtocolError. It is NOT wrapped in anthropic.APIConnectionError, and the SDK
    # does not retry it. The partial message stays readable as current_message_snapshot, with
    # stop_reason None. The agent has to catch httpx2.TransportError itself.
    api.drop_stream(after_events=5, reply=Reply.text("Reading the file now"))
    with pytest.raises(httpx2.RemoteProtocolError):
        with client.messages.stream(model=MODEL, max_tokens=100, messages=HI) as s:
            s.get_final_message()
    partial = s.current_message_snapshot
    assert partial.stop_reason is None
    assert partial.content[0].text and "Reading the file now".startswith(partial.content[0].text)
    api.check()


def test_dropped_non_streaming_request_is_a_connection_error_the_sdk_retries(api):
    api.drop_stream()
    api.reply_text("again")
    with anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=1) as sdk:
        assert sdk.messages.create(model=MODEL, max_tokens=10, messages=HI).content[0].text == "again"
    api.check()


def test_error_event_mid_stream(api, client):
    # An SSE `error` event arrives after a 200, so the SDK raises a plain APIStatusError with
    # status_code 200; only the body tells it was an overload.
    api.stream_error(after_events=4)
    with pytest.raises(anthropic.APIStatusError) as caught:
        stream(client)
    assert caught.value.status_code == 200
    assert caught.value.body["error"]["type"] == "overloaded_error"
    api.check()


# -- validation --------------------------------------------------------------------------------------


TOOL = {"name": "Read", "description": "read", "input_schema": {"type": "object"}}
BAD_REQUESTS = {
    "orphan tool_result": dict(
        messages=[
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]},
        ]
    ),
    "unanswered tool_use": dict(messages=[*tool_round()[:2], {"role": "user", "content": "never mind"}]),
    "empty text block": dict(messages=[{"role": "user", "content": [{"type": "text", "text": ""}]}]),
    "whitespace text block": dict(messages=[{"role": "user", "content": [{"type": "text", "text": " \n"}]}]),
    "first message assistant": dict(
        messages=[{"role": "assistant", "content": "hi"}, {"role": "user", "content": "hello"}]
    ),
    "no messages": dict(messages=[]),
    "text before tool_result": dict(
        messages=[
            *tool_round()[:2],
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "here"},
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"},
                ],
            },
        ]
    ),
    "duplicate tool names": dict(messages=HI, tools=[TOOL, TOOL]),
    "five cache breakpoints": dict(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}}
                    for i in range(5)
                ],
            }
        ]
    ),
    "max_tokens zero": dict(messages=HI, max_tokens=0),
    "max_tokens above the model limit": dict(messages=HI, max_tokens=64_001),
    "trailing whitespace prefill": dict(messages=[*HI, {"role": "assistant", "content": "Sure "}]),
}


@pytest.mark.parametrize("name", BAD_REQUESTS)
def test_invalid_requests_are_refused_and_recorded(api, client, name):
    api.expect_refusals()
    api.reply_text("never sent")
    kw = {"max_tokens": 100, **BAD_REQUESTS[name]}
    with pytest.raises(anthropic.BadRequestError) as caught:
        with client.messages.stream(model=MODEL, **kw):
            pass
    assert api.violations and caught.value.body["error"]["message"] in api.violations[0]
    assert api.script, "an invalid request must not consume a step"


def test_valid_histories_pass(api, client):
    consecutive_users = [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    tool_then_text = [
        *tool_round()[:2],
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"},
                {"type": "text", "text": "and?"},
            ],
        },
    ]
    for messages in (tool_round(), consecutive_users, tool_then_text):
        api.reply_text("fine")
        stream(client, messages, tools=[TOOL])
    api.check()


def test_missing_script_step_fails_loudly(api, client):
    api.expect_refusals()
    with pytest.raises(anthropic.InternalServerError):
        stream(client)
    assert "unexpected request" in api.violations[0]


def test_unconsumed_steps_are_reported(api):
    api.reply_text("nobody asks")
    with pytest.raises(AssertionError, match="never requested"):
        api.assert_done()


def test_running_checks_on_exit():
    with pytest.raises(AssertionError, match="violations"):
        with running() as api:
            api.expect_refusals()  # check() still fails on them: what this test shows
            with anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0) as sdk:
                with pytest.raises(anthropic.InternalServerError):
                    sdk.messages.create(model=MODEL, max_tokens=5, messages=HI)


# -- token accounting --------------------------------------------------------------------------------


def cached(text):
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


def test_second_request_with_the_same_prefix_reads_the_cache(api, client):
    system = cached("You are a careful coding agent. " * 40)
    first_turn = [{"role": "user", "content": cached("first question")}]
    second_turn = [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "answer"},
        {"role": "user", "content": cached("second question")},
    ]
    for _ in range(2):
        api.reply_text("answer")
    first = stream(client, first_turn, system=system).usage
    second = stream(client, second_turn, system=system).usage
    assert first.cache_read_input_tokens == 0 and first.cache_creation_input_tokens > 0
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert 0 < second.cache_creation_input_tokens < second.cache_read_input_tokens
    total = second.input_tokens + second.cache_read_input_tokens + second.cache_creation_input_tokens
    assert total == estimate_tokens({"system": system, "messages": second_turn})
    api.check()


def test_changed_prefix_misses_the_cache(api, client):
    api.reply_text("a")
    api.reply_text("b")
    stream(client, [{"role": "user", "content": cached("one")}], system=cached("system A " * 20))
    usage = stream(
        client, [{"role": "user", "content": cached("one")}], system=cached("system B " * 20)
    ).usage
    assert usage.cache_read_input_tokens == 0
    api.check()


def test_context_window_answers_prompt_too_long_without_consuming_steps(api, client):
    api.reply_text("fits")
    size = estimate_tokens({"messages": HI})
    api.context_window = size - 1
    with pytest.raises(
        anthropic.BadRequestError, match=rf"prompt is too long: {size} tokens > {size - 1} maximum"
    ):
        stream(client)
    api.context_window = size
    assert stream(client).content[0].text == "fits"
    api.check()


# -- routing -----------------------------------------------------------------------------------------


def test_routes_answer_side_requests_before_the_script(api, client):
    summary = api.on(
        lambda body: "<summary>" in last_user_text(body), Reply.text("<summary>short</summary>"), once=True
    )
    api.reply_text("main reply")
    compaction = [{"role": "user", "content": "Write <analysis> then <summary>."}]
    assert stream(client, compaction).content[0].text == "<summary>short</summary>"
    assert stream(client, compaction).content[0].text == "main reply"  # the once-route is spent
    assert summary.hits == [api.requests[0].body]
    api.check()


def test_callable_steps_see_the_request(api, client):
    api.add(lambda body: Reply.text(f"you said {request_text(body)!r}"))
    assert stream(client, [{"role": "user", "content": "ping"}]).content[0].text == "you said 'ping'"
    api.check()


def test_unfired_once_route_counts_as_unconsumed(api):
    api.on(lambda body: True, Reply.text("x"), once=True)
    with pytest.raises(AssertionError):
        api.assert_done()


def test_concurrent_requests_each_take_one_step(api):
    replies = {f"reply {i}" for i in range(8)}
    for text in sorted(replies):
        api.reply_text(text)
    got = []
    with anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0) as sdk:

        def call():
            got.append(sdk.messages.create(model=MODEL, max_tokens=10, messages=HI).content[0].text)

        threads = [threading.Thread(target=call) for _ in replies]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert set(got) == replies
    api.check()


def test_a_slow_responder_does_not_hold_up_other_requests(api):
    release = threading.Event()

    def slow(body):
        release.wait(5)
        return Reply.text("side reply")

    api.on(lambda body: last_user_text(body) == "side", slow)
    api.reply_text("main reply")
    with anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0) as sdk:
        side = []
        worker = threading.Thread(
            target=lambda: side.append(stream(sdk, [{"role": "user", "content": "side"}]))
        )
        worker.start()
        assert stream(sdk).content[0].text == "main reply"  # answered while the side request waits
        release.set()
        worker.join()
    assert side[0].content[0].text == "side reply"
    api.check()


def test_a_body_cut_off_mid_send_is_a_client_gone_not_a_request(api, client):
    """A client killed (or exiting) mid-send leaves a torn body: no request is recorded, no violation,
    and the next request is served as usual."""
    import socket

    host, port = api._server.server_address[:2]
    with socket.create_connection((host, port)) as sock:
        sock.sendall(
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + b'{"model": "cl'
        )
    api.reply_text("after")
    assert stream(client).content[0].text == "after"
    assert [r.path for r in api.requests] == ["/v1/messages"]
    api.check()
