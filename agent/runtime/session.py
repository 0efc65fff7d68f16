"""A session: settings, the conversation and its ports, tools, permissions, hooks and the model client.

``Session`` wires the floors together once, with its own pieces from agent.runtime.wiring and what the
tests' compaction bench shares (compact.owner, ``ConversationOwner``): the ``Conversation`` (the live list, the
transcript writer, state, counters, workers) and the ``Ports`` compaction reaches the rest through
(compact.context.conversation), the tools and their context, the permission rules, the hook runner and the SDK
client. Everything added to the conversation goes through ``add`` (list + transcript + event), so the
three never disagree. Nothing outside this class (and its subclass, a subagent's
``SubagentSession``) sets a session's attributes, except the REPL swapping ``emit`` and ``ask`` when it
takes over a session (/clear, /resume): a turn starts with ``begin_turn``, the Task tool comes with
``give_subagents``."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import InitVar, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from agent import __version__
from agent.config.settings import Settings
from agent.config.system_prompt import (
    GitFacts,
    Instructions,
    Where,
    build_system,
    compact_instructions,
    git_facts,
    instruction_files,
)
from agent.mcp.catalog import McpCatalog, choose_mode
from agent.mcp.client import McpHub
from agent.memory import service as memory
from agent.runtime import context_updates, thinking, wiring
from agent.runtime.hooks import HookRunner, base_payload
from agent.runtime.sdk import default_model
from compact import owner
from compact.context import discovered
from compact.stages.state import ContextState
from core.boundary import guarded
from core.errors import ModelError
from core.events import Event, Notice, ToolOutput
from core.messages import Message
from core.model import (
    ModelService,
    Request,
    context_window_for,
    max_output_tokens,
    offers_compaction,
    preserves_thinking,
)
from core.models import Family, family_of, resolve
from core.transcript_writer import SIDE_USAGE, TranscriptWriter
from tools.base import Tool, ToolContext
from tools.bash import LIVE_OUTPUT
from tools.permissions.engine import Permissions
from tools.permissions.links import Hidden
from tools.registry import builtin_tools, get, tool_schemas
from tools.snip import SnipTool

# "yes" | "no" | "always"; None means nobody can answer (print mode): the call is denied
Answer = Literal["yes", "no", "always"]  # mypy's strict equality checks every comparison with one
AskFn = Callable[[str, dict[str, Any], str], Answer]
# seconds the first request may wait for the Models API's answer: the call itself times out after 5 s,
# and the rest is the SDK's import, which the first request needs anyway (a loaded machine: many seconds)
FACTS_WAIT = 60.0
# hooks that belong to a turn: the user's interrupt (Ctrl-C, Esc, SIGINT in print mode) stops them
TURN_HOOKS = frozenset({"UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "PreCompact", "PostCompact"})


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(eq=False)
class Session(owner.ConversationOwner):
    settings: Settings
    session_id: str
    emit: Callable[[Event], None]
    ask: AskFn | None = None
    history: InitVar[list[Message] | None] = None  # a resumed session's live list
    replayed: InitVar[ContextState | None] = None  # and its stages' decisions, replayed from the transcript
    clock: Callable[[], datetime] = _utcnow
    model: str = ""
    last_uuid: str | None = None
    environ: dict[str, str] = field(default_factory=dict)
    resumed_size: int = 0  # bytes of the transcript written before this process (resumed sessions)
    mcp: McpHub | None = None  # the MCP servers (agent/mcp): shared by the sessions /clear and /resume open
    # the model behind the requests: None builds the SDK client from the settings (a test may give a
    # core.scripted.ScriptedModel); kept across use_settings, and a subagent's session shares it
    model_api: ModelService | None = None

    def __post_init__(self, history: list[Message] | None, replayed: ContextState | None) -> None:
        s = self.settings
        self.model = resolve(self.model or (s.model if s.model_explicit else default_model()))
        self.usage_total: dict[str, int] = {}
        self.cost = 0.0
        self.started = time.monotonic()  # /cost's wall time (this process)
        self.api_seconds = 0.0  # and the time main requests took
        self._window: int | None = None
        self._git: GitFacts | None = None
        self._git_taken = False  # the snapshot is taken on the first request, not on the way to the prompt
        self._refusals_said: set[str] = set()
        self._fixed_system: list[dict[str, Any]] | None = None  # a resume sets the recorded one
        # thinking (agent/runtime/thinking.py): on for every turn (settings, the REPL's toggle, or the
        # model's default), raised by a prompt's words; an effort model's depth is the session's effort
        self.thinking_on = self.thinking_default()
        self.effort: str | None = s.effort or (
            thinking.budget_effort(s.max_thinking_tokens) if s.max_thinking_tokens else None
        )
        self.prompt_thinking: int | None = None  # the budget the current prompt's words ask for
        self.prompt_effort: str | None = None  # and the effort they ask for
        # the @paths the next prompt holds that the user didn't write: an untrusted project's custom command
        # body (agent.runtime.mentions attaches none of them from outside the project, in any mode)
        self.foreign_mentions: frozenset[str] = frozenset()
        self.pinned_effort: str | None = None  # the effort between_tools began at in this conversation
        self.writer = writer = self.make_writer()
        self.client: ModelService = self.model_api or wiring.client(s, self._emit)
        self.client.on_binding_fallback = self.binding_fallback
        self._facts = self._learn()  # the Models API's word on the model, in the background
        self.tools = builtin_tools() + [SnipTool()]
        self.tool_ctx = ToolContext(
            project_dir=s.cwd, session_dir=self.session_dir, cwd=s.cwd, environ=s.environ or None
        )
        self.tool_ctx.services[LIVE_OUTPUT] = lambda chunk: self._emit(
            ToolOutput(chunk.decode("utf-8", "replace"))
        )
        self.permissions = Permissions(s, session_dir=self.session_dir)
        if s.deny:  # a file the Read rules deny never shows up in Grep or Glob output either
            self.tool_ctx.hidden = Hidden(self.permissions.read_denied, [s.root])
        self.hooks = HookRunner(s.hooks, s.cwd, s.environ or self.environ, spill_dir=self.hook_output_dir)
        self.ports = self.compaction_ports(
            self.client,
            self._emit,
            wiring.compact_config(s),
            offers_compaction=lambda: offers_compaction(self.model, self.family()),
            preserves_thinking=lambda: preserves_thinking(self.model),
        )
        self.conv = owner.conversation(
            writer,
            self.session_dir,
            self.tool_ctx,
            self.ports,
            history=history,
            replayed=replayed,
            clock=self.clock,
        )
        self.mcp_tools: McpCatalog | None = None
        if self.mcp is not None:
            self.attach_mcp(self.mcp)
        self.subagents: Any = None  # the Task service: agent.runtime.subagents.install gives it (lifecycle)
        # memory across sessions (agent/memory): what was loaded at the start (lifecycle.start), served in
        # the fixed part of the system prompt; a resumed session keeps the text it started with
        self.memory: memory.Loaded | None = None
        self.memory_text = ""

    def begin_turn(self, prompt_uuid: str, words: str | None = None) -> None:
        """A turn starts with the prompt ``prompt_uuid``; ``words``, the user's own, may raise this turn's
        thinking ("think hard": its budget, or its effort on a model that thinks by effort)."""
        self.prompt_thinking = thinking.prompt_budget(words) if words is not None else None
        self.prompt_effort = thinking.prompt_effort(words) if words is not None else None
        self.conv.begin_turn(prompt_uuid)

    def give_subagents(self, service: Any, task_tool: Tool, run: Callable[..., Any]) -> None:
        """The Task tool and the service behind it (agent.runtime.subagents.install)."""
        self.subagents = service
        self.tools.append(task_tool)
        self.tool_ctx.services["task"] = run

    def attach_mcp(self, hub: McpHub) -> None:
        """Use these MCP servers (their tools, behind the tool search: agent/mcp/catalog.py)."""
        s = self.settings
        self.mcp = hub
        mode = choose_mode(s.tool_search, s.base_url)
        self.mcp_tools = McpCatalog(hub, mode, s.max_mcp_output_tokens) if hub.states else None

    def make_writer(self) -> TranscriptWriter:
        """The transcript writer (a subagent's session writes a sidechain: agent.runtime.subagents)."""
        s = self.settings
        return TranscriptWriter(
            self.transcript_path,
            self.session_id,
            str(s.cwd),
            __version__,
            last_uuid=self.last_uuid,
            secret=(s.api_key, s.auth_token),
        )

    def use_settings(self, s: Settings) -> None:
        """Continue under settings built again (/trust revoke): permissions, hooks, the tools' environment
        and the client follow; the conversation and its compaction settings stay as they are."""
        self.settings = s
        answered = self.permissions.session_allow
        self.permissions = Permissions(s, session_dir=self.session_dir)
        self.permissions.session_allow = list(answered)  # the user's "always" answers stand
        self.tool_ctx.hidden = Hidden(self.permissions.read_denied, [s.root]) if s.deny else None
        self.tool_ctx.environ = s.environ or None
        self.hooks = HookRunner(s.hooks, s.cwd, s.environ or self.environ, spill_dir=self.hook_output_dir)
        self.client = self.model_api or wiring.client(s, self._emit)
        self.client.on_binding_fallback = self.binding_fallback
        self.ports.model = self.client
        self._facts = self._learn()

    def configured_max_output(self) -> int | None:
        return self.settings.compaction.max_output_tokens  # the settings in force (/trust revoke reloads)

    def _emit(self, event: Event) -> None:
        self.emit(event)  # late-bound: the REPL swaps ``emit`` when it takes the session over

    # --- paths and the live list -------------------------------------------------------------------
    @property
    def transcript_path(self) -> Path:
        return self.settings.project_dir / f"{self.session_id}.jsonl"

    @property
    def session_dir(self) -> Path:
        return self.settings.project_dir / self.session_id

    @property
    def checkpoint_dir(self) -> Path:
        """The files the agent changed, as they were (agent.runtime.checkpoints): /rewind and /cost."""
        return self.session_dir / "checkpoints"

    @property
    def hook_output_dir(self) -> Path:
        """Where hook output too large for the model is saved in full."""
        return self.session_dir / "hook-output"

    # --- recording ---------------------------------------------------------------------------------
    def record(self, rec: dict[str, Any]) -> dict[str, Any]:
        return self.conv.record(rec)

    def account_side_request(self, message: Message) -> None:
        """Usage of compaction / notes requests counts toward /cost, not toward the context."""
        if message.usage:
            self.account_unrecorded(message.model or self.model, message.usage)

    def account_unrecorded(self, model: str, usage: dict[str, Any]) -> None:
        """Usage no message record carries (side requests, a reply cut short by Ctrl-C): counted, and
        written as a ``side-usage`` record so /cost after a resume counts it too (agent.transcript.listing)."""
        self.count_usage(model, usage)
        self.conv.record({"type": SIDE_USAGE, "model": model, "usage": dict(usage)})

    # --- model requests ----------------------------------------------------------------------------
    def where(self) -> Where:
        s = self.settings
        return Where(
            s.cwd, s.home, s.user_home, s.root, tuple(self.tool_ctx.read_files), self.permissions.read_denied
        )

    def instructions(self) -> Instructions:
        """The instruction files as they are on disk now; a file refused for safety is said once."""
        found = instruction_files(self.where())
        for reason in found.refused:
            if reason not in self._refusals_said:
                self._refusals_said.add(reason)
                self.notice(f"Instruction file not read: {reason}.", "warning")
        return found

    def compaction_instructions(self) -> str:
        s = self.settings
        return compact_instructions(s.cwd, s.home, self.where())

    def instruction_paths(self) -> list[Path]:
        return [f.path for f in self.instructions().files]

    def git(self) -> GitFacts | None:
        if not self._git_taken:
            self._git, self._git_taken = git_facts(self.settings.root), True
        return self._git

    def built_system(self) -> list[dict[str, Any]]:
        """The system prompt as the files, the date and the environment make it now."""
        s = self.settings
        blocks = build_system(
            s.cwd,
            s.home,
            self.model,
            self.clock().astimezone().date(),  # the clock a test can move to the next day
            git=self.git(),
            where=self.where(),
            instructions=self.instructions(),
            intro=s.system_prompt,
        )
        extra = []
        if s.additional_dirs:
            extra.append("Additional working directories: " + ", ".join(str(d) for d in s.additional_dirs))
        if s.append_system_prompt:
            extra.append(s.append_system_prompt)
        if extra:  # the first block is the stable one: these are fixed for the session, like it
            blocks[0] = {**blocks[0], "text": "\n\n".join([blocks[0]["text"], *extra])}
        if self.memory_text:  # loaded once, at the start: fixed for the session
            blocks.append({"type": "text", "text": self.memory_text})
        return blocks

    def fixed_system(self) -> list[dict[str, Any]] | None:
        """The session's system prompt as first sent, on models whose thinking is bound to it (None on
        the others, whose prompt is rebuilt for each request): agent.runtime.context_updates."""
        if not preserves_thinking(self.model):
            return None
        if self._fixed_system is None:
            self._fixed_system = self.built_system()
            self.record({"type": context_updates.SYSTEM_PROMPT, "blocks": self._fixed_system})
        return self._fixed_system

    def restore_system(self, blocks: list[dict[str, Any]], *, record: bool) -> None:
        """A resumed session's fixed prompt, as its transcript recorded it (``record``: write it into this
        session's own transcript too, when it continues a copy)."""
        self._fixed_system = blocks
        if record:
            self.record({"type": context_updates.SYSTEM_PROMPT, "blocks": blocks})

    def system_blocks(self) -> list[dict[str, Any]]:
        fixed = self.fixed_system()
        return fixed if fixed is not None else self.built_system()

    def tool_schemas(self) -> list[dict[str, Any]]:
        mcp = self.mcp_tools.schemas(self.loaded_tools()) if self.mcp_tools is not None else []
        return tool_schemas(self.tools, brief=self.brief_tools()) + mcp

    def loaded_tools(self) -> frozenset[str]:
        """MCP tools found before the last compaction point that no ``tool_addition`` made available again:
        sent in full (agent/mcp/catalog.py, compact/context/discovered.py)."""
        return frozenset(discovered.loaded(self.messages))

    def find_tool(self, name: str) -> Any:
        """The tool called ``name``: a built-in one, an MCP server's, or the MCP tool search; None if none."""
        tool = get(self.tools, name)
        if tool is None and self.mcp_tools is not None:
            return self.mcp_tools.tool(name)
        return tool

    @contextmanager
    def allowing(self, rules: tuple[str, ...]) -> Iterator[None]:
        """Allow calls matching ``rules`` without asking while the block runs (a custom command's
        allowed-tools); deny rules still win."""
        added = [rule for rule in rules if rule not in self.permissions.session_allow]
        self.permissions.session_allow.extend(added)
        try:
            yield
        finally:
            for rule in added:
                if rule in self.permissions.session_allow:
                    self.permissions.session_allow.remove(rule)

    def thinking_budget(self) -> int | None:
        """The budget the next main request thinks with (None: no thinking)."""
        if not thinking.supports_thinking(self.model):
            return None
        return thinking.budget_for(
            enabled=self.thinking_on,
            configured=self.settings.max_thinking_tokens,
            prompt=self.prompt_thinking,
        )

    def family(self) -> Family:
        """What the session's model accepts (the Models API's word once it came, else the table's)."""
        learned = getattr(self.client, "family", None)  # the SDK client learns; a scripted model doesn't
        return learned(self.model) if learned is not None else family_of(self.model)

    def _learn(self) -> threading.Thread | None:
        """Ask the Models API about the model off this thread (the SDK client; None for a stand-in)."""
        start = getattr(self.client, "learn_in_background", None)
        return start(self.model) if start is not None else None

    def thinking_default(self) -> bool:
        """Thinking at the start: on where the settings turn it on, and on a model that thinks by default
        unless MAX_THINKING_TOKENS=0 turned it off."""
        s = self.settings
        if s.thinking_off:
            return False
        return (
            s.always_thinking or s.max_thinking_tokens is not None or family_of(self.model).thinks_by_default
        )

    def apply_thinking(self, req: Request) -> None:
        """Make a main-loop request think, within the API's rules (agent/runtime/thinking.py)."""
        if req.tool_choice:
            return
        family = self.family()
        if family.adaptive:
            plan = thinking.plan_effort(
                family,
                on=self.thinking_on,
                session_effort=self.effort,
                prompt=self.prompt_effort,
                pinned=self.pinned_effort,
            )
            req.thinking, req.effort = plan.thinking, plan.effort
            if (plan.thinking or {}).get("type") == "between_tools":
                self.pinned_effort = plan.effort
            return
        budget = self.thinking_budget()
        if budget is None or not family.budgets:
            return
        fitted = thinking.fit(budget, req.max_tokens, max_output_tokens(req.model))
        if fitted is not None:
            budget, req.max_tokens = fitted
            req.thinking = {"type": "enabled", "budget_tokens": budget}

    def toggle_thinking(self) -> str:
        """The Tab toggle: thinking on or off for the session; the line that says what it did."""
        self.thinking_on = not self.thinking_on
        return thinking.toggle_line(self.family(), self.thinking_on, self.pinned_effort or self.effort)

    def set_effort(self, level: str | None) -> None:
        """/effort: the session's effort (None: the model's default)."""
        self.effort = level

    def set_model(self, model: str) -> None:
        self.model = resolve(model)
        self._window = None  # the window depends on the model
        dropped = context_updates.drop_foreign_thinking(self.conv, self.model)
        if dropped:
            self.notice(
                f"{dropped} thinking block{'s' if dropped != 1 else ''} of the earlier model left out: "
                f"{self.model} can't read them."
            )
        self._facts = self._learn()

    def fall_back(self, error: ModelError) -> bool:
        """--fallback-model: the model is overloaded (529): the rest of the session runs on the fallback
        model, said once. False when there is none, or it is the model in use."""
        fallback = self.settings.fallback_model
        if error.status != 529 or not fallback or fallback == self.model:
            return False
        was = self.model
        self.set_model(fallback)
        self.notice(
            f"{was} is overloaded: switched to {self.model} (--fallback-model) for this session.", "warning"
        )
        return True

    # --- thresholds --------------------------------------------------------------------------------
    def model_window(self) -> int:
        """The model's window: the Models API's (asked in the background at start; waited for here, at
        the first request, never on the way to the prompt), else the table's."""
        if self._window is None:
            if self._facts is None:  # a stand-in model: what it says, else the table's
                self._window = self.client.context_window(self.model) or context_window_for(self.model)
            else:
                first = not any(m.role == "assistant" for m in self.messages)
                if self._facts.is_alive() and first and family_of(self.model).source != "assumed":
                    return self.family().window  # a new session's first request: the table knows the model
                self._facts.join(timeout=FACTS_WAIT)
                known = "[1m]" in self.model
                self._window = context_window_for(self.model) if known else self.family().window
        return self._window

    # --- hooks -------------------------------------------------------------------------------------
    def notice(self, text: str, level: str = "info") -> None:
        self.emit(Notice(text, level))

    def hook_payload(self, event: str, **fields: Any) -> dict[str, Any]:
        return {**base_payload(self.session_id, self.transcript_path, self.settings.cwd, event), **fields}

    def run_hooks(self, event: str, match_value: str | None, **fields: Any) -> list[Any]:
        # hooks of a turn stop when the user interrupts it; the session's own (start, end) run regardless
        cancel = self.conv.cancel if event in TURN_HOOKS else None
        payload = self.hook_payload(event, **fields)
        return wiring.run_hooks(self.hooks, event, payload, match_value, self.notice, cancel)

    def hook_context(self, event: str, match_value: str | None, **fields: Any) -> str:
        """Run a hook event; what its successful hooks printed (failures are reported as notices). A
        compaction point (PreCompact) is one of memory's natural points: it is written first."""
        if event == "PreCompact":
            self.remember("compaction")
        return self.hooks.context_text(self.run_hooks(event, match_value, **fields))

    # --- memory across sessions (agent/memory) ------------------------------------------------------
    def load_memory(self) -> None:
        """Check the project's memories against the working tree and take what is true into the system
        prompt; the first screen says how many, the transcript records what (docs/memory.md)."""
        if not memory.enabled(self.settings) or self.settings.cwd is None:
            return
        # memory never takes a session down: a failure is said, and the session starts without it
        loaded = guarded(lambda: memory.load(self.settings, self.clock()), self._memory_failed("not loaded"))
        if loaded is None:
            return
        self.memory, self.memory_text = loaded, loaded.text
        for problem in loaded.problems:
            self.notice(f"Memory: {problem}", "warning")
        if loaded.text or loaded.memories:
            self.record(loaded.record())
            self.notice(loaded.summary())

    def set_memory(self, on: bool) -> None:
        """/memory on|off: memory across sessions for the rest of this session."""
        self.settings.auto_memory = on

    def _memory_failed(self, what: str) -> Callable[[Exception], None]:
        """Memory's failure said once it happens: "Memory not loaded: OSError: ..."."""

        def say(exc: Exception) -> None:
            self.notice(f"Memory {what}: {type(exc).__name__}: {exc}", "warning")

        return say

    def remember(self, trigger: str) -> int:
        """Write what this conversation's records hold into the project's memory (no model call): at a
        compaction, at the session's end, and when the user asks. The number of memories written."""
        if not memory.enabled(self.settings) or not self.messages:
            return 0
        found = guarded(
            lambda: memory.remember(
                self.settings, list(self.messages), self.clock(), session=self.session_id
            ),
            self._memory_failed(f"not written ({trigger})"),
        )
        if found is None:
            return 0
        written, problems = found
        for problem in problems:
            self.notice(f"Memory: {problem}", "warning")
        return written
