"""compact.stages.collapse: the pure span replacement, span selection, and the stage in a live session on the
scripted model (staging, commits at 90%, the wait at 95%, failures, resume); the span summary request as
sent is tests/agent/runtime/test_compaction_requests.py's.

Sessions here use a 60,000-token window cap: E = 40,000 and T = 27,000, so commits start at T (not at 90%
E, 36,000: a view kept above T costs more than a compaction at T), the worker starts 8,000 below, at
19,000, stages spans down to 15,000, and the wait level is the blocking limit, 37,000. Messages carry no usage, so the counts are
plain estimates and the tests can steer them exactly.
"""

from __future__ import annotations

import copy
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compact.context import cache_health
from compact.decision.tokens import count_tokens
from compact.request_cycle import before_request, token_state
from compact.stages import collapse
from compact.stages.collapse import apply_collapses, candidate_spans, placeholder
from compact.stages.refused import told
from compact.stages.snip import turns
from compact.workers import collapse_worker
from core.errors import Interrupted
from core.messages import (
    Message,
    assistant,
    tool_pairs_ok,
    tool_result_block,
    tool_results,
    user_prompt,
)
from core.model import Request
from core.scripted import reply_text
from tests.helpers.bench import make_bench
from tests.helpers.collapse import (
    SESSION_ID,
    add_turn,
    collapse_bench,
    fill,
    is_collapse_request,
    notices,
    placeholders,
    summaries,
    text_of,
)
from tests.helpers.histories import EXAMPLES, Builder, histories
from tests.helpers.scripted import RoutedModel, api_error, no_tools

# --- apply_collapses (pure) ---------------------------------------------------------------------------


def history() -> tuple[list[Message], list[list[Message]]]:
    b = Builder(7)
    ts = []
    for n in range(4):
        t = [
            b.prompt(f"task {n}"),
            *b.round("Read", f"contents {n} " * 50),
            b.assistant([{"type": "text", "text": f"done {n}"}]),
        ]
        ts.append(t)
    return [b.summary("Earlier: set up."), *[m for t in ts for m in t]], ts


def commit(span: list[Message], summary: str = "read two files", ph: str = "ph-1") -> dict:
    return {"collapsedUuids": [m.uuid for m in span], "summary": summary, "placeholderUuid": ph}


def test_a_span_becomes_one_placeholder_where_it_was() -> None:
    messages, ts = history()
    before = copy.deepcopy(messages)
    c = commit(ts[1] + ts[2])
    out = apply_collapses(messages, [c])
    assert messages == before
    assert [m.uuid for m in out] == [m.uuid for m in [messages[0], *ts[0]]] + ["ph-1"] + [
        m.uuid for m in ts[3]
    ]
    [ph] = placeholders(out)
    assert (ph.role, ph.kind, ph.text) == ("user", "meta", "[Collapsed: 8 messages] read two files")
    assert ph.timestamp == ts[1][0].timestamp
    assert tool_pairs_ok(out)
    assert apply_collapses(out, [c]) == out  # idempotent
    assert apply_collapses(messages, [c]) == out  # deterministic: a resume builds the same view


def test_spans_gone_or_broken_are_left_alone() -> None:
    messages, ts = history()
    gone = commit([Message("user", [{"type": "text", "text": "x"}])], ph="ph-gone")
    half = commit(ts[1][:2], ph="ph-half")  # the call without its result: applying it would break the pair
    assert apply_collapses(messages, [gone, half]) == messages
    partly = commit(ts[1], ph="ph-partly")
    snipped = [m for m in messages if m.uuid not in {ts[1][0].uuid}]  # the prompt was snipped since
    out = apply_collapses(snipped, [partly])
    assert [m.uuid for m in out].count("ph-partly") == 1 and not {m.uuid for m in ts[1]} & {
        m.uuid for m in out
    }


def test_several_commits_apply_together_in_order() -> None:
    messages, ts = history()
    out = apply_collapses(messages, [commit(ts[0], "first", "ph-a"), commit(ts[2], "third", "ph-c")])
    assert [m.uuid for m in out] == [
        messages[0].uuid,
        "ph-a",
        *[m.uuid for m in ts[1]],
        "ph-c",
        *[m.uuid for m in ts[3]],
    ]
    assert [m.text for m in placeholders(out)] == [
        "[Collapsed: 4 messages] first",
        "[Collapsed: 4 messages] third",
    ]


# --- span selection -----------------------------------------------------------------------------------


def test_spans_are_old_closed_turns_grouped_up_to_the_size_cap() -> None:
    messages, ts = history()
    spans = candidate_spans(messages, keep_turns=1, max_tokens=10_000)
    assert [[m.uuid for m in s] for s in spans] == [[m.uuid for t in ts[:3] for m in t]]
    one_each = candidate_spans(messages, keep_turns=1, max_tokens=1)
    assert [[m.uuid for m in s] for s in one_each] == [[m.uuid for m in t] for t in ts[:3]]
    assert candidate_spans(messages) == [ts[0]]  # the last 3 turns stay
    assert (
        candidate_spans(messages, keep_turns=0, max_tokens=1)[-1] == ts[2]
    )  # never the last turn, whatever is asked
    assert candidate_spans(messages, keep_turns=1, exclude={ts[1][2].uuid}, max_tokens=10_000) == [
        ts[0],
        ts[2],
    ]


def test_a_turn_left_with_an_open_call_or_a_placeholder_ends_a_span() -> None:
    messages, ts = history()
    b = Builder(8)
    call, _ = b.calls("Bash")  # interrupted: no result ever came
    open_turn = [b.prompt("run it"), call]
    messages = messages[:1] + ts[0] + open_turn + [m for t in ts[1:] for m in t]
    spans = candidate_spans(messages, keep_turns=1, max_tokens=100_000)
    assert spans == [ts[0], ts[1] + ts[2]]
    collapsed = apply_collapses(messages, [commit(ts[1])])
    assert candidate_spans(collapsed, keep_turns=1, max_tokens=100_000) == [ts[0], ts[2]]


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(messages=histories(max_turns=7), keep=st.integers(0, 4), cap=st.sampled_from([1, 2_000, 50_000]))
def test_spans_never_touch_recent_turns_nor_split_a_pair(
    messages: list[Message], keep: int, cap: int
) -> None:
    index = {m.uuid: i for i, m in enumerate(messages)}
    recent = {m.uuid for t in turns(messages)[len(turns(messages)) - max(1, keep) :] for m in t}
    for span in candidate_spans(messages, keep_turns=keep, max_tokens=cap):
        at = [index[m.uuid] for m in span]
        assert at == list(range(at[0], at[0] + len(span)))  # contiguous
        assert span[0].is_typed_prompt and not {m.uuid for m in span} & recent
        assert tool_pairs_ok(apply_collapses(messages, [commit(span)]))
        assert collapse._pairs_closed(span)


def test_the_worker_sees_the_span_as_text_with_long_blocks_cut() -> None:
    messages, ts = history()
    big = (
        ts[0][:2] + [tool_results([tool_result_block(ts[0][1].tool_uses[0]["id"], "x" * 9_000)])] + ts[0][3:]
    )
    text = collapse.render_span(big)
    assert text.splitlines()[:2] == ["User: task 0", 'Assistant called Read: {"arg": "read"}']
    assert "Tool result: " + "x" * collapse.BLOCK_CHARS + " […7,000 more characters]" in text
    assert text.splitlines()[-1] == "Assistant: done 0"


@pytest.mark.parametrize(
    "content",
    [
        "plain text",
        [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
        [{"type": "text", "text": "a chart:"}, {"type": "image", "source": {"type": "base64", "data": "AA"}}],
        [{"type": "document", "source": {"type": "text", "data": "notes"}}],
        [{"type": "tool_reference", "tool_name": "Grep"}],
        [],
    ],
)
def test_a_span_tells_a_result_as_told_does(content: object) -> None:
    """One reading of a result's content (compact.stages.refused.result_text): a collapse span's line for a
    result is what told() says of it, for text, blocks of text, a picture, a document, other blocks."""
    result = tool_results([tool_result_block("t1", content)])  # type: ignore[arg-type]
    told_text = told(result).content[0]["text"]
    assert told_text.startswith("[tool result]\n")
    said = told_text.removeprefix("[tool result]\n")
    assert collapse.render_span([result]) == f"Tool result: {said.strip() or '(empty)'}"


# --- the stage in a live session ----------------------------------------------------------------------


@pytest.fixture
def model() -> RoutedModel:
    """The bench's model: the span summaries and summaries a test routes, its requests read back."""
    return RoutedModel()


def test_usage_measured_before_a_commit_is_lowered_by_what_it_saved(
    tmp_path: Path, model: RoutedModel
) -> None:
    bench = collapse_bench(tmp_path, model)
    model.on(is_collapse_request, summaries())
    ts = fill(bench, 23_000)
    bench.view()
    assert collapse_worker.collapser(bench.conv).join(10)
    bench.add(user_prompt("next"))
    real = (
        count_tokens(bench.messages, bench.conv.calibration) + 6_000
    )  # as the server counts: system and tools too
    bench.add(assistant([{"type": "text", "text": "ok"}], usage={"input_tokens": real, "output_tokens": 0}))
    now = bench.view()  # the usage says 29,000+: commit; the copy handed on counts the saving
    phs = placeholders(now.messages)
    assert phs
    spans = [ts[2 * i] + ts[2 * i + 1] for i in range(len(phs))]  # two turns a span, oldest first
    saved = sum(sum(m.tokens for m in span) - ph.tokens for span, ph in zip(spans, phs))
    assert now.tokens == real - saved
    assert bench.messages[-1].usage == {"input_tokens": real, "output_tokens": 0}  # live list untouched


def test_95_percent_waits_for_the_worker_then_proceeds(tmp_path: Path, model: RoutedModel) -> None:
    bench = collapse_bench(tmp_path, model)
    events = bench.events

    def slow(req: Request) -> Message:
        time.sleep(0.4)
        return reply_text("SLOW SUMMARY of the first turns.")

    model.on(is_collapse_request, slow)
    fill(bench, 37_200)  # past the wait level (the blocking limit, 37,000) with nothing staged
    t0 = time.monotonic()
    now = bench.view()
    assert time.monotonic() - t0 >= 0.4
    assert [m.text.split("] ")[1].split("\n\n")[0] for m in placeholders(now.messages)] == [
        "SLOW SUMMARY of the first turns."
    ]
    assert now.tokens < 36_000
    assert token_state(bench.conv, now.tokens).blocking is False
    assert [n for n in notices(events) if "waiting" in n] == [
        "The context is nearly full: waiting for older turns to be summarised…"
    ]


def test_the_wait_ends_on_ctrl_c_and_after_its_time_limit(tmp_path: Path, model: RoutedModel) -> None:
    bench = collapse_bench(tmp_path, model)
    release = threading.Event()
    model.on(is_collapse_request, lambda req: (release.wait(20), reply_text("late"))[1])
    fill(bench, 37_200)
    c = collapse_worker.collapser(bench.conv)
    try:
        threading.Timer(0.2, bench.cancel.set).start()
        t0 = time.monotonic()
        with pytest.raises(Interrupted):
            bench.view()
        assert time.monotonic() - t0 < 5
        bench.cancel.clear()
        c.wait_seconds = 0.3
        t0 = time.monotonic()
        now = bench.view()  # still busy after the time limit: the request goes out as it is
        assert 0.3 <= time.monotonic() - t0 < 5 and placeholders(now.messages) == []
    finally:
        release.set()
    assert c.join(10)


def test_worker_failures_are_reported_once_and_never_break_the_turn(
    tmp_path: Path, model: RoutedModel
) -> None:
    bench = collapse_bench(tmp_path, model)
    events = bench.events
    route = model.on(is_collapse_request, api_error(400, "model not available here"))
    fill(bench, 30_000)
    c = collapse_worker.collapser(bench.conv)
    for _ in range(5):
        assert placeholders(bench.view().messages) == []
        assert c.join(10)
    assert len(route.hits) == collapse_worker.MAX_FAILURES  # then the worker is no longer started
    [said] = [n for n in notices(events) if "Context collapse" in n]
    assert "model not available here" in said and "Later failures are not reported" in said


def test_a_staged_span_that_changed_is_not_committed(tmp_path: Path, model: RoutedModel) -> None:
    bench = collapse_bench(tmp_path, model)
    model.on(is_collapse_request, summaries())
    ts = fill(bench, 23_000)
    bench.view()
    c = collapse_worker.collapser(bench.conv)
    assert c.join(10)
    bench.state.snipped.add(ts[0][0].uuid)  # the model snipped the first turn meanwhile
    bench.state.snipped.update(m.uuid for m in ts[0][1:])
    fill(bench, 37_200, start=len(ts))
    now = bench.view()
    assert [p.text.split("]")[0] for p in placeholders(now.messages)] == ["[Collapsed: 8 messages"]
    assert bench.state.collapses[0]["collapsedUuids"][0] == ts[2][0].uuid


def test_nothing_is_committed_or_started_while_a_compaction_reads_the_view(
    tmp_path: Path, model: RoutedModel
) -> None:
    bench = collapse_bench(tmp_path, model)
    fill(bench, 37_200)
    bench.conv.compacting = True
    assert placeholders(bench.view().messages) == []
    assert model.requests == [] and collapse_worker.collapser(bench.conv).thread is None


def test_placeholder_counts_its_messages() -> None:
    ph = placeholder({"collapsedUuids": ["a", "b", "c"], "summary": " s ", "placeholderUuid": "p"})
    assert (ph.uuid, ph.text, ph.kind) == ("p", "[Collapsed: 3 messages] s", "meta")


# --- end to end: the CLI ------------------------------------------------------------------------------


# --- what collapse costs --------------------------------------------------------------------------------


@pytest.mark.parametrize("window", [50_000, 60_000, 200_000])
def test_commits_start_at_the_auto_compact_threshold_never_at_the_blocking_limit(
    tmp_path: Path, model: RoutedModel, window: int
) -> None:
    bench = make_bench(
        tmp_path, model_api=model, session_id=SESSION_ID, context_collapse=True, context_window=window
    )
    th = bench.thresholds()
    lv = collapse.levels(th)
    assert lv.commit == min(th.auto_compact, int(th.effective * collapse.COMMIT_AT)) < th.blocking
    assert lv.target < lv.start < lv.commit <= lv.wait <= th.blocking
    if window == 200_000:  # at the reference window the levels are 90%, 70% and 60% of E, as before
        e = th.effective
        assert (
            (lv.commit, lv.start, lv.target)
            == (int(e * 0.9), int(e * 0.7), int(e * 0.6))
            == (162_000, 125_999, 108_000)
        )
    else:  # at 50K, 90% E (27,000) is the blocking limit itself: commits come at T instead
        assert lv.commit == th.auto_compact and lv.start == th.auto_compact - round(th.effective * 0.2)


def test_over_t_with_nothing_to_collapse_it_compacts_at_t_not_at_the_blocking_limit(
    tmp_path: Path, model: RoutedModel
) -> None:
    bench = collapse_bench(tmp_path, model)
    spans = model.on(is_collapse_request, summaries())
    summary = model.on(
        lambda req: no_tools(req) and not is_collapse_request(req),
        "<summary>One long turn of reads.</summary>",
    )
    bench.add(user_prompt("Read everything, in one go."))
    for n in range(12):  # one long turn: no old, closed turn to collapse
        call = f"toolu_long{n:03d}"
        bench.add(
            assistant(
                [{"type": "tool_use", "id": call, "name": "Read", "input": {"file_path": f"m{n}.py"}}],
                stop_reason="tool_use",
            )
        )
        bench.add(tool_results([tool_result_block(call, text_of(2_400, n))]))
        if count_tokens(bench.messages, bench.conv.calibration) >= 28_000:
            break
    th = bench.thresholds()
    tokens = bench.view().tokens
    assert th.auto_compact <= tokens < th.blocking
    assert not collapse_worker.collapser(bench.conv).can_help(bench.view().messages)
    before_request(bench.conv, bench.ports)
    assert len(summary.hits) == 1 and spans.hits == []
    assert bench.messages[0].kind == "summary" and bench.view().tokens < th.auto_compact
    before_request(bench.conv, bench.ports)  # nothing new since: no second compaction
    assert len(summary.hits) == 1


def test_over_t_with_old_turns_to_collapse_it_does_not_compact(tmp_path: Path, model: RoutedModel) -> None:
    bench = collapse_bench(tmp_path, model)
    model.on(is_collapse_request, summaries())
    fill(bench, 26_000)
    view = bench.view()
    assert collapse_worker.collapser(bench.conv).can_help(view.messages)
    collapse_worker.collapser(bench.conv).join(10)
    bench.add(user_prompt("more"))
    add_turn(bench, 50)
    before_request(bench.conv, bench.ports)
    assert not [m for m in bench.messages if m.kind == "summary"] and placeholders(bench.view().messages)


def test_the_request_that_sends_a_collapse_commit_is_a_compaction_point_for_cache_health(
    tmp_path: Path, model: RoutedModel
) -> None:
    """A commit rewrites the history in front of later turns: the prompt-cache miss of the request that
    first sends it is expected (compact.context.cache_health), and only that request's."""
    bench = collapse_bench(tmp_path, model)
    model.on(is_collapse_request, summaries())
    ts = fill(bench, 23_000)
    bench.view()  # over the start level: the worker stages spans
    assert collapse_worker.collapser(bench.conv).join(10)
    ctx = bench.conv.view_ctx
    assert ctx is not None
    ctx.sent = list(bench.view().messages)  # what the last request sent: no commit yet
    assert not ctx.at_collapse
    fill(bench, 27_500, start=len(ts))
    now = bench.view()
    assert placeholders(now.messages) and ctx.at_collapse
    req = Request(model=bench.model, system=[], tools=[], messages=[], max_tokens=10)
    assert cache_health.chain(bench.conv, req) is True  # this request's miss is the commit's
    ctx.sent = list(now.messages)
    bench.view()
    assert cache_health.chain(bench.conv, req) is False  # the next one extends it: a miss would be a bug
