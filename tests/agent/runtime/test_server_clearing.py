"""The automatic server-side clearing of old tool results on a model with preserved thinking
(compact.context.context_editing ``automatic`` / ``advance``), against the 5.5 family's fake with the prefix check
enforced: the server clears, the history as kept is never edited, the cleared uses move in batches so
the prompt cache holds between moves, and the two counts (what the server counts, what the history
weighs) each drive what they should. Where the point moves, without a request, is
tests/compact/test_context_editing.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from compact.context import context_editing
from compact.context.context_editing import AUTO_TRIGGER
from core.messages import user_prompt
from tests.fakeapi import FakeAPI
from tests.helpers.clearing import bench_for, cleared_through, read_step

pytestmark = pytest.mark.fake_api(profile="2026")  # this file is about that profile


@pytest.mark.parametrize("case", ["contextEditing false", "a model without preserved thinking"])
def test_no_automatic_clearing_when_turned_off_or_not_needed(tmp_path: Path, api: FakeAPI, case: str) -> None:
    if case == "contextEditing false":
        bench = bench_for(tmp_path, api, context_editing={"enabled": False})
    else:
        bench = bench_for(tmp_path, api, preserves=False)
    bench.add(user_prompt("Read every module."))
    for n in range(10):
        read_step(bench, api, n)
    assert all("context_management" not in r.body for r in api.message_requests)
    assert not context_editing.automatic_on(bench.ports)


def test_the_server_never_clears_a_result_no_notes_or_summary_saw(tmp_path: Path, api: FakeAPI) -> None:
    """Issue 38: a result leaves what the model reads only once a notes update or a summary request saw
    it. With nothing seen the clearing never starts; once a summary saw the first reads, it reaches
    no further than them."""
    bench = bench_for(tmp_path, api)
    threshold = bench.conv.window.thresholds().auto_compact
    bench.add(user_prompt("Read every module."))
    for n in range(9):
        read_step(bench, api, n, seen=False)
    assert bench.conv.view().tokens > threshold * AUTO_TRIGGER  # past the clearing's trigger
    assert all(cleared_through(r.body) is None for r in api.message_requests)
    bench.conv.summary_seen = bench.messages[-1].uuid  # a summary request saw toolu_r0..r8's results
    for n in range(9, 11):
        read_step(bench, api, n, seen=False)
    points = [cleared_through(r.body) for r in api.message_requests]
    assert points[-1] is not None
    assert all(p is None or int(p.removeprefix("toolu_r")) <= 8 for p in points)


def test_with_nothing_prepared_ahead_the_compaction_still_comes_at_t(tmp_path: Path, api: FakeAPI) -> None:
    # the put-off waits for a candidate the preparer starts; with preparation off none ever would
    bench = bench_for(tmp_path, api, auto_compact=True, prepare_compaction=False)
    bench.ports.offers_compaction = lambda: True
    threshold = bench.conv.window.thresholds().auto_compact
    bench.add(user_prompt("Read every module."))
    weights = []
    for n in range(16):
        weights.append(bench.conv.view().raw_tokens)
        read_step(bench, api, n)
        if api.compactions.served:
            break
    assert api.compactions.served == 1  # the server's summary, in the foreground
    assert max(weights) < threshold + 4_000  # at T, not put off past it
