"""A Conversation and its Ports on the loopback fake API, wired the way a session wires them — without one.

Compaction code takes ``(conversation, ports)``; these tests build both here, from real parts and with
the session's own wiring (agent.runtime.wiring): the SDK client pointed at the fake server, a real transcript
writer in a temp directory, the built-in tools' schemas and context, and (when a test gives hooks) the
real hook runner. Only the window is the bench's own (``Limits``), so a test sets it without a server.

    bench = make_bench(tmp_path, api, session_memory=True, hooks={...})
    bench.add(user_prompt("hi"))                  # live list + transcript + MessageRecorded event
    compactor.compact(bench.conv, bench.ports, "manual")
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from agent.config.settings import Settings
from agent.config.system_prompt import build_system, compact_instructions, memory_files
from agent.runtime import wiring
from agent.runtime.hooks import HookRunner, base_payload
from compact import owner
from compact.context.conversation import Conversation, Ports
from compact.decision.config import CompactConfig
from core.events import Notice
from core.messages import Message
from core.model import ModelService
from core.transcript_writer import TranscriptWriter
from tools.base import ToolContext
from tools.registry import builtin_tools, tool_schemas
from tools.snip import SnipTool

MODEL = "claude-sonnet-4-5"
SESSION_ID = "0b5e3c1e-1111-4222-8333-444455556666"
_CONFIG = {f.name for f in dataclasses.fields(CompactConfig)}


@dataclass
class Limits:
    window: int = 200_000


@dataclass(eq=False)
class Bench(owner.ConversationOwner):
    """A session's recording, usage, requests, thresholds and shortcuts (compact.owner.ConversationOwner) over a bench."""

    conv: Conversation
    ports: Ports
    client: ModelService
    settings: Settings
    model: str
    limits: Limits
    events: list[Any] = field(default_factory=list)
    usage_total: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    session_id: str = SESSION_ID
    hooks: HookRunner | None = None  # the real hook runner, when a test gives hooks

    def emit(self, event: Any) -> None:  # type: ignore[override]
        self.events.append(event)

    def account_side_request(self, message: Message) -> None:
        """A side request's usage (the session also writes it to the transcript; the bench only counts)."""
        self.count_usage(message.model or self.model, message.usage or {})

    def hook_context(self, event: str, match_value: str | None, **fields: Any) -> str:
        if self.hooks is None:
            return ""
        payload = {**base_payload(self.session_id, self.transcript_path, self.cwd, event), **fields}
        outcomes = wiring.run_hooks(self.hooks, event, payload, match_value, self.notice)
        return self.hooks.context_text(outcomes)

    def notice(self, text: str, level: str = "info") -> None:
        self.events.append(Notice(text, level))

    def compaction_instructions(self) -> str:
        return compact_instructions(self.cwd, self.home)

    def instruction_paths(self) -> list[Path]:
        return memory_files(self.cwd, self.home)

    def view(self) -> Any:
        return self.conv.view()

    def system_blocks(self) -> list[dict[str, Any]]:
        return build_system(self.cwd, self.home, self.model)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return tool_schemas(builtin_tools() + [SnipTool()], brief=self.brief_tools())

    def model_window(self) -> int:
        return self.limits.window

    def snip(self, ids: list[str], reason: str | None = None) -> str:
        return self.conv.tools.services["snip"](ids, reason)

    # --- where things are ------------------------------------------------------------------------
    @property
    def cwd(self) -> Path:
        return self.settings.cwd

    @property
    def home(self) -> Path:
        return self.settings.home

    @property
    def transcript_path(self) -> Path:
        return self.conv.transcript_path

    @property
    def session_dir(self) -> Path:
        return self.conv.session_dir

    @property
    def tool_ctx(self) -> ToolContext:
        return self.conv.tools


def make_bench(
    tmp: Path,
    api: Any = None,
    *,
    session_id: str = SESSION_ID,
    model: str = MODEL,
    hooks: dict[str, Any] | None = None,
    home: Path | None = None,
    clock: Callable[[], datetime] | None = None,
    model_api: ModelService | None = None,
    **options: Any,
) -> Bench:
    """The compact floor's session builder: a Bench in ``tmp``/project, its transcript under
    ``home``/projects, its model the fake API (``api``: the wire, through the SDK) or ``model_api`` (a
    core.scripted.ScriptedModel: no wire); ``options`` are CompactConfig fields (session_memory
    defaults to off) and Limits fields. (The agent floor's is tests/conftest.py ``make_session``.)"""
    cwd = tmp / "project"
    cwd.mkdir(exist_ok=True)
    home = home or tmp / "agent-home"
    store = home / "projects" / "".join(c if c.isalnum() else "-" for c in str(cwd))
    config = {k: options.pop(k) for k in list(options) if k in _CONFIG}
    config.setdefault("session_memory", False)
    config.setdefault("notes_template", home / "session-memory-template.md")
    limits = Limits(**options)
    compaction = CompactConfig(**config)
    events: list[Any] = []
    base_url = api.url if api is not None else None
    settings = Settings(cwd=cwd, home=home, api_key="test-key", base_url=base_url, compaction=compaction)
    client = model_api or wiring.client(settings, events.append)
    tools = ToolContext(project_dir=cwd, session_dir=store / session_id, cwd=cwd)
    writer = TranscriptWriter(store / f"{session_id}.jsonl", session_id, str(cwd), "test")
    bench = Bench(
        conv=None,  # type: ignore[arg-type]
        ports=None,  # type: ignore[arg-type]
        client=client,
        settings=settings,
        model=model,
        limits=limits,
        events=events,
        session_id=session_id,
        hooks=HookRunner(hooks or {}, cwd, dict(os.environ)),
    )
    bench.ports = bench.compaction_ports(client, events.append, compaction)
    bench.conv = owner.conversation(writer, store / session_id, tools, bench.ports, clock=clock)
    client.on_binding_fallback = bench.binding_fallback
    return bench
