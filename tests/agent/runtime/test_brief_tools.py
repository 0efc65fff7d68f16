"""At small windows the built-in tools go with their short descriptions (agent.runtime.wiring.brief_tools):
at a 43K window their full text is over a quarter of T, and a compaction must leave the context under
half of T beside them. The input schemas are never shortened."""

from __future__ import annotations

from pathlib import Path

from agent.runtime.loop import run_turn
from core.scripted import ScriptedModel, reply_text
from tests.helpers.session import make_session
from tools.registry import builtin_tools


def _tools_sent(tmp_path: Path, **settings: object) -> list[dict]:
    tmp_path.mkdir()
    model = ScriptedModel([reply_text("Done.")])
    session, _ = make_session(tmp_path, model_api=model, **settings)
    run_turn(session, "hello")
    [req] = model.requests
    return req.tools


def test_a_43k_window_sends_brief_descriptions_with_the_same_schemas(tmp_path: Path) -> None:
    full = {t.name: t for t in builtin_tools()}
    small = {t["name"]: t for t in _tools_sent(tmp_path / "a", context_window=43_000)}
    large = {t["name"]: t for t in _tools_sent(tmp_path / "b")}

    for name, tool in full.items():
        assert large[name]["description"] == tool.description
        assert small[name]["description"] == tool.brief
        assert small[name]["input_schema"] == large[name]["input_schema"] == tool.input_schema
    shown = sum(len(t["description"]) for t in small.values())
    assert shown * 4 < sum(len(t["description"]) for t in large.values())
