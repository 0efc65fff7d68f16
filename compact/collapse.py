"""Context collapse: old spans of the conversation archived behind short summaries (SPEC §5, opt-in).

Triggers  ``CLAUDE_CONTEXT_COLLAPSE=1`` (agent.context adds ``stage(session)`` to the late stages and
          proactive auto-compact is off). Against the effective window E, at every model call:
            ≥ 70% E   a background worker summarises candidate spans and *stages* them (in memory);
            ≥ 90% E   staged spans are *committed*, oldest first, until the view is under 90% E;
            ≥ 95% E   (or the blocking limit, if lower) and nothing committable: the call waits for the
                      worker (at most 60 s; Ctrl-C interrupts) instead of sending a request that is too big.
Drops     from the model's view only: each committed span — a contiguous run of old, completed user turns
          (a typed prompt and everything up to the next one), never one of the last 3 turns, never a
          turn that leaves a tool_use or a tool_result without its partner, never a summary or a
          placeholder — becomes one user meta message "[Collapsed: N messages] <summary>".
Keeps     the live list and the transcript untouched; every message after and between the spans.
Writes    nothing to disk before committing; a commit appends a ``collapse-commit`` transcript record
          (span uuids, summary, placeholder uuid) and joins ``ContextState.collapses``; the loader
          replays those records on resume, so the resumed view is the same.
Model calls one side request per staged span (cheap model: ``compaction_model`` or the session's; no
          tools; ≤ 1,000 output tokens). Committing and applying commits cost none.

The pure half is ``apply_collapses(messages, collapses)``; ``stage(session)`` adds the thresholds, the
worker and the commits. Spans are staged only until what is staged would bring the view down to 60% E,
so the number of side requests stays proportional to the overflow. A worker failure is reported once
per session and never breaks the turn; after 3 failures in a row the worker is no longer started.

Token count after a commit: the API usage on earlier responses measured the view before the commit, so
the stage hands on copies of those responses whose usage is lowered by the tokens the commit saved
(estimated, calibrated). The next response's usage measures the collapsed view and takes over. After a
resume that adjustment is not known (the last response normally postdates the last commit anyway).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from compact.snip import is_typed_prompt
from compact.tokens import Calibration, count_tokens
from core.errors import CollapseError, Interrupted
from core.messages import Message, new_uuid
from core.model import Request

if TYPE_CHECKING:
    from agent.session import Session
    from compact.pipeline import PrepareContext
    from compact.thresholds import Thresholds

START_AT = 0.70  # of the effective window: start summarising spans in the background
COMMIT_AT = 0.90  # commit staged spans until under this
WAIT_AT = 0.95  # nothing committable: wait for the worker instead of sending
STAGE_TARGET = 0.60  # the worker stages spans until committing them all would get the view down to this
KEEP_RECENT_TURNS = 3  # the most recent turns are never collapsed
SPAN_TOKENS = 8_000  # consecutive old turns are grouped into spans up to this size (a bigger turn is alone)
MIN_SPAN_TOKENS = 400  # a smaller span is not worth a side request
EXPECTED_SUMMARY_TOKENS = 200  # what a summary is assumed to cost, when choosing how much to stage
SUMMARY_MAX_TOKENS = 1_000
SUMMARY_CHARS = 4_000  # a longer reply is cut (the placeholder must stay small)
WAIT_SECONDS = 60.0
REQUEST_TIMEOUT = 120.0  # a summary request running longer is abandoned
MAX_FAILURES = 3  # consecutive worker failures before it is no longer started
BLOCK_CHARS = 2_000  # of one tool input / result / text block, in the worker's request
REQUEST_CHARS = 60_000  # of the whole rendered span
PLACEHOLDER_KEY = "collapsedMessages"  # Message.extra marker of a placeholder (never written to disk)

SYSTEM = "You condense parts of a software engineering session into short, exact notes."
INSTRUCTION = """\
Summarise this part of an earlier conversation between a user and a coding assistant. It is being \
taken out of the assistant's working context; your summary stays in its place, so the assistant must be \
able to carry on from it alone.

Write a few dense lines of plain text (well under 200 words, no preamble, no headings). Keep:
- what the user asked for, and any rule or constraint they set;
- files, functions and commands involved, with exact paths and names;
- decisions taken and results obtained (numbers, outcomes, errors and their fixes);
- questions or tasks left open.
Leave out greetings, repetition and anything the assistant will not need again.

The conversation part:
"""


# --- the pure part ----------------------------------------------------------------------------------


def placeholder(collapse: dict[str, Any], timestamp: str = "") -> Message:
    """The message that stands for one committed span in the model's view."""
    n = len(collapse.get("collapsedUuids") or [])
    text = f"[Collapsed: {n} messages] {str(collapse.get('summary') or '').strip() or '(no summary)'}"
    return Message("user", [{"type": "text", "text": text}], kind="meta", uuid=collapse["placeholderUuid"],
                   timestamp=timestamp, extra={PLACEHOLDER_KEY: n})


def is_placeholder(m: Message) -> bool:
    return PLACEHOLDER_KEY in m.extra


def apply_collapses(messages: list[Message], collapses: list[dict[str, Any]]) -> list[Message]:
    """The messages with each committed span replaced by its placeholder, where the span's first
    message was. Never mutates; idempotent (a list holding the placeholder and not the span is left as
    it is). A span none of whose messages are present is skipped; so is one whose present messages
    would leave a tool_use or a tool_result without its partner."""
    if not collapses:
        return list(messages)
    present = {m.uuid for m in messages}
    owner: dict[str, int] = {}
    for i, c in enumerate(collapses):
        for u in c.get("collapsedUuids") or []:
            if u in present:
                owner.setdefault(u, i)
    if not owner:
        return list(messages)
    members: dict[int, list[Message]] = {}
    for m in messages:
        if m.uuid in owner:
            members.setdefault(owner[m.uuid], []).append(m)
    usable = {i for i, ms in members.items() if _pairs_closed(ms)}
    out: list[Message] = []
    placed: set[int] = set()
    for m in messages:
        i = owner.get(m.uuid)
        if i is None or i not in usable:
            out.append(m)
            continue
        if i not in placed:
            placed.add(i)
            if collapses[i]["placeholderUuid"] not in present:
                out.append(placeholder(collapses[i], m.timestamp))
    return out


def _pairs_closed(messages: list[Message]) -> bool:
    """Every tool_use among these messages is answered among them, and every result's call is there."""
    uses = {b.get("id") for m in messages for b in m.tool_uses}
    results = {b.get("tool_use_id") for m in messages for b in m.tool_results}
    return uses == results


def candidate_spans(messages: list[Message], *, keep_turns: int = KEEP_RECENT_TURNS,
                    max_tokens: int = SPAN_TOKENS, exclude: frozenset[str] | set[str] = frozenset()
                    ) -> list[list[Message]]:
    """Spans that may be collapsed, oldest first: contiguous runs of old, completed turns.

    A turn is a typed prompt and what follows it up to the next typed prompt, a summary or a
    placeholder (those, and whatever precedes the first prompt, belong to no turn). The last
    ``keep_turns`` (at least 1) turns are never offered, nor a turn holding a message in ``exclude``
    (already staged) or a tool_use / tool_result whose partner lies outside it. Consecutive turns
    are grouped while the span stays within ``max_tokens``; such a turn, or a gap, ends a span.
    """
    spans_of_turns: list[tuple[int, list[Message]]] = []  # (start index, turn)
    current: list[Message] | None = None
    for i, m in enumerate(messages):
        if m.kind == "summary" or is_placeholder(m):
            current = None
        elif is_typed_prompt(m):
            current = [m]
            spans_of_turns.append((i, current))
        elif current is not None:
            current.append(m)
    old = spans_of_turns[:max(0, len(spans_of_turns) - max(1, keep_turns))]
    spans: list[list[Message]] = []
    span: list[Message] = []
    span_tokens, span_end = 0, -1
    for start, turn in old:
        usable = _pairs_closed(turn) and not any(m.uuid in exclude for m in turn)
        tokens = sum(m.tokens for m in turn)
        if span and (not usable or start != span_end or span_tokens + tokens > max_tokens):
            spans.append(span)
            span, span_tokens = [], 0
        if usable:
            span = span + turn
            span_tokens += tokens
        span_end = start + len(turn)
    if span:
        spans.append(span)
    return spans


def render_span(messages: list[Message]) -> str:
    """The span as plain text for the summariser (long blocks cut; thinking left out)."""
    lines = []
    for m in messages:
        who = "User" if m.is_typed_prompt else "Assistant" if m.role == "assistant" else "Context"
        for b in m.content:
            kind = b.get("type")
            if kind == "text" and b.get("text", "").strip():
                lines.append(f"{who}: {_cut(b['text'])}")
            elif kind == "tool_use":
                args = json.dumps(b.get("input", {}), ensure_ascii=False)
                lines.append(f"Assistant called {b.get('name')}: {_cut(args)}")
            elif kind == "tool_result":
                label = "Tool error" if b.get("is_error") else "Tool result"
                lines.append(f"{label}: {_cut(_result_text(b.get('content'))) or '(empty)'}")
            elif kind in ("image", "document"):
                lines.append(f"{who}: [{kind}]")
    text = "\n".join(lines)
    if len(text) > REQUEST_CHARS:
        half = REQUEST_CHARS // 2
        text = f"{text[:half]}\n[… {len(text) - 2 * half:,} characters left out …]\n{text[-half:]}"
    return text


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for b in content or []:
        if b.get("type") == "text":
            parts.append(b.get("text", ""))
        elif b.get("type") in ("image", "document"):
            parts.append(f"[{b['type']}]")
    return "\n".join(parts)


def _cut(text: str) -> str:
    text = text.strip()
    if len(text) <= BLOCK_CHARS:
        return text
    return f"{text[:BLOCK_CHARS]} […{len(text) - BLOCK_CHARS:,} more characters]"


# --- thresholds -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Levels:
    start: int
    commit: int
    wait: int
    target: int


def levels(th: Thresholds) -> Levels:
    """Token levels for an effective window; the wait level never exceeds the blocking limit."""
    e = th.effective
    wait = min(int(e * WAIT_AT), th.blocking)
    commit = min(int(e * COMMIT_AT), wait)
    return Levels(start=min(int(e * START_AT), commit), commit=commit, wait=wait,
                  target=min(int(e * STAGE_TARGET), commit))


# --- the stateful part ------------------------------------------------------------------------------


@dataclass
class Staged:
    uuids: list[str]
    summary: str


@dataclass(eq=False)
class Collapser:
    """Per-session state: staged summaries, the worker thread, and the usage corrections of commits."""

    session: Session = field(repr=False)
    staged: list[Staged] = field(default_factory=list)
    thread: threading.Thread | None = None
    failures: int = 0
    reported: bool = False
    wait_seconds: float = WAIT_SECONDS
    # uuid of a response -> tokens its usage overstates, because spans were committed after it
    savings: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _copies: dict[str, tuple[Message, int, Message]] = field(default_factory=dict)

    # -- the stage ---------------------------------------------------------------------------------
    def __call__(self, messages: list[Message], ctx: PrepareContext) -> list[Message]:
        session = self.session
        raw = apply_collapses(messages, session.state.collapses)
        if session.compacting:  # a compaction is reading the view: apply what is committed, no more
            return self._corrected(raw)
        lv = levels(session.thresholds())
        if lv.wait <= 0:
            return self._corrected(raw)
        cal = ctx.calibration
        tokens = self._measure(raw, cal)
        if tokens >= lv.commit:
            raw, tokens = self._commit(raw, tokens, lv.commit, cal)
        if tokens >= lv.wait:
            raw, tokens = self._wait(raw, tokens, lv, cal)
        if tokens >= lv.start:
            self.kick(raw, tokens, lv.target, cal)
        return self._corrected(raw)

    def _measure(self, raw: list[Message], cal: Calibration | None) -> int:
        return count_tokens(self._corrected(raw), cal)

    # -- staging -----------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def kick(self, view: list[Message], tokens: int, target: int, cal: Calibration | None = None) -> bool:
        """Start the worker on the oldest spans not yet staged, enough to reach ``target``; True if started."""
        if self.busy or self.failures >= MAX_FAILURES:
            return False
        with self.lock:
            staged_uuids = {u for s in self.staged for u in s.uuids}
        present = {m.uuid: m for m in view}
        staged_tokens = sum(present[u].tokens for u in staged_uuids if u in present)
        need = tokens - target - _scale(staged_tokens, cal)
        if need <= 0:
            return False
        chosen = []
        for span in candidate_spans(view, exclude=staged_uuids):
            span_tokens = sum(m.tokens for m in span)
            if span_tokens < MIN_SPAN_TOKENS:
                continue
            chosen.append(span)
            need -= _scale(span_tokens - EXPECTED_SUMMARY_TOKENS, cal)
            if need <= 0:
                break
        if not chosen:
            return False
        self.thread = threading.Thread(target=self._work, args=(chosen,), name="context-collapse", daemon=True)
        self.thread.start()
        return True

    def _work(self, spans: list[list[Message]]) -> None:
        for span in spans:
            try:
                text = summarise(self.session, span)
            except Exception as e:  # noqa: BLE001 - API errors, timeouts: reported once, never raised
                self.failures += 1
                self._report(e)
                return
            self.failures = 0
            with self.lock:
                self.staged.append(Staged([m.uuid for m in span], text))

    def _report(self, e: BaseException) -> None:
        if self.reported:
            return
        self.reported = True
        reason = str(e).strip() or type(e).__name__
        try:
            self.session.notice(f"Context collapse could not summarise an old part of the conversation: "
                                f"{reason.rstrip('.')}. Later failures are not reported.", "warning")
        except Exception:  # noqa: BLE001 - a broken renderer must not kill the worker thread
            pass

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the worker; True when it is not running any more."""
        thread = self.thread
        if thread is not None:
            thread.join(timeout)
        return not self.busy

    # -- committing --------------------------------------------------------------------------------
    def _commit(self, view: list[Message], tokens: int, until: int, cal: Calibration | None
                ) -> tuple[list[Message], int]:
        """Commit staged spans, oldest first, while the view is at ``until`` or more.

        ``view`` has the committed collapses applied but no usage correction (``_corrected`` does that)."""
        with self.lock:
            staged, self.staged = self.staged, []
        position = {m.uuid: i for i, m in enumerate(view)}
        staged.sort(key=lambda s: min((position.get(u, len(view)) for u in s.uuids), default=len(view)))
        done: list[tuple[int, int]] = []  # (messages, tokens saved) per commit
        keep: list[Staged] = []
        for item in staged:
            if tokens < until:
                keep.append(item)
                continue
            span = [view[position[u]] for u in item.uuids if u in position]
            if len(span) != len(item.uuids) or not _pairs_closed(span):
                continue  # snipped, compacted away or otherwise changed since it was staged
            commit = {"collapsedUuids": list(item.uuids), "summary": item.summary, "placeholderUuid": new_uuid()}
            saved = sum(m.tokens for m in span) - placeholder(commit).tokens
            if saved <= 0:
                continue  # the summary is no smaller than what it would replace
            self.session.record({"type": "collapse-commit", **commit})
            self.session.state.collapses.append(commit)
            for m in view:  # their usage measured the view before this commit
                if m.role == "assistant" and m.usage:
                    self.savings[m.uuid] = self.savings.get(m.uuid, 0) + _scale(saved, cal)
            view = apply_collapses(view, [commit])
            position = {m.uuid: i for i, m in enumerate(view)}
            tokens = self._measure(view, cal)
            done.append((len(span), saved))
        with self.lock:
            self.staged = keep + self.staged
        if done:
            n, saved = sum(d[0] for d in done), sum(d[1] for d in done)
            spans = "an earlier span" if len(done) == 1 else f"{len(done)} earlier spans"
            self.session.notice(f"Collapsed {spans} ({n} messages, ~{_k(saved)} tokens) into short summaries.")
        return view, tokens

    def _wait(self, view: list[Message], tokens: int, lv: Levels, cal: Calibration | None
              ) -> tuple[list[Message], int]:
        """Over the wait level with nothing committable: let the worker finish, then commit."""
        deadline = time.monotonic() + self.wait_seconds
        cancel = self.session.cancel
        said = False
        while tokens >= lv.wait and time.monotonic() < deadline:
            if not self.busy and not self._has_staged() and not self.kick(view, tokens, lv.target, cal):
                break  # nothing left to summarise
            if not said and not self._has_staged():
                said = True  # the user sees why nothing happens for a while
                self.session.notice("The context is nearly full: waiting for older turns to be summarised…")
            while self.busy and not self._has_staged():
                if cancel.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
                    raise Interrupted("interrupted")
                if time.monotonic() >= deadline:
                    break
            if not self._has_staged():
                if self.busy:
                    break  # deadline
                continue  # the worker failed or staged nothing: try once more, or stop
            view, tokens = self._commit(view, tokens, lv.commit, cal)
        return view, tokens

    def _has_staged(self) -> bool:
        with self.lock:
            return bool(self.staged)

    # -- token correction ----------------------------------------------------------------------------
    def _corrected(self, view: list[Message]) -> list[Message]:
        """Copies of responses whose usage predates a commit, with that usage lowered by what it saved."""
        if not self.savings:
            return view
        out = []
        for m in view:
            saved = self.savings.get(m.uuid) if m.usage else None
            if saved:
                hit = self._copies.get(m.uuid)
                if hit is None or hit[0] is not m or hit[1] != saved:
                    hit = (m, saved, m.replace(usage=_lowered(m.usage or {}, saved)))
                    self._copies[m.uuid] = hit
                m = hit[2]
            out.append(m)
        return out


def _lowered(usage: dict[str, Any], tokens: int) -> dict[str, Any]:
    out = dict(usage)
    for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        have = int(out.get(key) or 0)
        take = min(have, tokens)
        if key in out or take:
            out[key] = have - take
        tokens -= take
    return out


def _scale(n: int, cal: Calibration | None) -> int:
    return cal.scale(n) if cal else n


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


# --- the side request -------------------------------------------------------------------------------


def summarise(session: Session, span: list[Message], timeout: float = REQUEST_TIMEOUT) -> str:
    """A few dense lines about ``span``, from the cheap model. Raises on any failure."""
    prompt = INSTRUCTION + render_span(span)
    req = Request(model=session.settings.compaction_model or session.model,
                  system=[{"type": "text", "text": SYSTEM}], tools=[],
                  messages=[{"role": "user", "content": [{"type": "text", "text": prompt}]}],
                  max_tokens=SUMMARY_MAX_TOKENS)
    cancel = threading.Event()
    timer = threading.Timer(timeout, cancel.set)
    timer.daemon = True
    timer.start()
    try:
        reply = session.client.stream(req, cancel=cancel, emit_text=False)
    except Exception as e:
        if cancel.is_set():
            raise CollapseError(f"the summary took longer than {timeout:g} s") from None
        raise e
    finally:
        timer.cancel()
    session.account_side_request(reply)
    text = reply.text.strip()
    if not text:
        raise CollapseError("the summary came back empty")
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS].rstrip() + " …"


# --- wiring -----------------------------------------------------------------------------------------

_create_lock = threading.Lock()


def collapser(session: Session) -> Collapser:
    """The session's collapser, created on first use."""
    with _create_lock:
        c = getattr(session, "_collapser", None)
        if c is None:
            c = Collapser(session)
            session._collapser = c  # type: ignore[attr-defined]
        return c


def stage(session: Session) -> Callable[[list[Message], PrepareContext], list[Message]]:
    """The late pipeline stage for this session (see the module docstring)."""
    return collapser(session)
