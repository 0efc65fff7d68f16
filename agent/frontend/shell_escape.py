"""``!command`` in the REPL: the user runs a shell command, and its output joins the conversation.

The command goes through the same permission rules as the model's Bash calls (a deny rule refuses it,
an ask rule asks, plan mode refuses it) and runs in the session's shell directory with the Bash tool's
limits. Command and output are recorded as one user message, so the model sees them with the next
prompt, as if the user had pasted them.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.runtime.session import Session
from core.messages import meta
from tools.bash import BashTool


@dataclass
class Ran:
    output: str  # what the command printed (as the model will see it), or why it did not run
    ran: bool
    is_error: bool = False


def run(session: Session, command: str) -> Ran:
    """Check, run and record ``command``; nothing is recorded when it did not run."""
    args = {"command": command}
    refused = _refused(session, args)
    if refused:
        return Ran(refused, ran=False, is_error=True)
    session.cancel.clear()
    result = BashTool().run(args, session.tool_ctx)
    output = result.content if isinstance(result.content, str) else ""
    interrupted = session.cancel.is_set()
    if interrupted:
        output += "\n[interrupted by the user]"
    session.add(
        meta(
            f"The user ran a shell command themselves:\n<bash-input>{command}</bash-input>\n"
            f"<bash-output>{output}</bash-output>",
            bashInput=command,
        )
    )
    return Ran(output, ran=True, is_error=result.is_error or interrupted)


def _refused(session: Session, args: dict[str, str]) -> str:
    decision = session.permissions.check("Bash", args, cwd=session.tool_ctx.cwd)
    if decision.behavior == "deny":
        return f"Not run: the permission rules deny it ({decision.reason})."
    if decision.behavior != "ask":
        return ""
    answer = session.ask("Bash", args, session.permissions.describe("Bash", args)) if session.ask else "no"
    if answer == "always":
        session.permissions.allow_for_session(session.permissions.suggest_rule("Bash", args))
    elif answer != "yes":
        return "Not run: declined."
    return ""
