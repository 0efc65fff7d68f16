"""Context collapse: old spans of the conversation archived behind short summaries (docs/compaction.md, opt-in).

Triggers  ``CLAUDE_CONTEXT_COLLAPSE=1`` (compact.start makes the worker, compact.workers.collapse_worker, of the
          view's "collapse" stage, and proactive auto-compact is off). Against the effective window E, at every model call:
            ≥ 70% E   a background worker summarises candidate spans and *stages* them (in memory);
            ≥ 90% E   staged spans are *committed*, oldest first, all in one stroke down to the
                      staging target (60% E): each commit rewrites the cached prefix after it, so
                      one commit of several spans costs a cache write where one a span cost several;
            ≥ 95% E   (or the blocking limit, if lower) and nothing committable: the call waits for the
                      worker (at most 60 s; Ctrl-C interrupts) instead of sending a request that is too big.
          The commit level is never above the auto-compact threshold T (at small windows 90% E is the
          blocking limit itself); start and target then keep their distance below it (``levels``). Over T
          with nothing collapse could take, compact.request_cycle compacts (compact.autocompact.due).
Drops     from the model's view only: each committed span — a contiguous run of old, completed user turns
          (a typed prompt and everything up to the next one), never one of the last 3 turns, never a
          turn that leaves a tool_use or a tool_result without its partner, never a summary or a
          placeholder — becomes one user meta message "[Collapsed: N messages] <summary>".
Keeps     the live list and the transcript untouched; every message after and between the spans.
Writes    nothing to disk before committing; a commit appends a ``collapse-commit`` transcript record
          (span uuids, summary, placeholder uuid) and joins ``ContextState.collapses``; the loader
          replays those records on resume, so the resumed view is the same.
Model calls one side request per staged span (≤ 1,000 output tokens): the main conversation's request
          (system, tools, the view) plus an instruction naming the span, so it reads the prompt cache;
          with a ``compaction_model`` the span alone, rendered as text. Committing costs none.

This module is the pure half: ``apply_collapses(messages, collapses)``, which spans may go, how a span
is shown to the summariser, and the token levels. ``compact.workers.collapse_worker.Collapser`` adds the
thresholds, the background worker and the commits. Spans are staged only until what is staged would bring the view down to 60% E,
so the number of side requests stays proportional to the overflow. A worker failure is reported once
per session and never breaks the turn; after 3 failures in a row the worker is no longer started.

Token count after a commit: the API usage on earlier responses measured the view before the commit, so
the stage hands on copies of those responses whose usage is lowered by the tokens the commit saved
(estimated, calibrated). The next response's usage measures the collapsed view and takes over. After a
resume that adjustment is not known (the last response normally postdates the last commit anyway).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from compact.decision.thresholds import Thresholds
from compact.stages.refused import result_text
from compact.stages.snip import is_typed_prompt
from core.messages import Message

START_AT = 0.70  # of the effective window: start summarising spans in the background
COMMIT_AT = 0.90  # commit staged spans until under this
WAIT_AT = 0.95  # nothing committable: wait for the worker instead of sending
STAGE_TARGET = 0.60  # the worker stages spans until committing them all would get the view down to this
KEEP_RECENT_TURNS = 3  # the most recent turns are never collapsed
SPAN_TOKENS = 8_000  # consecutive old turns are grouped into spans up to this size (a bigger turn is alone)
BLOCK_CHARS = 2_000  # of one tool input / result / text block, in the worker's request
REQUEST_CHARS = 60_000  # of the whole rendered span
PLACEHOLDER_KEY = "collapsedMessages"  # Message.extra marker of a placeholder (never written to disk)

# --- the pure part ----------------------------------------------------------------------------------


def placeholder(collapse: dict[str, Any], timestamp: str = "") -> Message:
    """The message that stands for one committed span in the model's view."""
    n = len(collapse.get("collapsedUuids") or [])
    text = f"[Collapsed: {n} messages] {str(collapse.get('summary') or '').strip() or '(no summary)'}"
    if collapse.get(
        "workingState"
    ):  # what the span did, from its tool calls (compact.compaction.ledger.span_text)
        text += "\n\n" + str(collapse["workingState"])
    return Message(
        "user",
        [{"type": "text", "text": text}],
        kind="meta",
        uuid=collapse["placeholderUuid"],
        timestamp=timestamp,
        extra={PLACEHOLDER_KEY: n},
    )


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
        owned = owner.get(m.uuid)
        if owned is None or owned not in usable:
            out.append(m)
            continue
        if owned not in placed:
            placed.add(owned)
            if collapses[owned]["placeholderUuid"] not in present:
                out.append(placeholder(collapses[owned], m.timestamp))
    return out


def _pairs_closed(messages: list[Message]) -> bool:
    """Every tool_use among these messages is answered among them, and every result's call is there."""
    uses = {b.get("id") for m in messages for b in m.tool_uses}
    results = {b.get("tool_use_id") for m in messages for b in m.tool_results}
    return uses == results


def candidate_spans(
    messages: list[Message],
    *,
    keep_turns: int = KEEP_RECENT_TURNS,
    max_tokens: int = SPAN_TOKENS,
    exclude: frozenset[str] | set[str] = frozenset(),
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
    old = spans_of_turns[: max(0, len(spans_of_turns) - max(1, keep_turns))]
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
                lines.append(f"{label}: {_cut(result_text(b.get('content'))) or '(empty)'}")
            elif kind in ("image", "document"):
                lines.append(f"{who}: [{kind}]")
    text = "\n".join(lines)
    if len(text) > REQUEST_CHARS:
        half = REQUEST_CHARS // 2
        text = f"{text[:half]}\n[… {len(text) - 2 * half:,} characters left out …]\n{text[-half:]}"
    return text


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
    """Token levels for an effective window; the wait level never exceeds the blocking limit, and the
    commit level never exceeds the auto-compact threshold T: a view kept above T costs more on every
    request than a compaction at T would (at small windows 90% E reaches the blocking limit itself).
    The start and target levels keep their distance below the commit level."""
    e = th.effective
    wait = min(int(e * WAIT_AT), th.blocking)
    commit = min(int(e * COMMIT_AT), th.auto_compact, wait)
    start = min(int(e * START_AT), commit - round(e * (COMMIT_AT - START_AT)))
    return Levels(
        start=max(0, start),
        commit=commit,
        wait=wait,
        target=max(0, min(int(e * STAGE_TARGET), commit - round(e * (COMMIT_AT - STAGE_TARGET)))),
    )
