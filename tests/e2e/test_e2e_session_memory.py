"""End-to-end session memory: the real CLI in print mode, one turn per process (``--continue``), against
the loopback fake API. The scripted model reads files of ~5,500 tokens, two per reply, a batch per turn;
notes-update requests (the ones whose last user message names summary.md) are answered with Edit calls
on the notes, so at the threshold the agent compacts from the notes without asking for a summary."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from compact.compaction.notes_template import SECTIONS, TEMPLATE
from tests.fakeapi import (
    FakeAPI,
    Reply,
    estimate_tokens,
    is_compaction,
    is_notes_update,
    last_user_text,
    read_paths,
    request_text,
)
from tests.helpers.transcripts import records, transcripts
from tests.helpers.wire import plain

THRESHOLD = 167_000  # a 200K model: E = 180K, T = 167K
SUMMARY = (
    "<analysis>PRIVATE walk through the reads</analysis>\n"
    "<summary>1. Primary Request and Intent: read the project in batches.</summary>"
)
NOTES_PATH = re.compile(r"(/\S+/session-memory/summary\.md)")


def guide(name: str) -> str:
    return f"_{dict(SECTIONS)[name]}_"


def make_files(project: Path, count: int) -> list[Path]:
    """Source files of 220 lines, about 5,500 tokens each as the Read tool shows them."""
    paths = []
    (project / "src").mkdir(exist_ok=True)
    for n in range(count):
        lines = [
            f"def handler_{n}_{i}(request): return route(request, 'segment-{i}', retries={i % 5}, "
            f"mode='strict')"
            for i in range(220)
        ]
        path = project / "src" / f"handlers_{n:02d}.py"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def results_by_id(body: dict) -> dict[str, Any]:
    return {
        b["tool_use_id"]: b["content"]
        for m in body["messages"]
        if m["role"] == "user"
        for b in m["content"]
        if b.get("type") == "tool_result"
    }


def no_cache(value: Any) -> Any:
    """A copy without cache_control (the breakpoint moves with the tail)."""
    return json.loads(json.dumps(value).replace(', "cache_control": {"type": "ephemeral"}', ""))


class Model:
    """The scripted model: each turn reads its batch two files per reply, then says so."""

    def __init__(self, batches: list[list[Path]]):
        self.batches, self.turn, self.pos = batches, 0, 0

    def __call__(self, body: dict) -> Reply:
        if self.turn >= len(self.batches):
            return Reply.text("Every batch is read.")
        batch = self.batches[self.turn]
        if self.pos < len(batch):
            files = batch[self.pos : self.pos + 2]
            self.pos += len(files)
            return Reply.tools(
                [("Read", {"file_path": str(p)}) for p in files],
                text="Reading " + " and ".join(p.name for p in files) + ".",
            )
        self.turn, self.pos = self.turn + 1, 0
        return Reply.text(f"Batch {self.turn} is read.")


class NotesWriter:
    """Answers notes updates as a model would: Edit calls on the notes file, and nothing else."""

    def __init__(self) -> None:
        self.updates = 0

    def __call__(self, body: dict) -> Reply:
        self.updates += 1
        path = NOTES_PATH.search(last_user_text(body)).group(1)
        reads = read_paths(body)
        seen = Path(reads[-1]).name if reads else "nothing yet"
        return Reply(
            [
                {
                    "type": "tool_use",
                    "id": f"toolu_notes_{self.updates}_a",
                    "name": "Edit",
                    "input": {
                        "file_path": path,
                        "old_string": guide("Worklog"),
                        "new_string": f"{guide('Worklog')}\n- update {self.updates}: read through {seen}",
                    },
                },
                {
                    "type": "tool_use",
                    "id": f"toolu_notes_{self.updates}_b",
                    "name": "Edit",
                    "input": {
                        "file_path": path,
                        "old_string": guide("Current State"),
                        "new_string": f"{guide('Current State')}\nNOTE-{self.updates}: reading src/ in batches",
                    },
                },
            ]
        )


def turn(run_cli: Any, api: FakeAPI, prompt: str, first: bool = False, **env: str) -> None:
    res = run_cli(api, "-p", prompt, *([] if first else ["--continue"]), env=env, timeout=180)
    assert res.code == 0, res.stderr


@pytest.mark.fake_profile(
    "4.x",
    reason="a notes compaction mid tool loop keeps a tail; on the 5.5 family that tail's thinking can't follow a client-written summary, so the compaction is the server's summary there (compact/compaction/backend.py)",
)
def test_notes_carry_a_long_session_through_compaction_and_resume(run_cli, project: Path, isolated_env: Path):
    paths = make_files(project, 34)
    batches = [paths[i : i + 6] for i in range(0, 34, 6)]  # 6, 6, 6, 6, 6, 4
    notes = NotesWriter()
    with FakeAPI(context_window=200_000) as api:
        api.on(is_notes_update, notes)
        api.on(is_compaction, Reply.text(SUMMARY))
        api.on(lambda body: True, Model(batches))
        at_t = {"COMPACT_AGENT_COST_AWARE": "0"}  # the compaction checked is the one at T
        for k in range(len(batches)):
            turn(run_cli, api, f"Read batch {k + 1} of the sources.", first=k == 0, **at_t)
        before_resume = len(api.message_requests)
        turn(run_cli, api, "What next?", **at_t)
        before_focus = len(api.message_requests)
        turn(run_cli, api, "/compact focus on the parser", **at_t)

    assert api.violations == []
    sent = [r.body for r in api.message_requests]
    assert all(r.status == 200 for r in api.message_requests)
    updates = [b for b in sent if is_notes_update(b)]
    main = [b for b in sent[:before_resume] if not is_notes_update(b)]

    # notes updates ran along the way; each may only Edit the notes file, which holds every edit
    assert len(updates) >= 1 and notes.updates == len(updates)  # from 90% of T (notes_updater.update_levels)
    [path] = transcripts(isolated_env)
    notes_file = path.parent / path.stem / "session-memory" / "summary.md"
    for body in updates:
        text = last_user_text(body)
        assert str(notes_file) in text and "Edit" in text and "only" in text
    written = notes_file.read_text()
    assert all(f"# {name}\n{guide(name)}" in written for name, _ in SECTIONS)
    assert all(f"- update {n}: read through" in written for n in range(1, notes.updates + 1))
    assert oct(notes_file.stat().st_mode & 0o777) == "0o600"

    # one compaction, at the threshold, from the notes: no summary request
    assert not [b for b in sent[:before_focus] if is_compaction(b)]
    at = next(i for i, b in enumerate(main) if "NOTE-1:" in request_text(b))
    before, after = main[at - 1], main[at]
    assert estimate_tokens(before) >= THRESHOLD - 20_000
    assert 10_000 <= estimate_tokens(after) < THRESHOLD
    assert "NOTE-1:" in json.dumps(after["messages"][0]) and "- update 1:" in json.dumps(after["messages"][0])
    # the most recent messages follow verbatim: the last reads of `before`, the newest results unchanged;
    # an older one in the tail may be cleared as microcompact would (the cached prefix is rewritten
    # anyway), but only once a notes update saw it: nothing leaves the context unseen (issue 38)
    kept = [p for p in read_paths(after) if p in read_paths(before)]
    assert kept and kept == read_paths(before)[-len(kept) :]
    old_results = results_by_id(before)
    tail = list(results_by_id(after).items())
    cleared = [no_cache(content) == "[Old tool result content cleared]" for _, content in tail]
    assert (
        cleared == sorted(cleared, reverse=True) and not cleared[-1]
    )  # only the oldest go, never the newest
    seen = "".join(json.dumps(b) for b in updates[: len(updates)])
    for (tool_use_id, _), gone in zip(tail, cleared, strict=True):
        if gone:
            assert json.dumps(no_cache(old_results[tool_use_id]))[1:200] in seen
    for (use_id, content), gone in zip(tail, cleared, strict=True):
        if not gone and use_id in old_results:
            assert no_cache(content) == no_cache(old_results[use_id])
    assert all(estimate_tokens(b) < THRESHOLD for b in main[at:])

    # the boundary records the kept segment; the anchor is the summary right after it
    recs = records(path)
    [boundary] = [r for r in recs if r.get("subtype") == "compact_boundary"][:1]
    segment = boundary["compactMetadata"]["preservedSegment"]
    summary_rec = recs[recs.index(boundary) + 1]
    assert summary_rec.get("isCompactSummary") and segment["anchorUuid"] == summary_rec["uuid"]
    uuids = [r.get("uuid") for r in recs if r.get("type") in ("user", "assistant")]
    assert uuids.index(segment["headUuid"]) <= uuids.index(segment["tailUuid"])
    marks = [r for r in recs if r.get("type") == "session-memory"]
    assert marks and all(m["lastSummarizedUuid"] in uuids for m in marks)

    # --continue after the notes compaction sends what the live session would: notes, kept tail, prompt
    previous, resumed = main[-1], sent[before_resume]
    assert not is_notes_update(resumed)
    assert plain(resumed["messages"])[: len(previous["messages"])] == plain(previous["messages"])
    reply, prompt = plain(resumed["messages"])[len(previous["messages"]) :]
    assert reply == {
        "role": "assistant",
        "content": [{"type": "text", "text": f"Batch {len(batches)} is read."}],
    }
    assert "NOTE-1:" in json.dumps(resumed["messages"][0])
    assert prompt["content"][-1]["text"].startswith("What next?")

    # /compact with instructions always asks for an LLM summary
    [focus] = [b for b in sent[before_focus:] if is_compaction(b)]
    assert "focus on the parser" in last_user_text(focus)
    last_boundary = [r for r in records(path) if r.get("subtype") == "compact_boundary"][-1]
    assert last_boundary["compactMetadata"]["trigger"] == "manual"
    assert "preservedSegment" not in last_boundary["compactMetadata"]


def test_notes_still_equal_to_the_template_fall_back_to_the_llm_summary(
    run_cli, project: Path, isolated_env: Path
):
    paths = make_files(project, 14)
    # T = 33% of 180K = 59,400; the update comes from 90% of T. The client's own compactions: on the 5.5
    # family a tool loop's compaction is otherwise the server's summary (compact/compaction/backend.py)
    env = {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "33", "COMPACT_AGENT_SERVER_COMPACTION": "0"}
    with FakeAPI() as api:
        api.on(is_notes_update, Reply.text("Nothing worth noting yet."))  # no edit: notes stay the template
        api.on(is_compaction, Reply.text(SUMMARY))
        api.on(lambda body: True, Model([paths[:4], paths[4:]]))
        turn(run_cli, api, "Read batch 1 of the sources.", first=True, **env)
        turn(run_cli, api, "Read batch 2 of the sources.", **env)

    assert api.violations == []
    sent = [r.body for r in api.message_requests]
    assert [b for b in sent if is_notes_update(b)]
    # one summary (a candidate prepared in the first process, which ended before T, may be another)
    assert 1 <= len([b for b in sent if is_compaction(b)]) <= 2
    [path] = transcripts(isolated_env)
    recs = records(path)
    [boundary] = [r for r in recs if r.get("subtype") == "compact_boundary"]
    # "summarized up to here" was set before the compaction, so only the bare notes made it fall back
    assert any(r.get("type") == "session-memory" for r in recs[: recs.index(boundary)])
    assert "preservedSegment" not in boundary["compactMetadata"]
    assert (path.parent / path.stem / "session-memory" / "summary.md").read_text() == TEMPLATE
