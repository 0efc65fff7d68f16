"""Compaction's side requests as the API receives them, on the loopback fake API (tests/fakeapi.py): the
summary request (valid, the main prefix shared and read from the cache, prompt-too-long answered by
summarizing the oldest rounds, the output room retried smaller), the notes update's (the prefix shared,
a marker that leaves no call unanswered), a collapse span's (the main requests' cache read), and the
decision checked against the server's count. What compaction does with the replies is tests/compact's,
on the scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compact.compaction import notes_updater, summary
from compact.compaction.notes_template import TEMPLATE
from compact.request_cycle import send
from compact.stages import collapse
from compact.stages.snip import tag_prompts
from compact.workers import collapse_worker
from core.errors import CompactionError
from core.events import CompactFinished
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
from tests.fakeapi import (
    FakeAPI,
    Reply,
    estimate_tokens,
    is_notes_update,
    last_user_text,
    request_text,
    validate,
)
from tests.fakeapi import PromptTooLong as TooLong
from tests.helpers.bench import make_bench
from tests.helpers.collapse import (
    add_turn,
    collapse_bench,
    fill,
    plain,
)
from tests.helpers.compaction import (
    SUMMARY_REPLY,
    bash_rounds,
    conversation,
    main_request,
    of_type,
    transcript_records,
)
from tests.helpers.notes import (
    answer,
    notes_bench,
    read_round,
)
from tests.helpers.wire import collapse_summaries, is_collapse_body

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}


def test_the_oldest_part_covers_the_gap_and_both_parts_stay_valid() -> None:
    history = bash_rounds(6, size=100)
    oldest = summary.rounds(history)[0]
    gap = sum(m.tokens for m in oldest) + 1  # just more than the oldest round holds
    head, rest = summary.oldest_part(history, gap)
    assert head + rest == history
    assert len(summary.rounds(rest)) == len(summary.rounds(history)) - 2
    out = summary.with_part_summary("what happened first", rest)
    assert out[0].kind == "meta" and out[0].text.startswith(summary.PART_INTRO)
    assert tool_pairs_ok(out) and tool_pairs_ok(head)
    assert validate({"model": "m", "max_tokens": 5, "messages": to_api(out)}) == []


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


def _hexy(n: int) -> str:
    """Text our estimate counts at about twice what the fake server does (hash-like lines)."""
    import hashlib

    lines = [f"def f_{i}(x):  # {hashlib.sha1(str(i).encode()).hexdigest()}" for i in range(n)]
    return "\n".join(lines)


def test_a_decision_over_unmeasured_results_is_checked_against_the_server_s_count(
    tmp_path: Path, api: FakeAPI
) -> None:
    """Issue 38: a file our estimate counts at twice the server's (11,462 against 6,460) made a compaction
    due that the server's count was far from. Before deciding to compact over results no usage has
    measured, the agent asks the server to count the request (count_tokens) and decides on that."""
    from compact import request_cycle

    bench = make_bench(tmp_path, api, autocompact_pct=10)  # T = 18,000
    threshold = bench.conv.window.thresholds().auto_compact
    bench.add(user_prompt("Read the two modules."))
    api.add(Reply.tools([("Read", {"file_path": "/p/a.py"}, "r1"), ("Read", {"file_path": "/p/b.py"}, "r2")]))
    view = request_cycle.before_request(bench.conv, bench.ports)
    bench.add(request_cycle.send(bench.conv, bench.ports, view))
    bench.add(tool_results([tool_result_block("r1", _hexy(250)), tool_result_block("r2", _hexy(250))]))
    estimated = bench.conv.view().tokens
    assert estimated >= threshold  # by our estimate, due
    api.add(Reply.text("done"))
    requests = len(api.message_requests)
    view = request_cycle.before_request(bench.conv, bench.ports)
    assert len(api.message_requests) == requests  # no summary request: the server counts it under T
    assert of_type(bench.events, CompactFinished) == []
    assert view.tokens < threshold < estimated
    reply = request_cycle.send(bench.conv, bench.ports, view)
    real = (reply.usage or {}).get("input_tokens", 0) + (reply.usage or {}).get("cache_read_input_tokens", 0)
    real += (reply.usage or {}).get("cache_creation_input_tokens", 0)
    assert abs(view.tokens - real) < 0.1 * real  # what the decision used is what the server counted


def test_span_summaries_read_the_cache_the_main_requests_wrote(tmp_path: Path, api: FakeAPI) -> None:
    bench = collapse_bench(tmp_path, api)
    spans = api.on(is_collapse_body, collapse_summaries())
    api.on(lambda body: not is_collapse_body(body), Reply.text("ok"))
    fill(bench, 14_000)  # under the start level (19,000): no side request yet
    bench.add(user_prompt("Go on."))
    main = send(bench.conv, bench.ports, bench.view())
    bench.add(main)
    assert spans.hits == [] and bench.usage_total.get("cache_read_input_tokens", 0) == 0
    [main_body] = [r.body for r in api.message_requests]
    n = 99
    while bench.view().tokens < collapse.levels(bench.thresholds()).start:  # over it: the worker starts
        add_turn(bench, n)
        n += 1
    view = bench.view()
    assert collapse_worker.collapser(bench.conv).join(10)
    body = spans.hits[0]
    assert body["system"] == main_body["system"] and body["tools"] == main_body["tools"]
    sent = plain(body["messages"])
    assert sent[: len(main_body["messages"]) - 1] == plain(main_body["messages"])[:-1]  # the same prefix
    shown = plain(to_api(tag_prompts(view.messages)))
    assert sent[: len(shown) - 1] == shown[:-1] and len(sent) in (len(shown), len(shown) + 1)
    assert "Turn 0: check module_0.py" in last_user_text(body)  # the span is named, not sent again
    assert (
        "Tool result:" not in last_user_text(body)
        and body["max_tokens"] <= collapse_worker.SUMMARY_MAX_TOKENS
    )
    read = bench.usage_total["cache_read_input_tokens"]
    assert read >= 0.9 * estimate_tokens(main_body)  # the whole main prefix came from the cache


def test_update_request_shares_the_prefix_names_the_notes_and_allows_only_edit(tmp_path, api):
    bench = notes_bench(tmp_path, api)
    api.on(is_notes_update, Reply.text("Nothing new."))
    bench.add(user_prompt("read the sources"))
    read_round(bench, 11_000)
    answer(bench)
    main_view = bench.view().api

    assert notes_updater.update_notes(bench.conv, bench.ports)
    [body] = [r.body for r in api.message_requests if is_notes_update(r.body)]
    last = last_user_text(body)
    path = str(bench.notes_path)
    assert path.endswith("/session-memory/summary.md") and Path(path).is_absolute()
    assert path in last and "Edit" in last and "only" in last.lower()
    assert "one reply" in last and "Current State" in last
    assert "2,000 tokens" in last and "12,000" in last
    assert TEMPLATE.strip() in last  # the current notes are shown
    # same system, tools and conversation as the main request: the cache prefix is shared
    assert body["messages"][:-1] == main_view
    assert [t["name"] for t in body["tools"]] == [t["name"] for t in bench.tool_schemas()]
    assert body["system"][0]["text"] == bench.system_blocks()[0]["text"]
    assert api.violations == []


def test_marker_lands_on_the_last_safe_point_the_update_covered_and_is_recorded(tmp_path, api):
    bench = notes_bench(tmp_path, api)
    api.on(is_notes_update, Reply.text("Nothing new."))
    bench.add(user_prompt("go"))
    read_round(bench, 11_000)
    results = bench.messages[-1]
    # the last message is a tool call waiting for its result: the marker is the results before it (a
    # tool chain writes no text, and the notes must still be usable), and the request stays valid
    bench.add(
        assistant(
            [
                {"type": "text", "text": "One more."},
                {"type": "tool_use", "id": "toolu_open", "name": "Read", "input": {"file_path": "/x"}},
            ],
            stop_reason="tool_use",
        )
    )
    assert notes_updater.update_notes(bench.conv, bench.ports)
    assert bench.state.last_summarized_uuid == results.uuid
    body = [r.body for r in api.message_requests if is_notes_update(r.body)][-1]
    assert "toolu_open" not in json.dumps(body) and "One more." in request_text(body)

    bench.add(tool_results([tool_result_block("toolu_open", "contents")]))
    reply = answer(bench)
    assert notes_updater.update_notes(bench.conv, bench.ports)
    assert bench.state.last_summarized_uuid == reply.uuid
    recs = [r["lastSummarizedUuid"] for r in transcript_records(bench) if r.get("type") == "session-memory"]
    assert recs == [results.uuid, reply.uuid]
    assert api.violations == []
