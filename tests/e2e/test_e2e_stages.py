"""End-to-end: the cheap context stages (tool-result budget, snip, microcompact, server-side context
editing) seen from the wire, through the real CLI against the loopback fake Messages API."""

from __future__ import annotations

import json
import re
import stat
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from compact.context.context_editing import BETA, CLEAR_TOOL_USES
from compact.stages.micro import CLEARED
from compact.stages.snip import snip_id
from tests.fakeapi import Reply
from tests.helpers.transcripts import records, transcripts

TAG = re.compile(r"\[id:([0-9a-z]+)\]")


@pytest.fixture
def run_cli(run_cli):
    """The real CLI with background session memory off: its side requests would interleave with the
    scripted main-loop replies, and these tests are about the cheap stages only."""

    def run(api: Any, *args: str, env: dict[str, str] | None = None, **kw: Any) -> Any:
        return run_cli(api, *args, env={"COMPACT_AGENT_SESSION_MEMORY": "0", **(env or {})}, **kw)

    return run


# --- reading request bodies ------------------------------------------------------------------------


def text_of(content: Any) -> str:
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def results_by_id(body: dict) -> dict[str, dict]:
    """tool_use_id -> tool_result block (without its cache breakpoint), over every message of a request."""
    return {
        b["tool_use_id"]: {k: v for k, v in b.items() if k != "cache_control"}
        for m in body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    }


def tool_use_ids(body: dict) -> list[str]:
    return [
        b["id"]
        for m in body["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]


def saved_path(block: dict) -> Path:
    match = re.search(r"Full output saved to: (.+)\n", text_of(block["content"]))
    assert match, text_of(block["content"])[:300]
    return Path(match.group(1))


def bodies(api: Any) -> list[dict]:
    return [r.body for r in api.message_requests]


def session_records(home: Path) -> list[dict]:
    [path] = transcripts(home)
    return records(path)


def write_settings(project: Path, data: dict) -> None:
    (project / ".claude").mkdir(exist_ok=True)
    (project / ".claude" / "settings.json").write_text(json.dumps(data))


# --- §2 tool-result budget ---------------------------------------------------------------------------


def test_huge_bash_output_is_persisted_read_back_and_sent_identically_ever_after(
    fake_api, run_cli, project, isolated_env
):
    api = fake_api
    api.reply_tool("Bash", {"command": "seq 1 100000"}, id="toolu_seq")

    def read_saved_file(body: dict) -> Reply:
        path = saved_path(results_by_id(body)["toolu_seq"])
        return Reply.tool("Read", {"file_path": str(path), "offset": 50_000, "limit": 3}, id="toolu_read")

    api.add(read_saved_file)
    api.reply_text("Line 50000 says 50000.")

    # default permission mode: only `seq` is allowed; the Read of the session directory never asks
    first = run_cli(api, "-p", "count to a lot", "--allowedTools", "Bash(seq:*)")

    assert first.code == 0, first.stderr
    assert first.stdout == "Line 50000 says 50000.\n"
    sent = bodies(api)
    assert len(sent) == 3
    persisted = results_by_id(sent[1])["toolu_seq"]
    replacement = text_of(persisted["content"])
    assert replacement.startswith("<persisted-output>") and replacement.endswith("</persisted-output>")
    assert len(replacement) < 3_000
    full = "\n".join(str(i) for i in range(1, 100_001))  # the Bash tool drops the last newline
    assert f"({len(full)} characters)" in replacement
    path = saved_path(persisted)
    assert path.is_relative_to(isolated_env / ".compact-agent")
    assert path.name == "toolu_seq.txt" and path.parent.name == "tool-results"
    assert path.read_text() == full
    read = results_by_id(sent[2])["toolu_read"]
    assert not read.get("is_error"), read
    assert text_of(read["content"]).splitlines()[:3] == [" 50000\t50000", " 50001\t50001", " 50002\t50002"]

    api.reply_text("Still here.")
    again = run_cli(api, "-p", "what did line 50000 say?", "--continue")

    assert again.code == 0, again.stderr
    later = bodies(api)[2:]
    assert len(later) == 2
    for body in later:
        assert results_by_id(body)["toolu_seq"] == persisted  # byte-identical, resumed run included
    recs = [r for r in session_records(isolated_env) if r.get("type") == "content-replacement"]
    assert [r["replacements"] for r in recs] == [[{"toolUseId": "toolu_seq", "content": replacement}]]
    api.check()


def test_a_round_of_big_parallel_results_is_held_under_the_round_budget(fake_api, run_cli, project):
    api = fake_api
    command = "python3 -c \"print('x' * 28000)\""
    ids = [f"toolu_par{i}" for i in range(8)]
    api.reply_tools([("Bash", {"command": command}, i) for i in ids])
    api.reply_text("All eight ran.")

    # the script holds the two main replies only: no background side request (a notes update, or a
    # compaction prepared after this ~56K-token jump) may race the end of the run for a reply
    quiet = {"COMPACT_AGENT_SESSION_MEMORY": "0", "COMPACT_AGENT_PREPARE_COMPACTION": "0"}
    res = run_cli(api, "-p", "run them all", "--dangerously-skip-permissions", env=quiet)

    assert res.code == 0, res.stderr
    api.check()  # every request valid
    last = bodies(api)[1]["messages"][-1]
    results = [b for b in last["content"] if b.get("type") == "tool_result"]
    assert [b["tool_use_id"] for b in results] == ids
    texts = [text_of(b["content"]) for b in results]
    assert sum(len(t) for t in texts) < 200_000
    moved = [t for t in texts if t.startswith("<persisted-output>")]
    kept = [t for t in texts if not t.startswith("<persisted-output>")]
    assert 1 <= len(moved) < 8
    assert all(t.rstrip("\n") == "x" * 28_000 for t in kept)


def test_saved_tool_results_are_private(fake_api, run_cli, project, isolated_env):
    api = fake_api
    api.reply_tool("Bash", {"command": "seq 1 20000"}, id="toolu_big")
    api.reply_text("ok")

    res = run_cli(api, "-p", "count", "--dangerously-skip-permissions")

    assert res.code == 0, res.stderr
    path = saved_path(results_by_id(bodies(api)[1])["toolu_big"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700  # the session directory
    api.check()


# --- §3 snip --------------------------------------------------------------------------------------


def test_snip_removes_a_turn_from_every_later_request_and_from_a_resumed_session(
    fake_api, run_cli, project, isolated_env
):
    api = fake_api
    api.reply_tool("Bash", {"command": "echo apricot-output"}, id="toolu_old")
    api.reply_text("Turn one done.")
    first = run_cli(api, "-p", "turn one: find the apricot", "--dangerously-skip-permissions")
    assert first.code == 0, first.stderr

    seen_ids: list[str] = []

    def snip_first_turn(body: dict) -> Reply:
        first_prompt = body["messages"][0]["content"]
        seen_ids.extend(TAG.findall(text_of(first_prompt)))
        return Reply.tool("Snip", {"ids": [seen_ids[-1]], "reason": "done with it"}, id="toolu_snip")

    api.add(snip_first_turn)
    api.reply_tool("Snip", {"ids": ["zzzzzz"]}, id="toolu_bad")
    api.reply_text("Snipped.")
    second = run_cli(api, "-p", "turn two: drop turn one", "--continue", "--dangerously-skip-permissions")
    assert second.code == 0, second.stderr

    api.reply_text("Turn three.")
    third = run_cli(api, "-p", "turn three", "--continue")
    assert third.code == 0, third.stderr
    api.check()  # every request valid

    recs = session_records(isolated_env)
    prompt_uuid = next(
        r["uuid"]
        for r in recs
        if r.get("type") == "user" and text_of(r["message"]["content"]) == "turn one: find the apricot"
    )
    assert seen_ids == [snip_id(prompt_uuid)]
    sent = bodies(api)
    # every typed prompt carries its tag in the requests
    for body in sent:
        for m in body["messages"]:
            if m["role"] == "user" and text_of(m["content"]).startswith("turn "):
                assert TAG.search(text_of(m["content"])), m
    # before the snip the turn is there; after it, in this run and the resumed one, it is gone. On the 5.5
    # family (the fake's default) the edit waits while the tool loop that asked for it runs, since the
    # loop's latest thinking must come back valid (compact/stages/binding.py): gone from the loop's end on
    assert len(sent) == 6  # two in turn one, three in turn two, one in turn three
    assert "apricot" in json.dumps(sent[2])
    snip_answer = results_by_id(sent[3])["toolu_snip"]
    assert not snip_answer.get("is_error") and "Snipped 4 messages" in text_of(snip_answer["content"])
    gone_from = 5 if api.profile.thinks_by_default else 3  # the 4.x rules: at once
    assert all("apricot" in json.dumps(body["messages"]) for body in sent[3:gone_from])  # held in the loop
    for body in sent[gone_from:]:
        dumped = json.dumps(body["messages"])
        assert "apricot" not in dumped and "toolu_old" not in dumped and "Turn one done" not in dumped
        assert text_of(body["messages"][0]["content"]).startswith("turn two: drop turn one [id:")
    bad = results_by_id(sent[4])["toolu_bad"]
    assert bad["is_error"] is True and "zzzzzz" in text_of(bad["content"])
    # the transcript keeps everything, untagged, plus the snip record
    raw = transcripts(isolated_env)[0].read_text()
    assert not TAG.search(raw)
    assert "apricot-output" in raw
    [snip] = [r for r in recs if r.get("type") == "snip"]
    assert prompt_uuid in snip["removedUuids"] and len(snip["removedUuids"]) == 4


# --- §4 microcompact ----------------------------------------------------------------------------------


BASH_IDS = [f"toolu_b{i}" for i in range(1, 9)]


def eight_bash_calls(api: Any, run_cli: Any) -> None:
    for i, tid in enumerate(BASH_IDS, 1):
        api.reply_tool("Bash", {"command": f"seq {i} {i + 300}"}, id=tid)
    api.reply_text("Eight done.")
    res = run_cli(api, "-p", "run eight commands", "--dangerously-skip-permissions")
    assert res.code == 0, res.stderr


def age_transcript(home: Path, by: timedelta) -> None:
    """Move every timestamp of the session back (a fixture edit standing in for two hours' wait)."""
    [path] = transcripts(home)
    out = []
    for rec in records(path):
        if "timestamp" in rec:
            t = datetime.fromisoformat(rec["timestamp"].replace("Z", "+00:00")) - by
            rec["timestamp"] = t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        out.append(json.dumps(rec))
    path.write_text("\n".join(out) + "\n")


def test_resuming_after_two_hours_clears_all_but_the_five_latest_results(
    fake_api, run_cli, project, isolated_env
):
    api = fake_api
    eight_bash_calls(api, run_cli)
    age_transcript(isolated_env, timedelta(hours=2))
    api.reply_tool("Bash", {"command": "echo fresh"}, id="toolu_fresh")
    api.reply_text("Back again.")

    res = run_cli(api, "-p", "carry on", "--continue", "--dangerously-skip-permissions")

    assert res.code == 0, res.stderr
    api.check()
    first, after = bodies(api)[9:]
    assert tool_use_ids(first) == BASH_IDS
    results = results_by_id(first)
    assert [results[t]["content"] == CLEARED for t in BASH_IDS] == [True] * 3 + [False] * 5
    for i, tid in enumerate(BASH_IDS[3:], 4):
        assert text_of(results[tid]["content"]).startswith(f"{i}\n{i + 1}\n")
    # sticky: the request after sends the same bytes, though the cache is warm again
    for tid in BASH_IDS:
        assert results_by_id(after)[tid] == results[tid]
    micro = [r for r in session_records(isolated_env) if r.get("type") == "microcompact"]
    assert [r["clearedToolUseIds"] for r in micro] == [BASH_IDS[:3]]
    # the clearing edits what the resumed session last sent: on the 5.5 family the thinking it invalidates
    # (every reply after the first cleared result) is left out in the same stroke, recorded once
    drops = [r for r in session_records(isolated_env) if r.get("type") == "thinking-drop"]
    if api.profile.name == "2026":
        assert len(drops) == 1 and drops[0]["where"] == "edit" and drops[0]["droppedThinkingUuids"]
    else:
        assert drops == []


@pytest.mark.parametrize("how", ["no gap", "env off", "settings off"])
def test_microcompact_stays_out_without_a_gap_or_when_turned_off(
    how, fake_api, run_cli, project, isolated_env
):
    api = fake_api
    eight_bash_calls(api, run_cli)
    env = {}
    if how != "no gap":
        age_transcript(isolated_env, timedelta(hours=2))
    if how == "env off":
        env["COMPACT_AGENT_MICROCOMPACT"] = "0"
    if how == "settings off":
        write_settings(project, {"microcompact": False})
    api.reply_text("Back again.")

    res = run_cli(api, "-p", "carry on", "--continue", env=env)

    assert res.code == 0, res.stderr
    api.check()
    resumed = bodies(api)[9]
    assert tool_use_ids(resumed) == BASH_IDS
    assert CLEARED not in json.dumps(resumed["messages"])
    assert all(results_by_id(resumed)[t] == results_by_id(bodies(api)[8])[t] for t in BASH_IDS)
    assert not [r for r in session_records(isolated_env) if r.get("type") == "microcompact"]


# --- §4 server-side context editing ------------------------------------------------------------------


def test_context_editing_setting_reaches_the_request_and_applied_edits_are_recorded(
    fake_api, run_cli, project, isolated_env
):
    write_settings(
        project,
        {
            "contextEditing": {
                "enabled": True,
                "keepToolUses": 2,
                "triggerTokens": 30000,
                "clearAtLeastTokens": 5000,
            }
        },
    )
    api = fake_api
    applied = [{"type": CLEAR_TOOL_USES, "cleared_tool_uses": 3, "cleared_input_tokens": 6200}]
    api.reply("Edited on the server.", context_management={"applied_edits": applied})

    res = run_cli(api, "-p", "hello")

    assert res.code == 0, res.stderr
    api.check()
    [request] = api.message_requests
    assert request.body["context_management"] == {
        "edits": [
            # the default model thinks unasked (the 5.5 family), so older turns' thinking is cleared too
            {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}},
            {
                "type": CLEAR_TOOL_USES,
                "trigger": {"type": "input_tokens", "value": 30000},
                "keep": {"type": "tool_uses", "value": 2},
                "clear_at_least": {"type": "input_tokens", "value": 5000},
            },
        ]
    }
    assert BETA in request.headers.get("anthropic-beta", "").split(",")
    [edit] = [r for r in session_records(isolated_env) if r.get("type") == "context-edit"]
    assert edit["applied"] == applied


def test_without_the_setting_no_context_management_is_sent(fake_api, run_cli, project, isolated_env):
    api = fake_api
    api.reply_text("Plain.")

    res = run_cli(api, "-p", "hello")

    assert res.code == 0, res.stderr
    api.check()
    [request] = api.message_requests
    assert "context_management" not in request.body
    assert "context-management" not in request.headers.get("anthropic-beta", "")
    assert not [r for r in session_records(isolated_env) if r.get("type") == "context-edit"]
