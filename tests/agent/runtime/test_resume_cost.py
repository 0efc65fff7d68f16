"""What resuming a long session does before its first request: only the part of the transcript it sends
is read and measured (docs/files.md: a long session resumes about as fast as a short one)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import core.tokens as tokens
from agent.frontend import commands
from agent.runtime import lifecycle
from agent.runtime.loop import run_turn
from compact.stages.micro import CLEARED
from tests.fakeapi import FakeAPI, Reply
from tests.helpers.session import make_session

ROUNDS = 30
RESULT_CHARS = 3_000


def claude_code_session(path: Path, cwd: Path, when: datetime) -> None:
    """A Claude Code transcript: an old segment, a compaction boundary, its summary, then a live tail of
    ROUNDS Bash calls with results of RESULT_CHARS characters, the last reply at ``when``."""
    recs: list[dict[str, Any]] = []
    parent: str | None = None
    t = when - timedelta(minutes=2 * ROUNDS + 10)

    def add(rec: dict[str, Any]) -> dict[str, Any]:
        nonlocal parent, t
        t += timedelta(minutes=1)
        n = len(recs)
        rec = {
            "parentUuid": parent,
            "isSidechain": False,
            "cwd": str(cwd),
            "sessionId": "cc-session",
            "uuid": f"00000000-0000-4000-8000-{n:012d}",
            "timestamp": t.isoformat().replace("+00:00", "Z"),
            **rec,
        }
        recs.append(rec)
        parent = rec["uuid"]
        return rec

    def user(content: Any, **extra: Any) -> dict[str, Any]:
        return add({"type": "user", "message": {"role": "user", "content": content}, **extra})

    def reply(n: int, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
        usage = {"input_tokens": 5, "cache_read_input_tokens": 1_000 + 900 * n, "output_tokens": 30}
        message = {"id": f"msg_{n:04d}", "role": "assistant", "model": "claude-sonnet-4-6"}
        return add(
            {
                "type": "assistant",
                "message": {**message, "content": content, "stop_reason": stop, "usage": usage},
            }
        )

    user("OLD-PROMPT start the work")
    reply(0, [{"type": "text", "text": "OLD-REPLY"}], "end_turn")
    before = parent
    parent = None
    add({"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
         "logicalParentUuid": before, "compactMetadata": {"trigger": "auto", "preTokens": 150_000}})  # fmt: skip
    user("SUMMARY-OF-THE-OLD-PART", isCompactSummary=True, isVisibleInTranscriptOnly=True)
    user("LIVE-PROMPT go through the logs")
    for n in range(1, ROUNDS + 1):
        call = reply(n, [{"type": "tool_use", "id": f"toolu_{n:04d}", "name": "Bash", "input": {"command": f"cat log{n}"}}], "tool_use")  # fmt: skip
        body = (f"LOG-{n:04d} " + "entry ok " * RESULT_CHARS)[:RESULT_CHARS]
        user([{"type": "tool_result", "tool_use_id": f"toolu_{n:04d}", "content": body}], sourceToolAssistantUUID=call["uuid"])  # fmt: skip
    reply(ROUNDS + 1, [{"type": "text", "text": "LIVE-REPLY the logs are read"}], "end_turn")
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_a_resume_measures_only_what_its_first_request_sends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache went cold two days ago, so the first request clears all but the newest results. Before
    it, nothing tokenizes the cleared ones: not the resumed compaction's "a → b" (counted when /summary
    asks), not microcompact telling which results to clear."""
    enc = tokens.encoding()
    assert enc is not None
    tokenized: list[str] = []

    class Counting:
        def encode_ordinary(self, text: str) -> list[int]:
            tokenized.append(text)
            return list(enc.encode_ordinary(text))

    path = tmp_path / "cc.jsonl"
    with FakeAPI() as api:
        session, _ = make_session(tmp_path, api, model="claude-sonnet-4-6", model_explicit=True)
        claude_code_session(path, session.settings.cwd, datetime.now(timezone.utc) - timedelta(days=2))
        monkeypatch.setattr(tokens, "_encoding", Counting())
        resumed = lifecycle.open_session(session.settings, emit=lambda e: None, ask=None, resume=str(path))
        api.add(Reply.text("GOING-ON"))
        run_turn(resumed, "RESUMED go on")
        before_first = list(tokenized)
        sent = api.message_requests[0].body
        api.check()
    results = [b["content"] for m in sent["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]  # fmt: skip
    assert len(results) == ROUNDS and results[: ROUNDS - 5] == [CLEARED] * (ROUNDS - 5)
    assert "LOG-0030" in results[-1] and "SUMMARY-OF-THE-OLD-PART" in json.dumps(sent["messages"][0])
    cleared_logs = [t for t in before_first if any(f"LOG-{n:04d}" in t for n in range(1, ROUNDS - 4))]
    assert cleared_logs == []
    # the size the compaction left: what the first reply after it read (it was the whole tail's estimate,
    # the size now, which tokenized every result before the first request)
    assert resumed.conv.last_compaction is not None
    assert resumed.conv.last_compaction.post_tokens == 5 + 1_000 + 900
    shown = commands.run(resumed, "/summary").text
    assert (
        shown.startswith("Summary from the last compaction (auto · ") and "SUMMARY-OF-THE-OLD-PART" in shown
    )


def test_a_resumed_session_reads_the_last_compactions_arithmetic_as_the_live_one_did(tmp_path: Path) -> None:
    """What the next compaction's arithmetic reads of the last one (its tail, what it wrote to the prompt
    cache, the seen results it kept) comes back from its compact_result record: without it a resumed
    session knew no tail, kept the usual tail again and priced the reset with no written figure, so it
    compacted where the live session would not have."""
    from compact.compaction import economics
    from compact.compaction.compactor import compact_result_record

    path = tmp_path / "cc.jsonl"
    with FakeAPI() as api:
        session, _ = make_session(tmp_path, api, model="claude-sonnet-4-6", model_explicit=True)
        claude_code_session(path, session.settings.cwd, datetime.now(timezone.utc))
        recs = [json.loads(line) for line in path.read_text().splitlines()]
        live = {r["uuid"]: r for r in recs if r.get("type") == "user"}
        result_of = {  # the user record holding each call's result
            b["tool_use_id"]: uuid
            for uuid, r in live.items()
            if isinstance(r["message"]["content"], list)
            for b in r["message"]["content"]
        }
        facts = {
            "tail_uuid": result_of["toolu_0010"],
            "written": 7_345,
            "kept_seen": ("toolu_0009", "toolu_0010"),
            "kept_seen_tokens": 1_500,
            "lean": False,
        }
        at = next(i for i, r in enumerate(recs) if r.get("isCompactSummary")) + 1
        record = compact_result_record(2_000, None, "auto", 150_000, "", facts)
        path.write_text("".join(json.dumps(r) + "\n" for r in [*recs[:at], record, *recs[at:]]))
        resumed = lifecycle.open_session(session.settings, emit=lambda e: None, ask=None, resume=str(path))
    last = resumed.conv.last_compaction
    assert last is not None
    assert (last.tail_uuid, last.written, last.kept_seen, last.kept_seen_tokens, last.lean) == tuple(
        facts.values()
    )
    # the replies after the tail only read on: the verdict the live session would reach
    assert economics.tail_unused(resumed.conv)
