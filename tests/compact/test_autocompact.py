"""compact.autocompact: when automatic compaction runs, the circuit breaker, and the no-new-content guard."""

from __future__ import annotations

from pathlib import Path

import pytest

from compact import autocompact
from compact.compaction import guard
from core.events import CompactFailed, CompactFinished, Notice
from core.messages import Message, assistant, user_prompt
from core.scripted import ScriptedModel, reply_text
from tests.helpers.bench import make_bench
from tests.helpers.compaction import SUMMARY_REPLY, conversation, of_type

T = 167_000  # a 200K window's threshold


@pytest.fixture
def model() -> ScriptedModel:
    """The bench's model: the summaries a test scripts, its requests read back (no wire: the summary
    request's JSON is test_summary's and test_backends' subject)."""
    return ScriptedModel()


@pytest.mark.parametrize(
    "tokens, kw, expected",
    [
        (T - 1, {}, False),
        (T, {}, True),
        (T + 5_000, {"enabled": False}, False),
        (T, {"failures": 2}, True),
        (T, {"failures": 3}, False),
        (T, {"new_content": False}, False),
    ],
)
def test_should_compact(tokens: int, kw: dict, expected: bool) -> None:
    assert autocompact.should_compact(tokens, T, **kw) is expected


def test_below_the_threshold_nothing_happens(tmp_path: Path, model: ScriptedModel) -> None:
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events
    conversation(bench, ["a.py"])
    assert bench.thresholds().auto_compact == T
    assert autocompact.maybe_autocompact(bench.conv, bench.ports, T - 1) is False
    assert model.requests == [] and events[-1].__class__.__name__ == "MessageRecorded"


def test_over_the_threshold_compacts(tmp_path: Path, model: ScriptedModel) -> None:
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events
    conversation(bench, ["a.py"])
    model.steps.append(reply_text(SUMMARY_REPLY))
    assert autocompact.maybe_autocompact(bench.conv, bench.ports, T) is True
    assert of_type(events, CompactFinished)[0].trigger == "auto"


@pytest.mark.parametrize("settings", [{"auto_compact": False}, {"disable_compact": True}])
def test_switched_off(tmp_path: Path, model: ScriptedModel, settings: dict) -> None:
    bench = make_bench(tmp_path, model_api=model, **settings)
    conversation(bench, ["a.py"])
    assert autocompact.maybe_autocompact(bench.conv, bench.ports, 199_000) is False
    assert model.requests == []


def test_under_context_collapse_it_compacts_only_where_collapse_cannot_help(
    tmp_path: Path, model: ScriptedModel
) -> None:
    """The one policy (autocompact.due) also covers context collapse: below T nothing; at the blocking
    limit a compaction even though auto-compact is off."""
    bench = make_bench(tmp_path, model_api=model, context_collapse=True)
    events = bench.events
    conversation(bench, ["a.py"])
    assert autocompact.maybe_autocompact(bench.conv, bench.ports, T - 1, bench.view().messages) is False
    assert model.requests == []
    model.steps.append(reply_text(SUMMARY_REPLY))
    assert autocompact.maybe_autocompact(bench.conv, bench.ports, 199_000, bench.view().messages) is True
    assert of_type(events, CompactFinished)[0].trigger == "auto"


# a reply with an analysis and no summary fails (an empty one that ended normally is a poor summary)
def no_summary() -> Message:
    return reply_text("<analysis>ran out before the summary</analysis>")


def test_circuit_breaker_stops_after_three_failures_and_says_so_once(
    tmp_path: Path, model: ScriptedModel
) -> None:
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events
    conversation(bench, ["a.py"])
    model.steps.extend(no_summary() for _ in range(6))  # no summary in any reply
    for i in range(6):
        bench.add(user_prompt(f"turn {i}"))
        bench.add(assistant([{"type": "text", "text": "ok"}]))
        assert autocompact.maybe_autocompact(bench.conv, bench.ports, T + 1_000) is False
    assert len(model.requests) == 3
    assert len(of_type(events, CompactFailed)) == 3
    breaker = [e for e in of_type(events, Notice) if "Auto-compact failed 3 times" in e.text]
    assert len(breaker) == 1 and breaker[0].level == "warning"


def test_a_success_resets_the_count(tmp_path: Path, model: ScriptedModel) -> None:
    bench = make_bench(tmp_path, model_api=model)
    conversation(bench, ["a.py"])
    model.steps.append(no_summary())
    model.steps.append(no_summary())
    model.steps.append(reply_text(SUMMARY_REPLY))
    for _ in range(3):
        bench.add(user_prompt("more"))
        autocompact.maybe_autocompact(bench.conv, bench.ports, T)
    assert bench.conv.breaker.failures == 0
    assert bench.messages[0].kind == "summary"


def test_never_twice_in_a_row_for_the_same_content(tmp_path: Path, model: ScriptedModel) -> None:
    bench = make_bench(tmp_path, model_api=model, autocompact_pct=1)
    events = bench.events  # anything is over T = 1,800
    conversation(bench, ["a.py"])
    model.steps.append(reply_text("<summary>" + "every detail kept " * 600 + "</summary>"))
    assert autocompact.maybe_autocompact(bench.conv, bench.ports, 5_000) is True
    assert of_type(events, CompactFailed)[-1].reason == guard.STILL_OVER
    assert (
        autocompact.maybe_autocompact(bench.conv, bench.ports, 5_000) is False
    )  # nothing new since: not again
    assert len(model.requests) == 1
    bench.add(user_prompt("next"))
    model.steps.append(reply_text(SUMMARY_REPLY))
    assert autocompact.maybe_autocompact(bench.conv, bench.ports, 5_000) is True


def test_when_the_server_clears_only_what_a_compaction_freed_counts(
    tmp_path: Path, model: ScriptedModel
) -> None:
    """A tail kept over T (or near the warning level) that the server clears old results from is no failed
    compaction (compact.context.context_editing); one that freed too little still is."""
    bench = make_bench(tmp_path, model_api=model)
    threshold = bench.conv.window.thresholds().auto_compact
    pre, post = threshold * 2, threshold + 1_000  # over T as kept, 45% freed
    guard.check(bench.conv, bench.ports, "auto", "auto", pre, post)
    assert (
        bench.conv.breaker.failures == 1
        and of_type(bench.events, CompactFailed)[-1].reason == guard.STILL_OVER
    )
    failed = len(of_type(bench.events, CompactFailed))
    guard.check(bench.conv, bench.ports, "auto", "auto", pre, post, clears=True)
    assert bench.conv.breaker.failures == 0 and len(of_type(bench.events, CompactFailed)) == failed
    guard.check(bench.conv, bench.ports, "auto", "auto", pre, int(pre * 0.9), clears=True)  # 10% freed
    assert bench.conv.breaker.failures == 1
