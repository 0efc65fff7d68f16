"""Session notes kept up to date in the background (docs/compaction.md).

Triggers  ``update_if_due``, after every main-conversation response (compact.request_cycle.after_response): first
          once the context reaches 10,000 tokens, then whenever it has grown 5,000 tokens since the last
          update *and* either 3 tool calls happened since or the response made no tool call; 90% of the
          auto-compact threshold T and 60% of T take the place of 10,000 and 5,000 when larger
          (``update_levels``): about one update per compaction cycle, just before T, so the notes are current
          when a compaction uses them and cost no more than the summary they replace (benchmarks/cost.py); and
          when one more step like the last would reach T (a big read can jump the band). One update at a time,
          in a background thread (one that falls due meanwhile runs right after it); the user never waits,
          except at process exit, for at most 20 s, so a print-mode run keeps its last update.
Writes    the notes file (compact.compaction.notes), changed only with the Edit tool's own semantics; a
          ``{"type": "session-memory", "lastSummarizedUuid"}`` record whenever "summarized up to here" moves.
Model calls one side request per update (same system, tools and message prefix as the main
          conversation, so it reads the prompt cache).

An update is never part of the conversation: its request and reply are not added to the messages, only
its usage is counted (``ports.account``). Its failures (API errors, a timeout, edits that don't apply)
are reported once per session as a warning and never raised.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

from compact.compaction import economics, summary
from compact.compaction.notes import ensure_notes, headers, oversized_sections, save_version, template_for
from compact.compaction.notes_template import section_tokens, update_instruction
from compact.context import context_editing, coverage
from compact.context.conversation import Conversation, Ports
from compact.context.worker import QueuedWorker
from compact.context.worker import wait_at_exit as _wait_at_exit
from compact.decision.tokens import count_tokens
from compact.stages import binding
from compact.stages.state import notes_record
from core.errors import Interrupted, describe
from core.messages import Message, meta, to_api
from core.model import deadline
from core.tokens import estimate_text
from tools.base import ToolContext, ToolError
from tools.edit import EditTool
from tools.read import record_read

INIT_TOKENS = 10_000  # first update once the context is this big
UPDATE_GROWTH = 5_000  # later updates: context growth since the last one ...
INIT_SHARE = 0.9  # ... or, when larger, these shares of the auto-compact threshold T (update_levels)
GROWTH_SHARE = 0.6
TOOL_CALLS_BETWEEN = 3  # ... and this many tool calls since (or a reply without any)
UPDATE_TIMEOUT = 120.0  # seconds before an update is abandoned
UPDATE_MAX_TOKENS = 16_000
EXIT_WAIT = 20.0  # seconds the process waits, when it ends, for updates still in flight


@dataclass
class Trigger:
    """The update policy's counters (pure; ``observe`` is called once per main response)."""

    started: bool = False
    tokens_at_update: int = 0
    tool_calls: int = 0
    last_tokens: int = 0  # the context at the previous response: its growth predicts the next one

    def observe(
        self,
        tokens: int,
        tool_calls: int,
        init: int = INIT_TOKENS,
        growth: int = UPDATE_GROWTH,
        threshold: int | None = None,
    ) -> bool:
        """Count one response; True when an update is due now (``update_levels`` gives init and growth).

        Also due when one more step like the last one would reach ``threshold`` (the auto-compact
        level) and the context has grown since the last update: one large read can jump over the band
        between the update level and T, and the compaction there should find current notes."""
        self.tool_calls += tool_calls
        # a compaction shrank the context: growth counts from the new, smaller size
        self.tokens_at_update = min(self.tokens_at_update, tokens)
        step = max(0, tokens - self.last_tokens) if self.last_tokens else 0  # the first one is no step
        self.last_tokens = tokens
        last_chance = (
            threshold is not None
            and tokens < threshold <= tokens + step
            and tokens - self.tokens_at_update >= min(growth, UPDATE_GROWTH)
        )
        if not self.started:
            return tokens >= init or last_chance
        grown = tokens - self.tokens_at_update >= growth
        return last_chance or (grown and (self.tool_calls >= TOOL_CALLS_BETWEEN or tool_calls == 0))

    def updating(self, tokens: int) -> None:
        self.started = True
        self.tokens_at_update = tokens
        self.tool_calls = 0


def update_levels(threshold: int) -> tuple[int, int]:
    """(first update, growth between updates) for an auto-compact threshold T: 10,000 and 5,000 tokens,
    or 90% and 60% of T when those are larger. Each update reads the whole context and writes the
    notes: updates every 5,000 tokens (30 per cycle at a 200K window) cost more than the one summary
    they stand in for. After a compaction (~30% of T) growth of 60% of T brings the next update to
    ~90% of T again; the tail a notes compaction keeps verbatim is what came after it."""
    return max(INIT_TOKENS, int(threshold * INIT_SHARE)), max(UPDATE_GROWTH, int(threshold * GROWTH_SHARE))


@dataclass(frozen=True)
class _Job:
    view: list[Message]  # what the model saw at the trigger, calls still waiting for results removed
    marker: str | None  # "summarized up to here" once the update succeeds (only at a safe point)
    on_done: Callable[[bool], None] | None = None  # told whether it succeeded (compact.workers.preparer)


@dataclass
class NotesWorker(QueuedWorker[_Job]):
    """Per-session state: the trigger and the update timeout; the update running, the one waiting and
    whether a failure was said are compact.context.worker's (one update at a time, the newest waits)."""

    thread_name: ClassVar[str] = "session-memory"
    exit_wait: ClassVar[float] = EXIT_WAIT

    trigger: Trigger = field(default_factory=Trigger)
    timeout: float = UPDATE_TIMEOUT


def worker(conv: Conversation) -> NotesWorker:
    """The conversation's notes worker (made on first need; compact.start makes it at start-up)."""
    with conv.lock:
        w = conv.workers.get("notes")
        if not isinstance(w, NotesWorker):
            w = conv.workers["notes"] = NotesWorker()
        return w


def update_if_due(conv: Conversation, ports: Ports) -> None:
    """Called after each main-conversation response; starts a background update when one is due.

    Returns at once. While an update runs, a newly due one waits and runs right after it (only the
    newest waits), so the update after a turn's last reply — the one that can mark "summarized up to
    here" — is never lost, and two updates never run together.
    """
    if not ports.config.notes_enabled or not conv.messages:
        return
    last = conv.messages[-1]
    if last.role != "assistant":
        return
    w = worker(conv)
    try:
        tokens = count_tokens(conv.messages, conv.calibration)
        threshold = conv.window.thresholds().auto_compact
        if not w.trigger.observe(tokens, len(last.tool_uses), *update_levels(threshold), threshold=threshold):
            return
        job = _job(conv)
        w.trigger.updating(tokens)
    except Exception as e:  # noqa: BLE001 - the notes must never disturb the conversation
        _report(conv, ports, f"could not read the conversation for the update ({describe(e)})")
        return
    _enqueue(conv, ports, w, job)


def update_in_background(
    conv: Conversation, ports: Ports, on_done: Callable[[bool], None] | None = None
) -> None:
    """Start an update now, whatever the trigger says: compact.workers.preparer's schedule, which prepares the
    next compaction from the preparation level on. ``on_done`` is told whether it succeeded."""
    if not ports.config.notes_enabled or not conv.messages:
        if on_done:
            on_done(False)
        return
    w = worker(conv)
    try:
        job = _job(conv, on_done)
        w.trigger.updating(count_tokens(conv.messages, conv.calibration))
    except Exception as e:  # noqa: BLE001 - the notes must never disturb the conversation
        _report(conv, ports, f"could not read the conversation for the update ({describe(e)})")
        if on_done:
            on_done(False)
        return
    _enqueue(conv, ports, w, job)


def _enqueue(conv: Conversation, ports: Ports, w: NotesWorker, job: _Job) -> None:
    def run(job: _Job) -> None:
        ok = _run(conv, ports, job, w.timeout)  # never raises
        if job.on_done:
            job.on_done(ok)

    w.submit(job, run, _merged)


def _merged(waiting: _Job | None, job: _Job) -> _Job:
    """The update that waits when ``job`` falls due while one runs: the newer snapshot covers more; an
    older safe marker stays true for it."""
    older = waiting.marker if waiting else None
    callback = job.on_done or (waiting.on_done if waiting else None)
    return _Job(job.view, job.marker if job.marker or not older else older, callback)


def wait_at_exit() -> None:
    """Wait (up to EXIT_WAIT in all) for the updates still in flight: what the process does at exit.

    A print-mode run ends right after its last reply, which is just when an update starts; without
    this wait the update, and the "summarized up to here" it would record, would be lost (the workers
    register it at their first update: NotesWorker.exit_wait)."""
    _wait_at_exit(EXIT_WAIT)


def wait_for_update(conv: Conversation, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for an update in flight; True when none is running any more."""
    w = conv.workers.get("notes")
    return w.join(timeout) if isinstance(w, NotesWorker) else True


def update_notes(conv: Conversation, ports: Ports, timeout: float | None = None) -> bool:
    """Run one update now, in this thread (after any update in flight); True when it succeeded."""
    if not ports.config.notes_enabled or not conv.messages:
        return False
    w = worker(conv)
    wait_for_update(conv, timeout or w.timeout)
    try:
        job = _job(conv)
        w.trigger.updating(count_tokens(conv.messages, conv.calibration))
    except Exception as e:  # noqa: BLE001
        _report(conv, ports, f"could not read the conversation for the update ({describe(e)})")
        return False
    return _run(conv, ports, job, timeout or w.timeout)


SPAN_LEAD = (
    "Your session notes already cover the conversation before the messages below; those earlier "
    "messages are about to leave the context. Bring the notes up to date with what follows."
)


def update_span(conv: Conversation, ports: Ports, span: list[Message], timeout: float | None = None) -> bool:
    """Fold ``span`` (the live messages the notes don't cover yet) into the notes with one update that
    sends just that span; True when it succeeded and the notes now cover it (docs/compaction.md).

    A compaction calls it when the uncovered messages would not fit beside the notes. A span that is
    itself bigger than the auto-compact threshold is refused (False): the caller summarizes instead.
    Messages after the span are neither sent nor covered (the notes' marker stays before them)."""
    if not ports.config.notes_enabled or not span:
        return False
    w = worker(conv)
    wait_for_update(conv, timeout or w.timeout)
    try:
        with conv.lock:
            view = list(conv.view().tagged)
            live = list(conv.messages)
        ids = {m.uuid for m in span}
        first = next((i for i, m in enumerate(view) if m.uuid in ids), len(view))
        # the span's end too: what comes after it (a typed prompt a compaction keeps verbatim) is not sent
        end = next((i + 1 for i in range(len(view) - 1, -1, -1) if view[i].uuid in ids), len(view))
        last = next((i + 1 for i in range(len(live) - 1, -1, -1) if live[i].uuid in ids), len(live))
        marker = safe_marker(live[:last])
        part = _without_open_calls(view[first:end])
        if ports.offers_compaction():
            # preserved thinking (compact.stages.binding): behind the lead-in instead of what came before them,
            # every thinking block of the span is bound to a prefix this request doesn't have, and would
            # be refused; the span goes without its thinking (leaving thinking out is always allowed)
            # and a tool loop the span ends in is told as text (summary.close_loop): the API refuses a
            # loop continued without its thinking
            kept = binding.drop_all(part)[0]
            part = summary.close_loop(kept) if binding.in_tool_loop(part) else kept
        # (estimates only: the usage of a reply in the span measured the whole context, not the span)
        if not part or sum(m.tokens for m in part) > conv.window.thresholds().auto_compact:
            return False
        w.trigger.updating(count_tokens(conv.messages, conv.calibration))
    except Exception as e:  # noqa: BLE001
        _report(conv, ports, f"could not read the conversation for the update ({describe(e)})")
        return False
    return _run(conv, ports, _Job([meta(SPAN_LEAD), *part], marker), timeout or w.timeout)


# --- one update -------------------------------------------------------------------------------------


def _job(conv: Conversation, on_done: Callable[[bool], None] | None = None) -> _Job:
    """Snapshot, on the caller's thread, what the update will send."""
    with conv.lock:
        prepared = conv.view()
        marker = safe_marker(conv.messages)
    return _Job(_without_open_calls(list(prepared.tagged)), marker, on_done)


def safe_marker(messages: list[Message]) -> str | None:
    """The last message an update covers that the conversation may be cut after: every tool call up to
    it answered. After a text reply that is the reply; in a tool chain, the results before the calls
    still waiting for theirs (docs/compaction.md)."""
    end = len(messages)
    while end > 0 and messages[end - 1].role == "assistant" and messages[end - 1].tool_uses:
        end -= 1  # calls not answered yet
    if end == 0:
        return None
    called = {b.get("id") for m in messages[:end] for b in m.tool_uses}
    answered = {b.get("tool_use_id") for m in messages[:end] for b in m.tool_results}
    return messages[end - 1].uuid if called <= answered else None


def _without_open_calls(messages: list[Message]) -> list[Message]:
    """Drop tool_use blocks still waiting for their results (the request must be valid as it stands)."""
    start = len(messages)
    while start > 0 and messages[start - 1].role == "assistant":
        start -= 1
    tail = []
    for m in messages[start:]:
        if m.tool_uses:
            m = m.replace(
                content=[b for b in m.content if b.get("type") == "text" and b.get("text", "").strip()]
            )
        if m.content:
            tail.append(m)
    return messages[:start] + tail


def _run(conv: Conversation, ports: Ports, job: _Job, timeout: float) -> bool:
    """Send the update and apply its edits; never raises. True when the notes are up to date."""
    with deadline(timeout) as cancel:
        try:
            problems = _update(conv, ports, job, cancel)
        except Exception as e:  # noqa: BLE001 - API errors, disk trouble: reported, never raised
            # the deadline closes the stream: whatever the client then raises, the cause is the timeout
            timed_out = cancel.is_set() or isinstance(e, Interrupted)
            problems = [
                f"the update took longer than {timeout:g} s and was abandoned" if timed_out else describe(e)
            ]
    if problems:
        _report(conv, ports, problems[0])
        return False
    if job.marker and _advances(conv, job.marker):
        conv.state.last_summarized_uuid = job.marker
        conv.record(notes_record(job.marker))
        save_version(conv.notes_path, job.marker)  # what /rewind puts back (agent.runtime.rewind)
    return True


def _advances(conv: Conversation, marker: str) -> bool:
    """True when ``marker`` is live and later than the current "summarized up to here": an update that
    finishes after a compaction must not move coverage onto messages that left, or backwards."""
    with conv.lock:
        messages = list(conv.messages)
    new = coverage.covered_count(messages, marker)
    return new > 0 and new > coverage.covered_count(messages, conv.state.last_summarized_uuid)


def _update(conv: Conversation, ports: Ports, job: _Job, cancel: threading.Event) -> list[str]:
    path = ensure_notes(conv, ports)
    notes = path.read_text(encoding="utf-8")
    header_lines = headers(template_for(ports))
    section = section_tokens(conv.window.thresholds().auto_compact)  # what a notes compaction trims to
    instruction = update_instruction(
        str(path), notes, oversized_sections(notes, header_lines, section), estimate_text(notes), section
    )
    # as the main requests: the server clears the same old results (and the prompt cache is theirs)
    extra, betas = context_editing.for_ports(ports, False, job.view, conv.state.server_clear_through)
    req = ports.request(to_api([*job.view, meta(instruction)]), extra_body=extra, betas=betas)
    req.max_tokens = min(req.max_tokens, UPDATE_MAX_TOKENS)
    req.retry = "background"  # a compaction candidate: a failed one costs nothing, the next one retries
    reply = ports.model.stream(req, cancel=cancel, emit_text=False)
    ports.account(reply)
    conv.state.notes_price = economics.observe_notes(reply.usage) or conv.state.notes_price
    return apply_edits(conv, path, reply.tool_uses, header_lines)


def apply_edits(
    conv: Conversation, path: Path, uses: list[dict[str, Any]], header_lines: list[str]
) -> list[str]:
    """Apply the reply's Edit calls on the notes file, in order; the problems met (empty when all went well).

    Any other tool, or an Edit on any other path, is refused. An edit that would remove a section
    header is undone.
    """
    target = path.resolve()
    project = conv.tools.project_dir
    ctx = ToolContext(project_dir=project, session_dir=conv.session_dir, cwd=project)
    record_read(ctx, target)
    problems = []
    for use in uses:
        given = use.get("input")
        args: dict[str, Any] = given if isinstance(given, dict) else {}
        file_path = str(args.get("file_path", ""))
        if use.get("name") != "Edit" or not file_path or ctx.resolve(file_path).resolve() != target:
            problems.append(
                f"refused a {use.get('name')} call on {file_path or 'no file'} "
                "(only Edit on the notes file is allowed)"
            )
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


def _report(conv: Conversation, ports: Ports, problem: str) -> None:
    """Say once per session that the notes could not be updated."""
    worker(conv).report_once(
        ports.notice,
        f"Session notes were not updated: {problem.rstrip('.')}. Later failures are not reported.",
    )
