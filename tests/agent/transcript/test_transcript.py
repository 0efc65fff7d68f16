"""The transcript writer and loader: our own sessions round-trip, Claude Code's real files load."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from agent.transcript.claude_code import same_model
from agent.transcript.listing import latest_session, list_sessions
from agent.transcript.loader import INTERRUPTED_BY_STOP, load_transcript
from core.messages import (
    Message,
    assistant,
    meta,
    to_api,
    tool_pairs_ok,
    tool_result_block,
    tool_results,
    user_prompt,
)
from core.transcript_writer import TranscriptWriter

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "transcripts"
FIXTURE_FILES = sorted(FIXTURES.glob("*.jsonl"))
SIDECHAIN_ONLY = "marot__spotter__agent-a2898e3.jsonl"
COMPACTED = "marot__spotter__4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
MODEL = "claude-test-1"


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def writer(path: Path, **kw) -> TranscriptWriter:
    return TranscriptWriter(path, "sess-1", "/proj", "0.1.0", **kw)


def reply(text: str, **kw) -> Message:
    return assistant(
        [{"type": "text", "text": text}],
        message_id=f"msg_{text[:8]}",
        model=MODEL,
        usage={"input_tokens": 10, "output_tokens": 5},
        **kw,
    )


def call(tid: str, text: str = "") -> Message:
    content = [{"type": "text", "text": text}] if text else []
    content.append({"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": "/a"}})
    return assistant(
        content,
        message_id=f"msg_{tid}",
        model=MODEL,
        stop_reason="tool_use",
        usage={"input_tokens": 20, "output_tokens": 7},
    )


def result(tid: str, text: str = "out") -> Message:
    return tool_results([tool_result_block(tid, text)])


# --- writer -----------------------------------------------------------------------------------------


def test_writer_creates_private_dirs_and_file_even_with_a_permissive_umask(tmp_path):
    path = tmp_path / "home" / "projects" / "p" / "s.jsonl"
    old = os.umask(0)
    try:
        w = writer(path)
        assert not path.exists()  # nothing is created before the first record
        w.append_message(user_prompt("hi"))
        w.close()
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o600
    for d in (path.parent, path.parent.parent, path.parent.parent.parent):
        assert d.stat().st_mode & 0o777 == 0o700


def test_message_records_chain_their_parents(tmp_path):
    path = tmp_path / "s.jsonl"
    p, a = user_prompt("hi"), reply("hello")
    with writer(path, last_uuid="earlier") as w:
        w.append_message(p)
        w.append_message(a)
        assert w.last_uuid == a.uuid
    recs = lines(path)
    assert [(r["parentUuid"], r["uuid"]) for r in recs] == [("earlier", p.uuid), (p.uuid, a.uuid)]
    assert recs[0] == {
        "parentUuid": "earlier",
        "isSidechain": False,
        "userType": "external",
        "cwd": "/proj",
        "sessionId": "sess-1",
        "version": "0.1.0",
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        "uuid": p.uuid,
        "timestamp": p.timestamp,
    }
    assert recs[1]["message"]["id"] == a.message_id and recs[1]["message"]["usage"] == a.usage


def test_records_are_compact_single_lines_and_state_records_get_ids(tmp_path):
    path = tmp_path / "s.jsonl"
    with writer(path) as w:
        w.append_message(user_prompt("line one\nline two"))
        rec = w.append_record({"type": "snip", "removedUuids": ["u1"], "reason": "done"})
        assert w.last_uuid is not None
    raw = path.read_text().splitlines()
    assert len(raw) == 2 and raw[1].startswith('{"type":"snip",')
    assert rec["sessionId"] == "sess-1" and rec["uuid"] and rec["timestamp"].endswith("Z")
    assert json.loads(raw[1]) == rec


def test_boundary_has_no_parent_and_parents_the_summary(tmp_path):
    path = tmp_path / "s.jsonl"
    p = user_prompt("hi")
    summary = meta("the summary").replace(kind="summary")
    with writer(path) as w:
        w.append_message(p)
        b = w.append_boundary(
            "manual", 154_000, p.uuid, {"headUuid": "h", "anchorUuid": summary.uuid, "tailUuid": "t"}
        )
        w.append_message(summary)
    recs = lines(path)
    assert recs[1] == b
    assert {
        k: b[k]
        for k in (
            "parentUuid",
            "logicalParentUuid",
            "type",
            "subtype",
            "content",
            "isMeta",
            "level",
            "compactMetadata",
            "isSidechain",
            "sessionId",
            "cwd",
            "version",
        )
    } == {
        "parentUuid": None,
        "logicalParentUuid": p.uuid,
        "type": "system",
        "subtype": "compact_boundary",
        "content": "Conversation compacted",
        "isMeta": False,
        "level": "info",
        "isSidechain": False,
        "compactMetadata": {
            "trigger": "manual",
            "preTokens": 154_000,
            "preservedSegment": {"headUuid": "h", "anchorUuid": summary.uuid, "tailUuid": "t"},
        },
        "sessionId": "sess-1",
        "cwd": "/proj",
        "version": "0.1.0",
    }
    assert recs[2]["parentUuid"] == b["uuid"] and recs[2]["isCompactSummary"] is True


def test_writer_redacts_the_secrets_and_keeps_the_records(tmp_path):
    path = tmp_path / "s.jsonl"
    key, token = "sk-ant-api03-abcdefghijklmnop", "oauth-token-0123456789"
    with writer(path, secret=(key, token, None)) as w:
        w.append_message(user_prompt("fine"))
        w.append_message(user_prompt(f"my key is {key} and my token {token}"))
        w.append_record({"type": "context-edit", "applied": [key]})
    text = path.read_text()
    assert key not in text and token not in text
    recs = lines(path)
    assert len(recs) == 3
    assert (
        recs[1]["message"]["content"][0]["text"]
        == "my key is [redacted API key] and my token [redacted API key]"
    )


def test_torn_last_line_loads_with_a_warning_and_nothing_earlier_lost(tmp_path):
    path = tmp_path / "s.jsonl"
    msgs = [user_prompt("one"), reply("two"), user_prompt("three"), reply("four")]
    with writer(path) as w:
        for m in msgs:
            w.append_message(m)
        whole = json.dumps(w.append_message(reply("five")))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - len(whole) // 2])  # kill -9 in the middle of the last write
    loaded = load_transcript(path, model=MODEL)
    assert loaded.messages == msgs
    assert loaded.last_uuid == msgs[-1].uuid
    assert loaded.warnings == [
        "s.jsonl: line 5 is incomplete (the session was interrupted while writing it); skipped"
    ]
    # the resumed session ends the torn line first, so its own records stay whole
    six = user_prompt("six")
    with writer(path, last_uuid=loaded.last_uuid) as w:
        w.append_message(six)
    again = load_transcript(path, model=MODEL)
    assert again.messages == [*msgs, six]
    assert again.warnings == ["s.jsonl: line 5 is not valid JSON; skipped"]


def test_torn_line_in_the_middle_names_its_line(tmp_path):
    path = tmp_path / "s.jsonl"
    a, b = user_prompt("one"), reply("two")
    with writer(path) as w:
        w.append_message(a)
        path.open("a").write('{"parentUuid": "x", "broken\n')
        w.append_message(b)
    loaded = load_transcript(path)
    assert loaded.messages == [a, b]
    assert loaded.warnings == ["s.jsonl: line 2 is not valid JSON; skipped"]


# --- loader: our own sessions ------------------------------------------------------------------------


def _kept_session(path: Path, mode: str) -> tuple[list[Message], dict]:
    """A session compacted once with a kept segment; returns the expected live list and facts."""
    p1, a1, r1, a2 = user_prompt("first"), call("t1"), result("t1", "big output one"), reply("did one")
    p2, a3, r2, a4 = (
        user_prompt("second"),
        call("t2", "reading"),
        result("t2", "big output two"),
        reply("did two"),
    )
    summary = meta("Summary of the first part").replace(kind="summary")
    restored = meta("Restored /a")
    p3, a5, r3 = user_prompt("third"), call("t3"), result("t3", "three")
    with writer(path) as w:
        for m in (p1, a1, r1):
            w.append_message(m)
        w.append_record(
            {"type": "content-replacement", "replacements": [{"toolUseId": "t1", "content": "R1"}]}
        )
        for m in (a2, p2, a3, r2):
            w.append_message(m)
        w.append_record(
            {"type": "content-replacement", "replacements": [{"toolUseId": "t2", "content": "R2"}]}
        )
        w.append_record({"type": "microcompact", "clearedToolUseIds": ["t1", "t2"]})
        w.append_message(a4)
        w.append_record({"type": "snip", "removedUuids": [p1.uuid, a4.uuid], "reason": "old"})
        w.append_record({"type": "session-memory", "lastSummarizedUuid": a2.uuid})
        w.append_boundary(
            "auto", 170_000, a4.uuid, {"headUuid": p2.uuid, "anchorUuid": summary.uuid, "tailUuid": a4.uuid}
        )
        w.append_message(summary)
        if mode == "rewritten":  # Claude Code style: the kept messages written again after the boundary
            for m in (p2, a3, r2, a4):
                w.append_message(m)
        if mode == "tail":
            w.last_uuid = a4.uuid
        w.append_message(restored)
        w.append_message(p3)
        w.append_message(a5)
        w.append_record(
            {"type": "content-replacement", "replacements": [{"toolUseId": "t3", "content": "R3"}]}
        )
        w.append_message(r3)
    kept = [p2, a3.replace(usage=None), r2, a4.replace(usage=None)]
    return [summary, *kept, restored, p3, a5, r3], {"p1": p1, "a2": a2, "a4": a4, "r3": r3}


@pytest.mark.parametrize("mode", ["anchor", "tail", "rewritten"])
def test_round_trip_with_a_kept_segment(tmp_path, mode):
    path = tmp_path / "s.jsonl"
    expected, facts = _kept_session(path, mode)
    loaded = load_transcript(path, model=MODEL)
    assert loaded.warnings == []
    assert [m.text or m.kind for m in loaded.messages] == [m.text or m.kind for m in expected]
    assert loaded.messages == expected
    assert loaded.last_uuid == facts["r3"].uuid
    assert loaded.session_id == "sess-1"
    assert loaded.boundary["compactMetadata"]["trigger"] == "auto"
    st = loaded.state
    assert st.replacements == {"t2": "R2", "t3": "R3"}
    assert st.cleared == {"t2"}
    assert st.snipped == {facts["a4"].uuid}
    assert st.last_summarized_uuid == facts["a2"].uuid
    assert loaded.pre_boundary_count == 8
    assert loaded.all_records_count == len(path.read_text().splitlines())
    assert tool_pairs_ok(loaded.messages)


def test_kept_segment_with_nothing_after_the_summary(tmp_path):
    path = tmp_path / "s.jsonl"
    p1, a1, p2, a2 = user_prompt("a"), reply("b"), user_prompt("c"), reply("d")
    summary = meta("sum").replace(kind="summary")
    with writer(path) as w:
        for m in (p1, a1, p2, a2):
            w.append_message(m)
        w.append_boundary(
            "auto", 9, a2.uuid, {"headUuid": p2.uuid, "anchorUuid": summary.uuid, "tailUuid": a2.uuid}
        )
        w.append_message(summary)
    loaded = load_transcript(path)
    assert loaded.messages == [summary, p2, a2.replace(usage=None)]


def test_two_compactions_only_the_last_counts(tmp_path):
    path = tmp_path / "s.jsonl"
    p1, a1, p2, a2, p3 = user_prompt("a"), reply("b"), user_prompt("c"), reply("d"), user_prompt("e")
    s1, s2 = meta("s1").replace(kind="summary"), meta("s2").replace(kind="summary")
    with writer(path) as w:
        w.append_message(p1)
        w.append_message(a1)
        w.append_boundary("manual", 100, a1.uuid)
        w.append_message(s1)
        w.append_message(p2)
        w.append_record(
            {"type": "collapse-commit", "collapsedUuids": [p2.uuid], "summary": "x", "placeholderUuid": "ph"}
        )
        w.append_message(a2)
        w.append_boundary("auto", 200, a2.uuid)
        w.append_message(s2)
        w.append_message(p3)
        w.append_record(
            {"type": "collapse-commit", "collapsedUuids": [p3.uuid], "summary": "y", "placeholderUuid": "ph2"}
        )
    loaded = load_transcript(path)
    assert loaded.messages == [s2, p3]
    assert loaded.boundary["compactMetadata"] == {"trigger": "auto", "preTokens": 200}
    assert loaded.state.collapses == [{"collapsedUuids": [p3.uuid], "summary": "y", "placeholderUuid": "ph2"}]
    assert loaded.pre_boundary_count == 5


def test_interrupted_compaction_falls_back_to_the_history(tmp_path):
    path = tmp_path / "s.jsonl"
    p1, a1 = user_prompt("a"), reply("b")
    with writer(path) as w:
        w.append_message(p1)
        w.append_message(a1)
        w.append_boundary("auto", 100, a1.uuid)  # the summary never made it to disk
    loaded = load_transcript(path)
    assert loaded.messages == [p1, a1] and loaded.boundary is None and loaded.last_uuid == a1.uuid


def test_unanswered_tool_calls_mid_history_are_dropped_and_the_last_ones_are_answered(tmp_path):
    path = tmp_path / "s.jsonl"
    p, a, lone = user_prompt("go"), call("t1", "let me look"), call("t2")
    with writer(path) as w:
        w.append_message(p)
        w.append_message(a)  # answered by nothing: its tool_use goes, its text stays
        w.append_message(lone)  # the leaf: the agent stopped while its call ran
    loaded = load_transcript(path)
    assert [m.content for m in loaded.messages] == [
        p.content,
        [{"type": "text", "text": "let me look"}],
        lone.content,
    ]
    [answer] = loaded.pending  # for the resuming session to record after the leaf
    assert answer.content == [tool_result_block("t2", INTERRUPTED_BY_STOP, True)]
    assert loaded.last_uuid == lone.uuid  # the writer still continues from the real leaf


def test_a_partly_answered_last_response_gets_answers_for_the_rest(tmp_path):
    path = tmp_path / "s.jsonl"
    p = user_prompt("go")
    both = assistant(
        [
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/a"}},
            {"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "/b"}},
        ]
    )
    first = tool_results([tool_result_block("t1", "contents of a")])
    with writer(path) as w:
        for m in (p, both, first):
            w.append_message(m)
    loaded = load_transcript(path)
    assert loaded.messages == [p, both, first]
    assert [m.content for m in loaded.pending] == [[tool_result_block("t2", INTERRUPTED_BY_STOP, True)]]
    assert tool_pairs_ok(loaded.messages + loaded.pending)


def test_orphan_tool_result_and_empty_reply_are_dropped(tmp_path):
    path = tmp_path / "s.jsonl"
    p = user_prompt("go")
    orphan = tool_results([tool_result_block("nope", "x"), {"type": "text", "text": "and a note"}])
    empty = assistant([{"type": "text", "text": "  "}], message_id="m", model=MODEL)
    with writer(path) as w:
        for m in (p, orphan, empty):
            w.append_message(m)
    loaded = load_transcript(path)
    assert [m.content for m in loaded.messages] == [p.content, [{"type": "text", "text": "and a note"}]]
    assert to_api(loaded.messages)[0]["role"] == "user"


def test_unknown_record_type_warns_once(tmp_path):
    path = tmp_path / "s.jsonl"
    with writer(path) as w:
        w.append_message(user_prompt("a"))
        w.append_record({"type": "mystery"})
        w.append_record({"type": "mystery"})
        w.append_record({"type": "progress"})
    loaded = load_transcript(path)
    assert loaded.warnings == ["s.jsonl: unknown record type 'mystery'; skipped"]
    assert len(loaded.messages) == 1


def test_thinking_of_another_model_is_dropped(tmp_path):
    path = tmp_path / "s.jsonl"
    thought = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    only = assistant([thought], message_id="m1", model="claude-old")
    both = assistant([thought, {"type": "text", "text": "answer"}], message_id="m2", model="claude-old")
    with writer(path) as w:
        for m in (user_prompt("q"), only, both):
            w.append_message(m)
    other = load_transcript(path, model="claude-new")
    assert [m.content for m in other.messages[1:]] == [[{"type": "text", "text": "answer"}]]
    for model in ("claude-old", None):
        assert [m.content for m in load_transcript(path, model=model).messages[1:]] == [
            [thought],
            both.content,
        ]


def test_a_dated_model_id_and_its_alias_are_the_same_model():
    assert same_model("claude-opus-4-1-20250805", "claude-opus-4-1")
    assert same_model("claude-sonnet-4-5", "claude-sonnet-4-5-20250929")
    assert same_model("claude-sonnet-4-5", "claude-sonnet-4-5[1m]")
    assert not same_model("claude-sonnet-4-5-20250929", "claude-sonnet-4-6")
    assert not same_model("claude-opus-4-1", "claude-opus-4")
    assert not same_model(None, "claude-opus-4-1")


def test_empty_file_and_missing_file(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    loaded = load_transcript(path)
    assert (loaded.messages, loaded.session_id, loaded.boundary, loaded.warnings) == ([], "s", None, [])
    with pytest.raises(OSError):
        load_transcript(tmp_path / "missing.jsonl")


# --- loader: Claude Code's own transcripts ----------------------------------------------------------


@pytest.fixture
def copies(tmp_path):
    digests = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in FIXTURE_FILES}
    for p in FIXTURE_FILES:
        shutil.copyfile(p, tmp_path / p.name)
    yield tmp_path
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in FIXTURE_FILES} == digests


def test_fixtures_are_present():
    assert len(FIXTURE_FILES) == 7


@pytest.mark.parametrize("name", [p.name for p in FIXTURE_FILES])
@pytest.mark.parametrize("model", [None, "claude-opus-4-6", "another-model"])
def test_claude_code_transcripts_load(copies, name, model):
    path = copies / name
    before = path.read_bytes()
    loaded = load_transcript(path, model=model)
    assert path.read_bytes() == before
    recs = lines(path)
    main_uuids = {
        r["uuid"] for r in recs if r.get("type") in ("user", "assistant") and not r.get("isSidechain")
    }
    if name == SIDECHAIN_ONLY:  # a sub-agent's own file: nothing of the main conversation to resume
        assert loaded.messages == [] and loaded.last_uuid is None
        assert loaded.warnings == [
            f"{name} holds only sub-agent (sidechain) records; there is no main conversation to resume"
        ]
        return
    ms = loaded.messages
    assert ms
    assert {m.uuid for m in ms} <= main_uuids  # no sidechain message, nothing invented
    assert loaded.last_uuid in main_uuids
    for a, b in zip(ms, ms[1:], strict=False):
        assert not (a.role == b.role == "assistant" and a.message_id and a.message_id == b.message_id)
    api = to_api(ms)
    assert api[0]["role"] == "user"
    assert tool_pairs_ok(ms)
    for m in ms:
        if m.role == "assistant":
            assert m.content
            if model is not None and m.model != model:
                assert not [b for b in m.content if b["type"] in ("thinking", "redacted_thinking")]
    assert loaded.session_id == recs[-1].get("sessionId", loaded.session_id)


def test_compacted_claude_code_session_starts_at_its_summary(copies):
    path = copies / COMPACTED
    recs = lines(path)
    at = next(i for i, r in enumerate(recs) if r.get("subtype") == "compact_boundary")
    summary = next(r for r in recs[at:] if r.get("isCompactSummary"))
    loaded = load_transcript(path, model="claude-opus-4-6")
    assert loaded.boundary == recs[at]
    assert loaded.messages[0].uuid == summary["uuid"] and loaded.messages[0].kind == "summary"
    assert loaded.messages[0].text.startswith("This session is being continued")
    after = {r["uuid"] for r in recs[at:] if r.get("uuid")}
    assert {m.uuid for m in loaded.messages} <= after
    before = [r for r in recs[:at] if r.get("type") in ("user", "assistant") and not r.get("isSidechain")]
    assert loaded.pre_boundary_count == len(before)
    assert loaded.all_records_count == len(recs)
    assert any(b["type"] == "thinking" for m in loaded.messages for b in m.content)
    assert loaded.warnings == []


def test_streamed_blocks_and_parallel_results_are_rebuilt(copies):
    loaded = load_transcript(copies / "marot__spotter__short.jsonl")
    shape = [(m.role, [b["type"] for b in m.content]) for m in loaded.messages]
    assert shape == [
        ("user", ["text"]),
        ("assistant", ["text", "thinking", "text", "tool_use", "tool_use"]),
        ("user", ["tool_result"]),
        ("user", ["tool_result"]),
        ("user", ["text"]),
    ]
    response = loaded.messages[1]
    # the last block's uuid (the one later records point at), the first block's timestamp
    assert (response.message_id, response.uuid, response.timestamp) == (
        "msg_01MKH1ccEGrZGNPvu8pYiiQa",
        "ed2ec700-d1ee-4a18-9100-da63317716fc",
        "2026-02-10T21:11:59.186Z",
    )
    api = to_api(loaded.messages)
    assert [b["tool_use_id"] for b in api[2]["content"] if b["type"] == "tool_result"] == [
        b["id"] for b in response.tool_uses
    ]


def test_images_are_preserved(copies):
    user = load_transcript(copies / "moredip__session-share__images-in-user-messages.jsonl")
    assert any(b["type"] == "image" and b["source"]["data"] for m in user.messages for b in m.content)
    tools = load_transcript(copies / "moredip__session-share__images-in-tool-results.jsonl")
    results = [b for m in tools.messages for b in m.tool_results]
    assert any(
        isinstance(r["content"], list) and any(c["type"] == "image" for c in r["content"]) for r in results
    )


# --- listing ------------------------------------------------------------------------------------------


def test_latest_and_list_sessions(tmp_path, copies):
    proj = tmp_path / "proj"
    old, new = proj / "old.jsonl", proj / "new.jsonl"
    with writer(old) as w:
        w.append_message(user_prompt("fix the   parser\nplease " + "x" * 100))
        w.append_message(reply("ok"))
    with writer(new) as w:
        w.append_message(meta("injected context"))
        w.append_message(
            user_prompt("<command-name>/review</command-name>\n<command-args>main.py</command-args>")
        )
    (proj / "empty.jsonl").write_bytes(b"")
    (proj / "notes.txt").write_text("x")
    os.utime(old, (1_000_000, 1_000_000))
    assert latest_session(proj) == new
    assert latest_session(tmp_path / "nowhere") is None
    infos = list_sessions(proj)
    assert [(i.path, i.session_id, i.message_count) for i in infos] == [(new, "new", 2), (old, "old", 2)]
    assert infos[0].first_prompt == "/review main.py"
    assert infos[1].first_prompt == "fix the parser please " + "x" * 57 + "…"
    assert len(infos[1].first_prompt) == 80
    assert infos[1].mtime.timestamp() == 1_000_000
    images = [i for i in list_sessions(copies) if i.session_id.endswith("images-in-user-messages")]
    assert images[0].first_prompt == "what's this an image of?"
