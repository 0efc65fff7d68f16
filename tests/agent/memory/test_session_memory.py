"""Memory in a running agent: written at the end of a session, at a compaction point and when the user
says "remember", with no model call; loaded into the next fresh session's first request; the first screen
says how many were loaded and how many were stale; the transcript records what was loaded; /memory lists
them with their evidence and state, beside the session notes."""

from __future__ import annotations

import json
from pathlib import Path

from agent.frontend import commands
from agent.memory import service
from agent.runtime import loop
from tests.fakeapi import FakeAPI, Reply, is_compaction
from tests.helpers.frontend import banner, chat, new_session, repl_for
from tests.helpers.transcripts import records, transcripts

MAKEFILE = "build:\n\tpython3 -c 'print(1)'\n\ntest:\n\tpython3 -c 'print(2)'\n"


def memory_text(body: dict) -> str:
    head = service.HEADER.split("{")[0]
    return next((b["text"] for b in body.get("system") or [] if b["text"].startswith(head)), "")


def first_session(run_cli, api: FakeAPI, project: Path) -> None:
    (project / "Makefile").write_text(MAKEFILE)
    api.reply_tool("Bash", {"command": "make build"})
    api.reply_tool("Bash", {"command": "make test"})
    api.reply_text("Both pass.")
    res = run_cli(
        api, "-p", "Build and test it. Never edit the generated files.", "--dangerously-skip-permissions"
    )
    assert res.code == 0, res.stderr


def test_a_fresh_session_starts_with_what_the_last_one_recorded(
    run_cli, project: Path, isolated_env: Path
) -> None:
    with FakeAPI() as api:
        first_session(run_cli, api, project)
        assert memory_text(api.message_requests[0].body) == ""  # nothing remembered yet
        api.reply_text("Yes.")
        res = run_cli(api, "-p", "What do you remember?")
        assert res.code == 0, res.stderr
        assert (
            "Memory: 3 memories loaded, 0 stale (checked against the working tree; /memory lists them)"
            in res.stderr
        )
        text = memory_text(api.message_requests[-1].body)
        assert "- [build](commands.md#m-" in text and "`make build` runs `python3 -c 'print(1)'`" in text
        assert '"Never edit the generated files." (the user, ' in text
        # the transcript says what was loaded
        newest = max(transcripts(isolated_env), key=lambda p: p.stat().st_mtime)
        [rec] = [r for r in records(newest) if r.get("type") == "memory-load"]
        assert (rec["loaded"], rec["stale"], rec["text"]) == (3, 0, text)
        assert {m["slot"] for m in rec["memories"]} >= {"command:build", "command:test"}
        # the tree changes: the next session is told, and the request carries the stale one as stale only
        (project / "Makefile").write_text(MAKEFILE.replace("test:", "check:\n\techo other\n\nunit:"))
        (project / "Makefile").write_text("build:\n\tpython3 -c 'print(1)'\n")
        api.reply_text("Yes.")
        res = run_cli(api, "-p", "And now?")
        assert "Memory: 2 memories loaded, 1 stale" in res.stderr
        text = memory_text(api.message_requests[-1].body)
        current, _, stale = text.partition("## Stale")
        assert "make test" not in current and "`test` is no longer a target of Makefile" in stale
    assert api.violations == []


def test_the_off_switch_writes_and_loads_nothing(run_cli, project: Path, isolated_env: Path) -> None:
    with FakeAPI() as api:
        (project / "Makefile").write_text(MAKEFILE)
        api.reply_tool("Bash", {"command": "make build"})
        api.reply_text("ok")
        env = {"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"}
        assert run_cli(api, "-p", "build", "--dangerously-skip-permissions", env=env).code == 0
        assert not list((isolated_env / ".compact-agent" / "projects").glob("*/memory"))


def test_the_first_screen_says_what_was_loaded_and_memory_lists_it(run_cli, project: Path) -> None:
    with FakeAPI() as api:
        first_session(run_cli, api, project)
        with repl_for(api, project) as d:
            d.wait_for("stale")
            assert d.out.startswith(banner(d.repl, project))
            assert (
                "Memory: 3 memories loaded, 0 stale (checked against the working tree; /memory lists" in d.out
            )
            shown = commands.run(d.repl.session, "/memory").text
    assert "at this session's start 3 loaded, 0 stale, 0 refreshed" in shown
    assert "[current] build: `make build` runs `python3 -c 'print(1)'`" in shown
    assert "evidence: `$ make build` → exit 0 (" in shown
    assert "[current] rule: Never edit the generated files." in shown
    assert "No session notes yet" in shown  # the session's own notes, as before, and not duplicated


def test_a_compaction_point_writes_memory_before_the_session_ends(project: Path) -> None:
    # a test run whose output a compaction takes away
    loud = "test:\n\tpython3 -c \"print(chr(10).join('tests/test_x.py::test_%d PASSED' % i for i in range(300)))\"\n"
    (project / "Makefile").write_text(loud)
    with FakeAPI() as api:
        session = new_session(api, project, COMPACT_AGENT_SESSION_MEMORY="0")
        api.reply_tool("Bash", {"command": "make test"})
        api.reply_text("passes")
        session.permissions.mode = "bypassPermissions"
        loop.run_turn(session, "Run the tests. Always use make, never call the tools directly.")
        chat(session, "thanks", "You're welcome.", tokens=8_000)
        folder = service.folder(session.settings)
        assert not folder.exists()
        api.on(is_compaction, Reply.text("<analysis>a</analysis>\n<summary>tests run</summary>"))
        result = commands.run(session, "/compact")
        assert result.ok and "Compacted" in result.text, result.text
        memories = {m["slot"]: m for m in json.loads((folder / "memories.json").read_text())["memories"]}
        assert memories["command:test"]["evidence"][0]["exit_code"] == 0
        assert any(s.startswith("rule:") for s in memories)


def test_remember_writes_at_once_from_the_users_own_words(project: Path) -> None:
    with FakeAPI() as api:
        session = new_session(api, project)
        loop.submit_prompt(session, "Remember that the staging database is read-only on weekends.")
        index = (service.folder(session.settings) / "MEMORY.md").read_text()
    assert '"the staging database is read-only on weekends." (the user, ' in index
    assert api.message_requests == []  # no model call
