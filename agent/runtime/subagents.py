"""Subagents (docs/subagents.md): a Task call runs its own loop, in its own context, and answers with its final text.

    parent turn ─ Task(description, prompt, subagent_type) ─► Subagents.run (tool thread, ≤ 4 at once)
        child = SubagentSession: own messages, system prompt (the agent's + environment), tools, client,
                pipeline (budget, snip, microcompact, auto-compact, reactive) at its model's window;
                the parent's permissions, hooks and Ctrl-C
        child loop: task prompt ─► model ─► tools ─► … ─► final text   (SubagentStop hooks at the end)
        records ──► P/<session-id>/subagents/agent-<id>.jsonl   (isSidechain, agentId, parent's sessionId)
    ◄─ tool result: the final text + "agentId: … <usage>…</usage>"; facts for the ledger

The subagent's first request holds only its task prompt (and the environment in its system prompt),
never the parent's messages. Its events reach the parent wrapped in ``SubagentEvent`` (print mode's
stream-json shows them tagged with its id) plus ``SubagentStarted/Progress/Finished`` for the REPL's line.
Its usage counts toward /cost apart from the main context. The agent id is derived from the Task call's
id, so a session resumed after a crash can name the sidechain of a call that never got its answer.

``build_child`` is the one place a subagent's conversation is wired.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, cast

from agent import __version__
from agent.config.agent_types import AgentDef, Agents, load_agents
from agent.config.system_prompt import environment_text, memory_block
from agent.runtime import context_updates
from agent.runtime.loop import NOT_RUN_FAILED, stop_hook_blocks
from agent.runtime.session import Answer, AskFn, Session
from agent.runtime.tool_exec import (
    DECLINED,
    INTERRUPTED,
    Declined,
    HookStopped,
    answer_open_calls,
    current_call_id,
    record_interruption,
    run_tools,
)
from compact.owner import USAGE_KEYS
from compact.request_cycle import after_response, before_request, send
from core.errors import ContextLimitReached, Interrupted, ModelError
from core.events import (
    Event,
    MessageRecorded,
    SubagentEvent,
    SubagentFinished,
    SubagentProgress,
    SubagentStarted,
    ToolStarted,
)
from core.messages import Message, user_prompt
from core.transcript_writer import (
    SIDE_USAGE,
    SidechainWriter,
    TranscriptWriter,
    agent_id_for,
    sidechain_path,
)
from tools.base import Tool, ToolResult
from tools.permissions.engine import Decision, Permissions
from tools.shell.readonly import refusal
from tools.task import NAME, AgentType, TaskTool

NO_ANSWER = "(The subagent ended without a final answer.)"


def context_tokens(usage: dict[str, Any]) -> int:
    """What a response says its request held plus what it wrote: the subagent's context size."""
    return sum(int(usage.get(k) or 0) for k in USAGE_KEYS)


@dataclass
class TaskRun:
    """One delegated task, for the REPL line, /cost and the result."""

    agent_id: str
    tool_use_id: str
    description: str
    subagent_type: str
    sidechain: Path
    started: float
    tool_uses: int = 0
    tokens: int = 0
    status: str = "running"
    usage: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0


class Subagents:
    """A session's Task service: the agent types, the runs, and their usage apart from the main context."""

    def __init__(self, parent: Session, agents: Agents) -> None:
        self.parent = parent
        self.agents = agents
        self.runs: list[TaskRun] = []
        self._emit_lock = threading.Lock()  # parallel subagents' events reach one renderer

    # --- what /cost and /context show -----------------------------------------------------------
    @property
    def usage(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for run in self.runs:
            for k, v in run.usage.items():
                out[k] = out.get(k, 0) + v
        return out

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.runs)

    # --- the service ----------------------------------------------------------------------------
    def run(self, args: dict[str, Any]) -> ToolResult:
        agent = self.agents.get(str(args.get("subagent_type")))
        if agent is None:  # TaskTool.check names the types; this is the race with a reload
            return ToolResult(f"There is no agent type {args.get('subagent_type')!r}.", is_error=True)
        tool_use_id = current_call_id() or f"task-{len(self.runs)}"
        agent_id = agent_id_for(tool_use_id)
        run = TaskRun(
            agent_id,
            tool_use_id,
            str(args.get("description") or agent.name),
            agent.name,
            sidechain_path(self.parent.transcript_path, agent_id),
            time.monotonic(),
        )
        self.runs.append(run)
        self._emit(SubagentStarted(agent_id, tool_use_id, run.description, agent.name))
        status, text = "error", "it could not start"
        try:
            child = build_child(self.parent, agent, run, self._child_emit(run))
            try:
                status, text = run_child(child, str(args["prompt"]))
            finally:
                child.writer.close()
                run.usage, run.cost = dict(child.usage_total), child.cost
                # in the session's transcript too, so /cost after a resume counts what subagents used
                record = {"type": SIDE_USAGE, "model": child.model, "usage": run.usage, "agentId": agent_id}
                self.parent.conv.record(record)
        finally:  # the REPL's line for it always ends
            run.status = status
            duration = time.monotonic() - run.started
            self._emit(
                SubagentFinished(
                    agent_id, status, run.tool_uses, run.tokens, duration, text if status == "error" else ""
                )
            )
        return task_result(run, status, text, duration)

    def _emit(self, event: Event) -> None:
        with self._emit_lock:
            self.parent.emit(event)

    def _child_emit(self, run: TaskRun) -> Callable[[Event], None]:
        def emit(event: Event) -> None:
            progressed = False
            if isinstance(event, ToolStarted):
                run.tool_uses, progressed = run.tool_uses + 1, True
            elif isinstance(event, MessageRecorded) and event.message.usage:
                run.tokens, progressed = context_tokens(event.message.usage), True
            self._emit(SubagentEvent(run.agent_id, run.tool_use_id, event))
            if progressed:
                self._emit(SubagentProgress(run.agent_id, run.tool_uses, run.tokens))

        return emit


def task_result(run: TaskRun, status: str, text: str, duration: float) -> ToolResult:
    """The Task call's result: the final text, then Claude Code's line with the agent id and usage."""
    usage = (
        f"agentId: {run.agent_id} (transcript: {run.sidechain})\n<usage>total_tokens: {run.tokens}\n"
        f"tool_uses: {run.tool_uses}\nduration_ms: {int(duration * 1000)}</usage>"
    )
    facts = {
        "agentId": run.agent_id,
        "status": status,
        "description": run.description,
        "subagentType": run.subagent_type,
        "sidechain": str(run.sidechain),
        "totalTokens": run.tokens,
        "totalToolUseCount": run.tool_uses,
        "totalDurationMs": int(duration * 1000),
    }
    uses = f"{run.tool_uses} tool use{'' if run.tool_uses == 1 else 's'}"
    summary = f"{_done(status)} ({uses} · {_k(run.tokens)} tokens · {duration:.0f}s)"
    if status == "completed":
        content = [{"type": "text", "text": text or NO_ANSWER}, {"type": "text", "text": usage}]
        return ToolResult(content, summary=summary, facts=facts)
    if status == "declined":  # the parent's turn ends too, as after any "no" (agent.runtime.tool_exec)
        return ToolResult(DECLINED, is_error=True, summary="Stopped: the user said no", facts=facts)
    why = (
        f"{INTERRUPTED} The subagent was stopped before it finished."
        if status == "interrupted"
        else f"The subagent failed: {text}"
    )
    partial = f"\n\nIts last words:\n{text}" if text and status != "error" else ""
    return ToolResult(f"{why}{partial}\n\n{usage}", is_error=True, summary=summary, facts=facts)


def _done(status: str) -> str:
    return {"completed": "Done", "interrupted": "Interrupted", "declined": "Stopped"}.get(status, "Failed")


def _k(tokens: int) -> str:
    return f"{tokens / 1000:.1f}k" if tokens < 10_000 else f"{tokens // 1000}k"


# --- the child ----------------------------------------------------------------------------------------


@dataclass(eq=False)
class SubagentSession(Session):
    """A subagent's session: its own conversation, recorded as a sidechain of the parent's transcript."""

    parent: Session | None = None
    agent: AgentDef | None = None
    agent_id: str = ""

    def __post_init__(self, history: list[Message] | None, replayed: Any) -> None:
        super().__post_init__(history, replayed)
        parent, agent = self.parent, self.agent
        assert parent is not None and agent is not None
        # the parent's Ctrl-C stops the subagent: one event for both
        self.conv.cancel = self.tool_ctx.cancel = parent.conv.cancel
        # the parent's permissions (read-only ones for a read-only agent), hooks and hidden files
        self.permissions = (
            cast(Permissions, ReadOnlyPermissions(parent.permissions))
            if agent.read_only
            else parent.permissions
        )
        self.hooks = parent.hooks
        self.tool_ctx.hidden = parent.tool_ctx.hidden
        # its own tools: never Task (no nesting); the agent's list; a read-only agent only the readers and
        # the context's housekeeping (by the tools' declarations), and Bash under the read-only rules
        allowed = agent.tools
        self.tools = [
            t
            for t in self.tools
            if t.name != NAME
            and (allowed is None or t.name in allowed)
            and (not agent.read_only or _looks(t))
        ]
        if parent.mcp is not None and allowed is None and not agent.read_only:
            self.attach_mcp(
                parent.mcp
            )  # an agent with every tool has the MCP servers' too (behind the search)

    def make_writer(self) -> TranscriptWriter:
        assert self.parent is not None
        return SidechainWriter(
            self.transcript_path,
            self.parent.session_id,
            str(self.settings.cwd),
            __version__,
            agent_id=self.agent_id,
            secret=(self.settings.api_key, self.settings.auth_token),
        )

    @property
    def transcript_path(self) -> Path:
        assert self.parent is not None
        return sidechain_path(self.parent.transcript_path, self.agent_id)

    @property
    def session_dir(self) -> Path:
        assert self.parent is not None  # inside the parent's: its reads of its own outputs never ask
        return self.parent.session_dir / "subagents" / f"agent-{self.agent_id}"

    def built_system(self) -> list[dict[str, Any]]:
        """Its agent's prompt and the environment, then the CLAUDE.md files (they apply to it too); fixed
        on its first request like a session's (agent.runtime.context_updates)."""
        assert self.agent is not None and self.parent is not None
        s = self.settings
        env = environment_text(s.cwd, self.model, git=self.parent.git(), root=s.root)
        memory = memory_block(self.instructions())
        return [{"type": "text", "text": self.agent.prompt + "\n\n" + env}, *([memory] if memory else [])]

    def hook_payload(self, event: str, **fields: Any) -> dict[str, Any]:
        assert self.parent is not None  # hooks see the parent's session and transcript
        return self.parent.hook_payload(event, **fields)


def _looks(tool: Tool) -> bool:
    """A tool a read-only agent may have: it reads files, or only tidies the context (Snip), or it is Bash,
    which the read-only permissions hold to commands that only look."""
    d = tool.declaration
    return tool.name == "Bash" or d.touches == "reads" or (d.touches == "nothing" and d.records == "nothing")


class ReadOnlyPermissions:
    """The parent's permissions, with Bash held to the read-only rules (an Explore subagent). Everything
    but ``check`` is the parent's own (its rules, its "always" answers)."""

    def __init__(self, inner: Permissions) -> None:
        self.inner = inner

    def check(self, tool_name: str, args: dict[str, Any], cwd: Path | None = None) -> Decision:
        decision = self.inner.check(tool_name, args, cwd=cwd)
        if tool_name == "Bash" and decision.behavior != "deny":
            why = refusal(str(args.get("command", "")), cwd or Path.cwd())
            if why is not None:
                return Decision("deny", f"this agent is read-only and {why}")
        return decision

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def build_child(parent: Session, agent: AgentDef, run: TaskRun, emit: Callable[[Event], None]) -> Session:
    """The subagent's session, wired like the parent's: same settings (no session notes or context
    collapse: a subagent's work is short-lived), the parent's permissions and hooks, its own tools."""
    compaction = dataclasses.replace(parent.settings.compaction, session_memory=False, context_collapse=False)
    settings = dataclasses.replace(parent.settings, compaction=compaction)
    child = SubagentSession(
        settings=settings,
        session_id=parent.session_id,
        emit=emit,
        ask=_asker(parent, agent, run),
        clock=parent.clock,
        model=agent.model or parent.model,
        environ=parent.environ,
        model_api=parent.model_api,
        parent=parent,
        agent=agent,
        agent_id=run.agent_id,
    )
    return child


def _asker(parent: Session, agent: AgentDef, run: TaskRun) -> AskFn | None:
    if parent.ask is None:
        return None

    def ask(tool: str, args: dict[str, Any], description: str) -> Answer:
        assert parent.ask is not None
        return parent.ask(
            tool, args, f'{description}\n\nAsked by the subagent {agent.name} ("{run.description}")'
        )

    return ask


def run_child(child: Session, prompt: str) -> tuple[str, str]:
    """The subagent's loop; (status, its final text or the error)."""
    conv, ports = child.conv, child.ports
    first = user_prompt(prompt)
    child.begin_turn(first.uuid)
    child.add(first)
    text, stop_blocks = "", 0
    agent_fields = {
        "agent_id": getattr(child, "agent_id", ""),
        "agent_transcript_path": str(child.transcript_path),
    }
    try:
        while True:
            context_updates.refresh(child)
            reply = send(conv, ports, before_request(conv, ports))
            child.add(reply)
            after_response(conv, ports)
            text = reply.text or text
            if reply.tool_uses:
                child.add(run_tools(child, reply.tool_uses))
            elif stop_hook_blocks(child, stop_blocks, event="SubagentStop", **agent_fields):
                stop_blocks += 1
            else:
                return "completed", reply.text
    except Declined:
        return "declined", text
    except HookStopped as e:  # a hook's {"continue": false} inside the subagent ends its work
        return "error", f"a hook stopped it: {e}"
    except Interrupted:
        record_interruption(child)
        return "interrupted", text
    except (ContextLimitReached, ModelError) as e:
        return "error", str(e)
    except Exception as e:  # noqa: BLE001 - a bug ends the subagent, never the parent's turn
        answer_open_calls(child, f"{NOT_RUN_FAILED} ({type(e).__name__})")
        return "error", f"internal error: {type(e).__name__}: {e}"


def install(session: Session) -> None:
    """Give a (main) session the Task tool and its service; a subagent gets neither (no nesting)."""
    if isinstance(session, SubagentSession):
        return
    s = session.settings
    agents = load_agents(s.root, s.home, s.user_home, trusted=s.report.trust.trusted)
    subagents = Subagents(session, agents)
    types = [AgentType(a.name, a.description, a.tools_text) for a in agents.types]
    session.give_subagents(subagents, TaskTool(types, withheld=dict(agents.skipped)), subagents.run)
    for warning in agents.warnings:
        session.notice(warning, "warning")
