"""Compaction from the session notes: no model call, a verbatim tail, the notes in place of the rest.

Triggers  tried first by auto-compact, reactive compaction and ``/compact`` without instructions.
Drops     only messages the last completed notes update covered (compact.context.coverage: by message
          identity; with no marker in the live list the notes cover nothing); the notes (each section
          trimmed to the size the update instruction gave it, notes_template.section_tokens, keeping
          its newest lines) stand in for them.
Keeps     every message after "summarized up to here", extended backwards to ≥10,000 tokens and ≥5
          messages with text, ≤40,000 tokens — a range scaled by T / 167,000 for smaller windows — never past the previous boundary's summary (nor the working state attached after it), never splitting a
          tool_use from its tool_result or the blocks of one streamed response.
Folds     when the uncovered messages don't fit beside the notes (or an earlier summary is uncovered):
          one notes update of just that span (notes_updater.update_span), then plans again; a prompt
          typed after the last reply stays out of it (kept verbatim, it never reaches the notes' text).
Gives up  (None: the caller falls back to the LLM summary) when session memory is off, the notes are
          missing or still the bare template, the fold failed, or notes and tail would take more than
          45% of the threshold (no room left for the restored files). Never drops a message unseen.
Model calls none, unless it folds (one update); it waits (at most 15 s) for an update in flight so the
          notes are current.
"""

from __future__ import annotations

from compact.compaction import economics
from compact.compaction.ledger import SNAPSHOT_KEY
from compact.compaction.notes import headers, is_template, notes_text, template_for, trim_sections
from compact.compaction.notes_template import section_tokens
from compact.compaction.notes_updater import safe_marker, update_span, wait_for_update
from compact.context import coverage
from compact.context.conversation import Conversation, Ports
from compact.context.result import Compaction
from compact.decision.thresholds import window_scale
from compact.stages import micro
from core.messages import Message
from core.tokens import estimate_text

KEEP_MIN_TOKENS = 10_000  # the tail's range at the 200K reference window, scaled by thresholds.window_scale
KEEP_MIN_TEXT_MESSAGES = 5
KEEP_MAX_TOKENS = 40_000
RESULT_SHARE = (
    0.35  # notes + tail (+ system and tools) at most this share of T: room for the ledger and restored files
)
COMPACT_WAIT = 15.0  # seconds a compaction waits for an update in flight
METHOD = "session-memory"


def compact_with_notes(conv: Conversation, ports: Ports, trigger: str) -> Compaction | None:
    """A compaction that keeps a recent tail verbatim and puts the notes before it; None to fall back.

    Waits (at most 15 s) for an update in flight first; see ``plan`` for the rest. No model call; the
    compactor writes the boundary and swaps the list.
    """
    if not ports.config.notes_enabled:
        return None
    wait_for_update(conv, COMPACT_WAIT)
    made = plan(conv, ports)
    if made is not None or not _usable(conv, ports):
        return made
    # what the notes don't cover does not fit beside them: fold just that span into the notes (one
    # update), then plan again; if the update fails, the caller summarizes — never a silent drop
    with conv.lock:
        messages = list(conv.messages)
    first = coverage.covered_count(messages, conv.state.last_summarized_uuid)
    end = fold_end(messages, first)
    if not (_worth_folding(messages[:end], first, conv) and could_serve(conv, ports)):
        return None  # even current notes would not make a compaction that fits: summarize, no fold
    if not update_span(conv, ports, messages[first:end]):
        return None
    return plan(conv, ports)


def fold_end(messages: list[Message], first: int) -> int:
    """Where a fold's span ends: before the prompts typed after the last reply (the current request),
    which every kept tail holds verbatim. Notes that saw the current request would carry it in the
    summary, and a /rewind to it (agent.runtime.rewind) would leave it there."""
    end = len(messages)
    while end > first and messages[end - 1].is_typed_prompt:
        end -= 1
    return end


def _worth_folding(messages: list[Message], first: int, conv: Conversation) -> bool:
    """Folding helps when an earlier summary is uncovered, or when the uncovered span is more than the
    tail a compaction keeps anyway (a fold then lets the tail shrink to its minimum)."""
    if first < summary_floor(messages):
        return True
    scale = window_scale(conv.window.thresholds().auto_compact)
    return sum(m.tokens for m in messages[first:]) > KEEP_MIN_TOKENS * scale


def _usable(conv: Conversation, ports: Ports) -> bool:
    text = notes_text(conv.notes_path)
    return text is not None and not is_template(text, template_for(ports))


def bare(conv: Conversation, ports: Ports) -> Compaction | None:
    """A notes compaction that keeps only what the notes don't cover — a typed prompt after a finished turn
    — when none of it holds thinking: on a model that keeps its thinking, a compaction at a turn boundary
    with no call and no kept thinking to invalidate (compact.compaction.economics). None when the notes are not
    current up to the prompt, or what follows them holds thinking or anything but prompts."""
    if not ports.config.notes_enabled:
        return None
    text = notes_text(conv.notes_path)
    if text is None or is_template(text, template_for(ports)):
        return None
    with conv.lock:
        messages = list(conv.messages)
    covered = coverage.covered_count(messages, conv.state.last_summarized_uuid)
    kept = messages[covered:]
    if not covered or covered < summary_floor(messages) or not kept:
        return None
    if not all(m.is_typed_prompt for m in kept) or messages[covered - 1].role != "assistant":
        return None
    summary = trim_sections(
        text,
        headers(template_for(ports)),
        conv.notes_path,
        section_tokens(conv.window.thresholds().auto_compact),
    ).strip()
    segment = {"headUuid": kept[0].uuid, "anchorUuid": "", "tailUuid": kept[-1].uuid}
    return Compaction(
        method=METHOD,
        summary=summary,
        kept=kept,
        preserved_segment=segment,
        seen_through=messages[covered - 1].uuid,
    )


def plan(conv: Conversation, ports: Ports, share: float | None = None) -> Compaction | None:
    """The notes compaction the notes as they are now allow; None when session memory is off, there are
    no notes or only the bare template, or notes and tail would not leave room for the restored files.
    ``share``: a compaction prepared ahead (compact.workers.preparer) allows a longer tail, this share of T,
    counted as the compactor leaves it (``tail_tokens``)."""
    if not ports.config.notes_enabled:
        return None
    text = notes_text(conv.notes_path)
    if text is None or is_template(text, template_for(ports)):
        return None
    with conv.lock:
        messages = list(conv.messages)
    return _compaction(conv, ports, text, messages, conv.state.last_summarized_uuid, share)


def _compaction(
    conv: Conversation,
    ports: Ports,
    text: str,
    messages: list[Message],
    marker: str | None,
    share: float | None = None,
) -> Compaction | None:
    threshold = conv.window.thresholds().auto_compact
    scale = window_scale(threshold)
    # each section within the size the update instruction gave it, its newest lines kept
    summary = trim_sections(
        text, headers(template_for(ports)), conv.notes_path, section_tokens(threshold)
    ).strip()
    cal = conv.calibration
    # the tail extends backwards only as far as the room beside the notes allows (what the notes don't
    # cover is kept whatever its size, and checked below)
    room = int(threshold * RESULT_SHARE / cal.ratio) - cal.fixed_tokens() - estimate_text(summary)
    start = tail_start(messages, marker, scale, room)
    if not start:
        return None  # an earlier summary the notes never saw, or nothing they cover: fold first
    kept = messages[start:]
    if cal.scale(
        cal.fixed_tokens() + estimate_text(summary) + _tail_size(kept, conv, ports, share)
    ) > threshold * (share or RESULT_SHARE):
        return None  # it would leave no room for the restored files (or not free enough): summarize instead
    segment = {"headUuid": kept[0].uuid, "anchorUuid": "", "tailUuid": kept[-1].uuid} if kept else None
    return Compaction(
        method=METHOD, summary=summary, kept=kept, preserved_segment=segment, seen_through=marker
    )


def _tail_size(kept: list[Message], conv: Conversation, ports: Ports, prepared: float | None) -> int:
    return tail_tokens(kept, conv, ports) if prepared else sum(m.tokens for m in kept)


def tail_tokens(kept: list[Message], conv: Conversation, ports: Ports) -> int:
    """The kept tail's size as the compactor leaves it: it clears the tail's old tool results in the same
    stroke (microcompact's rule, compact.compaction.compactor), so a long tool run kept verbatim costs its recent
    results only. A tail started early (a compaction prepared ahead, compact.workers.preparer) fits the same."""
    c = ports.config
    if not c.microcompact or c.disable_compact:
        return sum(m.tokens for m in kept)
    with conv.lock:
        messages = list(conv.messages)
    unseen = coverage.unseen_results(
        messages, coverage.covered_count(messages, conv.state.last_summarized_uuid)
    )
    th = conv.window.thresholds().auto_compact
    keep = 1 if lean_tail(conv, ports, "auto") else c.keep_recent
    return micro.size_after(
        kept, micro.in_tail(kept, conv.state, keep, th, ratio=conv.calibration.ratio, unseen=unseen)
    )


def lean_tail(conv: Conversation, ports: Ports, trigger: str) -> bool:
    """Whether this automatic, cost-aware compaction keeps, of the results its notes or summary saw, only
    the newest (what they did not see stays whole whatever happens): when the session has not gone back
    to the seen results the last compaction kept (compact.compaction.economics ``tail_unused``)."""
    c = ports.config
    return trigger == "auto" and c.cost_aware and c.auto_enabled and economics.tail_unused(conv)


def leaves(conv: Conversation, ports: Ports, made: Compaction) -> int:
    """What a notes compaction leaves, as the server counts: the system prompt and tools, the notes and
    the kept tail as the compactor leaves it (its results no notes update saw stay whole)."""
    cal = conv.calibration
    return cal.scale(cal.fixed_tokens() + estimate_text(made.summary) + tail_tokens(made.kept, conv, ports))


def could_serve(conv: Conversation, ports: Ports) -> bool:
    """Whether the notes, brought up to date now, would make a notes compaction that fits (the notes as
    they stand, the tail a compaction would keep, the system prompt and tools: within RESULT_SHARE of
    T). When not, an update — in the background or a fold — would be paid for and never used: the
    summary runs instead. True while the conversation is still shorter than that tail."""
    with conv.lock:
        messages = list(conv.messages)
    last = safe_marker(messages)
    if last is None or not tail_start(messages, last, window_scale(conv.window.thresholds().auto_compact)):
        return True
    text = notes_text(conv.notes_path) or template_for(ports)
    return _compaction(conv, ports, text, messages, last) is not None


def tail_start(
    messages: list[Message], marker: str | None, scale: float = 1.0, room: int | None = None
) -> int | None:
    """Where a notes compaction's verbatim tail starts in ``messages`` (the notes stand for everything
    before it); None when the notes don't cover an earlier compaction summary, which the tail may never
    include. Every message before the start is covered (``coverage.uncovered_before`` is empty)."""
    covered = coverage.covered_count(messages, marker)
    if covered < summary_floor(messages):
        return None
    return kept_start(
        messages,
        covered,
        min_tokens=int(KEEP_MIN_TOKENS * scale),
        max_tokens=int(KEEP_MAX_TOKENS * scale) if room is None else min(int(KEEP_MAX_TOKENS * scale), room),
    )


def kept_start(
    messages: list[Message],
    first_uncovered: int,
    *,
    min_tokens: int = KEEP_MIN_TOKENS,
    min_text: int = KEEP_MIN_TEXT_MESSAGES,
    max_tokens: int = KEEP_MAX_TOKENS,
) -> int:
    """Index of the first message kept verbatim (see the module docstring for the rules).

    Everything from ``first_uncovered`` on is kept whatever its size (the notes don't cover it). Going
    backwards from there, whole units are added (a cut never lands on a tool_results message or inside
    one streamed response) until both minimums are met; a unit that would pass ``max_tokens`` is not
    added; a previous compaction's summary is never crossed, nor, going backwards, the working state
    attached after it (it marked the request of its time current; the new one supersedes it).
    """
    floor = summary_floor(messages)
    start = _safe_cut(messages, min(max(first_uncovered, floor), len(messages)), floor)
    floor = max(floor, min(start, state_floor(messages)))
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


def summary_floor(messages: list[Message]) -> int:
    """Index just past the last compaction summary in ``messages`` (0 without one): a kept tail never
    starts before it."""
    return max((i + 1 for i, m in enumerate(messages) if m.kind == "summary"), default=0)


def state_floor(messages: list[Message]) -> int:
    """Index just past the last working state a compaction attached (0 without one)."""
    return max((i + 1 for i, m in enumerate(messages) if SNAPSHOT_KEY in m.extra), default=0)


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
    same_response = (
        m.role == "assistant"
        and prev is not None
        and prev.role == "assistant"
        and m.message_id is not None
        and m.message_id == prev.message_id
    )
    return not same_response


def _has_text(m: Message) -> bool:
    return any(b.get("type") == "text" and b.get("text", "").strip() for b in m.content)
