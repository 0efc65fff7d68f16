"""The fake's model families (agent/demo/server.py profiles): the 5.5 family's request rules and reply
shape under the 2026 profile, and the 4.x profile unchanged — through the official SDK on a real socket."""

from __future__ import annotations

import anthropic
import pytest

from tests.fakeapi import FakeAPI, Reply

MODEL = "claude-sonnet-5-5"
HI = [{"role": "user", "content": "hi"}]


pytestmark = pytest.mark.fake_api(profile="2026")  # this file is about that profile


@pytest.fixture
def client(api):
    with anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=0) as sdk:
        yield sdk


def create(client, model=MODEL, messages=HI, **kw):
    # the SDK's types no longer take sampling parameters: they go in as a raw body would carry them
    sampling = {k: kw.pop(k) for k in ("temperature", "top_p", "top_k") if k in kw}
    return client.beta.messages.create(
        model=model, max_tokens=1000, messages=messages, extra_body=sampling or None, **kw
    )


REFUSED = [
    ({"thinking": {"type": "enabled", "budget_tokens": 2000}}, '"thinking.type.enabled" is not supported'),
    ({"thinking": {"type": "disabled"}}, "thinking.type.between_tools"),
    ({"temperature": 0.2}, "`temperature` is not supported"),
    ({"top_p": 0.9}, "`top_p` is not supported"),
    ({"top_k": 5}, "`top_k` is not supported"),
    ({"tool_choice": {"type": "any"}}, 'tool_choice.type "any" is not supported'),
    ({"tool_choice": {"type": "tool", "name": "Read"}}, 'tool_choice.type "tool" is not supported'),
    ({"messages": [*HI, {"role": "assistant", "content": "Sure"}]}, "Prefilling assistant messages"),
    ({"thinking": {"type": "between_tools"}, "output_config": {"effort": "max"}}, 'at effort "max"'),
    ({"thinking": {"type": "adaptive", "display": "updates"}}, "thinking-display-updates-2026-08-18"),
]


@pytest.mark.parametrize("params, error", REFUSED, ids=[e for _, e in REFUSED])
def test_the_family_refuses_what_its_pages_list(api, client, params, error):
    api.expect_refusals()  # the refusal is what this test shows
    api.reply_text("never sent")
    tools = [{"name": "Read", "description": "read", "input_schema": {"type": "object"}}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        create(client, **{"tools": tools, **params})
    assert error in str(caught.value)
    assert api.violations and error in api.violations[0]
    api.script.clear()


def test_opus_can_not_turn_thinking_off(api, client):
    api.expect_refusals()  # the refusal is what this test shows
    api.reply_text("never sent")
    with pytest.raises(anthropic.BadRequestError, match="between_tools.* is not supported for this model"):
        create(client, model="claude-opus-5-5", thinking={"type": "between_tools"})
    api.script.clear()


def test_a_reply_thinks_and_the_default_display_empties_the_text(api, client):
    api.add(Reply.tool("Read", {"file_path": "/x"}, text="Let me look at the file."))
    reply = create(client)
    kinds = [b.type for b in reply.content]
    assert kinds == ["thinking", "thinking", "tool_use"]  # reasoning, then the progress text as thinking
    assert all(b.thinking == "" and b.signature for b in reply.content[:2])
    api.check()


def test_updates_returns_the_progress_text_and_hides_the_reasoning(api, client):
    api.add(Reply.tool("Read", {"file_path": "/x"}, text="Let me look at the file."))
    reply = create(
        client,
        thinking={"type": "adaptive", "display": "updates"},
        betas=["thinking-display-updates-2026-08-18"],
    )
    assert [b.thinking for b in reply.content[:2]] == ["", "Let me look at the file."]
    api.check()


def test_summarized_returns_both(api, client):
    api.add(Reply.text("done", thinking="weighing it"))
    reply = create(client, thinking={"type": "adaptive", "display": "summarized"})
    assert [b.type for b in reply.content] == ["thinking", "text"]
    assert reply.content[0].thinking == "weighing it" and reply.content[1].text == "done"
    api.check()


def test_between_tools_keeps_its_effort_for_the_conversation(api, client):
    api.add(Reply.tool("Read", {"file_path": "/x"}, text="Reading.", id="toolu_a"))
    off = {"thinking": {"type": "between_tools"}, "output_config": {"effort": "low"}}
    first = create(client, **off)
    assert [b.type for b in first.content] == ["thinking", "tool_use"]  # no reasoning, the progress text
    assert first.content[0].thinking == "Reading."
    history = [
        *HI,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "x"}]},
    ]
    api.reply_text("never sent")
    with pytest.raises(anthropic.BadRequestError, match="effort may not change"):
        create(client, messages=history, thinking={"type": "between_tools"}, output_config={"effort": "high"})
    api.script.clear()
    api.violations.clear()
    api.reply_text("fine")
    assert create(client, messages=history, **off).content[-1].text == "fine"
    api.check()


def test_a_tool_loop_must_send_its_thinking_back(api, client):
    api.expect_refusals()  # the refusal is what this test shows
    api.add(Reply.tool("Read", {"file_path": "/x"}, id="toolu_b"))
    first = create(client)
    stripped = [b.model_dump(exclude_none=True) for b in first.content if b.type == "tool_use"]
    history = [
        *HI,
        {"role": "assistant", "content": stripped},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_b", "content": "x"}]},
    ]
    api.reply_text("never sent")
    with pytest.raises(anthropic.BadRequestError, match="must start with a thinking block"):
        create(client, messages=history)
    api.script.clear()


def test_the_models_api_reports_capabilities(api, client):
    sonnet = client.beta.models.retrieve("claude-sonnet-5-5")
    assert sonnet.capabilities.thinking.types.between_tools.supported
    assert not sonnet.capabilities.thinking.types.enabled.supported
    assert sonnet.capabilities.effort.max.supported
    # the SDK's shape (BetaCompactionCapability): supported, and one entry per compaction.type
    assert sonnet.capabilities.compaction.supported and sonnet.capabilities.compaction.summarize.supported
    assert sonnet.max_input_tokens == 200_000  # the suite's window (the family's 1M: core.models)
    opus = client.beta.models.retrieve("claude-opus-5-5")
    assert not opus.capabilities.thinking.types.between_tools.supported
    listed = {m.id: m for m in client.beta.models.list()}
    assert listed["claude-fable-5-2"].capabilities.thinking.types.adaptive.supported


def test_the_4x_profile_keeps_the_budget_rules_and_scripted_replies():
    with (
        FakeAPI(profile="4.x") as api,
        anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0) as c,
    ):
        api.add(Reply.tool("Read", {"file_path": "/x"}, text="Let me look.", id="toolu_c"))
        reply = c.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=4000,
            messages=HI,
            thinking={"type": "enabled", "budget_tokens": 2000},
            extra_body={"temperature": 1},
        )
        assert [b.type for b in reply.content] == ["text", "tool_use"]
        assert c.models.retrieve("claude-sonnet-4-6").capabilities is None
        api.check()
        api.expect_refusals()  # a budget not below max_tokens: refused, as the 4.x rules say
        api.reply_text("never sent")
        with pytest.raises(anthropic.BadRequestError, match="budget_tokens"):
            c.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=4000,
                messages=HI,
                thinking={"type": "enabled", "budget_tokens": 5000},
            )
