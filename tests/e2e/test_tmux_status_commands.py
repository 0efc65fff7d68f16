"""The session's information in a real terminal: the status line command under the input, /init,
/status, /config's table, /doctor's stale rules, /export. The real REPL in tmux against the fake Messages
API."""

from __future__ import annotations

import json
import re
import sys

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
