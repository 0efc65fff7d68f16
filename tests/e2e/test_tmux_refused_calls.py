"""What did not run, on screen in a real terminal: a call a deny rule refused (Bash, MCP, a subagent's),
an @file attached, a Bash command stopped with Ctrl-C leaving its last lines. The real REPL in tmux
against the fake Messages API."""

from __future__ import annotations

import re
import time

from tests.fakeapi import Reply
from tests.helpers.mcp import config_file


def test_what_did_not_run_is_on_screen(agent_in_tmux, fake_api, project, tmp_path):  # noqa: F811
    """A call a deny rule refused (Bash and MCP) says what and why; an @file says it went in; a Bash
    command stopped with Ctrl-C leaves what it printed on screen."""
    cfg = config_file(tmp_path, {"basic": "basic"})
    (project / "notes.txt").write_text("one\ntwo\nthree\n")
    pane = agent_in_tmux(
        "--dangerously-skip-permissions",  # deny rules still win
        "--mcp-config",
        str(cfg),
        "--disallowedTools",
        "'Bash(rm:*) mcp__basic__echo'",
    )
    deadline = time.monotonic() + 60  # the server connects once the prompt is up: its tools exist then
    while "connected, " not in pane.screen():
        assert time.monotonic() < deadline, pane.screen()
        pane.type("/mcp")
        pane.wait_prompt()
        time.sleep(0.1)
    fake_api.reply_tools(
        [
            ("Bash", {"command": "rm -rf build"}, "toolu_rm"),
            ("mcp__basic__echo", {"text": "hi"}, "toolu_echo"),
        ]
    )
    fake_api.reply_text("Neither ran.")
    pane.type("clean up and echo")
    screen = pane.wait_for("Neither ran.")
    pane.wait_prompt()
    assert "● Bash(rm -rf build)" in screen and "● mcp__basic__echo(hi)" in screen, screen
    words = " ".join(screen.split())  # a long line wraps under its indentation
    assert 'Not run: Bash is denied by the rule "Bash(rm:*)" in the settings' in words
    assert 'Not run: mcp__basic__echo is denied by the rule "mcp__basic__echo" in the settings' in words

    fake_api.reply_text("Three lines.")
    pane.type("how long is @notes.txt?")
    screen = pane.wait_for("Three lines.")
    pane.wait_prompt()
    assert "⎿  Attached @notes.txt (3 lines)" in screen
    assert (
        screen.index("how long is @notes.txt?") < screen.index("Attached @notes.txt") < screen.index("Three")
    )

    command = "for i in 1 2 3 4 5 6 7; do echo printed-$i; done; sleep 30"
    fake_api.reply_tool("Bash", {"command": command})
    fake_api.reply_text("Stopped, I see.")
    pane.type("run the slow one")
    pane.wait_for("printed-7", visible=True)  # live, under the spinner
    pane.keys("C-c")
    pane.wait_for("Interrupted by user")
    pane.wait_prompt()
    screen = pane.screen()
    stopped = screen[screen.index("Bash(for i in") :]
    assert all(f"printed-{i}" in stopped for i in range(3, 8)), screen  # the last five lines stay
    assert stopped.index("printed-7") < stopped.index("Interrupted by user")
    assert fake_api.violations == []


def test_a_subagents_refused_call_is_on_screen(agent_in_tmux, fake_api, project):  # noqa: F811
    task = "TASK-PROMPT-clean: remove the build folder."

    def child(body: dict) -> Reply:
        if sum(1 for m in body["messages"] if m["role"] == "assistant") == 0:
            return Reply.tool("Bash", {"command": "rm -rf build"})
        return Reply.text("CHILD-REPORT: the rm was refused.")

    fake_api.conversation("TASK-PROMPT-clean", child)
    pane = agent_in_tmux("--disallowedTools", "'Bash(rm:*)'", width=80)
    fake_api.reply_tool(
        "Task", {"description": "Clean the build", "prompt": task, "subagent_type": "general-purpose"}
    )
    fake_api.reply_text("PARENT: the subagent could not remove it.")
    pane.type("clean the build with a subagent")
    screen = pane.wait_for("PARENT: the subagent")
    words = " ".join(screen.split())
    assert (
        '⎿ Clean the build: Bash(rm -rf build) not run: Bash is denied by the rule "Bash(rm:*)" in the settings'
        in words
    ), screen
    assert words.index("● Task(Clean the build)") < words.index("Clean the build: Bash(rm -rf build) not run")
    pane.wait_prompt()
    # /context's subagent lines laid out for 80 columns (item 7)
    pane.type("/context")
    screen = pane.wait_for(r"Subagents \(each in its own context; only their answers are above\):")
    pane.wait_prompt()
    tail = screen[screen.rindex("Subagents (each") :]
    assert all(len(line) <= 80 for line in tail.splitlines()), tail
    assert re.search(
        r"- Clean the build \(general-purpose, completed\): 0 tool uses · [\d.]+k? tokens of its\s", tail
    )
    assert fake_api.violations == []
