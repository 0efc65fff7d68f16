"""The user's Claude Code configuration (issue 22 §2) and the settings-file minors of issue 20: the
user's ~/.claude/settings.json, a project's broken settings file, files that are not regular files,
and the project root found upwards from a subdirectory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.config import trust
from agent.config.settings import load_settings
from core.errors import SettingsError


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    home, agent_home, project = tmp_path / "home", tmp_path / "agent-home", tmp_path / "project"
    for d in (home / ".claude", agent_home, project / ".claude"):
        d.mkdir(parents=True)
    return home, agent_home, project


def load(dirs: tuple[Path, Path, Path], cwd: Path | None = None, **env: str):
    home, agent_home, project = dirs
    environ = {"HOME": str(home), "COMPACT_AGENT_HOME": str(agent_home), **env}
    return load_settings(cwd=cwd or project, environ=environ, cli={})


def test_claude_code_user_settings_are_read_beneath_the_agents_own(dirs):
    home, agent_home, _ = dirs
    (home / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "model": "claude-opus-4-1",
                "permissions": {"allow": ["Bash(make:*)"], "deny": ["Read(secrets/**)"]},
                "env": {"FROM_CLAUDE": "1"},
                "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]},
            }
        )
    )
    s = load(dirs)
    assert s.model == "claude-opus-4-1" and s.allow == ["Bash(make:*)"] and s.deny == ["Read(secrets/**)"]
    assert (
        s.environ["FROM_CLAUDE"] == "1" and "Stop" in s.hooks and s.report.ignored == []
    )  # the user's: trusted
    (agent_home / "settings.json").write_text(json.dumps({"model": "claude-sonnet-4-5"}))
    assert load(dirs).model == "claude-sonnet-4-5"  # $COMPACT_AGENT_HOME/settings.json wins over it


def test_the_users_own_malformed_claude_settings_still_stop(dirs):
    path = dirs[0] / ".claude" / "settings.json"
    path.write_text("{nope")
    with pytest.raises(SettingsError, match=str(path)):
        load(dirs)


def test_a_fifo_or_a_link_to_dev_zero_is_refused_without_hanging(dirs):
    settings = dirs[2] / ".claude" / "settings.json"
    os.mkfifo(settings)
    s = load(dirs)  # would block forever if the FIFO were opened for a plain read
    assert s.report.warnings == [
        f"{settings}: cannot read settings file: it is not a regular file; going on without this file"
    ]
    settings.unlink()
    settings.symlink_to("/dev/zero")
    assert "not a regular file" in load(dirs).report.warnings[0]
    user = dirs[1] / "settings.json"
    user.symlink_to("/dev/zero")
    with pytest.raises(SettingsError, match="not a regular file"):
        load(dirs)


def test_a_huge_settings_file_is_refused(dirs):
    settings = dirs[2] / ".claude" / "settings.local.json"
    settings.write_text('{"model": "' + "x" * 2_000_000 + '"}')
    assert "larger than" in load(dirs).report.warnings[0]


def test_started_in_a_subdirectory_the_projects_settings_and_trust_apply(dirs):
    _, agent_home, project = dirs
    (project / ".git").mkdir()
    (project / ".claude").rmdir()
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["Bash(rm:*)"], "allow": ["Bash(ls:*)"]}})
    )
    src = project / "src" / "pkg"
    src.mkdir(parents=True)
    s = load(dirs, cwd=src)
    assert s.root == project and s.deny == ["Bash(rm:*)"] and s.allow == []  # untrusted: allow ignored
    trust.grant(agent_home, project)
    assert load(dirs, cwd=src).allow == ["Bash(ls:*)"]


def test_an_untrusted_project_cannot_turn_thinking_on(dirs):
    _, agent_home, project = dirs
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"alwaysThinkingEnabled": True, "maxThinkingTokens": 30000})
    )
    s = load(dirs)
    assert (s.always_thinking, s.max_thinking_tokens) == (False, None)
    assert [i.what for i in s.report.ignored] == ["alwaysThinkingEnabled True", "maxThinkingTokens 30000"]
    trust.grant(agent_home, project)
    s = load(dirs)
    assert (s.always_thinking, s.max_thinking_tokens, s.report.ignored) == (True, 30000, [])


def test_the_home_directorys_claude_folder_is_not_a_project(dirs):
    home, _, _ = dirs
    work = home / "scratch"
    work.mkdir()
    (home / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Bash(ls:*)"]}}))
    s = load(dirs, cwd=work)
    assert s.root == work and s.allow == ["Bash(ls:*)"] and s.report.ignored == []


def test_print_mode_warns_once_about_a_broken_project_file_and_goes_on(fake_api, run_cli, project):
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{"model": ')
    fake_api.reply_text("fine")
    res = run_cli(fake_api, "-p", "hello")
    assert res.code == 0 and res.stdout == "fine\n"
    assert res.stderr.count("settings.json") == 1 and "invalid JSON" in res.stderr
