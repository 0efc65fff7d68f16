"""/context and /compact at the context's edges: /compact with a focus on a tiny context makes no call,
the context limit with compaction off names /clear and not /compact, /context at 80 columns with the
memory files under their row and at the limit with no free space. Against the fake API and a real session."""

from __future__ import annotations

import re
from pathlib import Path

from agent.frontend import commands
from agent.runtime.loop import run_turn
from tests.helpers.frontend import chat, new_session, screen


def test_compact_with_focus_on_a_tiny_context_makes_no_call(fake_api, project: Path) -> None:
    session = new_session(fake_api, project)
    chat(session, "hello", "hi there")
    before = len(fake_api.message_requests)
    result = commands.run(session, "/compact focus on the parser")
    assert result.ok and result.text.startswith("Nothing worth compacting: the conversation is ")
    assert len(fake_api.message_requests) == before and session.last_compaction is None


def test_with_compaction_off_the_context_limit_does_not_advise_compact(fake_api, project: Path) -> None:
    session = new_session(fake_api, project, DISABLE_COMPACT="1", CLAUDE_CODE_AUTO_COMPACT_WINDOW="50000")
    chat(session, "read everything", "done", tokens=49_000)
    finished = run_turn(session, "and more")
    assert finished.stop_reason == "context_limit", finished
    assert "/compact" not in finished.error and "/clear" in finished.error


def test_context_fits_80_columns_with_the_memory_files_under_their_row(fake_api, project: Path) -> None:
    (project / "CLAUDE.md").write_text("Be brief. " * 300)
    nested = project / "a" / "very" / "deeply" / "nested" / "folder" / "of" / "the" / "project"
    nested.mkdir(parents=True)
    session = new_session(fake_api, project)
    chat(session, "hello", "hi", tokens=5_000)
    out = screen(commands.run(session, "/context"))
    lines = out.splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines), out
    memory = next(i for i, line in enumerate(lines) if "Memory files:" in line)
    assert "└ CLAUDE.md: " in lines[memory + 1] and "Messages:" in lines[memory + 2]


def test_context_at_the_limit_shows_no_free_space_and_names_the_way_out(fake_api, project: Path) -> None:
    session = new_session(fake_api, project, DISABLE_COMPACT="1", CLAUDE_CODE_AUTO_COMPACT_WINDOW="50000")
    chat(session, "read everything", "done", tokens=49_000)
    usage = commands.run(session, "/context")
    free = next(c for c in usage.categories if c.key == "free")
    assert free.tokens == 0 and "Context limit reached" in usage.text
    assert re.search(r"Free space: 0 tokens", screen(usage))
