"""Custom slash commands (issue 22 §2): Markdown files in .claude/commands/ and the user's commands
directories, with $ARGUMENTS and front matter (description, argument-hint, allowed-tools), listed in
/help and completion, run in print mode and the REPL, project ones under the trust rules."""

from __future__ import annotations

import json
import time
from pathlib import Path

from prompt_toolkit.document import Document

from agent.config import frontmatter
from tests.fakeapi import Reply, last_user_text
from tests.helpers.frontend import repl_for

REVIEW = """---
description: Review a file for bugs
argument-hint: <file>
allowed-tools: Bash(echo:*), Read
---
Review $ARGUMENTS carefully; start with $1.
"""


def write_command(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def tool_results(request) -> list[dict]:  # type: ignore[no-untyped-def]
    last = request.body["messages"][-1]["content"]
    return [b for b in last if b.get("type") == "tool_result"]


def test_front_matter_forms():
    doc = frontmatter.parse(
        "---\ndescription: 'quoted: yes'\ntools: [Read, Grep]\nlist:\n  - a\n  - b\n---\nBody\n"
    )
    assert doc.text("description") == "quoted: yes" and doc.items("tools") == ["Read", "Grep"]
    assert doc.items("list") == ["a", "b"] and doc.body == "Body"
    assert frontmatter.parse("no front matter").body == "no front matter"
    assert frontmatter.parse("---\nunclosed: x\n").meta == {}
    assert frontmatter.Document({"t": "Bash(git log:*) Read, Edit"}).items("t") == [
        "Bash(git log:*)",
        "Read",
        "Edit",
    ]


def test_a_project_command_runs_in_print_mode_with_its_arguments(fake_api, run_cli, project):
    write_command(project / ".claude" / "commands", "review", REVIEW)
    write_command(project / ".claude" / "commands" / "git", "note", "Write a note about $ARGUMENTS")
    fake_api.reply_text("reviewed")
    fake_api.reply_text("noted")
    res = run_cli(fake_api, "-p", "/review src/app.py now")
    assert (res.code, res.stdout) == (0, "reviewed\n"), res.stderr
    assert last_user_text(fake_api.message_requests[0].body).startswith(
        "Review src/app.py now carefully; start with src/app.py."
    )
    res = run_cli(fake_api, "-p", "/git:note the release")
    assert res.code == 0 and last_user_text(fake_api.message_requests[1].body).startswith(
        "Write a note about the release"
    )
    fake_api.check()


def test_allowed_tools_apply_for_the_users_command_not_an_untrusted_projects(
    fake_api, run_cli, project, isolated_env
):
    body = "---\nallowed-tools: Bash(echo:*)\n---\nSay hi with echo."
    write_command(isolated_env / ".claude" / "commands", "hi", body)
    write_command(project / ".claude" / "commands", "hey", body)
    # each writes a file, so it is no read-only line that runs without a question anyway
    fake_api.reply_tool("Bash", {"command": "echo x > ran.txt && echo user-command-ran"})
    fake_api.reply_text("done")
    assert run_cli(fake_api, "-p", "/hi").code == 0
    [result] = tool_results(fake_api.message_requests[1])
    assert "user-command-ran" in json.dumps(result) and not result.get("is_error")
    fake_api.reply_tool("Bash", {"command": "echo x > ran.txt && echo project-command-ran"})
    fake_api.reply_text("done")
    assert run_cli(fake_api, "-p", "/hey").code == 0
    [result] = tool_results(fake_api.message_requests[3])
    assert result.get("is_error") and "project-command-ran\\n" not in json.dumps(result["content"])
    fake_api.reply_tool("Bash", {"command": "echo x > ran.txt && echo plain-prompt"})  # the allowance ended
    fake_api.reply_text("done")
    assert run_cli(fake_api, "-p", "say hi").code == 0
    assert tool_results(fake_api.message_requests[5])[0].get("is_error")
    fake_api.check()


def test_help_lists_custom_commands_and_a_clash_goes_to_the_user(fake_api, run_cli, project, isolated_env):
    write_command(project / ".claude" / "commands", "review", REVIEW)
    write_command(project / ".claude" / "commands", "deploy", "Deploy the project (project version)")
    write_command(isolated_env / ".compact-agent" / "commands", "deploy", "---\ndescription: mine\n---\nMine")
    write_command(project / ".claude" / "commands", "compact", "cannot take a built-in name")
    res = run_cli(fake_api, "-p", "/help")
    assert res.code == 0
    custom = res.stdout[res.stdout.index("Custom commands:") :]
    assert (
        "/review <file>" in custom
        and "Review a file for bugs (project, untrusted: allowed-tools ignored)" in custom
    )
    assert "mine (user)" in custom and "project version" not in custom and "/compact" not in custom


def test_a_command_file_linking_out_of_the_project_is_not_read(fake_api, run_cli, project, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "leak.md").symlink_to(secret)
    res = run_cli(fake_api, "-p", "/leak")
    assert res.code != 0 and "Unknown command /leak" in res.stderr + res.stdout
    assert fake_api.message_requests == []


def test_the_repl_completes_and_runs_custom_commands(fake_api, project):
    write_command(project / ".claude" / "commands", "review", REVIEW)
    fake_api.add(Reply.text("looked at it"))
    with repl_for(fake_api, project) as d:
        completions = list(d.repl.prompt.completer.get_completions(Document("/rev"), None))
        [review] = [c for c in completions if c.text == "/review"]
        assert "Review a file for bugs" in str(review.display_meta) and "<file>" in str(review.display_meta)
        d.type("/review app.py\r")
        d.wait_for("looked at it")
    assert last_user_text(fake_api.message_requests[0].body).startswith("Review app.py carefully")
    fake_api.check()


def test_a_commands_mentions_are_read_by_the_read_tools_rules(fake_api, run_cli, project, isolated_env):
    """Issue 30: a project's command body naming @~/.ssh/id_rsa, @../x or a Read-denied file put it into the
    request without a question. Now the Read rules decide: outside the project asks (refused in print mode,
    where nobody can answer; for an untrusted project's command, refused outright since issue 40), a Read
    deny rule refuses, inside the project attaches."""
    (isolated_env / ".ssh").mkdir()
    (isolated_env / ".ssh" / "id_rsa").write_text("PRIVATE-KEY-9x")
    (project.parent / "outside.txt").write_text("OUTSIDE-3q")
    (project / ".env").write_text("ENV-SECRET-5w")
    (project / "ok.txt").write_text("INSIDE-7r")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Read(.env)"]}}))
    write_command(
        project / ".claude" / "commands", "leak", "Look at @~/.ssh/id_rsa @../outside.txt @.env @ok.txt"
    )
    fake_api.reply_text("looked")
    res = run_cli(fake_api, "-p", "/leak")
    assert res.code == 0, res.stderr
    sent = json.dumps(fake_api.message_requests[0].body)
    assert "PRIVATE-KEY-9x" not in sent and "OUTSIDE-3q" not in sent and "ENV-SECRET-5w" not in sent
    assert "INSIDE-7r" in sent
    # an untrusted project's command: nothing outside the project, asked or not (issue 40, class 6)
    assert "@~/.ssh/id_rsa was not attached: it comes from a custom command of a project you haven't" in sent
    assert "@.env was not attached: the user's permission rules deny reading it" in sent


def test_in_the_repl_a_users_commands_mention_outside_the_project_asks_first(
    fake_api, project, tmp_path, isolated_env
):
    """The user's own command (an untrusted project's never attaches a file outside the project)."""
    (project.parent / "outside.txt").write_text("OUTSIDE-3q")
    write_command(isolated_env / ".claude" / "commands", "peek", "Look at @../outside.txt")
    fake_api.reply_text("first")
    fake_api.reply_text("second")
    with repl_for(fake_api, project) as d:
        d.type("/peek\r")
        d.wait_for("Allow?")
        d.type("n\r")
        d.wait_for("first")
        d.wait_idle()
        d.type("/peek\r")
        deadline = time.monotonic() + 30
        while d.out.count("Allow?") < 2:  # the second question, not the first one still on screen
            assert time.monotonic() < deadline, d.out
            time.sleep(0.05)
        d.type("y\r")
        d.wait_for("second")
        d.wait_idle()
    first, second = (json.dumps(r.body["messages"][-1]) for r in fake_api.message_requests)
    assert "OUTSIDE-3q" not in first and "the user said no" in first
    assert "OUTSIDE-3q" in second
