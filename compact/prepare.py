"""Everything that happens to the conversation around a model request, in order (SPEC §0).

``prepare_request`` runs before every model call of the main conversation (tool loops included);
``send`` makes the call and recovers from a prompt that is still too long::

    live messages after the last compaction boundary
          │
          ▼
    tool-result budget  (compact.budget)         large results → file on disk + preview       no model call
          │
          ▼
    snip                (compact.snip)           drop the turns the model snipped             no model call
          │
          ▼
    microcompact        (compact.micro)          cache cold → clear old tool outputs          no model call
          │
          ▼
    context collapse    (compact.collapse_worker) opt-in: old spans → short summaries         worker's side requests
          │                                       (the four above are compact.pipeline: the model's view)
          ▼
    auto-compact        (compact.autocompact)    at T: notes first, else the LLM summary      0 or 1 (+PTL retries)
          │              collapse on and at the blocking limit, or over T with nothing to collapse: compact
          ▼
    snip nudge          (compact.snip)           a reminder once the context grew ~10k        no model call
          │
          ▼
    token state         → TokenState event (the warning bar); at the blocking limit B: ContextLimitReached
          │
          ▼
    send                the request; prompt too long → reactive compaction once per turn, then again;
          │             max_tokens overflow → once more with a smaller max_tokens; the reply's usage
          │             calibrates the estimate (the server's count of the whole request against ours)
          ▼
    after_response      from the preparation level P < T: the next compaction prepared in the background
                        (compact.preparer: a notes update, or a summary when notes are off or unusable);
                        session notes kept current (compact.notes_updater), unless a compaction is due
                        next and the notes as they are already serve it

Every stage before auto-compact is a function from messages to messages that never mutates its input
and never separates a tool_use from its tool_result. ``wire`` gives a conversation its pipeline context
and workers once, at start-up.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Callable

from compact import (
    autocompact,
    compactor,
    context_editing,
    notes_compaction,
    notes_updater,
    preparer,
    snip,
    thresholds,
)
from compact.collapse_worker import Collapser
from compact.conversation import Conversation, Ports
from compact.notes_updater import NotesWorker
from compact.pipeline import PrepareContext, Prepared
from compact.state import context_edit_record
from core.errors import CONTEXT_LIMIT, ContextLimitReached, MaxTokensOverflow, PromptTooLong
from core.events import MessageRecorded, TokenState
from core.messages import Message
from core.model import Request
from core.tokens import estimate_text, usage_total

NEAR_FULL = "The context is nearly full; the next request will compact or stop."


def wire(conv: Conversation, ports: Ports, *, clock: Callable[[], datetime] | None = None) -> Conversation:
    """Give the conversation its pipeline context and workers for these ports (once, at start-up)."""
    c = ports.config
    conv.notes = conv.notes or NotesWorker()
    late: list[Any] = []
    if c.context_collapse and not c.disable_compact:
        conv.collapser = conv.collapser or Collapser(conv, ports)
        late.append(conv.collapser)
    conv.pipeline = PrepareContext(
        state=conv.state,
        results_dir=conv.results_dir,
        microcompact_enabled=c.microcompact and not c.disable_compact,
        gap_minutes=c.gap_minutes,
        keep_recent=c.keep_recent,
        record=conv.record,
        late_stages=late,
        calibration=conv.calibration,
    )
    if clock is not None:
        conv.pipeline.now = clock
    # counted on first need, not here: the tokenizer takes ~0.2 s to load, and start-up must not wait
    conv.calibration.overhead_source = lambda: overhead_tokens(ports.request([]))
    return conv


def prepare_request(conv: Conversation, ports: Ports) -> Prepared:
    """The view to send next, after whatever compaction it needs; ContextLimitReached at the blocking limit."""
    current = conv.view()
    if autocompact.maybe_autocompact(conv, ports, current.tokens):
        current = conv.view()
    elif _collapse_cannot_help(conv, ports, current) and compactor.compact(conv, ports, "auto"):
        current = conv.view()
    if maybe_nudge(conv, ports, current.tokens):
        current = conv.view()
    state = token_state(ports, current.tokens)
    ports.emit(state)
    if state.blocking:
        raise ContextLimitReached(CONTEXT_LIMIT)
    return current


def token_state(ports: Ports, tokens: int) -> TokenState:
    """The warning bar's numbers for a count of ``tokens``."""
    th = ports.thresholds()
    lv = thresholds.level(tokens, th)
    return TokenState(
        tokens=tokens,
        window=th.window,
        threshold=th.auto_compact,
        warning=lv.warning,
        error=lv.error,
        blocking=lv.blocking,
        percent_left=lv.percent_left,
        auto_compact=th.auto_enabled,
    )


def _collapse_cannot_help(conv: Conversation, ports: Ports, current: Prepared) -> bool:
    """Collapse is on (so auto-compact is off) and the view still reaches the blocking limit — or it is
    over the auto-compact threshold T with nothing collapse could take (one long turn has no old spans):
    compacting at T then beats carrying a view over T up to the blocking limit (benchmarks/cost.py)."""
    c = ports.config
    if not c.context_collapse or c.disable_compact:
        return False
    th = ports.thresholds()
    if thresholds.level(current.tokens, th).blocking:
        return True
    collapser = conv.collapser
    if current.tokens < th.auto_compact or collapser is None or collapser.can_help(current.messages):
        return False
    return conv.compact_failures < autocompact.MAX_FAILURES and not compactor.nothing_new_since_compaction(
        conv
    )


def maybe_nudge(conv: Conversation, ports: Ports, tokens: int) -> bool:
    """Remind the model, now and then, that old turns can be snipped (SPEC §3); True if it did."""
    if ports.config.disable_compact or not snip.nudge_needed(tokens, conv.state):
        return False
    conv.state.tokens_at_last_nudge = tokens
    message = snip.nudge_message()
    conv.append(message)
    ports.emit(MessageRecorded(message))
    return True


def after_response(conv: Conversation, ports: Ports) -> None:
    """After each main response: prepare the next compaction in the background from the preparation
    level on (compact.preparer), and keep the session notes current — unless this cycle's candidate
    already owns them, or a compaction is due at the next request and can use the notes as they are,
    which would throw the update away."""
    tokens = conv.view().tokens
    if preparer.after_response(conv, ports, tokens):
        return
    if ports.config.auto_enabled and not conv.compacting:
        due = tokens >= ports.thresholds().auto_compact
        if due and notes_compaction.plan(conv, ports) is not None:
            return
    notes_updater.after_response(conv, ports)


# --- the call ----------------------------------------------------------------------------------------


def request_for(ports: Ports, current: Prepared) -> Request:
    """The main request for a view (server-side context editing parameters included when configured)."""
    extra, betas = context_editing.request_params(ports.config.context_editing, thinking_enabled=False)
    return ports.request(current.api, extra_body=extra, betas=betas)


def send(conv: Conversation, ports: Ports, current: Prepared) -> Message:
    """Send the view; on prompt-too-long compact once per turn and retry (SPEC §10)."""
    req = request_for(ports, current)
    shrunk = False
    while True:
        try:
            reply = ports.model.stream(req, cancel=conv.cancel)
        except MaxTokensOverflow as e:
            if shrunk:
                raise
            req.max_tokens, shrunk = e.smaller_max_tokens(), True
            continue
        except PromptTooLong as e:
            if not reactive_compact(conv, ports, e):
                raise ContextLimitReached(CONTEXT_LIMIT) from None
            current = conv.view()  # what is sent now, and what the reply's usage measures
            req = request_for(ports, current)
            continue
        after_reply(conv, ports, current, reply, req)
        return reply


def reactive_compact(conv: Conversation, ports: Ports, error: PromptTooLong) -> bool:
    """Compact once per turn after a prompt-too-long answer (also with auto-compact off)."""
    if ports.config.disable_compact or conv.reactive_compacted:
        return False
    conv.reactive_compacted = True
    if error.maximum and error.maximum < ports.thresholds().window:
        conv.window_limit = error.maximum  # the server told us its real limit
    return compactor.compact(conv, ports, "auto", reactive=True)


def after_reply(conv: Conversation, ports: Ports, current: Prepared, reply: Message, req: Request) -> None:
    """Learn from the reply's usage (calibration), record applied context edits, warn when nearly full."""
    usage = reply.usage or {}
    real = usage_total({**usage, "output_tokens": 0})
    fixed = overhead_tokens(req)  # the system prompt and tools as last sent: counted once a request
    conv.calibration.overhead = fixed
    if real:  # keep the estimate honest: the server's count of this whole request against ours
        conv.calibration.observe(real, fixed + sum(m.tokens for m in current.tagged))
    applied = context_editing.applied_edits({"context_management": reply.extra.get("contextManagement")})
    if applied:
        conv.record(context_edit_record(applied))
    if thresholds.level(real, ports.thresholds()).blocking:
        ports.notice(NEAR_FULL, "warning")


_overhead: dict[str, int] = {}


def overhead_tokens(req: Request) -> int:
    """Estimated tokens of a request's system prompt and tool definitions (the last answer is kept)."""
    key = json.dumps([req.system, req.tools], sort_keys=True)
    if key not in _overhead:
        _overhead.clear()
        _overhead[key] = estimate_text(key)
    return _overhead[key]
