"""The automatic server-side clearing of old tool results on a model with preserved thinking
(compact.context.context_editing ``automatic`` / ``advance``), against the 5.5 family's fake with the prefix check
enforced: the server clears, the history as kept is never edited, the cleared uses move in batches so
the prompt cache holds between moves, and the two counts (what the server counts, what the history
weighs) each drive what they should."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compact import request_cycle
from compact.context import context_editing
from compact.context.context_editing import AUTO_AT_LEAST, AUTO_TRIGGER, CLEAR_TOOL_USES, advance, automatic
from compact.decision.tokens import CLEARED
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt
from tests.compact.test_compactor import write_file
from tests.fakeapi import FakeAPI, Reply
from tests.helpers.bench import Bench, make_bench

MODEL = "claude-sonnet-5-5"


@pytest.fixture
def api():
    with FakeAPI(profile="2026", binding="error") as fake:
        yield fake
    assert fake.violations == [] and fake.binding.refused == [] and fake.binding.fallbacks == []


def bench_for(tmp_path: Path, api: FakeAPI, preserves: bool = True, **options: Any) -> Bench:
    options.setdefault("auto_compact", False)  # clearing alone: no compaction point in these tests
    bench = make_bench(tmp_path, api, model=MODEL, window=60_000, keep_recent=2, **options)
    bench.ports.preserves_thinking = lambda: preserves
    return bench


def read_step(bench: Bench, api: FakeAPI, n: int, seen: bool = True) -> Message:
    """One main request through the pipeline: a thinking reply reading a ~3,000-token file, and its result.
    ``seen``: a summary request saw everything up to the request (as a candidate prepared ahead would:
    the clearing may reach that far; compact.context.context_editing ``advance``)."""
    path = write_file(bench, f"m{n}.py", lines=250, width=6)
    api.add(Reply.tools([("Read", {"file_path": str(path)}, f"toolu_r{n}")], thinking=f"read m{n}"))
    if seen and bench.messages:
        bench.conv.summary_seen = bench.messages[-1].uuid
    view = request_cycle.before_request(bench.conv, bench.ports)
    message = request_cycle.send(bench.conv, bench.ports, view)
    bench.add(message)
    bench.add(tool_results([tool_result_block(f"toolu_r{n}", path.read_text())]))
    return message


def cleared_through(body: dict) -> str | None:
    """The last tool use a request asks the server to clear (by how many it keeps), or None."""
    edits = (body.get("context_management") or {}).get("edits") or []
    if not edits:
        return None
    (edit,) = edits
    assert edit["type"] == CLEAR_TOOL_USES and edit["trigger"] == {"type": "tool_uses", "value": 1}
    ids = [b["id"] for m in body["messages"] for b in m["content"] if b.get("type") == "tool_use"]
    kept = edit["keep"]["value"]
    return ids[len(ids) - kept - 1] if kept < len(ids) else None


def test_the_server_clears_in_batches_and_the_history_stays_as_sent(tmp_path: Path, api: FakeAPI) -> None:
    bench = bench_for(tmp_path, api)
    threshold = bench.conv.window.thresholds().auto_compact
    bench.add(user_prompt("Read every module."))
    for n in range(20):
        read_step(bench, api, n)

    requests = api.message_requests
    replies = [m for m in bench.messages if m.role == "assistant"]
    assert len(replies) == len(requests)
    points = [cleared_through(r.body) for r in requests]
    moves = [i for i in range(1, len(points)) if points[i] != points[i - 1]]
    assert points[0] is None and points[-1] is not None
    assert 2 <= len(moves) <= 5  # in batches, not one more result each request
    ids = [f"toolu_r{n}" for n in range(20)]
    for i in moves:  # each move clears more than one result (at least AUTO_AT_LEAST of T), the server too
        before = ids.index(points[i - 1]) if points[i - 1] else -1
        assert ids.index(points[i]) - before >= 2
        cleared = [int((r.usage or {}).get(CLEARED) or 0) for r in replies[i - 1 : i + 1]]
        assert cleared[1] - cleared[0] >= threshold * AUTO_AT_LEAST
    # between moves the server clears the same uses: the prompt cache holds what came before
    steady = [i for i in range(1, len(points)) if i not in moves and points[i] is not None]
    assert steady

    def read(u: dict) -> int:
        return int(u.get("cache_read_input_tokens") or 0)

    def whole(u: dict) -> int:
        return int(u.get("input_tokens") or 0) + int(u.get("cache_creation_input_tokens") or 0) + read(u)

    for i in steady:  # everything the previous request sent is read from the cache
        assert read(replies[i].usage or {}) >= 0.95 * whole(replies[i - 1].usage or {})
    for i in moves:  # a move rewrites what follows the first result it clears
        assert read(replies[i].usage or {}) < 0.5 * whole(replies[i - 1].usage or {})
    # the server read less; the history as kept is whole, and no thinking was left out or held back
    last = bench.messages[-2]
    assert last.usage is not None and last.usage[CLEARED] > 0
    view = bench.conv.view()
    assert view.raw_tokens == view.tokens + last.usage[CLEARED]
    assert view.tokens < threshold * AUTO_TRIGGER + 4_000 < view.raw_tokens
    assert all(
        b["content"] != "[tool result cleared by the server's context editing]"
        for m in requests[-1].body["messages"]
        for b in m["content"]
        if b.get("type") == "tool_result"
    )
    counts = bench.conv.view_ctx.thinking
    assert counts.dropped_between == 0 and counts.held == 0
    # a resumed session asks for the same clearing (else its first request would send all of it)
    from agent.transcript.loader import load_transcript

    loaded = load_transcript(bench.transcript_path, model=MODEL)
    assert loaded.state.server_clear_through == bench.conv.state.server_clear_through == points[-1]


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


def test_the_point_never_passes_what_was_seen() -> None:
    history = [user_prompt("go"), *[m for n in range(10) for m in _use(n)]]
    threshold = 10_000
    assert advance(history, None, threshold, threshold, 3, seen=0) is None
    assert advance(history, None, threshold, threshold, 3, seen=2 * 5 + 1) == "t4"  # t0..t4 answered
    assert advance(history, None, threshold, threshold, 3, seen=2 * 5) == "t3"  # t4's result not seen


def _use(n: int) -> list[Message]:
    call = assistant(
        [{"type": "tool_use", "id": f"t{n}", "name": "ToolSearch" if n == 1 else "Read", "input": {}}]
    )
    return [call, tool_results([tool_result_block(f"t{n}", "x" * 4_000)])]  # ~1,000 tokens a result


def test_the_point_moves_once_over_the_trigger_and_worth_it_and_is_said_by_how_many_to_keep() -> None:
    history = [user_prompt("go"), *[m for n in range(10) for m in _use(n)]]
    threshold = 10_000
    assert (
        advance(history, None, int(threshold * AUTO_TRIGGER) - 1, threshold, 3) is None
    )  # under the trigger
    moved = advance(history, None, int(threshold * AUTO_TRIGGER), threshold, 3)
    assert moved == "t6"  # all but the 3 newest
    assert advance(history, moved, threshold, threshold, 3) == "t6"  # nothing more to clear yet
    longer = [*history, *[m for n in range(10, 12) for m in _use(n)]]
    assert advance(longer, moved, threshold, threshold, 3) == "t6"  # 2 more results: under AT_LEAST of T
    assert advance(longer, moved, threshold, threshold, 1) == "t10"  # 4 more: worth a cache write
    # a compaction point rewrites the prefix anyway: the point moves whatever the count
    assert advance(history, None, 0, threshold, 3, rewritten=True) == "t6"
    body, betas = automatic(longer, "t6")
    (edit,) = body["context_management"]["edits"]
    assert edit["keep"] == {"type": "tool_uses", "value": 5} and betas == [context_editing.BETA]
    assert edit["exclude_tools"] == ["ToolSearch"]  # its results make deferred tools callable
    assert automatic(longer, None) == ({}, []) and automatic(longer, "gone") == ({}, [])


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
