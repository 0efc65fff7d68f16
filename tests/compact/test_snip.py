from __future__ import annotations

import copy
from pathlib import Path

import pytest

from compact.stages.snip import (
    NUDGE_TEXT,
    SnipError,
    apply_snips,
    nudge_message,
    nudge_needed,
    perform_snip,
    plan_snip,
    snip_id,
    tag_prompts,
    turns,
)
from compact.stages.state import ContextState
from core.messages import (
    Message,
    assistant,
    to_api,
    tool_pairs_ok,
    tool_result_block,
    tool_results,
    user_prompt,
)
from tests.helpers.histories import Builder, image_block, output
from tools.base import ToolContext, ToolError
from tools.snip import SnipTool

UUID = "12345678-9abc-4def-8123-456789abcdef"


def conversation() -> list[Message]:
    """A summary, then three turns: one with a tool round, one with two, the current one."""
    b = Builder(21)
    out = [b.summary("Earlier work, summarised."), b.prompt("first task")]
    out += b.round("Bash", output(4_000))
    out += [
        b.assistant([{"type": "text", "text": "first done"}]),
        b.meta("<system-reminder>x</system-reminder>"),
        b.prompt("second task", image_block()),
    ]
    out += b.round("Grep", "a.py:1: hit") + b.round("Read", output(9_000))
    out += [b.assistant([{"type": "text", "text": "second done"}]), b.prompt("third task")]
    call, _ = b.calls("Snip")
    return out + [call]


def test_snip_id_is_the_base36_of_the_first_ten_hex_digits() -> None:
    # 0x123456789a = 78187493530 = "zx2tc4a" in base 36
    assert snip_id(UUID) == "zx2tc4"
    assert int("zx2tc4a", 36) == 0x123456789A
    assert snip_id("0000000f-ff00-4000-8000-000000000000") == "35r"  # 0x0000000fff = 4095
    assert snip_id("00000000-0000-4000-8000-000000000000") == "0"


def test_tags_go_on_the_last_text_block_of_typed_prompts_only() -> None:
    messages = conversation()
    before = copy.deepcopy(messages)
    tagged = tag_prompts(messages)
    assert messages == before
    prompts = [m for m in messages if m.kind == "prompt"]
    for m, t in zip(messages, tagged, strict=True):
        if m.kind == "prompt":
            assert t.content[0]["text"] == f"{m.content[0]['text']} [id:{snip_id(m.uuid)}]"
            assert t.content[1:] == m.content[1:] and t.uuid == m.uuid
        else:
            assert t is m
    assert len(prompts) == 3
    assert prompts[1].content[1]["type"] == "image"  # the image stays after the tagged text
    assert tag_prompts(tagged) == tagged  # tagging twice changes nothing


def test_a_prompt_without_text_gets_the_tag_as_its_own_block() -> None:
    m = Builder(1).prompt("   ", image_block())
    (t,) = tag_prompts([m])
    assert t.content[-1] == {"type": "text", "text": f"[id:{snip_id(m.uuid)}]"}


def test_the_tag_cache_returns_the_same_objects() -> None:
    messages, cache = conversation(), {}
    first = tag_prompts(messages, cache)
    assert all(a is b for a, b in zip(first, tag_prompts(messages, cache), strict=True))


def test_a_turn_runs_from_its_prompt_to_the_next_prompt() -> None:
    messages = conversation()
    ts = turns(messages)
    assert [len(t) for t in ts] == [5, 6, 2]  # the meta reminder belongs to the first turn
    assert messages[0] not in [m for t in ts for m in t]  # the summary is no turn


def test_plan_removes_whole_turns_and_counts_what_it_frees() -> None:
    messages = conversation()
    first, second, _ = turns(messages)
    plan = plan_snip(messages, [snip_id(second[0].uuid), f"[id:{snip_id(first[0].uuid)}]"], None)
    assert plan.removed_uuids == [m.uuid for m in second + first]
    assert plan.message_count == 11
    assert plan.freed_tokens == sum(m.tokens for m in first + second)
    state = ContextState(snipped=set(plan.removed_uuids))
    left = apply_snips(messages, state)
    assert left == [messages[0], *turns(messages)[2]]
    assert tool_pairs_ok(left) and to_api(left)[0]["role"] == "user"


def test_the_current_turn_cannot_be_snipped() -> None:
    messages = conversation()
    first, _, current = turns(messages)
    with pytest.raises(SnipError, match="current turn"):
        plan_snip(messages, [snip_id(current[0].uuid)], current[0].uuid)
    with pytest.raises(SnipError, match="current turn"):  # the last turn is current even unnamed
        plan_snip(messages, [snip_id(current[0].uuid)], None)
    with pytest.raises(SnipError, match="current turn"):  # the turn holding the named message
        plan_snip(messages, [snip_id(first[0].uuid)], first[2].uuid)


def test_unknown_ids_are_named() -> None:
    messages = conversation()
    first = turns(messages)[0]
    with pytest.raises(SnipError) as err:
        plan_snip(messages, [snip_id(first[0].uuid), "nope99", "zzzzzz"], None)
    assert "nope99, zzzzzz" in str(err.value)
    with pytest.raises(SnipError):
        plan_snip(messages, [], None)


def test_perform_snip_records_applies_and_answers() -> None:
    messages = conversation()
    first = turns(messages)[0]
    records: list[dict] = []
    state = ContextState(tokens_at_last_nudge=1_000)
    answer = perform_snip(
        messages,
        state,
        [snip_id(first[0].uuid)],
        "done with it",
        messages[-1].uuid,
        records.append,
        tokens_now=50_000,
    )
    freed = sum(m.tokens for m in first)
    assert answer == f"Snipped 5 messages, freeing about {freed:,} tokens."
    assert records == [{"type": "snip", "removedUuids": [m.uuid for m in first], "reason": "done with it"}]
    assert state.snipped == {m.uuid for m in first}
    assert state.tokens_at_last_nudge == 50_000 - freed
    with pytest.raises(SnipError, match="Unknown"):  # already gone
        perform_snip(messages, state, [snip_id(first[0].uuid)], None, None, records.append)
    assert len(records) == 1


def test_nudge_after_ten_thousand_tokens_of_growth() -> None:
    state = ContextState(tokens_at_last_nudge=20_000)
    assert not nudge_needed(29_999, state)
    assert nudge_needed(30_000, state)
    m = nudge_message()
    assert m.kind == "meta" and m.text == NUDGE_TEXT
    assert NUDGE_TEXT.startswith("<system-reminder>") and "Snip" in NUDGE_TEXT and "[id:" in NUDGE_TEXT


# --- the tool ---------------------------------------------------------------------------------------


def tool_ctx(tmp_path: Path, **services: object) -> ToolContext:
    return ToolContext(project_dir=tmp_path, session_dir=tmp_path, cwd=tmp_path, services=dict(services))


def test_the_tool_calls_the_service(tmp_path: Path) -> None:
    calls = []

    def service(ids: list[str], reason: str | None) -> str:
        calls.append((ids, reason))
        return "Snipped 4 messages, freeing about 1,200 tokens."

    tool = SnipTool()
    assert (
        tool.name == "Snip"
        and tool.declaration.touches == "nothing"
        and tool.input_schema["required"] == ["ids"]
    )
    result = tool.run({"ids": ["abc123"], "reason": "old"}, tool_ctx(tmp_path, snip=service))
    assert (result.content, result.is_error) == ("Snipped 4 messages, freeing about 1,200 tokens.", False)
    assert calls == [(["abc123"], "old")]


def test_the_tool_reports_errors(tmp_path: Path) -> None:
    def refusing(ids: list[str], reason: str | None) -> str:
        raise SnipError("Unknown turn id(s): abc123.")

    tool = SnipTool()
    with pytest.raises(ToolError, match="not available"):
        tool.run({"ids": ["abc123"]}, tool_ctx(tmp_path))
    with pytest.raises(ToolError, match="abc123"):
        tool.run({"ids": ["abc123"]}, tool_ctx(tmp_path, snip=refusing))
    with pytest.raises(ToolError, match="failed"):
        tool.run({"ids": ["abc123"]}, tool_ctx(tmp_path, snip=lambda i, r: SnipError("it failed")))
    with pytest.raises(ToolError, match="non-empty list"):
        tool.run({"ids": []}, tool_ctx(tmp_path, snip=refusing))


def test_a_snip_takes_effect_on_the_count_before_the_next_response(tmp_path):
    from compact.request_cycle import before_request
    from compact.stages.snip import NUDGE_TEXT, snip_id
    from tests.helpers.bench import make_bench

    bench = make_bench(tmp_path)  # the scripted model: no request is made
    old = user_prompt("Show me the whole log.")
    bench.add(old)
    bench.add(
        assistant(
            [{"type": "text", "text": "log line " * 30_000}],
            usage={"input_tokens": 100, "output_tokens": 60_000},
        )
    )
    prompt = user_prompt("That log is no longer needed; snip it.")
    bench.add(prompt)
    bench.conv.current_prompt_uuid = prompt.uuid
    bench.add(
        assistant(
            [
                {
                    "type": "tool_use",
                    "id": "toolu_snip1",
                    "name": "Snip",
                    "input": {"ids": [snip_id(old.uuid)]},
                }
            ],
            stop_reason="tool_use",
            usage={"input_tokens": 60_200, "output_tokens": 50},
        )
    )
    bench.state.tokens_at_last_nudge = 55_000  # a nudge came at 55K, before the log grew
    before = bench.view().tokens
    assert before > 60_000

    sentence = bench.snip([snip_id(old.uuid)], None)
    bench.add(tool_results([tool_result_block("toolu_snip1", sentence)]))
    after = before_request(bench.conv, bench.ports)

    # the Snip reply's usage measured the log; it no longer counts once the log is gone
    assert after.tokens < 1_000
    # and the snip restarts the nudge's count: no reminder right after it
    assert NUDGE_TEXT not in [m.text for m in bench.messages]
    assert bench.state.tokens_at_last_nudge < 1_000
