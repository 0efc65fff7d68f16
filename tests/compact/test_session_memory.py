"""compact.session_memory: the notes file, when updates run, what an update sends and applies, and the
compaction that keeps a recent tail verbatim behind the notes, on the scripted model (the update request as
sent is tests/agent/runtime/test_compaction_requests.py's)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from compact.compaction import compactor, notes_compaction, notes_updater
from compact.compaction import notes as notes_doc
from compact.compaction.notes_template import SECTIONS, TEMPLATE, section_tokens, update_instruction
from core.messages import Message, assistant, tool_pairs_ok, tool_result_block, tool_results, user_prompt
from core.scripted import reply_text
from core.tokens import estimate_text
from tests.helpers.bench import Bench

# is_notes_update, last_user_text, request_text
from tests.helpers.compaction import transcript_records
from tests.helpers.notes import (
    answer,
    filler,
    guide,
    notes_bench,
    notes_requests,
    notes_session,
    read_round,
    tokens,
    warnings,
)
from tests.helpers.scripted import RoutedModel, is_notes_update, last_user_text, reply_blocks, request_text


@pytest.fixture
def model() -> RoutedModel:
    """The bench's model: the notes updates a test routes, its requests read back."""
    return RoutedModel()


def edit(bench: Bench, old: str, new: str, path: str | None = None) -> dict:
    return {
        "type": "tool_use",
        "id": f"toolu_edit{abs(hash(old)) % 10_000}",
        "name": "Edit",
        "input": {"file_path": path or str(bench.notes_path), "old_string": old, "new_string": new},
    }


# --- the template and the notes file -----------------------------------------------------------------


def test_template_has_the_ten_sections_each_with_one_italic_guidance_line():
    lines = [line for line in TEMPLATE.splitlines() if line.strip()]
    names = [
        "Session Title",
        "Current State",
        "Task specification",
        "Files and Functions",
        "Workflow",
        "Errors & Corrections",
        "Codebase and System Documentation",
        "Learnings",
        "Key results",
        "Worklog",
    ]
    assert lines[0::2] == [f"# {n}" for n in names]
    assert all(g.startswith("_") and g.endswith("_") and len(g) > 20 for g in lines[1::2])
    assert len(lines) == 20


def test_ensure_notes_creates_a_private_file_from_the_template_and_never_overwrites(tmp_path, model):
    bench = notes_bench(tmp_path, model)
    assert notes_doc.notes_text(bench.notes_path) is None
    path = notes_doc.ensure_notes(bench.conv, bench.ports)
    assert path == bench.notes_path and path.name == "summary.md"
    assert path.read_text() == TEMPLATE
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    assert oct(bench.session_dir.stat().st_mode & 0o777) == "0o700"
    path.write_text(TEMPLATE + "\nkept\n")
    notes_doc.ensure_notes(bench.conv, bench.ports)
    assert notes_doc.notes_text(bench.notes_path) == TEMPLATE + "\nkept\n"


def test_a_template_in_the_agent_home_replaces_ours(tmp_path, model):
    bench = notes_bench(tmp_path, model)
    bench.home.mkdir(parents=True)
    (bench.home / "session-memory-template.md").write_text("# Goal\n_what we want_\n")
    assert notes_doc.ensure_notes(bench.conv, bench.ports).read_text() == "# Goal\n_what we want_\n"
    assert notes_doc.is_template("# Goal\n_what we want_\n\n", notes_doc.template_for(bench.ports))


def test_is_template_tells_bare_notes_from_notes_with_content():
    assert notes_doc.is_template(TEMPLATE)
    assert notes_doc.is_template(TEMPLATE.replace("\n\n", "\n") + "\n  \n")
    assert not notes_doc.is_template(
        TEMPLATE.replace(guide("Workflow"), guide("Workflow") + "\nrun `make test`")
    )


def test_the_instruction_names_the_sections_to_condense_when_the_notes_are_too_long():
    from compact.compaction.notes_template import update_instruction

    notes = TEMPLATE.replace(guide("Worklog"), guide("Worklog") + "\n" + filler(2_500))
    over = notes_doc.oversized_sections(notes, notes_doc.headers(TEMPLATE))
    assert over == ["Worklog"]
    text = update_instruction("/s/summary.md", notes, over, 13_000)
    assert 'Condense these sections, each over about 2,000 tokens: "Worklog".' in text
    assert "about 13,000 tokens now, over the 12,000 limit" in text
    assert "Condense" not in update_instruction("/s/summary.md", TEMPLATE, [], 300)


# --- when updates run ------------------------------------------------------------------------------


def test_trigger_first_at_10k_then_5k_growth_with_3_tool_calls_or_a_reply_without_tools():
    t = notes_updater.Trigger()
    assert not t.observe(9_999, 1)
    assert t.observe(10_000, 1)
    t.updating(10_000)
    assert not t.observe(14_999, 1)  # not grown enough
    assert not t.observe(15_000, 1)  # grown, but only 2 tool calls since and this reply called a tool
    assert t.observe(15_100, 1)  # third tool call
    t.updating(15_100)
    assert not t.observe(16_000, 5)  # many calls, not enough growth
    assert t.observe(20_100, 0)  # grown, and this reply made no tool call
    t.updating(100_000)
    assert not t.observe(30_000, 0)  # a compaction shrank the context: growth counts from here
    assert not t.observe(34_999, 0)
    assert t.observe(35_000, 0)


def test_after_response_runs_one_update_at_a_time_in_the_background(tmp_path, model):
    bench = notes_bench(tmp_path, model, context_window=40_000)  # T = 7,000: updates at 10,000, then +5,000
    release = threading.Event()
    seen: list[Any] = []

    def slow(req):
        seen.append(notes_updater.worker(bench.conv).thread)
        release.wait(10)
        return reply_text("Nothing new to note.")

    model.on(is_notes_update, slow)
    bench.add(user_prompt("read the sources"))
    read_round(bench, 4_000)
    answer(bench)
    notes_updater.update_if_due(bench.conv, bench.ports)  # ~4K tokens: too early
    assert not notes_updater.worker(bench.conv).busy and model.requests == []

    read_round(bench, 7_000)
    started = time.monotonic()
    answer(bench)
    notes_updater.update_if_due(
        bench.conv, bench.ports
    )  # over 10K: an update starts, and update_if_due returns at once
    assert time.monotonic() - started < 5  # the update's reply is held for 10 s
    assert notes_updater.worker(bench.conv).busy

    for n in range(2):  # due again (+6K, no tool call) while one runs: it waits; only the newest waits
        read_round(bench, 6_000)
        reply = answer(bench, f"Summary {n}.")
        notes_updater.update_if_due(bench.conv, bench.ports)
    assert notes_updater.worker(bench.conv).pending is not None
    release.set()
    assert notes_updater.wait_for_update(bench.conv, 10)
    assert not notes_updater.worker(bench.conv).busy
    bodies = notes_requests(model)
    assert len(bodies) == 2 and seen[0] is seen[1]  # the waiting update ran on the same thread, after
    assert "Summary 1." in request_text(bodies[1]) and "Summary 0." in request_text(bodies[1])
    assert bench.state.last_summarized_uuid == reply.uuid


def test_no_update_when_session_memory_or_compaction_is_off(tmp_path, model):
    for settings in ({"session_memory": False}, {"disable_compact": True}):
        bench = notes_bench(tmp_path, model, **settings)
        bench.add(user_prompt("go"))
        read_round(bench, 12_000)
        answer(bench)
        notes_updater.update_if_due(bench.conv, bench.ports)
        assert notes_updater.update_notes(bench.conv, bench.ports) is False
        assert notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto") is None
    assert model.requests == []


# --- what an update sends and applies ------------------------------------------------------------------


def test_the_models_edits_are_applied_and_nothing_joins_the_conversation(tmp_path, model):
    bench = notes_bench(tmp_path, model)
    bench.add(user_prompt("fix the parser"))
    read_round(bench, 11_000)
    answer(bench)
    before = list(bench.messages)
    model.on(
        is_notes_update,
        reply_blocks(
            [
                edit(
                    bench,
                    guide("Current State"),
                    guide("Current State") + "\nParser fix in src/parse.py; next: tests.",
                ),
                edit(bench, guide("Worklog"), guide("Worklog") + "\n- read src/f.py"),
            ]
        ),
    )

    assert notes_updater.update_notes(bench.conv, bench.ports)
    notes = notes_doc.notes_text(bench.notes_path)
    assert "Parser fix in src/parse.py; next: tests." in notes and "- read src/f.py" in notes
    assert all(f"# {name}" in notes for name, _ in SECTIONS)
    assert bench.messages == before  # the side request is not part of the conversation
    assert bench.usage_total["output_tokens"] > 0  # but its usage counts
    assert oct(bench.notes_path.stat().st_mode & 0o777) == "0o600"
    # and what it cost prices the next one (compact.compaction.economics.observe_notes)
    seen = bench.conv.state.notes_price
    assert seen is not None and seen["output"] == bench.usage_total["output_tokens"]


def test_edits_on_other_files_and_other_tools_are_refused_and_reported_once(tmp_path, model):
    bench = notes_bench(tmp_path, model)
    events = bench.events
    other = bench.cwd / "app.py"
    other.write_text("x = 1\n")
    bench.add(user_prompt("go"))
    read_round(bench, 11_000)
    answer(bench)
    model.on(
        is_notes_update,
        reply_blocks(
            [
                edit(bench, "x = 1", "x = 2", path=str(other)),
                {
                    "type": "tool_use",
                    "id": "toolu_bash1",
                    "name": "Bash",
                    "input": {"command": "touch owned"},
                },
                edit(bench, guide("Learnings"), guide("Learnings") + "\nparser is recursive descent"),
            ]
        ),
    )

    assert notes_updater.update_notes(bench.conv, bench.ports) is False
    assert notes_updater.update_notes(bench.conv, bench.ports) is False
    assert other.read_text() == "x = 1\n"
    assert not (bench.cwd / "owned").exists()
    assert "parser is recursive descent" in notes_doc.notes_text(
        bench.notes_path
    )  # the allowed edit still applied
    [warning] = warnings(events)
    assert "refused" in warning and str(other) in warning
    assert bench.state.last_summarized_uuid is None  # an update with problems moves no marker


def test_an_edit_that_removes_a_header_is_undone(tmp_path, model):
    bench = notes_bench(tmp_path, model)
    events = bench.events
    bench.add(user_prompt("go"))
    read_round(bench, 11_000)
    answer(bench)
    model.on(is_notes_update, reply_blocks([edit(bench, "# Learnings\n", "")]))
    assert notes_updater.update_notes(bench.conv, bench.ports) is False
    assert notes_doc.notes_text(bench.notes_path) == TEMPLATE
    assert "header" in warnings(events)[0]


def test_a_slow_update_times_out_without_applying_anything(tmp_path, model):
    bench = notes_bench(tmp_path, model)
    events = bench.events
    bench.add(user_prompt("go"))
    read_round(bench, 11_000)
    answer(bench)

    released = threading.Event()

    def slow(req):
        released.wait(10)  # held until the update was abandoned and checked
        return reply_blocks([edit(bench, guide("Worklog"), guide("Worklog") + "\n- late")])

    model.on(is_notes_update, slow)
    try:
        assert notes_updater.update_notes(bench.conv, bench.ports, timeout=0.2) is False
        assert notes_doc.notes_text(bench.notes_path) == TEMPLATE
        assert "longer than" in warnings(events)[0]
    finally:
        released.set()


def test_safe_marker_never_leaves_a_call_unanswered_before_it() -> None:
    call = assistant(
        [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/a"}}],
        stop_reason="tool_use",
    )
    done = tool_results([tool_result_block("t1", "a")])
    prompt = user_prompt("go")
    assert notes_updater.safe_marker([prompt]) == prompt.uuid
    assert notes_updater.safe_marker([prompt, call]) == prompt.uuid
    assert notes_updater.safe_marker([prompt, call, done]) == done.uuid
    assert notes_updater.safe_marker([prompt, call, done, call.replace(uuid="x")]) == done.uuid
    assert notes_updater.safe_marker([call]) is None
    assert notes_updater.safe_marker([prompt, call, user_prompt("interrupting")]) is None


# --- the kept tail ---------------------------------------------------------------------------------


def msg(
    role: str,
    tokens: int,
    *,
    text: bool = True,
    use: str | None = None,
    result: str | None = None,
    message_id: str | None = None,
    kind: str | None = None,
) -> Message:
    blocks: list[dict] = [{"type": "text", "text": filler(tokens)}] if text else []
    if use:
        blocks.append({"type": "tool_use", "id": use, "name": "Read", "input": {"file_path": "/f"}})
    if result:
        blocks = [tool_result_block(result, filler(tokens))]
    if role == "assistant":
        return Message("assistant", blocks, kind="response", message_id=message_id)
    return Message("user", blocks, kind=kind or ("tool_results" if result else "prompt"))


def rounds(n: int, result_tokens: int, *, with_text: bool = True) -> list[Message]:
    out = [msg("user", 20)]
    for i in range(n):
        out.append(msg("assistant", 10 if with_text else 0, text=with_text, use=f"t{i}"))
        out.append(msg("user", result_tokens, result=f"t{i}"))
    out.append(msg("assistant", 10))
    return out


def test_kept_tail_reaches_10k_tokens_and_5_text_messages_without_splitting_pairs():
    ms = rounds(30, 1_000)
    start = notes_compaction.kept_start(ms, len(ms))
    kept = ms[start:]
    assert tokens(kept) >= 10_000 and tokens(kept) < 10_000 + 1_100
    assert sum(1 for m in kept if m.text.strip()) >= 5
    assert kept[0].role == "assistant" and tool_pairs_ok(kept)


def test_kept_tail_needs_five_text_messages_even_past_10k():
    ms = rounds(4, 6_000) + [msg("user", 5), msg("assistant", 5), msg("user", 5), msg("assistant", 5)]
    ms = rounds(0, 0)[:1] + ms
    kept = ms[notes_compaction.kept_start(ms, len(ms)) :]
    assert sum(1 for m in kept if m.text.strip()) >= 5


def test_kept_tail_stops_before_40k_tokens():
    ms = rounds(10, 15_000, with_text=False)
    start = notes_compaction.kept_start(ms, len(ms))
    kept = ms[start:]
    assert 10_000 <= tokens(kept) <= 40_000
    assert start > 1 and tool_pairs_ok(kept)


def test_everything_after_the_marker_is_kept_whatever_its_size():
    ms = rounds(5, 15_000)
    marker = 2  # the first tool result; everything after it is not in the notes
    start = notes_compaction.kept_start(ms, marker + 1)
    assert start <= marker + 1 and tool_pairs_ok(ms[start:])


def test_kept_tail_never_crosses_the_start_or_the_previous_summary():
    ms = rounds(2, 500)
    assert notes_compaction.kept_start(ms, len(ms)) == 0
    with_summary = [msg("user", 100, kind="summary"), *ms[1:]]
    assert notes_compaction.kept_start(with_summary, len(with_summary)) == 1


def test_kept_tail_keeps_the_blocks_of_one_streamed_response_together():
    # msg_1 was streamed as two records: a short text, then a long text with the tool call. Cutting at the
    # second would already meet both minimums; the tail must start at the first instead.
    ms = [
        msg("user", 10),
        msg("assistant", 10, message_id="msg_1"),
        msg("assistant", 20_000, use="t1", message_id="msg_1"),
        msg("user", 5_000, result="t1"),
        msg("assistant", 10),
    ]
    assert notes_compaction.kept_start(ms, len(ms), min_text=2) == 1


# --- compaction with the notes ---------------------------------------------------------------------


def test_compact_with_notes_keeps_a_tail_and_uses_the_notes(tmp_path, model):
    bench = notes_session(tmp_path, model)
    result = notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto")
    assert result is not None and result.method == "session-memory"
    assert "Parser fixed; tests pass." in result.summary and "# Worklog" in result.summary
    assert result.kept == bench.messages[-len(result.kept) :]
    assert "The parser is fixed." in [m.text for m in result.kept]  # extended back past the marker
    assert tokens(result.kept) >= 10_000 and tool_pairs_ok(result.kept)
    assert result.preserved_segment == {
        "headUuid": result.kept[0].uuid,
        "anchorUuid": "",
        "tailUuid": bench.messages[-1].uuid,
    }
    assert model.requests == []  # no model call


def test_compact_with_notes_declines_without_usable_notes(tmp_path, model):
    bench = notes_session(tmp_path, model)
    assert notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto") is not None
    bench.notes_path.write_text(TEMPLATE)
    assert notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto") is None
    bench.notes_path.unlink()
    assert notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto") is None


def test_long_sections_are_trimmed_in_the_summary_only(tmp_path, model):
    bench = notes_session(tmp_path, model)
    long_log = "\n".join(f"- step {i}: " + "detail " * 20 for i in range(400))
    full = TEMPLATE.replace(guide("Worklog"), guide("Worklog") + "\n" + long_log)
    bench.notes_path.write_text(full)
    result = notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto")
    worklog = result.summary.split("# Worklog")[1]
    # within the size the update instruction gave each section, the newest lines kept (the latest steps
    # and corrections), the guide line first and where the older lines are
    promised = section_tokens(bench.conv.window.thresholds().auto_compact)
    assert estimate_text(worklog) <= promised + 20 and f"about {promised:,} tokens" in update_instruction(
        "p", "", [], 0, promised
    )
    assert str(bench.notes_path) in worklog and "older lines of this section are left out" in worklog
    assert "- step 399:" in worklog and "- step 0:" not in worklog
    assert worklog.index(guide("Worklog")) < worklog.index("left out") < worklog.index("- step 399:")
    assert bench.notes_path.read_text() == full


def test_compact_with_notes_falls_back_when_the_result_would_stay_over_the_threshold(tmp_path, model):
    # window capped at 40K: E = 20K, T = 7K, and the kept tail alone holds 10K
    bench = notes_session(tmp_path, model, context_window=40_000)
    assert bench.thresholds().auto_compact == 7_000
    assert notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto") is None


def test_compactor_uses_the_notes_without_a_summary_request(tmp_path, model):
    bench = notes_session(tmp_path, model)
    kept_uuids = [m.uuid for m in notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto").kept]
    assert compactor.compact(bench.conv, bench.ports, "auto")
    assert not [r for r in model.requests if "<analysis>" in last_user_text(r)]
    summary = bench.messages[0]
    assert summary.kind == "summary" and "Parser fixed; tests pass." in summary.text
    assert [m.uuid for m in bench.messages[1 : 1 + len(kept_uuids)]] == kept_uuids
    [boundary] = [r for r in transcript_records(bench) if r.get("subtype") == "compact_boundary"]
    assert boundary["compactMetadata"]["preservedSegment"] == {
        "headUuid": kept_uuids[0],
        "anchorUuid": summary.uuid,
        "tailUuid": kept_uuids[-1],
    }
    assert estimate_text(summary.text) < 12_000


def test_an_update_is_due_before_one_more_step_like_the_last_would_reach_the_threshold() -> None:
    t = notes_updater.Trigger()
    init, growth = notes_updater.update_levels(54_000)  # 48,600 and 32,400
    assert not t.observe(30_000, 1, init, growth, threshold=54_000)  # the first response is no step
    assert not t.observe(40_000, 1, init, growth, threshold=54_000)  # +10,000: 50,000 next, under T
    assert t.observe(48_000, 1, init, growth, threshold=54_000)  # +8,000 would reach T: update now
    t.updating(48_000)
    assert not t.observe(52_000, 1, init, growth, threshold=54_000)  # not again without new growth
    assert not t.observe(55_000, 1, init, growth, threshold=54_000)  # at T: the compaction decides


# --- what an automatic compaction keeps of the results its notes saw --------------------------------------


def _read(bench: Bench, name: str, text: str = "") -> str:
    """A Read of a file of its own (~6,000 tokens, identifiers only it holds); the call's id."""
    use_id = f"toolu_{name}"
    body = "\n".join(f"def {name}_func_{i}(x):  # {name}-{i}\n    return x * {i} + 7" for i in range(220))
    blocks = [{"type": "text", "text": text}] if text else []
    blocks.append(
        {"type": "tool_use", "id": use_id, "name": "Read", "input": {"file_path": f"/src/{name}.py"}}
    )
    bench.add(assistant(blocks, stop_reason="tool_use"))
    bench.add(tool_results([tool_result_block(use_id, body)]))
    return use_id


def _notes_cover_all_but_the_newest(bench: Bench, note: str) -> None:
    notes_doc.ensure_notes(bench.conv, bench.ports).write_text(
        TEMPLATE.replace(guide("Current State"), guide("Current State") + "\n" + note)
    )
    covered = [m for m in bench.messages[:-2] if m.tool_results]
    bench.state.last_summarized_uuid = covered[-1].uuid


def _whole(bench: Bench, use_id: str) -> bool:
    """The result is in what the next request sends, whole (the compaction clears in the view)."""
    return any(
        b.get("tool_use_id") == use_id and "func_" in str(b.get("content"))
        for m in bench.view().messages
        for b in m.tool_results
    )


def _cycle(bench: Bench, tag: str, n: int, refer: str = "") -> tuple[str, str]:
    """n reads, the notes covering all but the newest, one automatic compaction: (the read before the
    newest, the newest). ``refer``: the text of the first reply of the cycle."""
    ids = [_read(bench, f"{tag}{i}", refer if i == 0 else "") for i in range(n)]
    _notes_cover_all_but_the_newest(bench, f"read {tag}0..{tag}{n - 1}")
    assert compactor.compact(bench.conv, bench.ports, "auto")
    return ids[-2], ids[-1]


def test_an_automatic_compaction_keeps_seen_results_again_only_while_the_session_goes_back_to_them(
    tmp_path, model
):
    # the first compaction keeps the usual recent tail (the read before the newest, which its notes saw,
    # whole); the next one keeps of the seen results only the newest when no reply since went back to
    # those the first kept: kept again at every compaction they were written to the prompt cache each time
    # (62-cost, 2025 rules: 0.68x of Claude Code's bill with them, 0.60x without). Fails without the rule:
    # the second compaction keeps the seen read before the newest whole too
    bench = notes_bench(tmp_path, model)
    bench.add(user_prompt("Read every file in src/, one by one."))
    before, newest = _cycle(bench, "a", 9)
    assert _whole(bench, before) and _whole(bench, newest)  # the usual tail
    last = bench.conv.last_compaction
    assert last is not None and before in last.kept_seen and not last.lean
    before, newest = _cycle(bench, "b", 4)  # the replies only read on: nothing refers back
    assert not _whole(bench, before) and _whole(bench, newest)
    assert bench.conv.last_compaction is not None and bench.conv.last_compaction.lean


def test_a_session_that_goes_back_to_a_kept_result_keeps_the_usual_tail(tmp_path, model):
    bench = notes_bench(tmp_path, model)
    bench.add(user_prompt("Read every file in src/, one by one."))
    before, _ = _cycle(bench, "a", 9)
    # a reply names an identifier only the kept result holds: the session uses what the tail keeps
    before, newest = _cycle(bench, "b", 4, refer="a7_func_17 calls into this one.")
    assert _whole(bench, before) and _whole(bench, newest)
    assert bench.conv.last_compaction is not None and not bench.conv.last_compaction.lean
