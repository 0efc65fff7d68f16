"""Slash commands, shared by the REPL and print mode.

``run(session, line)`` parses ``/name args``, calls the handler registered for the name and returns a
``Result``. Every result carries ``text`` (plain text or Markdown) — what print mode prints — and
``ok``; some subclasses carry data the REPL renders richer (``ContextUsage`` as a coloured grid) or acts on
(``Exit``, ``Switched`` replaces the REPL's session). Handlers never print and never add anything to
the conversation.
"""

from __future__ import annotations

import difflib
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable

from agent.config import trust, user_settings
from agent.config.settings import Settings, reload_settings
from agent.memory import service as memory
from agent.runtime import lifecycle, mentions, rewind
from agent.runtime.sdk import unknown_model_text
from agent.runtime.session import Session
from agent.transcript.listing import list_sessions
from compact import autocompact
from compact.compaction import compactor, ledger
from compact.compaction.notes import notes_text
from compact.context import cache_health, usage
from compact.decision.decide import describe as describe_decision
from compact.workers import preparer
from core.errors import AgentError, Interrupted
from core.events import CompactFailed, CompactFinished, Retrying
from core.messages import Message
from core.models import EFFORT_NAMES, EFFORTS, PICKER, Family, effort_name, family_of, resolve
from core.tokens import estimate_blocks

if TYPE_CHECKING:  # loaded only once a command line needs it (start-up speed)
    from agent.config.custom_commands import Found

NO_COMPACTION = "No compaction in this session yet."
COMMAND_LINE = re.compile(r"^/([A-Za-z][\w:-]*)(?:\s+(.*))?$", re.DOTALL)


@dataclass
class Result:
    text: str
    ok: bool = True
    markdown: bool = False


@dataclass
class Exit(Result):
    pass


@dataclass(kw_only=True)
class Switched(Result):
    """The REPL continues with ``session`` (/clear, /resume)."""

    session: Session


@dataclass(kw_only=True)
class SessionList(Result):
    """/resume without an argument: the REPL offers to pick one by number."""

    sessions: list[Any] = field(default_factory=list)


@dataclass(kw_only=True)
class RewindMenu(Result):
    """/rewind: the prompts one can go back to (oldest first); the REPL asks which."""

    points: list[Message] = field(default_factory=list)


@dataclass(kw_only=True)
class Prompt(Result):
    """A custom command (agent/config/custom_commands.py): ``prompt`` runs as the user's message, with
    ``allowed`` rules allowing calls without asking while its turn runs."""

    prompt: str
    allowed: tuple[str, ...] = ()


@dataclass(kw_only=True)
class Compacted(Result):
    """/compact; the REPL has already shown the compaction's own events."""


@dataclass(frozen=True)
class Category:
    name: str
    key: str  # system | tools | memory | messages | free | buffer
    tokens: int
    share: float  # percent of the window
    cells: int  # squares of the 10×10 grid


@dataclass(kw_only=True)
class ContextUsage(Result):
    model: str
    used: int
    window: int
    percent: float
    categories: list[Category]
    memory_files: list[tuple[str, int]] = field(default_factory=list)
    prepared: str = (
        ""  # whether a compaction candidate is ready and what it covers (compact.workers.preparer)
    )
    extra: list[str] = field(default_factory=list)  # MCP tools, subagents, cache misses: under the grid


Handler = Callable[["Session", str], Result]


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    handler: Handler
    usage: str = ""
    aliases: tuple[str, ...] = ()


COMMANDS: dict[str, Command] = {}


def command(
    name: str, summary: str, usage: str = "", aliases: tuple[str, ...] = ()
) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        cmd = Command(name, summary, fn, usage, aliases)
        for key in (name, *aliases):
            COMMANDS[key] = cmd
        return fn

    return register


def is_command(line: str) -> bool:
    """True for "/name ..." (a path like "/etc/hosts is odd" is a message, not a command)."""
    return COMMAND_LINE.match(line.strip()) is not None


def names() -> list[str]:
    """Every name and alias, for completion and suggestions."""
    return sorted(COMMANDS)


def run(session: Session, line: str) -> Result:
    match = COMMAND_LINE.match(line.strip())
    if match is None:
        return Result(f"Not a command: {line.strip()}", ok=False)
    name, args = match.group(1).lower(), (match.group(2) or "").strip()
    cmd = COMMANDS.get(name)
    if cmd is None:
        custom = custom_for(session.settings).commands.get(name)
        if custom is None:
            return unknown(name)
        text = custom.expand(args)
        if not custom.trusted:  # the repository's words, not the user's: its @paths stay in the project
            session.foreign_mentions = frozenset(mentions.mentioned(text)) - frozenset(
                mentions.mentioned(args)
            )
        return Prompt(f"/{custom.name} {args}".strip(), prompt=text, allowed=custom.allowances)
    try:
        return cmd.handler(session, args)
    except AgentError as e:
        return Result(str(e), ok=False)


def custom_for(settings: Settings) -> Found:
    """The custom commands on disk now (a custom_commands.Found): the user's (~/.claude/commands,
    COMPACT_AGENT_HOME/commands), then the project's (.claude/commands at its root), which follow its
    trust."""
    from agent.config import custom_commands  # start-up speed: read only once a command line needs it

    user_dirs = [settings.home / "commands"]
    if settings.user_home is not None:
        user_dirs.insert(0, settings.user_home / ".claude" / "commands")
    project = settings.root / ".claude" / "commands"
    return custom_commands.load(
        user_dirs=user_dirs,
        project_dir=None if project in user_dirs else project,
        project_root=settings.root,
        trusted=settings.report.trust.trusted,
        reserved=set(COMMANDS),
    )


def unknown(name: str) -> Result:
    close = difflib.get_close_matches(name, names(), n=1, cutoff=0.6)  # 0.5 offered /quit for /init
    hint = f"Did you mean /{close[0]}?" if close else "Type /help for the list of commands."
    return Result(f"Unknown command /{name}. {hint}", ok=False)


def fmt_tokens(n: int) -> str:
    """154321 → "154k", 1530 → "1.5k", 850 → "850"."""
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}k"
    return f"{round(n / 1000)}k"


def compaction_text(trigger: str, pre_tokens: int, post_tokens: int) -> str:
    """The "a → b" line of a compaction, the same live, in /compact's result and in print mode."""
    kind = "manual" if trigger == "manual" else "auto"
    return f"Compacted · {kind} · {fmt_tokens(pre_tokens)} → {fmt_tokens(post_tokens)} tokens"


def compaction_line(event: CompactFinished) -> str:
    """The whole line after a compaction: "a → b", how long the user waited, the state attached, and what
    became of a prepared candidate (used, or refused and why) — the same in the REPL and print mode."""
    parts = [compaction_text(event.trigger, event.pre_tokens, event.post_tokens), f"{event.duration:.1f}s"]
    return " · ".join([*parts, *(p for p in (event.state, event.candidate) if p)])


def failed_line(event: CompactFailed) -> str:
    """The line after a compaction that replaced nothing, the same in the REPL and print mode: cancelled,
    nothing to compact (said plainly: it is no fault), or the failure and its reason."""
    if event.reason == compactor.CANCELLED:
        return "Compaction cancelled · the conversation is unchanged"
    if not is_failure(event):  # nothing to compact (yet): no fault, and nothing changed
        reason = event.reason.removeprefix("there is ")
        return f"{reason[:1].upper()}{reason[1:]}"
    return f"Compaction failed: {event.reason}"


def is_failure(event: CompactFailed) -> bool:
    """A compaction that went wrong, not one cancelled or with nothing to compact."""
    r = event.reason
    return not (r in (compactor.CANCELLED, compactor.NOTHING) or r.startswith(compactor.NOTHING_TO_COMPACT))


def retry_line(event: Retrying, *, live: bool = False) -> str:
    """A retry's announcement: the main reply's ("…" after the wait when shown live), or a compaction's
    own request's ("Compacting… retrying in 2s (attempt 2)")."""
    wait, attempt = f"{round(event.delay, 1):g}s", f"(attempt {event.attempt + 1})"
    if event.compaction:
        return f"Compacting… retrying in {wait} {attempt}"
    return f"Retrying in {wait}{'…' if live else ''} {attempt}"


# --- the commands ------------------------------------------------------------------------------------


@command("help", "List the commands")
def _help(session: Session, args: str) -> Result:
    seen, rows = set(), []
    for cmd in COMMANDS.values():
        if cmd.name in seen:
            continue
        seen.add(cmd.name)
        label = "/" + cmd.name + (" " + cmd.usage if cmd.usage else "")
        aliases = "".join(f" (or /{a})" for a in cmd.aliases)
        rows.append((label, cmd.summary + aliases))
    found = custom_for(session.settings)
    custom = [
        (
            "/" + c.name + (" " + c.argument_hint if c.argument_hint else ""),
            f"{c.description} ({c.scope}{'' if c.trusted else ', untrusted: allowed-tools ignored'})",
        )
        for c in found.commands.values()
    ]
    width = max(len(label) for label, _ in rows + custom)
    lines = ["Commands:"] + [f"  {label.ljust(width)}  {summary}" for label, summary in rows]
    if custom:
        lines += ["", "Custom commands:"] + [
            f"  {label.ljust(width)}  {summary}" for label, summary in custom
        ]
    lines += [f"  (not read: {problem})" for problem in found.problems]
    lines += [
        "",
        "Enter sends · Alt-Enter (or Esc then Enter) adds a line · Esc or Ctrl-C interrupts · Ctrl-D exits",
        "@path attaches a file · !command runs it in the shell · # note adds it to CLAUDE.md · "
        "Esc Esc rewinds",
    ]
    return Result("\n".join(lines))


@command(
    "compact",
    "Summarize the conversation to free context, optionally focused by INSTRUCTIONS",
    usage="[instructions]",
)
def _compact(session: Session, args: str) -> Result:
    if (
        session.settings.compaction.disable_compact
    ):  # said here, once (the compactor would also say it as a notice)
        return Compacted(compactor.DISABLED, ok=False)
    if args.strip() and (small := too_small_to_compact(session)):  # a focused summary: a call to save nothing
        return Compacted(small)
    try:
        ok = compactor.compact(session.conv, session.ports, "manual", args or None)
    except Interrupted:
        return Compacted("Compaction cancelled; the conversation is unchanged.", ok=False)
    last = session.last_compaction
    refused = CompactFailed("manual", session.conv.last_failure)
    if not ok and session.conv.last_failure and not is_failure(refused):
        return Compacted(failed_line(refused))  # nothing to compact: said plainly, no error
    if not ok or last is None:
        return Compacted("Compaction failed; the conversation is unchanged.", ok=False)
    return Compacted(compaction_text("manual", last.pre_tokens, last.post_tokens))


MIN_SAVING = 1_000  # tokens: a summary of less than this much more than its frame saves nothing


def too_small_to_compact(session: Session) -> str:
    """Why /compact with instructions would gain nothing ("" when it may): the conversation is within
    MIN_SAVING tokens of the least a compaction leaves (system prompt, tools, the summary's frame, the
    working state), which the summary's own words would fill. (Without instructions the compactor's own
    check answers, and the session notes may compact with no call at all.)"""
    view = session.conv.view()
    if not view.messages:
        return ""
    least = compactor.least_left(session.conv, session.ports, view.messages)
    if view.raw_tokens - least >= MIN_SAVING:
        return ""
    return (
        f"Nothing worth compacting: the conversation is {view.raw_tokens:,} tokens,\n"  # two lines: 80 columns
        f"and a compaction would leave at least {least:,} plus its summary."
    )


@command("context", "Show how the context window is used")
def _context(session: Session, args: str) -> Result:
    return context_usage(session)


def context_usage(session: Session) -> ContextUsage:
    """The /context breakdown; ``used`` is the number the auto-compact trigger uses."""
    th = session.thresholds()
    b = usage.breakdown(session.conv, session.ports)  # every figure as the server counts
    system, tools, memory, memory_tokens, messages = b.system, b.tools, b.memory, b.memory_tokens, b.messages
    used = b.used
    window = th.window
    buffer = max(0, window - th.reference) if th.auto_enabled else 0  # no automatic compaction: no buffer
    # at the blocking limit nothing is free: what is left of the window is the output's reserve
    free = 0 if used >= th.blocking else max(0, window - used - buffer)
    parts = [
        ("System prompt", "system", system),
        ("System tools", "tools", tools),
        ("Memory files", "memory", memory_tokens),
        ("Messages", "messages", messages),
        ("Free space", "free", free),
        ("Autocompact buffer", "buffer", buffer),
    ][: None if th.auto_enabled else -1]
    cells = _cells([t for _, _, t in parts], window)
    categories = [
        Category(name, key, tokens, tokens / window * 100 if window else 0.0, n)
        for (name, key, tokens), n in zip(parts, cells, strict=True)
    ]
    percent = used / window * 100 if window else 0.0
    lines = [
        "## Context usage",
        "",
        f"Model: {session.model}  ",
        f"Tokens: {fmt_tokens(used)} / {fmt_tokens(window)} ({percent:.0f}%)",
        "",
        "| Category | Tokens | Share |",
        "|---|---:|---:|",
    ]
    lines += [f"| {c.name} | {fmt_tokens(c.tokens)} | {c.share:.1f}% |" for c in categories]
    if memory:
        lines += ["", "Memory files:"] + [f"- {path}: {fmt_tokens(t)} tokens" for path, t in memory]
    prepared = preparer.describe(session.conv, session.ports)
    if prepared:
        lines += ["", prepared]
    if th.auto_enabled:  # the one decision's next point (compact.decision.decide)
        decision = autocompact.decision(session.conv, session.ports, session.conv.view().raw_tokens)
        lines += ["", describe_decision(decision, th.auto_compact)]
    if thinking := thinking_tokens(session):
        lines += ["", f"Of the messages, extended thinking: {fmt_tokens(thinking)} tokens"]
    extra = [*mcp_lines(session), *subagent_lines(session), *cache_lines(session)]
    if used >= th.blocking:
        extra += ["", "Context limit reached: /compact frees the context, /clear starts anew."]
    lines += extra
    return ContextUsage(
        "\n".join(lines),
        markdown=True,
        model=session.model,
        used=used,
        window=window,
        percent=percent,
        categories=categories,
        memory_files=[(_shown_path(path, session.settings), t) for path, t in memory],
        prepared=prepared,
        extra=[line.rstrip() for line in extra],
    )


def mcp_lines(session: Session) -> list[str]:
    """/context: MCP tool definitions, those in the context (loaded) and those behind the tool search."""
    catalog = session.mcp_tools
    if catalog is None:
        return []
    c = catalog.counts(session.loaded_tools())
    how = {"api": "the API's tool search", "client": "ToolSearch", "off": "none: all loaded"}[catalog.mode]
    return [
        "",
        f"MCP tools: {c['tools']} from {plural(len(catalog.hub.states), 'server')}; search: {how}  ",
        f"- loaded (in the context, part of System tools): {fmt_tokens(c['loaded'])} tokens  ",
        f"- deferred (not in the context until a search finds them): {fmt_tokens(c['deferred'])} tokens",
    ]


def cache_lines(session: Session) -> list[str]:
    """/context: the prompt-cache misses the server reported (compact.context.cache_health) and what happened to
    the model's thinking (the drop_block escape hatch, blocks left out after a model switch)."""
    conv = session.conv
    misses = conv.cache_misses
    lines = []
    if misses:
        outside = len(cache_health.unexpected(conv))
        lines += ["", f"Prompt cache misses: {len(misses)} ({outside} outside compaction points)"]
        for miss in misses[-5:]:
            where = "at a compaction point" if miss["compactionPoint"] else "between compaction points"
            lines.append(f"- {miss['reason']}: ~{fmt_tokens(miss['missedTokens'])} tokens not read, {where}")
    if conv.thinking_binding:
        lines += [
            "",
            f"Thinking binding: {conv.thinking_binding} (a request's earlier thinking was refused once)",
        ]
    if conv.foreign_thinking_dropped:
        lines += ["", f"Thinking left out after a model switch: {conv.foreign_thinking_dropped} blocks"]
    return lines


def subagent_lines(session: Session) -> list[str]:
    """/context: the subagents' work, which filled their own contexts and not this one."""
    sub = session.subagents
    if sub is None or not sub.runs:
        return []
    lines = ["", "Subagents (each in its own context; only their answers are above):"]
    lines += [
        f"- {r.description} ({r.subagent_type}, {r.status}): {plural(r.tool_uses, 'tool use')} · "
        f"{fmt_tokens(r.tokens)} tokens of its own · {r.agent_id}"
        for r in sub.runs
    ]
    return lines


def thinking_tokens(session: Session) -> int:
    """The thinking blocks' share of the messages, scaled as the server counts."""
    blocks = [
        b
        for m in session.conv.view().messages
        if m.role == "assistant"
        for b in m.content
        if b.get("type") in ("thinking", "redacted_thinking")
    ]
    return session.conv.calibration.scale(estimate_blocks(blocks)) if blocks else 0


def _cells(tokens: list[int], window: int, total: int = 100) -> list[int]:
    """Squares per category: proportional, at least one for any used category, free space absorbs rounding."""
    if window <= 0:
        return [0] * len(tokens)
    cells = [max(1, round(t / window * total)) if t else 0 for t in tokens]
    free_index = 4
    cells[free_index] = 0
    cells[free_index] = max(0, total - sum(cells))
    while sum(cells) > total:  # tiny categories rounded up: take the excess from the largest
        cells[cells.index(max(cells))] -= 1
    return cells


@command("clear", "Start a new session (the current one stays saved)")
def _clear(session: Session, args: str) -> Result:
    return Switched("Started a new session.", session=lifecycle.clear(session))


@command("resume", "List this directory's sessions, or resume one by number or id", usage="[N | ID]")
def _resume(session: Session, args: str) -> Result:
    sessions = list_sessions(session.settings.project_dir)
    if not args:
        if not sessions:
            return SessionList("No saved sessions in this directory.", sessions=[])
        lines = session_lines(sessions, str(session.settings.cwd), session.session_id)
        lines.append("Resume one with /resume N or /resume ID.")
        return SessionList("\n".join(lines), sessions=sessions)
    ref = args
    if args.isdigit():
        n = int(args)
        if not 1 <= n <= len(sessions):
            return Result(f"No session number {n}; /resume lists {len(sessions)}.", ok=False)
        ref = str(sessions[n - 1].path)
    if ref in (session.session_id, str(session.transcript_path)):
        return Result("That is the current session.", ok=False)
    new = lifecycle.resume(session, ref)
    return Switched(lifecycle.resumed_line(new), session=new)


@command("rewind", "Go back to before an earlier prompt, or summarize up to it (Esc Esc)")
def _rewind(session: Session, args: str) -> Result:
    found = rewind.points(session)
    if not found:
        return RewindMenu("No earlier prompt to go back to.", points=[])
    from agent.runtime import checkpoints

    lines = ["Prompts in this conversation:"]
    uuids = [m.uuid for m in found]
    for i, m in enumerate(found, 1):
        notes = []
        if rewind.before_compaction(session, m):
            notes.append("before the compaction")
        changed = checkpoints.changed_since(session.checkpoint_dir, uuids[i - 1 :])
        if changed:
            notes.append(f"{plural(len(changed), 'file')} changed since")
        tail = f"  ({'; '.join(notes)})" if notes else ""
        lines.append(f"  {i}. {_clip(m.text, 70)}{tail}")
    return RewindMenu("\n".join(lines), points=found)


def session_lines(sessions: list[Any], cwd: str, current: str | None = None) -> list[str]:
    """The numbered list of a directory's sessions (/resume, and --resume without an id)."""
    lines = [f"Sessions in {cwd}:"]
    for i, info in enumerate(sessions, 1):
        mark = " (current)" if info.session_id == current else ""
        lines.append(
            f"  {i}. {_when(info.mtime)} · {info.message_count} messages · "
            f"{_clip(info.first_prompt or '(no prompt)', 60)} · {info.session_id}{mark}"
        )
    return lines


@dataclass(kw_only=True)
class ModelMenu(Result):
    """/model without a name: the table of models to pick from; the REPL asks which (by number). ``text``
    is the table at ``MENU_WIDTH`` columns (print mode); ``lines(width)`` lays it out for a terminal."""

    choices: list[str] = field(default_factory=list)  # the model ids, in the table's order
    current: str = ""
    notes: list[tuple[str, str]] = field(default_factory=list)  # (alias, what it is for)

    def lines(self, width: int) -> list[str]:
        return model_menu_lines(self.current, self.choices, self.notes, width)


MENU_WIDTH = 120  # the /model table's width where no terminal says otherwise (print mode)


@command(
    "model",
    "Pick the model from a table (family, window, prices, effort), or switch to NAME or N",
    usage="[name | N]",
)
def _model(session: Session, args: str) -> Result:
    wanted = args.strip()
    if not wanted:
        return model_menu(session)
    if wanted.isdigit():
        if not 1 <= int(wanted) <= len(PICKER):
            return Result(f"No model number {wanted}; /model lists {len(PICKER)}.", ok=False)
        wanted = PICKER[int(wanted) - 1][1]
    model = resolve(wanted)
    if model not in {m for _, m, _ in PICKER} and model != session.model:
        ask = getattr(session.client, "unknown_model", None)
        offered = ask(model) if ask is not None else None
        if offered is not None:  # the API said it has no such model: nothing changes
            return Result(unknown_model_text(model, offered), ok=False)
    session.set_model(model)
    named = "" if session.model == wanted else f" ({wanted})"
    return Result(f"Model set to {session.model}{named} · {family_line(family_of(session.model))}")


def model_menu(session: Session) -> ModelMenu:
    """/model: the models of the table (core.models.PICKER) with their family, window, prices and effort;
    the current one marked, and listed too when it is none of them."""
    rows = [(alias, model, note) for alias, model, note in PICKER]
    if session.model not in {m for _, m, _ in rows}:
        rows.append(("", session.model, "the model in use"))
    choices, notes = [m for _, m, _ in rows], [(alias, note) for alias, _, note in rows]
    text = "\n".join(model_menu_lines(session.model, choices, notes, MENU_WIDTH))
    return ModelMenu(text, choices=choices, current=session.model, notes=notes)


def model_menu_lines(current: str, models: list[str], notes: list[tuple[str, str]], width: int) -> list[str]:
    """The /model table laid out for ``width`` columns: every column with the current row marked
    "← current" where it fits (with what each model is for beside it when there is room for that too, as
    at 160 columns); else the family column goes (the id names it) and the headings and the mark are
    shortened, which fits 80 columns."""
    full: list[tuple[str, ...]] = [
        ("", "alias", "model", "family", "window", "$ per Mtok in / out / cached", "effort (default)")
    ]
    for i, (model, (alias, _)) in enumerate(zip(models, notes, strict=True), 1):
        f = family_of(model)
        full.append((f"{i}.", alias, model, f.name, _window(f.window), _prices(f), _efforts(f)))
    mark = "  ← current"
    beside = False
    table = full
    if _table_width(full) + len(mark) > width:
        table = [(n, a, m, w, p, e) for n, a, m, _, w, p, e in full]
        table[0] = ("", "alias", "model", "window", "$/Mtok in/out/cached", "effort")
        mark = " ←"
    elif _table_width(full) + 2 + max(len(n) for _, n in notes) + len(mark) <= width:
        beside = True  # what each model is for, on its row
        table = [(*row, "" if i == 0 else notes[i - 1][1]) for i, row in enumerate(full)]
    widths = [max(len(row[c]) for row in table) for c in range(len(table[0]))]
    lines = [f"Model: {current} ({family_of(current).name})", ""]
    for n, row in enumerate(table):
        text = ("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))).rstrip()
        if n and models[n - 1] == current:
            text += mark
        lines.append(text)
    banded = [family_of(m) for m in models if family_of(m).long_prompt]
    for f in {f.name: f for f in banded}.values():
        lines.append(
            f"  * {f.name}: past a {_window(f.long_prompt)}-token prompt, every token bills at {f.long_factor:g}x"
        )
    if not beside:
        lines += ["", *(f"  {alias}: {note}" for alias, note in notes if alias)]
    lines += ["", "Switch with /model N or /model NAME (an alias, or any model id the API has)."]
    return lines


def _table_width(table: Sequence[tuple[str, ...]]) -> int:
    return 2 + sum(max(len(row[c]) for row in table) for c in range(len(table[0]))) + 2 * (len(table[0]) - 1)


def family_line(f: Family) -> str:
    """One line of a model's facts: family, window, prices, effort."""
    read = f.cache_read if f.cache_read is not None else f.price_in * 0.1
    return (
        f"{f.name}, {_window(f.window)} window, ${_usd(f.price_in)} in / ${_usd(f.price_out)} out / "
        f"${_usd(read)} cached per Mtok, effort {_efforts(f)}"
    )


def _window(n: int) -> str:
    """1000000 → "1M", 200000 → "200K"."""
    return f"{n / 1_000_000:g}M" if n >= 1_000_000 else f"{n / 1000:g}K"


def _usd(x: float) -> str:
    """2.0 → "2", 0.1 → "0.10", 1.5 → "1.50"."""
    return f"{x:g}" if x == int(x) else f"{x:.2f}"


def _prices(f: Family) -> str:
    read = f.cache_read if f.cache_read is not None else f.price_in * 0.1
    band = " *" if f.long_prompt else ""
    return f"{_usd(f.price_in)} / {_usd(f.price_out)} / {_usd(read)}{band}"


def _efforts(f: Family) -> str:
    if not f.efforts:
        return "by budget" if f.budgets else "none"
    span = f.efforts[0] if len(f.efforts) == 1 else f"{f.efforts[0]}–{f.efforts[-1]}"
    return f"{span} ({f.default_effort})" if f.default_effort else span


@command("effort", "Show how deeply the model thinks, or set it: " + ", ".join(EFFORT_NAMES), usage="[level]")
def _effort(session: Session, args: str) -> Result:
    family = session.family()
    if not args.strip():
        return Result(effort_line(session))
    try:
        level = effort_name(args)
    except ValueError:
        return Result(f"Unknown effort {args.strip()!r}: use one of {', '.join(EFFORT_NAMES)}", ok=False)
    session.set_effort(None if level == "auto" else level)
    if not family.adaptive:
        return Result(
            f"Effort set to {level}; {session.model} thinks by budget, so it applies on effort models"
        )
    return Result(effort_line(session))


def effort_line(session: Session) -> str:
    """The effort the next request asks for, and what the model makes of it."""
    family = session.family()
    if not family.adaptive:
        return (
            f"Effort: {session.effort or 'auto'} ({session.model} thinks by budget: MAX_THINKING_TOKENS, Tab)"
        )
    asked = session.effort
    offered = [e for e in family.efforts if asked is None or EFFORTS.index(e) <= EFFORTS.index(asked)]
    sent = offered[-1] if asked and offered else None
    line = f"Effort: {asked or 'auto'}"
    if asked and sent != asked:
        line += f" ({family.name} offers up to {family.deepest}: {sent} is sent)"
    if session.pinned_effort and session.pinned_effort != asked:
        line += (
            f"; with thinking off this conversation stays at {session.pinned_effort} (the model requires it)"
        )
    return line


@command("cost", "Cost, tokens, time and code changes of this session")
def _cost(session: Session, args: str) -> Result:
    from agent.runtime import checkpoints

    before: dict[str, Any] = {}
    earlier, cost = lifecycle.earlier_cost(
        session, before
    )  # a resumed session: what it used before this process
    u = {k: earlier.get(k, 0) + session.usage_total.get(k, 0) for k in {*earlier, *session.usage_total}}
    sub = session.subagents
    sub_cost = sub.cost if sub is not None else 0.0
    added, removed = checkpoints.totals(session.checkpoint_dir)
    wall = time.monotonic() - session.started
    lines = [
        f"Total cost: ${cost + session.cost + sub_cost:.4f}",
        f"Time: {_duration(wall)} in this run, {_duration(session.api_seconds)} of it waiting for the model",
        f"Code changes: {plural(added, 'line')} added, {plural(removed, 'line')} removed",
        f"Usage: {u.get('input_tokens', 0):,} input · {u.get('output_tokens', 0):,} output · "
        f"{u.get('cache_read_input_tokens', 0):,} cache read · "
        f"{u.get('cache_creation_input_tokens', 0):,} cache write",
    ]
    runs = len(sub.runs) if sub is not None else 0
    runs += len(before.get("runs", ()))
    if runs:  # apart from the main conversation: they ran in their own contexts
        s = dict(before.get("usage", {}))
        for key, value in (sub.usage if sub is not None else {}).items():
            s[key] = s.get(key, 0) + value
        lines += [  # its usage on a line of its own, as the session's: each fits 80 columns
            f"of which subagents ({plural(runs, 'task')}): ${sub_cost + before.get('cost', 0.0):.4f}",
            f"  usage: {s.get('input_tokens', 0):,} input · {s.get('output_tokens', 0):,} output · "
            f"{s.get('cache_read_input_tokens', 0):,} cache read · "
            f"{s.get('cache_creation_input_tokens', 0):,} cache write",
        ]
    return Result("\n".join(lines))


def _duration(seconds: float) -> str:
    """0.4s, 12.3s, 4m 05s, 1h 02m."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    return f"{minutes // 60}h {minutes % 60:02d}m"


# who wrote a compaction's summary (compact.context.result.Compaction.method), as /summary names it
WRITTEN_BY = {
    "summary": "local summary",
    "session-memory": "session notes",
    "server-summary": "server's summary",
}


@command("summary", "Show the summary written by the last compaction")
def _summary(session: Session, args: str) -> Result:
    last = session.last_compaction
    if not last:
        return Result(NO_COMPACTION)
    written = WRITTEN_BY.get(last.method)
    head = (
        f"Summary from the last compaction ({last.trigger} · {written + ' · ' if written else ''}"
        f"{fmt_tokens(last.pre_tokens)} → {fmt_tokens(last.post_tokens)} tokens):"
    )
    candidate = last.candidate
    note = (
        "\n\n_Compacted from a candidate prepared in the background._"
        if candidate == preparer.PREPARED
        else ""
    )
    if candidate and candidate != preparer.PREPARED:
        note = f"\n\n_{candidate[0].upper()}{candidate[1:]}._"  # why a prepared candidate was not used
    return Result(f"{head}\n\n{last.summary}{note}", markdown=True)


@command("state", "Show the working-state ledger a compaction would attach (files, commands, todos)")
def _state(session: Session, args: str) -> Result:
    state = ledger.derive(session.messages, str(session.tool_ctx.project_dir))
    users = ledger.user_messages(state.prompts, [], ledger.user_budget(session.thresholds().auto_compact))
    return Result(
        state_for_a_person(ledger.render(state), [text for text, _ in users], state.counts(len(users)))
    )


def state_for_a_person(rendered: str, prompts: list[str], counts: str) -> str:
    """/state: the ledger's lines without the wrapping meant for the model (its tags and preamble),
    then the user's own prompts (newest first, one line each) and the counts."""
    body = rendered.split("\n")
    body = [line for line in body if not line.startswith(("<working-state", "</working-state"))]
    body = [line for line in body if line not in ledger.HEADER.split("\n")]
    lines = ["What a compaction would carry over (the working state):", *body]
    if prompts:
        lines += ["", f"Your messages it would keep word for word ({len(prompts)}, newest first):"]
        lines += [f"- {_clip(text, 100)}" for text in prompts]
    return "\n".join([*lines, "", counts])


@command("history", "Show, in brief, the messages the last compaction replaced")
def _history(session: Session, args: str) -> Result:
    last = session.last_compaction
    if not last:
        return Result(NO_COMPACTION)
    messages = last.replaced()  # a resumed session reads them from the transcript
    lines = [f"Before the last compaction ({len(messages)} messages):"]
    lines += [f"{i:>4}. {brief(m)}" for i, m in enumerate(messages, 1)]
    return Result("\n".join(lines))


def brief(m: Message) -> str:
    """One line for a message: who, and what it said or did."""
    if m.role == "assistant":
        calls = [f"{b.get('name')}({_clip(_first_arg(b.get('input') or {}), 40)})" for b in m.tool_uses]
        said = _clip(m.text, 80) if m.text.strip() else ""
        return "assistant: " + " · ".join(x for x in [said, *calls] if x) if (said or calls) else "assistant"
    if m.tool_results:
        errors = sum(1 for b in m.tool_results if b.get("is_error"))
        note = f" ({errors} error{'s' if errors != 1 else ''})" if errors else ""
        return f"tool results: {len(m.tool_results)}{note}"
    label = {"meta": "context", "summary": "summary"}.get(getattr(m, "kind", ""), "user")
    return f"{label}: {_clip(m.text, 100)}"


@command(
    "memory",
    "Show the project's memory (checked against the code) and this session's notes",
    usage="[on|off]",
)
def _memory(session: Session, args: str) -> Result:
    if args in ("on", "off"):
        session.set_memory(args == "on")
        state = "on" if args == "on" else "off (nothing is written from this session, nothing more is loaded)"
        return Result(
            f"Memory across sessions is {state} for this session (autoMemoryEnabled in settings.json keeps it so)."
        )
    if args:
        return Result(f"Unknown argument {args!r}: use /memory, /memory on or /memory off.", ok=False)
    parts = []
    if not session.settings.compaction.session_memory:
        parts.append("Session memory is off (COMPACT_AGENT_SESSION_MEMORY=0).")
    else:
        text = notes_text(session.notes_path)
        if not text or not text.strip():
            parts.append("No session notes yet; they start once the conversation reaches about 10k tokens.")
        else:
            parts.append(f"Session notes ({_shown_path(session.notes_path, session.settings)}):\n\n{text}")
    parts.append(project_memory(session))  # what outlives the session, after this session's own notes
    return Result("\n\n".join(parts), markdown=True)


def project_memory(session: Session) -> str:
    """/memory's first part: what outlives the session, each memory with its state and evidence."""
    s = session.settings
    if not memory.enabled(s):
        return (
            "Memory across sessions is off (autoMemoryEnabled: false, CLAUDE_CODE_DISABLE_AUTO_MEMORY=1 or "
            "/memory off)."
        )
    loaded = session.memory
    where = _shown_path(memory.folder(s) / "MEMORY.md", s)  # ~/… as the rest of the screen shows paths
    if loaded is not None:
        head = (
            f"Project memory ({where}): at this session's start {loaded.served} loaded, {loaded.stale} stale, "
            f"{loaded.refreshed} refreshed (about {fmt_tokens(loaded.tokens)} tokens)."
        )
        memories = loaded.memories
    else:
        memories = [m for m in memory.read_all(s) if m.state not in ("forgotten", "expired")]
        head = f"Project memory ({where}): not loaded into this session (a resumed one keeps what it started with)."
    if not memories:
        return (
            f"Project memory ({where}): none yet. It is written from what the agent records at a compaction, "
            'at the end of a session, and when you say "remember ...".'
        )
    lines = memory.listing(memories)
    return head + "\n\n```\n" + "\n".join(lines) + "\n```"


@command(
    "trust",
    "Show this project's trust and the permission rules, or revoke the trust",
    usage="[revoke]",
    aliases=("permissions",),
)
def _trust(session: Session, args: str) -> Result:
    s = session.settings
    if args == "revoke":
        if not trust.revoke(s.home, s.root):
            return Result(f"{s.root} is not trusted; nothing to revoke.")
        session.use_settings(reload_settings(s, session.environ))
        return Result(
            f"Trust in {s.root} revoked: its settings files' hooks, env and widened permissions no "
            "longer apply, from now on."
        )
    if args:
        return Result(f"Unknown argument {args!r}: use /trust, or /trust revoke.", ok=False)
    return Result(trust_report(session))


def trust_report(session: Session) -> str:
    s = session.settings
    if s.report.trust.trusted:
        lines = [
            f"Project {s.root}: trusted since {s.report.trust.since[:16].replace('T', ' ')} (/trust revoke withdraws it)."
        ]
        if s.report.trust.confirmed_keys:
            lines.append("Confirmed keys from its settings: " + ", ".join(s.report.trust.key_names()))
    else:
        lines = [
            f"Project {s.root}: not trusted (restart the REPL here to be asked, or pass --trust-project)."
        ]
    if s.report.ignored:
        lines += ["Ignored from its settings files:"] + [
            f"  - {i.what}  ({i.source})" for i in s.report.ignored
        ]
    lines += [f"Permission mode: {session.permissions.mode}"]
    for name, rules in (("allow", s.allow), ("ask", s.ask), ("deny", s.deny)):
        lines.append(f"{name.capitalize()} rules: " + (", ".join(rules) if rules else "(none)"))
    answered = session.permissions.session_allow
    lines.append(
        'Allowed for this session by "always" answers: ' + (", ".join(answered) if answered else "(none)")
    )
    if s.additional_dirs:
        lines.append("Additional directories: " + ", ".join(str(d) for d in s.additional_dirs))
    return "\n".join(lines)


@command("mcp", "MCP servers: state and tools; reconnect one", usage="[reconnect NAME]")
def _mcp(session: Session, args: str) -> Result:
    hub = session.mcp
    if hub is None or not hub.states:
        return Result(
            "No MCP servers configured (.mcp.json, ~/.claude.json, settings mcpServers or --mcp-config; "
            "`compact-agent mcp add` adds one)."
        )
    words = args.split()
    if words[:1] == ["reconnect"]:
        if len(words) != 2 or words[1] not in hub.states:
            return Result(f"Usage: /mcp reconnect NAME (one of: {', '.join(hub.states)})", ok=False)
        hub.reconnect(words[1])
        hub.wait(hub.connect_timeout + 1, [words[1]])
        state = hub.states[words[1]]
        return Result(f"{state.name}: {_server_status(state)}", ok=state.status == "connected")
    if words:
        return Result("Usage: /mcp, or /mcp reconnect NAME", ok=False)
    hub.start()
    catalog = session.mcp_tools
    loaded = session.loaded_tools()
    lines = ["MCP servers:"]
    for state in hub.states.values():
        found = sum(1 for name in loaded if name.startswith(f"mcp__{state.name}__"))
        extra = f", {found} loaded" if found else ""
        lines.append(
            f"  {state.name} [{state.config.scope}] {state.config.describe()}: {_server_status(state)}{extra}"
        )
    if catalog is not None:
        lines.append(f"Tool search: {catalog.mode}")
    return Result("\n".join(lines))


def _server_status(state: Any) -> str:
    if state.status == "connected":
        return f"connected, {len(state.tools)} tools"
    return f"{state.status} ({state.error})" if state.error else state.status


@command("add-dir", "Let the tools read and edit another directory, like the project", usage="DIR")
def _add_dir(session: Session, args: str) -> Result:
    from pathlib import Path

    raw = args.strip()
    if not raw:
        dirs = session.permissions.additional_dirs
        return Result("Additional directories: " + (", ".join(map(str, dirs)) if dirs else "none"))
    path = Path(raw).expanduser()
    path = (path if path.is_absolute() else session.settings.cwd / path).resolve()
    if not path.is_dir():
        return Result(f"{path} is not a directory", ok=False)
    if path not in session.permissions.additional_dirs:
        session.permissions.additional_dirs.append(path)
    return Result(f"Added {path}: the tools may read and edit it for the rest of this session.")


@command(
    "status", "Version, session, model, API endpoint, permission mode, settings files and MCP at a glance"
)
def _status(session: Session, args: str) -> Result:
    from agent import __version__

    s = session.settings
    family = session.family()
    thinking = "on" if session.thinking_on else "off"
    effort = f" · effort {session.effort or 'auto'}" if family.adaptive else ""
    where = f" (project root {s.root})" if s.root != s.cwd else ""
    credential = (
        f"API key from {_source(s, 'api_key')}"
        if s.api_key
        else (f"auth token from {_source(s, 'auth_token')}" if s.auth_token else "no credentials")
    )
    lines = [
        f"Compact Agent {__version__}",
        f"Session: {session.session_id} ({plural(len(session.messages), 'message')})",
        f"Directory: {s.cwd}{where}",
        f"Model: {session.model} · window {fmt_tokens(session.model_window())} · thinking {thinking}{effort}",
        f"API: {s.base_url or 'https://api.anthropic.com'} · {credential}",
        f"Permission mode: {session.permissions.mode}",
        "Settings files: " + (", ".join(settings_files(s)) or "none"),
        "Memory files: " + (", ".join(_shown_path(p, s) for p in session.instruction_paths()) or "none"),
    ]
    hub = session.mcp
    if hub is not None and hub.states:
        up = sum(1 for st in hub.states.values() if st.status == "connected")
        lines.append(f"MCP: {plural(len(hub.states), 'server')}, {up} connected (/mcp for more)")
    else:
        lines.append("MCP: no servers")
    return Result("\n".join(lines))


def settings_files(s: Settings) -> list[str]:
    """The settings files that exist and were read, as the user would type them."""
    user = [s.user_home / ".claude" / "settings.json"] if s.user_home is not None else []
    candidates = [
        *user,
        s.home / "settings.json",
        s.root / ".claude" / "settings.json",
        s.root / ".claude" / "settings.local.json",
    ]
    return [_shown_path(p, s) for p in dict.fromkeys(candidates) if p.is_file()]


def _shown_path(path: Any, s: Settings) -> str:
    """A path as short as it is clear: relative to the project, else with ~ for the home directory."""
    from pathlib import Path

    p = Path(path)
    for base, prefix in ((s.cwd, ""), (s.user_home, "~/")):
        if base is not None:
            try:
                return prefix + str(p.relative_to(base))
            except ValueError:
                pass
    return str(p)


def _source(s: Settings, name: str) -> str:
    return s.report.sources.get(name, "the environment").removeprefix("env ")


@dataclass(kw_only=True)
class ConfigMenu(Result):
    """/config: the settings in effect, then the ones the user may change here; the REPL asks which.
    ``text`` is the list at ``MENU_WIDTH`` columns (print mode); ``lines(width)`` lays it out for a
    terminal, every line within its width and broken between words only."""

    choices: list[str] = field(default_factory=list)  # the changeable keys, numbered from 1
    rows: list[tuple[str, str, str]] = field(default_factory=list)  # (name, value, source) in effect
    files: tuple[str, str] = ("", "")  # the user's own settings file as shown; where /config saves
    changes: list[tuple[str, str, str]] = field(default_factory=list)  # (key, value now, what it takes)

    def lines(self, width: int) -> list[str]:
        return config_lines(self, width)


def config_lines(menu: ConfigMenu, width: int) -> list[str]:
    """/config's list for ``width`` columns: a row's source beside its value when the line fits, else
    under it; a value too long for its column shortened in the middle; prose broken between words."""
    from agent.frontend.layout import columns, fill

    at = 2 + min(34, max(len(n) for n, _, _ in menu.rows)) + 2
    out = ["Settings in effect (docs/settings.md says what each does):"]
    for name, value, source in menu.rows:
        out += columns(f"  {name}", value, f"({source})" if source else "", at, width)
    yours, saved = menu.files
    out += [
        "",
        *fill(
            "Values without a source are the defaults. Change them in ~/.claude/settings.json or "
            f"{yours} (yours), .claude/settings.json (the project's), or the environment.",
            width,
        ),
        "",
        *fill(f"Change these here (saved to {saved}, yours):", width),
    ]
    key_width = max(len(key) for key, _, _ in menu.changes)
    for i, (key, now, what) in enumerate(menu.changes, 1):
        head = f"  {i}. {key.ljust(key_width)}  {now:<17}  "
        out += fill(what, width, " " * len(head), first=head)
    out += fill("/config KEY VALUE changes one (KEY: a number or a name).", width)
    return out


@command(
    "config",
    "The settings in effect and where each came from; change the model, auto-compact, thinking and more",
    usage="[key [value]]",
)
def _config(session: Session, args: str) -> Result:
    from agent.config.settings import TABLE

    if args.strip():
        key, _, typed = args.strip().partition(" ")
        return config_change(session, key, typed)
    s = session.settings
    rows = []
    for row in TABLE:
        if not (row.key or row.env) or row.name in ("api_key", "auth_token"):
            continue
        holder = getattr(s, row.owner) if row.owner else s
        value: Any = getattr(holder, row.name, None)
        name = row.key or row.env
        source = s.report.sources.get(row.name)
        if row.name == "model":  # what the session uses (a /model switch, the newest Sonnet by default)
            value, source = session.model, source or "default: the newest Sonnet"
        elif row.name == "environ":  # the files' variables only: the whole environment is no setting
            value = sorted(k for k in s.environ if s.report.sources.get(f"env.{k}"))
        shown = _value(value)
        if isinstance(value, (str, os.PathLike)) and os.path.isabs(value):  # a path as the screen shows it
            shown = _shown_path(value, s)
        elif value is None and row.shown_default is not None:  # what docs/settings.md says it is
            shown = {"true": "on", "false": "off"}.get(row.shown_default, row.shown_default)
        rows.append((name, shown, _shown_path(source, s) if source and "/" in source else source or ""))
    changes = []
    for item in user_settings.CHANGEABLE:
        now = session.model if item.key == "model" else user_settings.current(s, item.key)
        what = "a model id or alias" if item.choices == ("",) else " | ".join(item.choices)
        later = "" if item.live else " (from the next start)"
        changes.append((item.key, user_settings.shown(now), what + later))
    menu = ConfigMenu(
        "",
        choices=[c.key for c in user_settings.CHANGEABLE],
        rows=rows,
        files=(_shown_path(s.home / "settings.json", s), _shown_path(user_settings.settings_file(s), s)),
        changes=changes,
    )
    menu.text = "\n".join(menu.lines(MENU_WIDTH))
    return menu


def config_change(session: Session, name: str, typed: str) -> Result:
    """/config SETTING VALUE: checked by the setting's row, written to the user's settings file (0600),
    and applied to this session where it can be."""
    item = user_settings.find(name)
    if item is None:
        keys = ", ".join(c.key for c in user_settings.CHANGEABLE)
        return Result(f"/config can't change {name!r} here; it changes: {keys}.", ok=False)
    if not typed.strip():
        now = session.model if item.key == "model" else user_settings.current(session.settings, item.key)
        return Result(f"{item.key} is {user_settings.shown(now)}: /config {item.key} VALUE changes it.")
    try:
        value = user_settings.parse(item, typed)
    except ValueError as e:
        return Result(f"{item.key} takes {e}; nothing changed.", ok=False)
    if item.key == "model":  # checked as /model checks it: a typo is answered with the ids the API has
        switched = _model(session, str(value))
        if not switched.ok:
            return switched
    s = session.settings
    try:
        path = user_settings.write(s, item.key, value)
    except OSError as e:
        return Result(f"Could not save {item.key}: {e}", ok=False)
    above = user_settings.overridden(s, item.key)
    if item.live:
        _apply_setting(session, item.key, value)
    where = _shown_path(path, s)
    said = f"{item.key} set to {user_settings.shown(value)} (saved to {where})"
    if above is not None:
        return Result(f"{said}, but {_shown_path(above, s) if '/' in above else above} sets it too and wins.")
    return Result(said + ("." if item.live else "; it applies from the next start."))


def _apply_setting(session: Session, key: str, value: Any) -> None:
    """A setting /config changed, applied to the running session (the model was switched already)."""
    from dataclasses import replace

    s = session.settings
    if key == "alwaysThinkingEnabled":
        s.always_thinking = bool(value)
        session.thinking_on = session.thinking_default()
    elif key == "effortLevel":
        s.effort = None if value == "auto" else str(value)
        session.set_effort(s.effort)
    elif key == "autoCompactEnabled":
        s.compaction = replace(s.compaction, auto_compact=bool(value))
        # every holder of the conversation's compaction settings (compact.start) gets the new ones
        session.ports.config = session.conv.window.config = s.compaction
        if session.conv.view_ctx is not None:
            session.conv.view_ctx.config = s.compaction
    elif key == "permissions.defaultMode":
        s.permission_mode = session.permissions.mode = str(value)


def _value(value: Any) -> str:
    import json

    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, dict)):
        text = json.dumps(value, ensure_ascii=False, default=str)
        return text if len(text) <= 40 else text[:39] + "…"
    return str(value)


@command("doctor", "Check the setup: settings problems, stale permission rules, MCP servers, credentials")
def _doctor(session: Session, args: str) -> Result:
    import shutil

    s = session.settings
    problems: list[str] = [f"settings: {w}" for w in s.report.warnings]
    problems += [f"not applied (project not trusted): {i.what} ({i.source})" for i in s.report.ignored]
    problems += stale_rules(session)
    if not (s.api_key or s.auth_token):
        problems.append("no API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)")
    if shutil.which("git") is None:
        problems.append("git is not on PATH: the system prompt has no repository facts")
    lines = ["Setup check:"]
    lines += [f"  ✗ {p}" for p in problems] or [
        "  ✓ settings files read without problems; every rule names a tool"
    ]
    hub = session.mcp
    if hub is not None and hub.states:
        lines.append("MCP servers:")
        for state in hub.states.values():
            mark = "✓" if state.status == "connected" else ("…" if state.status == "pending" else "✗")
            lines.append(f"  {mark} {state.name}: {_server_status(state)}")
    else:
        lines.append("MCP servers: none configured")
    lines.append("Settings files: " + (", ".join(settings_files(s)) or "none"))
    return Result("\n".join(lines), ok=not problems)


def stale_rules(session: Session) -> list[str]:
    """Permission rules that can never match: a tool this agent lacks, an MCP server not configured, an
    allow rule a deny rule of the same text cancels."""
    s = session.settings
    tools = {t.name for t in session.tools}
    servers = set(session.mcp.states) if session.mcp is not None else set()
    out = []
    for kind, rules in (("allow", s.allow), ("ask", s.ask), ("deny", s.deny)):
        for rule in rules:
            name = rule.split("(", 1)[0]
            if name.startswith("mcp__"):
                server = name.split("__")[1] if name.count("__") >= 1 else ""
                if server and server not in servers:
                    out.append(f'stale {kind} rule "{rule}": no MCP server "{server}" is configured')
            elif name not in tools:
                out.append(f'stale {kind} rule "{rule}": this agent has no tool "{name}"')
    out += [
        f'allow rule "{rule}" has no effect: a deny rule says the same' for rule in s.allow if rule in s.deny
    ]
    return out


@command("export", "Write the conversation as Markdown to FILE (default: a dated file here)", usage="[file]")
def _export(session: Session, args: str) -> Result:
    from pathlib import Path

    from agent.transcript.export import to_markdown
    from core.private import write_private

    if not any(m.role == "assistant" for m in session.messages):
        return Result("Nothing to export yet: the conversation is empty.", ok=False)
    first = next((m.text for m in session.messages if m.is_typed_prompt and m.text.strip()), "conversation")
    slug = "-".join(re.findall(r"[a-z0-9]+", first.lower())[:6]) or "conversation"
    name = args.strip() or f"{datetime.now():%Y-%m-%d}-{slug}.md"
    path = Path(name).expanduser()
    path = path if path.is_absolute() else session.settings.cwd / path
    if path.exists():
        return Result(f"{_shown_path(path, session.settings)} exists already: give another name.", ok=False)
    if why := session.permissions.note_refusal(path, None):
        return Result(f"Not written: {why}.", ok=False)
    title = f"Conversation {session.session_id} ({datetime.now():%Y-%m-%d %H:%M})"
    try:
        write_private(path, to_markdown(session.messages, title=title))
    except OSError as e:
        return Result(f"Could not write {path}: {e.strerror or e}", ok=False)
    return Result(f"Exported the conversation to {_shown_path(path, session.settings)}")


@command("init", "Write a starting CLAUDE.md for this project from what the repository shows")
def _init(session: Session, args: str) -> Result:
    from agent.config.starter import starter
    from core.private import write_private

    s = session.settings
    target = s.root / "CLAUDE.md"
    if target.exists():
        return Result(
            f"{_shown_path(target, s)} exists already; /init leaves it as it is (edit it, or # note adds a line).",
            ok=False,
        )
    why = session.permissions.note_refusal(target, [s.root])
    if why:
        return Result(f"Not written: {why}.", ok=False)
    text = starter(s.root)
    write_private(target, text)
    target.chmod(0o644)  # shared through the repository, like any other file of it
    lines = text.count("\n")
    return Result(
        f"Wrote {_shown_path(target, s)} ({plural(lines, 'line')}): the facts found, and headings to fill in. "
        "It is read with every request."
    )


def plural(n: int, word: str) -> str:
    """ "1 line", "2 lines"."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


@command("exit", "Leave the agent", aliases=("quit",))
def _exit(session: Session, args: str) -> Result:
    return Exit("Bye.")


# --- helpers -----------------------------------------------------------------------------------------


def _clip(text: str, n: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def _first_arg(args: dict[str, Any]) -> str:
    for key in ("file_path", "command", "pattern", "ids"):
        if key in args:
            return str(args[key])
    return next((str(v) for v in args.values()), "")


def _when(mtime: Any) -> str:
    if isinstance(mtime, (int, float)):
        mtime = datetime.fromtimestamp(mtime)
    if isinstance(mtime, datetime):
        if mtime.tzinfo is not None:
            mtime = mtime.astimezone()
        return mtime.strftime("%Y-%m-%d %H:%M")
    return str(mtime)
