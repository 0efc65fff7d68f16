"""A session's own parts, built here only: the SDK client (a client rebuilt under new settings keeps the
retry budget), the compaction settings a conversation gets, the hooks compaction runs, the thinking-binding
record. What a session shares with the tests' compaction bench (the main request, a ready Conversation,
``ConversationOwner``) sits a floor lower, in compact/owner.py.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, Callable

from agent.config.settings import Settings
from agent.runtime.hooks import HookRunner
from agent.runtime.sdk import ModelClient
from compact.decision.config import CompactConfig
from core.transcript_writer import THINKING_BINDING

NOTES_TEMPLATE = "session-memory-template.md"  # a user's own notes template, in COMPACT_AGENT_HOME


def binding_record(behavior: str, path: str) -> dict[str, Any]:
    """{"type": "thinking-binding", "behavior": "drop_block", "path": the block the API named}."""
    return {"type": THINKING_BINDING, "behavior": behavior, "path": path}


def client(s: Settings, on_event: Callable[[Any], None]) -> ModelClient:
    """The SDK client for these settings: credentials, base URL and the retry budget."""
    made = ModelClient(
        api_key=s.api_key,
        auth_token=s.auth_token,
        base_url=s.base_url,
        on_event=on_event,
        retry_seconds=s.retry_seconds,
    )
    made.fallback_model = s.fallback_model
    return made


def compact_config(s: Settings) -> CompactConfig:
    """The compaction settings a conversation gets: the parsed ones, with the home's notes template."""
    return replace(s.compaction, notes_template=s.home / NOTES_TEMPLATE)


def run_hooks(
    runner: HookRunner,
    event: str,
    payload: dict[str, Any],
    match_value: str | None,
    notice: Callable[[str, str], None],
    cancel: threading.Event | None = None,
) -> list[Any]:
    """Run a hook event (stopped early if ``cancel`` is set); its failures are reported as warnings."""
    outcomes = runner.run(event, payload, match_value, cancel)
    for line in runner.report_lines(outcomes):
        notice(line, "warning")
    return outcomes
