"""compact.compaction.economics: cost-aware compaction — when a reset pays for itself, what is restored, and which call.

The arithmetic is checked on its own (break-even, the server's summary priced uncached, the cycle's
request count); then on the bench with the scripted model: the point between the floor and T, what a
compaction restores, bare notes. (Whole runs through the agent on the fake API, early from the notes and
at T with the setting off: tests/agent/runtime/test_compaction_in_whole_runs.py.)
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from compact.compaction import compactor, economics, ledger, notes_compaction
from compact.compaction.notes import template_for
from core.events import CompactFailed
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt
from core.scripted import ScriptedModel, reply_text
from tests.helpers.bench import Bench, make_bench
from tests.helpers.compaction import SUMMARY_REPLY, read_round, write_file


def notes_template_text(bench: Bench) -> str:
    return template_for(bench.ports)


def said(text: str) -> Message:
    return assistant([{"type": "text", "text": text}])


PRICES = economics.Prices()  # read 0.1, write 1.25, output 5


@pytest.mark.parametrize("kind", economics.KINDS)
def test_break_even_is_where_a_reset_starts_to_pay(kind: str) -> None:
    post, fixed, left = 15_000, 4_000, 30
    even = economics.break_even(post, fixed, left, kind, PRICES)
    assert math.isfinite(even) and even > post
    assert economics.pays(math.ceil(even) + 1, post, fixed, left, kind, PRICES)
    assert not economics.pays(math.floor(even) - 1, post, fixed, left, kind, PRICES)


def test_a_call_costs_the_reset_more_and_the_server_s_summary_most() -> None:
    post, fixed, left = 15_000, 4_000, 30
    points = [economics.break_even(post, fixed, left, k, PRICES) for k in economics.KINDS]
    assert points == sorted(points) and len(set(points)) == 4  # current notes < update < summary < server
    # the server's summary is priced as an uncached read of what it summarizes: it can't pay back unless
    # the reads it saves exceed a full input price per token, ten requests at a tenth each
    assert economics.break_even(post, fixed, 10, "server", PRICES) == math.inf
    assert math.isfinite(economics.break_even(post, fixed, 11, "server", PRICES))


def test_more_requests_left_make_an_earlier_reset_pay() -> None:
    points = [economics.break_even(15_000, 4_000, n, "notes", PRICES) for n in (5, 10, 20, 40)]
    assert points == sorted(points, reverse=True)


def test_a_family_s_own_cache_price_is_used() -> None:
    sonnet55 = economics.Prices.of("claude-sonnet-5-5")  # reads at $0.10 of $2.00: a twentieth
    sonnet45 = economics.Prices.of("claude-sonnet-4-5")
    assert sonnet55.read == pytest.approx(0.05) and sonnet45.read == pytest.approx(0.1)
    assert economics.break_even(15_000, 4_000, 30, "notes", sonnet55) > economics.break_even(
        15_000, 4_000, 30, "notes", sonnet45
    )


def test_the_cycle_counts_the_replies_after_what_the_last_compaction_added() -> None:
    summary = Message("user", [{"type": "text", "text": "summary"}], kind="summary")
    kept = [said("kept one"), user_prompt("kept prompt"), said("kept two")]
    added = Message("user", [{"type": "text", "text": "working state"}], kind="meta")
    new = [user_prompt("go on"), said("a"), user_prompt("more"), said("b")]
    messages = [summary, *kept, added, *new]
    assert economics.requests_in_cycle(messages, added.uuid) == 2
    assert economics.requests_in_cycle(messages) == 4  # without the marker: everything after the summary
    assert economics.requests_in_cycle(new) == 2  # no compaction yet: the whole session


def test_what_the_next_request_writes_anyway_is_not_a_cost_of_the_reset() -> None:
    # R = 12,000 of which 4,500 system prompt and tools and 6,500 the newest result no request has sent
    # yet: the reset rewrites 1,000, not 7,500, so it pays from a smaller context
    whole = economics.break_even(12_000, 4_500, 4, "notes-current", PRICES)
    written = economics.break_even(12_000, 4_500, 4, "notes-current", PRICES, written=1_000)
    assert written < whole
    assert economics.pays(30_000, 12_000, 4_500, 4, "notes-current", PRICES, written=1_000)
    assert not economics.pays(30_000, 12_000, 4_500, 4, "notes-current", PRICES)
    # never more than R less the fixed part
    assert economics.break_even(12_000, 4_500, 4, "notes", PRICES, written=50_000) == economics.break_even(
        12_000, 4_500, 4, "notes", PRICES
    )


def test_the_point_is_t_when_off_and_between_the_floor_and_t_when_on(tmp_path: Path) -> None:
    for name in ("off", "on", "fresh"):
        (tmp_path / name).mkdir()
    off = make_bench(tmp_path / "off", cost_aware=False)  # no request is made
    on = make_bench(tmp_path / "on")
    for bench in (off, on):
        bench.add(user_prompt("read them all"))
        for _ in range(40):  # a long cycle: 40 requests so far
            bench.add(said("next"))
            bench.add(user_prompt("more"))
    t = on.thresholds().auto_compact
    assert economics.point(off.conv, off.ports, "notes") == t
    early = economics.point(on.conv, on.ports, "notes")
    assert t * economics.FLOOR_SHARE <= early < t / 2
    assert economics.point(on.conv, on.ports, "summary") == t  # the local summary runs at T
    # one request into the cycle, nothing pays back: T
    fresh = make_bench(tmp_path / "fresh")
    fresh.add(user_prompt("hello"))
    assert economics.point(fresh.conv, fresh.ports, "server") == t


def test_cost_aware_restore_brings_back_modified_files_only(tmp_path: Path) -> None:
    model = ScriptedModel([reply_text(SUMMARY_REPLY)])
    bench = make_bench(tmp_path, model_api=model)
    bench.add(user_prompt("Fix the parser."))
    read_only = [write_file(bench, f"ref{i}.py") for i in range(3)]
    for path in read_only:
        read_round(bench, path)
    edited = write_file(bench, "parser.py")
    read_round(bench, edited)
    edit_id = "toolu_edit_parser"
    edit = {"file_path": str(edited), "old_string": "line 1", "new_string": "line one"}
    bench.add(
        assistant(
            [{"type": "tool_use", "id": edit_id, "name": "Edit", "input": edit}], stop_reason="tool_use"
        )
    )
    bench.add(tool_results([tool_result_block(edit_id, "The file was edited.")]))
    bench.add(said("Fixed."))

    assert compactor.compact(bench.conv, bench.ports, "auto"), [
        e for e in bench.events if isinstance(e, CompactFailed)
    ]

    restored = [m for m in bench.messages[1:] if m.kind == "meta" and ledger.SNAPSHOT_KEY not in m.extra]
    shown = [m.text for m in restored if "read from disk again" in m.text]
    assert (
        len(shown) == 1 and str(edited.resolve()) in shown[0]
    )  # the file the work changed, not the three read
    assert set(bench.tool_ctx.read_files) == {str(edited.resolve())}
    assert len(model.requests) == 1  # the summary


def test_bare_notes_keep_only_a_prompt_after_a_finished_turn(tmp_path: Path) -> None:
    bench = make_bench(tmp_path, session_memory=True)  # no request is made
    bench.add(user_prompt("Read the files."))
    read_round(bench, write_file(bench, "a.py"))
    answer = said("Read a.py.")
    bench.add(answer)
    notes = bench.conv.notes_path
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text(notes_template_text(bench) + "\nRead a.py.\n")
    bench.conv.state.last_summarized_uuid = answer.uuid
    assert notes_compaction.bare(bench.conv, bench.ports) is None  # nothing after the notes yet
    prompt = user_prompt("Now b.py.")
    bench.add(prompt)
    made = notes_compaction.bare(bench.conv, bench.ports)
    assert made is not None and made.kept == [prompt] and "Read a.py." in made.summary
    read_round(bench, write_file(bench, "b.py"))  # a tool loop began: its messages can't follow the notes
    assert notes_compaction.bare(bench.conv, bench.ports) is None


def test_a_notes_update_is_priced_as_it_was_seen_to_cost() -> None:
    # its usage says what it wrote out and to the cache beyond the context it read: a short update (one
    # Edit, 72 tokens out, its instruction written) costs less than the prior's 500 tokens out, and the
    # point where a compaction that needs one pays comes earlier. Fails without learning: the prior stays
    seen = economics.observe_notes(
        {
            "input_tokens": 3,
            "cache_creation_input_tokens": 800,
            "cache_read_input_tokens": 50_000,
            "output_tokens": 72,
        }
    )
    assert seen == {"output": 72.0, "written": 803.0}
    learned = economics.Prices.of("claude-haiku-4-5", notes=seen)
    prior = economics.Prices.of("claude-haiku-4-5")
    assert economics.call_cost("notes", 50_000, learned) == pytest.approx(50_000 * 0.1 + 803 * 1.25 + 72 * 5)
    assert economics.call_cost("notes", 50_000, learned) < economics.call_cost("notes", 50_000, prior)
    assert economics.break_even(12_000, 4_500, 4, "notes", learned, written=1_000) < economics.break_even(
        12_000, 4_500, 4, "notes", prior, written=1_000
    )
    assert economics.observe_notes({"output_tokens": 0}) is None


def test_before_a_first_compaction_the_newest_results_are_not_counted_as_rewritten(tmp_path: Path) -> None:
    # the prior R (the system prompt and tools + 8% of T) holds the newest results, which the next request
    # writes to the cache whether or not a compaction ran: as large as the last step's, they are left out
    # of what a first compaction rewrites. Fails without it: written = R - fixed
    bench = make_bench(tmp_path)  # no request is made
    bench.add(user_prompt("read them all"))
    read_round(bench, write_file(bench, "a.py", lines=400))
    t = bench.thresholds().auto_compact
    post, fixed = economics.post_estimate(bench.conv, t)
    step = bench.conv.calibration.scale(bench.messages[-1].tokens)
    assert step > 1_000
    assert economics.written_estimate(bench.conv, t) == post - fixed - step
