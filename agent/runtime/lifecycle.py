"""How a session starts, and how the REPL and print mode switch to another one (docs/usage.md, docs/files.md).

``open_session`` makes a new session or resumes one (``--resume``, ``--continue``): ours are continued in
place, a foreign (Claude Code) transcript seeds a new session in our store and is never written.
``start`` runs the SessionStart hooks; ``clear`` and ``resume`` are /clear and /resume. Both front
ends (agent.frontend.repl, agent.frontend.printmode) and the commands call these, and nothing else starts a session.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Callable

from agent import RESUME_PICK
from agent.config.settings import Settings
from agent.mcp.client import McpHub
from agent.runtime import subagents
from agent.runtime.sdk import default_model
from agent.runtime.session import AskFn, Session
from agent.runtime.tool_exec import for_history
from agent.runtime.wiring import binding_record
from agent.transcript.claude_code import same_model
from agent.transcript.listing import earlier_usage, latest_session, session_info
from agent.transcript.loader import LoadedSession, load_transcript, messages_before
from compact import request_cycle
from compact.compaction.compactor import COMPACT_RESULT, WRAPPER_CLOSINGS, WRAPPER_OPENING
from compact.compaction.server_summary import BLOCK as COMPACTION_BLOCK
from compact.context.conversation import LastCompaction
from compact.owner import USAGE_KEYS
from compact.stages.state import state_records
from core.errors import SessionError
from core.events import Event, Notice
from core.messages import Message, meta, new_uuid
from core.model import context_window_for, cost_usd
from core.tokens import usage_total
from core.transcript_writer import in_use
from tools.permissions.engine import Rule, reads_files, writes_files
from tools.permissions.path_rules import pattern_regexes


def open_session(
    settings: Settings,
    *,
    emit: Callable[[Event], None],
    ask: AskFn | None,
    resume: str | None = None,
    continue_last: bool = False,
    environ: dict[str, str] | None = None,
    mcp: McpHub | None = None,
) -> Session:
    """A new session, or one continued from a transcript (ours, or a foreign Claude Code file), with the
    Task tool and its subagents (agent.runtime.subagents). ``mcp``: the MCP servers (they outlive it)."""
    environ = dict(environ or {})
    path = locate(settings, resume, continue_last)
    if path is None:
        session = Session(settings, new_session_id(settings), emit, ask, environ=environ)
    else:
        session = _resumed(settings, path, emit, ask, environ)
    if mcp is not None:
        session.attach_mcp(mcp)
    subagents.install(session)
    return session


def _resumed(
    settings: Settings, path: Path, emit: Callable[[Event], None], ask: AskFn | None, environ: dict[str, str]
) -> Session:
    """A session continued from the transcript at ``path`` (ours, or a foreign Claude Code file)."""
    loaded, last = _read(settings, path)
    if not loaded.readable:
        raise SessionError(f"{path} holds no session records (not a transcript?); nothing to resume")
    for warning in loaded.warnings:
        emit(Notice(warning, "warning"))
    ours = path.parent == settings.project_dir and path.suffix == ".jsonl"
    # a transcript written before inputs were cut may hold one larger than the window: cut it here too
    window = context_window_for(settings.model if settings.model_explicit else default_model())
    messages, pending = [for_history(m, window) for m in loaded.messages], loaded.pending
    if ours and in_use(path):  # another process is writing it: continue in a copy, never in between
        ours = False
        # the turn that process is in the middle of is its own: the copy ends at the last finished one
        messages, pending = _settled(messages), []
        emit(
            Notice(
                f"Session {path.stem} is open in another process; this run continues it in a new session "
                "(a copy), so neither conversation is mixed into the other",
                "warning",
            )
        )
    session = _continued(settings, loaded, messages, ours, emit, ask, environ)
    session.memory_text = loaded.memory_text  # the memory it started with, not loaded again
    if last:
        session.set_model(last)
    if loaded.system_prompt is not None:  # the prompt its thinking is bound to, byte for byte
        session.restore_system(loaded.system_prompt, record=not ours)
    if loaded.thinking_binding:  # the escape hatch the session needed travels on with it
        session.conv.thinking_binding = loaded.thinking_binding
        if not ours:
            session.record(binding_record(loaded.thinking_binding, "resumed"))
    _answer_interrupted(session, pending)
    session.conv.last_compaction = session.conv.compaction_seen = _last_compaction(loaded)
    # the next request names the last reply as its predecessor: a resume that sends the same bytes shows
    # no cache miss (compact.context.cache_health)
    session.conv.last_reply_id = next(
        (m.message_id for m in reversed(session.messages) if m.role == "assistant" and m.message_id), None
    )
    request_cycle.resumed(session.conv)  # what its thinking is bound to: the next request extends it
    return session


def _read(settings: Settings, path: Path) -> tuple[LoadedSession, str | None]:
    """The transcript at ``path`` read for the model the session goes on with; and that model when it is
    the one our own session was last on (a /model switch) rather than the settings' (None otherwise)."""
    model = settings.model if settings.model_explicit else default_model()
    try:
        # the model this session will use (Session picks the same): thinking of any other is dropped
        loaded = load_transcript(path, model=model)
        # no model named: our own session goes on with the model it was last on (a /model switch), so
        # it sends what the live one would have sent, that model's thinking included
        last = _last_model(loaded.messages) if not settings.model_explicit else None
        if last and not same_model(last, model) and path.parent == settings.project_dir:
            return load_transcript(path, model=last), last
    except OSError as e:
        raise SessionError(f"Can't read session {path}: {e.strerror or e}") from None
    return loaded, None


def _continued(
    settings: Settings,
    loaded: LoadedSession,
    messages: list[Message],
    ours: bool,
    emit: Callable[[Event], None],
    ask: AskFn | None,
    environ: dict[str, str],
) -> Session:
    """Our own session goes on under its id; a foreign one (or one open elsewhere) is seeded into a new one."""
    if ours:
        return Session(
            settings,
            loaded.session_id,
            emit,
            ask,
            history=messages,
            replayed=loaded.state,
            last_uuid=loaded.last_uuid,
            environ=environ,
            resumed_size=loaded.size,
        )
    session = Session(settings, new_uuid(), emit, ask, replayed=loaded.state, environ=environ)
    # seed our own store; the foreign file is only read. Not through add(): the imported replies
    # are no turns of this run and their usage was paid for back then (num_turns, cost)
    for m in messages:
        session.conv.append(m)
    for rec in state_records(loaded.state):
        session.record(rec)
    return session


def _last_model(messages: list[Any]) -> str | None:
    """The model of the last reply in ``messages`` (None when no reply names one)."""
    return next((m.model for m in reversed(messages) if m.role == "assistant" and m.model), None)


def new_session_id(settings: Settings) -> str:
    """A new session's id: --session-id's (refused when a session of this directory has it), else new."""
    wanted = settings.session_id
    if wanted is None:
        return new_uuid()
    if (settings.project_dir / f"{wanted}.jsonl").exists():
        raise SessionError(
            f"--session-id {wanted} is in use already (compact-agent --resume {wanted} continues it)"
        )
    return wanted


def _settled(messages: list[Any]) -> list[Any]:
    """The messages up to the model's last finished reply (an assistant message that calls no tool)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant" and not messages[i].tool_uses:
            return messages[: i + 1]
    return []


def _answer_interrupted(session: Session, answers: list[Any]) -> None:
    """Record error results for the calls the last run stopped in (appended, so a second resume sends
    the same), and say so."""
    for message in answers:
        session.add(message)
        ids = {b.get("tool_use_id") for b in message.tool_results}
        names = [u.get("name", "?") for m in session.messages for u in m.tool_uses if u.get("id") in ids]
        session.notice(
            f"The last run stopped during a tool call ({', '.join(names)}); the model is told "
            "it was interrupted and may have partly run",
            "warning",
        )


def locate(settings: Settings, resume: str | None, continue_last: bool) -> Path | None:
    """The transcript --resume / --continue names (None for a new session); SessionError if there is none."""
    if continue_last:
        path = latest_session(settings.project_dir)
        if path is None:
            raise SessionError(f"No earlier session to continue in {settings.cwd}")
        return path
    if resume == RESUME_PICK:
        return None  # the REPL asks which (Repl.open)
    return _find_transcript(settings, resume) if resume else None


def _last_compaction(loaded: Any) -> LastCompaction | None:
    """What /summary and /history show after a resume: the last compaction as its compact_result record
    kept it (the summary a person reads, whatever wrote it: a local summary, the notes, the server), or,
    in a transcript written before that record held the summary, what the boundary and the first message
    say of it."""
    if not loaded.boundary:
        return None
    meta_ = loaded.boundary.get("compactMetadata") or {}
    recorded = _recorded_result(loaded.path, loaded.boundary_offset) or {}
    summary = recorded.get("summary")
    if not isinstance(summary, str):
        summary = _summary_of(loaded.messages[0]) if loaded.messages else None
    if summary is None:
        return None
    post = recorded.get("postTokens")
    return LastCompaction(
        **_economics_facts(recorded),
        summary=summary,
        trigger=str(recorded.get("trigger") or meta_.get("trigger") or "?"),
        pre_tokens=int(recorded.get("preTokens") or meta_.get("preTokens") or 0),
        post=int(post) if isinstance(post, int) else _size_left(loaded.messages),
        method=str(recorded.get("method") or "resumed"),
        replaced=lambda: messages_before(loaded.path, loaded.boundary_offset),
        candidate=str(recorded.get("candidate") or ""),
    )


def _economics_facts(recorded: dict[str, Any]) -> dict[str, Any]:
    """What the next compaction's arithmetic reads of the last one (compact.compaction.economics), as its
    compact_result record kept it; a record without them (an older one, Claude Code's) knows no tail."""
    facts = recorded.get("economics")
    if not isinstance(facts, dict):
        return {"tail_uuid": None}
    written = facts.get("written")
    seen = facts.get("kept_seen")
    return {
        "tail_uuid": facts.get("tail_uuid") if isinstance(facts.get("tail_uuid"), str) else None,
        "written": written if isinstance(written, int) else None,
        "kept_seen": tuple(str(x) for x in seen) if isinstance(seen, list) else (),
        "kept_seen_tokens": int(facts.get("kept_seen_tokens") or 0),
        "lean": bool(facts.get("lean")),
    }


def _size_left(messages: list[Any]) -> int | Callable[[], int]:
    """The size a compaction no record states left (a Claude Code transcript's, an older one of ours):
    what the first reply after it read, as the server counted it; without one, the messages before that
    reply, estimated when first asked (never the whole tail, which is the size now, on the way to the
    resume's first request)."""
    at = next((i for i, m in enumerate(messages) if m.role == "assistant"), len(messages))
    if at < len(messages) and messages[at].usage:
        return usage_total(messages[at].usage) - int(messages[at].usage.get("output_tokens") or 0)
    return lambda: sum(m.tokens for m in messages[:at])


def _summary_of(first: Any) -> str | None:
    """The summary in the message a compaction put first (an older transcript's): the server's block's
    text, or a local summary without the paragraphs around it that were written for the model."""
    for block in first.content if first.role == "assistant" else []:
        if block.get("type") == COMPACTION_BLOCK and isinstance(block.get("content"), str):
            return str(block["content"])
    if first.kind != "summary":
        return None
    paragraphs = first.text.split("\n\n")
    if len(paragraphs) > 1 and paragraphs[0].startswith(WRAPPER_OPENING):
        paragraphs = paragraphs[1:]
    while len(paragraphs) > 1 and paragraphs[-1].startswith(WRAPPER_CLOSINGS):
        paragraphs.pop()
    return "\n\n".join(paragraphs)


def _recorded_result(path: Path, boundary_offset: int) -> dict[str, Any] | None:
    """The last compaction's compact_result record (its "a → b" and summary), None if none was written."""
    needle = f'"{COMPACT_RESULT}"'.encode()
    try:
        with open(path, "rb") as f:
            f.seek(boundary_offset)
            for line in f:
                if needle in line:
                    rec = json.loads(line)
                    if isinstance(rec, dict) and rec.get("subtype") == COMPACT_RESULT:
                        return rec
    except (OSError, ValueError):
        return None
    return None


def _find_transcript(settings: Settings, ref: str) -> Path:
    candidate = Path(ref).expanduser()
    if candidate.suffix == ".jsonl" or "/" in ref:
        if not candidate.is_absolute():
            candidate = settings.cwd / candidate
        if candidate.is_file():
            return candidate
        raise SessionError(f"No transcript file at {candidate}")
    own = settings.project_dir / f"{ref}.jsonl"
    if own.is_file():
        return own
    projects = settings.home / "projects"
    if projects.is_dir():
        for p in projects.glob(f"*/{ref}.jsonl"):
            return p
    return _by_prefix(settings, ref)


def _by_prefix(settings: Settings, ref: str) -> Path:
    """The one session of this directory whose id starts with ``ref`` (as git takes a short hash)."""
    try:
        found = sorted(
            p for p in settings.project_dir.iterdir() if p.suffix == ".jsonl" and p.name.startswith(ref)
        )
    except OSError:
        found = []
    if len(found) == 1:
        return found[0]
    if found:
        ids = ", ".join(p.stem for p in found[:5])
        raise SessionError(f"{len(found)} sessions start with {ref} ({ids}); give more of the id")
    raise SessionError(f"No session with id {ref} (looked in {settings.project_dir})")


def resumed_line(session: Session) -> str:
    """ "Resumed session ID (N messages)." — N counted as /resume's list counts it."""
    if not session.resumed_size:  # a foreign transcript seeded this session: its messages are all here
        return f"Resumed session {session.session_id} ({len(session.messages)} messages)."
    count = session_info(session.transcript_path, session.resumed_size).message_count
    return f"Resumed session {session.session_id} ({count} messages)."


def earlier_cost(session: Session, subagents: dict[str, Any] | None = None) -> tuple[dict[str, int], float]:
    """Usage and cost a resumed session recorded before this process (both empty for a new one); the
    subagents' share of it goes to ``subagents`` ("runs": agent ids, "usage", "cost")."""
    usage: dict[str, int] = {}
    cost = 0.0
    if not session.resumed_size:
        return usage, cost
    tasks: list[tuple[str, str, dict[str, Any]]] = []
    try:
        found = earlier_usage(session.transcript_path, session.resumed_size, tasks)
    except OSError:
        return usage, cost
    for model, u in found:
        for key in USAGE_KEYS:
            usage[key] = usage.get(key, 0) + int(u.get(key) or 0)
        cost += cost_usd(model or session.model, u)
    if subagents is not None:
        shared: dict[str, int] = {}
        for _, _model, u in tasks:
            for key in USAGE_KEYS:
                shared[key] = shared.get(key, 0) + int(u.get(key) or 0)
        subagents.update(
            runs={agent for agent, _, _ in tasks},
            usage=shared,
            cost=sum(cost_usd(model or session.model, u) for _, model, u in tasks),
        )
    return usage, cost


def start(session: Session, source: str) -> None:
    """SessionStart hooks (source startup / resume / clear); their stdout becomes context for the model.

    First, once a process (not after /clear), what in the settings can't be used as written."""
    if source != "clear":
        for line in setting_problems(session):
            session.notice(line, "warning")
    if source != "resume":  # a resumed conversation keeps the memory it started with
        session.load_memory()
    context = session.hook_context("SessionStart", source, source=source)
    if context:
        session.add(meta(f"SessionStart hook output ({source}):\n{context}", hookContext=True))


def clear(session: Session) -> Session:
    """/clear: a new session with the same settings and front end; the old one stays saved."""
    settings = copy.copy(session.settings)
    settings.session_id = None  # --session-id named the first session only
    new = open_session(settings, emit=session.emit, ask=session.ask, environ=session.environ, mcp=session.mcp)
    close(session)
    start(new, "clear")
    return new


def resume(session: Session, ref: str) -> Session:
    """/resume REF: continue another session (by id or path) with the same settings and front end."""
    new = open_session(
        session.settings,
        emit=session.emit,
        ask=session.ask,
        resume=ref,
        environ=session.environ,
        mcp=session.mcp,
    )
    close(session)
    start(new, "resume")
    return new


def end(session: Session) -> None:
    """The process is leaving the session: its memory is written (agent/memory); nothing else changes."""
    session.remember("end")


def close(session: Session) -> None:
    """The session ends (the process exits, /clear, /resume): its memory is written, then the transcript closed."""
    session.remember("end")
    try:
        session.writer.close()
    except OSError:  # a file already gone: nothing left to close
        pass


def setting_problems(session: Session) -> list[str]:
    """What in the settings can't be used as written: path rules that are no pattern, hook timeouts."""
    s = session.settings
    lines = []
    for kind, rules in (("deny", s.deny), ("ask", s.ask), ("allow", s.allow)):
        for text in rules:
            rule = Rule.parse(str(text))
            if rule.content is None or not (reads_files(rule.tool) or writes_files(rule.tool)):
                continue
            try:
                pattern_regexes(rule.content, s.cwd, s.user_home)
            except (re.error, RecursionError, ValueError) as e:
                lines.append(
                    f'The {kind} rule "{rule.text}" is not a usable pattern ({e}): every {rule.tool} call '
                    "it is checked against fails with an error until the rule is fixed"
                )
    return lines + session.hooks.problems()
