"""Putting things into the context on purpose, in the REPL (pipe input, the loopback fake API):
``@path`` attachments and their completion, ``!command`` and ``# note``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from prompt_toolkit.document import Document

from agent.frontend.repl import SlashCompleter
from agent.runtime import mentions
from tests.fakeapi import last_user_text
from tests.helpers.frontend import repl_for


def test_an_at_path_attaches_the_file_counts_as_read_and_is_named_in_the_ledger(fake_api, project):
    (project / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (project / "pkg").mkdir()
    (project / "pkg" / "mod.py").write_text("x = 1\n")
    fake_api.reply_tool(
        "Edit", {"file_path": str(project / "calc.py"), "old_string": "a - b", "new_string": "a + b"}
    )
    fake_api.reply_text("Fixed the sign.")
    with repl_for(fake_api, project) as d:
        d.type("fix @calc.py, see @pkg and @nobody\r")
        d.wait_for("Allow?")
        d.type("y\r")
        d.wait_for("Fixed the sign.")
        d.wait_idle()
        d.type("/state\r")
        d.wait_for("Files the user named")
        d.type("/exit\r")
        assert d.finish() == 0
    first = fake_api.message_requests[0].body
    sent = last_user_text(first)
    assert sent.startswith("fix @calc.py")
    assert f"The user attached {project / 'calc.py'}" in sent and "     2\t    return a - b" in sent
    assert f"The user attached the directory {project / 'pkg'}" in sent and "\nmod.py" in sent
    assert "nobody" not in sent.split("\n", 1)[1]  # not a path: nothing attached, nothing said
    # the Edit ran without a Read first: the attached file counts as read
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert "has not been read" not in d.out
    # /state's section, its lines broken between words for the terminal (a long path on a line of its own)
    named = d.out[d.out.index("Files the user named") :].split("\n\n")[0]
    assert str(project / "calc.py") in named.split(), named
    fake_api.check()


def test_an_at_path_the_read_rules_deny_is_not_attached(fake_api, project):
    (project / ".env").write_text("SECRET=1\n")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{"permissions": {"deny": ["Read(./.env)"]}}')
    fake_api.reply_text("ok")
    with repl_for(fake_api, project) as d:
        d.type("look at @.env\r")
        d.wait_for("ok")
    sent = last_user_text(fake_api.message_requests[0].body)
    assert "SECRET" not in sent and "permission rules deny reading it" in sent


def test_at_completion_lists_paths_relative_as_typed(tmp_path: Path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / "setup.cfg").write_text("")
    (tmp_path / ".hidden").write_text("")
    completer = SlashCompleter(cwd=tmp_path)
    found = [c.text for c in completer.get_completions(Document("see @s"), None)]
    assert found == ["@setup.cfg", "@src/"]
    found = [c.text for c in completer.get_completions(Document("see @src/"), None)]
    assert found == ["@src/main.py"]
    assert mentions.mentioned("mail a@b.com about @src/main.py, and @src/main.py.") == ["src/main.py"]


def test_a_bang_command_runs_and_its_output_reaches_the_model(fake_api, project):
    fake_api.reply_text("I see the output.")
    with repl_for(fake_api, project) as d:
        d.type("!echo from-the-shell > shell.txt && cat shell.txt\r")
        d.wait_for("Allow?")  # the user's own command is asked like the model's would be (it writes a file)
        d.type("y\r")
        d.wait_for("  from-the-shell")
        d.wait_idle()
        d.type("what did it print?\r")
        d.wait_for("I see the output.")
    sent = last_user_text(fake_api.message_requests[0].body)
    assert "<bash-input>echo from-the-shell > shell.txt && cat shell.txt</bash-input>" in sent
    assert "from-the-shell</bash-output>" in sent.replace("\n</bash-output>", "</bash-output>")
    assert sent.index("<bash-input>") < sent.index("what did it print?")
    fake_api.check()


def test_a_bang_command_follows_the_permission_rules(fake_api, project):
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{"permissions": {"deny": ["Bash(rm:*)"]}}')
    (project / "keep.txt").write_text("x")
    with repl_for(fake_api, project) as d:
        d.type("!rm keep.txt\r")
        d.wait_for("Not run: the permission rules deny it")
        d.wait_idle()
        d.type("!touch made.txt\r")  # writes a file: asked, as the model's call would be
        d.wait_for("Allow?")
        d.type("n\r")
        d.wait_for("Not run: declined.")
    assert (project / "keep.txt").exists() and not (project / "made.txt").exists()
    assert fake_api.message_requests == []


def test_a_hash_note_is_added_to_the_memory_file_the_user_picks(fake_api, project):
    with repl_for(fake_api, project) as d:
        d.type("# use tabs, not spaces\r")
        d.wait_for("Add to memory")
        d.type("p\r")
        d.wait_for("Noted in")
        d.wait_idle()
        d.type("#  always run make lint\r")
        d.wait_for("Add to memory", timeout=30)
        d.type("u\r")
        d.wait_for(".claude/CLAUDE.md (read")
        d.wait_idle()
        d.type("# never mind\r")
        d.wait_for("Add to memory")
        d.type("\r")
        d.wait_for("Not saved.")
    assert (project / "CLAUDE.md").read_text() == "- use tabs, not spaces\n"
    user = Path(os.environ["HOME"]) / ".claude" / "CLAUDE.md"
    assert user.read_text() == "- always run make lint\n"
    assert stat.S_IMODE(user.stat().st_mode) == 0o600
    assert fake_api.message_requests == []


def test_a_note_is_not_written_through_a_link_out_of_the_project(fake_api, project, tmp_path):
    """Issue 30: "# note" appended through a repository's CLAUDE.md symlink to a file outside the project,
    and to ~/.bashrc. The note's writer follows the Write rules: a link out of the project is refused, and
    so is the user's CLAUDE.md when it links to a shell start-up file."""
    outside = tmp_path / "outside.md"
    outside.write_text("OUTSIDE\n")
    (project / "CLAUDE.md").symlink_to(outside)
    home = Path(os.environ["HOME"])
    (home / ".bashrc").write_text("# rc\n")
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    (home / ".claude" / "CLAUDE.md").symlink_to(home / ".bashrc")
    with repl_for(fake_api, project) as d:
        d.type("# use tabs\r")
        d.wait_for("Add to memory")
        d.type("p\r")
        d.wait_for("Not saved:")
        d.wait_idle()
        d.type("# use tabs\r")
        d.wait_for("Add to memory", timeout=30)
        d.type("u\r")
        d.wait_for("shell start-up files")
    assert outside.read_text() == "OUTSIDE\n"
    assert (home / ".bashrc").read_text() == "# rc\n"
    assert "is a link to" in " ".join(d.out.split())  # the REPL's lines break between words


def test_a_note_follows_the_users_own_link_and_the_deny_rules(fake_api, project, tmp_path):
    home = Path(os.environ["HOME"])
    dotfiles = home / "dotfiles"
    dotfiles.mkdir(parents=True, exist_ok=True)
    (dotfiles / "claude.md").write_text("")
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    (home / ".claude" / "CLAUDE.md").symlink_to(dotfiles / "claude.md")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{"permissions": {"deny": ["Edit(CLAUDE.md)"]}}')
    with repl_for(fake_api, project) as d:
        d.type("# one\r")
        d.wait_for("Add to memory")
        d.type("u\r")
        d.wait_for("Noted in")
        d.wait_idle()
        d.type("# two\r")
        d.wait_for("Add to memory", timeout=30)
        d.type("p\r")
        d.wait_for("Not saved:")
    assert (dotfiles / "claude.md").read_text() == "- one\n"
    assert not (project / "CLAUDE.md").exists()
    assert 'the rule "Edit(CLAUDE.md)"' in d.out
