"""compact.compaction.summary: the instruction, media stripping, reply parsing, round dropping (the side request as
the API receives it is tests/agent/runtime/test_compaction_requests.py's)."""

from __future__ import annotations

import copy

import pytest

from compact.compaction import summary
from compact.stages import refused
from core.errors import CompactionError
from core.messages import (
    Message,
    assistant,
    tool_result_block,
    tool_results,
    user_prompt,
)
from tests.helpers.compaction import bash_rounds

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


def test_rounds_start_at_each_response_and_the_first_prompt_joins_the_first() -> None:
    history = bash_rounds(4)
    groups = summary.rounds(history)
    assert [len(g) for g in groups] == [3, 2, 3, 2, 1]
    assert [m for g in groups for m in g] == history


def test_without_a_gap_the_oldest_part_is_a_fifth_and_one_round_always_stays() -> None:
    history = bash_rounds(9)
    assert len(summary.rounds(history)) == 10
    assert len(summary.rounds(summary.oldest_part(history, None)[1])) == 8
    head, rest = summary.oldest_part(history, 10**9)
    assert [m.text for m in rest] == ["done"] and head == history[:-1]
    assert summary.oldest_part([user_prompt("hi"), assistant([{"type": "text", "text": "yo"}])], 5) is None


# --- the request on the wire ---------------------------------------------------------------------------------
