"""The two context steps of the loop: build the model's view before a call, and make the call.

``prepare_context`` runs the pipeline (compact.pipeline.prepare: budget → snip → microcompact →
collapse), then auto-compact when the view is over the threshold, then the blocking check.
``call_model`` sends the view; on prompt-too-long it compacts once per turn and retries (reactive
compaction, SPEC §10); on a max_tokens overflow it retries with a smaller max_tokens.
"""

from __future__ import annotations

from typing import Any

from agent.session import Session
from compact import autocompact, compactor, context_editing, snip, thresholds
from compact.pipeline import PrepareContext, Prepared, prepare
from core.errors import CONTEXT_LIMIT, ContextLimitReached, MaxTokensOverflow, PromptTooLong
from core.messages import Message


def pipeline_context(session: Session) -> PrepareContext:
    ctx = getattr(session, "_prepare_ctx", None)
    if ctx is None:
        s = session.settings
        ctx = PrepareContext(state=session.state, results_dir=session.results_dir, now=session.clock,
                             microcompact_enabled=s.microcompact and not s.disable_compact,
                             gap_minutes=s.microcompact_gap_minutes, keep_recent=s.microcompact_keep,
                             record=session.record, late_stages=_late_stages(session),
                             calibration=session.calibration)
        session._prepare_ctx = ctx  # type: ignore[attr-defined]
    return ctx


def _late_stages(session: Session) -> list[Any]:
    if not session.settings.context_collapse or session.settings.disable_compact:
        return []
    from compact import collapse

    return [collapse.stage(session)]


def view(session: Session) -> Prepared:
    """The model's view of the conversation right now (no compaction, no side effects beyond the stages')."""
    return prepare(session.messages, pipeline_context(session))


def prepare_context(session: Session) -> Prepared:
    current = view(session)
    if autocompact.maybe_autocompact(session, current.tokens):
        current = view(session)
    elif _collapse_cannot_help(session, current.tokens) and compactor.compact(session, "auto"):
        current = view(session)
    if maybe_nudge(session, current.tokens):
        current = view(session)
    state = session.token_state(current.tokens)
    session.emit(state)
    if state.blocking:
        raise ContextLimitReached(CONTEXT_LIMIT)
    return current


def _collapse_cannot_help(session: Session, tokens: int) -> bool:
    """Collapse is on (so auto-compact is off) and the view still reaches the blocking limit: one long
    turn has no old spans to collapse, and compacting beats stopping."""
    s = session.settings
    return s.context_collapse and not s.disable_compact and session.token_state(tokens).blocking


def maybe_nudge(session: Session, tokens: int) -> bool:
    """Remind the model, now and then, that old turns can be snipped (SPEC §3); True if it did."""
    if session.settings.disable_compact or not snip.nudge_needed(tokens, session.state):
        return False
    session.state.tokens_at_last_nudge = tokens
    session.add(snip.nudge_message())
    return True


def request_for(session: Session, current: Prepared) -> Any:
    extra, betas = context_editing.request_params(_editing_config(session), thinking_enabled=False)
    return session.request(current.api, extra_body=extra, betas=betas)


def _editing_config(session: Session) -> dict[str, Any] | None:
    c = session.settings.context_editing
    if not c:
        return None
    return {"triggerTokens": c.get("trigger_tokens"), "keepToolUses": c.get("keep_tool_uses"),
            "clearAtLeastTokens": c.get("clear_at_least_tokens"), "clearThinking": c.get("clear_thinking")}


def call_model(session: Session, current: Prepared) -> Message:
    req = request_for(session, current)
    shrunk = False
    while True:
        try:
            reply = session.client.stream(req, cancel=session.cancel)
        except MaxTokensOverflow as e:
            if shrunk:
                raise
            req.max_tokens, shrunk = e.smaller_max_tokens(), True
            continue
        except PromptTooLong as e:
            if not _reactive_compact(session, e):
                raise ContextLimitReached(CONTEXT_LIMIT) from None
            current = view(session)  # what is sent now, and what the reply's usage measures
            req = request_for(session, current)
            continue
        _after_reply(session, current, reply)
        return reply


def _reactive_compact(session: Session, error: PromptTooLong) -> bool:
    if session.settings.disable_compact or session.reactive_compacted:
        return False
    session.reactive_compacted = True
    if error.maximum and error.maximum < session.window:
        session._window = error.maximum  # the server told us its real limit
    return compactor.compact(session, "auto", reactive=True)


def _after_reply(session: Session, current: Prepared, reply: Message) -> None:
    usage = reply.usage or {}
    real = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                  "cache_read_input_tokens"))
    if real:  # keep the estimate honest: compare it with what the API counted for the same messages
        session.calibration.observe(max(1, real - session.overhead_tokens()),
                                    max(1, sum(m.tokens for m in current.messages)))
    applied = context_editing.applied_edits({"context_management": reply.extra.get("contextManagement")})
    if applied:
        session.record({"type": "context-edit", "applied": applied})
    th = session.thresholds()
    if thresholds.level(real, th).blocking:
        session.notice("The context is nearly full; the next request will compact or stop.", "warning")
