"""What becomes memory from the agent's own records, with no model call: commands and their exit codes,
the user's rules, corrections and "remember ..." with their time; nothing secret; one project's memory
never reaching another; duplicates merged, expiry after a period unused."""

from __future__ import annotations

import json
import subprocess
from datetime import timedelta
from pathlib import Path

from agent.memory import service
from agent.memory.entries import EXPIRED
from agent.memory.harvest import harvest
from agent.memory.secrets import has_secret, redact
from tests.helpers.memory import NOW, Records, repo, settings_for

FILES = {
    "Makefile": "test:\n\tpytest -q\n\nlint:\n\truff check .\n",
    ".env": "STRIPE_KEY=rk_9f8e7d6c5b4a\nDEBUG=1\n",
}
TOKEN = "ghp_Zx8kQ2mN5vB7cD9fG1hJ3kL5mN7pQ9rS"


def test_the_users_rules_corrections_and_requests_to_remember_with_their_time(tmp_path: Path) -> None:
    project = repo(tmp_path / "p", FILES)
    r = Records()
    r.say("Fix the failing test in calc.py. Always run make lint before committing.")
    r.say("Use type hints in every new function.")
    r.say("No, don't call pytest directly; use the make target.")
    r.say("Let's keep the old API until the next release.")
    r.say("Remember that the release branch is called stable.")
    r.say("Run the tests and tell me what fails.")  # a task, not a rule
    r.say("Why does this fail?\n" + "never retry on 500 errors, always log them\n" * 60)  # a paste
    found = {m.title + ": " + m.text: m for m in harvest(r.messages, project, project)}
    assert set(found) == {
        "rule: Always run make lint before committing.",
        "rule: Use type hints in every new function.",
        "correction: No, don't call pytest directly; use the make target.",
        "decision: Let's keep the old API until the next release.",
        "remember: the release branch is called stable.",
    }
    rule = found["rule: Always run make lint before committing."]
    assert rule.origin == "user" and rule.evidence[0].time == "2026-11-29T10:01:00Z"
    assert (
        rule.evidence[0].describe()
        == 'the user said "Always run make lint before committing." (2026-11-29 10:01:00 UTC)'
    )


def test_commands_failed_approaches_and_the_failure_a_command_passed_after(tmp_path: Path) -> None:
    project = repo(tmp_path / "p", {**FILES, "calc.py": "x = 1\n"})
    r = Records().run("make test", 2, "1 failed").edit(project / "calc.py", "x = 1", "x = 2").run("make test")
    r.run("python3 setup.py test", 2, "can't open file 'setup.py'").run("ls -la").run("make lint")
    found = {m.slot: m for m in harvest(r.messages, project, project)}
    assert set(found) == {"command:test", "command:lint", "failed:python3 setup.py test", "file:calc.py"}
    test = found["command:test"]
    assert (
        test.text
        == "`make test` runs `pytest -q`; failed first (exit 2: 1 failed), passed after editing calc.py"
    )
    assert [(e.kind, e.exit_code) for e in test.evidence] == [("command", 0), ("command", 2), ("file", None)]
    assert found["failed:python3 setup.py test"].text.startswith("`python3 setup.py test` failed (exit 2")


def test_secrets_are_redacted_when_written(tmp_path: Path) -> None:
    project = repo(tmp_path / "p", FILES)
    home = tmp_path / "home"
    r = Records()
    r.say(f"Remember that the deploy token is {TOKEN} and the stripe key is rk_9f8e7d6c5b4a.")
    r.run(
        'curl -H "Authorization: Bearer sk-live-4f9a8b7c6d5e4f3a2b1c0d9e" https://example.test', 7, "failed"
    )
    r.run("API_TOKEN=abcd1234efgh make test").read(project / ".env")
    settings = settings_for(project, home, api_key="sk-ant-api03-secretsecret")
    service.remember(settings, r.messages, NOW)
    folder = service.folder(settings)
    stored = "".join(f.read_text() for f in folder.iterdir() if f.is_file())
    for secret in (TOKEN, "rk_9f8e7d6c5b4a", "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e", "abcd1234efgh"):
        assert secret not in stored
    assert "the deploy token is [redacted] and the stripe key is [redacted]." in stored


def test_a_secret_that_got_into_memory_is_caught_at_load(tmp_path: Path) -> None:
    project = repo(tmp_path / "p", FILES)
    home = tmp_path / "home"
    settings = settings_for(project, home)
    service.remember(settings, Records().say("Always deploy from the stable branch.").messages, NOW)
    path = service.folder(settings) / "memories.json"
    data = json.loads(path.read_text())
    data["memories"][0]["text"] = f"Always deploy with {TOKEN}"  # a hand edit, or an older version's write
    path.write_text(json.dumps(data))
    loaded = service.load(settings, NOW)
    assert "1 memories held something secret-looking; it was redacted" in loaded.problems
    assert TOKEN not in loaded.text and TOKEN not in path.read_text() and "[redacted]" in loaded.text


def test_redaction_leaves_ordinary_words(tmp_path: Path) -> None:
    for text in ("the tokens were counted", "author: Jane", "make test passes", "password reset flow"):
        assert not has_secret(text), text
    assert redact("DATABASE_PASSWORD=hunter2hunter2") == "DATABASE_PASSWORD=[redacted]"
    assert redact("postgres://bob:pw123@db/x") == "postgres://[redacted]@db/x"


def test_one_projects_memory_never_reaches_another_and_worktrees_share_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = repo(tmp_path / "first", FILES)
    second = repo(tmp_path / "second", FILES)
    service.remember(
        settings_for(first, home), Records().say("Never touch vendor/.").run("make test").messages, NOW
    )
    other = service.load(settings_for(second, home), NOW)
    assert other.memories == [] and other.text == ""
    assert service.folder(settings_for(first, home)) != service.folder(settings_for(second, home))
    # a subdirectory and a git worktree of the first project share its store
    (first / "sub").mkdir()
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty", "-m", "x"],
        cwd=first,
        check=True,
    )
    subprocess.run(["git", "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "wt"], cwd=first, check=True)
    for where in (first / "sub", tmp_path / "wt"):
        s = settings_for(where, home)
        assert service.folder(s) == service.folder(settings_for(first, home))
        assert "Never touch vendor/." in service.load(s, NOW).text


def test_duplicates_merge_and_memories_unused_for_long_expire(tmp_path: Path) -> None:
    project = repo(tmp_path / "p", FILES)
    home = tmp_path / "home"
    settings = settings_for(project, home)
    service.remember(settings, Records().say("Never push on Fridays.").messages, NOW)
    service.remember(
        settings, Records(start="2026-11-29T11:00:00Z").say("never push on fridays").messages, NOW
    )
    loaded = service.load(settings, NOW)
    [rule] = loaded.memories
    assert len(rule.evidence) == 2 and rule.text == "never push on fridays"  # the newer words
    later = service.load(settings, NOW + timedelta(days=service.EXPIRY_DAYS - 1))
    assert later.served == 1  # served: renewed
    gone = service.load(settings, NOW + timedelta(days=2 * service.EXPIRY_DAYS))
    assert (gone.served, gone.expired, gone.text) == (0, 1, "")
    on_disk = json.loads((service.folder(settings) / "memories.json").read_text())["memories"]
    assert on_disk[0]["state"] == EXPIRED


def test_off_switch_env_and_setting(tmp_path: Path) -> None:
    from agent.config.settings import load_settings

    project = repo(tmp_path / "p", FILES)
    env = {"HOME": str(tmp_path), "COMPACT_AGENT_HOME": str(tmp_path / "h")}
    s = load_settings(cwd=project, environ={**env, "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"}, cli={})
    assert s.auto_memory is False and not service.enabled(s)
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "settings.json").write_text(
        '{"autoMemoryEnabled": false, "autoMemoryDirectory": "/tmp/x-mem"}'
    )
    s = load_settings(cwd=project, environ=env, cli={})
    assert s.auto_memory is False and service.folder(s) == Path("/tmp/x-mem")


def test_a_project_chooses_where_memory_goes_only_once_it_is_trusted(tmp_path: Path) -> None:
    from agent.config.settings import load_settings

    project = repo(tmp_path / "p", FILES)
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{"autoMemoryDirectory": "/tmp/elsewhere"}')
    env = {"HOME": str(tmp_path), "COMPACT_AGENT_HOME": str(tmp_path / "h")}
    s = load_settings(cwd=project, environ=env, cli={})
    assert s.auto_memory_directory is None
    assert [(i.kind, i.what) for i in s.report.ignored] == [("memory", "autoMemoryDirectory /tmp/elsewhere")]
    trusted = load_settings(cwd=project, environ=env, cli={"trust_project": True})
    assert trusted.auto_memory_directory == "/tmp/elsewhere"
