"""A tool is declared once (core.declaration) and every table follows: the permission engine, the runner's
path handling, the UI, the tool-result budget, microcompact, the working-state ledger and the files restored
after a compaction. A tool nobody declared asks, and print mode refuses it.

The recipe exercise: an ``LS`` tool written the way docs/development.md says (its module and its line in
the registry; here the class and ``declare`` stand for the two), with nothing else changed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.frontend.ui import key_argument
from compact.compaction import ledger
from compact.stages import budget, micro
from core import declaration
from core.declaration import Declaration, declaration_of
from core.messages import assistant, tool_result_block, tool_results, user_prompt
from tools.base import ToolContext, ToolResult
from tools.permissions.engine import Permissions


class LSTool:
    """The recipe's tool: list a directory."""

    name = "LS"
    description = "List the entries of a directory."
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    declaration = Declaration(
        "reads", "path", "path", clearable=True, result_limit=10_000, records="search", parallel=True
    )

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        names = sorted(os.listdir(ctx.resolve(args["path"])))
        return ToolResult(content="\n".join(names), summary=f"{len(names)} entries")


class Settings:
    """What the engine reads of the settings."""

    def __init__(self, cwd: Path, home: Path, deny: list[str], mode: str = "default") -> None:
        self.permission_mode = mode
        self.allow: list[str] = []
        self.deny = deny
        self.ask: list[str] = []
        self.cwd = cwd
        self.project_dir = home / "store"
        self.additional_dirs: list[Path] = []
        self.user_home = home
        self.home = home / ".compact-agent"


@pytest.fixture
def declared_ls(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the registry's import does for a tool in BUILT_IN (declare), undone after the test."""
    monkeypatch.setitem(declaration._DECLARED, "LS", LSTool.declaration)


@pytest.fixture
def places(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (project / "src").mkdir(parents=True)
    (project / "src" / "a.py").write_text("x = 1\n")
    yield home, project


def test_an_undeclared_tool_asks_even_where_a_read_deny_rule_names_nothing_it_understands(
    places: tuple[Path, Path],
) -> None:
    """Before declarations the engine allowed any tool it did not know ("only changes the conversation"):
    with Read(~/.ssh/**) denied, an undeclared LS listed ~/.ssh with no question."""
    home, project = places
    engine = Permissions(Settings(project, home, ["Read(~/.ssh/**)"]))
    assert declaration_of("Peek") is None
    verdict = engine.check("Peek", {"path": str(home / ".ssh")})
    assert verdict.behavior == "ask"
    assert "knows nothing" in verdict.reason
    # bypass mode runs what asks, but never what a deny rule names; plan mode refuses the unknown
    assert (
        Permissions(Settings(project, home, ["Peek"], "bypassPermissions")).check("Peek", {}).behavior
        == "deny"
    )
    assert Permissions(Settings(project, home, [], "plan")).check("Peek", {}).behavior == "deny"


@pytest.mark.usefixtures("declared_ls")
def test_a_declared_reader_is_judged_by_its_path_under_read_rules_and_its_own(
    places: tuple[Path, Path],
) -> None:
    home, project = places
    engine = Permissions(Settings(project, home, ["Read(~/.ssh/**)"]))
    assert engine.check("LS", {"path": str(home / ".ssh")}).behavior == "deny"  # the Read rule covers it
    assert (
        engine.check("LS", {"path": str(project / "src")}).behavior == "allow"
    )  # reading inside the project
    assert engine.check("LS", {"path": str(home)}).behavior == "ask"  # outside the project
    own = Permissions(Settings(project, home, ["LS(./src/**)"]))  # its own rule form, by its path argument
    assert own.check("LS", {"path": str(project / "src")}).behavior == "deny"
    assert own.check("Read", {"file_path": str(project / "src" / "a.py")}).behavior == "allow"
    assert engine.suggest_rule("LS", {"path": str(home / "x")}).startswith("Read(")


@pytest.mark.usefixtures("declared_ls")
def test_every_table_follows_the_declaration(places: tuple[Path, Path]) -> None:
    """The UI's key argument, the result budget, microcompact's clearing and the ledger all read it."""
    _, project = places
    assert key_argument("LS", {"path": "src"}) == "src"
    assert budget.threshold_for("LS") == 10_000
    assert budget.threshold_for("Peek") == budget.DEFAULT_THRESHOLD  # undeclared: the default size
    use = {"type": "tool_use", "id": "t1", "name": "LS", "input": {"pattern": "*", "path": "src"}}
    history = [user_prompt("list src"), assistant([use]), tool_results([tool_result_block("t1", "a.py")])]
    state = ledger.derive(history, str(project))
    assert [s["tool"] for s in state.searches] == ["LS"]  # recorded as a search, not an unknown outcome
    assert state.other == []
    assert micro._clearable("LS") and not micro._clearable("Peek")
