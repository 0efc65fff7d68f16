"""End-to-end resume (docs/files.md): the real CLI in print mode (run in this process) against the loopback fake API.

A resumed session must send what the live one would have sent: what follows the last compaction
boundary (the summary or notes, the kept tail, what came after), never the history before it, and the
new prompt last. The transcript itself keeps everything. Real Claude Code transcripts resume too: from
their path, into a new session of our own store, without the foreign file being touched.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from agent.runtime.sdk import default_model
from core.messages import assistant, tool_result_block, tool_results, user_prompt
from core.tokens import MEDIA_TOKENS, estimate_blocks
from core.transcript_writer import TranscriptWriter
from tests.fakeapi import FakeAPI, Reply, is_compaction, is_notes_update, last_user_text, request_text
from tests.helpers.compaction import make_files
from tests.helpers.transcripts import records, transcripts
from tests.helpers.wire import Reader, plain

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
SUMMARY = (
    "<analysis>PRIVATE-ANALYSIS of the reads</analysis>\n"
    "<summary>1. Primary Request and Intent: SUMMARY-MARK read the project files.</summary>"
)
EARLY = "EARLY-HISTORY-4q7z"
# the client's own compactions (the LLM summary, the notes): the server's summary, which the 5.5 family's
# tool loops get by default, and its resume are tests/agent/runtime/test_compaction_backends.py's
LOCAL = {"COMPACT_AGENT_SERVER_COMPACTION": "0"}
NO_NOTES = {
    "COMPACT_AGENT_SESSION_MEMORY": "0",
    "COMPACT_AGENT_COST_AWARE": "0",
    **LOCAL,
}  # one compaction, at T


def main_bodies(api: FakeAPI, start: int = 0) -> list[dict]:
    """Conversation requests from the ``start``-th request on (no summary or notes side requests)."""
    return [
        r.body
        for r in api.message_requests[start:]
        if not is_compaction(r.body) and not is_notes_update(r.body)
    ]


def user_texts(message: dict) -> list[str]:
    """The text blocks of a message, without the reminders the agent attaches (the snip nudge)."""
    return [
        b["text"]
        for b in message["content"]
        if b.get("type") == "text" and not b["text"].startswith("<system-reminder>")
    ]


def assert_resumed_like_live(previous: dict, resumed: dict, final: str, prompt: str) -> None:
    """``resumed`` is ``previous`` + the reply it got + the new prompt, message for message."""
    old, new = plain(previous["messages"]), plain(resumed["messages"])
    assert new[: len(old)] == old
    reply, ask = new[len(old) :]
    # the reply as it came: on the 5.5 family its signed thinking first (sent back unchanged), then the text
    thought = [b for b in reply["content"] if b["type"] == "thinking"]
    assert reply == {"role": "assistant", "content": [*thought, {"type": "text", "text": final}]}
    assert all(b["signature"] for b in thought)
    assert ask["role"] == "user" and user_texts(ask)[-1].startswith(prompt)


# --- 1. resume after an LLM-summary compaction ---------------------------------------------------------------


def test_resume_and_continue_after_an_llm_summary_compaction(
    run_cli, project: Path, isolated_env: Path
) -> None:
    paths = make_files(project, 8)
    env = {**NO_NOTES, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "15"}  # T = 27,000 tokens
    with FakeAPI() as api:
        api.on(is_compaction, Reply.text(SUMMARY))
        api.on(lambda body: True, Reader(paths))
        first = run_cli(api, "-p", f"Read every file. {EARLY}", "--output-format", "json", env=env)
        assert first.code == 0, first.stderr
        sid = first.json()["session_id"]
        n1 = len(api.message_requests)
        resumed = run_cli(api, "-p", "RESUMED-BY-ID", "--resume", sid, env=env)
        assert resumed.code == 0, resumed.stderr
        n2 = len(api.message_requests)
        continued = run_cli(api, "-p", "CONTINUED-LATEST", "--continue", env=env)
        assert continued.code == 0, continued.stderr

    assert api.violations == []
    assert any(is_compaction(r.body) for r in api.message_requests[:n1])
    live = main_bodies(api, 0)[: len(main_bodies(api, 0)) - len(main_bodies(api, n1))]
    assert EARLY in request_text(live[0])
    by_id, by_latest = main_bodies(api, n1)[0], main_bodies(api, n2)[0]
    for body in (by_id, by_latest):
        text = request_text(body)
        # the history before the boundary stays behind; only the working-state attachment quotes the prompt
        assert text.count(EARLY) == 1 and f"Read every file. {EARLY}\n</user-message>" in text
        assert "SUMMARY-MARK" in text and "PRIVATE-ANALYSIS" not in text
        assert "SUMMARY-MARK" in user_texts(body["messages"][0])[0]  # the summary opens the request
    assert_resumed_like_live(live[-1], by_id, "All files read.", "RESUMED-BY-ID")
    assert_resumed_like_live(by_id, by_latest, "All files read.", "CONTINUED-LATEST")
    # one session; its transcript still holds the early history, every read and both prompts
    [path] = transcripts(isolated_env)
    assert path.stem == sid
    raw = path.read_text()
    assert EARLY in raw and "RESUMED-BY-ID" in raw and "CONTINUED-LATEST" in raw
    reads = [
        b["input"]["file_path"]
        for r in records(path)
        if r.get("type") == "assistant"
        for b in r["message"]["content"]
        if b.get("type") == "tool_use"
    ]
    assert reads == [str(p) for p in paths]


# --- 1b. resume after a notes (session-memory) compaction ------------------------------------------------


class Notes:
    """Answers notes updates with one Edit of the notes file, as a model would."""

    def __init__(self) -> None:
        self.updates = 0

    def __call__(self, body: dict) -> Reply:
        import re

        self.updates += 1
        path = re.search(r"(/\S+/session-memory/summary\.md)", last_user_text(body)).group(1)
        text = Path(path).read_text()
        anchor = text.splitlines()[1]  # the guidance line under the first header
        return Reply(
            [
                {
                    "type": "tool_use",
                    "id": f"toolu_notes_{self.updates}",
                    "name": "Edit",
                    "input": {
                        "file_path": path,
                        "old_string": anchor,
                        "new_string": f"{anchor}\nNOTES-MARK-{self.updates}: reading src/ file by file",
                    },
                }
            ]
        )


class BatchReader:
    """The scripted model for turns: each turn reads its batch one file per reply, then says so."""

    def __init__(self, batches: list[list[Path]]):
        self.batches, self.turn, self.pos = batches, 0, 0

    def __call__(self, body: dict) -> Reply:
        batch = self.batches[self.turn] if self.turn < len(self.batches) else []
        if self.pos < len(batch):
            self.pos += 1
            path = batch[self.pos - 1]
            return Reply.tool("Read", {"file_path": str(path)}, text=f"Reading {path.name}.")
        self.turn, self.pos = self.turn + 1, 0
        return Reply.text(f"Batch {self.turn} is read.")


@pytest.mark.fake_profile(
    "4.x",
    reason="a notes compaction mid tool loop keeps a tail; on the 5.5 family that tail's thinking can't follow a client-written summary, so the loop is summarized whole instead (compact/compaction/backend.py)",
)
def test_resume_after_a_notes_compaction_sends_notes_then_kept_tail_then_prompt(
    run_cli, project: Path, isolated_env: Path
) -> None:
    paths = make_files(project, 12)
    env = {
        "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "30",
        "COMPACT_AGENT_COST_AWARE": "0",
        **LOCAL,
    }  # T = 54,000 tokens, at T
    with FakeAPI() as api:
        api.on(is_notes_update, Notes())
        api.on(is_compaction, Reply.text(SUMMARY))
        api.on(lambda body: True, BatchReader([paths[:4], paths[4:]]))
        first = run_cli(api, "-p", f"Read batch 1. {EARLY}", "--output-format", "json", env=env, timeout=180)
        assert first.code == 0, first.stderr
        sid = first.json()["session_id"]
        second = run_cli(api, "-p", "Read batch 2.", "--continue", env=env, timeout=180)
        assert second.code == 0, second.stderr
        n1 = len(api.message_requests)
        resumed = run_cli(api, "-p", "RESUMED-AFTER-NOTES", "--resume", sid, env=env)
        assert resumed.code == 0, resumed.stderr
        n2 = len(api.message_requests)
        continued = run_cli(api, "-p", "CONTINUED-AFTER-NOTES", "--continue", env=env)
        assert continued.code == 0, continued.stderr
        shown = run_cli(api, "-p", "/summary", "--continue", env=env)  # the notes, as a person reads them
        assert shown.code == 0, shown.stderr

    assert api.violations == []
    assert not any(is_compaction(r.body) for r in api.message_requests)  # the notes did it, no summary call
    [path] = transcripts(isolated_env)
    recs = records(path)
    [boundary] = [r for r in recs if r.get("subtype") == "compact_boundary"]
    segment = boundary["compactMetadata"]["preservedSegment"]
    summary_rec = recs[recs.index(boundary) + 1]
    assert summary_rec.get("isCompactSummary") and segment["anchorUuid"] == summary_rec["uuid"]
    by_uuid = {r["uuid"]: r for r in recs if r.get("type") in ("user", "assistant")}
    kept_tail = by_uuid[segment["tailUuid"]]
    kept_reads = [
        b["input"]["file_path"]
        for r in recs[: recs.index(boundary)]
        if r.get("type") == "assistant"
        for b in r["message"]["content"]
        if b.get("type") == "tool_use"
    ]
    live = main_bodies(api, 0)[: len(main_bodies(api, 0)) - len(main_bodies(api, n1))]
    by_id, by_latest = main_bodies(api, n1)[0], main_bodies(api, n2)[0]
    for body in (by_id, by_latest):
        messages = body["messages"]
        text = request_text(body)  # the early prompt only as the user's words in the working-state attachment
        assert text.count(EARLY) == 1 and f"Read batch 1. {EARLY}\n</user-message>" in text
        assert "NOTES-MARK-1" in json.dumps(messages[0])  # notes first ...
        reads = [
            b["input"]["file_path"]
            for m in messages
            if m["role"] == "assistant"
            for b in m["content"]
            if b.get("type") == "tool_use"
        ]
        assert reads and reads[0] in kept_reads[1:]  # ... then the kept tail (not the first reads) ...
        assert json.dumps(kept_tail["message"]["content"][0])[:-1] in json.dumps(messages)
        assert user_texts(messages[-1])[-1].startswith(("RESUMED-AFTER-NOTES", "CONTINUED-AFTER-NOTES"))
    assert_resumed_like_live(live[-1], by_id, "Batch 2 is read.", "RESUMED-AFTER-NOTES")
    assert_resumed_like_live(by_id, by_latest, "Batch 3 is read.", "CONTINUED-AFTER-NOTES")
    assert EARLY in path.read_text()
    assert shown.stdout.startswith("Summary from the last compaction (auto · session notes · ")
    assert "NOTES-MARK-1" in shown.stdout and "This session continues" not in shown.stdout


# --- 2. real Claude Code transcripts ---------------------------------------------------------------------


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# file -> (must be in the first request, must not be in it)
REAL = {
    "marot__spotter__4d5611e5-241a-462a-8d15-5122611a9569.jsonl": (
        "Let me chronologically analyze the conversation",  # the isCompactSummary record
        "Let me explore the current codebase to understand",
    ),  # an assistant reply before the boundary
    "marot__spotter__short.jsonl": ("mix phx.server doesnt seem to start", None),
    "d-kimuson__claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl": (
        "create TODO app by Next.js",
        "I'll create React components for a TODO app with TypeScript",
    ),  # only in isSidechain records
    "moredip__session-share__0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl": ("Thai green curry", None),
    "moredip__session-share__images-in-user-messages.jsonl": ("BRANCH_PLAN.md", None),
    "moredip__session-share__images-in-tool-results.jsonl": ("(Earlier conversation continues here.)", None),
}


def thinking_blocks(path: Path) -> list[dict]:
    """The thinking blocks of a transcript's assistant records."""
    return [
        block
        for line in path.read_text().splitlines()
        if line.strip() and (record := json.loads(line)).get("type") == "assistant"
        for block in (record.get("message") or {}).get("content") or []
        if isinstance(block, dict) and block.get("type") == "thinking"
    ]


def resume_foreign(
    run_cli, path: Path, prompt: str, *args: str, then: str | None = None
) -> tuple[Any, FakeAPI, str, str]:
    """Resume ``path`` with ``prompt``; with ``then``, also ``--continue`` the new session with it."""
    before = sha256(path)
    with FakeAPI() as api:
        for block in thinking_blocks(path):  # written by the real model: their signatures are valid
            api.thinking.accept(block["thinking"], block["signature"])
        api.on(is_compaction, Reply.text(SUMMARY))
        api.on(lambda body: True, Reply.text("Picked up where we left off."))
        res = run_cli(api, "-p", prompt, "--resume", str(path), *args, timeout=180)
        if then and res.code == 0:
            again = run_cli(api, "-p", then, "--continue", timeout=180)
            assert again.code == 0, again.stderr
    return res, api, before, sha256(path)


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_claude_code_transcript_resumes_into_a_new_session(
    name: str, run_cli, isolated_env: Path
) -> None:
    path = FIXTURES / name
    res, api, before, after = resume_foreign(run_cli, path, "NEW-PROMPT-AFTER-IMPORT", then="AND-ONCE-MORE")
    assert res.code == 0, res.stderr
    assert res.stdout == "Picked up where we left off.\n"
    assert before == after  # the foreign file is only read
    assert api.violations == []
    first = main_bodies(api)[0]
    # the imported copy in our store resumes to the very same conversation
    again = next(b for b in main_bodies(api) if "AND-ONCE-MORE" in last_user_text(b))
    assert_resumed_like_live(
        main_bodies(api)[main_bodies(api).index(again) - 1],
        again,
        "Picked up where we left off.",
        "AND-ONCE-MORE",
    )
    present, absent = REAL[name]
    text = request_text(first)
    assert present in text
    if absent:
        assert absent not in text
    assert first["messages"][0]["role"] == "user"
    assert user_texts(first["messages"][-1])[-1].startswith("NEW-PROMPT-AFTER-IMPORT")
    # a new session of our own, in the project's directory of our store
    [ours] = transcripts(isolated_env)
    assert ours.parent.parent == isolated_env / ".compact-agent" / "projects"
    assert ours.stem != path.stem and "NEW-PROMPT-AFTER-IMPORT" in ours.read_text()


def test_imported_history_counts_no_turns_and_no_cost(run_cli) -> None:
    path = FIXTURES / "moredip__session-share__0ccf1a04-1b4c-43b6-8aa5-79e41db43a68.jsonl"
    res, api, _, _ = resume_foreign(run_cli, path, "one more poem", "--output-format", "json")
    assert res.code == 0, res.stderr
    result = res.json()
    assert result["num_turns"] == 1  # the imported replies are no turns of this run ...
    # ... and their usage was paid for back then: only this run's requests count
    answered = sum(r.message["usage"]["output_tokens"] for r in api.message_requests if r.message)
    assert result["usage"]["output_tokens"] == answered and answered >= 7 * len(api.message_requests)


def test_resume_by_the_path_of_our_own_transcript_continues_that_session(
    run_cli, fake_api: FakeAPI, isolated_env: Path
) -> None:
    fake_api.reply_text("First.")
    first = run_cli(fake_api, "-p", "one", "--output-format", "json")
    [path] = transcripts(isolated_env)
    fake_api.reply_text("Second.")
    second = run_cli(fake_api, "-p", "two", "--resume", str(path), "--output-format", "json")
    assert second.code == 0, second.stderr
    assert second.json()["session_id"] == first.json()["session_id"] == path.stem
    assert transcripts(isolated_env) == [path]
    assert "one" in request_text(fake_api.message_requests[-1].body)
    fake_api.check()


def test_real_transcript_after_its_compaction_starts_with_the_summary(run_cli) -> None:
    path = FIXTURES / "marot__spotter__4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    summary = next(
        json.loads(line) for line in path.read_text().splitlines() if '"isCompactSummary":true' in line
    )
    res, api, _, _ = resume_foreign(run_cli, path, "carry on")
    assert res.code == 0, res.stderr
    first = main_bodies(api)[0]["messages"][0]
    assert first["role"] == "user"
    assert user_texts(first)[0].startswith(summary["message"]["content"][:400])


def test_sidechain_only_transcript_is_refused_with_a_warning(run_cli, isolated_env: Path) -> None:
    path = FIXTURES / "marot__spotter__agent-a2898e3.jsonl"
    res, api, before, after = resume_foreign(run_cli, path, "hello there")
    assert before == after
    assert "sidechain" in res.stderr and "Traceback" not in res.stderr
    assert api.violations == []
    for body in main_bodies(api):  # whatever it did next, none of the sub-agent's work was sent
        assert "hello there" in user_texts(body["messages"][-1])[-1]
        assert len(body["messages"]) == 1


# --- 5. thinking blocks and images ---------------------------------------------------------------------------


def write_thinking_session(path: Path, model: str) -> None:
    with TranscriptWriter(path, "0f0e0d0c-0000-4000-8000-000000000001", "/elsewhere", "0.1.0") as w:
        w.append_message(user_prompt("Which port does the server use?"))
        w.append_message(
            assistant(
                [
                    {
                        "type": "thinking",
                        "thinking": "THINKING-MARK the config says 4000",
                        "signature": "sig-abc",
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_think_1",
                        "name": "Read",
                        "input": {"file_path": "/srv/config"},
                    },
                ],
                message_id="msg_think_1",
                model=model,
                stop_reason="tool_use",
                usage={"input_tokens": 900, "output_tokens": 40},
            )
        )
        w.append_message(tool_results([tool_result_block("toolu_think_1", "port = 4000")]))
        w.append_message(
            assistant(
                [{"type": "text", "text": "Port 4000."}],
                message_id="msg_think_2",
                model=model,
                usage={"input_tokens": 960, "output_tokens": 5},
            )
        )


@pytest.mark.parametrize(
    ("resume_model", "kept"), [("claude-opus-4-1", True), ("claude-sonnet-4-6", False), (None, True)]
)
def test_thinking_blocks_resume_only_for_the_model_that_wrote_them(
    resume_model: str | None, kept: bool, run_cli, tmp_path: Path
) -> None:
    """``None``: no --model, so the default model resumes a session that same default wrote."""
    path = tmp_path / "thinking.jsonl"
    write_thinking_session(path, "claude-opus-4-1" if resume_model else default_model())
    res, api, _, _ = resume_foreign(
        run_cli, path, "and the host?", *(["--model", resume_model] if resume_model else [])
    )
    assert res.code == 0, res.stderr
    assert api.violations == []
    body = main_bodies(api)[0]
    assert body["model"] == (resume_model or default_model())
    blocks = [b for m in body["messages"] if m["role"] == "assistant" for b in m["content"]]
    thinking = [b for b in blocks if b["type"] == "thinking"]
    assert thinking == (
        [{"type": "thinking", "thinking": "THINKING-MARK the config says 4000", "signature": "sig-abc"}]
        if kept
        else []
    )
    assert [b["type"] for b in blocks if b["type"] != "thinking"] == ["tool_use", "text"]


def test_thinking_blocks_of_a_dated_model_id_resume_under_its_alias(run_cli, tmp_path: Path) -> None:
    path = tmp_path / "thinking.jsonl"
    write_thinking_session(path, "claude-opus-4-1-20250805")
    res, api, _, _ = resume_foreign(run_cli, path, "and the host?", "--model", "claude-opus-4-1")
    assert res.code == 0, res.stderr
    assert "THINKING-MARK" in request_text(main_bodies(api)[0])


@pytest.mark.parametrize(
    "name",
    [
        "moredip__session-share__images-in-user-messages.jsonl",
        "moredip__session-share__images-in-tool-results.jsonl",
    ],
)
def test_images_resume_as_images(name: str, run_cli) -> None:
    path = FIXTURES / name
    res, api, _, _ = resume_foreign(run_cli, path, "what was in the picture?")
    assert res.code == 0, res.stderr
    assert api.violations == []
    sent = json.dumps(main_bodies(api)[0]["messages"])
    original = [json.loads(line) for line in path.read_text().splitlines()]
    images = [
        b
        for r in original
        if isinstance(r.get("message"), dict)
        for b in _all_blocks(r["message"])
        if b.get("type") == "image"
    ]
    assert images
    for image in images:
        assert json.dumps(image["source"]["data"]) in sent


def _all_blocks(message: dict) -> list[dict]:
    content = message.get("content")
    out = []
    for b in content if isinstance(content, list) else []:
        out.append(b)
        if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
            out.extend(b["content"])
    return out


def test_an_image_counts_two_thousand_tokens_whatever_its_size() -> None:
    path = FIXTURES / "moredip__session-share__images-in-tool-results.jsonl"
    result = [
        b
        for line in path.read_text().splitlines()
        for b in _all_blocks(json.loads(line)["message"])
        if b.get("type") == "tool_result"
    ][0]
    [image] = [b for b in result["content"] if b["type"] == "image"]
    assert len(image["source"]["data"]) > 100_000
    without = [{**result, "content": [b for b in result["content"] if b["type"] != "image"]}]
    assert estimate_blocks([result]) - estimate_blocks(without) == MEDIA_TOKENS + 3  # + one block's overhead


# --- 6. a transcript cut so that it starts with the assistant ----------------------------------------------


def test_a_cut_transcript_starting_with_the_assistant_gets_a_user_marker_first(
    run_cli, tmp_path: Path
) -> None:
    path = tmp_path / "cut.jsonl"
    with TranscriptWriter(path, "0f0e0d0c-0000-4000-8000-000000000002", "/elsewhere", "0.1.0") as w:
        w.append_message(
            assistant(
                [{"type": "text", "text": "CUT-REPLY the build is green."}],
                message_id="msg_cut",
                model="claude-sonnet-4-5",
            )
        )
    res, api, _, _ = resume_foreign(run_cli, path, "ship it")
    assert res.code == 0, res.stderr
    assert api.violations == []
    messages = plain(main_bodies(api)[0]["messages"])
    assert messages[0] == {
        "role": "user",
        "content": [{"type": "text", "text": "(Earlier conversation continues here.)"}],
    }
    assert messages[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "CUT-REPLY the build is green."}],
    }
    assert user_texts(messages[2])[-1].startswith("ship it")
