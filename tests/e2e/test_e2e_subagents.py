"""Subagents end to end (docs/subagents.md): the real CLI in print mode against the loopback fake API.

The fake routes each conversation by its first user message: the parent's requests open with the user's
prompt, a subagent's with its task prompt (``FakeAPI.conversation``), so the two are scripted apart and
the test can check what each one sent.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

from tests.fakeapi import (
    FakeAPI,
    Reply,
    first_user_text,
    is_server_compaction,
    last_user_text,
    request_text,
)
from tests.helpers.cli import wait_for
from tests.helpers.compaction import make_files
from tests.helpers.transcripts import records, transcripts
from tests.helpers.wire import Reader

PARENT = "PARENT-PROMPT-7k2: which modules define f3 functions?"
TASK = "TASK-PROMPT-q9w: read every file under src/ and report which define f3 functions."
ANSWER = "ANSWER-MARK: module_03 defines the f3 functions."
NO_NOTES = {"COMPACT_AGENT_SESSION_MEMORY": "0", "COMPACT_AGENT_COST_AWARE": "0"}  # compaction at T


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
        api.on(is_compaction, Reply.text(SUMMARY))  # a compaction prepared in the background, if any
        api.conversation("TASK-PROMPT-q9w", Reader(paths, ANSWER))
        api.reply(task_call().content)
        api.reply_text("The f3 functions live in module_03.")
        first = run_cli(api, "-p", PARENT, "--output-format", "json", env=NO_NOTES, timeout=180)
        assert first.code == 0, first.stderr
        api.reply_text("Continued.")
        continued = run_cli(api, "-p", "CONTINUED-PROMPT", "--continue", env=NO_NOTES)
        assert continued.code == 0, continued.stderr
    api.check()
    # (a compaction the subagent needs on the way is either backend: the 5.5 family's tool loop gets the
    # server's summary, answered by the fake itself)
    child = [
        b for b in bodies(api, "TASK-PROMPT-q9w") if not is_compaction(b) and not is_server_compaction(b)
    ]
    parent = bodies(api, "PARENT-PROMPT-7k2")
    assert len(child) == 26  # 25 reads and the answer
    reads = {
        u["input"]["file_path"]
        for b in child
        for m in b["messages"]
        for u in m["content"]
        if u.get("type") == "tool_use" and u["name"] == "Read"
    }
    assert reads == {str(p) for p in paths}  # 25 files, each read by the subagent
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


class Gate:
    """A child's first reply waits until ``parties`` children have all asked: only concurrent runs pass."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=20)

    def wait(self) -> bool:
        try:
            self.barrier.wait()
            return True
        except threading.BrokenBarrierError:
            return False


class GatedReader(Reader):
    def __init__(self, paths: list[Path], final: str, gate: Gate) -> None:
        super().__init__(paths, final)
        self.gate, self.first = gate, True

    def __call__(self, body: dict) -> Reply:
        if self.first:
            self.first = False
            if not self.gate.wait():
                return Reply.text("RAN-ONE-AFTER-ANOTHER")
        return super().__call__(body)


def test_parallel_tasks_run_at_once_and_answer_in_order(
    run_cli: Any, project: Path, isolated_env: Path
) -> None:
    paths = make_files(project, 6)
    gate = Gate(3)
    calls = [
        (
            "Task",
            {"description": f"Part {n}", "prompt": f"PART-{n}-PROMPT read two files", "subagent_type": kind},
            f"toolu_part{n}",
        )
        for n, kind in ((1, "Explore"), (2, "general-purpose"), (3, "Explore"))
    ]
    with FakeAPI() as api:
        for n in (1, 2, 3):
            api.conversation(f"PART-{n}-PROMPT", GatedReader(paths[2 * n - 2 : 2 * n], f"ANSWER-{n}", gate))
        api.reply(Reply.tools(calls).content)
        api.reply_text("All three parts are in.")
        res = run_cli(api, "-p", PARENT, "--output-format", "json", env=NO_NOTES)
        assert res.code == 0, res.stderr
    api.check()
    parent = bodies(api, "PARENT-PROMPT-7k2")
    results = tool_results_of(parent[1])
    assert [r["tool_use_id"] for r in results] == ["toolu_part1", "toolu_part2", "toolu_part3"]
    assert [f"ANSWER-{n}" in text_of(r) for n, r in zip((1, 2, 3), results)] == [True] * 3
    assert "RAN-ONE-AFTER-ANOTHER" not in request_text(parent[1])
    assert len(sidechains(isolated_env)) == 3
    general = bodies(api, "PART-2-PROMPT")[0]
    assert {"Write", "Edit", "Bash"} <= {t["name"] for t in general["tools"]}
    assert "Task" not in {t["name"] for t in general["tools"]}


SUMMARY = (
    "<analysis>notes</analysis>\n<summary>TASK-PROMPT-q9w: SUBAGENT-SUMMARY of the reads so far.</summary>"
)


def is_compaction(body: dict) -> bool:
    text = last_user_text(body)
    return "<analysis>" in text and "<summary>" in text


def test_a_subagent_compacts_on_its_own(run_cli: Any, project: Path, isolated_env: Path) -> None:
    paths = make_files(project, 8)
    reader = Reader(paths, ANSWER)
    # T = 27,000 tokens; the LLM summary, whose request the route below answers (the server's summary would
    # replace the task prompt the route goes by with its compaction block)
    env = {**NO_NOTES, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "15", "COMPACT_AGENT_SERVER_COMPACTION": "0"}
    with FakeAPI() as api:
        api.conversation(
            "TASK-PROMPT-q9w", lambda body: Reply.text(SUMMARY) if is_compaction(body) else reader(body)
        )
        api.reply(task_call().content)
        api.reply_text("Done.")
        res = run_cli(api, "-p", PARENT, "--output-format", "json", env=env, timeout=180)
        assert res.code == 0, res.stderr
    api.check()
    child = bodies(api, "TASK-PROMPT-q9w")
    at = next(i for i, b in enumerate(child) if is_compaction(b))
    assert at > 0
    own = [b for b in child if not is_compaction(b)]
    assert "SUBAGENT-SUMMARY" in first_user_text(own[-1])
    # the eight files never were in its context at once: the compaction took the early reads out
    assert max(len(request_text(b)) for b in own) < sum(p.stat().st_size for p in paths)
    [side] = sidechains(isolated_env)
    boundaries = [r for r in records(side) if r.get("subtype") == "compact_boundary"]
    assert boundaries and all(r["isSidechain"] for r in boundaries)
    [main] = transcripts(isolated_env)
    assert not any(r.get("subtype") == "compact_boundary" for r in records(main))
    parent = bodies(api, "PARENT-PROMPT-7k2")
    assert ANSWER in request_text(parent[1])


AGENT_FILE = """---
name: lister
description: Lists and reads files
tools: Glob, Read
model: haiku
---
LISTER-SYSTEM-PROMPT: you list files and read them.
"""


def test_a_custom_agent_is_limited_to_its_tools(run_cli: Any, project: Path, isolated_env: Path) -> None:
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "lister.md").write_text(AGENT_FILE)
    steps = iter([Reply.tool("Bash", {"command": "ls"}), Reply.text("LISTER-DONE")])
    with FakeAPI() as api:
        api.conversation("LIST-PROMPT", lambda body: next(steps))
        api.reply(task_call("LIST-PROMPT list the files", "lister", "List files").content)
        api.reply_text("ok")
        res = run_cli(api, "-p", PARENT, "--trust-project", env=NO_NOTES)
        assert res.code == 0, res.stderr
    api.check()
    [first, second] = bodies(api, "LIST-PROMPT")
    assert {t["name"] for t in first["tools"]} == {"Glob", "Read"}
    assert first["model"] == "claude-haiku-4-5"
    assert "LISTER-SYSTEM-PROMPT" in json.dumps(first["system"])
    [refused] = tool_results_of(second)
    assert refused.get("is_error") and "no tool named Bash" in text_of(refused)
    parent = bodies(api, "PARENT-PROMPT-7k2")
    assert "lister" in next(t["description"] for t in parent[0]["tools"] if t["name"] == "Task")
    assert "LISTER-DONE" in request_text(parent[1])


def test_an_untrusted_projects_agents_are_not_offered(
    run_cli: Any, project: Path, isolated_env: Path
) -> None:
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "lister.md").write_text(AGENT_FILE)
    with FakeAPI() as api:
        api.reply(task_call("LIST-PROMPT list the files", "lister", "List files").content)
        api.reply_text("ok")
        res = run_cli(api, "-p", PARENT, env=NO_NOTES)
        assert res.code == 0, res.stderr
    api.check()
    assert bodies(api, "LIST-PROMPT") == []  # the agent never ran
    parent = bodies(api, "PARENT-PROMPT-7k2")
    assert "lister" not in next(t["description"] for t in parent[0]["tools"] if t["name"] == "Task")
    [refused] = tool_results_of(parent[1])
    assert refused.get("is_error") and "not trusted" in text_of(refused)
    assert "trust" in res.stderr and "lister" in res.stderr


def test_kill_9_during_a_subagent_then_continue(
    spawn: Any,  # noqa: F811 - the fixture imported above
    run_cli: Any,
    project: Path,
    isolated_env: Path,
) -> None:
    paths = make_files(project, 3)
    asked, release = threading.Event(), threading.Event()

    def child(body: dict) -> Reply:
        if len(body["messages"]) == 1:
            return Reply.tool("Read", {"file_path": str(paths[0])})
        asked.set()  # the subagent is mid-task: hold its second request until the agent is gone
        release.wait(30)
        return Reply.text("too late")

    with FakeAPI() as api:
        api.conversation("TASK-PROMPT-q9w", child)
        api.reply(
            Reply.tool(
                "Task",
                {"description": "Find f3", "prompt": TASK, "subagent_type": "Explore"},
                id="toolu_task1",
            ).content
        )
        proc = spawn(api, "-p", PARENT)
        assert asked.wait(60)
        [side] = wait_for(lambda: sidechains(isolated_env))
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        release.set()
        api.reply_text("The exploration was cut short; I will run it again.")
        res = run_cli(api, "-p", "what happened?", "--continue", env=NO_NOTES)
        assert res.code == 0, res.stderr
    assert api.violations == []
    last = bodies(api, "PARENT-PROMPT-7k2")[-1]
    [answer] = [r for r in tool_results_of(last) if r["tool_use_id"] == "toolu_task1"]
    assert answer["is_error"] and str(side) in text_of(answer) and "Interrupted" in text_of(answer)
    assert "what happened?" in request_text(last)
    # the sidechain is whole lines of valid records (the read it did is there)
    recs = records(side)
    assert recs[0]["isSidechain"] and any("tool_result" in json.dumps(r) for r in recs)


def test_stream_json_tags_the_subagents_events_with_its_id(
    run_cli: Any, project: Path, fake_api: FakeAPI
) -> None:
    paths = make_files(project, 2)
    fake_api.conversation("TASK-PROMPT-q9w", Reader(paths, ANSWER))
    fake_api.reply(
        Reply.tool(
            "Task", {"description": "Find f3", "prompt": TASK, "subagent_type": "Explore"}, id="toolu_t"
        ).content
    )
    fake_api.reply_text("Done.")
    res = run_cli(fake_api, "-p", PARENT, "--output-format", "stream-json", env=NO_NOTES)
    assert res.code == 0, res.stderr
    fake_api.check()
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    tagged = [x for x in lines if x.get("agentId")]
    agent_id = tagged[0]["agentId"]
    side = [x for x in tagged if x.get("type") in ("user", "assistant") and not x.get("isMeta")]
    assert len(side) == 6  # the task prompt, 2 reads and their results, the answer (reminders aside)
    assert all(x["isSidechain"] and x["parent_tool_use_id"] == "toolu_t" for x in side)
    assert side[0]["message"]["content"][0]["text"].startswith(TASK)
    subtypes = [x["subtype"] for x in lines if x.get("type") == "system" and x.get("agent_id") == agent_id]
    assert subtypes == ["subagent_started", "subagent_finished"]
    main = [x for x in lines if x.get("type") in ("user", "assistant") and not x.get("agentId")]
    assert all(not x["isSidechain"] for x in main) and ANSWER in json.dumps(main)
    assert lines[-1]["type"] == "result" and lines[-1]["total_cost_usd"] > 0


def test_cost_and_context_count_subagents_apart(tmp_path: Path, fake_api: FakeAPI) -> None:
    from agent.frontend import commands
    from agent.runtime import subagents
    from agent.runtime.loop import run_turn
    from tests.helpers.session import make_session

    session, events = make_session(tmp_path, fake_api, session_memory=False)
    subagents.install(session)
    paths = make_files(tmp_path / "project", 3)
    fake_api.conversation("TASK-PROMPT-q9w", Reader(paths, ANSWER))
    fake_api.reply(task_call().content)
    fake_api.reply_text("Done.")
    finished = run_turn(session, PARENT)
    assert finished.stop_reason == "end_turn", finished.error
    fake_api.check()
    [run] = session.subagents.runs
    assert run.status == "completed" and run.tool_uses == 3 and run.tokens > 15_000
    cost = commands.run(session, "/cost").text
    assert "of which subagents (1 task)" in cost
    # the usage is in the session's transcript too (a resumed session's /cost counts it)
    [side_usage] = [r for r in records(session.transcript_path) if r.get("agentId") == run.agent_id]
    assert side_usage["type"] == "side-usage" and side_usage["usage"] == run.usage
    assert f"{run.usage['output_tokens']:,} output" in cost.splitlines()[-1]
    context = commands.run(session, "/context")
    assert "- Find f3 modules (Explore, completed): 3 tool uses" in context.text
    assert context.text.rstrip().endswith(f"tokens of its own · {run.agent_id}")
    assert context.used < run.tokens  # the reads are in the subagent's context, not this one
    kinds = [type(e).__name__ for e in events]
    assert kinds.count("SubagentStarted") == 1 and kinds.count("SubagentFinished") == 1
    assert kinds.count("SubagentProgress") >= 6
    state = session.conv.view()
    from compact.compaction import ledger

    text = ledger.render(ledger.derive(session.messages, str(session.settings.cwd)))
    assert f"- {run.agent_id} [completed] Find f3 modules (Explore) → {run.sidechain}" in text
    assert state.tokens < run.tokens


def test_hooks_and_deny_rules_reach_the_subagent(run_cli: Any, project: Path, isolated_env: Path) -> None:
    paths = make_files(project, 3)
    logs = project.parent / "hook-logs"
    logs.mkdir()
    script = project.parent / "hook.py"
    script.write_text(
        "import json, sys, pathlib\n"
        "data = json.load(sys.stdin)\n"
        f"with open(pathlib.Path({str(logs)!r}) / (data['hook_event_name'] + '.jsonl'), 'a') as f:\n"
        "    f.write(json.dumps(data) + '\\n')\n"
    )
    hook = [{"hooks": [{"type": "command", "command": f"python3 {script}"}]}]
    settings = {
        "hooks": {"PreToolUse": [{"matcher": "Task", **hook[0]}], "PostToolUse": hook, "SubagentStop": hook},
        "permissions": {"deny": ["Read(src/module_01.py)"]},
    }
    home = isolated_env / ".compact-agent"
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps(settings))
    with FakeAPI() as api:
        api.conversation("TASK-PROMPT-q9w", Reader(paths, ANSWER))
        api.reply(task_call().content)
        api.reply_text("Done.")
        res = run_cli(api, "-p", PARENT, "--output-format", "json", env=NO_NOTES)
        assert res.code == 0, res.stderr
    api.check()
    sid = res.json()["session_id"]
    [main] = transcripts(isolated_env)
    [side] = sidechains(isolated_env)
    [pre] = records(logs / "PreToolUse.jsonl")  # the matcher "Task": the subagent's Reads don't match it
    assert pre["tool_name"] == "Task" and pre["tool_input"]["subagent_type"] == "Explore"
    post = records(logs / "PostToolUse.jsonl")
    assert [p["tool_name"] for p in post] == ["Read", "Read", "Task"]  # the denied Read never ran
    assert post[-1]["tool_response"]["content"].startswith(ANSWER)
    [stop] = records(logs / "SubagentStop.jsonl")
    assert stop["session_id"] == sid and stop["transcript_path"] == str(main)
    assert stop["agent_transcript_path"] == str(side) and side.stem == f"agent-{stop['agent_id']}"
    assert stop["stop_hook_active"] is False
    child = bodies(api, "TASK-PROMPT-q9w")
    denied = [r for r in tool_results_of(child[-1]) if r.get("is_error")]
    assert len(denied) == 1 and "denied" in text_of(denied[0])


def test_a_permission_question_names_the_subagent_and_a_no_ends_both_turns(
    tmp_path: Path, fake_api: FakeAPI
) -> None:
    from agent.runtime import subagents
    from agent.runtime.loop import run_turn
    from core.messages import from_record, tool_pairs_ok
    from tests.helpers.session import make_session

    session, _ = make_session(tmp_path, fake_api, session_memory=False)
    asked: list[tuple[str, str]] = []
    answers = iter(["no", "yes"])

    def ask(tool: str, args: dict[str, Any], description: str) -> str:
        asked.append((tool, description))
        return next(answers)

    session.ask = ask
    subagents.install(session)
    steps = iter(
        [
            Reply.tool("Bash", {"command": "touch made-by-subagent"}),
            Reply.tool("Bash", {"command": "touch made-by-subagent"}),
            Reply.text("MADE"),
        ]
    )
    fake_api.conversation("MAKE-PROMPT", lambda body: next(steps))
    call = {
        "description": "Make a file",
        "prompt": "MAKE-PROMPT create the file",
        "subagent_type": "general-purpose",
    }
    fake_api.reply_tool("Task", call)
    assert run_turn(session, "make it").stop_reason == "declined"
    assert asked[0][0] == "Bash" and asked[0][1].endswith(
        'Asked by the subagent general-purpose ("Make a file")'
    )
    assert not (tmp_path / "project" / "made-by-subagent").exists()
    assert tool_pairs_ok(session.messages)
    fake_api.reply_tool("Task", call)
    fake_api.reply_text("It is made.")
    assert run_turn(session, "yes, make it").stop_reason == "end_turn"
    assert (tmp_path / "project" / "made-by-subagent").exists()
    fake_api.check()
    [declined, done] = session.subagents.runs
    assert (declined.status, done.status) == ("declined", "completed")
    side = records(declined.sidechain)
    assert tool_pairs_ok([m for m in map(from_record, side) if m is not None])


def test_an_explore_subagent_only_looks_even_when_everything_is_allowed(
    tmp_path: Path, fake_api: FakeAPI
) -> None:
    from agent.runtime import subagents
    from agent.runtime.loop import run_turn
    from tests.helpers.session import make_session

    session, _ = make_session(tmp_path, fake_api, session_memory=False, permission_mode="bypassPermissions")
    subagents.install(session)
    steps = iter(
        [
            Reply.tools([("Bash", {"command": "touch made"}), ("Bash", {"command": "ls -la"})]),
            Reply.text("LOOKED"),
        ]
    )
    fake_api.conversation("LOOK-PROMPT", lambda body: next(steps))
    fake_api.reply(task_call("LOOK-PROMPT look around").content)
    fake_api.reply_text("ok")
    assert run_turn(session, "look").stop_reason == "end_turn"
    fake_api.check()
    assert not (tmp_path / "project" / "made").exists()
    child = bodies(fake_api, "LOOK-PROMPT")
    refused, listed = tool_results_of(child[-1])
    assert refused.get("is_error") and "read-only" in text_of(refused)
    assert not listed.get("is_error") and "total" in text_of(listed)


def test_an_explore_subagent_writes_nothing_through_looking_programs(
    tmp_path: Path, fake_api: FakeAPI
) -> None:
    """Issue 30: sort --outp= (an abbreviation), uniq's second operand and file -C wrote files from the
    read-only agent; run for real in bypassPermissions, each is refused and no file appears."""
    from agent.runtime import subagents
    from agent.runtime.loop import run_turn
    from tests.helpers.session import make_session

    session, _ = make_session(tmp_path, fake_api, session_memory=False, permission_mode="bypassPermissions")
    subagents.install(session)
    project = tmp_path / "project"
    (project / "data.txt").write_text("b\na\na\n")
    (project / "magic").write_text("0 string PWN pwned\n")
    forms = ["sort --outp=OUT1 data.txt", "uniq data.txt OUT2", "file -C -m magic", "sort -k1 data.txt"]
    steps = iter([Reply.tools([("Bash", {"command": f}) for f in forms]), Reply.text("LOOKED")])
    fake_api.conversation("WRITE-PROMPT", lambda body: next(steps))
    fake_api.reply(task_call("WRITE-PROMPT look around").content)
    fake_api.reply_text("ok")
    assert run_turn(session, "look").stop_reason == "end_turn"
    fake_api.check()
    assert sorted(p.name for p in project.iterdir() if p.name not in (".claude",)) == ["data.txt", "magic"]
    *refused, sorted_ = tool_results_of(bodies(fake_api, "WRITE-PROMPT")[-1])
    assert all(r.get("is_error") and "read-only" in text_of(r) for r in refused)
    assert not sorted_.get("is_error") and text_of(sorted_).split() == ["a", "a", "b"]
