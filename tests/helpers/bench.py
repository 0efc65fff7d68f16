"""A Conversation and its Ports, wired the way a session wires them — without one, and on compact's floor.

Compaction code takes ``(conversation, ports)``; the bench builds both from core/, tools/ and compact/ only
(no ``agent`` import: tests/test_layers.py checks it), with what a session shares with it
(compact.owner.ConversationOwner: recording, usage, the main request, the Ports, window and thresholds):

- the model: a ``core.scripted.ScriptedModel`` (``model_api=``: no wire), or, where the wire matters, the
  fake Messages API given as ``api`` (tests/fakeapi.py; ``api.client()`` is the SDK client pointed at it);
- a real transcript (core.transcript_writer) in a temp directory, the built-in tools' schemas and context;
- the parts a session takes from agent/ are the bench's own plain stand-ins, each a port a test may
  replace: a fixed system prompt (``system=``), no hooks (``hooks=``: the Ports' hook function), no
  instruction files (``instructions=``, ``instruction_files=``). A test of compaction with the agent's
  real hook runner or CLAUDE.md belongs to tests/agent/ and passes those in.

Only the window is the bench's own (``Limits``), so a test sets it without a server.

    bench = make_bench(tmp_path, api, session_memory=True)
    bench.add(user_prompt("hi"))                  # live list + transcript + MessageRecorded event
    compactor.compact(bench.conv, bench.ports, "manual")
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from compact import owner
from compact.context.conversation import Conversation, Ports
from compact.decision.config import CompactConfig
from core.events import Notice
from core.messages import Message
from core.model import ModelService
from core.scripted import ScriptedModel
from core.transcript_writer import TranscriptWriter
from tools.base import ToolContext
from tools.registry import builtin_tools, tool_schemas
from tools.snip import SnipTool

MODEL = "claude-sonnet-4-5"
SESSION_ID = "0b5e3c1e-1111-4222-8333-444455556666"
_CONFIG = {f.name for f in dataclasses.fields(CompactConfig)}


@dataclass
class Limits:
    window: int = 200_000


# the bench's system prompt, in place of a session's (the agent's guidance and environment,
# agent.config.system_prompt): compaction only sends and counts it, so it is about as long (~800 tokens), or
# the thresholds the tests were written against would move
SYSTEM = """You assist a developer from inside their terminal, on the project in the working directory.

# How to work
- Find out before changing anything: open the files involved, look at how the code around them is used,
  and check a command's real output rather than assuming it. When a library or helper is in question, look
  at the project's dependency list and imports before relying on it.
- Use the search tools for contents and file names, and the Read tool for files, instead of shell commands
  that do the same; independent calls (several reads, a search beside a listing) go out together in one
  reply, since read-only calls run side by side.
- Match what is already there: the naming, the layout of modules and tests, the libraries in use, the
  formatting. Keep each change as small as the task allows and edit in place instead of rewriting files.
  Create no file the task does not call for, and remove any debugging aid you added.
- When you are done, run what the project uses to check itself (its tests, type checker or linter; its
  README or build files say how) and report the outcome as it is, failures included.
- A task with several steps gets a todo list, kept current: one item in progress at a time, each ticked off
  the moment it is finished.
- Anything that cannot be undone or that others would see (removing files or branches, rewriting history,
  pushing, publishing, sending anything) waits for the developer's word unless they asked for it. If the
  request is unclear, ask one short question instead of guessing.
- Make no commit unless asked. Keep keys, tokens and passwords out of files, commits and replies.
- If the developer turns down a tool call, that is final: do not look for another way to do the same
  thing; ask what they would like instead.

# How to reply
- Be brief and plain: the result first, then only what the developer needs to act on it. The terminal
  renders a little Markdown; keep it light.
- Point at code as file:line, for example pkg/module.py:120, so it can be opened directly.
- Say clearly when a step failed, when work is left, or when you are not sure of something.
- Explain a command before running it when it changes files or settings outside the project, and say
  what it did afterwards in a sentence or two. Quote error messages exactly as they appeared, trimmed to
  the lines that matter, so the developer can search for them. Leave alone whatever the task did not touch.
- When two ways of doing something are both reasonable, pick one, say which and why in a line, and carry
  on; the developer can ask for the other.

# What you see of the conversation
- Large tool results may arrive shortened: a persisted-output block names the file with the whole text
  (read it in parts with offset and limit), and a result marked as cleared was removed to save room; run
  the tool again if you still need it.
- When the context grows full, the earlier part of the conversation is replaced by a summary; the files
  you were editing are read again and kept, and the project's instruction files are always sent.
- Each message the developer wrote carries an [id:...] tag; turns that no longer help (a finished detour,
  a long exploration) can be taken out of the context with the Snip tool and those ids.

<env>
Working directory: the project
Is directory a git repo: No
Platform: linux
Model: the one named in the request
</env>"""
Hooks = Callable[..., str]  # Ports.hooks: (event, match_value, **fields) -> what the hooks printed


def _no_hooks(event: str, match_value: str | None, **fields: Any) -> str:
    return ""


@dataclass(eq=False)
class Bench(owner.ConversationOwner):
    """A session's recording, usage, requests, thresholds and shortcuts (compact.owner.ConversationOwner)
    over a bench."""

    conv: Conversation
    ports: Ports
    client: ModelService
    config: CompactConfig
    cwd: Path
    home: Path
    model: str
    limits: Limits
    events: list[Any] = field(default_factory=list)
    usage_total: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    session_id: str = SESSION_ID
    system: list[dict[str, Any]] = field(default_factory=lambda: [{"type": "text", "text": SYSTEM}])
    hooks: Hooks = _no_hooks
    instructions: Callable[[], str] = lambda: ""
    instruction_files: Callable[[], list[Path]] = lambda: []

    def emit(self, event: Any) -> None:  # type: ignore[override]
        self.events.append(event)

    def account_side_request(self, message: Message) -> None:
        """A side request's usage (the session also writes it to the transcript; the bench only counts)."""
        self.count_usage(message.model or self.model, message.usage or {})

    def hook_context(self, event: str, match_value: str | None, **fields: Any) -> str:
        return self.hooks(event, match_value, **fields)

    def notice(self, text: str, level: str = "info") -> None:
        self.events.append(Notice(text, level))

    def compaction_instructions(self) -> str:
        return self.instructions()

    def instruction_paths(self) -> list[Path]:
        return self.instruction_files()

    def view(self) -> Any:
        return self.conv.view()

    def system_blocks(self) -> list[dict[str, Any]]:
        return self.system

    def tool_schemas(self) -> list[dict[str, Any]]:
        return tool_schemas(builtin_tools() + [SnipTool()], brief=self.brief_tools())

    def model_window(self) -> int:
        return self.limits.window

    def snip(self, ids: list[str], reason: str | None = None) -> str:
        return self.conv.tools.services["snip"](ids, reason)

    # --- where things are ------------------------------------------------------------------------
    @property
    def transcript_path(self) -> Path:
        return self.conv.transcript_path

    @property
    def session_dir(self) -> Path:
        return self.conv.session_dir

    @property
    def tool_ctx(self) -> ToolContext:
        return self.conv.tools


def make_bench(
    tmp: Path,
    api: Any = None,
    *,
    session_id: str = SESSION_ID,
    model: str = MODEL,
    home: Path | None = None,
    clock: Callable[[], datetime] | None = None,
    model_api: ModelService | None = None,
    hooks: Hooks | None = None,
    system: list[dict[str, Any]] | None = None,
    instructions: Callable[[], str] | None = None,
    instruction_files: Callable[[], list[Path]] | None = None,
    **options: Any,
) -> Bench:
    """The compact floor's session builder: a Bench in ``tmp``/project, its transcript under
    ``home``/projects, its model the fake API (``api``: the wire, through the SDK) or ``model_api`` (a
    core.scripted.ScriptedModel, also taken as ``api``: no wire; with neither, an empty script); ``hooks``, ``system``,
    ``instructions`` and ``instruction_files`` replace the bench's stand-ins (see the module docstring);
    ``options`` are CompactConfig fields (session_memory defaults to off) and Limits fields. (The agent
    floor's is tests/helpers/session.py ``make_session``.)"""
    cwd = tmp / "project"
    cwd.mkdir(exist_ok=True)
    home = home or tmp / "agent-home"
    store = home / "projects" / "".join(c if c.isalnum() else "-" for c in str(cwd))
    config = {k: options.pop(k) for k in list(options) if k in _CONFIG}
    config.setdefault("session_memory", False)
    config.setdefault("notes_template", home / "session-memory-template.md")
    limits = Limits(**options)
    compaction = CompactConfig(**config)
    events: list[Any] = []
    if model_api is None and isinstance(api, ScriptedModel):
        api, model_api = None, api  # a model where the fake would be (a helper serving both): no wire
    client = model_api or (api.client(events.append) if api is not None else ScriptedModel())
    tools = ToolContext(project_dir=cwd, session_dir=store / session_id, cwd=cwd)
    writer = TranscriptWriter(store / f"{session_id}.jsonl", session_id, str(cwd), "test")
    bench = Bench(
        conv=None,  # type: ignore[arg-type]
        ports=None,  # type: ignore[arg-type]
        client=client,
        config=compaction,
        cwd=cwd,
        home=home,
        model=model,
        limits=limits,
        events=events,
        session_id=session_id,
    )
    if hooks is not None:
        bench.hooks = hooks
    if system is not None:
        bench.system = system
    if instructions is not None:
        bench.instructions = instructions
    if instruction_files is not None:
        bench.instruction_files = instruction_files
    bench.ports = bench.compaction_ports(client, events.append, compaction)
    bench.conv = owner.conversation(writer, store / session_id, tools, bench.ports, clock=clock)
    client.on_binding_fallback = bench.binding_fallback
    return bench
