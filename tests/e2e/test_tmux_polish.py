"""Polish in a real terminal (issue 41, item 6, and what its round left): the calls of one message shown in
order and each once, real line breaks where a text has them, paths as the rest of the screen shows them,
a subagent's refused call on screen. The real REPL in tmux (tests/e2e/test_tmux.py's panes), 80 columns."""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.fakeapi import Reply
from tests.helpers.mcp import config_file
from tests.helpers.tmux import Pane


def test_a_batch_of_calls_is_shown_in_order_each_once_with_paths_as_elsewhere(
    agent_in_tmux,  # noqa: F811 - the fixture imported above
    fake_api,
    project,
    isolated_env,
    tmp_path,
):
    for name in "abc":
        (project / f"{name}.txt").write_text(f"{name}\n")
    (isolated_env / "outside.txt").write_text("from home\n")
    cfg = config_file(tmp_path, {"basic": "basic"})
    pane = agent_in_tmux("--mcp-config", str(cfg), "--disallowedTools", "'Bash(rm:*)'", width=80)
    deadline = time.monotonic() + 60  # the server connects once the prompt is up
    while "connected, " not in pane.screen():
        assert time.monotonic() < deadline, pane.screen()
        pane.type("/mcp")
        pane.wait_prompt()
        time.sleep(0.1)
    fake_api.reply_tools(
        [
            *((("Read", {"file_path": str(project / f"{n}.txt")}, f"t_{n}") for n in "abc")),
            ("Write", {"file_path": str(project / "d.txt"), "content": "x\n"}, "t_write"),
            ("Read", {"file_path": str(isolated_env / "outside.txt")}, "t_home"),
            ("mcp__basic__echo", {"text": "first line\nsecond line"}, "t_echo"),
            ("Bash", {"command": "echo a\nrm -rf build"}, "t_rm"),
        ]
    )
    fake_api.reply_text("All done.")
    pane.type("do the batch")
    for n in range(3):  # the Write, the Read outside the project, the MCP call
        pane.wait_for(r"Allow\? \[y\]es", count=n + 1)
        pane.wait_answer()
        pane.type("y")
    screen = pane.wait_for("All done.")
    pane.wait_prompt()
    turn = screen[screen.index("> do the batch") :]
    # each header at the start of its line: no spinner frame left in front of it (test_spinner.py)
    headers = [line for line in turn.splitlines() if "● " in line and "All done" not in line]
    assert headers == [
        "● Read(a.txt)",
        "● Read(b.txt)",
        "● Read(c.txt)",
        "● Write(d.txt)",
        "● Read(~/outside.txt)",
        "● mcp__basic__echo(first line",
        "● Bash(echo a …)",
    ], turn
    # each call's result under its own header, before the next call
    blocks = re.split(r"\n(?=● )", turn)
    assert "Wrote 1 line to d.txt" in next(b for b in blocks if b.startswith("● Write(d.txt)"))
    assert "Read 1 line" in next(b for b in blocks if b.startswith("● Read(~/outside.txt)"))
    echo = next(b for b in blocks if b.startswith("● mcp__basic__echo"))
    assert "text: first line" in echo and "  second line" in echo and "echo: first line" in echo
    assert "Not run: Bash is denied" in " ".join(next(b for b in blocks if b.startswith("● Bash")).split())
    assert "\\n" not in turn  # real line breaks, never an escaped one
    assert str(project) not in turn and str(isolated_env) not in turn  # relative, or under ~
    assert "(new file, 1 line)" in turn
    assert all(len(line) <= 80 for line in turn.splitlines())
    # /context's MCP lines laid out for 80 columns by us, not by the terminal's wrapping (item 7)
    pane.type("/context")
    screen = pane.wait_for(r"- deferred \(not in the context until a search finds\s+them\): ")
    pane.wait_prompt()
    tail = screen[screen.rindex("MCP tools: 5 from 1 server; search: ToolSearch") :]
    assert all(len(line) <= 80 for line in tail.splitlines()), tail
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


@pytest.mark.parametrize("width", [80, 160])
def test_the_model_table_fits_80_columns_and_uses_160(agent_in_tmux, fake_api, width):  # noqa: F811
    """Issue 41 item 4: the /model table is laid out for the terminal, never wrapped by it."""
    pane = agent_in_tmux(width=width)
    pane.type("/model")
    screen = pane.wait_for(r"Switch to which model\? 1-4 or a name")
    pane.keys("Enter")
    pane.wait_prompt()
    table = screen[screen.index("Model: claude-sonnet-5-5") : screen.index("Switch with /model N")]
    lines = table.splitlines()
    assert all(len(line) <= width for line in lines), table  # -J joins what the terminal wrapped
    rows = [line for line in lines if line.lstrip().startswith(("1.", "2.", "3.", "4."))]
    assert len(rows) == 4 and "claude-opus-5-5" in rows[1] and "4 / 20 / 0.20" in rows[1]
    if width == 80:
        assert rows[0].endswith("low–max (high) ←") and "opus: deeper work" in table
    else:  # the family, the whole mark, and what each model is for on its row
        assert "Opus 5.5" in rows[1] and "deeper work; thinking can't be turned off" in rows[1]
        assert rows[0].endswith("← current")


def test_every_question_is_answered_one_way(fake_api, project, isolated_env):
    """Issue 41 item 6: the trust dialog, a permission question, the /model and /rewind pickers and a
    # note's question all end with what Enter alone does, and all take their answer the same way: typed
    after ›, sent with Enter (a single key alone answers nothing)."""
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["Bash(make:*)"]}})
    )
    env = {**fake_api.env(), "COMPACT_AGENT_SESSION_MEMORY": "0"}
    pane = Pane(isolated_env, project, env, [], width=80)
    try:
        pane.wait_for(r"Trust this project and apply them\? \[y\]es / \[n\]o · Enter: no")
        pane.wait_answer()
        pane.keys("Enter")  # Enter alone: the answer that changes nothing
        pane.wait_for("Not trusted: going on without them")
        pane.wait_prompt()

        fake_api.reply_tool("Bash", {"command": "touch made.txt"})
        fake_api.reply_text("Made it.")
        pane.type("make a file")
        screen = pane.wait_for(r"Allow\? \[y\]es / \[n\]o / \[a\]lways for this session")
        assert "(adds Bash(touch:*)) · Enter: no" in " ".join(screen.split())  # wrapped at 80
        pane.wait_answer()
        pane.keys("y")  # a key alone is only typed ...
        pane.wait_for(r"  › y\n*$", visible=True)  # drawn: the key has been read
        time.sleep(0.3)
        assert "→ Yes" not in pane.screen() and not (project / "made.txt").exists()
        pane.keys("Enter")  # ... Enter sends it
        pane.wait_for("Made it.")
        pane.wait_prompt()
        assert (project / "made.txt").exists()

        pane.type("/model")
        pane.wait_for(r"Switch to which model\? 1-4 or a name · Enter: keep claude-sonnet-5-5")
        pane.wait_answer()
        pane.keys("Enter")
        pane.wait_prompt()

        pane.type("# indent with tabs")
        pane.wait_for(  # 81 characters: the hint on a line of its own at 80 columns
            r"Add to memory: \[p\]roject CLAUDE.md or \[u\]ser ~/.claude/CLAUDE.md\?\n· Enter: cancel"
        )
        pane.wait_answer()
        pane.type("u")
        pane.wait_for(r"Noted in ~/.claude/CLAUDE.md \(read with every request\)")
        pane.wait_prompt()

        pane.type("/rewind")
        pane.wait_for(r"Rewind to which prompt\? N, cN or sN \(1-1\) · Enter: stay here")
        pane.wait_answer()
        pane.keys("Escape")  # Esc is Enter alone
        pane.wait_prompt()
        screen = pane.screen()
        assert len(re.findall(r" · Enter: ", " ".join(screen.split()))) == 5, screen
        answers = [line.strip() for line in screen.splitlines() if line.startswith("  ›")]
        assert answers == ["›", "› y", "›", "› u", "›"], screen
        assert "Model set to" not in screen and "Rewound" not in screen
        assert "indent with tabs" in (isolated_env / ".claude" / "CLAUDE.md").read_text()
    finally:
        pane.close()


def test_config_changes_settings_through_its_rows_and_keeps_them(agent_in_tmux, fake_api, isolated_env):  # noqa: F811
    """Issue 41 item 8: /config asks which setting and its value, as every question is asked; the value
    goes to the user's settings file (0600) and into the session, and the next start reads it back."""
    pane = agent_in_tmux(width=80)
    pane.type("/config")
    screen = pane.wait_for(r"Change which setting\? 1-7 or a name · Enter: none")
    assert "Change these here (saved to ~/.compact-agent/settings.json, yours):" in screen
    pane.wait_answer()
    pane.type("2")
    pane.wait_for(r"autoCompactEnabled \(now on\): on \| off\? · Enter: keep it")
    pane.wait_answer()
    pane.type("off")
    pane.wait_for(r"autoCompactEnabled set to off \(saved to ~/.compact-agent/settings.json\)\.")
    pane.wait_prompt()
    pane.type("/config effortLevel max")
    pane.wait_for(r"effortLevel set to max")
    pane.wait_prompt()
    path = isolated_env / ".compact-agent" / "settings.json"
    assert json.loads(path.read_text()) == {"autoCompactEnabled": False, "effortLevel": "max"}
    assert path.stat().st_mode & 0o777 == 0o600
    pane.type("/context")  # the session compacts no more on its own: the bar says so
    screen = pane.wait_for(r"Context usage")
    pane.wait_prompt()
    pane.type("/exit")
    pane.wait_exit()

    pane = agent_in_tmux(width=80)
    pane.type("/config")
    screen = pane.wait_for(r"Change which setting\?")
    pane.wait_answer()
    pane.keys("Enter")
    pane.wait_prompt()
    assert re.search(r"  autoCompactEnabled +off +\(~/\.compact-agent/settings\.json\)", screen), screen
    assert re.search(r"  2\. autoCompactEnabled +off +on \| off", screen)
    assert re.search(r"  4\. effortLevel +max ", screen)


def test_the_rounds_polish_holds_in_a_real_terminal_at_80_columns(agent_in_tmux, fake_api, project):  # noqa: F811
    """Issue 41 item 6, as its first round fixed it (tests/agent/frontend/test_polish.py), seen in tmux at
    80 columns: '1 tool use', the CLAUDE.md row right under its category, the subagent under /context and
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


@pytest.mark.parametrize("width", [80, 160])
def test_config_is_laid_out_for_the_terminal_never_wrapped_by_it(
    agent_in_tmux,  # noqa: F811 - the fixture imported above
    fake_api,
    isolated_env,
    width,
):
    """Issue 41 item 6 (what its third round left): every line of /config fits the terminal, at 80 and at
    160 columns; a source goes under its value when both don't fit, a path too long for its column loses
    its middle (never its end), and the prose and the list of values break between words."""
    memory = isolated_env / "memory-of-the-widget-project" / "kept-apart-from-its-repository"
    shown = "~/memory-of-the-widget-project/kept-apart-from-its-repository"  # under home: ~/…
    home = isolated_env / ".compact-agent"
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"autoMemoryDirectory": str(memory)}))
    pane = agent_in_tmux(width=width)
    pane.type("/config")
    screen = pane.wait_for(r"Change which setting\? 1-7 or a name · Enter: none")
    pane.wait_answer()
    pane.keys("Enter")
    pane.wait_prompt()
    said = screen[screen.index("> /config") : screen.index("Change which setting?")]
    lines = said.splitlines()
    # capture-pane -J joins what the terminal wrapped: a longer line is one the terminal broke
    assert all(len(line) <= width for line in lines), "\n".join(ln for ln in lines if len(ln) > width)
    words = " ".join(said.split())
    assert (
        "Values without a source are the defaults. Change them in ~/.claude/settings.json or "
        "~/.compact-agent/settings.json (yours), .claude/settings.json (the project's), or the environment."
    ) in words
    row = next(i for i, line in enumerate(lines) if line.startswith("  autoMemoryDirectory "))
    effort = next(i for i, line in enumerate(lines) if line.startswith("  4. effortLevel "))
    if width == 160:  # the whole path, its source beside it; the values on one line
        assert lines[row].endswith(f"  {shown}  (~/.compact-agent/settings.json)"), lines[row]
        assert lines[effort].endswith("auto               low | medium | high | xhigh | max | auto")
    else:  # the path's end kept, its source under it, in the value's column
        value_at = lines[row].index("~/memory-of")
        assert "…" in lines[row] and lines[row].endswith("/kept-apart-from-its-repository"), lines[row]
        assert lines[row + 1] == " " * value_at + "(~/.compact-agent/settings.json)"
        assert lines[effort].endswith("low | medium | high | xhigh |")
        assert lines[effort + 1].strip() == "max | auto"
        assert lines[effort + 1].index("max") == lines[effort].index("low")
    assert "  COMPACT_AGENT_HOME" in said and "~/.compact-agent  (env COMPACT_AGENT_HOME)" in said
    assert str(isolated_env) not in said  # a path under home as ~/…, as on the rest of the screen


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
