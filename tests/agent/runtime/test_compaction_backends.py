"""Compaction that keeps the model's thinking valid (docs/preserved-thinking.md): the rule between compaction points
(compact.stages.binding), the backend per compaction (compact.compaction.backend, compact.compaction.server_summary) and every
failure of the server's summary ending in a local one — against the loopback fake, whose on-demand
compaction (agent.demo.server.Compactions) writes, signs and checks the blocks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from compact.compaction import compactor, economics, summary
from compact.compaction.server_summary import ERROR_CODES, is_compaction
from compact.stages import binding, state
from core.events import CompactFinished
from core.messages import Message, assistant, meta, tool_result_block, tool_results, user_prompt
from tests.fakeapi import FakeAPI, Reply
from tests.helpers.bench import make_bench
from tests.helpers.compaction import INVENTED, SUMMARY_REPLY, of_type, write_file
from tests.helpers.compaction import REFUSING_USER as USER
from tests.helpers.thinking import MODEL, read_step, sent_messages, step, thinking_bench
from tests.helpers.transcripts import records

pytestmark = pytest.mark.fake_api(profile="2026")  # this file is about that profile


# --- the rule between compaction points ---------------------------------------------------------------


def _think(text: str, *calls: str) -> Message:
    uses = [{"type": "tool_use", "id": c, "name": "Read", "input": {"file_path": c}} for c in calls]
    return assistant([{"type": "thinking", "thinking": text, "signature": "s"}, *uses])


def test_an_edit_invalidates_the_edited_message_and_all_later_thinking() -> None:
    prompt, r1 = user_prompt("go"), _think("a", "t1")
    res1 = tool_results([tool_result_block("t1", "body")])
    r2 = _think("b")
    sent = [prompt, r1, res1]
    assert binding.first_edit(sent, [*sent, r2]) is None
    assert binding.invalidated(sent, [*sent, r2]) == []
    cleared = res1.replace(content=[tool_result_block("t1", "[cleared]")])
    assert binding.first_edit(sent, [prompt, r1, cleared, r2]) == 2
    assert binding.invalidated(sent, [prompt, r1, cleared, r2]) == [r2.uuid]
    snipped = [r1.replace(content=r1.content[:1]), res1, r2]  # the prompt gone: everything after moved
    assert binding.invalidated(sent, snipped) == [r1.uuid, r2.uuid]


def test_an_edit_waits_while_a_tool_loop_runs_and_then_drops_what_it_invalidated_once() -> None:
    prompt, r1, r2 = user_prompt("go"), _think("a", "t1"), _think("b", "t2")
    res1, res2 = (tool_results([tool_result_block(t, "body")]) for t in ("t1", "t2"))
    sent = [prompt, r1, res1]
    edited = [prompt, r1, res1.replace(content=[tool_result_block("t1", "[cleared]")]), r2, res2]
    dropped: set[str] = set()

    held = binding.settle(edited, sent, dropped)
    assert held.held and held.messages == [prompt, r1, res1, r2, res2] and dropped == set()

    r3 = assistant([{"type": "thinking", "thinking": "c", "signature": "s"}, {"type": "text", "text": "ok"}])
    later = binding.settle([*edited, r3, user_prompt("next")], held.messages, dropped)
    assert not later.held and later.newly_dropped == [r2.uuid, r3.uuid]
    assert all(not binding.holds_thinking(m) for m in later.messages[3:])
    again = binding.settle(later.messages, later.messages, dropped)
    assert again.newly_dropped == [] and again.messages == later.messages  # counted once, left out since


# --- the server's summary ---------------------------------------------------------------------------------


def test_the_server_summary_replaces_exactly_what_was_sent_and_keeps_the_thinking_after_it(
    tmp_path: Path, api: FakeAPI
) -> None:
    bench = thinking_bench(tmp_path, api)
    bench.add(user_prompt("Read the modules and fix the parser. Never touch secrets/."))
    read_step(bench, api, "a.py")
    last = read_step(bench, api, "b.py")
    summarized = sent_messages(api)

    assert compactor.compact(bench.conv, bench.ports, "auto") is True

    live = bench.messages
    assert is_compaction(live[0]) and live[1] is not None and live[1].uuid == last.uuid
    assert binding.holds_thinking(live[1])  # kept, its thinking valid
    assert [m.role for m in live[3:]] and all(m.role == "system" for m in live[3:])  # after the kept turns
    block = live[0].content[0]
    assert api.compactions.summarized_by(block) == summarized
    assert of_type(bench.events, CompactFinished)[0].method == "server-summary"
    assert bench.conv.view_ctx.thinking.kept_at_compaction == 1

    step(
        bench, Reply.text("Done.", thinking="wrap up"), api
    )  # the fake accepts the block and the kept thinking
    sent = sent_messages(api)
    assert sent[0]["content"][0]["type"] == "compaction"
    assert sent[1]["role"] == "assistant" and sent[1]["content"][0]["type"] == "thinking"
    assert sent[2]["role"] == "user" and all(m["role"] == "system" for m in sent[3:])


def test_a_server_summary_between_turns_keeps_its_attachments_where_the_next_request_accepts_them(
    tmp_path: Path, api: FakeAPI
) -> None:
    # /compact after a turn ended: the kept turn is the model's closing answer, and a system message
    # may only follow a user message (benchmarks/fidelity.py's /compact path was refused every time)
    bench = thinking_bench(tmp_path, api)
    bench.add(user_prompt("Read the modules. Never touch secrets/."))
    read_step(bench, api, "a.py")
    read_step(bench, api, "b.py")
    step(bench, Reply.text("Both read.", thinking="done reading"), api)

    assert compactor.compact(bench.conv, bench.ports, "manual") is True

    assert of_type(bench.events, CompactFinished)[0].method == "server-summary"
    live = bench.messages
    assert is_compaction(live[0]) and live[-1].role != "system"
    bench.add(user_prompt("Now fix the parser."))
    step(bench, Reply.text("Fixed.", thinking="fix"), api)  # accepted: the api fixture checks
    sent = sent_messages(api)
    assert sent[0]["content"][0]["type"] == "compaction" and "Never touch secrets/." in str(sent)
    assert bench.conv.view_ctx.thinking.kept_at_compaction >= 1


@pytest.mark.parametrize("failure", [*ERROR_CODES, None])
def test_every_failure_of_the_server_summary_ends_in_a_local_compaction(
    tmp_path: Path, api: FakeAPI, failure: str | None
) -> None:
    bench = thinking_bench(tmp_path, api)
    bench.add(user_prompt("Read the modules and fix the parser."))
    read_step(bench, api, "a.py")
    read_step(bench, api, "b.py")
    api.compactions.fail(failure)
    api.reply_text(SUMMARY_REPLY)

    assert compactor.compact(bench.conv, bench.ports, "auto") is True

    finished = of_type(bench.events, CompactFinished)[0]
    assert finished.method == "summary" and api.compactions.requested == 1
    assert any("server's summary" in line for line in finished.hook_messages)
    assert not any(is_compaction(m) for m in bench.messages)
    step(bench, Reply.text("Carrying on.", thinking="next"), api)  # valid: nothing invalid was kept


def test_a_server_summary_that_would_leave_more_than_it_replaced_falls_back_to_a_local_one(
    tmp_path: Path, api: FakeAPI
) -> None:
    # short turns whose thinking the history holds as empty text (display "updates"): the server's
    # summary keeps the last answer whole and re-attaches the working state, the user's words whole,
    # after it — more than the turns it replaces. That ended a reactive compaction, and its turn, at the
    # limit (tests/agent/runtime/test_rebuilt.py); the local summary keeps less and goes on
    bench = thinking_bench(tmp_path, api)
    for n in range(3):
        bench.add(user_prompt(f"question {n} " + "more " * 200))
        step(bench, Reply.text(f"answer {n} " + "words " * 600, thinking=f"about {n}"), api)
    before = bench.view().raw_tokens
    api.reply_text(SUMMARY_REPLY)

    assert compactor.compact(bench.conv, bench.ports, "auto", reactive=True) is True

    finished = of_type(bench.events, CompactFinished)[0]
    assert finished.method == "summary" and api.compactions.requested == 1
    assert any("the server's summary would leave more" in line for line in finished.hook_messages)
    assert finished.post_tokens < before and not any(is_compaction(m) for m in bench.messages)
    bench.add(user_prompt("go on"))
    step(bench, Reply.text("Carrying on.", thinking="next"), api)  # valid: nothing invalid was kept


def test_a_local_compaction_with_a_kept_tail_leaves_its_thinking_out_once(
    tmp_path: Path, api: FakeAPI
) -> None:
    bench = thinking_bench(tmp_path, api, server_compaction=False)
    bench.add(user_prompt("Read the modules."))
    for name, lines in (("a.py", 300), ("b.py", 40), ("c.py", 40)):  # a.py: what the summary replaces
        read_step(bench, api, name, lines)
    step(bench, Reply.text("All read.", thinking="done reading"), api)
    bench.add(user_prompt("Now summarize what you found."))
    kept = [m.uuid for m in bench.messages[-4:]]

    made = compactor.Compaction(
        method="summary", summary="1. Primary Request and Intent: read", kept=bench.messages[-4:]
    )
    assert compactor.finish(bench.conv, bench.ports, made, "auto", bench.view().tokens, 0.0) is True

    holding = [u for u in kept if u in bench.conv.state.thinking_dropped]
    assert holding and bench.conv.view_ctx.thinking.dropped_at_compaction == len(holding)
    assert all(not binding.holds_thinking(m) for m in bench.view().messages)
    step(bench, Reply.text("Here is what I found.", thinking="answer"), api)
    assert bench.conv.view_ctx.thinking.dropped_between == 0


def test_the_server_summary_prepared_in_the_background_is_applied_at_t_without_a_request(
    tmp_path: Path, api: FakeAPI
) -> None:
    from compact.workers import preparer

    bench = thinking_bench(tmp_path, api)
    bench.add(user_prompt("Read the modules and fix the parser."))
    read_step(bench, api, "a.py")
    read_step(bench, api, "b.py")
    threshold = bench.conv.window.thresholds().auto_compact
    assert preparer.start_if_due(bench.conv, bench.ports, int(threshold * 0.9)) is False
    p = preparer.preparer(bench.conv)
    assert p is not None and p.kind == "server" and p.thread is not None
    p.thread.join(30)
    assert p.server_ready is not None and api.compactions.served == 1
    summarized = list(p.server_ready.summarized)
    read_step(bench, api, "c.py")  # the conversation went on meanwhile
    after = [
        m.uuid
        for m in bench.messages[
            bench.messages.index(next(m for m in bench.messages if m.uuid == summarized[-1])) + 1 :
        ]
    ]
    requests = len(api.message_requests)

    assert preparer.at_threshold(bench.conv, bench.ports, threshold, compactor.compact) is True

    assert len(api.message_requests) == requests  # nothing asked at T
    live = bench.messages
    assert is_compaction(live[0]) and [m.uuid for m in live[1 : 1 + len(after)]] == after
    assert sum(binding.holds_thinking(m) for m in live) == 2  # both replies since it was asked keep theirs
    assert of_type(bench.events, CompactFinished)[0].candidate == "prepared"
    assert p.stats.applied == 1 and p.stats.wasted == 0
    step(bench, Reply.text("Done.", thinking="wrap up"), api)  # accepted: the kept thinking is valid


def test_a_chain_of_server_summaries_each_standing_for_what_it_replaced(tmp_path: Path, api: FakeAPI) -> None:
    bench = thinking_bench(tmp_path, api)
    bench.add(user_prompt("Read the modules, one at a time."))
    for round_ in range(3):
        read_step(bench, api, f"a{round_}.py")
        read_step(bench, api, f"b{round_}.py")
        assert compactor.compact(bench.conv, bench.ports, "auto") is True
        assert is_compaction(bench.messages[0])
    step(bench, Reply.text("All read.", thinking="done"), api)  # the third block holds the second, and so on
    assert api.compactions.served == 3 and bench.conv.view_ctx.thinking.dropped_at_compaction == 0


def test_after_a_server_summary_the_next_candidate_waits_for_a_request_then_is_the_servers(
    tmp_path: Path, api: FakeAPI
) -> None:
    from compact.workers import preparer

    bench = thinking_bench(tmp_path, api)
    bench.add(user_prompt("Read the modules."))
    read_step(bench, api, "a.py")
    read_step(bench, api, "b.py")
    assert compactor.compact(bench.conv, bench.ports, "auto") is True
    high = int(bench.conv.window.thresholds().auto_compact * 0.9)
    # nothing was sent since the compaction point: a local candidate now would be set aside at T
    assert preparer.start_if_due(bench.conv, bench.ports, high) is False
    p = preparer.preparer(bench.conv)
    assert p is not None and p.kind == "" and p.stats.prepared == 0
    read_step(bench, api, "c.py")
    preparer.start_if_due(bench.conv, bench.ports, high)
    assert p.kind == "server" and p.thread is not None
    p.thread.join(30)
    assert p.server_ready is not None


def test_a_snip_waits_while_the_tool_loop_runs_then_drops_the_thinking_it_invalidates_once(
    tmp_path: Path, api: FakeAPI
) -> None:
    bench = thinking_bench(tmp_path, api)
    first = user_prompt("Look at a.py.")
    bench.add(first)
    read_step(bench, api, "a.py")
    step(bench, Reply.text("a.py is fine.", thinking="fine"), api)
    bench.add(user_prompt("Now b.py and c.py."))
    read_step(bench, api, "b.py")
    bench.conv.state.snipped.add(first.uuid)  # the model snipped the first turn (the Snip tool's decision)
    counts = bench.conv.view_ctx.thinking

    read_step(bench, api, "c.py")  # the loop runs: the snip waits, the first turn is sent again
    assert counts.held >= 1 and "Look at a.py." in str(api.message_requests[-1].body["messages"])
    step(bench, Reply.text("Both read.", thinking="both"), api)
    bench.add(user_prompt("Thanks."))
    step(bench, Reply.text("You're welcome.", thinking="closing"), api)  # the loop ended: the snip applies

    assert "Look at a.py." not in str(api.message_requests[-1].body["messages"])
    assert counts.dropped_between > 0 and counts.dropped_at_compaction == 0
    dropped = set(bench.conv.state.thinking_dropped)
    bench.add(user_prompt("One more thing."))
    step(bench, Reply.text("Still here.", thinking="again"), api)  # nothing dropped twice
    assert bench.conv.state.thinking_dropped == dropped and counts.dropped_between == len(dropped)


def test_a_view_built_between_a_reply_and_its_results_keeps_the_loops_thinking(
    tmp_path: Path, api: FakeAPI
) -> None:
    # a snip waits while the loop runs; a view built after the model's tool call but before its results
    # (to count, or for a compaction to read) is the same loop: it dropped the call's own thinking,
    # stickily, and every later request of the loop was refused (benchmarks/fidelity.py, collapse)
    bench = thinking_bench(tmp_path, api)
    first = user_prompt("Look at a.py.")
    bench.add(first)
    read_step(bench, api, "a.py")
    step(bench, Reply.text("a.py is fine.", thinking="fine"), api)
    bench.add(user_prompt("Now b.py and c.py."))
    read_step(bench, api, "b.py")
    bench.conv.state.snipped.add(first.uuid)
    path = write_file(bench, "c.py", lines=40)
    call = step(bench, Reply.tools([("Read", {"file_path": str(path)}, "toolu_c")], thinking="read c"), api)

    assert binding.in_tool_loop(bench.view().messages)  # the results are not there yet
    assert call.uuid not in bench.conv.state.thinking_dropped
    bench.add(tool_results([tool_result_block("toolu_c", path.read_text())]))
    bench.add(meta("<system-reminder>b.py changed on disk.</system-reminder>"))
    assert binding.in_tool_loop(bench.view().messages)  # a reminder after the results: still the loop
    step(bench, Reply.text("Both read.", thinking="both"), api)  # accepted: the call's thinking came back
    assert bench.conv.view_ctx.thinking.dropped_between == 0


def test_a_span_summary_leaves_out_the_thinking_the_main_requests_left_out(
    tmp_path: Path, api: FakeAPI
) -> None:
    from compact.workers import collapse_worker

    # the span summary is sent over the main conversation's view (to read its cache); built from the
    # view before the binding settled it, it carried thinking the main requests had left out after an
    # edit, bound to a prefix the server never saw: refused, then retried with drop_block
    bench = thinking_bench(tmp_path, api, context_collapse=True, context_window=60_000)
    first = user_prompt("Look at a.py.")
    bench.add(first)
    read_step(bench, api, "a.py")
    step(bench, Reply.text("a.py is fine.", thinking="fine"), api)
    bench.add(user_prompt("Now b.py."))
    read_step(bench, api, "b.py")
    step(bench, Reply.text("b.py is fine.", thinking="fine too"), api)
    bench.conv.state.snipped.add(first.uuid)
    bench.add(user_prompt("And c.py?"))
    step(bench, Reply.text("Not read yet.", thinking="not yet"), api)  # the snip applies: thinking left out
    assert bench.conv.state.thinking_dropped

    live = {m.uuid: m for m in bench.messages}
    raw = [live[m.uuid] for m in bench.view().messages]  # the view as the stages leave it, thinking intact
    c = collapse_worker.collapser(bench.conv)
    assert c is not None
    route = api.on(lambda body: collapse_worker.SHARED_INSTRUCTION[:40] in str(body), Reply.text("SPAN"))
    text = collapse_worker.summarise(bench.ports, raw[:4], view=c._as_sent(raw))

    assert text == "SPAN" and len(route.hits) == 1  # accepted (the api fixture checks): nothing dropped
    sent = [b for m in route.hits[0]["messages"] for b in m["content"] if b.get("type") == "thinking"]
    assert len(sent) == sum(binding.holds_thinking(m) for m in bench.view().messages)
    # a view built between a tool call and its results (to count): the summary goes without the call
    path = write_file(bench, "c.py", lines=20)
    call = step(bench, Reply.tools([("Read", {"file_path": str(path)}, "toolu_c")], thinking="read c"), api)
    raw = [live.get(m.uuid, m) for m in bench.view().messages]
    assert raw[-1].uuid == call.uuid
    collapse_worker.summarise(bench.ports, raw[:4], view=c._as_sent(raw))
    assert len(route.hits) == 2 and "toolu_c" not in str(route.hits[1]["messages"])


def test_thinking_a_collapse_commit_invalidates_is_counted_at_that_compaction_point(
    tmp_path: Path, api: FakeAPI
) -> None:
    # a collapse commit puts a summary the client wrote in front of the turns after it: their thinking
    # is left out once, as at any compaction point, and never counted as an edit between points
    bench = thinking_bench(tmp_path, api, context_collapse=True, context_window=200_000)
    first = user_prompt("Look at a.py.")
    bench.add(first)
    read_step(bench, api, "a.py")
    answer = step(bench, Reply.text("a.py is fine.", thinking="fine"), api)
    bench.add(user_prompt("Now b.py."))
    read_step(bench, api, "b.py")
    step(bench, Reply.text("b.py is fine.", thinking="fine too"), api)
    span = bench.messages[: bench.messages.index(answer) + 1]
    placeholder = "ph-thinking"
    bench.conv.state.collapses.append(
        {
            "collapsedUuids": [m.uuid for m in span],
            "summary": "a.py read, fine",
            "placeholderUuid": placeholder,
        }
    )
    bench.add(user_prompt("And c.py?"))
    step(bench, Reply.text("Not read yet.", thinking="not yet"), api)  # accepted (the api fixture checks)

    counts = bench.conv.view_ctx.thinking
    assert counts.dropped_at_collapse == 2 and counts.dropped_between == 0  # b.py's call and answer
    sent = api.message_requests[-1].body["messages"]
    assert "[Collapsed: " in str(sent[0]) and not any(
        b.get("type") == "thinking" for m in sent[:-1] for b in m["content"] if isinstance(b, dict)
    )
    drops = [r for r in records(bench.transcript_path) if r["type"] == "thinking-drop"]
    assert [r["where"] for r in drops] == ["collapse"]


def test_a_notes_fold_of_a_span_sends_it_without_the_thinking_bound_to_what_came_before(
    tmp_path: Path, api: FakeAPI
) -> None:
    from compact.compaction import notes_updater
    from tests.fakeapi import is_notes_update

    # a compaction folds the span the notes never saw into them with one update that sends just that
    # span behind a lead-in: its thinking was bound to the messages before it, which this request
    # doesn't hold (benchmarks/blind.py --profile 2026, pastes: refused, then drop_block)
    bench = thinking_bench(tmp_path, api, session_memory=True)
    bench.add(user_prompt("Look at a.py."))
    read_step(bench, api, "a.py")
    step(bench, Reply.text("a.py is fine.", thinking="fine"), api)
    start = len(bench.messages)
    bench.add(user_prompt("Now b.py."))
    read_step(bench, api, "b.py")
    step(bench, Reply.text("b.py is fine.", thinking="fine too"), api)
    route = api.on(is_notes_update, Reply.text("Noted."))

    notes_updater.update_span(bench.conv, bench.ports, bench.messages[start:])

    [fold] = route.hits  # accepted: the api fixture checks for refusals and fallbacks
    assert notes_updater.SPAN_LEAD in str(fold["messages"][0]) and "Now b.py." in str(fold["messages"])
    assert not [b for m in fold["messages"] for b in m["content"] if b.get("type") == "thinking"]


def test_a_notes_fold_of_a_span_that_ends_in_a_tool_loop_tells_its_latest_step(
    tmp_path: Path, api: FakeAPI
) -> None:
    from compact.compaction import notes_updater
    from tests.fakeapi import is_notes_update

    # the span's thinking is left out (bound to what came before it), so a span ending in a running tool
    # loop can't be sent as that loop's continuation: "a final assistant message must start with a thinking
    # block" (before); its latest step goes as text
    bench = thinking_bench(tmp_path, api, session_memory=True)
    bench.add(user_prompt("Look at a.py."))
    read_step(bench, api, "a.py")
    step(bench, Reply.text("a.py is fine.", thinking="fine"), api)
    start = len(bench.messages)
    bench.add(user_prompt("Now b.py and c.py."))
    read_step(bench, api, "b.py")
    read_step(bench, api, "c.py")
    route = api.on(is_notes_update, Reply.text("Noted."))

    notes_updater.update_span(bench.conv, bench.ports, bench.messages[start:])

    [fold] = route.hits  # accepted: the api fixture checks for refusals and fallbacks
    assert "tool_result" not in [b.get("type") for b in fold["messages"][-1]["content"]]
    assert "[called Read" in json.dumps(fold["messages"]) and "c.py" in json.dumps(fold["messages"][-2:])


# --- a local summary in a running tool loop -----------------------------------------------------------


def _final_user_blocks(body: dict) -> list[str]:
    return [b.get("type") for b in body["messages"][-1]["content"]]


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", MODEL])
def test_a_local_summary_in_a_running_tool_loop_is_accepted_and_the_loop_goes_on(
    tmp_path: Path, api: FakeAPI, model: str
) -> None:
    # no server summary here (a 4.x model, or a 5.5 one whose offer is not known): the summary request
    # leaves thinking out, and the loop's latest call can't be continued without its thinking, so that
    # step is told as text (before: "a final assistant message must start with a thinking block")
    bench = make_bench(tmp_path, api, model=model)
    bench.add(user_prompt("Read the modules and fix the parser."))
    read_step(bench, api, "a.py")
    read_step(bench, api, "b.py")
    api.reply_text(SUMMARY_REPLY)

    assert compactor.compact(bench.conv, bench.ports, "auto") is True

    side = api.message_requests[-1].body
    assert side["tool_choice"] == {"type": "none"} and "tool_result" not in _final_user_blocks(side)
    told = json.dumps(side["messages"][-2:])
    assert "[called Read" in told and "b.py" in told and "[tool result]" in told
    assert of_type(bench.events, CompactFinished)[0].method == "summary"
    read_step(bench, api, "c.py")  # the loop goes on behind the summary
    step(bench, Reply.text("Fixed.", thinking="done"), api)


def test_a_summary_in_parts_in_a_running_tool_loop_leaves_out_the_thinking_bound_to_the_replaced_part(
    tmp_path: Path, api: FakeAPI
) -> None:
    bench = thinking_bench(tmp_path, api, server_compaction=False)
    bench.add(user_prompt("Read the modules and fix the parser."))
    for name in ("a.py", "b.py", "c.py", "d.py", "e.py"):
        read_step(bench, api, name)
    api.prompt_too_long(actual=200_900, maximum=200_000)  # the whole is too long: the oldest part first
    api.reply_text(SUMMARY_REPLY.replace("fix the parser", "the first part: a.py read"))
    api.reply_text(SUMMARY_REPLY)

    assert compactor.compact(bench.conv, bench.ports, "auto") is True

    whole, part, rest = (r.body for r in api.message_requests[-3:])
    assert rest["messages"][0]["content"][0]["text"].startswith(summary.PART_INTRO)
    assert '"thinking"' not in json.dumps(rest["messages"])  # bound to what the part's summary replaced
    assert "tool_result" not in _final_user_blocks(rest) and "[called Read" in json.dumps(rest["messages"])
    assert '"thinking"' in json.dumps(whole["messages"])  # the whole request kept it valid
    read_step(bench, api, "f.py")
    step(bench, Reply.text("Fixed.", thinking="done"), api)


def test_the_server_summarys_price_is_learned_from_its_usage(tmp_path: Path, api: FakeAPI) -> None:
    """Issue 38: what a server summary cost is read from its response's ``usage.iterations`` (here the fake
    reads the prompt cache over the prefix the last request wrote, as a request over the same messages does)
    and cost-aware compaction plans the next one with it, not with the prior."""
    bench = thinking_bench(tmp_path, api)
    bench.add(user_prompt("Read the modules and fix the parser."))
    for name in ("a.py", "b.py", "c.py"):
        read_step(bench, api, name, lines=400)
    assert bench.conv.state.server_price is None  # nothing seen yet: the prior prices it
    prior = economics.Prices.of(MODEL)

    assert compactor.compact(bench.conv, bench.ports, "auto") is True

    [answer] = [r for r in api.message_requests if "compaction" in r.body]
    [step_usage] = answer.message["usage"]["iterations"]
    seen = bench.conv.state.server_price
    assert seen is not None
    total = sum(
        step_usage[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    assert seen["read"] == pytest.approx(step_usage["cache_read_input_tokens"] / total) and seen["read"] > 0.9
    assert seen["output"] == step_usage["output_tokens"]
    learned = economics.Prices.of(MODEL, seen)
    # a read of the cache, not the prior's margin over it, and its real output
    assert learned.server_in < prior.server_in and learned.server_in < 1.1 * learned.read
    assert economics.call_cost("server", 100_000, learned) < economics.call_cost("server", 100_000, prior)
    # a resumed session prices the next compaction the same way: the price is in the transcript, and the
    # state a resume replays from it holds it
    recorded = [r for r in records(bench.transcript_path) if r["type"] == "server-price"]
    assert [r["price"] for r in recorded] == [seen]
    assert state.replay(recorded, bench.messages).server_price == seen


def test_a_summary_billed_in_its_iterations_is_observed_from_them() -> None:
    """The API's shape: the top-level usage leaves the compaction step out; its ``iterations`` entry says
    what it read uncached, wrote to the cache, read from it and wrote out."""
    usage = {
        "input_tokens": 0,
        "output_tokens": 0,
        "iterations": [
            {
                "type": "compaction",
                "input_tokens": 10_000,
                "cache_creation_input_tokens": 10_000,
                "cache_read_input_tokens": 80_000,
                "output_tokens": 2_000,
            }
        ],
    }
    seen = economics.observe(usage)
    assert seen == {"uncached": 0.1, "written": 0.1, "read": 0.8, "output": 2_000.0}
    prices = economics.Prices.of(MODEL, seen)  # Sonnet 5.5: a cache read is 1/20 of an input token
    assert prices.server_in == pytest.approx(0.1 + 0.1 * 1.25 + 0.8 * 0.05)
    assert prices.server_out == 2_000
    assert economics.observe({"input_tokens": 0, "output_tokens": 0}) is None  # nothing to learn from


def test_a_prepared_server_summary_that_lags_behind_gives_way_to_one_of_the_next_request(
    tmp_path: Path, api: FakeAPI
) -> None:
    """At a user's low threshold (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=15: T = 27K) a server's summary prepared
    early keeps every step sent since: applied at T it left the context as large as it found it
    (24-env-manual --rules 2026: 24.0K -> 24.2K). Clear of the blocking limit it gives way to a summary of
    the next request sent, which is waited for at T and keeps that request's reply alone. (Cost-aware
    compaction off: this is about T; with it on, the arithmetic may apply the candidate below T.)"""
    from compact.workers import preparer

    bench = thinking_bench(tmp_path, api, autocompact_pct=15, cost_aware=False)
    threshold = bench.conv.window.thresholds().auto_compact
    assert threshold == 27_000
    bench.add(user_prompt("Read the modules and fix the parser."))
    read_step(bench, api, "a.py", lines=450)
    read_step(bench, api, "b.py", lines=450)
    preparer.start_if_due(bench.conv, bench.ports, int(threshold * 0.9))
    p = preparer.preparer(bench.conv)
    assert p is not None and p.kind == "server" and p.thread is not None
    p.thread.join(30)
    assert p.server_ready is not None
    p.seconds["server"] = 0.0  # measured quicker than a step
    stale = list(p.server_ready.summarized)
    for n, name in enumerate(("c.py", "d.py"), 1):  # two more steps since it was asked: most of T
        read_step(bench, api, name, lines=450)
        preparer.start_if_due(bench.conv, bench.ports, int(threshold * 0.9) + n * 6_000)  # steps measured
    counted = threshold // 2  # the server clears old results: clear of the blocking limit

    assert (
        preparer.at_threshold(bench.conv, bench.ports, threshold, compactor.compact, counted=counted) is False
    )

    assert of_type(bench.events, CompactFinished) == [] and p.stats.wasted == 1
    last = read_step(bench, api, "e.py", lines=450)  # the next request, and its reply
    preparer.start_if_due(bench.conv, bench.ports, threshold + 6_000)  # after that reply: the new one
    assert p.kind == "server" and p.running or p.server_ready is not None

    assert preparer.at_threshold(
        bench.conv, bench.ports, threshold + 6_000, compactor.compact, counted=counted
    )

    live = bench.messages
    assert is_compaction(live[0]) and live[1].uuid == last.uuid  # the new reply's step alone is kept
    assert not set(stale) & {m.uuid for m in live}
    assert sum(binding.holds_thinking(m) for m in live) == 1
    assert of_type(bench.events, CompactFinished)[0].candidate == "prepared"
    step(bench, Reply.text("Done.", thinking="wrap up"), api)  # accepted: the kept thinking is valid


def _compacted_with_a_prepared_server_summary(bench, api: FakeAPI, took: float):  # type: ignore[no-untyped-def]
    """A server's summary prepared and applied at T, with this pace measured: a step of 2 s adding 6,000
    tokens, and the server's summaries taking ``took`` seconds. The preparer, ready for the next cycle."""
    from compact.workers import preparer

    bench.add(user_prompt("Read the modules and report the findings."))
    read_step(bench, api, "a.py")
    read_step(bench, api, "b.py")
    threshold = bench.conv.window.thresholds().auto_compact
    assert preparer.start_if_due(bench.conv, bench.ports, int(threshold * 0.9)) is False
    p = preparer.preparer(bench.conv)
    assert p is not None and p.kind == "server" and p.thread is not None
    p.thread.join(30)
    assert p.server_ready is not None
    read_step(bench, api, "c.py")
    p.seconds["server"] = took
    p.steps.clear()
    p.steps.extend([(2.0, 6_000)] * 3)
    assert preparer.at_threshold(bench.conv, bench.ports, threshold, compactor.compact) is True
    assert is_compaction(bench.messages[0])
    return p


def test_a_server_summary_that_would_lose_the_race_starts_with_the_compaction_request(
    tmp_path: Path, api: FakeAPI
) -> None:
    """After a compaction whose next candidate is the server's summary, that summary needs a request: it
    started after the compaction request's reply, one step late. When the measured pace says it would
    then be in only after the context passed the limit (33-stall --rules 2026: a 20 s summary, 2 s steps
    of 6.5K at a 100K window, the user waited 2.3-3.5 s), it goes with the compaction request, over
    exactly what that request sends, and is applied later like any prepared one."""
    bench = thinking_bench(tmp_path, api)
    p = _compacted_with_a_prepared_server_summary(bench, api, took=120.0)  # slow: lost started late
    served = api.compactions.served
    compaction_request = read_step(bench, api, "d.py")  # the compaction point's request

    assert p.kind == "server" and p.thread is not None  # started with it, not after its reply
    p.thread.join(30)
    assert p.server_ready is not None and api.compactions.served == served + 1
    [asked] = [r.body for r in api.message_requests if "compaction" in r.body][-1:]
    [main] = [r.body for r in api.message_requests if "compaction" not in r.body][-1:]
    strip = lambda ms: json.dumps(ms, sort_keys=True).replace(', "cache_control": {"type": "ephemeral"}', "")  # noqa: E731
    assert strip(asked["messages"]) == strip(main["messages"])  # exactly what that request sent
    read_step(bench, api, "e.py")
    threshold = bench.conv.window.thresholds().auto_compact
    from compact.workers import preparer

    assert preparer.at_threshold(bench.conv, bench.ports, threshold, compactor.compact) is True
    live = bench.messages
    assert is_compaction(live[0]) and live[1].uuid == compaction_request.uuid  # its reply kept first
    step(bench, Reply.text("Done.", thinking="wrap up"), api)  # accepted: the kept thinking is valid


@pytest.mark.parametrize("took", [1.0, 50.0])
def test_a_server_summary_that_wins_the_race_anyway_waits_for_the_compaction_requests_reply(
    tmp_path: Path, api: FakeAPI, took: float
) -> None:
    """Started with the compaction request, the server's summary reads a prefix not in the prompt cache
    yet (one more write of it): where the measured pace says it is in before the limit anyway, or keeps
    a request waiting no more than RACE_WAIT, it starts after that request's reply, as before. At 50 s
    (2 s steps of 6K, ~28 of them fitting under B) it is expected in ~6 s before the first request that
    would not fit: within the preparation level's 1.3 margin (65 s) of losing, which started it early at
    every cycle of 33-stall (c896582)."""
    bench = thinking_bench(tmp_path, api)
    p = _compacted_with_a_prepared_server_summary(bench, api, took=took)
    served = api.compactions.served
    read_step(bench, api, "d.py")

    assert p.kind == "" and api.compactions.served == served  # nothing asked with it


def test_a_turn_s_first_server_summary_starts_no_lower_than_half_of_t(tmp_path: Path, api: FakeAPI) -> None:
    # below half of T the turn may yet end, and its next prompt compacts from the notes with no call and
    # no kept thinking (30-session-memory, --rules 2026: a summary prepared at 70K of 167K in the first
    # turn compacted it, and no notes were ever written). Fails without the rule: the candidate starts
    # at the arithmetic's point, a long cycle's point far below half of T
    from compact.workers import preparer

    bench = thinking_bench(tmp_path, api)
    bench.add(user_prompt("Read the modules, one at a time."))
    for i in range(24):  # a long cycle: the arithmetic's point is low
        read_step(bench, api, f"m{i}.py")
    t = bench.conv.window.thresholds().auto_compact
    assert economics.point(bench.conv, bench.ports, "server", t) < int(t * 0.45)
    assert not economics.turn_compacted(bench.conv)
    preparer.start_if_due(bench.conv, bench.ports, int(t * 0.45))
    p = preparer.preparer(bench.conv)
    assert p is not None and p.kind == "" and api.compactions.served == 0
    preparer.start_if_due(bench.conv, bench.ports, int(t * 0.55))
    assert p.kind == "server" and p.thread is not None
    p.thread.join(30)
    assert p.server_ready is not None


def test_a_turn_has_compacted_inside_its_loop_or_at_its_prompt(tmp_path: Path, api: FakeAPI) -> None:
    bench = thinking_bench(tmp_path, api)
    bench.add(user_prompt("Read the modules."))
    read_step(bench, api, "a.py")
    read_step(bench, api, "b.py")
    assert not economics.turn_compacted(bench.conv)
    assert compactor.compact(bench.conv, bench.ports, "auto") is True
    assert economics.turn_compacted(bench.conv)  # inside the loop: its later compactions come where they pay
    read_step(bench, api, "c.py")
    step(bench, Reply.text("Read them.", thinking="done"), api)
    bench.add(user_prompt("Now the tests."))
    assert not economics.turn_compacted(bench.conv)  # a new turn: its first compaction waits again


def test_a_server_summary_is_started_one_step_before_the_point_where_it_pays(
    tmp_path: Path, api: FakeAPI
) -> None:
    # it stands for the request just sent and is applied at the next one: started when one more step like
    # the last reaches the point, it lands at the request that would be the first past it, and what it
    # keeps (that request's reply and the results after it) was never sent before. Started at the point,
    # it landed a step later (62-cost --rules 2026 haiku-4-5: 424,111 -> 420,211). Fails without: no start
    from compact.workers import preparer

    bench = thinking_bench(tmp_path, api)
    bench.add(user_prompt("Read the modules, one at a time."))
    read_step(bench, api, "a.py")
    read_step(bench, api, "b.py")
    assert compactor.compact(bench.conv, bench.ports, "auto") is True
    assert economics.turn_compacted(bench.conv)  # later compactions of the turn: where they pay
    for i in range(24):
        read_step(bench, api, f"m{i}.py")
    t = bench.conv.window.thresholds().auto_compact
    point = economics.point(bench.conv, bench.ports, "server", t)
    assert point < t // 2
    preparer.start_if_due(bench.conv, bench.ports, point - 9_000)  # a step measured: 6,000 tokens
    p = preparer.preparer(bench.conv)
    assert p is not None and p.kind == ""
    preparer.start_if_due(bench.conv, bench.ports, point - 3_000)
    assert p.kind == "server" and p.thread is not None
    p.thread.join(30)
    assert p.server_ready is not None


@pytest.mark.fake_profile("2026", reason="the server's summary is the 5.5 family's")
def test_what_the_servers_summary_invents_is_flagged_first_in_the_working_state(
    tmp_path: Path, fake_api: FakeAPI
) -> None:
    api = fake_api
    api.compactions._summary = lambda messages: f"We cleaned up the test suite. {INVENTED}"  # type: ignore[method-assign]
    bench = thinking_bench(tmp_path, api)
    for text in USER:
        bench.add(user_prompt(text))
    read_step(bench, api, "a.py")
    read_step(bench, api, "b.py")
    assert compactor.compact(bench.conv, bench.ports, "auto") is True

    step(bench, Reply.text("Done.", thinking="wrap up"), api)
    sent = sent_messages(api)
    assert sent[0]["content"][0]["type"] == "compaction" and INVENTED in sent[0]["content"][0]["content"]
    text = "\n".join(
        b.get("text", "")
        for m in sent[1:]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "text"
    )
    state = re.search(r"<working-state>\n.*?</working-state>", text, re.S)
    assert state is not None
    flags = state.group(0).split("Working directory:")[0]  # first, before the records
    assert "no message of the user says" in flags and INVENTED in flags
