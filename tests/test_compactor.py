"""compact.compactor and compact.restore against the real loopback fake API: the whole compaction, its
records, hooks, restoration, failures that change nothing, and the post-compaction guard.

The helpers at the top (``make_session``, ``read_round``, ``main_request``...) are shared with
test_summary.py and test_autocompact.py.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from agent.context import view
from agent.session import Session
from compact import compactor, restore
from compact.result import Compaction
from core.errors import Interrupted
from core.events import CompactFailed, CompactFinished, CompactStarted, Notice
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt
from tests import conftest
from tests.fakeapi import FakeAPI, Reply, last_user_text, request_text
from tools.read import number_lines, record_read

SUMMARY_REPLY = ("<analysis>private walk through the conversation</analysis>\n"
                 "<summary>1. Primary Request and Intent: fix the parser\n9. Optional Next Step: none</summary>")


# --- helpers --------------------------------------------------------------------------------------------


def make_session(tmp_path: Path, api: FakeAPI, **settings: Any) -> tuple[Session, list[Any]]:
    settings.setdefault("session_memory", False)
    return conftest.make_session(tmp_path, api, home=tmp_path / "agent-home", permission_mode="bypassPermissions",
                                 environ=dict(os.environ), **settings)


def write_file(session: Session, name: str, lines: int = 20, width: int = 6) -> Path:
    path = session.settings.cwd / name
    path.write_text("".join(f"line {i} of {name} " + "word " * width + "\n" for i in range(1, lines + 1)))
    return path


def read_round(session: Session, path: Path, text: str = "Reading it.") -> None:
    """An assistant Read call and its result, as the loop would record them (read state included)."""
    use_id = f"toolu_{path.stem}_{len(session.messages)}"
    session.add(assistant([{"type": "text", "text": text},
                           {"type": "tool_use", "id": use_id, "name": "Read", "input": {"file_path": str(path)}}],
                          stop_reason="tool_use"))
    body = number_lines(path.read_text().splitlines(), 1)
    session.add(tool_results([tool_result_block(use_id, body)]))
    record_read(session.tool_ctx, path)


def conversation(session: Session, files: list[str]) -> list[Path]:
    session.add(user_prompt("Please fix the parser in this project. Never touch the secrets/ directory."))
    paths = []
    for name in files:
        path = write_file(session, name)
        read_round(session, path)
        paths.append(path)
    return paths


def main_request(session: Session) -> Message:
    """One request of the main conversation (the prefix the compaction request should read from the cache)."""
    current = view(session)
    return session.client.stream(session.request(current.api), cancel=session.cancel, emit_text=False)


def transcript_records(session: Session) -> list[dict[str, Any]]:
    return [json.loads(line) for line in session.transcript_path.read_text().splitlines() if line.strip()]


def of_type(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def hook(command: str, matcher: str | None = None, timeout: float | None = None) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        spec["timeout"] = timeout
    group: dict[str, Any] = {"hooks": [spec]}
    if matcher is not None:
        group["matcher"] = matcher
    return [group]


@pytest.fixture
def api(fake_api: FakeAPI):
    yield fake_api
    assert fake_api.violations == []


# --- a compaction that works ------------------------------------------------------------------------------


def test_compaction_replaces_history_with_summary_and_writes_boundary(tmp_path: Path, api: FakeAPI) -> None:
    session, events = make_session(tmp_path, api)
    conversation(session, [f"m{i}.py" for i in range(8)])
    old = list(session.messages)
    api.reply_text(SUMMARY_REPLY)

    assert compactor.compact(session, "auto") is True

    first = session.messages[0]
    assert first.kind == "summary"
    assert "1. Primary Request and Intent: fix the parser" in first.text
    assert "private walk" not in first.text and "<analysis>" not in first.text
    assert str(session.transcript_path) in first.text
    assert "Carry on with the task" in first.text and "do not ask the user" in first.text
    recs = transcript_records(session)
    boundary = next(r for r in recs if r.get("subtype") == "compact_boundary")
    after = recs[recs.index(boundary) + 1]
    assert boundary["parentUuid"] is None
    assert boundary["logicalParentUuid"] == old[-1].uuid
    assert boundary["compactMetadata"]["trigger"] == "auto"
    assert boundary["compactMetadata"]["preTokens"] > 0
    assert after["isCompactSummary"] is True and after["parentUuid"] == boundary["uuid"]
    assert [r["uuid"] for r in recs if r.get("type") in ("user", "assistant")][: len(old)] == [m.uuid for m in old]
    finished = of_type(events, CompactFinished)
    assert [(e.trigger, e.method) for e in finished] == [("auto", "summary")]
    assert finished[0].post_tokens < finished[0].pre_tokens
    assert of_type(events, CompactStarted) == [CompactStarted("auto")]
    assert session.last_compaction["pre_messages"] == old
    assert session.compact_failures == 0


def test_manual_summary_does_not_tell_the_model_to_carry_on(tmp_path: Path, api: FakeAPI) -> None:
    session, _ = make_session(tmp_path, api)
    conversation(session, ["a.py"])
    api.reply_text(SUMMARY_REPLY)
    assert compactor.compact(session, "manual")
    assert "Carry on" not in session.messages[0].text
    boundary = next(r for r in transcript_records(session) if r.get("subtype") == "compact_boundary")
    assert boundary["compactMetadata"]["trigger"] == "manual"


def test_the_next_main_request_is_the_compacted_view(tmp_path: Path, api: FakeAPI) -> None:
    session, _ = make_session(tmp_path, api)
    conversation(session, ["a.py", "b.py", "c.py"])
    api.reply_text(SUMMARY_REPLY)
    api.reply_text("Carrying on.")
    assert compactor.compact(session, "auto")
    main_request(session)
    body = api.message_requests[-1].body
    first = "\n".join(b["text"] for b in body["messages"][0]["content"] if b["type"] == "text")
    assert "fix the parser" in first and "<analysis>" not in request_text(body)
    assert "line 1 of c.py" in request_text(body)  # the most recent file, restored
    assert "tool_use" not in json.dumps(body["messages"])


# --- failures change nothing -------------------------------------------------------------------------------


@pytest.mark.parametrize("reply", ["", "API Error: 529 overloaded", "   "])
def test_unusable_reply_leaves_conversation_and_transcript_untouched(tmp_path: Path, api: FakeAPI, reply: str) -> None:
    session, events = make_session(tmp_path, api)
    conversation(session, ["a.py"])
    before_messages = list(session.messages)
    before_bytes = session.transcript_path.read_bytes()
    before_read = dict(session.tool_ctx.read_files)
    api.add(Reply([{"type": "text", "text": reply}] if reply else []))

    assert compactor.compact(session, "auto") is False

    assert session.messages == before_messages
    assert session.transcript_path.read_bytes() == before_bytes
    assert session.tool_ctx.read_files == before_read
    assert [type(e) for e in events if isinstance(e, (CompactStarted, CompactFailed, CompactFinished))] == \
        [CompactStarted, CompactFailed]
    assert session.compact_failures == 1


def test_api_error_is_a_failure_that_changes_nothing(tmp_path: Path, api: FakeAPI) -> None:
    session, events = make_session(tmp_path, api)
    conversation(session, ["a.py"])
    before = session.transcript_path.read_bytes()
    api.error(401)
    assert compactor.compact(session, "manual") is False
    assert session.transcript_path.read_bytes() == before
    assert "401" in of_type(events, CompactFailed)[0].reason
    assert session.compact_failures == 0  # manual failures don't feed the breaker


def test_ctrl_c_during_the_summary_cancels_and_changes_nothing(tmp_path: Path, api: FakeAPI) -> None:
    session, events = make_session(tmp_path, api)
    conversation(session, ["a.py"])
    before = session.transcript_path.read_bytes()
    messages = list(session.messages)

    def press_ctrl_c(body: dict) -> Reply:
        session.cancel.set()
        return Reply.text("<summary>too late</summary>")

    api.on(lambda body: True, press_ctrl_c)
    with pytest.raises(Interrupted):
        compactor.compact(session, "auto")
    assert session.messages == messages
    assert session.transcript_path.read_bytes() == before
    assert of_type(events, CompactFailed) == [CompactFailed("auto", "cancelled")]
    assert session.compact_failures == 0


def test_disable_compact_says_why_and_sends_nothing(tmp_path: Path, api: FakeAPI) -> None:
    session, events = make_session(tmp_path, api, disable_compact=True)
    conversation(session, ["a.py"])
    assert compactor.compact(session, "manual") is False
    assert of_type(events, Notice)[-1].text == "Compaction is disabled (DISABLE_COMPACT is set)"
    assert api.message_requests == []


def test_an_empty_conversation_is_not_compacted(tmp_path: Path, api: FakeAPI) -> None:
    session, events = make_session(tmp_path, api)
    assert compactor.compact(session, "manual") is False
    assert of_type(events, CompactFailed) == [CompactFailed("manual", "there is nothing to compact yet")]
    assert api.message_requests == [] and not session.transcript_path.exists()


# --- the post-compaction guard --------------------------------------------------------------------------


def test_still_over_threshold_is_kept_but_counted_as_a_failure(tmp_path: Path, api: FakeAPI) -> None:
    session, events = make_session(tmp_path, api, autocompact_pct=1)  # T = 1% of 180K = 1,800 tokens
    conversation(session, ["a.py"])
    api.reply_text("<summary>" + "a long summary that keeps every detail " * 400 + "</summary>")
    assert compactor.compact(session, "auto") is True
    assert session.messages[0].kind == "summary"
    assert of_type(events, CompactFailed) == [CompactFailed("auto", "still over the threshold after compacting")]
    assert session.compact_failures == 1
    assert compactor.nothing_new_since_compaction(session)


# --- restoration ---------------------------------------------------------------------------------------


def test_restores_most_recent_files_first_and_resets_read_state(tmp_path: Path, api: FakeAPI) -> None:
    session, _ = make_session(tmp_path, api)
    paths = conversation(session, [f"f{i}.py" for i in range(7)])
    read_round(session, paths[2])  # read again: now the most recent
    (session.settings.cwd / "CLAUDE.md").write_text("# Project\nUse tabs.\n")
    claude = session.settings.cwd / "CLAUDE.md"
    read_round(session, claude)
    paths[6].write_text("changed on disk after the read\n")
    paths[5].unlink()
    api.reply_text(SUMMARY_REPLY)

    assert compactor.compact(session, "auto")

    restored = [m for m in session.messages[1:] if m.kind == "meta"]
    names = [next(p.name for p in paths if str(p.resolve()) + "." in m.text) for m in restored]
    assert names == ["f2.py", "f6.py", "f4.py", "f3.py", "f1.py"]  # f5 deleted, CLAUDE.md never
    assert "changed on disk after the read" in restored[1].text
    assert "     1\tline 1 of f2.py" in restored[0].text
    assert set(session.tool_ctx.read_files) == {str(paths[i].resolve()) for i in (2, 6, 4, 3, 1)}


def test_restoration_budgets_scale_with_a_small_window(tmp_path: Path, api: FakeAPI) -> None:
    session, _ = make_session(tmp_path, api, autocompact_pct=15)  # T = 27,000: budgets x 0.16
    session.add(user_prompt("read the big files"))
    for i in range(3):
        read_round(session, write_file(session, f"big{i}.py", lines=2_000))
    kept: list[Message] = []
    plan = restore.plan_restore(session, kept, session.messages)
    per_file = int(restore.FILE_TOKENS * restore.budget_scale(session.thresholds().auto_compact))
    assert len(plan.messages) == 3
    assert all(m.tokens <= per_file + 200 for m in plan.messages)
    assert "Read the file with offset=" in plan.messages[0].text
    assert plan.tokens <= int(restore.TOTAL_TOKENS * 0.17)
    small = restore.plan_restore(session, kept, session.messages, room=per_file + 10)
    assert len(small.messages) == 1  # the room the compactor offers caps the total


def test_files_visible_in_kept_messages_are_not_restored_again(tmp_path: Path, api: FakeAPI) -> None:
    session, _ = make_session(tmp_path, api)
    paths = conversation(session, ["a.py", "b.py", "c.py"])
    kept = session.messages[-2:]  # the Read of c.py and its result
    plan = restore.plan_restore(session, kept, session.messages)
    assert [m.text.split(" you had read ")[1].split(".py")[0] + ".py" for m in plan.messages] == \
        [str(paths[1].resolve()), str(paths[0].resolve())]
    restore.apply_read_state(session, plan, kept)
    assert set(session.tool_ctx.read_files) == {str(p.resolve()) for p in paths}


def test_plan_file_is_restored(tmp_path: Path, api: FakeAPI) -> None:
    session, _ = make_session(tmp_path, api)
    conversation(session, ["a.py"])
    session.session_dir.mkdir(parents=True, exist_ok=True)
    (session.session_dir / "plan.md").write_text("1. parse\n2. test\n")
    plan = restore.plan_restore(session, [], session.messages)
    assert "plan was being followed" in plan.messages[-1].text and "2. test" in plan.messages[-1].text


# --- the notes path (session memory) ---------------------------------------------------------------------


def test_notes_compaction_keeps_a_tail_and_records_the_segment(tmp_path: Path, api: FakeAPI,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    session, events = make_session(tmp_path, api, session_memory=True)
    conversation(session, ["a.py", "b.py"])
    session.add(assistant([{"type": "text", "text": "done"}], usage={"input_tokens": 90_000, "output_tokens": 5}))
    tail = session.messages[-3:]
    from compact import session_memory

    monkeypatch.setattr(session_memory, "compact_with_notes",
                        lambda s, trigger: Compaction("session-memory", "# Current State\nparsing", kept=tail))

    assert compactor.compact(session, "auto")

    assert api.message_requests == []
    assert [m.uuid for m in session.messages[1:4]] == [m.uuid for m in tail]
    assert session.messages[3].usage is None  # stale after the compaction
    boundary = next(r for r in transcript_records(session) if r.get("subtype") == "compact_boundary")
    assert boundary["compactMetadata"]["preservedSegment"] == {
        "headUuid": tail[0].uuid, "anchorUuid": session.messages[0].uuid, "tailUuid": tail[-1].uuid}
    assert of_type(events, CompactFinished)[0].method == "session-memory"
    # b.py is visible in the kept Read; a.py comes back from disk
    restored = [m.text for m in session.messages[4:]]
    assert len(restored) == 1 and "a.py" in restored[0]


def test_instructions_skip_the_notes(tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    session, _ = make_session(tmp_path, api, session_memory=True)
    conversation(session, ["a.py"])
    fake = types.ModuleType("compact.session_memory")
    fake.compact_with_notes = lambda s, trigger: pytest.fail("notes used despite instructions")
    monkeypatch.setitem(sys.modules, "compact.session_memory", fake)
    api.reply_text(SUMMARY_REPLY)
    assert compactor.compact(session, "manual", "keep the file names")
    assert "keep the file names" in last_user_text(api.message_requests[-1].body)


# --- hooks ---------------------------------------------------------------------------------------------


def test_pre_compact_hook_output_reaches_the_summary_request(tmp_path: Path, api: FakeAPI) -> None:
    hooks = {"PreCompact": hook("echo 'Preserve the list of modified files.'", matcher="auto")
             + hook("echo 'manual only'", matcher="manual")}
    session, _ = make_session(tmp_path, api, hooks=hooks)
    conversation(session, ["a.py"])
    (session.settings.cwd / "CLAUDE.md").write_text("# Compact Instructions\nMention the test command.\n")
    api.reply_text(SUMMARY_REPLY)
    assert compactor.compact(session, "auto")
    text = last_user_text(api.message_requests[-1].body)
    assert "<analysis>" in text and "<summary>" in text
    extra = text.split("Additional instructions:")[1]
    assert extra.index("Preserve the list of modified files.") < extra.index("Mention the test command.")
    assert "manual only" not in text


def test_custom_instructions_come_first(tmp_path: Path, api: FakeAPI) -> None:
    session, _ = make_session(tmp_path, api, hooks={"PreCompact": hook("echo from-the-hook")})
    conversation(session, ["a.py"])
    (session.settings.cwd / "CLAUDE.md").write_text("## Compact Instructions\nfrom-claude-md\n")
    api.reply_text(SUMMARY_REPLY)
    assert compactor.compact(session, "manual", "from-the-command")
    extra = last_user_text(api.message_requests[-1].body).split("Additional instructions:")[1]
    assert extra.index("from-the-command") < extra.index("from-the-hook") < extra.index("from-claude-md")


def test_session_start_and_post_compact_hooks(tmp_path: Path, api: FakeAPI) -> None:
    seen = tmp_path / "post.json"
    hooks = {"SessionStart": hook("echo 'You are on branch feature/x.'", matcher="compact")
             + hook("echo 'startup only'", matcher="startup"),
             "PostCompact": hook(f"cat > {seen}")}
    session, events = make_session(tmp_path, api, hooks=hooks)
    conversation(session, ["a.py"])
    api.reply_text(SUMMARY_REPLY)
    api.reply_text("ok")
    assert compactor.compact(session, "auto")
    main_request(session)
    body = api.message_requests[-1].body
    assert "You are on branch feature/x." in request_text(body)
    assert "startup only" not in request_text(body)
    payload = json.loads(seen.read_text())
    assert payload["hook_event_name"] == "PostCompact" and payload["trigger"] == "auto"
    assert payload["compact_summary"].startswith("1. Primary Request and Intent")
    assert "SessionStart hook output added to the context" in of_type(events, CompactFinished)[0].hook_messages


def test_failing_and_hanging_hooks_are_reported_and_compaction_proceeds(tmp_path: Path, api: FakeAPI) -> None:
    hooks = {"PreCompact": hook("echo broken >&2; exit 3") + hook("sleep 5", timeout=1)}
    session, events = make_session(tmp_path, api, hooks=hooks)
    conversation(session, ["a.py"])
    api.reply_text(SUMMARY_REPLY)
    assert compactor.compact(session, "auto")
    notices = [e.text for e in of_type(events, Notice)]
    assert any("failed (exit 3): broken" in n for n in notices)
    assert any("timed out after 1s" in n for n in notices)
    assert of_type(events, CompactFinished)


def test_a_resumed_session_restores_from_its_history(tmp_path: Path, api: FakeAPI) -> None:
    session, _ = make_session(tmp_path, api)
    paths = conversation(session, ["a.py", "b.py"])
    session.tool_ctx.read_files.clear()  # as after --continue: nothing read in this process yet
    plan = restore.plan_restore(session, [], session.messages)
    assert len(plan.messages) == 2
    assert all(str(p.resolve()) in m.text for m, p in zip(plan.messages, reversed(paths), strict=True))
    restore.apply_read_state(session, plan, [])
    assert set(session.tool_ctx.read_files) == {str(p.resolve()) for p in paths}  # editable again
