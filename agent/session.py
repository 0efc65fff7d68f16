"""A session: settings, the conversation and its ports, tools, permissions, hooks and the model client.

``Session`` wires the floors together once: it builds the ``Conversation`` (the live list, the
transcript writer, state, counters, workers) and the ``Ports`` compaction reaches the rest through
(compact.conversation), the tools and their context, the permission rules, the hook runner and the
SDK client. Everything added to the conversation goes through ``add`` (list + transcript + event), so
the three never disagree. Nothing outside this module sets a session's attributes, except the REPL
swapping ``emit`` and ``ask`` when it takes over a session (/clear, /resume).
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from agent import __version__
from agent.client import ModelClient, default_model
from agent.hooks import HookRunner, base_payload
from agent.settings import Settings
from agent.system_prompt import build_system, compact_instructions, memory_files
from agent.transcript import TranscriptWriter
from compact import start, thresholds
from compact.conversation import CompactConfig, LastCompaction, Ports
from compact.snip import perform_snip
from compact.state import ContextState
from core.events import Event, MessageRecorded, Notice
from core.messages import Message
from core.model import Request, context_window_for, cost_usd, max_output_tokens
from tools.base import ToolContext
from tools.permissions import Permissions
from tools.registry import builtin_tools, tool_schemas
from tools.snip import SnipTool

# "yes" | "no" | "always"; None means nobody can answer (print mode): the call is denied
AskFn = Callable[[str, dict[str, Any], str], str]
NOTES_TEMPLATE = "session-memory-template.md"  # a user's own notes template, in COMPACT_AGENT_HOME
# hooks that belong to a turn: the user's interrupt (Ctrl-C, Esc, SIGINT in print mode) stops them
TURN_HOOKS = frozenset({"UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "PreCompact", "PostCompact"})


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def compact_config(s: Settings) -> CompactConfig:
    """The compaction settings, read once from the Settings."""
    return CompactConfig(
        disable_compact=s.disable_compact,
        auto_compact=s.auto_compact,
        session_memory=s.session_memory,
        prepare_compaction=s.prepare_compaction,
        microcompact=s.microcompact,
        gap_minutes=s.microcompact_gap_minutes,
        keep_recent=s.microcompact_keep,
        context_collapse=s.context_collapse,
        compaction_model=s.compaction_model,
        context_editing=_editing_config(s.context_editing),
        notes_template=s.home / NOTES_TEMPLATE,
    )


def _editing_config(c: dict[str, Any] | None) -> dict[str, Any] | None:
    if not c:
        return None
    return {
        "triggerTokens": c.get("trigger_tokens"),
        "keepToolUses": c.get("keep_tool_uses"),
        "clearAtLeastTokens": c.get("clear_at_least_tokens"),
        "clearThinking": c.get("clear_thinking"),
    }


@dataclass(eq=False)
class Session:
    settings: Settings
    session_id: str
    emit: Callable[[Event], None]
    ask: AskFn | None = None
    history: InitVar[list[Message] | None] = None  # a resumed session's live list
    replayed: InitVar[ContextState | None] = None  # and its stages' decisions, replayed from the transcript
    clock: Callable[[], datetime] = _utcnow
    model: str = ""
    last_uuid: str | None = None
    environ: dict[str, str] = field(default_factory=dict)
    resumed_size: int = 0  # bytes of the transcript written before this process (resumed sessions)

    def __post_init__(self, history: list[Message] | None, replayed: ContextState | None) -> None:
        s = self.settings
        self.model = self.model or (s.model if s.model_explicit else default_model())
        self.usage_total: dict[str, int] = {}
        self.cost = 0.0
        self._window: int | None = None
        self.writer = writer = TranscriptWriter(
            self.transcript_path,
            self.session_id,
            str(s.cwd),
            __version__,
            last_uuid=self.last_uuid,
            secret=(s.api_key, s.auth_token),
        )
        self.client = ModelClient(
            api_key=s.api_key,
            auth_token=s.auth_token,
            base_url=s.base_url,
            on_event=self._emit,
            retry_seconds=s.retry_seconds,
        )
        self.tools = builtin_tools() + [SnipTool()]
        self.tool_ctx = ToolContext(
            project_dir=s.cwd, session_dir=self.session_dir, cwd=s.cwd, environ=s.environ or None
        )
        self.tool_ctx.services["snip"] = self._snip
        self.permissions = Permissions(s, session_dir=self.session_dir)
        if s.deny:  # a file the Read rules deny never shows up in Grep or Glob output either
            self.tool_ctx.hidden = self.permissions.read_denied
        self.hooks = HookRunner(s.hooks, s.cwd, s.environ or self.environ, spill_dir=self.hook_output_dir)
        self.ports = Ports(
            model=self.client,
            emit=self._emit,
            request=self.request,
            thresholds=self.thresholds,
            account=self.account_side_request,
            hooks=self.hook_context,
            instructions=lambda: compact_instructions(s.cwd, s.home),
            instruction_files=lambda: memory_files(s.cwd, s.home),
            config=compact_config(s),
        )
        self.conv = start.conversation(
            writer,
            self.session_dir,
            self.tool_ctx,
            self.ports,
            messages=history,
            state=replayed,
            clock=self.clock,
        )
        self.tool_ctx.cancel = self.conv.cancel

    def use_settings(self, s: Settings) -> None:
        """Continue under settings built again (/trust revoke): permissions, hooks, the tools' environment
        and the client follow; the conversation and its compaction settings stay as they are."""
        self.settings = s
        self.permissions = Permissions(s, session_dir=self.session_dir)
        self.tool_ctx.hidden = self.permissions.read_denied if s.deny else None
        self.tool_ctx.environ = s.environ or None
        self.hooks = HookRunner(s.hooks, s.cwd, s.environ or self.environ, spill_dir=self.hook_output_dir)
        self.client = ModelClient(
            api_key=s.api_key, auth_token=s.auth_token, base_url=s.base_url, on_event=self._emit
        )
        self.ports.model = self.client

    def _emit(self, event: Event) -> None:
        self.emit(event)  # late-bound: the REPL swaps ``emit`` when it takes the session over

    def _snip(self, ids: list[str], reason: str | None) -> str:
        conv = self.conv
        with conv.lock:
            return perform_snip(conv.messages, conv.state, ids, reason, conv.current_prompt_uuid, conv.record)

    # --- paths and the live list -------------------------------------------------------------------
    @property
    def messages(self) -> list[Message]:
        return self.conv.messages

    @property
    def transcript_path(self) -> Path:
        return self.settings.project_dir / f"{self.session_id}.jsonl"

    @property
    def session_dir(self) -> Path:
        return self.settings.project_dir / self.session_id

    @property
    def hook_output_dir(self) -> Path:
        """Where hook output too large for the model is saved in full."""
        return self.session_dir / "hook-output"

    @property
    def state(self) -> ContextState:
        return self.conv.state

    @property
    def last_compaction(self) -> LastCompaction | None:
        return self.conv.last_compaction

    @property
    def notes_path(self) -> Path:
        return self.conv.notes_path

    @property
    def cancel(self) -> Any:
        return self.conv.cancel

    # --- recording ---------------------------------------------------------------------------------
    def add(self, message: Message) -> None:
        self.conv.append(message)
        if message.role == "assistant" and message.usage:
            self._account(message.model or self.model, message.usage)
        self.emit(MessageRecorded(message))

    def record(self, rec: dict[str, Any]) -> dict[str, Any]:
        return self.conv.record(rec)

    def _account(self, model: str, usage: dict[str, Any]) -> None:
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ):
            self.usage_total[key] = self.usage_total.get(key, 0) + int(usage.get(key) or 0)
        self.cost += cost_usd(model, usage)

    def account_side_request(self, message: Message) -> None:
        """Usage of compaction / notes requests counts toward /cost, not toward the context."""
        if message.usage:
            self._account(message.model or self.model, message.usage)

    # --- model requests ----------------------------------------------------------------------------
    def system_blocks(self) -> list[dict[str, Any]]:
        return build_system(self.settings.cwd, self.settings.home, self.model)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return tool_schemas(self.tools)

    @property
    def max_output(self) -> int:
        return self.settings.max_output_tokens or min(max_output_tokens(self.model), 32_000)

    def request(
        self,
        api_messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        tools: bool = True,
        **kw: Any,
    ) -> Request:
        return Request(
            model=self.model,
            system=self.system_blocks(),
            tools=self.tool_schemas() if tools else [],
            messages=api_messages,
            max_tokens=max_tokens or self.max_output,
            **kw,
        )

    def set_model(self, model: str) -> None:
        self.model = model
        self._window = None  # the window depends on the model

    # --- thresholds --------------------------------------------------------------------------------
    @property
    def window(self) -> int:
        if self._window is None:
            self._window = self.client.context_window(self.model) or context_window_for(self.model)
        limit = self.conv.window_limit
        return min(self._window, limit) if limit else self._window

    def thresholds(self) -> thresholds.Thresholds:
        s = self.settings
        return thresholds.compute(
            self.window,
            max_output_tokens(self.model),
            window_cap=s.context_window,
            pct=s.autocompact_pct,
            blocking_override=s.blocking_limit,
            auto_enabled=self.ports.config.auto_enabled,
        )

    # --- hooks -------------------------------------------------------------------------------------
    def notice(self, text: str, level: str = "info") -> None:
        self.emit(Notice(text, level))

    def hook_payload(self, event: str, **fields: Any) -> dict[str, Any]:
        return {**base_payload(self.session_id, self.transcript_path, self.settings.cwd, event), **fields}

    def run_hooks(self, event: str, match_value: str | None, **fields: Any) -> list[Any]:
        # hooks of a turn stop when the user interrupts it; the session's own (start, end) run regardless
        cancel = self.conv.cancel if event in TURN_HOOKS else None
        outcomes = self.hooks.run(event, self.hook_payload(event, **fields), match_value, cancel)
        for line in self.hooks.report_lines(outcomes):
            self.notice(line, "warning")
        return outcomes

    def hook_context(self, event: str, match_value: str | None, **fields: Any) -> str:
        """Run a hook event; what its successful hooks printed (failures are reported as notices)."""
        return self.hooks.context_text(self.run_hooks(event, match_value, **fields))
