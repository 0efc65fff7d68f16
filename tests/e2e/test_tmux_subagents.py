"""Subagents in a real terminal (tests/e2e/test_tmux.py's Pane): the live progress line, the summary line it
folds into, and Ctrl-C while a subagent works, leaving both conversations valid."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from tests.fakeapi import Reply, first_user_text
from tests.helpers.compaction import make_files
from tests.helpers.transcripts import session_records

TASK = "TASK-PROMPT-tmux: read the modules and report."


def test_a_subagents_progress_line_its_summary_and_ctrl_c_during_one(
    agent_in_tmux,  # noqa: F811 - the fixture imported above
    fake_api,
    project: Path,
    isolated_env: Path,
) -> None:
    paths = make_files(project, 4)
    holding, release = threading.Event(), threading.Event()
    turn = {"n": 0}

    def child(body: dict) -> Reply:
        reads = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if reads < 3:
            return Reply.tool("Read", {"file_path": str(paths[reads])})
        if turn["n"] == 1:  # the first task: hold its fourth request until Ctrl-C
            holding.set()
            release.wait(20)
        return Reply.text(f"REPORT-{turn['n']}: module_03 has the f3 functions.")

    fake_api.conversation("TASK-PROMPT-tmux", child)
    pane = agent_in_tmux("--dangerously-skip-permissions")

    # 1. a task interrupted while its subagent waits for the model
    turn["n"] = 1
    fake_api.reply_tool(
        "Task", {"description": "Find f3 modules", "prompt": TASK, "subagent_type": "Explore"}
    )
    pane.type("find the f3 functions")
    assert holding.wait(20)
    pane.wait_for(r"Find f3 modules · 3 tool uses · [\d.,]+k? tokens", visible=True)
    pane.keys("C-c")
    pane.wait_for("Interrupted by user")
    release.set()
    pane.wait_prompt()

    # 2. the next turn: the parent is told, and a second task runs to its end
    turn["n"] = 2
    fake_api.reply_tool("Task", {"description": "Find f3 again", "prompt": TASK, "subagent_type": "Explore"})
    fake_api.reply_text("PARENT-DONE: module_03.")
    pane.type("try again")
    pane.wait_for(r"Task\(Find f3 again\)")
    pane.wait_for(r"Done \(3 tool uses · [\d.]+k tokens · \d+s\)")
    pane.wait_for("PARENT-DONE")
    pane.wait_prompt()
    pane.keys("C-d")
    pane.wait_exit()

    assert fake_api.violations == []
    parents = [r.body for r in fake_api.message_requests if "find the f3" in first_user_text(r.body)]
    last = json.dumps(parents[-1]["messages"])
    assert "Interrupted by user" in last and "subagents/agent-" in last and "REPORT-2" in last
    assert "REPORT-1" not in last and "def f0_0" not in last
    # the interrupted subagent's own conversation ends valid: every call answered, then the marker
    [first, second] = sorted(
        (isolated_env / ".compact-agent" / "projects").glob("*/*/subagents/agent-*.jsonl"),
        key=lambda p: p.stat().st_mtime,
    )
    side = [json.loads(line) for line in first.read_text().splitlines()]
    uses = {
        b["id"]
        for r in side
        if r.get("type") == "assistant"
        for b in r["message"]["content"]
        if b.get("type") == "tool_use"
    }
    answered = {
        b["tool_use_id"]
        for r in side
        if r.get("type") == "user" and isinstance(r["message"]["content"], list)
        for b in r["message"]["content"]
        if b.get("type") == "tool_result"
    }
    assert uses == answered and side[-1].get("interrupted")
    main = session_records(isolated_env)
    assert not any(r.get("isSidechain") for r in main)
    fake_api.check()
