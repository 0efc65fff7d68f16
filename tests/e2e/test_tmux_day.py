"""A Claude Code user's working day in a real terminal (issue 41, items 1-3): the compaction still readable
after ``/exit`` and ``--continue``, what did not run said on screen, and the model picker. Each test runs
the real REPL in tmux (tests/e2e/test_tmux.py's panes) against the fake Messages API, with a real
transcript on disk."""

from __future__ import annotations

import re
import time

import pytest

from tests.fakeapi import Reply, is_compaction, is_server_compaction
from tests.helpers.mcp import config_file
from tests.helpers.tmux import LONG_REPLY

LOCAL_SUMMARY = "LOCAL-SUMMARY-7c1: a reply of 560 numbered lines was written."


@pytest.mark.parametrize("writer", ["server", "local"])
def test_the_compaction_stays_readable_after_exit_and_continue(
    agent_in_tmux,  # noqa: F811 - the fixture imported above
    fake_api,
    writer,
):
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "60000"}
    if writer == "local":
        env["COMPACT_AGENT_SERVER_COMPACTION"] = "0"
        fake_api.on(is_compaction, Reply.text(f"<summary>{LOCAL_SUMMARY}</summary>"))
    pane = agent_in_tmux(**env)
    fake_api.reply_text(LONG_REPLY, thinking="Writing the long version.")
    pane.type("hello, please write a lot")
    pane.wait_for("END-OF-LONG-REPLY")
    pane.wait_prompt()
    # the server's summary replaces what the last request sent and keeps its reply: a short one, so the
    # long one is what it takes away
    fake_api.reply_text("SHORT-REPLY.", thinking="A short one now.")
    pane.type("and now briefly")
    pane.wait_for("SHORT-REPLY.")
    pane.wait_prompt()
    pane.type("/compact")
    pane.wait_for(r"Compacted · manual", timeout=60)
    pane.wait_prompt()
    # the summary itself, as shown live: the one scripted above, or the one the fake's server wrote
    said = LOCAL_SUMMARY if writer == "local" else "Summary of the conversation so far"
    pane.type("/summary")
    pane.wait_for(r"Summary from the last compaction \(manual · [^)]*\):")
    # its body is printed after its heading line (a heading under the echoed "> /summary" looks like a
    # prompt over its toolbar to wait_prompt: wait for the body itself)
    live = pane.wait_for(re.escape(said))
    pane.wait_prompt()
    # three exchanges after it: the recap's walk back no longer reaches the summary itself
    for n in range(3):
        fake_api.reply_text(f"ANSWER-{n} after the compaction.")
        pane.type(f"question {n}")
        pane.wait_for(f"ANSWER-{n} after")
        pane.wait_prompt()
    pane.type("/exit")
    pane.wait_exit()
    server = [r for r in fake_api.message_requests if is_server_compaction(r.body)]
    assert len(server) == (1 if writer == "server" else 0)

    pane = agent_in_tmux("--continue", **env)
    screen = pane.wait_for(r"Resumed session")
    assert "(earlier messages were compacted · /summary shows the summary" in screen
    assert screen.index("earlier messages were compacted") < screen.index("question 0") or (
        "question 0" not in screen  # the recap shows the last three exchanges
    )
    pane.type("/summary")
    pane.wait_for(r"Summary from the last compaction \(manual · ")
    pane.wait_prompt()
    screen = pane.screen()
    written = "server's summary" if writer == "server" else "local summary"
    assert f"(manual · {written} · " in screen
    assert "No compaction in this session yet" not in screen
    assert "This session continues an earlier conversation" not in screen  # the model's wrapper
    assert live.count(said) == 1 and screen.count(said) == 1
    pane.type("/history")
    screen = pane.wait_for(r"Before the last compaction \(\d+ messages\):")
    assert "user: hello, please write a lot" in screen
    assert fake_api.violations == []


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


def test_model_is_a_picker_and_a_bad_model_id_is_answered_with_the_valid_ones(agent_in_tmux, fake_api):  # noqa: F811
    fake_api.strict_models = True  # a model id the server does not list is a 404, as on the real API
    pane = agent_in_tmux()
    pane.type("/model")
    screen = pane.wait_for(r"Switch to which model\? 1-4 or a name · Enter: keep claude-sonnet-5-5")
    rows = {
        line.split()[1]: line for line in screen.splitlines() if line.strip()[:2] in ("1.", "2.", "3.", "4.")
    }
    assert list(rows) == ["sonnet", "opus", "haiku", "fable"]
    assert "claude-sonnet-5-5  Sonnet 5.5  1M" in rows["sonnet"] and rows["sonnet"].endswith("← current")
    assert "2 / 10 / 0.10" in rows["sonnet"] and "low–max (high)" in rows["sonnet"]
    assert "claude-fable-5-2   Fable 5.2   1M" in rows["fable"] and "8 / 40 / 0.20" in rows["fable"]
    assert "0.10 / 0.50 / 0.01 *" in rows["haiku"] and "at 5x" in screen
    pane.wait_answer()
    pane.type("2")
    pane.wait_for(r"Model set to claude-opus-5-5 · Opus 5.5, 1M window, \$4 in / \$20 out")
    pane.wait_prompt()

    pane.type("/model claude-sonet-5-5")  # a typo: refused at once, with the valid ones
    screen = pane.wait_for(r"The API has no model named claude-sonet-5-5\. Did you mean claude-sonnet-5-5\?")
    pane.wait_prompt()
    assert "claude-fable-5-2" in screen[screen.index("The API has no model named") :]
    fake_api.reply_text("Opus here.")
    pane.type("who answers?")
    pane.wait_for("Opus here.")
    assert fake_api.message_requests[-1].body["model"] == "claude-opus-5-5"  # the typo changed nothing
    assert fake_api.violations == []


def test_a_bad_model_on_the_command_line_is_answered_with_the_valid_ones(agent_in_tmux, fake_api):  # noqa: F811
    fake_api.strict_models = True
    pane = agent_in_tmux("--model", "claude-sonet-5-5")
    pane.type("hello")
    screen = pane.wait_for(r"The API has no model named claude-sonet-5-5\.")
    pane.wait_prompt()
    words = " ".join(screen.split())
    assert "Did you mean claude-sonnet-5-5?" in words and "claude-haiku-5-5" in words
    assert "Pick one with /model, or start with --model." in words
    assert "API error 404" not in screen


def test_the_line_after_a_resume_that_drops_earlier_thinking_says_what_to_do(
    agent_in_tmux,  # noqa: F811
    fake_api,
    tmp_path,
):
    fake_api.expect_refusals()  # the resume below changes the tools under the thinking: one refusal
    pane = agent_in_tmux()
    fake_api.reply_text("First answer.", thinking="Thinking about the first question.")
    pane.type("first question")
    pane.wait_for("First answer.")
    pane.wait_prompt()
    pane.type("/exit")
    pane.wait_exit()

    cfg = config_file(tmp_path, {"basic": "basic"})  # an MCP server now: the tools differ (ToolSearch)
    pane = agent_in_tmux("--continue", "--mcp-config", str(cfg))
    fake_api.reply_text("Second answer.")
    pane.type("second question")
    screen = pane.wait_for("Second answer.")
    words = " ".join(screen.split())
    assert "Note: the model's earlier thinking in this conversation no longer matches" in words
    assert "Your messages, the replies and the tool results are all kept, and there is nothing to do" in words
    assert "refused" not in words
    assert len(fake_api.binding.fallbacks) == 1
    fake_api.binding.fallbacks.clear()


def test_the_spinner_leaves_out_the_time_a_question_waited(agent_in_tmux, fake_api, project):  # noqa: F811
    """Issue 41 item 2: "Working… 12s" counted the seconds a permission question waited for the user. The
    user thinks 4 s before answering; the command then runs under the spinner (until the test has read it),
    whose seconds count the work only."""
    fake_api.reply_tool("Bash", {"command": "until [ -e read.flag ]; do sleep 0.05; done; echo slept"})
    fake_api.reply_text("Slept.")
    pane = agent_in_tmux(width=80)
    pane.type("sleep a little")
    pane.wait_for(r"Allow\? \[y\]es")
    pane.wait_answer()
    time.sleep(4)  # the user reads the question
    pane.type("y")
    screen = pane.wait_for(r"Running Bash… \d+s", visible=True)
    shown = int(re.search(r"Running Bash… (\d+)s", screen).group(1))
    assert shown < 3, screen  # with the wait counted: 4 s or more (seen: 0, 4 runs beside 10 panes, load 11)
    (project / "read.flag").touch()
    pane.wait_for("Slept.")
    pane.wait_prompt()
    assert fake_api.violations == []
