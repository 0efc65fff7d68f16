"""The one wiring of the floors, shared by a session (agent/session.py) and the tests' bench
(tests/harness.py): the SDK client, the compaction settings, the hooks compaction runs, the thresholds,
the main request and a ready Conversation with the Snip tool's service.

Each piece is built here only, so the two can't drift apart (a client rebuilt under new settings keeps
the retry budget; the bench's thresholds and requests are a session's).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from agent.client import ModelClient
from agent.hooks import HookRunner
from agent.settings import Settings
from compact import start, thresholds
from compact.config import CompactConfig
from compact.conversation import Conversation, Ports, TranscriptSink
from compact.snip import perform_snip
from compact.state import ContextState
from compact.thresholds import Thresholds
from core.messages import Message
from core.model import Request, max_output_tokens
from tools.base import ToolContext

NOTES_TEMPLATE = "session-memory-template.md"  # a user's own notes template, in COMPACT_AGENT_HOME
DEFAULT_MAX_OUTPUT = 32_000  # the main reply's max_tokens unless CLAUDE_CODE_MAX_OUTPUT_TOKENS says more


def client(s: Settings, on_event: Callable[[Any], None]) -> ModelClient:
    """The SDK client for these settings: credentials, base URL and the retry budget."""
    return ModelClient(
        api_key=s.api_key,
        auth_token=s.auth_token,
        base_url=s.base_url,
        on_event=on_event,
        retry_seconds=s.retry_seconds,
    )


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


def thresholds_for(
    window: int,
    model: str,
    *,
    cap: int | None,
    pct: float | None,
    blocking: int | None,
    auto_enabled: bool,
) -> Thresholds:
    """The thresholds of a window for a model, under the overrides the settings give."""
    return thresholds.compute(
        window,
        max_output_tokens(model),
        window_cap=cap,
        pct=pct,
        blocking_override=blocking,
        auto_enabled=auto_enabled,
    )


def request(
    model: str,
    system: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    api_messages: list[dict[str, Any]],
    max_tokens: int | None,
    configured_max: int | None,
    **kw: Any,
) -> Request:
    """A request with the main conversation's system prompt and tools (``tools=[]`` for none)."""
    default = configured_max or min(max_output_tokens(model), DEFAULT_MAX_OUTPUT)
    return Request(
        model=model, system=system, tools=tools, messages=api_messages, max_tokens=max_tokens or default, **kw
    )


def conversation(
    writer: TranscriptSink,
    session_dir: Path,
    tools: ToolContext,
    ports: Ports,
    *,
    history: list[Message] | None = None,
    replayed: ContextState | None = None,
    clock: Callable[[], datetime] | None = None,
) -> Conversation:
    """A ready Conversation; the tools get its Ctrl-C and the Snip tool its service."""
    conv = start.conversation(
        writer, session_dir, tools, ports, messages=history, state=replayed, clock=clock
    )
    tools.cancel = conv.cancel
    tools.services["snip"] = snipper(conv)
    return conv


def snipper(conv: Conversation) -> Callable[[list[str], str | None], str]:
    """The Snip tool's service: remove the turns the model named, under the conversation's lock."""

    def snip(ids: list[str], reason: str | None = None) -> str:
        with conv.lock:
            return perform_snip(
                conv.messages,
                conv.state,
                ids,
                reason,
                conv.current_prompt_uuid,
                conv.record,
                sent=lambda: conv.view().messages,  # what the request loses, as it shows the messages
            )

    return snip
