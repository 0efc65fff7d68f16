"""Each setting is one row (core.setting): a row more is a setting the files, the environment, validation,
the docs table and --help all know; a stage with a setting is its module, its row and its registration."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent import cli
from agent.config.settings import TABLE, Settings, SettingsError, load_settings, table_of
from compact.decision.config import CompactConfig
from compact.stages import view
from compact.stages.state import ContextState
from compact.stages.view import Stage, Step, ViewContext, build_view
from core.messages import Message
from core.setting import BOOL, POSITIVE_INT, help_lines, markdown_table, setting
from scripts import gen_docs

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class WithOneMore(Settings):
    """Settings with one row more: everything below is derived from these six lines."""

    greeting_limit: int = setting(
        3,
        key="greetings.limit",
        env="COMPACT_AGENT_GREETING_LIMIT",
        kind=POSITIVE_INT,
        doc="greet at most so often",
    )


@pytest.fixture
def where(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".claude").mkdir(parents=True)
    project.mkdir()
    return project, {"HOME": str(home), "COMPACT_AGENT_HOME": str(tmp_path / "agent-home")}


def user_file(environ: dict[str, str], data: dict) -> Path:
    path = Path(environ["HOME"]) / ".claude" / "settings.json"
    path.write_text(json.dumps(data))
    return path


def test_a_row_more_is_a_setting_the_files_the_environment_validation_and_the_docs_know(where) -> None:
    project, environ = where
    assert load_settings(cwd=project, environ=environ, cli={}, kind=WithOneMore).greeting_limit == 3

    path = user_file(environ, {"greetings": {"limit": 7}})
    s = load_settings(cwd=project, environ=environ, cli={}, kind=WithOneMore)
    assert (s.greeting_limit, s.report.sources["greeting_limit"]) == (7, str(path))

    s = load_settings(
        cwd=project, environ={**environ, "COMPACT_AGENT_GREETING_LIMIT": "9"}, cli={}, kind=WithOneMore
    )
    assert (s.greeting_limit, s.report.sources["greeting_limit"]) == (9, "env COMPACT_AGENT_GREETING_LIMIT")

    with pytest.raises(SettingsError) as bad_env:
        load_settings(
            cwd=project, environ={**environ, "COMPACT_AGENT_GREETING_LIMIT": "-1"}, cli={}, kind=WithOneMore
        )
    assert str(bad_env.value) == 'COMPACT_AGENT_GREETING_LIMIT: expected a positive integer, got "-1"'

    user_file(environ, {"greetings": {"limit": "many"}})
    with pytest.raises(SettingsError) as bad_file:
        load_settings(cwd=project, environ=environ, cli={}, kind=WithOneMore)
    assert str(bad_file.value) == f'{path}: "greetings.limit" must be a positive integer (got "many")'
    user_file(environ, {"greetings": 4})
    with pytest.raises(SettingsError, match='"greetings" must be an object'):
        load_settings(cwd=project, environ=environ, cli={}, kind=WithOneMore)

    table = table_of(WithOneMore)
    assert [row.name for row in table] == [row.name for row in TABLE] + ["greeting_limit"]
    assert markdown_table(table).endswith(
        "| `greetings.limit` | `COMPACT_AGENT_GREETING_LIMIT` | a positive integer | 3 | greet at most so often |\n"
    )
    assert help_lines(table)[-1].split() == [
        "COMPACT_AGENT_GREETING_LIMIT",
        "greet",
        "at",
        "most",
        "so",
        "often",
    ]
    # and the real table does not know it: the row is the whole change
    real = load_settings(cwd=project, environ={**environ, "COMPACT_AGENT_GREETING_LIMIT": "9"}, cli={})
    assert not hasattr(real, "greeting_limit")


# ---- a stage with a setting: its module (here the two functions), its row, its registration ------------


@dataclass(frozen=True)
class WithShout(CompactConfig):
    shout: bool = setting(False, key="shout", env="COMPACT_AGENT_SHOUT", kind=BOOL, doc="prompts in capitals")


@dataclass
class SettingsWithShout(Settings):
    compaction: CompactConfig = field(default_factory=WithShout)


def shout(messages: list[Message], ctx: ViewContext, step: Step) -> list[Message]:
    """The stage's module: the prompts in capitals when its setting is on (never mutating its input)."""
    if not getattr(ctx.config, "shout", False):
        return messages
    return [
        m.replace(
            content=[{**b, "text": b["text"].upper()} if b.get("type") == "text" else b for b in m.content]
        )
        if m.kind == "prompt"
        else m
        for m in messages
    ]


def shout_fingerprint(ctx: ViewContext) -> tuple:
    return (getattr(ctx.config, "shout", False),)


def test_a_stage_with_a_setting_is_its_module_its_row_and_its_registration(
    where, monkeypatch, tmp_path
) -> None:
    project, environ = where
    monkeypatch.setattr(view, "STAGES", [*view.STAGES, Stage("shout", shout, shout_fingerprint)])
    s = load_settings(
        cwd=project, environ={**environ, "COMPACT_AGENT_SHOUT": "1"}, cli={}, kind=SettingsWithShout
    )
    assert s.report.sources["shout"] == "env COMPACT_AGENT_SHOUT"
    prompt = Message("user", [{"type": "text", "text": "fix the tests"}], kind="prompt")
    shouted = build_view([prompt], ViewContext(ContextState(), tmp_path, config=s.compaction))
    assert shouted.messages[0].content == [{"type": "text", "text": "FIX THE TESTS"}]
    quiet = load_settings(cwd=project, environ=environ, cli={}, kind=SettingsWithShout)
    kept = build_view([prompt], ViewContext(ContextState(), tmp_path, config=quiet.compaction))
    assert kept.messages[0].content == [{"type": "text", "text": "fix the tests"}]
    assert (
        "| `shout` | `COMPACT_AGENT_SHOUT` | true or false (variable: 1/true/yes/on or 0/false/no/off) "
        "| false | prompts in capitals |" in markdown_table(table_of(SettingsWithShout))
    )


# ---- what is generated from the rows is current ------------------------------------------------------------


def test_the_settings_table_in_the_docs_is_generated_from_the_rows() -> None:
    text = (ROOT / "docs" / "settings.md").read_text()
    assert gen_docs.between(text, "settings table") == markdown_table(TABLE), "run scripts/gen_docs"


def test_help_lists_every_environment_variable_from_the_rows() -> None:
    assert cli.ENVIRONMENT == "\n".join(help_lines(TABLE)), "run scripts/gen_docs"
    assert all(row.env in cli.HELP for row in TABLE if row.env)


def test_every_row_has_a_doc_and_a_key_or_a_variable_and_none_is_declared_twice() -> None:
    assert all(row.doc and (row.key or row.env) for row in TABLE)
    keys = [row.key for row in TABLE if row.key]
    names = [row.env for row in TABLE if row.env]
    assert len(set(keys)) == len(keys) and len(set(names)) == len(names)
