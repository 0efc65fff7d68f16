"""A session: the live conversation, its transcript, its state, and the services the loop calls.

The live list ``messages`` holds what follows the last compaction boundary, as it happened; what the
model sees is derived from it before every request (compact.pipeline). Everything added goes through
``add`` (list + transcript + event) so the three never disagree.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from agent import __version__
from agent.client import ModelClient, default_model
from agent.hooks import HookRunner, base_payload
from agent.settings import Settings
from agent.system_prompt import build_system
from agent.transcript import TranscriptWriter, latest_session, load_transcript, messages_before
from compact import thresholds
from compact.state import ContextState
from compact.tokens import Calibration
from core.errors import SessionError
from core.events import Event, MessageRecorded, Notice, TokenState
from core.messages import Message, new_uuid
from core.model import Request, context_window_for, cost_usd, max_output_tokens
from tools.base import ToolContext
from tools.permissions import Permissions
from tools.registry import builtin_tools, tool_schemas
from tools.snip import SnipTool

# "yes" | "no" | "always"; None means nobody can answer (print mode): the call is denied
AskFn = Callable[[str, dict[str, Any], str], str]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class Session:
    settings: Settings
    session_id: str
    emit: Callable[[Event], None]
    ask: AskFn | None = None
    messages: list[Message] = field(default_factory=list)
    state: ContextState = field(default_factory=ContextState)
    clock: Callable[[], datetime] = _utcnow
    model: str = ""
    last_uuid: str | None = None
    compact_failures: int = 0
    usage_total: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    last_compaction: dict[str, Any] | None = None
    environ: dict[str, str] = field(default_factory=dict)
    compacting: bool = False  # a compaction is running (no recursion from side requests)
    reactive_compacted: bool = False  # the once-per-turn reactive compaction was used

    def __post_init__(self) -> None:
        s = self.settings
        self.model = self.model or (s.model if s.model_explicit else default_model())
        self.cancel = threading.Event()
        self.lock = threading.RLock()
        self.writer = TranscriptWriter(self.transcript_path, self.session_id, str(s.cwd), __version__,
                                       last_uuid=self.last_uuid, secret=(s.api_key, s.auth_token))
        self.client = ModelClient(api_key=s.api_key, auth_token=s.auth_token, base_url=s.base_url,
                                  on_event=self.emit)
        self.tools = builtin_tools() + [SnipTool()]
        self.tool_ctx = ToolContext(project_dir=s.cwd, session_dir=self.session_dir, cwd=s.cwd, cancel=self.cancel,
                                    environ=s.environ or None)
        self.permissions = Permissions(s, session_dir=self.session_dir)
        self.hooks = HookRunner(s.hooks, s.cwd, s.environ or self.environ)
        self.tool_ctx.services["snip"] = self._snip
        self.calibration = Calibration()
        self._window: int | None = None
        self.compact_failures_reported = False
        self.current_prompt_uuid: str | None = None

    def _snip(self, ids: list[str], reason: str | None) -> str:
        from compact.snip import perform_snip

        with self.lock:
            return perform_snip(self.messages, self.state, ids, reason, self.current_prompt_uuid, self.record)

    # --- paths -------------------------------------------------------------------------------------
    @property
    def transcript_path(self) -> Path:
        return self.settings.project_dir / f"{self.session_id}.jsonl"

    @property
    def session_dir(self) -> Path:
        return self.settings.project_dir / self.session_id

    @property
    def results_dir(self) -> Path:
        return self.session_dir / "tool-results"

    @property
    def notes_path(self) -> Path:
        return self.session_dir / "session-memory" / "summary.md"

    # --- recording ---------------------------------------------------------------------------------
    def add(self, message: Message) -> None:
        with self.lock:
            self.messages.append(message)
            self.writer.append_message(message)
        if message.role == "assistant" and message.usage:
            self._account(message.model or self.model, message.usage)
        self.emit(MessageRecorded(message))

    def record(self, rec: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return self.writer.append_record(rec)

    def _account(self, model: str, usage: dict[str, Any]) -> None:
        for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            self.usage_total[key] = self.usage_total.get(key, 0) + int(usage.get(key) or 0)
        self.cost += cost_usd(model, usage)

    def account_side_request(self, message: Message) -> None:
        """Usage of compaction / notes requests counts toward /cost, not toward the context."""
        if message.usage:
            self._account(message.model or self.model, message.usage)

    # --- model requests ----------------------------------------------------------------------------
    def system_blocks(self) -> list[dict[str, Any]]:
        return build_system(self.settings.cwd, self.settings.home, self.model)

    def overhead_tokens(self) -> int:
        """Estimated tokens of the system prompt and tool definitions (cached until they change)."""
        import json

        from core.tokens import estimate_text

        key = json.dumps([self.system_blocks(), self.tool_schemas()], sort_keys=True)
        if getattr(self, "_overhead_key", None) != key:
            self._overhead_key, self._overhead = key, estimate_text(key)
        return self._overhead

    def tool_schemas(self) -> list[dict[str, Any]]:
        return tool_schemas(self.tools)

    @property
    def max_output(self) -> int:
        return self.settings.max_output_tokens or min(max_output_tokens(self.model), 32_000)

    def request(self, api_messages: list[dict[str, Any]], *, max_tokens: int | None = None,
                tools: bool = True, **kw: Any) -> Request:
        return Request(model=self.model, system=self.system_blocks(),
                       tools=self.tool_schemas() if tools else [], messages=api_messages,
                       max_tokens=max_tokens or self.max_output, **kw)

    # --- thresholds --------------------------------------------------------------------------------
    @property
    def window(self) -> int:
        if self._window is None:
            self._window = self.client.context_window(self.model) or context_window_for(self.model)
        return self._window

    @property
    def auto_compact_enabled(self) -> bool:
        s = self.settings
        return s.auto_compact and not s.disable_compact and not s.context_collapse

    def thresholds(self) -> thresholds.Thresholds:
        s = self.settings
        return thresholds.compute(self.window, max_output_tokens(self.model), window_cap=s.context_window,
                                  pct=s.autocompact_pct, blocking_override=s.blocking_limit,
                                  auto_enabled=self.auto_compact_enabled)

    def token_state(self, tokens: int) -> TokenState:
        th = self.thresholds()
        lv = thresholds.level(tokens, th)
        return TokenState(tokens=tokens, window=th.window, threshold=th.auto_compact, warning=lv.warning,
                          error=lv.error, blocking=lv.blocking, percent_left=lv.percent_left,
                          auto_compact=th.auto_enabled)

    def notice(self, text: str, level: str = "info") -> None:
        self.emit(Notice(text, level))

    def hook_payload(self, event: str, **fields: Any) -> dict[str, Any]:
        return {**base_payload(self.session_id, self.transcript_path, self.settings.cwd, event), **fields}

    def run_hooks(self, event: str, match_value: str | None, **fields: Any) -> list[Any]:
        outcomes = self.hooks.run(event, self.hook_payload(event, **fields), match_value)
        for line in self.hooks.report_lines(outcomes):
            self.notice(line, "warning")
        return outcomes


def open_session(settings: Settings, *, emit: Callable[[Event], None], ask: AskFn | None,
                 resume: str | None = None, continue_last: bool = False,
                 environ: dict[str, str] | None = None) -> Session:
    """A new session, or one continued from a transcript (ours, or a foreign Claude Code file)."""
    environ = dict(environ or {})
    path = _find_transcript(settings, resume) if resume else None
    if continue_last:
        path = latest_session(settings.project_dir)
        if path is None:
            raise SessionError(f"No earlier session to continue in {settings.cwd}")
    if path is None:
        return Session(settings, new_uuid(), emit, ask, environ=environ)
    try:
        # the model this session will use (Session picks the same): thinking of any other is dropped
        loaded = load_transcript(path, model=settings.model if settings.model_explicit else default_model())
    except OSError as e:
        raise SessionError(f"Can't read session {path}: {e.strerror or e}") from None
    for warning in loaded.warnings:
        emit(Notice(warning, "warning"))
    ours = path.parent == settings.project_dir and path.suffix == ".jsonl"
    if ours:
        session = Session(settings, loaded.session_id, emit, ask, messages=list(loaded.messages),
                          state=loaded.state, last_uuid=loaded.last_uuid, environ=environ)
    else:
        session = Session(settings, new_uuid(), emit, ask, environ=environ)
        # seed our own store; the foreign file is only read. Not through add(): the imported replies
        # are no turns of this run and their usage was paid for back then (num_turns, cost)
        for m in loaded.messages:
            session.messages.append(m)
            session.writer.append_message(m)
        session.state = loaded.state
        for rec in state_records(loaded.state):
            session.record(rec)
    session.last_compaction = _last_compaction(loaded)
    return session


def _last_compaction(loaded: Any) -> dict[str, Any] | None:
    """What /summary and /history show after a resume: the recorded boundary and its summary."""
    first = loaded.messages[0] if loaded.messages else None
    if not loaded.boundary or first is None or first.kind != "summary":
        return None
    meta_ = loaded.boundary.get("compactMetadata") or {}
    return {"summary": first.text, "trigger": meta_.get("trigger", "?"), "pre_tokens": meta_.get("preTokens", 0),
            "post_tokens": sum(m.tokens for m in loaded.messages), "method": "resumed", "tail_uuid": None,
            "pre_messages": lambda: messages_before(loaded.path, loaded.boundary_offset)}


def _find_transcript(settings: Settings, ref: str) -> Path:
    candidate = Path(ref).expanduser()
    if candidate.suffix == ".jsonl" or "/" in ref:
        if not candidate.is_absolute():
            candidate = settings.cwd / candidate
        if candidate.is_file():
            return candidate
        raise SessionError(f"No transcript file at {candidate}")
    own = settings.project_dir / f"{ref}.jsonl"
    if own.is_file():
        return own
    projects = settings.home / "projects"
    if projects.is_dir():
        for p in projects.glob(f"*/{ref}.jsonl"):
            return p
    raise SessionError(f"No session with id {ref} (looked in {settings.project_dir})")


def state_records(state: ContextState) -> list[dict[str, Any]]:
    """The transcript records that replay ``state`` (for a session seeded from another file)."""
    recs: list[dict[str, Any]] = []
    if state.replacements:
        recs.append({"type": "content-replacement", "replacements": [
            {"toolUseId": k, "content": v} for k, v in state.replacements.items()]})
    if state.snipped:
        recs.append({"type": "snip", "removedUuids": sorted(state.snipped), "reason": "imported"})
    if state.cleared:
        recs.append({"type": "microcompact", "clearedToolUseIds": sorted(state.cleared)})
    recs += [{"type": "collapse-commit", **c} for c in state.collapses]
    if state.last_summarized_uuid:
        recs.append({"type": "session-memory", "lastSummarizedUuid": state.last_summarized_uuid})
    return recs
