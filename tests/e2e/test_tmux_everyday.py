"""The everyday pieces a Claude Code user reaches for (issue 41, item 4), each in a real terminal: the
REPL in tmux (tests/e2e/test_tmux.py's panes) against the fake Messages API, a real transcript on disk,
``--continue`` where a resume is part of it."""

from __future__ import annotations

import itertools
import json
import re
import sys
import time

from tests.fakeapi import Reply, is_compaction
from tests.helpers.mcp import config_file
from tests.helpers.tmux import LONG_REPLY

STATUS_SCRIPT = (
    "import json, sys; d = json.load(sys.stdin); "
    "print('SL', d['model']['id'], d['session_id'][:8], 'lines+%d' % d['cost']['total_lines_added'], "
    "d['workspace']['current_dir'] == d['cwd'])"
)


def _home_settings(isolated_env, settings: dict) -> None:
    folder = isolated_env / ".compact-agent"
    folder.mkdir(exist_ok=True)
    (folder / "settings.json").write_text(json.dumps(settings))


def test_the_status_line_command_reads_the_session_and_shows_under_the_input(
    agent_in_tmux,  # noqa: F811
    fake_api,
    project,
    isolated_env,
):
    command = f'{sys.executable} -c "{STATUS_SCRIPT}"'
    _home_settings(isolated_env, {"statusLine": {"type": "command", "command": command}})
    pane = agent_in_tmux("--dangerously-skip-permissions")
    screen = pane.wait_for(r"SL \S+ [0-9a-f]{8} lines\+0 True", visible=True)
    model = re.search(r"SL (\S+) ", screen).group(1)
    assert model.startswith("claude-")
    fake_api.reply_tool("Write", {"file_path": str(project / "a.py"), "content": "x = 1\ny = 2\n"})
    fake_api.reply_text("Written.")
    pane.type("write a.py")
    pane.wait_for("Written.")
    pane.wait_for(r"SL \S+ [0-9a-f]{8} lines\+2 True", visible=True)  # run again after the turn


def test_status_config_doctor_init_and_export(agent_in_tmux, fake_api, project, isolated_env):  # noqa: F811
    (project / "README.md").write_text("# Widget\n\nWidget turns gears into sprockets.\n")
    (project / "pyproject.toml").write_text('[project]\nname = "widget"\n[tool.ruff]\n')
    (project / "src").mkdir()
    (project / "src" / "gears.py").write_text("def turn():\n    return 1\n")
    _home_settings(
        isolated_env, {"permissions": {"allow": ["Bsh(ls)", "mcp__gone__tool"]}, "model": "claude-sonnet-4-6"}
    )
    pane = agent_in_tmux()

    pane.type("/init")
    pane.wait_for(r"Wrote CLAUDE\.md \(\d+ lines\)")
    written = (project / "CLAUDE.md").read_text()
    assert written.startswith("# project\n\nWidget turns gears into sprockets.")
    assert (
        "Python (1 file)" in written and "`python -m pytest`" not in written and "`ruff check .`" in written
    )
    assert "- `src/`: 1 file" in written
    pane.wait_prompt()
    pane.type("/init")
    pane.wait_for("CLAUDE.md exists already; /init leaves it as it is")
    pane.wait_prompt()

    fake_api.reply_text("Gears turn.")
    pane.type("what do gears do?")
    pane.wait_for("Gears turn.")
    pane.wait_prompt()
    [transcript] = list((isolated_env / ".compact-agent" / "projects").glob("*/*.jsonl"))
    pane.type("/status")
    screen = pane.wait_for(r"Permission mode: default")
    pane.wait_prompt()
    assert f"Session: {transcript.stem} (2 messages)" in screen
    assert "Model: claude-sonnet-4-6 · window 200k" in screen
    assert "Memory files: CLAUDE.md" in screen and "Settings files: ~/.compact-agent/settings.json" in screen

    pane.type("/config")
    screen = pane.wait_for(r"Values without a source are the defaults")
    pane.wait_answer()  # which setting to change: Enter alone changes none
    pane.keys("Enter")
    pane.wait_prompt()
    assert re.search(r"  model +claude-sonnet-4-6  \(~/\.compact-agent/settings\.json\)", screen)
    assert re.search(r"  disableCompact +off\n", screen) and "SHELL" not in screen

    pane.type("/doctor")
    screen = pane.wait_for(r"MCP servers: none configured")
    pane.wait_prompt()
    assert 'stale allow rule "Bsh(ls)": this agent has no tool "Bsh"' in screen
    assert 'stale allow rule "mcp__gone__tool": no MCP server "gone" is configured' in screen

    pane.type("/export")
    screen = pane.wait_for(r"Exported the conversation to \S+\.md")
    name = re.search(r"Exported the conversation to (\S+\.md)", screen).group(1)
    exported = (project / name).read_text()
    assert name.endswith("-what-do-gears-do.md") and oct((project / name).stat().st_mode & 0o777) == "0o600"
    assert "## You\n\nwhat do gears do?\n\n## Assistant\n\nGears turn.\n" in exported


def test_tool_search_shows_the_tools_it_found(agent_in_tmux, fake_api, tmp_path):  # noqa: F811
    cfg = config_file(tmp_path, {"basic": "basic"})
    fake_api.reply_tool("ToolSearch", {"query": "weather of a city"})
    fake_api.reply_text("Found the weather tool.")
    pane = agent_in_tmux("--mcp-config", str(cfg), ENABLE_TOOL_SEARCH="client")
    deadline = time.monotonic() + 60  # the server connects in the background; its tools are searchable
    for n in itertools.count(1):  # once it has
        pane.type("/mcp")
        if "connected, " in pane.wait_for(r"basic \[", count=n):
            break
        assert time.monotonic() < deadline, pane.screen()
        pane.wait_prompt()
        time.sleep(0.1)
    pane.wait_prompt()
    pane.type("weather in Oslo?")
    screen = pane.wait_for("Found the weather tool.")
    assert "Found 1 tool: mcp__basic__weather" in screen or re.search(
        r"Found \d tools: [^\n]*mcp__basic__weather", screen
    )
    assert "[tool_reference]" not in screen


def test_trust_lists_the_rules_always_answers_added(agent_in_tmux, fake_api, project):  # noqa: F811
    fake_api.reply_tool("Bash", {"command": "touch made.txt"})
    fake_api.reply_text("Made it.")
    pane = agent_in_tmux()
    pane.type("make a file")
    pane.wait_for(r"Allow\?|\[y\]")
    pane.wait_answer()
    pane.type("a")
    pane.wait_for("Made it.")
    pane.wait_prompt()
    pane.type("/trust")
    screen = pane.wait_for(r'Allowed for this session by "always" answers: \S')
    assert re.search(r'"always" answers: Bash\(touch[^)]*\)', screen)


def test_rewind_reaches_prompts_before_the_compaction_and_restores_code_after_continue(
    agent_in_tmux,  # noqa: F811
    fake_api,
    project,
):
    fake_api.on(is_compaction, Reply.text("<summary>The user had two files written.</summary>"))
    env = {"COMPACT_AGENT_SERVER_COMPACTION": "0"}
    pane = agent_in_tmux("--dangerously-skip-permissions", **env)
    fake_api.reply_tool("Write", {"file_path": str(project / "new.txt"), "content": "one\n"})
    fake_api.reply_tool("Write", {"file_path": str(project / "keep.txt"), "content": "original\n"})
    fake_api.reply_text(LONG_REPLY + "\nFIRST done.")
    pane.type("first: write new.txt and keep.txt")
    pane.wait_for("FIRST done.")
    pane.wait_prompt()
    fake_api.reply_tool("Write", {"file_path": str(project / "keep.txt"), "content": "changed\nagain\n"})
    fake_api.reply_text("SECOND done.")
    pane.type("second: change keep.txt")
    pane.wait_for("SECOND done.")
    pane.wait_prompt()
    pane.type("/compact")
    pane.wait_for(r"Compacted · manual")
    pane.wait_prompt()
    pane.type("/exit")
    pane.wait_exit()
    assert (project / "keep.txt").read_text() == "changed\nagain\n"

    pane = agent_in_tmux("--continue", "--dangerously-skip-permissions", **env)
    pane.type("/rewind")
    screen = pane.wait_for(r"Rewind to which prompt\?")
    pane.wait_answer()
    assert re.search(
        r"1\. first: write new\.txt and keep\.txt  \(before the compaction; 2 files changed since\)", screen
    )
    assert re.search(r"2\. second: change keep\.txt  \(before the compaction; 1 file changed since\)", screen)
    pane.type("c2")
    pane.wait_for(r"Code restored: keep\.txt")
    assert (project / "keep.txt").read_text() == "original\n" and (project / "new.txt").exists()
    pane.wait_prompt()
    pane.keys("C-u")
    pane.type("/rewind")
    pane.wait_for(r"Rewind to which prompt\?", count=2)
    pane.wait_answer()
    pane.type("c1")
    screen = pane.wait_for(r"Code restored: \S", count=2)
    assert not (project / "new.txt").exists() and not (project / "keep.txt").exists()
    assert re.search(r"Code restored: (new\.txt, keep\.txt|keep\.txt, new\.txt)", screen)
    fake_api.reply_text("THIRD done.")
    pane.wait_prompt()
    pane.keys("C-u")
    pane.type("a fresh start")
    pane.wait_for("THIRD done.")
    sent = json.dumps(fake_api.message_requests[-1].body["messages"])
    assert "first: write" not in sent and "two files written" not in sent


def test_cost_keeps_the_subagent_line_after_continue_and_shows_time_and_changes(
    agent_in_tmux,  # noqa: F811
    fake_api,
    project,
):
    fake_api.conversation("SUBTASK-7", lambda body: Reply.text("The subagent looked."))
    fake_api.reply_tool(
        "Task", {"description": "Look around", "prompt": "SUBTASK-7", "subagent_type": "Explore"}
    )
    fake_api.reply_tool("Write", {"file_path": str(project / "b.py"), "content": "a\nb\nc\n"})
    fake_api.reply_text("All done.")
    pane = agent_in_tmux("--dangerously-skip-permissions")
    pane.type("look, then write b.py")
    pane.wait_for("All done.")
    pane.wait_prompt()
    pane.type("/cost")
    live = pane.wait_for(r"of which subagents \(1 task\)")
    assert re.search(r"Time: [\d.]+s in this run, [\d.]+s of it waiting for the model", live)
    assert "Code changes: 3 lines added, 0 lines removed" in live
    pane.wait_prompt()
    pane.type("/exit")
    pane.wait_exit()
    pane = agent_in_tmux("--continue")
    pane.type("/cost")
    screen = pane.wait_for(r"of which subagents \(1 task\)")
    assert "Code changes: 3 lines added, 0 lines removed" in screen
    assert re.search(
        r"of which subagents \(1 task\): \$0\.\d{4}\n  usage: .* [1-9][\d,]* cache write", screen
    )
