"""The one decision before a request (compact.decision.decide) and its executor (compact.autocompact):
what happens and why, a user's threshold kept (no local summary, no wait below it), the window and its
thresholds compaction's own (compact.decision.window), and nothing cleared unseen at a compaction."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from compact import autocompact
from compact.compaction import compactor
from compact.compaction.candidate import SUMMARY_SECTIONS
from compact.decision import decide as d
from compact.decision.config import CompactConfig
from compact.decision.window import Window
from compact.stages import micro
from compact.stages.state import ContextState
from compact.workers import preparer
from core.events import CompactFailed, CompactFinished
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt
from tests.helpers.bench import Bench, make_bench
from tests.helpers.compaction import of_type, read_round, write_file
from tests.helpers.scripted import RoutedModel, no_tools

T = 27_000  # CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=15 on a 200K window: 15% of 180,000


def facts(**kw: object) -> d.Facts:
    base: dict = {"tokens": 10_000, "threshold": 100_000, "blocking": 110_000, "paid_point": 40_000}
    return d.Facts(**{**base, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kw, action, source",
    [
        ({}, d.NONE, ""),
        ({"tokens": 100_000}, "summary", ""),
        ({"tokens": 100_000, "backend": "server"}, "server", ""),
        ({"tokens": 100_000, "breaker_open": True}, d.NONE, "breaker"),
        ({"tokens": 100_000, "new_content": False}, d.NONE, ""),
        ({"tokens": 100_000, "disabled": True}, d.NONE, ""),
        ({"tokens": 100_000, "auto": False}, d.NONE, ""),
        ({"tokens": 50_000, "backend": "notes", "notes_current": True}, d.EARLY, "notes"),
        ({"tokens": 30_000, "backend": "notes", "notes_current": True}, d.NONE, ""),
        ({"tokens": 50_000, "backend": "notes", "notes_current": True, "cost_aware": False}, d.NONE, ""),
        # a prepared local summary keeps nothing verbatim: it waits for T
        ({"tokens": 95_000, "candidate": "ready", "candidate_kind": "summary"}, d.NONE, ""),
        ({"tokens": 50_000, "candidate": "ready", "candidate_kind": "server"}, d.EARLY, "prepared"),
        ({"tokens": 50_000, "candidate": "running", "candidate_kind": "notes"}, d.NONE, ""),
        ({"tokens": 60_000, "boundary": True, "boundary_point": 50_000}, d.EARLY, "boundary"),
        ({"tokens": 100_000, "boundary": True, "boundary_point": 50_000}, "notes", "boundary"),
        ({"refused": True}, d.REACTIVE, ""),
        ({"refused": True, "reactive_used": True}, d.NONE, ""),
        ({"auto": False, "collapse": True, "tokens": 111_000}, "summary", ""),
        ({"auto": False, "collapse": True, "tokens": 101_000}, d.NONE, ""),
        ({"auto": False, "collapse": True, "tokens": 101_000, "collapse_can_help": False}, "summary", ""),
    ],
)
def test_one_decision_says_what_happens_and_why(kw: dict, action: str, source: str) -> None:
    decision = d.decide(facts(**kw))
    assert (decision.action, decision.source) == (action, source)
    assert decision.reason


def test_the_next_decision_point_is_t_or_where_an_early_one_pays() -> None:
    assert d.decide(facts()).point == 100_000
    ahead = d.decide(facts(backend="notes", notes_current=True))
    assert ahead.point == 40_000
    assert d.describe(ahead, 100_000).startswith("Next compaction: at 40,000 tokens (early")
    early = d.decide(facts(tokens=50_000, backend="notes", notes_current=True, post=12_000, left=20))
    assert early.line().startswith("Compacted early: the session notes are current")
    assert "20 more requests × 38,000 fewer tokens each" in early.line()
    assert early.record()["action"] == "early" and early.record()["saves"] == 38_000


def test_the_window_and_its_thresholds_are_compaction_s_own() -> None:
    window = Window(CompactConfig(), lambda: 200_000, lambda: 64_000)
    assert window.thresholds().auto_compact == 167_000 and not window.user_set
    assert window.learn(150_000) and window.size() == 150_000
    assert not window.learn(190_000)  # never raised again
    pct = Window(CompactConfig(autocompact_pct=15), lambda: 200_000, lambda: 64_000)
    assert pct.thresholds().auto_compact == T and pct.user_set
    capped = Window(CompactConfig(context_window=60_000), lambda: 200_000, lambda: 64_000)
    assert capped.thresholds().window == 60_000 and capped.user_set


def test_the_session_does_not_hand_compaction_its_thresholds(tmp_path: Path) -> None:
    bench = make_bench(tmp_path, autocompact_pct=15)  # the scripted model: no request is made
    assert not hasattr(bench.ports, "thresholds")
    assert bench.conv.window.thresholds().auto_compact == T == bench.thresholds().auto_compact
    assert bench.conv.window.config is bench.ports.config  # one copy of the settings


# --- a user-set threshold is a promise ---------------------------------------------------------------

GOOD = "<analysis>walked</analysis>\n<summary>" + "\n".join(
    f"{i}. {name}: the parser work, part {i}." for i, name in enumerate(SUMMARY_SECTIONS, 1)
)
REFUSED = (GOOD + "</summary>").replace("8. Current Work", "8. Lately")  # fails its checks


def ready(bench: Bench) -> preparer.Preparer:
    p = preparer.preparer(bench.conv)
    assert p is not None
    deadline = time.monotonic() + 30
    while p.thread is not None and p.running and time.monotonic() < deadline:
        p.thread.join(0.05)
    assert not p.running
    return p


def test_below_a_user_threshold_no_local_summary_and_no_wait(tmp_path: Path) -> None:
    """Issue 38 item 2: CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=15, notes off, cost-aware on. A prepared summary
    that would be refused at its checks is not applied early, and no local summary runs in the
    foreground below T; at T the foreground compaction runs as before."""
    model = RoutedModel()
    bench = make_bench(tmp_path, model_api=model, autocompact_pct=15)
    bench.add(user_prompt("Please fix the parser. Never touch the secrets/ directory."))
    for name in ("a.py", "b.py", "c.py"):
        read_round(bench, write_file(bench, name, lines=300))
    model.on(no_tools, REFUSED)
    preparer.start_if_due(bench.conv, bench.ports, int(T * 0.86))
    assert preparer.candidate_state(bench.conv) in (("running", "summary"), ("ready", "summary"))
    ready(bench)
    requests = len(model.requests)
    before = [m.uuid for m in bench.messages]
    assert autocompact.decision(bench.conv, bench.ports, 25_500).action == d.NONE
    assert autocompact.maybe_autocompact(bench.conv, bench.ports, 25_500) is False
    assert len(model.requests) == requests  # no summary request below T
    assert [m.uuid for m in bench.messages] == before
    assert of_type(bench.events, CompactFinished) == [] and of_type(bench.events, CompactFailed) == []
    model.on(no_tools, GOOD + "</summary>")
    assert autocompact.maybe_autocompact(bench.conv, bench.ports, T) is True  # at T: as before
    [done] = of_type(bench.events, CompactFinished)
    assert "refused" in done.candidate


# --- nothing cleared unseen ---------------------------------------------------------------------------


def _reads(n: int, chars: int = 20_000) -> list[Message]:
    out: list[Message] = [user_prompt("read them")]
    for i in range(n):
        use = {"type": "tool_use", "id": f"r{i}", "name": "Read", "input": {"file_path": f"/p/f{i}.py"}}
        out += [
            assistant([use]),
            tool_results([tool_result_block(f"r{i}", f"# FACT-{i}\n" + "y = 1\n" * (chars // 6))]),
        ]
    return out


def test_the_tail_keeps_what_no_summary_saw_and_counts_its_budget_as_the_server_does() -> None:
    messages = _reads(6)
    state = ContextState()
    per = messages[2].tokens
    threshold = 12 * per  # the tail's results may take 10% of T: 1.2 results by our estimate
    assert micro.in_tail(messages, state, 5, threshold) == ["r0", "r1", "r2", "r3", "r4"]
    # in the server's unit (it counts about half of our estimate here) two fit the same budget
    assert micro.in_tail(messages, state, 5, threshold, ratio=0.5) == ["r0", "r1", "r2", "r3"]
    # what no notes update or summary saw is never cleared
    unseen = frozenset({"r3", "r4", "r5"})
    assert micro.in_tail(messages, state, 5, threshold, unseen=unseen) == ["r0", "r1", "r2"]


def test_a_notes_compaction_clears_only_results_the_notes_saw(tmp_path: Path) -> None:
    """The kept tail's results after the notes' marker stay whole (20-autocompact: 4 files lost before)."""
    bench = make_bench(tmp_path, session_memory=True)  # the scripted model: no request is made
    for m in _reads(8, chars=12_000):
        bench.add(m)
    marker = bench.messages[8].uuid  # the notes saw r0..r3
    unseen = compactor._unseen(
        bench.conv,
        compactor.Compaction(method="session-memory", summary="notes", seen_through=marker),
        bench.messages,
    )
    assert unseen == {"r4", "r5", "r6", "r7"}
    kept = bench.messages[5:]
    stale = compactor._stale_in_kept(bench.conv, bench.ports, kept, unseen)
    assert stale and not set(stale) & unseen


# --- every figure in the server's unit ----------------------------------------------------------------
