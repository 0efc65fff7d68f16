"""A session resumed after compactions (agent.transcript.loader, agent.runtime.lifecycle) over what compaction wrote on the bench: the server's summary, the server's clearing, committed collapses, overlapping kept tails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.config.settings import Settings
from agent.runtime.lifecycle import open_session
from agent.transcript.loader import load_transcript
from compact.compaction import compactor
from compact.compaction.notes import ensure_notes
from compact.compaction.notes_template import TEMPLATE
from compact.context.context_editing import AUTO_AT_LEAST, AUTO_TRIGGER
from compact.decision.config import CompactConfig
from compact.decision.tokens import CLEARED, count_tokens
from compact.workers import collapse_worker
from core.messages import (
    assistant,
    tool_result_block,
    tool_results,
    user_prompt,
)
from tests.fakeapi import FakeAPI, Reply, last_user_text, request_text
from tests.helpers.clearing import bench_for, cleared_through
from tests.helpers.clearing import read_step as clearing_step
from tests.helpers.collapse import (
    SESSION_ID,
    collapse_bench,
    fill,
    notices,
    placeholders,
    plain,
)
from tests.helpers.compaction import make_files
from tests.helpers.notes import answer, guide, notes_bench, read_round
from tests.helpers.thinking import MODEL, read_step, step, thinking_bench
from tests.helpers.transcripts import records, transcripts
from tests.helpers.wire import Model, collapse_summaries, is_collapse_body
from tools.read import number_lines, record_read


@pytest.mark.fake_api(profile="2026")  # the 5.5 family's server-side behaviour
def test_a_resume_after_the_servers_summary_rebuilds_the_block_the_kept_turns_and_the_system_messages(
    tmp_path: Path, api: FakeAPI
) -> None:
    from agent.transcript.loader import load_transcript

    bench = thinking_bench(tmp_path, api)
    bench.add(user_prompt("Read the modules."))
    read_step(bench, api, "a.py")
    read_step(bench, api, "b.py")
    assert compactor.compact(bench.conv, bench.ports, "auto") is True
    step(bench, Reply.text("Done.", thinking="done"), api)

    loaded = load_transcript(bench.transcript_path, model=MODEL)

    assert [(m.uuid, m.role, m.content) for m in loaded.messages] == [
        (m.uuid, m.role, m.content) for m in bench.messages
    ]


@pytest.mark.fake_api(profile="2026")  # the 5.5 family's server-side behaviour
def test_the_server_clears_in_batches_and_the_history_stays_as_sent(tmp_path: Path, api: FakeAPI) -> None:
    bench = bench_for(tmp_path, api)
    threshold = bench.conv.window.thresholds().auto_compact
    bench.add(user_prompt("Read every module."))
    for n in range(20):
        clearing_step(bench, api, n)

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


def test_the_worker_stages_spans_and_90_percent_commits_them(tmp_path: Path, api: FakeAPI) -> None:
    bench = collapse_bench(tmp_path, api, compaction_model="claude-haiku-4-5")
    events = bench.events
    route = api.on(is_collapse_body, collapse_summaries())
    ts = fill(bench, 23_000)  # over the start level: the worker starts; under T: nothing is committed yet
    first = bench.view()
    assert placeholders(first.messages) == [] and first.tokens >= 23_000
    c = collapse_worker.collapser(bench.conv)
    assert c.join(10)
    # two turns fit in one span (8,000 tokens); two spans are needed to reach 15,000 once committed
    assert [s.uuids for s in c.staged] == [[m.uuid for m in ts[0] + ts[1]], [m.uuid for m in ts[2] + ts[3]]]
    body = route.hits[0]
    assert body["model"] == "claude-haiku-4-5" and body["max_tokens"] == collapse_worker.SUMMARY_MAX_TOKENS
    assert "tools" not in body and body["system"][0]["text"] == collapse_worker.SYSTEM
    assert "User: Turn 0: check module_0.py" in last_user_text(body)
    assert "Turn 2:" not in last_user_text(body)
    assert bench.state.collapses == [] and not [
        r for r in records(bench.transcript_path) if r["type"] == "collapse-commit"
    ]

    ts += fill(
        bench, 27_500, start=len(ts)
    )  # over T: every staged span goes in one stroke (one cache rewrite)
    now = bench.view()
    ph, ph2 = placeholders(now.messages)
    # the summary, then what the span did, from its own calls: files read, the user's words verbatim
    assert ph.text == (
        "[Collapsed: 8 messages] SUMMARY-1: read a module, it was fine.\n\n"
        "<working-state of-collapsed-span>\nFiles read (2, most recent last):\n"
        "- module_0.py (whole file)\n- module_1.py (whole file)\n"
        "The user's own messages in this span, word for word:\n"
        "<user-message>\nTurn 0: check module_0.py\n</user-message>\n"
        "<user-message>\nTurn 1: check module_1.py\n</user-message>\n</working-state>"
    )
    assert now.messages[0] is ph and now.messages[1] is ph2 and now.messages[2] is ts[4][0]
    assert ph2.text.startswith("[Collapsed: 8 messages] SUMMARY-2: read a module, it was fine.")
    assert now.tokens < 27_000 and now.tokens == count_tokens(now.messages, bench.conv.calibration)
    assert "SUMMARY-1" in json.dumps(now.api[0]) and "toolu_turn000" not in json.dumps(now.api)
    rec, rec2 = [r for r in records(bench.transcript_path) if r["type"] == "collapse-commit"]
    assert rec["collapsedUuids"] == [m.uuid for m in ts[0] + ts[1]] and rec["placeholderUuid"] == ph.uuid
    assert rec2["collapsedUuids"] == [m.uuid for m in ts[2] + ts[3]] and rec2["placeholderUuid"] == ph2.uuid
    assert bench.state.collapses == [
        {k: r[k] for k in ("collapsedUuids", "summary", "placeholderUuid", "workingState")}
        for r in (rec, rec2)
    ]
    assert bench.messages[:4] == ts[0]  # the live list keeps everything
    assert [s.uuids[0] for s in c.staged if s.uuids[0] in (ts[2][0].uuid, ts[0][0].uuid)] == []
    assert any("Collapsed 2 earlier spans (16 messages" in n for n in notices(events))

    # resume: the loader replays the commit, and the view is the very same
    c.join(10)
    loaded = load_transcript(bench.transcript_path)
    assert loaded.state.collapses == bench.state.collapses
    settings = Settings(
        cwd=bench.cwd,
        home=bench.home,
        base_url=api.url,
        api_key="test-key",
        model=bench.model,
        model_explicit=True,
        compaction=CompactConfig(context_collapse=True, context_window=60_000, session_memory=False),
    )
    again = open_session(settings, emit=lambda e: None, ask=None, resume=SESSION_ID)
    assert again.state.collapses == bench.state.collapses
    assert again.conv.view().api == bench.view().api


@pytest.mark.fake_profile(
    "4.x",
    reason="a long tool loop on the 4.x rules: on the 5.5 family an edit of earlier turns waits while a tool loop runs (compact/stages/binding.py), so collapse can't keep one long loop under T there and the server's summary compacts it (test_backends)",
)
def test_cli_long_tool_loop_collapses_old_turns_instead_of_compacting(
    run_cli, project: Path, isolated_env: Path
) -> None:
    paths = make_files(project, 10, lines=120)
    # six short turns, then one long tool loop: collapsing the old turns keeps it under T to the end (over
    # T with nothing left to collapse, the agent would compact there)
    batches = [[p] for p in paths[:6]] + [paths[6:]]
    env = {
        "CLAUDE_CONTEXT_COLLAPSE": "1",
        "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "60000",
        "COMPACT_AGENT_SESSION_MEMORY": "0",
    }
    with FakeAPI(context_window=60_000) as api:
        api.on(is_collapse_body, collapse_summaries())
        api.on(lambda body: True, Model(batches))
        for k, _ in enumerate(batches):
            res = run_cli(
                api, "-p", f"Read batch {k + 1}.", *(["--continue"] if k else []), env=env, timeout=180
            )
            assert res.code == 0, res.stderr
            assert res.stdout == f"Batch {k + 1} read.\n"
        res = run_cli(api, "-p", "Anything left?", "--continue", env=env)
        assert (res.code, res.stdout) == (0, "All read.\n"), res.stderr
    assert api.violations == []
    assert all(r.status == 200 for r in api.message_requests)
    sent = [r.body for r in api.message_requests]
    main = [b for b in sent if not is_collapse_body(b)]
    assert [b for b in sent if is_collapse_body(b)]
    assert not any("<summary>" in last_user_text(b) for b in sent)  # no compaction request, ever
    [path] = transcripts(isolated_env)
    recs = records(path)
    assert not [r for r in recs if r.get("subtype") == "compact_boundary"]
    commits = [r for r in recs if r["type"] == "collapse-commit"]
    assert commits
    first = next(i for i, b in enumerate(main) if "[Collapsed: " in request_text(b))
    # the prompt itself is gone from the view; the placeholder quotes it as the user's words
    assert "Read batch 1. [id:" in request_text(main[first - 1]) and "Read batch 1. [id:" not in request_text(
        main[first]
    )
    assert "<user-message>\nRead batch 1.\n</user-message>" in request_text(main[first])
    assert all("Read batch 7." in request_text(b) for b in main[first:-1])  # it happened in the long loop
    # --continue replays the commit: the resumed request extends the last one of the live session
    previous, resumed = plain(main[-2]["messages"]), plain(main[-1]["messages"])
    assert resumed[: len(previous)] == previous and "[Collapsed: " in json.dumps(resumed[0])
    assert [m["role"] for m in resumed[len(previous) :]] == ["assistant", "user"]
    assert "Read batch 1." in json.dumps(recs)  # the transcript keeps everything


def _real_read(bench, path: Path) -> None:
    """A Read of a file that exists, so the compaction restores it after the kept tail."""
    use_id = f"toolu_real{len(bench.messages):04d}"
    bench.add(
        assistant(
            [
                {"type": "text", "text": "Reading the real file."},
                {"type": "tool_use", "id": use_id, "name": "Read", "input": {"file_path": str(path)}},
            ],
            stop_reason="tool_use",
        )
    )
    bench.add(tool_results([tool_result_block(use_id, number_lines(path.read_text().splitlines(), 1))]))
    record_read(bench.tool_ctx, path)


def test_resume_after_a_second_notes_compaction_whose_tail_reaches_into_the_first_kept_segment(tmp_path):
    with FakeAPI() as api:
        bench = notes_bench(tmp_path, api)
        real = bench.cwd / "parser.py"
        real.write_text("def parse(text):\n    return text.split()\n")
        bench.add(user_prompt("Please fix the parser."))
        _real_read(bench, real)
        for _ in range(30):
            read_round(bench, 1_500)
        reply = answer(bench, "The parser is fixed.")
        notes = TEMPLATE.replace(guide("Current State"), guide("Current State") + "\nParser fixed.")
        ensure_notes(bench.conv, bench.ports).write_text(notes)
        bench.state.last_summarized_uuid = reply.uuid
        bench.add(user_prompt("Now add a test."))
        read_round(bench, 800)
        assert compactor.compact(bench.conv, bench.ports, "auto")
        first_kept = [m.uuid for m in bench.messages[1:] if m.kind != "meta"]
        assert any(m.kind == "meta" for m in bench.messages)  # the restored file follows the kept tail

        bench.add(user_prompt("And document it."))
        read_round(bench, 3_000)  # something for the second compaction to take away (else it would grow)
        answer(bench, "Documented.")
        # the notes saw the first kept segment only in part: what they did not see is kept whatever its
        # size (a tail extended backwards stops at the first compaction's working state instead)
        bench.state.last_summarized_uuid = first_kept[-5]
        assert compactor.compact(bench.conv, bench.ports, "auto")
        kept_again = [m.uuid for m in bench.messages]
        assert set(first_kept[-4:]) <= set(kept_again)  # the second tail starts inside the first one

        loaded = load_transcript(bench.transcript_path)

        assert loaded.warnings == []
        assert [m.uuid for m in loaded.messages] == [m.uuid for m in bench.messages]
