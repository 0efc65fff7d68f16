"""Session memory: notes kept up to date in the background, and a compaction that uses them (SPEC §7).

Triggers
  update   ``after_response``, after every main-conversation response: first once the context reaches
           10,000 tokens, then whenever it has grown 5,000 tokens since the last update *and* either 3
           tool calls happened since or the response made no tool call. One update at a time, in a
           background thread (one that falls due meanwhile runs right after it); the user never waits,
           except at process exit, for at most 20 s, so a print-mode run keeps its last update.
  compact  ``compact_with_notes``, tried first by auto-compact and by ``/compact`` without instructions.
Drops      (compaction) every message before the kept tail; the notes stand in for them.
Keeps      the messages after "summarized up to here", extended backwards to ≥10,000 tokens and ≥5
           messages with text, ≤40,000 tokens, never past the previous boundary's summary, never
           splitting a tool_use from its tool_result or the blocks of one streamed response.
Writes     the notes file ``<session dir>/session-memory/summary.md`` (0600, dirs 0700), changed only with
           the Edit tool's own semantics; a ``{"type": "session-memory", "lastSummarizedUuid"}`` record
           whenever "summarized up to here" moves.
Model calls one side request per update (same system, tools and message prefix as the main
           conversation, so it reads the prompt cache); the compaction itself makes none.

An update is never part of the conversation: its request and reply are not added to the messages, only
its usage is counted (``session.account_side_request``). Its failures (API errors, a timeout, edits that
don't apply) are reported once per session as a warning and never raised.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compact import context_editing
from compact.notes_template import SECTION_TOKENS, TEMPLATE, update_instruction
from compact.result import Compaction
from compact.tokens import count_tokens
from core.errors import Interrupted
from core.messages import Message, meta, to_api
from core.private import open_private
from core.tokens import estimate_text

if TYPE_CHECKING:
    from agent.session import Session

INIT_TOKENS = 10_000  # first update once the context is this big
UPDATE_GROWTH = 5_000  # later updates: context growth since the last one ...
TOOL_CALLS_BETWEEN = 3  # ... and this many tool calls since (or a reply without any)
KEEP_MIN_TOKENS = 10_000
KEEP_MIN_TEXT_MESSAGES = 5
KEEP_MAX_TOKENS = 40_000
SECTION_CHARS = 8_000  # per section, in the summary that replaces the history
COMPACT_WAIT = 15.0  # seconds a compaction waits for an update in flight
UPDATE_TIMEOUT = 120.0  # seconds before an update is abandoned
UPDATE_MAX_TOKENS = 16_000
EXIT_WAIT = 20.0  # seconds the process waits, when it ends, for updates still in flight
TEMPLATE_OVERRIDE = "session-memory-template.md"  # in COMPACT_AGENT_HOME
METHOD = "session-memory"


def enabled(session: Session) -> bool:
    s = session.settings
    return bool(s.session_memory) and not s.disable_compact


# --- the notes file ---------------------------------------------------------------------------------


def template_for(session: Session) -> str:
    """The user's template (``$COMPACT_AGENT_HOME/session-memory-template.md``) if any, else ours."""
    override = session.settings.home / TEMPLATE_OVERRIDE
    try:
        text = override.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return TEMPLATE
    return text if text.strip() else TEMPLATE


def ensure_notes(session: Session) -> Path:
    """The notes file, created from the template (private: file 0600, directories 0700) if missing."""
    path = session.notes_path
    try:
        fd = open_private(path, os.O_WRONLY | os.O_EXCL)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(template_for(session))
    return path


def notes_text(session: Session) -> str | None:
    """The notes as they are on disk (for ``/memory``); None when there are none yet."""
    try:
        return session.notes_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def is_template(text: str, template: str = TEMPLATE) -> bool:
    """True when the notes hold nothing beyond the template's headers and guidance lines."""
    known = {line.strip() for line in f"{template}\n{TEMPLATE}".splitlines()}
    return all(not line.strip() or line.strip() in known for line in text.splitlines())


def headers(template: str) -> list[str]:
    return [line.rstrip() for line in template.splitlines() if line.startswith("# ")]


def split_sections(text: str, header_lines: list[str]) -> list[tuple[str, str]]:
    """(header line, body) pairs in order; text before the first header comes with header "".

    Only the template's header lines start a section, so a "# comment" inside a code block doesn't.
    """
    known = {h.strip() for h in header_lines}
    parts: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines(keepends=True):
        if line.strip() in known and line.startswith("# "):
            parts.append((line, []))
        else:
            parts[-1][1].append(line)
    return [(h, "".join(body)) for h, body in parts if h or body]


def section_name(header_line: str) -> str:
    return header_line.strip().removeprefix("# ").strip()


def trim_sections(text: str, header_lines: list[str], path: Path, limit: int = SECTION_CHARS) -> str:
    """The notes with each section cut to about ``limit`` characters, saying where and why."""
    out = []
    for header, body in split_sections(text, header_lines):
        if len(body) > limit:
            cut = body.rfind("\n", limit // 2, limit)
            body = body[: cut if cut > 0 else limit].rstrip() + (
                f"\n[… this section is cut here to save space; the whole of it is in {path}]\n\n")
        out.append(header + body)
    return "".join(out)


def oversized_sections(text: str, header_lines: list[str]) -> list[str]:
    return [section_name(h) for h, body in split_sections(text, header_lines)
            if h and estimate_text(body) > SECTION_TOKENS]


# --- when to update -----------------------------------------------------------------------------------


@dataclass
class Trigger:
    """The update policy's counters (pure; ``observe`` is called once per main response)."""

    started: bool = False
    tokens_at_update: int = 0
    tool_calls: int = 0

    def observe(self, tokens: int, tool_calls: int) -> bool:
        """Count one response; True when an update is due now."""
        self.tool_calls += tool_calls
        # a compaction shrank the context: growth counts from the new, smaller size
        self.tokens_at_update = min(self.tokens_at_update, tokens)
        if not self.started:
            return tokens >= INIT_TOKENS
        grown = tokens - self.tokens_at_update >= UPDATE_GROWTH
        return grown and (self.tool_calls >= TOOL_CALLS_BETWEEN or tool_calls == 0)

    def updating(self, tokens: int) -> None:
        self.started = True
        self.tokens_at_update = tokens
        self.tool_calls = 0


@dataclass(frozen=True)
class _Job:
    view: list[Message]  # what the model saw at the trigger, calls still waiting for results removed
    marker: str | None  # "summarized up to here" once the update succeeds (only at a safe point)


@dataclass
class NotesWorker:
    """Per-session state: the trigger, the update running and the one waiting, whether a failure was said."""

    trigger: Trigger = field(default_factory=Trigger)
    thread: threading.Thread | None = None
    running: bool = False
    pending: _Job | None = None
    reported: bool = False
    timeout: float = UPDATE_TIMEOUT
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def busy(self) -> bool:
        return self.running


_create_lock = threading.Lock()


def worker(session: Session) -> NotesWorker:
    with _create_lock:
        w = getattr(session, "_notes_worker", None)
        if w is None:
            w = NotesWorker()
            session._notes_worker = w  # type: ignore[attr-defined]
        return w


def after_response(session: Session) -> None:
    """Called after each main-conversation response; starts a background update when one is due.

    Returns at once. While an update runs, a newly due one waits and runs right after it (only the
    newest waits), so the update after a turn's last reply — the one that can mark "summarized up to
    here" — is never lost, and two updates never run together.
    """
    if not enabled(session) or not session.messages:
        return
    last = session.messages[-1]
    if last.role != "assistant":
        return
    w = worker(session)
    try:
        tokens = count_tokens(session.messages, session.calibration)
        if not w.trigger.observe(tokens, len(last.tool_uses)):
            return
        job = _job(session)
        w.trigger.updating(tokens)
    except Exception as e:  # noqa: BLE001 - the notes must never disturb the conversation
        _report(session, f"could not prepare the update ({_describe(e)})")
        return
    with w.lock:
        if w.running:
            # the newer snapshot covers more; an older safe marker stays true for it
            older = w.pending.marker if w.pending else None
            w.pending = job if job.marker or not older else _Job(job.view, older)
            return
        w.running = True
        w.thread = threading.Thread(target=_work, args=(session, w, job), name="session-memory", daemon=True)
    _started(w.thread)


def _work(session: Session, w: NotesWorker, job: _Job | None) -> None:
    while job is not None:
        _run(session, job, w.timeout)  # never raises
        with w.lock:
            job, w.pending = w.pending, None
            w.running = job is not None


_in_flight: list[threading.Thread] = []
_exit_wait_registered = False


def _started(thread: threading.Thread) -> None:
    """Start an update thread; the first one registers the wait at process exit.

    A print-mode run ends right after its last reply, which is just when an update starts; without
    this wait the update, and the "summarized up to here" it would record, would be lost.
    """
    global _exit_wait_registered
    with _create_lock:
        if not _exit_wait_registered:
            atexit.register(_wait_at_exit)
            _exit_wait_registered = True
        _in_flight[:] = [t for t in _in_flight if t.is_alive()] + [thread]
    thread.start()


def _wait_at_exit() -> None:
    deadline = time.monotonic() + EXIT_WAIT
    for thread in list(_in_flight):
        thread.join(max(0.0, deadline - time.monotonic()))


def wait_for_update(session: Session, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for an update in flight; True when none is running any more."""
    w = getattr(session, "_notes_worker", None)
    thread = w.thread if w is not None else None
    if thread is None:
        return True
    thread.join(timeout)
    return not thread.is_alive()


def update_notes(session: Session, timeout: float | None = None) -> bool:
    """Run one update now, in this thread (after any update in flight); True when it succeeded."""
    if not enabled(session) or not session.messages:
        return False
    w = worker(session)
    wait_for_update(session, timeout or w.timeout)
    try:
        job = _job(session)
        w.trigger.updating(count_tokens(session.messages, session.calibration))
    except Exception as e:  # noqa: BLE001
        _report(session, f"could not prepare the update ({_describe(e)})")
        return False
    return _run(session, job, timeout or w.timeout)


# --- one update -------------------------------------------------------------------------------------


def _job(session: Session) -> _Job:
    """Snapshot, on the caller's thread, what the update will send."""
    from agent.context import view  # agent.context imports compact.compactor, which imports this module

    with session.lock:
        prepared = view(session)
        last = session.messages[-1]
    messages = list(getattr(prepared, "tagged", prepared.messages))
    safe = last.role == "assistant" and not last.tool_uses
    return _Job(_without_open_calls(messages), last.uuid if safe else None)


def _without_open_calls(messages: list[Message]) -> list[Message]:
    """Drop tool_use blocks still waiting for their results (the request must be valid as it stands)."""
    start = len(messages)
    while start > 0 and messages[start - 1].role == "assistant":
        start -= 1
    tail = []
    for m in messages[start:]:
        if m.tool_uses:
            m = m.replace(content=[b for b in m.content if b.get("type") == "text" and b.get("text", "").strip()])
        if m.content:
            tail.append(m)
    return messages[:start] + tail


def _run(session: Session, job: _Job, timeout: float) -> bool:
    """Send the update and apply its edits; never raises. True when the notes are up to date."""
    cancel = threading.Event()
    timer = threading.Timer(timeout, cancel.set)
    timer.daemon = True
    timer.start()
    try:
        problems = _update(session, job, cancel)
    except Exception as e:  # noqa: BLE001 - API errors, disk trouble: reported, never raised
        # the timer closes the stream: whatever the client then raises, the cause is the timeout
        timed_out = cancel.is_set() or isinstance(e, Interrupted)
        problems = [f"the update took longer than {timeout:g} s and was abandoned" if timed_out else _describe(e)]
    finally:
        timer.cancel()
    if problems:
        _report(session, problems[0])
        return False
    if job.marker:
        session.state.last_summarized_uuid = job.marker
        session.record({"type": "session-memory", "lastSummarizedUuid": job.marker})
    return True


def _update(session: Session, job: _Job, cancel: threading.Event) -> list[str]:
    path = ensure_notes(session)
    notes = path.read_text(encoding="utf-8")
    header_lines = headers(template_for(session))
    instruction = update_instruction(str(path), notes, oversized_sections(notes, header_lines),
                                     estimate_text(notes))
    extra, betas = context_editing.request_params(session.settings.context_editing, thinking_enabled=False)
    req = session.request(to_api([*job.view, meta(instruction)]), extra_body=extra, betas=betas,
                          max_tokens=min(session.max_output, UPDATE_MAX_TOKENS))
    reply = session.client.stream(req, cancel=cancel, emit_text=False)
    session.account_side_request(reply)
    return apply_edits(session, path, reply.tool_uses, header_lines)


def apply_edits(session: Session, path: Path, uses: list[dict[str, Any]], header_lines: list[str]) -> list[str]:
    """Apply the reply's Edit calls on the notes file, in order; the problems met (empty when all went well).

    Any other tool, or an Edit on any other path, is refused. An edit that would remove a section
    header is undone.
    """
    from tools.base import ToolContext, ToolError
    from tools.edit import EditTool
    from tools.read import record_read

    target = path.resolve()
    ctx = ToolContext(project_dir=session.settings.cwd, session_dir=session.session_dir, cwd=session.settings.cwd)
    record_read(ctx, target)
    problems = []
    for use in uses:
        args = use.get("input") if isinstance(use.get("input"), dict) else {}
        file_path = str(args.get("file_path", ""))
        if use.get("name") != "Edit" or not file_path or ctx.resolve(file_path).resolve() != target:
            problems.append(f"refused a {use.get('name')} call on {file_path or 'no file'} "
                            "(only Edit on the notes file is allowed)")
            continue
        before = target.read_text(encoding="utf-8")
        try:
            EditTool().run(args, ctx)
        except (ToolError, KeyError, TypeError) as e:
            problems.append(f"an edit did not apply: {e}")
            continue
        after = target.read_text(encoding="utf-8")
        lost = [h for h in header_lines if h.strip() not in {line.strip() for line in after.splitlines()}]
        if lost:
            _write_back(target, before)
            record_read(ctx, target)
            problems.append(f"undid an edit that removed the header {lost[0]!r}")
    return problems


def _write_back(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        f.write(text)


def _report(session: Session, problem: str) -> None:
    """Say once per session that the notes could not be updated."""
    w = worker(session)
    if w.reported:
        return
    w.reported = True
    try:
        session.notice(f"Session notes were not updated: {problem.rstrip('.')}. Later failures are not reported.",
                       "warning")
    except Exception:  # noqa: BLE001 - a broken renderer must not kill the worker thread
        pass


def _describe(e: BaseException) -> str:
    text = str(e).strip()
    return text if text else type(e).__name__


# --- compaction with the notes ---------------------------------------------------------------------------


def compact_with_notes(session: Session, trigger: str) -> Compaction | None:
    """A compaction that keeps a recent tail verbatim and puts the notes before it; None to fall back.

    None when session memory is off, there are no notes or they are still the bare template, no
    "summarized up to here" lies in the live list, or the result would still reach the auto-compact
    threshold. No model call; the compactor writes the boundary and swaps the list.
    """
    if not enabled(session):
        return None
    wait_for_update(session, COMPACT_WAIT)
    text = notes_text(session)
    template = template_for(session)
    if text is None or is_template(text, template):
        return None
    with session.lock:
        messages = list(session.messages)
    marker = session.state.last_summarized_uuid
    index = next((i for i, m in enumerate(messages) if m.uuid == marker), None) if marker else None
    if index is None:
        return None
    kept = messages[kept_start(messages, index + 1):]
    summary = trim_sections(text, headers(template), session.notes_path).strip()
    if estimate_text(summary) + sum(m.tokens for m in kept) >= session.thresholds().auto_compact:
        return None
    segment = {"headUuid": kept[0].uuid, "anchorUuid": "", "tailUuid": kept[-1].uuid} if kept else None
    return Compaction(method=METHOD, summary=summary, kept=kept, preserved_segment=segment)


def kept_start(messages: list[Message], first_uncovered: int, *, min_tokens: int = KEEP_MIN_TOKENS,
               min_text: int = KEEP_MIN_TEXT_MESSAGES, max_tokens: int = KEEP_MAX_TOKENS) -> int:
    """Index of the first message kept verbatim (see the module docstring for the rules).

    Everything from ``first_uncovered`` on is kept whatever its size (the notes don't cover it). Going
    backwards from there, whole units are added (a cut never lands on a tool_results message or inside
    one streamed response) until both minimums are met; a unit that would pass ``max_tokens`` is not
    added; a previous compaction's summary is never crossed.
    """
    floor = max((i + 1 for i, m in enumerate(messages) if m.kind == "summary"), default=0)
    start = _safe_cut(messages, min(max(first_uncovered, floor), len(messages)), floor)
    tokens = sum(m.tokens for m in messages[start:])
    texts = sum(1 for m in messages[start:] if _has_text(m))
    while start > floor and not (tokens >= min_tokens and texts >= min_text):
        prev = _safe_cut(messages, start - 1, floor)
        unit = messages[prev:start]
        extra = sum(m.tokens for m in unit)
        if tokens + extra > max_tokens:
            break
        start, tokens, texts = prev, tokens + extra, texts + sum(1 for m in unit if _has_text(m))
    return start


def _safe_cut(messages: list[Message], i: int, floor: int) -> int:
    """The nearest index at or before ``i`` where the kept tail may start."""
    while i > floor and not _cut_ok(messages, i):
        i -= 1
    return i


def _cut_ok(messages: list[Message], i: int) -> bool:
    if i >= len(messages):
        return True
    m, prev = messages[i], messages[i - 1] if i > 0 else None
    if m.role == "user" and m.tool_results:
        return False
    same_response = (m.role == "assistant" and prev is not None and prev.role == "assistant"
                     and m.message_id is not None and m.message_id == prev.message_id)
    return not same_response


def _has_text(m: Message) -> bool:
    return any(b.get("type") == "text" and b.get("text", "").strip() for b in m.content)
