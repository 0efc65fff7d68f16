"""The query loop: prepare context → call the model → run tools → record, until the model ends its turn.

Everything else (compaction, retries, permissions, rendering) lives in the named steps it calls.
"""

from __future__ import annotations

from agent.session import Session
from agent.tool_exec import Declined, record_interruption, run_tools
from compact.prepare import after_response, prepare_request, send
from core.errors import ContextLimitReached, Interrupted, ModelError
from core.events import TurnFinished
from core.messages import meta, user_prompt


def run_turn(session: Session, text: str, *, max_turns: int | None = None) -> TurnFinished:
    conv, ports = session.conv, session.ports
    conv.cancel.clear()
    blocked = submit_prompt(session, text)
    if blocked:
        return finish(session, "error", "", blocked)
    calls, reply_text = 0, ""
    try:
        while True:
            view = prepare_request(conv, ports)
            reply = send(conv, ports, view)
            session.add(reply)
            after_response(conv, ports)
            calls, reply_text = calls + 1, reply.text
            if not reply.tool_uses:
                return finish(session, "end_turn", reply_text)
            session.add(run_tools(session, reply.tool_uses))
            if max_turns and calls >= max_turns:
                return finish(session, "max_turns", reply_text, f"Reached the maximum of {max_turns} turns")
    except Declined:  # the user said no to a tool call: the next step is theirs
        return finish(session, "declined", reply_text)
    except Interrupted:
        record_interruption(session)
        return finish(session, "interrupted", reply_text, "Interrupted by user")
    except ContextLimitReached as e:
        return finish(session, "context_limit", reply_text, str(e))
    except ModelError as e:
        return finish(session, "error", reply_text, str(e))


def submit_prompt(session: Session, text: str) -> str:
    """Record the user's prompt after the UserPromptSubmit hooks; returns a reason if a hook blocked it."""
    outcomes = session.run_hooks("UserPromptSubmit", None, prompt=text)
    reason = session.hooks.blocked(outcomes)
    if reason is not None:
        return f"A UserPromptSubmit hook blocked the prompt: {reason}"
    prompt = user_prompt(text)
    session.conv.current_prompt_uuid = prompt.uuid
    session.conv.reactive_compacted = False
    session.add(prompt)
    context = session.hooks.context_text(outcomes)
    if context:
        session.add(meta(f"UserPromptSubmit hook output:\n{context}", hookContext=True))
    return ""


def finish(session: Session, stop: str, text: str, error: str = "") -> TurnFinished:
    if stop == "end_turn":
        session.run_hooks("Stop", None, stop_hook_active=False)
    event = TurnFinished(text=text, stop_reason=stop, error=error, usage=dict(session.usage_total))
    session.emit(event)
    return event
