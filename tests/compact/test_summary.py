"""compact.compaction.summary: the instruction, media stripping, reply parsing, round dropping, and the side request
as the fake API receives it (shared cached prefix, tool use off, prompt-too-long retries)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from compact.compaction import summary
from compact.stages import refused
from core.errors import CompactionError
from core.messages import (
    Message,
    assistant,
    meta,
    to_api,
    tool_pairs_ok,
    tool_result_block,
    tool_results,
    user_prompt,
)
from tests.fakeapi import FakeAPI, Reply, last_user_text, validate
from tests.fakeapi import PromptTooLong as TooLong
from tests.helpers.bench import make_bench
from tests.helpers.compaction import SUMMARY_REPLY, conversation, main_request

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
DOCUMENT = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}}
SECTIONS = [
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and fixes",
    "Problem Solving",
    "All user messages",
    "Pending Tasks",
    "Current Work",
    "Optional Next Step",
]


# --- the instruction --------------------------------------------------------------------------------------


def test_instruction_asks_for_analysis_then_nine_sections() -> None:
    text = summary.INSTRUCTION
    assert "<analysis>" in text and "<summary>" in text
    positions = [text.index(name) for name in SECTIONS]
    assert positions == sorted(positions)
    assert text.index("<analysis>") < text.index("<summary>")


def test_instruction_forbids_tools_at_start_and_end_and_keeps_constraints() -> None:
    first, last = summary.INSTRUCTION[:400], summary.INSTRUCTION[-200:]
    assert "do not call any tool" in first
    assert "no tool calls" in last
    assert "word for word" in summary.INSTRUCTION and "security constraint" in summary.INSTRUCTION
    assert "Only real user turns count" in summary.INSTRUCTION


def test_custom_instructions_are_appended_in_order() -> None:
    text = summary.build_instruction(["from /compact", "", "  ", "from the hook", "from CLAUDE.md"])
    assert text.startswith(summary.INSTRUCTION)
    extra = text.split("Additional instructions:\n", 1)[1]
    assert extra == "from /compact\n\nfrom the hook\n\nfrom CLAUDE.md"
    assert summary.build_instruction([]) == summary.INSTRUCTION


# --- media ------------------------------------------------------------------------------------------------


def test_strip_media_replaces_images_and_documents_without_mutating() -> None:
    plain = user_prompt("no media here")
    with_image = Message("user", [{"type": "text", "text": "look"}, IMAGE, DOCUMENT])
    nested = tool_results([tool_result_block("t1", [{"type": "text", "text": "shot"}, IMAGE])])
    before = copy.deepcopy([plain.content, with_image.content, nested.content])

    out = summary.strip_media([plain, with_image, nested])

    assert out[0] is plain
    assert out[1].content == [
        {"type": "text", "text": "look"},
        {"type": "text", "text": "[image]"},
        {"type": "text", "text": "[document]"},
    ]
    assert out[2].content[0]["content"] == [
        {"type": "text", "text": "shot"},
        {"type": "text", "text": "[image]"},
    ]
    assert [m.uuid for m in out] == [plain.uuid, with_image.uuid, nested.uuid]
    assert [plain.content, with_image.content, nested.content] == before


def test_a_tool_loop_step_is_told_alike_for_a_summary_and_for_a_refusal() -> None:
    """One ``told`` (compact.stages.refused): a summary request that can't continue a tool loop and a
    refused loop replayed on resume tell the step in the same words, a picture in a result named."""
    use = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "shot.png"}}
    call = assistant([use], stop_reason="tool_use")
    result = tool_results([tool_result_block("t1", [{"type": "text", "text": "shot.png"}, IMAGE])])
    history = [user_prompt("look at the screenshot"), call, result]

    closed = summary.close_loop(history)
    replayed = refused.apply([refused.record(call.uuid, refused.LOOP, "messages.1.content.0", "x")], history)

    assert [m.text for m in closed] == [m.text for m in replayed]
    assert closed[1].text == '[called Read: {"file_path": "shot.png"}]'
    assert closed[2].text == "[tool result]\nshot.png\n[image]"


# --- parsing ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("<analysis>thinking</analysis>\n<summary>\nthe body\n</summary>", "the body"),
        ("just a plain summary", "just a plain summary"),
        ("<analysis>scratch</analysis> no summary tags here", "no summary tags here"),
        ("<analysis>cut off before the end <summary>body</summary>", "body"),
        ("<summary>truncated at max_tokens", "truncated at max_tokens"),
    ],
)
def test_parse_summary(reply: str, expected: str) -> None:
    assert summary.parse_summary(reply) == expected


@pytest.mark.parametrize("text", ["API Error: Request timed out", "<analysis>only thinking</analysis>"])
def test_unusable_replies_are_errors(text: str) -> None:
    with pytest.raises(CompactionError):
        summary.check_reply(assistant([{"type": "text", "text": text}] if text else []))
    with pytest.raises(CompactionError):  # cut off before any text
        summary.check_reply(assistant([], stop_reason="max_tokens"))


@pytest.mark.parametrize("text", ["", "<summary>\n</summary>"])
def test_an_empty_summary_that_ended_normally_is_a_poor_summary_not_a_failure(text: str) -> None:
    # the request saw every message; the working state and the user's words follow any summary
    reply = assistant([{"type": "text", "text": text}] if text else [])
    assert summary.check_reply(reply) == summary.EMPTY_SUMMARY


# --- rounds -----------------------------------------------------------------------------------------------


def _history(n: int, size: int = 50) -> list[Message]:
    out: list[Message] = [user_prompt("start")]
    for i in range(n):
        out.append(
            assistant([{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}}])
        )
        out.append(tool_results([tool_result_block(f"t{i}", "x " * size)]))
        if i == 2:
            out.append(user_prompt("also check the docs"))
    out.append(assistant([{"type": "text", "text": "done"}]))
    return out


def test_rounds_start_at_each_response_and_the_first_prompt_joins_the_first() -> None:
    history = _history(4)
    groups = summary.rounds(history)
    assert [len(g) for g in groups] == [3, 2, 3, 2, 1]
    assert [m for g in groups for m in g] == history


def test_the_oldest_part_covers_the_gap_and_both_parts_stay_valid() -> None:
    history = _history(6, size=100)
    oldest = summary.rounds(history)[0]
    gap = sum(m.tokens for m in oldest) + 1  # just more than the oldest round holds
    head, rest = summary.oldest_part(history, gap)
    assert head + rest == history
    assert len(summary.rounds(rest)) == len(summary.rounds(history)) - 2
    out = summary.with_part_summary("what happened first", rest)
    assert out[0].kind == "meta" and out[0].text.startswith(summary.PART_INTRO)
    assert tool_pairs_ok(out) and tool_pairs_ok(head)
    assert validate({"model": "m", "max_tokens": 5, "messages": to_api(out)}) == []


def test_without_a_gap_the_oldest_part_is_a_fifth_and_one_round_always_stays() -> None:
    history = _history(9)
    assert len(summary.rounds(history)) == 10
    assert len(summary.rounds(summary.oldest_part(history, None)[1])) == 8
    head, rest = summary.oldest_part(history, 10**9)
    assert [m.text for m in rest] == ["done"] and head == history[:-1]
    assert summary.oldest_part([user_prompt("hi"), assistant([{"type": "text", "text": "yo"}])], 5) is None


# --- the request on the wire ---------------------------------------------------------------------------------


def test_summary_request_shares_the_main_prefix_and_reads_the_cache(tmp_path: Path, api: FakeAPI) -> None:
    bench = make_bench(tmp_path, api)
    conversation(bench, ["a.py", "b.py"])
    bench.add(Message("user", [{"type": "text", "text": "here is a screenshot"}, IMAGE]))
    api.reply_text("I see it.")
    bench.add(main_request(bench))
    bench.add(user_prompt("now summarize please"))
    api.reply_text("Sure.")
    bench.add(main_request(bench))  # primes the cache with everything but the last reply
    api.reply_text(SUMMARY_REPLY)

    result = summary.summarize(bench.conv, bench.ports, bench.view().tagged, ["keep the file names"])

    main, side = api.message_requests[-2].body, api.message_requests[-1].body
    assert side["system"] == main["system"] and side["tools"] == main["tools"]
    assert side["tool_choice"] == {"type": "none"}
    assert side["max_tokens"] == 20_000
    assert '"type": "image"' not in json.dumps(side["messages"])
    assert "[image]" in json.dumps(side["messages"])
    text = last_user_text(side)
    assert text.endswith("Additional instructions:\nkeep the file names")
    assert side["messages"][-1]["role"] == "user"
    assert result.usage["cache_read_input_tokens"] > 0
    assert result.summary.startswith("1. Primary Request") and "private walk" not in result.summary
    assert bench.usage_total["cache_read_input_tokens"] >= result.usage["cache_read_input_tokens"]


def test_prompt_too_long_summarizes_the_oldest_rounds_first_never_drops_them(
    tmp_path: Path, api: FakeAPI
) -> None:
    bench = make_bench(tmp_path, api)
    conversation(bench, [f"f{i}.py" for i in range(10)], test_run=False)  # rounds of one size
    api.prompt_too_long(actual=200_500, maximum=200_000)  # a gap of 500 tokens: two rounds of ~300
    api.reply_text(SUMMARY_REPLY.replace("fix the parser", "the first part: f0 and f1 read"))
    api.reply_text(SUMMARY_REPLY)

    result = summary.summarize(bench.conv, bench.ports, bench.view().tagged)

    whole, part, rest = (r.body for r in api.message_requests)
    assert all(validate(b) == [] for b in (whole, part, rest))
    assert "f0.py" in json.dumps(part["messages"]) and "f9.py" not in json.dumps(part["messages"])
    assert "f0.py" not in json.dumps(rest["messages"][1:]) and "f9.py" in json.dumps(rest["messages"])
    first = rest["messages"][0]["content"][0]["text"]
    assert first.startswith(summary.PART_INTRO) and "the first part: f0 and f1 read" in first
    assert "<analysis>" in last_user_text(part) and "<analysis>" in last_user_text(rest)
    assert result.summary.startswith("1. Primary Request")


def test_prompt_too_long_on_every_part_gives_up_within_three_levels(tmp_path: Path, api: FakeAPI) -> None:
    bench = make_bench(tmp_path, api)
    conversation(bench, [f"f{i}.py" for i in range(10)])
    api.on(lambda body: True, TooLong())
    with pytest.raises(CompactionError):
        summary.summarize(bench.conv, bench.ports, bench.view().tagged)
    # each level summarizes a smaller oldest part, until one round is left or three levels were tried
    sizes = [len(r.body["messages"]) for r in api.message_requests]
    assert 2 <= len(sizes) <= 1 + summary.PTL_RETRIES and sizes == sorted(sizes, reverse=True)


def test_an_instruction_after_a_trailing_user_message_keeps_the_request_valid(
    tmp_path: Path, api: FakeAPI
) -> None:
    bench = make_bench(tmp_path, api)
    conversation(bench, ["a.py"])  # ends with tool results: the instruction joins that user message
    bench.add(meta("a reminder the agent injected"))
    api.add(Reply.text(SUMMARY_REPLY))
    summary.summarize(bench.conv, bench.ports, bench.view().tagged)
    body = api.message_requests[-1].body
    assert validate(body) == []
    assert body["messages"][-1]["content"][0]["type"] == "tool_result"


def test_output_room_overflow_retries_with_a_smaller_max_tokens(tmp_path: Path, api: FakeAPI) -> None:
    bench = make_bench(tmp_path, api)
    conversation(bench, ["a.py"])
    api.error(400, message="input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000")
    api.reply_text(SUMMARY_REPLY)
    result = summary.summarize(bench.conv, bench.ports, bench.view().tagged)
    assert [r.body["max_tokens"] for r in api.message_requests] == [20_000, 9_000]
    assert result.summary.startswith("1. Primary Request")
