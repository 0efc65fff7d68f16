"""A tool call that breaks the permission check, a hook or the tool itself ends that call, never the session.

Through the real CLI (print mode) and the REPL: each failure becomes the call's error result, every
tool_use keeps its tool_result, so the next request is valid; settings that can't be used as written
(a rule that is no pattern, a hook timeout of 1e300) are named once where they are loaded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent.config import trust
from agent.runtime.loop import run_turn
from agent.runtime.tool_exec import run_tools
from core.messages import assistant, user_prompt
from tests.helpers.frontend import repl_for
from tests.helpers.session import make_session
from tests.helpers.wire import result_text, tool_results_of

DEEP = "echo " + "$(" * 300 + "x" + ")" * 300


def _results(api) -> list[dict]:
    return [r for req in api.message_requests[1:] for r in tool_results_of(req.body)]


def test_calls_that_break_the_check_or_the_tool_become_error_results_in_print_mode(
    fake_api, run_cli, project
):
    calls = [
        ("Bash", {"command": DEEP}),  # nested past any parser's recursion limit
        ("Read", {"file_path": "notes\x00.txt"}),  # a NUL byte in a path
        ("Glob", {"pattern": "*.py", "path": "src\x00"}),
        ("Grep", {"pattern": "x", "path": "a\x00b"}),
        ("Write", {"file_path": str(project / "w\x00.txt"), "content": "x"}),
        ("Read", {"file_path": "bad-\udcff-name.txt"}),  # a lone surrogate: no file name can hold it
        ("Bash", {"command": "echo a\x00b"}),
        ("Read", {"file_path": "~nosuchuser-xyz/f.txt"}),  # a home directory that does not exist
    ]
    for name, args in calls:
        fake_api.reply_tool(name, args)
    fake_api.reply_text("still here")

    res = run_cli(fake_api, "-p", "break things", "--dangerously-skip-permissions")

    assert res.code == 0, res.stderr
    assert res.stdout == "still here\n" and "internal error" not in res.stderr
    results = _results(fake_api)
    assert len(results) == len(calls)
    assert all(r["is_error"] for r in results[1:]), results
    fake_api.check()  # every request was valid: each tool_use has its tool_result


def test_a_broken_deny_rule_and_hook_timeouts_are_named_at_start_and_the_calls_fail_closed(
    fake_api, run_cli, project
):
    (project / "x").write_text("secret\n")
    claude = project / ".claude"
    claude.mkdir()
    hook = {"type": "command", "command": "echo checked >> hook-ran.txt"}
    (claude / "settings.json").write_text(
        json.dumps(
            {
                "permissions": {"deny": ["Read(x[z-a])", "Edit(src/[9-0]*)"]},
                "hooks": {
                    "PreToolUse": [
                        {"hooks": [{**hook, "timeout": 1e300}]},
                        {"hooks": [{**hook, "timeout": 1e20}]},
                        {"hooks": [{**hook, "timeout": 4e9}]},
                    ]
                },
            }
        )
    )
    trust.grant(Path(os.environ["COMPACT_AGENT_HOME"]), project)
    fake_api.reply_tool("Read", {"file_path": "x"})
    fake_api.reply_tool("Bash", {"command": "echo fine"})
    fake_api.reply_text("done")

    res = run_cli(fake_api, "-p", "read x", "--dangerously-skip-permissions")

    assert res.code == 0, res.stderr
    assert res.stdout == "done\n"
    assert 'deny rule "Read(x[z-a])" is not a usable pattern' in res.stderr
    assert 'deny rule "Edit(src/[9-0]*)"' in res.stderr
    assert res.stderr.count("is not a number of seconds") == 3, res.stderr
    read, bash = _results(fake_api)
    assert read["is_error"] and "secret" not in result_text(read)  # fails closed under the bad deny rule
    assert not bash.get("is_error") and "fine" in result_text(bash)
    assert (project / "hook-ran.txt").read_text() == "checked\n" * 3  # the hooks ran with the default timeout
    fake_api.check()


def test_in_the_repl_a_broken_call_is_answered_and_the_next_prompt_works(fake_api, project):
    fake_api.reply_tool("Read", {"file_path": "a\x00b"})
    fake_api.reply_text("first done")
    fake_api.reply_tools(
        [("Glob", {"pattern": "*", "path": "\udcff"}), ("Grep", {"pattern": "[", "path": "."})]
    )
    fake_api.reply_text("second done")
    fake_api.reply_text("third done")
    with repl_for(fake_api, project, COMPACT_AGENT_SESSION_MEMORY="0") as d:
        d.type("one\r")
        d.wait_for("first done")
        d.wait_idle()
        d.type("two\r")
        d.wait_for("second done")
        d.wait_idle()
        d.type("three\r")
        d.wait_for("third done")
        d.type("/exit\r")
        assert d.finish() == 0
    assert "Internal error" not in d.out
    assert fake_api.violations == []
    fake_api.check()


def test_a_call_left_unanswered_is_answered_before_the_next_prompt(fake_api, tmp_path):
    """Whatever left a tool_use without its result (a front end's bug), the next turn starts valid."""
    session, _ = make_session(tmp_path, fake_api)
    session.add(user_prompt("first"))
    session.add(
        assistant([{"type": "tool_use", "id": "toolu_open", "name": "Bash", "input": {"command": "ls"}}])
    )
    fake_api.reply_text("after")
    assert run_turn(session, "second").text == "after"
    [request] = fake_api.message_requests
    answered = request.body["messages"][2]["content"][0]
    assert answered["tool_use_id"] == "toolu_open" and answered["is_error"]
    fake_api.check()


def test_a_failure_inside_the_permission_check_is_one_calls_error(fake_api, tmp_path):
    session, _ = make_session(tmp_path, fake_api)

    class Exploding:
        def __getattr__(self, name):
            return getattr(real, name)

        def check(self, *a, **k):
            raise MemoryError("the checker ran out of room")

    real = session.permissions
    session.permissions = Exploding()  # type: ignore[assignment]
    uses = [
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "echo a"}},
        {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"file_path": "nope"}},
    ]
    message = run_tools(session, uses)
    first, second = message.tool_results
    assert (
        first["is_error"] and "MemoryError" in str(first["content"]) and "checking" in str(first["content"])
    )
    assert second["is_error"] and second["tool_use_id"] == "toolu_2"


def test_a_hard_link_to_a_denied_file_is_not_read_or_listed_through_its_other_name(
    fake_api, run_cli, project
):
    (project / "secrets").mkdir()
    (project / "secrets" / "key.txt").write_text("TOP-SECRET-VALUE\n")
    (project / "notes").mkdir()
    os.link(project / "secrets" / "key.txt", project / "notes" / "innocent.txt")
    os.link(project / "secrets" / "key.txt", project / "copy.md")
    (project / "plain.txt").write_text("plain\n")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["Read(secrets/**)"]}})
    )
    fake_api.reply_tool("Read", {"file_path": "notes/innocent.txt"})
    fake_api.reply_tool("Read", {"file_path": "copy.md"})
    fake_api.reply_tool("Glob", {"pattern": "**/*"})
    fake_api.reply_tool("Grep", {"pattern": "SECRET|plain", "output_mode": "content"})
    fake_api.reply_tool("Read", {"file_path": "plain.txt"})
    fake_api.reply_text("done")

    res = run_cli(fake_api, "-p", "look around")

    assert res.code == 0, res.stderr
    first, second, listing, grep, plain = (result_text(r) for r in _results(fake_api))
    assert "TOP-SECRET" not in first + second + grep and "hard link" in first
    assert "innocent.txt" not in listing and "copy.md" not in listing and "plain.txt" in listing
    assert "plain" in grep and "plain" in plain
    fake_api.check()


def test_no_process_a_command_can_see_holds_the_api_key_in_its_environment(fake_api, run_cli, project):
    """`cat /proc/*/environ | base64` (redaction can't see through base64) finds no key: not the agent's
    own start-up environment, not the watchdog's, not the command's."""
    secret = "sk-ant-environ-SECRET-0123456789"
    fake_api.reply_tool(
        "Bash", {"command": "cat /proc/*/environ 2>/dev/null | base64 -w0 > env.b64; sleep 0"}
    )
    fake_api.reply_tool(
        "Bash", {"command": "cat /proc/$PPID/environ /proc/self/environ | base64 -w0 > own.b64"}
    )
    fake_api.reply_text("done")

    res = run_cli(fake_api, "-p", "look", "--dangerously-skip-permissions", env={"ANTHROPIC_API_KEY": secret})

    assert res.code == 0, res.stderr
    import base64

    everything = base64.b64decode((project / "env.b64").read_text())
    assert b"COMPACT_AGENT_HOME=" in everything  # the agent's own environment was read
    assert secret.encode() not in everything
    own = base64.b64decode((project / "own.b64").read_text())
    assert b"HOME=" in own and secret.encode() not in own


def test_each_call_of_a_message_is_asked_about_just_before_it_runs(fake_api, tmp_path):
    """Issue 41: a question comes right before its call runs, after the calls before it have run, so the
    screen shows each call once (its header, its question, its result) in the message's order; readers
    allowed without a question run side by side, told to the front end as such."""
    from core.events import CallsInParallel, PermissionDenied, ToolFinished, ToolStarted

    session, events = make_session(tmp_path, fake_api)
    project = Path(session.settings.cwd)
    for name in "ab":
        (project / f"{name}.txt").write_text(name)
    log: list[str] = []

    def ask(tool, args, description):
        log.append(f"ask {tool}")
        return "yes"

    session.ask = ask
    session.emit = lambda e: (events.append(e), log.append(type(e).__name__ + " " + getattr(e, "name", "")))
    uses = [
        {"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": str(project / "a.txt")}},
        {"type": "tool_use", "id": "r2", "name": "Read", "input": {"file_path": str(project / "b.txt")}},
        {
            "type": "tool_use",
            "id": "w1",
            "name": "Write",
            "input": {"file_path": str(project / "c.txt"), "content": "c"},
        },
        {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "touch d.txt"}},
    ]
    message = run_tools(session, uses)
    assert [r.get("is_error", False) for r in message.tool_results] == [False] * 4
    assert [e.tool_use_ids for e in events if isinstance(e, CallsInParallel)] == [("r1", "r2")]
    calls = [line for line in log if not line.startswith(("ToolOutput", "MessageRecorded", "TodosChanged"))]
    tail = calls[calls.index("ask Write") :]
    assert tail == [
        "ask Write",
        "ToolStarted Write",
        "ToolFinished Write",
        "ask Bash",
        "ToolStarted Bash",
        "ToolFinished Bash",
    ], calls
    assert sum(1 for e in events if isinstance(e, ToolFinished)) == 4
    assert not any(isinstance(e, PermissionDenied) for e in events)
    assert [e.tool_use_id for e in events if isinstance(e, ToolStarted)][-2:] == ["w1", "b1"]
