"""Subagents end to end (SPEC §16): the real CLI in print mode against the loopback fake API.

The fake routes each conversation by its first user message: the parent's requests open with the user's
prompt, a subagent's with its task prompt (``FakeAPI.conversation``), so the two are scripted apart and
the test can check what each one sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import records, transcripts
from tests.fakeapi import FakeAPI, Reply, first_user_text, request_text
from tests.test_e2e_compaction import make_files
from tests.test_e2e_resume import Reader

PARENT = "PARENT-PROMPT-7k2: which modules define f3 functions?"
TASK = "TASK-PROMPT-q9w: read every file under src/ and report which define f3 functions."
ANSWER = "ANSWER-MARK: module_03 defines the f3 functions."
NO_NOTES = {"COMPACT_AGENT_SESSION_MEMORY": "0"}


def task_call(prompt: str = TASK, kind: str = "Explore", description: str = "Find f3 modules") -> Reply:
    return Reply.tool("Task", {"description": description, "prompt": prompt, "subagent_type": kind})


def bodies(api: FakeAPI, marker: str) -> list[dict]:
    return [r.body for r in api.message_requests if marker in first_user_text(r.body)]


def sidechains(home: Path) -> list[Path]:
    return sorted((home / ".compact-agent" / "projects").glob("*/*/subagents/agent-*.jsonl"))


def tool_results_of(body: dict) -> list[dict]:
    return [b for m in body["messages"] for b in m["content"] if b.get("type") == "tool_result"]


def text_of(block: dict) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)


def test_a_task_reads_25_files_in_its_own_context_and_the_parent_gets_the_answer(
    run_cli: Any, project: Path, isolated_env: Path
) -> None:
    paths = make_files(project, 25)
    with FakeAPI() as api:
        api.conversation("TASK-PROMPT-q9w", Reader(paths, ANSWER))
        api.reply(task_call().content)
        api.reply_text("The f3 functions live in module_03.")
        first = run_cli(api, "-p", PARENT, "--output-format", "json", env=NO_NOTES, timeout=180)
        assert first.code == 0, first.stderr
        api.reply_text("Continued.")
        continued = run_cli(api, "-p", "CONTINUED-PROMPT", "--continue", env=NO_NOTES)
        assert continued.code == 0, continued.stderr
    api.check()
    child = bodies(api, "TASK-PROMPT-q9w")
    parent = bodies(api, "PARENT-PROMPT-7k2")
    assert len(child) == 26  # 25 reads and the answer
    reads = [
        u for b in child[-1:] for m in b["messages"] for u in m["content"] if u.get("type") == "tool_use"
    ]
    assert len(reads) == 25
    for body in child:  # the task prompt opens it; nothing of the parent's conversation is there
        assert body["messages"][0]["role"] == "user" and TASK in first_user_text(body)
        assert "PARENT-PROMPT-7k2" not in request_text(body)
        assert "Working directory:" in json.dumps(body["system"])  # the environment facts
        assert "Task" not in [t["name"] for t in body["tools"]]  # no nesting
    assert {t["name"] for t in child[0]["tools"]} <= {"Read", "Grep", "Glob", "Bash", "Snip"}
    # the parent's next request holds the answer, none of the files
    after = parent[1]
    [result] = tool_results_of(after)
    assert ANSWER in text_of(result) and "agentId: a" in text_of(result)
    text = request_text(after)
    assert "def f3_0" not in text and "module_07.py" not in text
    assert len(text) < 8_000
    # the sidechain: Claude Code's layout and fields, the parent's session id
    sid = first.json()["session_id"]
    [main] = transcripts(isolated_env)
    [side] = sidechains(isolated_env)
    assert side.parent == main.with_suffix("") / "subagents"
    recs = records(side)
    assert all(r["isSidechain"] is True and r["sessionId"] == sid for r in recs)
    assert len({r["agentId"] for r in recs}) == 1 and side.stem == f"agent-{recs[0]['agentId']}"
    assert recs[0]["message"]["content"][0]["text"].startswith(TASK)
    assert oct(side.stat().st_mode & 0o777) == "0o600"
    # the main transcript holds no sidechain record; --continue resumes the parent, answer included
    assert not any(r.get("isSidechain") for r in records(main))
    resumed = parent[2]
    assert resumed["messages"][:3] == after["messages"][:3] or ANSWER in request_text(resumed)
    assert "CONTINUED-PROMPT" in request_text(resumed) and ANSWER in request_text(resumed)
    assert "def f3_0" not in request_text(resumed)
