"""What compaction works on (``Conversation``) and the few services it reaches through (``Ports``).

Every function of compact/ that needs more than a message list takes ``(conversation, ports)`` — never
a session. ``agent/session.py`` builds both once and passes them down; a test builds them with the
loopback fake API and a real ``TranscriptWriter`` and needs nothing else.

Conversation — the state of one conversation as compaction sees it:
  messages     the live list: what follows the last compaction boundary, as it happened
  state        the stages' sticky decisions (compact.state), replayed from the transcript on resume
  writer       the append-only transcript (anything with the ``TranscriptSink`` methods)
  tools        the tools' context: the "files read" state and path resolution (compact.restore)
  calibration  real / estimated token ratio (compact.tokens)
  lock, cancel one lock for the list and the transcript; the turn's Ctrl-C
  counters     compacting, compact_failures(_reported), reactive_compacted, current_prompt_uuid
  workers      notes (the session-memory updater), collapser (context collapse) and preparer (the
               compaction candidate prepared in the background), declared here
  pipeline     the cheap stages' context and caches (compact.pipeline)
compact.prepare.wire() fills in the last three for a given Ports.

Ports — what compaction needs from the floors above it:
  model        anything with ``stream(req, cancel=, emit_text=) -> Message`` (core.model.Model)
  emit         the event sink (core.events)
  request      builds a Request sharing the main conversation's system prompt and tools
  thresholds   the current thresholds (compact.thresholds), which depend on the model and settings
  account      counts the usage of a side request (notes, summary, collapse) toward the session's cost
  hooks        runs a hook event, reports failures, returns what successful hooks printed
  instructions the "Compact Instructions" of CLAUDE.md; instruction_files: those files' paths
  config       the compaction settings (``CompactConfig``)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from compact.pipeline import PrepareContext, Prepared, prepare
from compact.state import ContextState
from compact.thresholds import Thresholds
from compact.tokens import Calibration
from core.events import Event, Notice
from core.messages import Message
from core.model import Model, Request
from tools.base import ToolContext

if TYPE_CHECKING:  # the workers' modules work on a Conversation; it only holds them
    from compact.collapse_worker import Collapser
    from compact.notes_updater import NotesWorker
    from compact.preparer import Preparer


class TranscriptSink(Protocol):
    """The append-only transcript (agent.transcript.TranscriptWriter is the real one)."""

    path: Path

    def append_message(self, m: Message) -> dict[str, Any]: ...

    def append_record(self, rec: dict[str, Any]) -> dict[str, Any]: ...

    def append_boundary(
        self,
        trigger: str,
        pre_tokens: int,
        logical_parent_uuid: str | None,
        preserved_segment: dict[str, str] | None = None,
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class CompactConfig:
    """The settings compaction reads (the agent builds it from its Settings once)."""

    disable_compact: bool = False
    auto_compact: bool = True
    session_memory: bool = True
    prepare_compaction: bool = True  # candidates prepared in the background before T (compact.preparer)
    microcompact: bool = True
    gap_minutes: float = 60.0
    keep_recent: int = 5
    context_collapse: bool = False
    compaction_model: str | None = None
    context_editing: dict[str, Any] | None = None  # the contextEditing setting (camelCase keys)
    notes_template: Path | None = None  # a user's notes template, if they keep one

    @property
    def auto_enabled(self) -> bool:
        """Automatic compaction: on unless switched off, and off while context collapse manages the room."""
        return self.auto_compact and not self.disable_compact and not self.context_collapse

    @property
    def notes_enabled(self) -> bool:
        return self.session_memory and not self.disable_compact


def _no_hooks(event: str, match_value: str | None, **fields: Any) -> str:
    return ""


def _nothing() -> str:
    return ""


def _no_files() -> list[Path]:
    return []


@dataclass
class Ports:
    model: Model
    emit: Callable[[Event], None]
    request: Callable[..., Request]
    thresholds: Callable[[], Thresholds]
    account: Callable[[Message], None]
    hooks: Callable[..., str] = _no_hooks
    instructions: Callable[[], str] = _nothing
    instruction_files: Callable[[], list[Path]] = _no_files
    config: CompactConfig = field(default_factory=CompactConfig)

    def notice(self, text: str, level: str = "info") -> None:
        self.emit(Notice(text, level))


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
    compact_failures: int = 0  # consecutive failed automatic compactions (the circuit breaker)
    compact_failures_reported: bool = False
    reactive_compacted: bool = False  # the once-per-turn reactive compaction was used
    current_prompt_uuid: str | None = None  # the typed prompt of the turn in progress (Snip can't take it)
    window_limit: int | None = None  # a smaller window the server told us about (prompt too long)
    # what /summary and /history show: summary, trigger, pre/post tokens, method, replaced messages
    last_compaction: dict[str, Any] | None = None
    # files restored by the last compaction: path -> (mtime, size, lines shown, lines) (compact.restore)
    restored: dict[str, tuple[float, int, int, int]] = field(default_factory=dict)
    guard_warned: bool = False  # the post-compaction guard said what fills the context (once until a success)
    notes: NotesWorker | None = None
    collapser: Collapser | None = None
    preparer: Preparer | None = None  # the compaction candidate prepared in the background (compact.preparer)
    pipeline: PrepareContext | None = None

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
        """Append one of our non-message records (compact.state lists them) to the transcript."""
        with self.lock:
            return self.writer.append_record(rec)

    def view(self) -> Prepared:
        """The model's view right now: the cheap stages over the live list (compact.pipeline)."""
        assert self.pipeline is not None, "wire() the conversation first"
        return prepare(self.messages, self.pipeline)
