"""The fake plays preserved thinking's prefix check (agent/demo/binding.py) and cache diagnostics, through
the official SDK: what counts as an edit, what appending may do, drop_block, compaction blocks, another
model's thinking, and the counters tests and benchmarks read."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from agent.demo.binding import BINDING_BETA, mismatch_text
from tests.fakeapi import FakeAPI, Reply, estimate_tokens, thinking_block, tool_use_block

MODEL = "claude-sonnet-5-5"
SYSTEM = [{"type": "text", "text": "You are a coding agent."}]
TOOLS = [{"name": "Read", "description": "read a file", "input_schema": {"type": "object"}}]


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def result(tool_id: str, text: str = "contents") -> dict:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": text}]}


class Chat:
    """One conversation with the fake, the way an append-only client keeps it."""

    def __init__(self, api: FakeAPI, model: str = MODEL) -> None:
        self.api, self.model = api, model
        self.client = anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0)
        self.system: Any = SYSTEM
        self.tools: list[dict] = list(TOOLS)
        self.messages: list[dict] = []

    def send(self, messages: list[dict] | None = None, **extra: Any) -> Any:
        params = {
            "model": self.model,
            "max_tokens": 1000,
            "system": self.system,
            "tools": self.tools,
            "messages": self.messages if messages is None else messages,
            **extra,
        }
        if "betas" in params:
            return self.client.beta.messages.create(**params)
        return self.client.messages.create(**params)

    def turn(self, message: dict, reply: Reply) -> Any:
        self.messages.append(message)
        self.api.add(reply)
        answer = self.send()
        self.messages.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]}
        )
        return answer


def thinking_reply(thought: str, text: str = "ok") -> Reply:
    return Reply([thinking_block(thought), {"type": "text", "text": text}])


def tool_reply(thought: str, tool_id: str) -> Reply:
    return Reply([thinking_block(thought), tool_use_block("Read", {"file_path": "/x"}, tool_id)])


def refused(chat: Chat, messages: list[dict] | None = None, **extra: Any) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        chat.send(messages, **extra)
    assert caught.value.status_code == 400
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    return caught.value.body["error"]["message"]


def two_turns(api: FakeAPI) -> Chat:
    chat = Chat(api)
    chat.turn(user("first question"), thinking_reply("thought one"))
    chat.turn(user("second question"), thinking_reply("thought two"))
    return chat


def test_appending_keeps_every_block_valid(api):
    chat = two_turns(api)
    chat.messages.append(user("third"))
    api.reply_text("fine")
    chat.send()
    # a role "system" message appended after the newest user turn changes nothing before the blocks
    chat.messages.append({"role": "system", "content": "The date is now 2026-11-28."})
    api.reply_text("still fine")
    chat.send()
    assert api.binding.refused == [] and api.binding.fallbacks == []
    api.check()


@pytest.mark.parametrize(
    "edit",
    ["earlier message", "system", "tool", "inserted system message"],
)
def test_an_edit_before_a_block_is_refused_with_the_apis_text(api, edit):
    chat = two_turns(api)
    chat.messages.append(user("third"))
    if edit == "earlier message":
        chat.messages[0] = user("first question, reworded")
    elif edit == "system":
        chat.system = [{"type": "text", "text": "You are a coding agent. Today is another day."}]
    elif edit == "tool":
        chat.tools = [*TOOLS, {"name": "Grep", "description": "search", "input_schema": {"type": "object"}}]
    else:
        chat.messages.insert(1, {"role": "system", "content": "a late instruction"})
    message = refused(chat)
    assert message == mismatch_text(
        "messages.1.content.0" if edit != "inserted system message" else "messages.2.content.0", "thinking"
    )
    assert message.startswith("messages.") and "The block is bound to a different conversation." in message
    assert len(api.binding.refused) == 1 and len(api.violations) == 1
    api.violations.clear()


def test_what_does_not_count_as_an_edit(api):
    chat = two_turns(api)
    chat.messages.append(user("third"))
    # cache_control markers move freely; a deferred tool is outside the prefix
    chat.messages[0] = {
        "role": "user",
        "content": [{"type": "text", "text": "first question", "cache_control": {"type": "ephemeral"}}],
    }
    chat.tools = [
        *TOOLS,
        {"name": "mcp__x__y", "description": "d", "input_schema": {"type": "object"}, "defer_loading": True},
    ]
    api.reply_text("fine")
    chat.send()
    api.check()


def test_thinking_of_earlier_turns_may_go_oldest_first_only(api):
    chat = two_turns(api)
    chat.turn(user("third"), thinking_reply("thought three"))
    chat.messages.append(user("fourth"))
    strip = lambda m: {**m, "content": [b for b in m["content"] if b["type"] != "thinking"]}  # noqa: E731
    oldest_gone = [strip(m) if i == 1 else m for i, m in enumerate(chat.messages)]
    api.reply_text("fine")
    chat.send(oldest_gone)
    middle_gone = [strip(m) if i == 3 else m for i, m in enumerate(chat.messages)]
    assert refused(chat, middle_gone) == mismatch_text("messages.5.content.0", "thinking")
    api.violations.clear()
    api.check()


def test_the_latest_assistant_message_of_a_tool_loop_is_checked(api):
    chat = Chat(api)
    chat.turn(user("read /x"), tool_reply("I should read it", "toolu_a"))
    chat.messages.append(result("toolu_a"))
    chat.messages[0] = user("read /x please")  # an edit under the loop's own assistant message
    assert refused(chat) == mismatch_text("messages.1.content.0", "thinking")
    api.violations.clear()


def test_drop_block_needs_its_header_then_drops_and_lists(api):
    chat = two_turns(api)
    chat.messages.append(user("third"))
    chat.messages[0] = user("first question, reworded")
    thinking = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
    assert BINDING_BETA in refused(chat, extra_body={"thinking": thinking})
    api.violations.clear()
    api.reply_text("fine")
    answer = chat.send(betas=[BINDING_BETA], thinking=thinking)
    dropped = [t.model_dump() for t in answer.input_transformations]
    # the edited first message invalidates both later blocks
    assert dropped == [
        {"type": "thinking_dropped", "path": "messages.1.content.0", "reason": "prefix_binding_mismatch"},
        {"type": "thinking_dropped", "path": "messages.3.content.0", "reason": "prefix_binding_mismatch"},
    ]
    assert len(api.binding.fallbacks) == 1
    with pytest.raises(AssertionError, match="drop_block fallbacks"):
        api.check()  # a test or benchmark that took this path fails unless it meant to
    api.binding.fallbacks.clear()
    api.check()


def test_a_compaction_block_stands_for_what_it_summarized(api):
    chat = two_turns(api)
    chat.turn(user("third"), thinking_reply("thought three"))
    summarized = chat.messages[:4]
    block = api.compactions.issue(summarized, "summary of two turns")  # as the endpoint writes one
    kept = chat.messages[4:]
    api.reply_text("fine")
    chat.send([{"role": "assistant", "content": [block]}, *kept, user("fourth")])
    # a summary the server did not write stands for nothing: the kept turn's thinking is then invalid
    api.binding.compaction_origin = lambda b: None
    assert refused(chat, [{"role": "assistant", "content": [block]}, *kept, user("fourth")]) == mismatch_text(
        "messages.2.content.0", "thinking"
    )
    # and a block whose text the client changed is refused for that first
    foreign = {**block, "content": "a summary written by the client"}
    assert "compaction_content_mismatch" in refused(
        chat, [{"role": "assistant", "content": [foreign]}, *kept, user("fourth")]
    )
    api.violations.clear()


def test_another_models_thinking_is_dropped_without_an_error(api):
    chat = two_turns(api)
    chat.messages.append(user("third"))
    chat.model = "claude-opus-5-5"
    api.reply_text("fine")
    answer = chat.client.beta.messages.create(
        model=chat.model, max_tokens=100, messages=chat.messages, system=SYSTEM, tools=TOOLS
    )
    reasons = {t.reason for t in answer.input_transformations}
    assert reasons == {"model_binding_mismatch"} and len(api.binding.dropped) == 2
    assert api.binding.fallbacks == [] and api.binding.refused == []
    api.check()


def test_off_checks_nothing_and_older_models_are_not_bound():
    with FakeAPI(binding="off") as api:
        chat = two_turns(api)
        chat.messages.append(user("third"))
        chat.messages[0] = user("reworded")
        api.reply_text("fine")
        chat.send()
        api.check()
    with FakeAPI(binding="error") as api:
        chat = Chat(api, model="claude-sonnet-4-6")
        chat.turn(user("first"), thinking_reply("t"))
        chat.messages.append(user("second"))
        chat.messages[0] = user("reworded")
        api.reply_text("fine")
        chat.send()
        api.check()


def test_cache_diagnostics_name_what_changed(api):
    chat = Chat(api)
    api.reply_text("one")
    first = chat.send([user("hello")], extra_body={"diagnostics": {"previous_message_id": None}})
    assert first.diagnostics is None
    history = [
        user("hello"),
        {"role": "assistant", "content": [{"type": "text", "text": "one"}]},
        user("more"),
    ]
    api.reply_text("two")
    second = chat.send(history, extra_body={"diagnostics": {"previous_message_id": first.id}})
    assert second.diagnostics is None  # only appended: the whole prefix could be read
    api.reply_text("three")
    edited = [user("hello, edited"), *history[1:]]
    third = chat.send(edited, extra_body={"diagnostics": {"previous_message_id": second.id}})
    assert third.diagnostics.cache_miss_reason.type == "messages_changed"
    assert third.diagnostics.cache_miss_reason.cache_missed_input_tokens > 0
    chat.system = [{"type": "text", "text": "another prompt"}]
    api.reply_text("four")
    fourth = chat.send(edited, extra_body={"diagnostics": {"previous_message_id": third.id}})
    assert fourth.diagnostics.cache_miss_reason.type == "system_changed"
    api.reply_text("five")
    fifth = chat.send(edited, extra_body={"diagnostics": {"previous_message_id": "msg_nowhere"}})
    assert fifth.diagnostics.cache_miss_reason.type == "previous_message_not_found"
    assert [m["type"] for m in api.binding.cache_misses] == [
        "messages_changed",
        "system_changed",
        "previous_message_not_found",
    ]
    api.check()


def test_the_stream_carries_transformations_and_diagnostics(api):
    chat = two_turns(api)
    chat.messages.append(user("third"))
    chat.messages[0] = user("reworded")
    api.reply_text("fine")
    thinking = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
    params = dict(
        model=MODEL, max_tokens=100, system=SYSTEM, tools=TOOLS, messages=chat.messages, thinking=thinking
    )
    with chat.client.beta.messages.stream(
        **params, betas=[BINDING_BETA], extra_body={"diagnostics": {"previous_message_id": None}}
    ) as stream:
        final = stream.get_final_message()
    assert [t.path for t in final.input_transformations] == ["messages.1.content.0", "messages.3.content.0"]
    api.binding.fallbacks.clear()
    api.check()


def test_system_messages_are_known_to_the_validator(api):
    chat = Chat(api)
    bad = [{"role": "system", "content": "first"}, user("hi")]
    assert "first message" in refused(chat, bad)
    after_assistant = [
        user("hi"),
        {"role": "assistant", "content": "yo"},
        {"role": "system", "content": "x"},
        user("again"),
    ]
    assert "may only follow a user message" in refused(chat, after_assistant)
    api.violations.clear()
    old = Chat(api, model="claude-sonnet-4-6")
    assert "role" in refused(old, [user("hi"), {"role": "system", "content": "x"}])
    api.violations.clear()
    assert json.dumps(api.binding.refused) == "[]"


# --- server-side context editing: counted and billed as cleared, no edit of the history ---------------------

EDITING_BETA = "context-management-2025-06-27"
BIG = "x = 1\n" * 2_000  # ~3,000 tokens a result


def reads(api: FakeAPI, n: int) -> Chat:
    """A tool loop of ``n`` reads, each reply thinking, each result large."""
    chat = Chat(api)
    chat.messages.append(user("read them all"))
    for i in range(n):
        api.add(tool_reply(f"read number {i}", f"toolu_{i}"))
        answer = chat.send()
        chat.messages.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]}
        )
        chat.messages.append(result(f"toolu_{i}", BIG))
    return chat


def clearing(keep: int = 2, trigger: int = 5_000, at_least: int = 0) -> dict:
    edit: dict[str, Any] = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": trigger},
        "keep": {"type": "tool_uses", "value": keep},
    }
    if at_least:
        edit["clear_at_least"] = {"type": "input_tokens", "value": at_least}
    return {"edits": [edit]}


def test_clear_tool_uses_is_counted_and_billed_as_cleared_and_is_no_edit(api):
    chat = reads(api, 6)
    whole = estimate_tokens(api.requests[-1].body) + 3_000  # about what the next request holds
    api.add(tool_reply("one more", "toolu_6"))
    answer = chat.send(betas=[EDITING_BETA], context_management=clearing(keep=2))
    body = api.requests[-1].body
    applied = answer.context_management.applied_edits
    assert [(e.type, e.cleared_tool_uses) for e in applied] == [("clear_tool_uses_20250919", 4)]
    read = answer.usage.input_tokens + answer.usage.cache_read_input_tokens
    read += answer.usage.cache_creation_input_tokens
    assert read == estimate_tokens(body) - applied[0].cleared_input_tokens  # billed as the model read it
    assert applied[0].cleared_input_tokens > 4 * 2_500 and read < whole / 2
    cleared = [
        b for m in api.requests[-1].effective["messages"] for b in m["content"] if b["type"] == "tool_result"
    ]
    assert [b["content"] == BIG for b in cleared] == [False] * 4 + [True] * 2  # the oldest went
    assert all(
        b["content"] == BIG for m in body["messages"] for b in m["content"] if b["type"] == "tool_result"
    )
    # the history as sent is what thinking is bound to: sent again whole with more appended, it passes
    chat.messages.append(
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]}
    )
    chat.messages.append(result("toolu_6", BIG))
    api.reply_text("done")
    chat.send(betas=[EDITING_BETA], context_management=clearing(keep=2))
    assert api.binding.refused == [] and api.binding.fallbacks == []
    # clearing those results in the history itself is an edit: refused
    edited = [
        {
            **m,
            "content": [{**b, "content": "gone"} if b["type"] == "tool_result" else b for b in m["content"]],
        }
        if i == 2
        else m
        for i, m in enumerate(chat.messages)
    ]
    assert "bound to a different conversation" in refused(chat, edited)
    api.violations.clear()
    api.check()


def test_clearing_waits_for_its_trigger_and_its_least_worth():
    with FakeAPI(binding="error", context_window=12_000) as api:
        chat = reads(api, 3)
        api.add(tool_reply("more", "toolu_3"))
        high = chat.send(betas=[EDITING_BETA], context_management=clearing(trigger=500_000))
        assert high.context_management.applied_edits == []  # under the trigger: nothing cleared
        api.add(tool_reply("more", "toolu_4"))
        worth = chat.send(betas=[EDITING_BETA], context_management=clearing(keep=1, at_least=50_000))
        assert worth.context_management.applied_edits == []  # too little to be worth a cache write
        chat.messages += [
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in worth.content]},
            result("toolu_4", BIG),
            user("and the rest"),
        ]
        assert estimate_tokens({"messages": chat.messages}) > 12_000
        api.reply_text("fine")  # over the window as sent, under it as cleared: answered
        cleared = chat.send(betas=[EDITING_BETA], context_management=clearing(keep=1))
        assert cleared.context_management.applied_edits[0].cleared_tool_uses == 3
        assert api.binding.refused == []
        api.check()
