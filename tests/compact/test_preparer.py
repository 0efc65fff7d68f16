"""compact.workers.preparer on the scripted model: a summary prepared in the background from the
preparation level, applied at T without a request (only what it covers goes, the rest stays verbatim),
applied only to what it saw when messages changed meanwhile, refused with its reason, and put off while
it is still being prepared and the context is clear of the blocking limit."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from compact.compaction import compactor, notes_updater
from compact.compaction.candidate import SUMMARY_SECTIONS
from compact.compaction.notes_template import SECTIONS
from compact.workers import preparer
from core.events import CompactFinished
from core.messages import Message, user_prompt
from core.model import Request
from core.scripted import reply_text, reply_tool
from tests.helpers.bench import Bench, make_bench
from tests.helpers.compaction import of_type, read_round, write_file
from tests.helpers.scripted import RoutedModel, is_notes_update, no_tools, read_paths

T = 167_000
GOOD = "<analysis>walked through it</analysis>\n<summary>" + "\n".join(
    f"{i}. {name}: the parser work, part {i}." for i, name in enumerate(SUMMARY_SECTIONS, 1)
)
GOOD += "</summary>"


@pytest.fixture
def model() -> RoutedModel:
    """The bench's model: the candidates' summaries and notes updates a test routes, its requests read back."""
    return RoutedModel()


def grow(bench: Bench, names: list[str], lines: int = 600) -> None:
    for name in names:
        read_round(bench, write_file(bench, name, lines=lines))


def ready(bench: Bench) -> preparer.Preparer:
    p = preparer.preparer(bench.conv)
    assert p is not None
    deadline = time.monotonic() + 30
    while p.thread is not None and p.running and time.monotonic() < deadline:
        p.thread.join(0.05)
    assert not p.running
    return p


def start(tmp_path: Path, model: RoutedModel, reply: str = GOOD) -> tuple[Bench, list]:
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events  # session notes off: the candidate is a summary
    bench.add(user_prompt("Please fix the parser. Never touch the secrets/ directory."))
    grow(bench, ["a.py", "b.py", "c.py", "d.py"])
    model.on(no_tools, reply)
    assert preparer.start_if_due(bench.conv, bench.ports, int(T * 0.86)) is False
    return bench, events


def test_prepared_at_the_level_applied_at_t_without_waiting(tmp_path: Path, model: RoutedModel) -> None:
    bench, events = start(tmp_path, model)
    p = ready(bench)
    assert p.ready is not None and model.requests  # the summary was asked for before T
    seen = {u for u, _ in p.ready.seen}
    grow(bench, ["e.py", "f.py"])  # the conversation went on meanwhile
    newer = [m for m in bench.messages if m.uuid not in seen]
    requests = len(model.requests)
    assert preparer.at_threshold(bench.conv, bench.ports, T, compactor.compact) is True
    assert len(model.requests) == requests  # no request at T: nothing to wait for
    [done] = of_type(events, CompactFinished)
    assert (
        done.candidate == "prepared"
    )  # applied as prepared (its speed: benchmarks/stall.py, not a timer here)
    # what it did not see stays, verbatim and in order; the first messages it covered are gone
    live = bench.messages
    kept_uuids = [m.uuid for m in live]
    assert all(m.uuid in kept_uuids for m in newer)
    assert [m.content for m in live if m.uuid in {n.uuid for n in newer}] == [m.content for m in newer]
    assert live[0].kind == "summary" and "part 8" in live[0].text
    assert p.stats.applied == 1 and p.stats.prepared == 1


def test_messages_changed_meanwhile_are_kept_and_only_what_it_saw_goes(
    tmp_path: Path, model: RoutedModel
) -> None:
    bench, events = start(tmp_path, model)
    p = ready(bench)
    assert p.ready is not None
    # microcompact cleared the result of the third read meanwhile: text the candidate never saw
    results = [m for m in bench.messages if m.tool_results]
    changed = results[2]
    bench.conv.state.cleared.add(changed.tool_results[0]["tool_use_id"])
    grow(bench, ["e.py"])
    assert preparer.at_threshold(bench.conv, bench.ports, T, compactor.compact) is True
    kept = {m.uuid for m in bench.messages}
    assert changed.uuid in kept  # never replaced by a summary that saw another text
    assert results[0].uuid not in kept  # what it saw unchanged before it went


def test_a_refused_candidate_is_recorded_and_the_foreground_path_taken(
    tmp_path: Path, model: RoutedModel
) -> None:
    cut = GOOD.replace("8. Current Work", "8. Lately")
    bench, events = start(tmp_path, model, reply=cut)
    ready(bench)
    assert preparer.at_threshold(bench.conv, bench.ports, T, compactor.compact) is True
    [done] = of_type(events, CompactFinished)
    assert done.candidate == "prepared candidate refused: missing sections: Current Work"
    assert bench.conv.last_compaction and "Current Work" in bench.conv.last_compaction.candidate
    p = preparer.preparer(bench.conv)
    assert p is not None and p.stats.rejected == 1


def test_put_off_while_in_flight_and_clear_of_the_blocking_limit(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events
    bench.add(user_prompt("Please fix the parser."))
    grow(bench, ["a.py", "b.py", "c.py", "d.py", "e.py", "f.py"])
    release = threading.Event()

    def slow(req: object) -> Message:
        release.wait(30)  # the model takes its time
        return reply_text(GOOD)

    model.on(no_tools, slow)
    preparer.start_if_due(bench.conv, bench.ports, int(T * 0.86))
    assert preparer.at_threshold(bench.conv, bench.ports, T, compactor.compact) is False  # carry on
    assert of_type(events, CompactFinished) == []
    release.set()
    # at the blocking limit (177K), where this request would not fit, the user waits for it: told so,
    # then it is applied (below it the request goes, and the first that would not fit waits)
    assert preparer.at_threshold(bench.conv, bench.ports, 177_000, compactor.compact) is True
    [done] = of_type(events, CompactFinished)
    assert done.candidate == "prepared"
    assert any(
        "Waiting for the compaction prepared in the background" in getattr(e, "text", "") for e in events
    )


def test_context_shows_whether_a_candidate_is_ready(tmp_path: Path, model: RoutedModel) -> None:
    bench, _ = start(tmp_path, model)
    ready(bench)
    line = preparer.describe(bench.conv, bench.ports)
    assert line.startswith("Prepared compaction: a summary, ready · covers ") and "tokens" in line


def test_a_compaction_that_leaves_the_context_at_the_next_level_starts_the_next_candidate_at_once(
    tmp_path: Path, model: RoutedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench, _ = start(tmp_path, model)
    p = ready(bench)
    p.seconds["summary"] = 1e6  # a summary far slower than the growth: P at its floor
    p.steps.append((1.0, 10_000))
    monkeypatch.setattr(preparer, "MIN_SHARE", 0.0)  # and the floor below what the compaction leaves
    grow(bench, ["e.py", "f.py"])
    requests = len(model.requests)
    assert preparer.at_threshold(bench.conv, bench.ports, T, compactor.compact) is True
    assert p.kind == "summary" and p.cycle == preparer._cycle(bench.conv)  # the next cycle's, at once
    ready(bench)
    assert len(model.requests) == requests + 1 and p.ready is not None
    assert p.stats.prepared == 2 and p.stats.applied == 1


def test_below_the_next_level_the_next_candidate_waits_for_a_response(
    tmp_path: Path, model: RoutedModel
) -> None:
    bench, _ = start(tmp_path, model)
    p = ready(bench)
    grow(bench, ["e.py", "f.py"])
    requests = len(model.requests)
    assert preparer.at_threshold(bench.conv, bench.ports, T, compactor.compact) is True
    assert p.kind == "" and not p.running and len(model.requests) == requests


def test_one_slow_step_at_start_up_does_not_move_the_preparation_level(
    tmp_path: Path, model: RoutedModel
) -> None:
    """The first step of a process waits for the SDK's import (the first request goes without it): 3 s,
    where the rest take 0.1 s. Smoothing the growth rate and the step's time apart multiplied the slow
    step's time by the fast steps' rate and put P at its floor (30% of T): a candidate at 43K of 167K in
    30-session-memory --rules 2026. Medians of the steps leave P where the steady steps put it."""
    bench = make_bench(tmp_path, model_api=model, cost_aware=False)
    now = [0.0]
    p = bench.conv.workers[preparer.WORKER] = preparer.Preparer(clock=lambda: now[0])
    bench.add(user_prompt("Please read every module."))
    step, tokens = 6_500, 4_500
    for gap in (3.0, 0.1, 0.1, 0.1, 0.1, 0.1):
        preparer.start_if_due(bench.conv, bench.ports, tokens)
        now[0] += gap
        tokens += step
    th = bench.conv.window.thresholds()
    level = preparer.level(p, th.auto_compact, preparer._limit(bench.conv), "summary")
    # B (at most T + 10K) less a step less PRIOR_STEPS steps with LEAD: what steady steps give
    assert level == int(min(th.blocking, th.auto_compact + 10_000) - step - 10 * step * 1.3)
    assert preparer.start_if_due(bench.conv, bench.ports, tokens) is False and p.kind == ""  # 43,500: not yet
    assert model.requests == []


def test_lagging_notes_are_brought_up_to_date_once_a_cycle_then_serve_as_they_stand(
    tmp_path: Path, model: RoutedModel
) -> None:
    """A tool chain that grows faster than a notes update can follow: each update is behind again by the
    time it is in. At T the notes are brought up to date once; lagging again, they serve as they stand
    (only what they saw goes, the rest stays whole) instead of another update chased while the history
    grew to RAW_ROOM windows, where the user waited for the last one (33-stall: 6 s)."""
    bench = make_bench(
        tmp_path, model_api=model, session_memory=True, session_id="sid", context_window=60_000
    )
    updates: list[Request] = []
    second = threading.Event()  # the second update is held until the test saw it under way

    def notes(req: Request) -> Message:
        updates.append(req)
        if len(updates) == 2:
            second.wait(30)
        old = "_" + dict(SECTIONS)["Current State"] + "_"
        new = f"{old}\nRead {len(read_paths(req))} files so far."
        edit = {"file_path": str(bench.notes_path), "old_string": old, "new_string": new}
        return reply_tool("Edit", edit)

    model.on(is_notes_update, notes)
    bench.add(user_prompt("Read every module and report the findings."))
    names = iter(f"m{i:02d}.py" for i in range(60))
    threshold = bench.conv.window.thresholds().auto_compact

    def until_lagging() -> None:
        while True:
            grow(bench, [next(names)], lines=60)
            made = preparer._usable(bench.conv, bench.ports, p)
            if made is not None and preparer._lagging(bench.conv, bench.ports, made):
                return

    def update_done() -> None:
        deadline = time.monotonic() + 30
        while not p.notes_done and time.monotonic() < deadline:
            time.sleep(0.02)
        assert p.notes_done and not p.failed

    grow(bench, [next(names) for _ in range(6)], lines=60)
    assert preparer.start_if_due(bench.conv, bench.ports, int(threshold * 0.86)) is True  # a notes update
    p = preparer.preparer(bench.conv)
    assert p is not None
    update_done()
    until_lagging()
    tokens = bench.view().tokens
    assert preparer.at_threshold(bench.conv, bench.ports, max(tokens, threshold), compactor.compact) is False
    assert not p.notes_done  # brought up to date, in the background
    second.set()
    update_done()
    assert len(updates) == 2
    until_lagging()  # behind again by the time it is in
    covered = bench.conv.state.last_summarized_uuid
    live = bench.messages
    unseen = [m.uuid for m in live[[m.uuid for m in live].index(covered) + 1 :]]
    assert unseen
    tokens = bench.view().tokens
    assert preparer.at_threshold(bench.conv, bench.ports, max(tokens, threshold), compactor.compact) is True
    assert p.notes_done or p.kind != "notes"  # not chased again
    assert notes_updater.wait_for_update(bench.conv, 30) and len(updates) == 2
    [done] = of_type(bench.events, CompactFinished)
    assert done.method == "session-memory" and done.candidate == "prepared"
    assert set(unseen) <= {m.uuid for m in bench.messages}  # what the notes never saw stays whole


def test_an_update_of_a_notes_candidate_is_timed_from_its_own_start(
    tmp_path: Path, model: RoutedModel
) -> None:
    """A notes candidate started as a compaction left the context (``_start_next``) covers only that
    much, so it is updated again later in the cycle. That update's time is its own: timed from the
    candidate's start it was the whole cycle's (~3x in 33-stall), which put the notes' level at its
    floor and the last update too late (the user waited 1-2 s at each compaction for it)."""
    bench = make_bench(tmp_path, model_api=model, session_memory=True, session_id="sid")
    updates: list[Request] = []
    second = threading.Event()  # the second update is held until the test saw it under way

    def notes(req: Request) -> Message:
        updates.append(req)
        if len(updates) == 2:
            second.wait(30)
        old = "_" + dict(SECTIONS)["Current State"] + "_"
        new = f"{old}\nRead {len(read_paths(req))} files so far."
        edit = {"file_path": str(bench.notes_path), "old_string": old, "new_string": new}
        return reply_tool("Edit", edit)

    model.on(is_notes_update, notes)
    bench.add(user_prompt("Read every module and report the findings."))
    grow(bench, ["a.py", "b.py"])
    p = preparer._preparer(bench.conv)
    now = [1000.0]
    p.clock = lambda: now[0]
    assert preparer._start(bench.conv, bench.ports, p, int(T * 0.3)) is True  # as a compaction left it
    assert notes_updater.wait_for_update(bench.conv, 30) and p.notes_done
    now[0] += 100.0  # the context grows for a while
    grow(bench, ["c.py", "d.py"])
    assert preparer.start_if_due(bench.conv, bench.ports, int(T * 0.85)) is True
    assert not p.notes_done  # updated again
    second.set()
    assert notes_updater.wait_for_update(bench.conv, 30) and p.notes_done
    assert len(updates) == 2 and p.seconds["notes"] == 0.0  # the fake clock stood still during it


def summary_in_flight(tmp_path: Path, model: RoutedModel) -> tuple[Bench, threading.Event, list[float], int]:
    """A summary candidate in flight near B that answers when ``release`` is set, on a clock the test moves
    (``now[0]``): its earlier one took 20 s, a step takes 2 s and adds 6K tokens; and B."""
    bench = make_bench(tmp_path, model_api=model)
    bench.add(user_prompt("Please fix the parser."))
    grow(bench, ["a.py", "b.py", "c.py", "d.py", "e.py", "f.py"])
    release = threading.Event()

    def slow(req: object) -> Message:
        release.wait(20)
        return reply_text(GOOD)

    model.on(no_tools, slow)
    p = preparer._preparer(bench.conv)
    now = [1000.0]
    p.clock = lambda: now[0]
    preparer.start_if_due(bench.conv, bench.ports, int(T * 0.86))
    assert p.running and p.kind == "summary"
    p.seconds["summary"] = 20.0  # measured on an earlier one
    p.steps.extend([(2.0, 6_000)] * 3)  # a step: 2 s, 6K tokens
    p.step = 6_000
    return bench, release, now, preparer._limit(bench.conv)


def test_a_candidate_due_before_the_next_step_is_not_waited_for_while_this_request_fits(
    tmp_path: Path, model: RoutedModel
) -> None:
    """Near B, a candidate in flight that is due (by its measured time) before the next request is not
    waited for while this request still fits under B: the next one finds it ready (33-stall --rules 2026:
    a 20 s summary lost the race by 2 s and the user waited). Once a request would pass B it waits."""
    bench, release, now, limit = summary_in_flight(tmp_path, model)
    events = bench.events
    now[0] += 18.5  # due in 1.5 s, within a step
    started = time.monotonic()
    assert preparer.at_threshold(bench.conv, bench.ports, limit - 2_000, compactor.compact) is False
    assert time.monotonic() - started < 10 and of_type(events, CompactFinished) == []  # not waited for
    assert not any("Waiting for the compaction" in getattr(e, "text", "") for e in events)
    release.set()
    now[0] += 2.0
    assert preparer.at_threshold(bench.conv, bench.ports, limit + 4_000, compactor.compact) is True
    [done] = of_type(events, CompactFinished)
    assert done.candidate == "prepared"


def test_a_candidate_far_from_due_is_waited_for_only_by_the_request_that_would_not_fit(
    tmp_path: Path, model: RoutedModel
) -> None:
    """Near B, a candidate in flight is not waited for while this request still fits under B, however long
    it is still expected to take: the first request that would pass B waits for it, a step's time less
    than this one would have (33-stall --rules 2026: 2.7 s waited at the last request that fitted, where
    the next one would have waited 0.6 s)."""
    bench, release, now, limit = summary_in_flight(tmp_path, model)
    events = bench.events
    now[0] += 5.0  # due in 15 s: several steps away
    started = time.monotonic()
    assert preparer.at_threshold(bench.conv, bench.ports, limit - 2_000, compactor.compact) is False
    assert time.monotonic() - started < 10 and of_type(events, CompactFinished) == []  # not waited for
    assert not any("Waiting for the compaction" in getattr(e, "text", "") for e in events)
    threading.Timer(0.5, release.set).start()
    now[0] += 2.0
    assert preparer.at_threshold(bench.conv, bench.ports, limit + 4_000, compactor.compact) is True
    assert any("Waiting for the compaction" in getattr(e, "text", "") for e in events)  # this one waited
    [done] = of_type(events, CompactFinished)
    assert done.candidate == "prepared"
