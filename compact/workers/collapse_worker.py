"""Context collapse, the stateful half: the background worker, the commits and the usage correction.

``Collapser(conv, ports)`` is the worker of the "collapse" stage (compact.stages.view), made by compact.start
when context collapse is on. At every model call it applies the committed spans (compact.stages.collapse), then
against the effective window E: from 90% E it commits the staged spans, oldest first, in one stroke; from 95% E with
nothing committable it waits for the worker (at most 60 s; Ctrl-C interrupts); from 70% E it starts the
worker on the oldest candidate spans not staged yet. Each commit appends a ``collapse-commit`` record.

Model calls: one side request per staged span (``summarise``: at most 1,000 output tokens; the main
request's system, tools and view plus an instruction naming the span, so it reads the prompt cache — or,
with a compaction model, the span rendered as text); commits cost none. A worker failure is reported once per session;
after 3 failures in a row the worker is no longer started.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from compact.compaction import ledger
from compact.context.conversation import Conversation, Ports
from compact.context.worker import Worker
from compact.decision.tokens import Calibration, count_tokens
from compact.stages import binding
from compact.stages.collapse import (
    Levels,
    _pairs_closed,
    apply_collapses,
    candidate_spans,
    levels,
    placeholder,
    render_span,
)
from compact.stages.snip import is_typed_prompt, tag_prompts
from compact.stages.state import collapse_record
from compact.stages.view import ViewContext
from core.errors import CollapseError, Interrupted, describe
from core.messages import Message, meta, new_uuid, to_api
from core.model import Request, deadline

MIN_SPAN_TOKENS = 400  # a smaller span is not worth a side request
EXPECTED_SUMMARY_TOKENS = 200  # what a summary is assumed to cost, when choosing how much to stage
SUMMARY_MAX_TOKENS = 1_000
SUMMARY_CHARS = 4_000  # a longer reply is cut (the placeholder must stay small)
WAIT_SECONDS = 60.0
REQUEST_TIMEOUT = 120.0  # a summary request running longer is abandoned
MAX_FAILURES = 3  # consecutive worker failures before it is no longer started

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


SHARED_INSTRUCTION = """\
This message comes from the agent, not from the user. Set the task aside for one reply and answer with \
plain text only, no tool calls. One part of the conversation above is being taken out of your working \
context; a summary you write now stays in its place, so you must be able to carry on from it alone.

The part: {span}

Write a few dense lines of plain text about that part only (well under 200 words, no preamble, no \
headings). Keep:
- what the user asked for, and any rule or constraint they set;
- files, functions and commands involved, with exact paths and names;
- decisions taken and results obtained (numbers, outcomes, errors and their fixes);
- questions or tasks left open.
Leave out greetings, repetition and anything you will not need again."""
QUOTE_CHARS = 300  # of a prompt, to name where a span starts and where it ends


def shared_instruction(span: list[Message], view: list[Message]) -> str:
    """The instruction of a span summary sent over the whole view: which turns to summarise."""
    end = next((i for i, m in enumerate(view) if m.uuid == span[-1].uuid), len(view))
    after = next((m for m in view[end + 1 :] if is_typed_prompt(m)), None)
    where = f"from the user message that begins «{_quote(span[0])}»"
    where += (
        f" up to, not including, the user message that begins «{_quote(after)}»."
        if after is not None
        else f", {len(span)} messages in all."
    )
    return SHARED_INSTRUCTION.format(span=where)


def _quote(m: Message) -> str:
    text = " ".join(m.text.split())
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "…"


def collapser(conv: Conversation) -> Collapser | None:
    """The conversation's collapser, when context collapse is on."""
    w = conv.workers.get("collapse")
    return w if isinstance(w, Collapser) else None


@dataclass
class Staged:
    uuids: list[str]
    summary: str


@dataclass(eq=False)
class Collapser(Worker):
    """Per-session state: staged summaries and the usage corrections of commits; its thread (one run of
    span summaries at a time), ``lock`` and the failure said once are compact.context.worker's."""

    thread_name: ClassVar[str] = "context-collapse"

    conv: Conversation = field(repr=False)
    ports: Ports = field(repr=False)
    staged: list[Staged] = field(default_factory=list)
    failures: int = 0
    wait_seconds: float = WAIT_SECONDS
    # uuid of a response -> tokens its usage overstates, because spans were committed after it
    savings: dict[str, int] = field(default_factory=dict)
    _copies: dict[str, tuple[Message, int, Message]] = field(default_factory=dict)

    # -- the stage ---------------------------------------------------------------------------------
    def __call__(self, messages: list[Message], ctx: ViewContext) -> list[Message]:
        conv = self.conv
        raw = apply_collapses(messages, conv.state.collapses)
        if conv.compacting:  # a compaction is reading the view: apply what is committed, no more
            return self._corrected(raw)
        lv = levels(self.conv.window.thresholds())
        if lv.wait <= 0:
            return self._corrected(raw)
        cal = ctx.calibration
        tokens = self._measure(raw, cal)
        if tokens >= lv.commit:  # down to the target at once: one cache rewrite, not one a span
            raw, tokens = self._commit(raw, tokens, lv.target, cal)
        if tokens >= lv.wait:
            raw, tokens = self._wait(raw, tokens, lv, cal)
        if tokens >= lv.start:
            self.kick(raw, tokens, lv.target, cal)
        return self._corrected(raw)

    def _measure(self, raw: list[Message], cal: Calibration | None) -> int:
        return count_tokens(self._corrected(raw), cal)

    # -- staging -----------------------------------------------------------------------------------
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
        return self.start(self._work, chosen, self._as_sent(view))

    def _as_sent(self, view: list[Message]) -> list[Message]:
        """The view as a main request would send it now (compact.stages.binding): the span summary shares the
        main requests' prefix, so the thinking they left out stays out of it too and an edit that waits
        for a tool loop waits here as well (sent as it was, every thinking block in it would be checked
        against a prefix the server never saw, and refused). The decision is the main request's to
        record: this works on a copy of the dropped set."""
        ctx = self.conv.view_ctx
        sent = ctx.sent if ctx is not None else None
        settled = binding.settle(list(view), sent, set(self.conv.state.thinking_dropped)).messages
        # a view built between the model's tool call and its results ends with the call: the span
        # summary is sent without it (a call with no result after it is refused)
        end = len(settled)
        while end and settled[end - 1].role == "assistant" and settled[end - 1].tool_uses:
            end -= 1
        return settled[:end]

    def _work(self, spans: list[list[Message]], view: list[Message] | None = None) -> None:
        for span in spans:
            try:
                text = summarise(self.ports, span, view=view)
            except Exception as e:  # noqa: BLE001 - API errors, timeouts: reported once, never raised
                self.failures += 1
                self._report(e)
                return
            self.failures = 0
            with self.lock:
                self.staged.append(Staged([m.uuid for m in span], text))

    def _report(self, e: BaseException) -> None:
        self.report_once(
            self.ports.notice,
            f"Context collapse could not summarise an old part of the conversation: "
            f"{describe(e).rstrip('.')}. Later failures are not reported.",
        )

    # -- committing --------------------------------------------------------------------------------
    def _commit(
        self, view: list[Message], tokens: int, until: int, cal: Calibration | None
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
            commit = {
                "collapsedUuids": list(item.uuids),
                "summary": item.summary,
                "placeholderUuid": new_uuid(),
            }
            if state := ledger.span_text(span):
                commit["workingState"] = state
            saved = sum(m.tokens for m in span) - placeholder(commit).tokens
            if saved <= 0:
                continue  # the summary is no smaller than what it would replace
            self.conv.record(collapse_record(commit))
            self.conv.state.collapses.append(commit)
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
            self.ports.notice(f"Collapsed {spans} ({n} messages, ~{_k(saved)} tokens) into short summaries.")
        return view, tokens

    def _wait(
        self, view: list[Message], tokens: int, lv: Levels, cal: Calibration | None
    ) -> tuple[list[Message], int]:
        """Over the wait level with nothing committable: let the worker finish, then commit."""
        deadline = time.monotonic() + self.wait_seconds
        cancel = self.conv.cancel
        said = False
        while tokens >= lv.wait and time.monotonic() < deadline:
            if not self.busy and not self._has_staged() and not self.kick(view, tokens, lv.target, cal):
                break  # nothing left to summarise
            if not said and not self._has_staged():
                said = True  # the user sees why nothing happens for a while
                self.ports.notice("The context is nearly full: waiting for older turns to be summarised…")
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

    def can_help(self, view: list[Message]) -> bool:
        """Whether collapsing could bring this view down: a summary is staged or being written, or an old
        span is big enough to be worth one."""
        if self.busy or self._has_staged():
            return True
        return self.failures < MAX_FAILURES and any(
            sum(m.tokens for m in span) >= MIN_SPAN_TOKENS for span in candidate_spans(view)
        )

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


def summarise(
    ports: Ports, span: list[Message], timeout: float = REQUEST_TIMEOUT, view: list[Message] | None = None
) -> str:
    """A few dense lines about ``span``, from the cheap model. Raises on any failure.

    Given the ``view`` the span was chosen from, the request is the main conversation's own (system,
    tools, the view as it is sent) plus one instruction naming the span, so it reads the prompt cache
    the main requests wrote instead of sending the span again uncached."""
    if view is not None and ports.config.compaction_model is None:
        req = ports.request(
            to_api([*tag_prompts(view), meta(shared_instruction(span, view))]), tool_choice={"type": "none"}
        )
        req.max_tokens = min(req.max_tokens, SUMMARY_MAX_TOKENS)
    else:
        prompt = INSTRUCTION + render_span(span)
        messages = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
        main = ports.request(messages, tools=False)
        req = Request(
            model=ports.config.compaction_model or main.model,
            system=[{"type": "text", "text": SYSTEM}],
            tools=[],
            messages=messages,
            max_tokens=SUMMARY_MAX_TOKENS,
        )
    with deadline(timeout) as cancel:
        try:
            reply = ports.model.stream(req, cancel=cancel, emit_text=False)
        except Exception as e:
            if cancel.is_set():
                raise CollapseError(f"the summary took longer than {timeout:g} s") from None
            raise e
    ports.account(reply)
    text = reply.text.strip()
    if not text:
        raise CollapseError("the summary came back empty")
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS].rstrip() + " …"
