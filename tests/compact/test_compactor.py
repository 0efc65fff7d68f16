"""compact.compaction.compactor and compact.compaction.restore on the scripted model: the whole compaction, its
records, hooks, restoration, failures that change nothing, and the post-compaction guard (the summary
request as sent is test_summary's and tests/agent's subject).

Each test builds a Conversation and its Ports with tests.helpers.bench (no Session). The helpers at the top
(``read_round``, ``main_request``...) are shared with test_summary.py and
test_autocompact.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compact.compaction import compactor, ledger, notes_compaction, restore
from compact.context.result import Compaction
from compact.decision import thresholds
from core.errors import Interrupted
from core.events import CompactFailed, CompactFinished, CompactStarted, Notice
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt
from core.scripted import ScriptedModel, reply_text
from tests.helpers.bench import make_bench
from tests.helpers.compaction import (
    SUMMARY_REPLY,
    conversation,
    main_request,
    of_type,
    read_round,
    transcript_records,
    write_file,
)
from tests.helpers.scripted import RoutedModel, api_error, last_user_text, request_text


@pytest.fixture
def model() -> RoutedModel:
    """The bench's model: the summaries a test scripts, its requests read back."""
    return RoutedModel()


# --- a compaction that works ------------------------------------------------------------------------------


def test_compaction_replaces_history_with_summary_and_writes_boundary(
    tmp_path: Path, model: RoutedModel
) -> None:
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events
    conversation(bench, [f"m{i}.py" for i in range(8)])
    old = list(bench.messages)
    model.steps.append(reply_text(SUMMARY_REPLY))

    assert compactor.compact(bench.conv, bench.ports, "auto") is True

    first = bench.messages[0]
    assert first.kind == "summary"
    assert "1. Primary Request and Intent: fix the parser" in first.text
    assert "private walk" not in first.text and "<analysis>" not in first.text
    assert str(bench.transcript_path) in first.text
    assert "Carry on with the task" in first.text and "do not ask the user" in first.text
    recs = transcript_records(bench)
    boundary = next(r for r in recs if r.get("subtype") == "compact_boundary")
    after = recs[recs.index(boundary) + 1]
    assert boundary["parentUuid"] is None
    assert boundary["logicalParentUuid"] == old[-1].uuid
    assert boundary["compactMetadata"]["trigger"] == "auto"
    assert boundary["compactMetadata"]["preTokens"] > 0
    assert after["isCompactSummary"] is True and after["parentUuid"] == boundary["uuid"]
    assert [r["uuid"] for r in recs if r.get("type") in ("user", "assistant")][: len(old)] == [
        m.uuid for m in old
    ]
    finished = of_type(events, CompactFinished)
    assert [(e.trigger, e.method) for e in finished] == [("auto", "summary")]
    assert finished[0].post_tokens < finished[0].pre_tokens
    assert of_type(events, CompactStarted) == [CompactStarted("auto")]
    assert bench.conv.last_compaction.replaced() == old
    assert bench.conv.breaker.failures == 0


def test_manual_summary_does_not_tell_the_model_to_carry_on(tmp_path: Path) -> None:
    # the wire plays no part here: the summary comes from a script (core.scripted)
    model = ScriptedModel([reply_text(SUMMARY_REPLY)])
    bench = make_bench(tmp_path, model_api=model)
    conversation(bench, ["a.py"])
    assert compactor.compact(bench.conv, bench.ports, "manual")
    assert "Carry on" not in bench.messages[0].text and "fix the parser" in bench.messages[0].text
    assert (len(model.requests), model.left, bench.messages[0].kind) == (1, 0, "summary")
    boundary = next(r for r in transcript_records(bench) if r.get("subtype") == "compact_boundary")
    assert boundary["compactMetadata"]["trigger"] == "manual"


def test_the_next_main_request_is_the_compacted_view(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(
        tmp_path, model_api=model, cost_aware=False
    )  # the recent files restored (today's policy)
    conversation(bench, ["a.py", "b.py", "c.py"])
    model.steps.append(reply_text(SUMMARY_REPLY))
    model.steps.append(reply_text("Carrying on."))
    assert compactor.compact(bench.conv, bench.ports, "auto")
    main_request(bench)
    sent = model.requests[-1]
    first = "\n".join(b["text"] for b in sent.messages[0]["content"] if b["type"] == "text")
    assert "fix the parser" in first and "<analysis>" not in request_text(sent)
    assert "line 1 of c.py" in request_text(sent)  # the most recent file, restored
    assert "tool_use" not in json.dumps(sent.messages)


# --- failures change nothing -------------------------------------------------------------------------------


# (an empty reply that ended normally is a poor summary, not a failure: tests/compact/test_summary.py)
@pytest.mark.parametrize(
    "reply", ["API Error: 529 overloaded", "<analysis>only thinking, no summary</analysis>"]
)
def test_unusable_reply_leaves_conversation_and_transcript_untouched(
    tmp_path: Path, model: RoutedModel, reply: str
) -> None:
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events
    conversation(bench, ["a.py"])
    before_messages = list(bench.messages)
    before_bytes = bench.transcript_path.read_bytes()
    before_read = dict(bench.tool_ctx.read_files)
    model.steps.append(reply_text(reply))

    assert compactor.compact(bench.conv, bench.ports, "auto") is False

    assert bench.messages == before_messages
    assert bench.transcript_path.read_bytes() == before_bytes
    assert bench.tool_ctx.read_files == before_read
    assert [type(e) for e in events if isinstance(e, (CompactStarted, CompactFailed, CompactFinished))] == [
        CompactStarted,
        CompactFailed,
    ]
    assert bench.conv.breaker.failures == 1


def test_api_error_is_a_failure_that_changes_nothing(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events
    conversation(bench, ["a.py"])
    before = bench.transcript_path.read_bytes()
    model.steps.append(api_error(401))
    assert compactor.compact(bench.conv, bench.ports, "manual") is False
    assert bench.transcript_path.read_bytes() == before
    assert "401" in of_type(events, CompactFailed)[0].reason
    assert bench.conv.breaker.failures == 0  # manual failures don't feed the breaker


def test_ctrl_c_during_the_summary_cancels_and_changes_nothing(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events
    conversation(bench, ["a.py"])
    before = bench.transcript_path.read_bytes()
    messages = list(bench.messages)

    def press_ctrl_c(req: object) -> Interrupted:
        bench.cancel.set()  # the client stops reading the reply and raises, as it does on Ctrl-C
        return Interrupted()

    model.steps.append(press_ctrl_c)
    with pytest.raises(Interrupted):
        compactor.compact(bench.conv, bench.ports, "auto")
    assert bench.messages == messages
    assert bench.transcript_path.read_bytes() == before
    assert of_type(events, CompactFailed) == [CompactFailed("auto", "cancelled")]
    assert bench.conv.breaker.failures == 0


def test_disable_compact_says_why_and_sends_nothing(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(tmp_path, model_api=model, disable_compact=True)
    events = bench.events
    conversation(bench, ["a.py"])
    assert compactor.compact(bench.conv, bench.ports, "manual") is False
    assert of_type(events, Notice)[-1].text == "Compaction is disabled (DISABLE_COMPACT is set)"
    assert model.requests == []


def test_an_empty_conversation_is_not_compacted(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events
    assert compactor.compact(bench.conv, bench.ports, "manual") is False
    assert of_type(events, CompactFailed) == [CompactFailed("manual", "there is nothing to compact yet")]
    assert model.requests == [] and not bench.transcript_path.exists()


def test_a_conversation_smaller_than_what_a_compaction_leaves_has_nothing_to_compact(
    tmp_path: Path, model: RoutedModel
) -> None:
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events
    bench.add(user_prompt("What does the parser do?"))
    bench.add(assistant([{"type": "text", "text": "It splits the text into words."}]))
    before = bench.transcript_path.read_text()
    messages = list(bench.messages)

    assert compactor.compact(bench.conv, bench.ports, "manual") is False

    [failed] = of_type(events, CompactFailed)
    assert failed.reason.startswith("nothing to compact (")
    assert model.requests == []  # told before any model call
    assert bench.messages == messages and bench.transcript_path.read_text() == before


def test_a_compaction_that_would_grow_the_context_is_not_applied(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events
    conversation(bench, ["a.py"])
    pre = bench.view().tokens
    messages = list(bench.messages)
    # a summary longer than everything it replaces (within the summary's bound of 15% of T)
    model.steps.append(
        reply_text("<summary>" + "Every detail of the parser work, kept at length. " * 300 + "</summary>")
    )

    assert compactor.compact(bench.conv, bench.ports, "manual") is False

    [failed] = of_type(events, CompactFailed)
    assert failed.reason.startswith(f"nothing to compact ({pre:,} tokens; a compaction would leave ")
    assert bench.messages == messages and of_type(events, CompactFinished) == []


@pytest.mark.parametrize("files", [1, 2, 4])
def test_a_compaction_never_leaves_the_context_larger_than_it_was(
    tmp_path: Path, model: RoutedModel, files: int
) -> None:
    # the restored files are what goes first when they would make it grow: a.py alone restored beside the
    # summary and the working state would leave more than the history it replaces
    bench = make_bench(tmp_path, model_api=model)
    conversation(bench, [f"f{i}.py" for i in range(files)])
    model.steps.append(reply_text(SUMMARY_REPLY))

    assert compactor.compact(bench.conv, bench.ports, "manual") is True

    [done] = of_type(bench.events, CompactFinished)
    assert done.post_tokens < done.pre_tokens
    assert bench.view().tokens == done.post_tokens


# --- the post-compaction guard --------------------------------------------------------------------------


def test_still_over_threshold_is_kept_but_counted_as_a_failure(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(tmp_path, model_api=model, autocompact_pct=1)
    events = bench.events  # T = 1% of 180K = 1,800 tokens
    conversation(bench, ["a.py"])
    model.steps.append(
        reply_text("<summary>" + "a long summary that keeps every detail " * 400 + "</summary>")
    )
    assert compactor.compact(bench.conv, bench.ports, "auto") is True
    assert bench.messages[0].kind == "summary"
    assert of_type(events, CompactFailed) == [
        CompactFailed("auto", "still over the threshold after compacting")
    ]
    assert bench.conv.breaker.failures == 1
    assert compactor.nothing_new_since_compaction(bench.conv)


# --- restoration ---------------------------------------------------------------------------------------


def test_restores_most_recent_files_first_and_resets_read_state(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(
        tmp_path, model_api=model, cost_aware=False
    )  # the recent files restored (today's policy)
    paths = conversation(bench, [f"f{i}.py" for i in range(7)])
    read_round(bench, paths[2])  # read again: now the most recent
    (bench.cwd / "CLAUDE.md").write_text("# Project\nUse tabs.\n")
    claude = bench.cwd / "CLAUDE.md"
    read_round(bench, claude)
    paths[6].write_text("changed on disk after the read\n")
    paths[5].unlink()
    model.steps.append(reply_text(SUMMARY_REPLY))

    assert compactor.compact(bench.conv, bench.ports, "auto")

    restored = [m for m in bench.messages[1:] if m.kind == "meta" and ledger.SNAPSHOT_KEY not in m.extra]
    names = [next(p.name for p in paths if str(p.resolve()) + "." in m.text) for m in restored]
    assert names == ["f2.py", "f6.py", "f4.py", "f3.py", "f1.py"]  # f5 deleted, CLAUDE.md never
    assert "changed on disk after the read" in restored[1].text
    assert "     1\tline 1 of f2.py" in restored[0].text
    assert set(bench.tool_ctx.read_files) == {str(paths[i].resolve()) for i in (2, 6, 4, 3, 1)}


def test_restoration_budgets_scale_with_a_small_window(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(tmp_path, model_api=model, autocompact_pct=15)  # T = 27,000: budgets x 0.16
    bench.add(user_prompt("read the big files"))
    for i in range(3):
        read_round(bench, write_file(bench, f"big{i}.py", lines=2_000))
    kept: list[Message] = []
    plan = restore.plan_restore(bench.conv, bench.ports, kept, bench.messages)
    per_file = int(restore.FILE_TOKENS * thresholds.window_scale(bench.thresholds().auto_compact))
    assert len(plan.messages) == 3
    assert all(m.tokens <= per_file + 200 for m in plan.messages)
    assert "Read the file with offset=" in plan.messages[0].text
    assert plan.tokens <= int(restore.TOTAL_TOKENS * 0.17)
    small = restore.plan_restore(bench.conv, bench.ports, kept, bench.messages, room=per_file + 10)
    assert len(small.messages) == 1  # the room the compactor offers caps the total


def test_files_visible_in_kept_messages_are_not_restored_again(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(tmp_path, model_api=model)
    paths = conversation(bench, ["a.py", "b.py", "c.py"])
    kept = bench.messages[-2:]  # the Read of c.py and its result
    plan = restore.plan_restore(bench.conv, bench.ports, kept, bench.messages)
    assert [m.text.split(" you had read ")[1].split(".py")[0] + ".py" for m in plan.messages] == [
        str(paths[1].resolve()),
        str(paths[0].resolve()),
    ]
    restore.apply_read_state(bench.conv, plan, kept)
    assert set(bench.tool_ctx.read_files) == {str(p.resolve()) for p in paths}


def test_plan_file_is_restored(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(tmp_path, model_api=model)
    conversation(bench, ["a.py"])
    bench.session_dir.mkdir(parents=True, exist_ok=True)
    (bench.session_dir / "plan.md").write_text("1. parse\n2. test\n")
    plan = restore.plan_restore(bench.conv, bench.ports, [], bench.messages)
    assert "plan was being followed" in plan.messages[-1].text and "2. test" in plan.messages[-1].text


# --- the notes path (session memory) ---------------------------------------------------------------------


def test_notes_compaction_keeps_a_tail_and_records_the_segment(
    tmp_path: Path, model: RoutedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = make_bench(tmp_path, model_api=model, session_memory=True, cost_aware=False)
    events = bench.events
    conversation(bench, ["a.py", "b.py"])
    bench.add(
        assistant([{"type": "text", "text": "done"}], usage={"input_tokens": 90_000, "output_tokens": 5})
    )
    tail = bench.messages[-3:]
    monkeypatch.setattr(
        notes_compaction,
        "compact_with_notes",
        lambda conv, ports, trigger: Compaction("session-memory", "# Current State\nparsing", kept=tail),
    )

    assert compactor.compact(bench.conv, bench.ports, "auto")

    assert model.requests == []
    assert [m.uuid for m in bench.messages[1:4]] == [m.uuid for m in tail]
    assert bench.messages[3].usage is None  # stale after the compaction
    boundary = next(r for r in transcript_records(bench) if r.get("subtype") == "compact_boundary")
    assert boundary["compactMetadata"]["preservedSegment"] == {
        "headUuid": tail[0].uuid,
        "anchorUuid": bench.messages[0].uuid,
        "tailUuid": tail[-1].uuid,
    }
    assert of_type(events, CompactFinished)[0].method == "session-memory"
    # the working-state attachment follows the kept tail; b.py is visible in the kept Read, a.py comes back
    assert ledger.SNAPSHOT_KEY in bench.messages[4].extra
    restored = [m.text for m in bench.messages[5:]]
    assert len(restored) == 1 and "a.py" in restored[0]


def test_instructions_skip_the_notes(
    tmp_path: Path, model: RoutedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = make_bench(tmp_path, model_api=model, session_memory=True)
    conversation(bench, ["a.py"])
    monkeypatch.setattr(
        notes_compaction,
        "compact_with_notes",
        lambda conv, ports, trigger: pytest.fail("notes used despite instructions"),
    )
    model.steps.append(reply_text(SUMMARY_REPLY))
    assert compactor.compact(bench.conv, bench.ports, "manual", "keep the file names")
    assert "keep the file names" in last_user_text(model.requests[-1])


# --- hooks ---------------------------------------------------------------------------------------------


def test_a_resumed_session_restores_from_its_history(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(tmp_path, model_api=model)
    paths = conversation(bench, ["a.py", "b.py"])
    bench.tool_ctx.read_files.clear()  # as after --continue: nothing read in this process yet
    plan = restore.plan_restore(bench.conv, bench.ports, [], bench.messages)
    assert len(plan.messages) == 2
    assert all(str(p.resolve()) in m.text for m, p in zip(plan.messages, reversed(paths), strict=True))
    restore.apply_read_state(bench.conv, plan, [])
    assert set(bench.tool_ctx.read_files) == {str(p.resolve()) for p in paths}  # editable again


def test_a_file_the_session_keeps_editing_is_restored_first(tmp_path: Path, model: RoutedModel) -> None:
    bench = make_bench(
        tmp_path, model_api=model, cost_aware=False
    )  # the recent files restored (today's policy)
    paths = conversation(bench, [f"f{i}.py" for i in range(3)])
    plan = write_file(bench, "TODO.md", lines=4)
    for n in range(2):  # two successful edits of the plan, early in the session
        use = {"type": "tool_use", "id": f"toolu_plan{n}", "name": "Edit", "input": {"file_path": str(plan)}}
        bench.add(assistant([use], stop_reason="tool_use"))
        bench.add(tool_results([tool_result_block(f"toolu_plan{n}", "The file was updated.")]))
    paths += conversation(bench, [f"g{i}.py" for i in range(6)])  # six reads since: the plan is not recent
    model.steps.append(reply_text(SUMMARY_REPLY))
    assert compactor.compact(bench.conv, bench.ports, "auto")
    restored = [m for m in bench.messages[1:] if m.kind == "meta" and ledger.SNAPSHOT_KEY not in m.extra]
    assert str(plan.resolve()) in restored[0].text and "line 4 of TODO.md" in restored[0].text
    assert len(restored) == 5 and str(paths[-1].resolve()) in restored[1].text
