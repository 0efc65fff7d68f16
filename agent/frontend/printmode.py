"""Print mode (-p): run one prompt (or slash command) to the end and print text, JSON or stream-JSON.

The turn runs in a worker thread so Ctrl-C in the main thread can cancel it cleanly. Nobody can answer
permission questions here, so calls that would ask are denied and the model is told so.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import IO, Any

from agent import __version__
from agent.config.settings import Settings
from agent.config.trust import print_mode_line
from agent.frontend import commands
from agent.mcp import setup as mcp_setup
from agent.mcp.client import McpHub
from agent.runtime import lifecycle
from agent.runtime.loop import run_turn
from agent.runtime.session import Session
from core.errors import AgentError
from core.events import (
    CompactFailed,
    CompactFinished,
    CompactStarted,
    Event,
    MessageRecorded,
    Notice,
    PermissionDenied,
    Retrying,
    SubagentEvent,
    SubagentFinished,
    SubagentStarted,
    TurnFinished,
)
from core.messages import Message, to_record
from core.models import Family, family_of
from core.private import redact, secrets_of
from core.terminal import visible


def _family(session: Session, model: str) -> Family:
    """What ``model`` accepts, as the session's client learned it (a scripted stand-in: the table's)."""
    learned = getattr(session.client, "family", None)
    return learned(model) if learned is not None else family_of(model)


def progress_as_text(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An assistant message's blocks as a reader of the stream sees them: the progress a 5.5-family model
    writes between tool calls (thinking blocks with text, under the display the session asks for) as
    text blocks, as that text came from the models before; the transcript keeps the blocks as sent."""
    return [
        {"type": "text", "text": b["thinking"]} if b.get("type") == "thinking" and b.get("thinking") else b
        for b in content
    ]


SUBTYPES = {"end_turn": "success", "hook_stopped": "success", "max_turns": "error_max_turns"}


class PrintRenderer:
    def __init__(self, fmt: str, out: IO[str], err: IO[str], secrets: tuple[str, ...] = ()):
        self.fmt, self.out, self.err = fmt, out, err
        self.secrets = secrets  # redacted from stdout, as the transcript redacts them
        self.session: Session | None = None
        self.num_turns = 0
        self.denials: list[PermissionDenied] = []  # the result's permission_denials, as Claude Code's

    def __call__(self, event: Event) -> None:
        if isinstance(event, MessageRecorded):
            if event.message.role == "assistant":
                self.num_turns += 1
            if self.fmt == "stream-json":
                self._message(event.message)
        elif isinstance(event, SubagentEvent):
            self._subagent(event)
        elif isinstance(event, (SubagentStarted, SubagentFinished)) and self.fmt == "stream-json":
            self._line({"type": "system", "subtype": _snake(type(event).__name__), **vars(event)})
        elif isinstance(event, PermissionDenied):
            self.denials.append(event)
        elif isinstance(event, (CompactStarted, CompactFinished, CompactFailed)):
            self._compaction(event)
        elif isinstance(event, Notice):
            self.say(event.text)
        elif isinstance(event, Retrying):  # stderr in every format: stdout stays the result alone
            self.say(f"{commands.retry_line(event)} · {event.reason}")

    def say(self, line: str) -> None:
        """One line for the user on stderr, terminal-safe (it may quote hook output, a path, an error)."""
        self.err.write(visible(line) + "\n")
        self.err.flush()

    def _message(self, message: Message, **tags: Any) -> None:
        if self.session is None:
            return
        s = self.session
        rec = to_record(
            message, parent_uuid=None, session_id=s.session_id, cwd=str(s.settings.cwd), version=__version__
        )
        rec.pop("parentUuid")
        if message.role == "assistant" and _family(s, message.model or s.model).progress_in_thinking:
            rec["message"] = {**rec["message"], "content": progress_as_text(rec["message"]["content"])}
        self._line({**rec, **tags})

    def _subagent(self, tagged: SubagentEvent) -> None:
        """A subagent's own events: its messages in stream-json, tagged with its id and its Task call (as
        Claude Code's ``parent_tool_use_id``); its notices and retries on stderr, named."""
        event = tagged.event
        if isinstance(event, MessageRecorded) and self.fmt == "stream-json":
            tags = {"isSidechain": True, "agentId": tagged.agent_id, "parent_tool_use_id": tagged.tool_use_id}
            self._message(event.message, **tags)
        elif isinstance(event, PermissionDenied):  # the result lists the subagents' denials too
            self.denials.append(event)
        elif isinstance(event, Notice):
            self.err.write(f"[subagent {tagged.agent_id}] {event.text}\n")
        elif isinstance(event, Retrying):
            self.err.write(
                f"[subagent {tagged.agent_id}] retrying in {round(event.delay, 1):g}s · {event.reason}\n"
            )
        elif (
            isinstance(event, (CompactStarted, CompactFinished, CompactFailed)) and self.fmt != "stream-json"
        ):
            self.err.write(f"[subagent {tagged.agent_id}] ")
            self._compaction(event)

    def _compaction(self, event: Event) -> None:
        if isinstance(event, CompactFinished):
            text = commands.compaction_line(event)
            for line in event.hook_messages:
                self.say(line)
        elif isinstance(event, CompactFailed):
            text = commands.failed_line(event)
        else:
            text = "Compacting conversation…"
        if self.fmt == "stream-json":
            payload = {k: v for k, v in vars(event).items() if k != "summary"}
            self._line({"type": "system", "subtype": _snake(type(event).__name__), **payload})
        else:
            self.say(text)

    def _line(self, obj: dict[str, Any]) -> None:
        self.out.write(redact(json.dumps(obj, ensure_ascii=False), self.secrets) + "\n")
        self.out.flush()

    def result(self, finished: TurnFinished, session: Session, started: float) -> int:
        is_error = finished.stop_reason not in ("end_turn", "hook_stopped")
        text = finished.text if not is_error or not finished.error else (finished.text or finished.error)
        if self.fmt == "text":
            # text is for reading (a terminal, or a pager it is piped to): control characters are shown,
            # never obeyed; the exact text is in the JSON formats, whose encoding escapes them
            if finished.text and finished.text != finished.error:  # an error goes to stderr, once
                self.out.write(visible(redact(finished.text.rstrip("\n"), self.secrets)) + "\n")
        else:
            self._line(
                {
                    "type": "result",
                    "subtype": SUBTYPES.get(finished.stop_reason, "error_during_execution"),
                    "is_error": is_error,
                    "result": text,
                    "session_id": session.session_id,
                    "num_turns": self.num_turns,
                    "duration_ms": int((time.monotonic() - started) * 1000),
                    "usage": dict(session.usage_total),
                    "total_cost_usd": round(session.cost + _subagents_cost(session), 6),
                    "permission_denials": [
                        {"tool_name": d.tool_name, "tool_use_id": d.tool_use_id, "tool_input": d.tool_input}
                        for d in self.denials
                    ],
                }
            )
        if self.denials:  # one line, in every format: what was not run and why
            calls = "; ".join(f"{d.tool_name} ({d.reason})" for d in self.denials)
            self.err.write(
                redact(f"Permission denied for {len(self.denials)} tool call(s): {calls}\n", self.secrets)
            )
        if is_error:
            self.say(f"compact-agent: {finished.error or finished.stop_reason}")
            return 130 if finished.stop_reason == "interrupted" else 1
        if finished.error:  # a hook ended the turn: not a failure, but the user is told why
            self.say(finished.error)
        return 0


def run_print(
    settings: Settings,
    prompt: str,
    fmt: str,
    *,
    resume: str | None,
    continue_last: bool,
    max_turns: int | None,
    environ: dict[str, str],
    out: IO[str] | None = None,
    err: IO[str] | None = None,
) -> int:
    started = time.monotonic()
    renderer = PrintRenderer(
        fmt, out or sys.stdout, err or sys.stderr, secrets_of(settings.api_key, settings.auth_token)
    )
    for warning in settings.report.warnings:  # a project's broken settings file: skipped, said once
        renderer.say(f"compact-agent: warning: {warning}")
    if ignored := print_mode_line(
        settings.report.ignored, settings.report.trust.trusted
    ):  # never asks: says so, once
        renderer.say(ignored)
    hub = _mcp_servers(settings, renderer)
    try:
        return _run(settings, renderer, prompt, fmt, started, resume, continue_last, max_turns, environ, hub)
    finally:
        if renderer.session is not None:
            lifecycle.end(renderer.session)
        if hub is not None:
            hub.close()


def _mcp_servers(settings: Settings, renderer: PrintRenderer) -> McpHub | None:
    """The MCP servers, connected before the turn (print mode waits for them, within MCP_TIMEOUT); a
    project's .mcp.json servers nobody approved are not started, and stderr says so."""
    setup = mcp_setup.setup_of(settings)
    for problem in setup.problems:
        renderer.say(f"compact-agent: warning: {problem}")
    waiting = setup.untrusted + setup.unapproved
    if waiting:
        why = "the project is not trusted" if setup.untrusted else "they are not approved"
        renderer.say(
            f"compact-agent: MCP servers in .mcp.json not started ({why}; approve them in the REPL or with "
            f"enabledMcpjsonServers): {', '.join(c.name for c in waiting)}"
        )
    if not setup.servers:
        return None
    hub = mcp_setup.hub_for(settings, setup)
    hub.start()
    hub.wait(settings.mcp_timeout + 1)
    for line in mcp_setup.failure_lines(hub):
        renderer.say(f"compact-agent: warning: {line}")
    return hub


def _run(
    settings: Settings,
    renderer: PrintRenderer,
    prompt: str,
    fmt: str,
    started: float,
    resume: str | None,
    continue_last: bool,
    max_turns: int | None,
    environ: dict[str, str],
    hub: McpHub | None,
) -> int:
    session = lifecycle.open_session(
        settings,
        emit=renderer,
        ask=None,
        resume=resume,
        continue_last=continue_last,
        environ=environ,
        mcp=hub,
    )
    renderer.session = session
    if fmt == "stream-json":
        renderer._line(
            {
                "type": "system",
                "subtype": "init",
                "session_id": session.session_id,
                "model": session.model,
                "cwd": str(settings.cwd),
                "tools": [t.name for t in session.tools],
                "mcp_servers": [
                    {"name": state.name, "status": state.status}
                    for state in (hub.states.values() if hub else [])
                ],
                "permissionMode": settings.permission_mode,
            }
        )
    lifecycle.start(session, "resume" if (resume or continue_last) else "startup")
    allowed: tuple[str, ...] = ()
    if prompt.startswith("/"):
        result = commands.run(session, prompt)
        if not isinstance(result, commands.Prompt):
            return run_command(session, result, renderer, started)
        prompt, allowed = result.prompt, result.allowed  # a custom command: its prompt runs as a turn
    outcome: dict[str, Any] = {}
    done = threading.Event()
    args = (session, prompt, max_turns, outcome, done, allowed)
    threading.Thread(target=_turn, args=args, daemon=True).start()
    _wait(done, session.cancel)
    if "finished" not in outcome and "error" not in outcome:
        return 130  # the turn did not wind down in time; the transcript is valid up to here
    if "error" in outcome:
        raise outcome["error"]
    return renderer.result(outcome["finished"], session, started)


def _wait(done: threading.Event, cancel: threading.Event, grace: float = 30.0) -> None:
    """Wait for the turn; Ctrl-C cancels it and waits at most ``grace`` seconds for it to wind down.

    Ctrl-C only raises a flag here: a KeyboardInterrupt raised wherever the main thread happens to be
    can land inside a lock's acquire/release and leave it held, and the turn could then never finish.
    """
    interrupted = threading.Event()
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set()) if main else None
    try:
        while not done.wait(0.1):
            if interrupted.is_set():
                cancel.set()
                done.wait(grace)
                return
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


def _turn(
    session: Session,
    prompt: str,
    max_turns: int | None,
    outcome: dict[str, Any],
    done: threading.Event,
    allowed: tuple[str, ...] = (),
) -> None:
    try:
        with session.allowing(allowed):
            outcome["finished"] = run_turn(session, prompt, max_turns=max_turns)
    except AgentError as e:
        outcome["error"] = e
    except Exception as e:  # noqa: BLE001 - reported as one line by the CLI, never a traceback
        outcome["error"] = AgentError(f"internal error: {type(e).__name__}: {e}")
    finally:
        done.set()


def run_command(session: Session, result: commands.Result, renderer: PrintRenderer, started: float) -> int:
    ok = getattr(result, "ok", True)
    text = getattr(result, "text", "") or ""
    finished = TurnFinished(
        text=text,
        stop_reason="end_turn" if ok else "error",
        error="" if ok else text,
        usage=dict(session.usage_total),
    )
    return renderer.result(finished, session, started)


def _subagents_cost(session: Session) -> float:
    return session.subagents.cost if session.subagents is not None else 0.0


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
