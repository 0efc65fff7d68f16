"""The agent floor's session builder: a real Session in a temp project, on the fake API or a script (the compact floor's is tests/helpers/bench.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def make_session(
    tmp: Path,
    api: Any = None,
    *,
    session_id: str = "0b5e3c1e-1111-4222-8333-444455556666",
    environ: dict[str, str] | None = None,
    model_api: Any = None,
    **settings: Any,
) -> tuple[Any, list[Any]]:
    """The agent floor's session builder: a real Session in ``tmp``/project, its model the fake API
    (``api``: the wire, through the SDK) or ``model_api`` (a core.scripted.ScriptedModel: no wire);
    returns it and its event list. (The compact floor's is tests/helpers/bench.py ``make_bench``.)"""
    from agent.config.settings import Settings
    from agent.runtime.session import Session
    from compact.decision.config import CompactConfig

    project = tmp / "project"
    project.mkdir(exist_ok=True)
    settings.setdefault("home", tmp / "home")
    settings.setdefault("retry_seconds", 2.0)  # a persistent API error fails in seconds, not minutes
    compaction = {k: settings.pop(k) for k in list(settings) if k in CompactConfig.__dataclass_fields__}
    events: list[Any] = []
    s = Settings(
        cwd=project,
        base_url=api.url if api is not None else None,
        api_key="test-key",
        compaction=CompactConfig(**compaction),
        **settings,
    )
    session = Session(s, session_id, events.append, None, environ=environ or {}, model_api=model_api)
    return session, events
