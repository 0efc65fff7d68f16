"""What compaction works on (``Conversation``) and the few services it reaches through (``Ports``).

Every function of compact/ that needs more than a message list takes ``(conversation, ports)`` — never
a session. ``compact.start.conversation()`` builds a ready Conversation for given Ports once, at
start-up; ``agent/runtime/session.py`` and a test's bench call it, the test with the loopback fake API and a real
``TranscriptWriter``, and need nothing else.

Conversation — the state of one conversation as compaction sees it:
  messages     the live list: what follows the last compaction boundary, as it happened
  state        the stages' sticky decisions (compact.stages.state), replayed from the transcript on resume
  writer       the append-only transcript (anything with the ``TranscriptSink`` methods)
  tools        the tools' context: the "files read" state and path resolution (compact.compaction.restore)
  calibration  real / estimated token ratio (compact.decision.tokens)
  lock, cancel one lock for the list and the transcript; the turn's Ctrl-C
  counters     compacting, breaker (compact.decision.breaker), reactive_compacted, current_prompt_uuid
  workers      the background workers by name ("notes", "collapse", "prepare"), each owned and typed by
               its own module (compact.compaction.notes_updater, compact.workers.collapse_worker, compact.workers.preparer) on the
               one base, compact.context.worker; the conversation only holds them
  view_ctx     the view's context and caches (compact.stages.view)
  window       the window and its thresholds (compact.decision.window), built from the ports' model facts
               and settings by compact.start; a limit a prompt-too-long answer taught is kept there

Ports — what compaction needs from the floors above it:
  model        anything with ``stream(req, cancel=, emit_text=) -> Message`` (core.model.Model)
  emit         the event sink (core.events)
  request      builds a Request sharing the main conversation's system prompt and tools
  model_window the model's whole context window (the Models API, else the table): a fact about the model;
               the window and its thresholds are compaction's own (compact.decision.window, ``conv.window``)
  max_output   the model's largest output (the thresholds keep room for a summary's output)
  count        the server's count of a request's input (count_tokens), or None (compact.request_cycle)
  account      counts the usage of a side request (notes, summary, collapse) toward the session's cost
  hooks        runs a hook event, reports failures, returns what successful hooks printed
  instructions the "Compact Instructions" of CLAUDE.md; instruction_files: those files' paths
  offers_compaction  whether the main model offers the server's on-demand summary (compact.compaction.backend)
  preserves_thinking whether the main model binds thinking to its prefix (server-side clearing then)
  config       the compaction settings (compact.decision.config)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Protocol

from compact.decision.breaker import Breaker
from compact.decision.config import CompactConfig
from compact.decision.decide import Decision
from compact.decision.tokens import Calibration
from compact.decision.window import Window
from compact.stages.state import ContextState
from compact.stages.view import View, ViewContext, build_view
from core.events import Event, Notice
from core.messages import Message
from core.model import Model, Request
from tools.base import ToolContext

# what started a compaction, as recorded on its boundary (a reactive one is recorded as "auto")
Trigger = Literal["manual", "auto"]


class TranscriptSink(Protocol):
    """The append-only transcript (core.transcript_writer.TranscriptWriter is the real one)."""

    path: Path

    def append_message(self, m: Message) -> dict[str, Any]: ...

    def append_record(self, rec: dict[str, Any]) -> dict[str, Any]: ...

    def append_boundary(
        self,
        trigger: Trigger,
        pre_tokens: int,
        logical_parent_uuid: str | None,
        preserved_segment: dict[str, str] | None = None,
        decision: dict[str, Any] | None = None,
    ) -> dict[str, Any]: ...


def _no_hooks(event: str, match_value: str | None, **fields: Any) -> str:
    return ""


def _nothing() -> str:
    return ""


def _no_files() -> list[Path]:
    return []


def _no_thinking(req: Request) -> None:
    return None


def _no() -> bool:
    return False


def _no_count(req: Request) -> int | None:
    return None


def _window_200k() -> int:
    return 200_000


def _output_32k() -> int:
    return 32_000


@dataclass
class Ports:
    model: Model
    emit: Callable[[Event], None]
    request: Callable[..., Request]
    account: Callable[[Message], None]
    hooks: Callable[..., str] = _no_hooks
    instructions: Callable[[], str] = _nothing
    instruction_files: Callable[[], list[Path]] = _no_files
    # sets extended thinking on a main-loop request (budget, max_tokens); side requests never think
    thinking: Callable[[Request], None] = _no_thinking
    # whether the model of the main requests offers the server's on-demand summary (compact.compaction.backend)
    offers_compaction: Callable[[], bool] = _no
    # whether the main model binds thinking to its prefix (preserved thinking): the server clears old tool
    # results then, unless the user set contextEditing (compact.context.context_editing.automatic)
    preserves_thinking: Callable[[], bool] = _no
    # the model's facts the window is computed from (compact.decision.window)
    model_window: Callable[[], int] = _window_200k
    max_output: Callable[[], int] = _output_32k
    # the server's count of a request's input tokens (count_tokens), None when it can't be had: what the
    # estimate is calibrated on before a decision that rests on messages no usage measured yet
    count: Callable[[Request], int | None] = _no_count
    config: CompactConfig = field(default_factory=CompactConfig)

    def notice(self, text: str, level: str = "info") -> None:
        self.emit(Notice(text, level))


@dataclass(frozen=True)
class LastCompaction:
    """What /summary and /history show of the last compaction (a resumed one: read from its records)."""

    summary: str
    trigger: str  # a Trigger; "?" when a resumed boundary did not record one
    pre_tokens: int
    # the size it left, or how to count it: a resumed one whose records don't say is counted from its
    # messages when first asked (``post_tokens``), not on the resume's way to its first request
    post: int | Callable[[], int]
    method: str  # "notes", "summary", or "resumed"
    tail_uuid: str | None  # the last live message right after it (None after a resume)
    # the messages it replaced; a resumed session reads them from the transcript when asked
    replaced: Callable[[], list[Message]]
    candidate: str = ""  # "prepared" when a background candidate was applied, or why one was refused
    # what it wrote to the prompt cache that the next request would not have written anyway (its post
    # tokens less the system prompt and tools and the kept messages no request had sent yet); None: unknown
    written: int | None = None
    # the tool calls whose results it kept verbatim although its notes or summary had seen them (the
    # usual recent tail), and whether it kept none such because the session had not gone back to those
    # the compaction before it kept (compact.compaction.economics ``tail_unused``)
    kept_seen: tuple[str, ...] = ()
    kept_seen_tokens: int = 0  # their size as the server counts (less the marker that would replace them)
    lean: bool = False
    # what economics.tail_unused has found so far (the replies it read, whether one went back to them):
    # each reply is read once
    looked: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def post_tokens(self) -> int:
        if callable(self.post):
            object.__setattr__(self, "post", int(self.post()))  # counted once
        return int(self.post)  # type: ignore[arg-type]


class Background(Protocol):
    """A background worker a conversation holds (the notes updater, the collapser)."""

    @property
    def busy(self) -> bool: ...


@dataclass(eq=False)
class Conversation:
    writer: TranscriptSink
    session_dir: Path
    tools: ToolContext
    messages: list[Message] = field(default_factory=list)
    state: ContextState = field(default_factory=ContextState)
    calibration: Calibration = field(default_factory=Calibration)
    lock: threading.RLock = field(default_factory=threading.RLock)
    cancel: threading.Event = field(default_factory=threading.Event)
    compacting: bool = False  # a compaction is running (no recursion from side requests or hooks)
    breaker: Breaker = field(default_factory=Breaker)  # of automatic compaction
    reactive_compacted: bool = False  # the once-per-turn reactive compaction was used
    current_prompt_uuid: str | None = None  # the typed prompt of the turn in progress (Snip can't take it)
    # the size the server counted when it refused the request as too long, while the reactive compaction
    # that follows runs: what the view holds is at least that, whatever our estimate says (issue 40)
    server_count: int | None = None
    # the window and its thresholds, compaction's own (compact.start builds it from the ports)
    window: Window = field(default_factory=lambda: Window(CompactConfig()))
    # the decision the compaction running now was made by (compact.decision.decide; None: /compact, or
    # none): the compactor records it on the boundary
    decision: Decision | None = None
    # the newest message a completed summary request saw whole (a candidate prepared ahead: the server's
    # summary or a local one): with the notes' marker, how far the server's clearing may reach
    summary_seen: str | None = None
    # the last message of the tail the server counted for a decision (compact.request_cycle ``measure``)
    measured_at: str | None = None
    # the server's clearing point the last main reply's usage measured (compact.request_cycle ``counted``)
    measured_clear_through: str | None = None
    last_compaction: LastCompaction | None = None
    # files restored by the last compaction: path -> (mtime, size, lines shown, lines) (compact.compaction.restore)
    restored: dict[str, tuple[float, int, int, int]] = field(default_factory=dict)
    guard_warned: bool = False  # the post-compaction guard said what fills the context (once until a success)
    # why the last compaction replaced nothing (CompactFailed's reason; "" after one that did): /compact says it
    last_failure: str = ""
    workers: dict[str, Background] = field(default_factory=dict)
    view_ctx: ViewContext | None = None
    # preserved thinking's escape hatch, sent on every request: only a transcript written before issue 38
    # sets it (its thinking-binding record; a resume sends what the live session sent). Now a request
    # that needs drop_block sends it alone, and the thinking it dropped is left out from then on
    # (compact.request_cycle.settle_dropped)
    thinking_binding: str | None = None
    binding_told: bool = False  # the user was told of a drop_block fallback in this conversation
    # cache diagnostics: the id of the last main reply (the next main request names it), the compaction
    # it followed, and the misses the server reported (compact.context.cache_health)
    last_reply_id: str | None = None
    compaction_seen: LastCompaction | None = None
    # the history was rebuilt otherwise (a rewind, a model switch): like a compaction, a point where a
    # cache miss is expected
    rebuild_point: bool = False
    # thinking blocks left out because the model now in use can't read them (a /model switch), counted
    foreign_thinking_dropped: int = 0
    cache_misses: list[dict[str, Any]] = field(default_factory=list)

    def begin_turn(self, prompt_uuid: str | None) -> None:
        """A typed prompt starts a turn: it is the current request (Snip can't take it), and the turn's one
        reactive compaction is available again."""
        self.current_prompt_uuid = prompt_uuid
        self.reactive_compacted = False

    @property
    def transcript_path(self) -> Path:
        return self.writer.path

    @property
    def results_dir(self) -> Path:
        return self.session_dir / "tool-results"

    @property
    def notes_path(self) -> Path:
        return self.session_dir / "session-memory" / "summary.md"

    def append(self, message: Message) -> None:
        """Add a message to the live list and the transcript together (never one without the other)."""
        with self.lock:
            self.messages.append(message)
            self.writer.append_message(message)

    def record(self, rec: dict[str, Any]) -> dict[str, Any]:
        """Append one of our non-message records (compact.stages.state lists them) to the transcript."""
        with self.lock:
            return self.writer.append_record(rec)

    def view(self) -> View:
        """The model's view right now: the registered stages over the live list (compact.stages.view)."""
        assert self.view_ctx is not None, "build the conversation with compact.start.conversation()"
        return build_view(self.messages, self.view_ctx)
