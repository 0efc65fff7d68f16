"""Output laid out for 80 columns in a real terminal, never cut mid-word by it: '1 tool use', /context's
memory and subagent rows, /cost, /help, /rewind's explanation, /memory's paths. The real REPL in tmux
against the fake Messages API."""

from __future__ import annotations

import re

from tests.fakeapi import Reply


def test_the_rounds_polish_holds_in_a_real_terminal_at_80_columns(agent_in_tmux, fake_api, project):  # noqa: F811
    """Issue 41 item 6, as its first round fixed it (tests/agent/frontend/test_result_wording.py and
    test_context_command.py), seen in tmux at 80 columns: '1 tool use', the CLAUDE.md row right under its category, the subagent under /context and
    /cost, and /compact with instructions on a tiny context answered without a model call."""
    (project / "CLAUDE.md").write_text("Use tabs.\n" * 40)
    (project / "a.txt").write_text("one\n")

    def child(body: dict) -> Reply:
        if sum(1 for m in body["messages"] if m["role"] == "assistant") == 0:
            return Reply.tool("Read", {"file_path": str(project / "a.txt")})
        return Reply.text("CHILD done.")

    fake_api.conversation("TASK-PROMPT-look", child)
    pane = agent_in_tmux("--dangerously-skip-permissions", width=80)
    fake_api.reply_tool(
        "Task", {"description": "Look at a", "prompt": "TASK-PROMPT-look: read a", "subagent_type": "Explore"}
    )
    fake_api.reply_text("Parent done.")
    pane.type("look with a subagent")
    screen = pane.wait_for("Parent done.")
    pane.wait_prompt()
    assert re.search(r"⎿  Done \(1 tool use · [\d.]+k tokens · \d+s\)", screen), screen
    sent = len(fake_api.message_requests)
    pane.type("/compact focus on the files")
    pane.wait_for(r"Nothing worth compacting")
    pane.wait_prompt()
    assert len(fake_api.message_requests) == sent  # no call that could save nothing
    pane.type("/context")
    screen = pane.wait_for(r"- Look at a \(Explore, completed\): 1 tool use")
    pane.wait_prompt()
    grid = screen[screen.rindex("Context usage") :].splitlines()
    memory = next(i for i, line in enumerate(grid) if "■ Memory files:" in line)
    assert "└ CLAUDE.md: " in grid[memory + 1]
    assert all(len(line) <= 80 for line in grid), "\n".join(grid)
    pane.type("/cost")
    screen = pane.wait_for(r"of which subagents \(1 task\)")
    pane.wait_prompt()
    said = screen[screen.rindex("> /compact focus") :].splitlines()
    assert all(len(line) <= 80 for line in said), "\n".join(said)  # laid out, not wrapped by the terminal
    assert fake_api.violations == []


def test_a_commands_output_breaks_between_words_never_mid_word(agent_in_tmux, fake_api):  # noqa: F811
    """Issue 41 item 6: /help, /rewind's explanation and /memory's paths at 80 columns were cut mid-word by
    the terminal ("optionall|y focused"). Each line now fits and a long one goes on under its second column
    (a command's description) or its indent; the memory file's path under home reads ~/…."""
    pane = agent_in_tmux(width=80)
    fake_api.reply_text("Hello.")
    pane.type("hello")
    pane.wait_for("Hello.")
    pane.wait_prompt()
    for command in ("/help", "/memory"):
        pane.type(command)
        pane.wait_for(r"Esc Esc rewinds" if command == "/help" else r"Project memory\s+\(")
        pane.wait_prompt()
    pane.type("/rewind")
    pane.wait_for(r"Rewind to which prompt\?")
    pane.wait_answer()
    pane.keys("Enter")
    pane.wait_prompt()
    screen = pane.screen()
    said = screen[screen.index("> /help") :].splitlines()
    assert all(len(line) <= 80 for line in said), "\n".join(line for line in said if len(line) > 80)
    compact = next(i for i, line in enumerate(said) if line.startswith("  /compact [instructions]  "))
    column = said[compact].index("Summarize")
    assert said[compact + 1].startswith(" " * column + "optionally focused by INSTRUCTIONS"), said[
        compact + 1
    ]
    words = " ".join(screen.split())
    assert "Project memory (~/.compact-agent/projects/" in words
    assert "sN summarizes what came before it, keeping the rest" in words
