"""The query loop: ready the context → call the model → run tools → record, until the model ends its turn.

Everything else (compaction, retries, permissions, rendering) lives in the named steps it calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from agent.memory.harvest import explicit as remembers
from agent.runtime import context_updates, mentions, paste
from agent.runtime.session import Session
from agent.runtime.tool_exec import (
    Declined,
    HookStopped,
    answer_open_calls,
    for_history,
    record_interruption,
    run_tools,
)
from compact.request_cycle import after_response, before_request, send
from core.errors import AgentError, ContextLimitReached, Interrupted, ModelError
from core.events import TurnFinished
from core.messages import Message, meta, user_prompt

MAX_STOP_BLOCKS = 8  # Stop hook blocks in one turn before it ends regardless
NOT_RUN_FAILED = "Not run: the agent failed before this tool call could run"


def run_turn(session: Session, text: str, *, max_turns: int | None = None) -> TurnFinished:
    session.conv.cancel.clear()
    # a call a failure left unanswered would make every later request invalid: answer it first
    answer_open_calls(session, NOT_RUN_FAILED)
    blocked = submit_prompt(session, text)
    if blocked:
        return finish(session, "error", "", blocked)
    said = _Said()
    try:
        return _requests(session, said, max_turns)
    except Declined:  # the user said no to a tool call: the next step is theirs
        return finish(session, "declined", said.text)
    except HookStopped as e:  # a hook's {"continue": false}: its stopReason is for the user
        return finish(session, "hook_stopped", said.text, f"Stopped by a hook: {e}")
    except Interrupted as e:
        if e.usage:  # the reply cut short was billed for what it had read and written
            session.account_unrecorded(session.model, e.usage)
        record_interruption(session)
        return finish(session, "interrupted", said.text, "Interrupted by user")
    except ContextLimitReached as e:
        return finish(session, "context_limit", said.text, _limit_said(session, e))
    except ModelError as e:
        return finish(session, "error", said.text, str(e))
    except AgentError:
        raise  # one clear line where the front end reports it (a transcript that can't be written)
    except Exception as e:  # noqa: BLE001 - a bug must not leave a call unanswered (every request would fail)
        answer_open_calls(session, f"{NOT_RUN_FAILED} ({type(e).__name__})")
        return finish(session, "error", said.text, f"internal error: {type(e).__name__}: {e}")


@dataclass
class _Said:
    """The text of the turn's latest reply (what the turn ends with, however it ends)."""

    text: str = ""


def _requests(session: Session, said: _Said, max_turns: int | None) -> TurnFinished:
    """Request, record the reply, run its tool calls; until the model ends its turn (and no Stop hook keeps
    it going) or ``max_turns`` replies came."""
    calls, stop_blocks = 0, 0
    while True:
        reply = _ask(session)
        session.add(_kept(session, reply))
        after_response(session.conv, session.ports)
        calls, said.text = calls + 1, reply.text
        if reply.tool_uses:
            session.add(run_tools(session, reply.tool_uses))
        elif stop_hook_blocks(session, stop_blocks):
            stop_blocks += 1
        else:
            return finish(session, "end_turn", said.text)
        if max_turns and calls >= max_turns:
            return finish(session, "max_turns", said.text, f"Reached the maximum of {max_turns} turns")


def _ask(session: Session) -> Message:
    """One request; sent again on the fallback model when the model is overloaded and there is one."""
    conv, ports = session.conv, session.ports
    while True:
        context_updates.refresh(session)  # a changed CLAUDE.md or date, appended (fixed system prompt)
        view = before_request(conv, ports)
        asked = time.monotonic()
        try:
            reply = send(conv, ports, view)
        except ModelError as e:
            session.api_seconds += time.monotonic() - asked
            if not session.fall_back(e):
                raise
            continue  # the same request again, on the fallback model
        session.api_seconds += time.monotonic() - asked
        return reply


def _limit_said(session: Session, e: ContextLimitReached) -> str:
    said = str(e)
    if session.settings.compaction.disable_compact:  # no /compact to advise: /clear is what is left
        said = said.replace("/compact or /clear to continue", "/clear to start anew (compaction is disabled)")
    return said


def _kept(session: Session, reply: Message) -> Message:
    """The reply as the history keeps it: a tool input larger than the window is cut (the calls still run
    with the whole of it). A cut reply's usage no longer describes what the history holds, so it counts
    toward /cost only and the context is estimated from what is kept."""
    kept = for_history(reply, session.window)
    if kept is reply:
        return reply
    session.account_side_request(reply)
    return kept.replace(usage=None)


def submit_prompt(session: Session, text: str) -> str:
    """Record the user's prompt after the UserPromptSubmit hooks; returns a reason if a hook blocked it."""
    outcomes = session.run_hooks("UserPromptSubmit", None, prompt=text)
    reason = session.hooks.blocked(outcomes)
    if reason is not None:
        return f"A UserPromptSubmit hook blocked the prompt: {reason}"
    prompt = user_prompt(paste.fit(session, text))  # a prompt past the window: its head and a file
    session.begin_turn(prompt.uuid, text)
    session.add(prompt)
    if remembers(text):  # "remember ...": written now, from the user's own words (agent/memory)
        session.remember("asked")
    for attached in mentions.attachments(session, text):  # @path: what the user put in on purpose
        session.add(attached)
    context = session.hooks.context_text(outcomes)
    if context:
        session.add(meta(f"UserPromptSubmit hook output:\n{context}", hookContext=True))
    return ""


def stop_hook_blocks(session: Session, earlier_blocks: int, event: str = "Stop", **fields: object) -> bool:
    """The Stop hooks, as the model ends its turn: exit code 2 (or a "block" decision) keeps it going, with
    the hook's reason given to the model. After the first block the payload says ``stop_hook_active``
    so a hook can let the turn end; one that never does is overruled after MAX_STOP_BLOCKS. A subagent
    runs ``SubagentStop`` instead, with its ``agent_id`` and ``agent_transcript_path`` in ``fields``."""
    outcomes = session.run_hooks(event, None, stop_hook_active=earlier_blocks > 0, **fields)
    reason = session.hooks.blocked(outcomes)
    if reason is None:
        return False
    if earlier_blocks >= MAX_STOP_BLOCKS:
        session.notice(
            f"A {event} hook blocked the stop {MAX_STOP_BLOCKS} times in this turn; it ends anyway.",
            "warning",
        )
        return False
    session.notice(f"{event} hook: {reason}", "warning")
    session.add(meta(f"{event} hook feedback (the turn goes on):\n{reason}", hookContext=True))
    return True


def finish(session: Session, stop: str, text: str, error: str = "") -> TurnFinished:
    event = TurnFinished(text=text, stop_reason=stop, error=error, usage=dict(session.usage_total))
    session.emit(event)
    return event
