"""Instruction files as Claude Code reads them (issue 22 §1, docs/files.md), end to end through the CLI
against the fake API, and the environment block: the user's and the project's CLAUDE.md files up to the
repository root, nested ones once a file under them is read, ``@path`` imports, and (issue 20 major 5)
files that resolve outside the project or are not regular files, which never reach a request."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from agent.config.system_prompt import MAX_IMPORT_DEPTH, Where, imports, instruction_files, status_summary


def system_text(api) -> str:  # type: ignore[no-untyped-def]
    body = api.message_requests[-1].body
    return "\n".join(block["text"] for block in body["system"])


@pytest.fixture
def repo(project: Path) -> Path:
    """project/ is a git repository with a calc/ package below it."""
    subprocess.run(["git", "init", "-q", "-b", "trunk"], cwd=project, check=True)
    (project / "calc").mkdir()
    return project


def test_every_level_is_read_from_a_subdirectory_in_order(fake_api, run_cli, repo, isolated_env):
    (isolated_env / ".claude").mkdir()
    (isolated_env / ".claude" / "CLAUDE.md").write_text("MARK-CLAUDE-HOME")
    (isolated_env / ".compact-agent").mkdir()
    (isolated_env / ".compact-agent" / "CLAUDE.md").write_text("MARK-AGENT-HOME")
    (repo / "CLAUDE.md").write_text("MARK-REPO")
    (repo / ".claude").mkdir()
    (repo / ".claude" / "CLAUDE.md").write_text("MARK-REPO-DOTCLAUDE")
    (repo / "CLAUDE.local.md").write_text("MARK-REPO-LOCAL")
    (repo / "calc" / "CLAUDE.md").write_text("MARK-CALC")
    fake_api.reply_text("ok")
    res = run_cli(fake_api, "-p", "hi", cwd=repo / "calc")
    assert res.code == 0, res.stderr
    text = system_text(fake_api)
    marks = [
        "MARK-CLAUDE-HOME",
        "MARK-AGENT-HOME",
        "MARK-REPO",
        "MARK-REPO-DOTCLAUDE",
        "MARK-REPO-LOCAL",
        "MARK-CALC",
    ]
    positions = [text.index(m + "\n") if m + "\n" in text else text.index(m) for m in marks]
    assert positions == sorted(positions)
    assert "Git branch: trunk" in text and f"Working directory: {repo / 'calc'}" in text


@pytest.mark.parametrize("target", ["ssh", "/proc/self/environ"])
def test_a_claude_md_that_links_out_of_an_untrusted_project_never_reaches_a_request(
    fake_api, run_cli, repo, isolated_env, target
):
    key = isolated_env / ".ssh" / "id_rsa"
    key.parent.mkdir()
    key.write_text("-----BEGIN PRIVATE KEY----- SECRET-KEY-BYTES")
    (repo / "CLAUDE.md").symlink_to(key if target == "ssh" else target)
    (repo / ".claude").mkdir()
    (repo / ".claude" / "CLAUDE.md").write_text("see @../../outside.md and @/etc/hostname")
    (repo.parent / "outside.md").write_text("OUTSIDE-MARK")
    fake_api.reply_text("one")
    fake_api.reply_text("two")
    first = run_cli(fake_api, "-p", "hi", env={"SECRET_ENV_MARK": "s3cr3t-value"})
    second = run_cli(fake_api, "-p", "again", "--continue", env={"SECRET_ENV_MARK": "s3cr3t-value"})
    assert first.code == 0 and second.code == 0
    for request in fake_api.message_requests:
        sent = str(request.body)
        assert "SECRET-KEY-BYTES" not in sent and "s3cr3t-value" not in sent and "test-key" not in sent
        assert "OUTSIDE-MARK" not in sent
    assert "see @../../outside.md" in system_text(fake_api)  # the file itself is the project's: read
    lines = [line for line in first.stderr.splitlines() if "Instruction file not read" in line]
    assert len(lines) == 3  # said once each: the link, and the two imports that leave the project
    assert any(str(repo / "CLAUDE.md") in line for line in lines)


def test_imports_nest_to_a_limit_and_survive_cycles(tmp_path: Path):
    project = tmp_path / "p"
    (project / "docs").mkdir(parents=True)
    (project / "CLAUDE.md").write_text(
        "Style: @docs/style.md\nmail me at a@b.com\n```\n@docs/not-this.md\n```"
    )
    (project / "docs" / "style.md").write_text("STYLE @chain0.md and back to @../CLAUDE.md")
    (project / "docs" / "not-this.md").write_text("FENCED")
    for i in range(MAX_IMPORT_DEPTH + 2):
        (project / "docs" / f"chain{i}.md").write_text(f"CHAIN{i} @chain{i + 1}.md")
    found = instruction_files(Where(project, tmp_path / "agent-home", root=project))
    texts = [f.text.split()[0] for f in found.files]
    assert texts[:2] == ["Style:", "STYLE"] and "FENCED" not in texts
    chain = [t for t in texts if t.startswith("CHAIN")]
    assert chain == [f"CHAIN{i}" for i in range(MAX_IMPORT_DEPTH - 1)]  # CLAUDE.md → style → chain0 → …
    assert found.refused == []
    assert imports("x `@inline.md` y @a.md, @~/b.md", project, tmp_path) == [
        project / "a.md",
        tmp_path / "b.md",
    ]


def test_a_fifo_claude_md_is_refused_not_waited_for(tmp_path: Path):
    project = tmp_path / "p"
    project.mkdir()
    os.mkfifo(project / "CLAUDE.md")
    found = instruction_files(Where(project, tmp_path / "h", root=project))
    assert found.files == [] and found.refused == [f"{project / 'CLAUDE.md'}: it is not a regular file"]


def test_the_users_own_file_may_live_anywhere(tmp_path: Path):
    dotfiles, home = tmp_path / "dotfiles", tmp_path / "home"
    dotfiles.mkdir()
    (home / ".claude").mkdir(parents=True)
    (dotfiles / "claude.md").write_text("MINE @extra.md @/etc/hostname")
    (home / ".claude" / "extra.md").write_text("EXTRA")  # relative to where the file is found
    (home / ".claude" / "CLAUDE.md").symlink_to(dotfiles / "claude.md")
    project = tmp_path / "p"
    project.mkdir()
    found = instruction_files(Where(project, tmp_path / "agent-home", home, project))
    assert [f.text for f in found.files][:2] == ["MINE @extra.md @/etc/hostname", "EXTRA"]
    assert found.refused == []  # the user's own imports may go anywhere


def test_a_nested_claude_md_joins_once_a_file_under_it_is_read(fake_api, run_cli, repo):
    (repo / "calc" / "CLAUDE.md").write_text("NESTED-CALC-RULES")
    (repo / "calc" / "ops.py").write_text("def add(a, b):\n    return a + b\n")
    fake_api.reply_tool("Read", {"file_path": str(repo / "calc" / "ops.py")})
    fake_api.reply_text("read it")
    res = run_cli(fake_api, "-p", "read ops")
    assert res.code == 0, res.stderr
    first, second = fake_api.message_requests
    assert "NESTED-CALC-RULES" not in str(first.body["system"])
    # on the default (preserved-thinking) model the system prompt stays as first sent and the new file
    # arrives as an appended system message (agent.runtime.context_updates); older models rebuild it
    assert second.body["system"] == first.body["system"]
    [update] = [m for m in second.body["messages"] if m["role"] == "system"]
    assert "NESTED-CALC-RULES" in update["content"][0]["text"]


def test_status_summary_counts_kinds():
    assert status_summary([]) == "clean"
    assert status_summary([" M a", "M  b", "?? c", " D d"]) == "2 modified, 1 untracked, 1 deleted"


def test_the_system_prompt_says_how_to_work_and_keeps_the_stable_part_first(fake_api, run_cli, repo):
    from agent.config.system_prompt import INTRO

    for phrase in (
        "Read a file before you change it",
        "Grep tool",
        "Glob tool",
        "in one response",
        "conventions",
        "run the project's tests",
        "TodoWrite",
        "pushing",
        "concise",
        "path:line",
    ):
        assert phrase in INTRO, phrase
    (repo / "CLAUDE.md").write_text("version one")
    fake_api.reply_tool("Bash", {"command": "echo 'version two' > CLAUDE.md"})
    fake_api.reply_text("changed")
    res = run_cli(fake_api, "-p", "edit it", "--permission-mode", "bypassPermissions")
    assert res.code == 0, res.stderr
    first, second = (r.body["system"] for r in fake_api.message_requests)
    assert first[0] == second[0]  # guidance and environment: byte for byte the same (the cache holds)
    assert "version one" in first[-1]["text"] and "cache_control" in second[-1]
    # the edit reaches the model appended, the system prompt unchanged (the default model binds its
    # thinking to it: agent.runtime.context_updates)
    assert second == first
    [update] = [m for m in fake_api.message_requests[1].body["messages"] if m["role"] == "system"]
    assert "version two" in update["content"][0]["text"]


def test_git_facts_wait_for_the_first_request(fake_api, tmp_path, repo):
    from tests.helpers.session import make_session

    session, _ = make_session(tmp_path, fake_api)
    assert session._git_taken is False  # building a session (the way to the first prompt) runs no git
    session.system_blocks()
    assert session._git_taken is True


def test_an_import_the_users_read_deny_rules_cover_is_not_read(fake_api, run_cli, project):
    """Issue 30: CLAUDE.md's @.env import ignored the user's Read(.env) deny rule."""
    (project / ".env").write_text("ENV-SECRET-5w")
    (project / "style.md").write_text("STYLE-OK")
    (project / "CLAUDE.md").write_text("Rules: @.env and @style.md")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Read(.env)"]}}))
    fake_api.reply_text("ok")
    res = run_cli(fake_api, "-p", "hi")
    assert res.code == 0, res.stderr
    sent = json.dumps(fake_api.message_requests[0].body)
    assert "ENV-SECRET-5w" not in sent and "STYLE-OK" in sent
    assert ".env: the user's permission rules deny reading it" in res.stderr
