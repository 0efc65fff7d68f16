"""The working-state ledger: what the agent did, kept from its own tool calls, never from the model.

Triggers: derived on demand from the live list (``derive``): every compaction attaches it, ``/state``
shows it. No model call, no disk write of its own.
Keeps: files modified (edits, lines added/removed, time of the last change), files read (range),
commands run (exit code and a one-line outcome: every failing one since the last success of the same
command, plus the last ten), the working directory, the todo list (TodoWrite), the files the user named,
and the user's own prompts.
Where it comes from: the assistant's tool_use inputs, the tool_result blocks and the facts the tools
reported (``Message.extra["toolFacts"]``, written by the agent beside each tool_results message); the
attachment of the last compaction carries a snapshot of everything before it
(``Message.extra["workingState"]``), so the fold starts there and a resume, which loads the same
messages, rebuilds the same ledger.

The text is line-oriented so a benchmark can check it (``render``, ``render_user``):
    - {path}: {n} edit(s), +{added} -{removed} lines, last changed {ISO time}      (files modified)
    - {path} (whole file | lines A-B | lines A-end)                               (files read)
    - [exit N] $ {command, continuation lines indented}\n    → {outcome}        ([did not finish]: no code)
    - [x] / [>] ... (in progress) / [ ] {content}                                  (todo list)
    <user-message current-request="true">\n{text}\n</user-message>, then <user-message>… newest first

    live list ──► [snapshot of the last attachment] + tool calls / results / prompts after it ──► Ledger
    compaction ─► attachment(): the ledger as text + the user's messages (current request verbatim,
                  earlier ones newest first within a budget), one meta message after the summary
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from compact.thresholds import window_scale
from core.messages import Message, meta
from core.tokens import estimate_text

FACTS_KEY = "toolFacts"  # Message.extra of a tool_results message: {tool_use_id: facts}
SNAPSHOT_KEY = "workingState"  # Message.extra of the attachment: Ledger.to_dict()
RECENT_COMMANDS = 10
MAX_FAILURES = 30  # failing commands kept beside the recent ones (the oldest go first)
MAX_READS = 30
MAX_PROMPTS = 50  # prompts a snapshot carries (the budget chooses among them)
PROMPT_CHARS = 40_000  # a longer prompt is kept cut in the middle
OUTCOME_CHARS = 160
COMMAND_CHARS = 1_000
USER_BUDGET = 3_000  # tokens of the user's messages at the reference threshold
SPAN_PROMPT_TOKENS = 500  # of each user message in a collapsed span's placeholder
CURRENT_FACTOR = 4  # the current request is cut only beyond this many reference budgets (12,000 tokens)
_EXIT = re.compile(r"\nExit code (-?\d+)\s*$|^Exit code (-?\d+)\s*$")
_PATHISH = re.compile(r"^[\w.~/-]*[\w-](/[\w.-]+|\.[A-Za-z0-9]{1,8})$")  # a/b, x.py, ./x, ~/x.md
_STRIP = "\"'`()[]{}<>,;:!?"
HEADER = (
    "<working-state>\nRecorded by the agent from its own tool calls (not from the summary), so it is "
    "exact. It says what was done; the summary says why."
)
USER_HEADER = (
    "The user's own messages, word for word (newest first; the first one is the current request). "
    "They are the user's words, not instructions from the system:"
)


@dataclass
class FileChange:
    edits: int = 0
    added: int = 0
    removed: int = 0
    last: str = ""  # timestamp of the last change


@dataclass
class Command:
    command: str
    exit_code: int | None  # None: stopped (timeout, interrupt) or refused before it ran
    outcome: str
    time: str = ""


@dataclass
class Ledger:
    cwd: str = ""
    modified: dict[str, FileChange] = field(default_factory=dict)
    read: dict[str, str] = field(default_factory=dict)  # path -> range ("whole file", "lines 10-60")
    commands: list[Command] = field(default_factory=list)
    todos: list[dict[str, str]] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)  # the user's typed prompts, oldest first
    named: list[str] = field(default_factory=list)  # existing files the user's prompts name

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Ledger:
        return cls(
            cwd=str(d.get("cwd") or ""),
            modified={k: FileChange(**v) for k, v in (d.get("modified") or {}).items()},
            read=dict(d.get("read") or {}),
            commands=[Command(**c) for c in d.get("commands") or []],
            todos=[dict(t) for t in d.get("todos") or []],
            prompts=list(d.get("prompts") or []),
            named=list(d.get("named") or []),
        )

    def counts(self, user_messages: int | None = None) -> str:
        """One line for the compaction notice: how much of the state was attached."""
        shown = len(self.prompts) if user_messages is None else user_messages
        return (
            f"state: {_n(len(self.modified), 'modified file')}, {len(self.read)} read, "
            f"{_n(len(self.commands), 'command')}, {_n(len(self.todos), 'todo')}, {_n(shown, 'user message')}"
        )


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# --- folding the conversation into the ledger ------------------------------------------------------------


def derive(messages: list[Message], cwd: str) -> Ledger:
    """The ledger of this live list (``cwd``: the project directory, until a command moves)."""
    ledger = Ledger(cwd=cwd)
    uses: dict[str, dict[str, Any]] = {}
    for m in messages:
        snapshot = m.extra.get(SNAPSHOT_KEY)
        if isinstance(snapshot, dict):
            ledger = Ledger.from_dict(snapshot)  # it covers everything before it, kept messages included
            continue
        if m.role == "assistant":
            uses.update({b["id"]: b for b in m.tool_uses if "id" in b})
            continue
        if m.kind == "prompt" and m.text.strip():
            _add_prompt(ledger, m.text)
        if m.tool_results:  # (a Claude Code user record may hold results and the user's text together)
            facts = m.extra.get(FACTS_KEY) or {}
            for r in m.tool_results:
                use = uses.get(r.get("tool_use_id", ""))
                if use is not None:
                    _apply(ledger, use, r, facts.get(r.get("tool_use_id")) or {}, m.timestamp)
    return ledger


def _apply(
    ledger: Ledger, use: dict[str, Any], result: dict[str, Any], facts: dict[str, Any], when: str
) -> None:
    name, args = use.get("name"), use.get("input") or {}
    failed = bool(result.get("is_error"))
    text = _text(result.get("content"))
    if name == "Bash" and isinstance(args.get("command"), str):
        _add_command(ledger, args["command"], _exit_code(failed, text, facts), _outcome(text), when)
        if isinstance(facts.get("cwd"), str):
            ledger.cwd = facts["cwd"]
    elif failed:
        return
    elif name in ("Edit", "Write") and isinstance(args.get("file_path"), str):
        change = ledger.modified.pop(args["file_path"], FileChange())
        added, removed = _lines_changed(name, args, facts)
        ledger.modified[args["file_path"]] = FileChange(
            change.edits + 1, change.added + added, change.removed + removed, when
        )
    elif name == "Read" and isinstance(args.get("file_path"), str):
        ledger.read.pop(args["file_path"], None)
        ledger.read[args["file_path"]] = _range(args)
        while len(ledger.read) > MAX_READS:
            ledger.read.pop(next(iter(ledger.read)))
    elif name == "TodoWrite" and isinstance(args.get("todos"), list):
        ledger.todos = [
            {k: str(t.get(k, "")) for k in ("content", "status", "activeForm")}
            for t in args["todos"]
            if isinstance(t, dict)
        ]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _exit_code(failed: bool, text: str, facts: dict[str, Any]) -> int | None:
    if isinstance(facts.get("exitCode"), int):
        return int(facts["exitCode"])
    if not failed:
        return 0
    found = _EXIT.search(text.rstrip())
    return int(found.group(1) or found.group(2)) if found else None


def _outcome(text: str) -> str:
    """One line saying how the command ended: its last line of output (the exit code line left out)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if lines and _EXIT.search(lines[-1]):
        lines.pop()
    line = lines[-1] if lines else "(no output)"
    return line if len(line) <= OUTCOME_CHARS else line[: OUTCOME_CHARS - 1] + "…"


def _add_command(ledger: Ledger, command: str, code: int | None, outcome: str, when: str) -> None:
    ledger.commands.append(Command(command, code, outcome, when))
    n = len(ledger.commands)
    keep: list[Command] = []
    for i, c in enumerate(ledger.commands):
        later_success = any(d.command == c.command and d.exit_code == 0 for d in ledger.commands[i + 1 :])
        if i >= n - RECENT_COMMANDS or (c.exit_code != 0 and not later_success):
            keep.append(c)
    failing_old = [c for c in keep[: max(0, len(keep) - RECENT_COMMANDS)]]
    if len(failing_old) > MAX_FAILURES:
        keep = keep[len(failing_old) - MAX_FAILURES :]
    ledger.commands = keep


def _lines_changed(name: str, args: dict[str, Any], facts: dict[str, Any]) -> tuple[int, int]:
    if isinstance(facts.get("added"), int) and isinstance(facts.get("removed"), int):
        return int(facts["added"]), int(facts["removed"])
    if name == "Write":  # a transcript without facts (Claude Code's): the new content is all we know
        return _count_lines(str(args.get("content", ""))), 0
    return _count_lines(str(args.get("new_string", ""))), _count_lines(str(args.get("old_string", "")))


def _count_lines(s: str) -> int:
    return len(s.splitlines())


def _range(args: dict[str, Any]) -> str:
    offset, limit = args.get("offset"), args.get("limit")
    if not offset and not limit:
        return "whole file"
    start = int(offset or 1)
    return f"lines {start}-{start + int(limit) - 1}" if limit else f"lines {start}-end"


def _add_prompt(ledger: Ledger, text: str) -> None:
    ledger.prompts.append(cut_middle_chars(text, PROMPT_CHARS))
    del ledger.prompts[:-MAX_PROMPTS]
    base = Path(ledger.cwd)
    for token in text.split():
        word = token.strip(_STRIP).rstrip(".")
        if len(word) < 3 or not _PATHISH.match(word):
            continue
        path = Path(word).expanduser()
        path = path if path.is_absolute() else base / path
        try:
            if path.exists() and str(path) not in ledger.named:
                ledger.named.append(str(path))
        except OSError:
            continue


# --- the attachment ------------------------------------------------------------------------------------


def cut_middle_chars(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[… {len(text) - limit} characters of the user's message left out here …]\n{text[-tail:]}"


def cut_middle(text: str, tokens: int) -> str:
    """The text cut in the middle to about ``tokens`` tokens (marked where the cut is)."""
    have = estimate_text(text)
    if have <= tokens:
        return text
    chars = max(40, int(len(text) * tokens / have))
    return cut_middle_chars(text, chars)


def user_budget(threshold: int) -> int:
    """Tokens of the user's earlier messages, scaled with the window like the notes' tail."""
    return int(USER_BUDGET * window_scale(threshold))


def user_messages(prompts: list[str], kept: list[Message], budget: int) -> list[tuple[str, bool]]:
    """(text, is current request) pairs, newest first: the current request whole (unless it is huge),
    then earlier ones, each cut in the middle if long, while the budget lasts; none already kept verbatim."""
    if not prompts:
        return []
    visible = {m.text for m in kept if m.kind == "prompt"}
    out: list[tuple[str, bool]] = []
    current = prompts[-1]
    if current not in visible:
        out.append((cut_middle(current, max(budget, USER_BUDGET) * CURRENT_FACTOR), True))
    left = budget
    per_message = max(200, budget // 3)
    for text in reversed(prompts[:-1]):
        if left < 50:
            break
        if text in visible:
            continue
        shown = cut_middle(text, min(per_message, left))
        out.append((shown, False))
        left -= estimate_text(shown)
    return out


def render(ledger: Ledger) -> str:
    """The ledger as text (stable, line-oriented: what /state shows and the attachment carries)."""
    lines = [HEADER, f"Working directory: {ledger.cwd}", *_sections(ledger)]
    if ledger.named:
        lines.append("Files the user named: " + ", ".join(ledger.named))
    lines.append("</working-state>")
    return "\n".join(lines)


def _sections(ledger: Ledger) -> list[str]:
    lines = []
    if ledger.modified:
        lines.append(f"Files modified ({len(ledger.modified)}):")
        lines += [
            f"- {p}: {c.edits} edit{'' if c.edits == 1 else 's'}, +{c.added} -{c.removed} lines, "
            f"last changed {c.last}"
            for p, c in ledger.modified.items()
        ]
    if ledger.read:
        lines.append(f"Files read ({len(ledger.read)}, most recent last):")
        lines += [f"- {p} ({r})" for p, r in ledger.read.items()]
    if ledger.commands:
        lines.append(
            "Commands run (each failing one since its last success, then the most recent; oldest first):"
        )
        for c in ledger.commands:
            code = "did not finish" if c.exit_code is None else f"exit {c.exit_code}"
            command = cut_middle_chars(c.command, COMMAND_CHARS).replace("\n", "\n    ")
            lines.append(f"- [{code}] $ {command}\n    → {c.outcome}")
    if ledger.todos:
        lines.append("Todo list (TodoWrite):")
        marks = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
        lines += [
            f"- {marks.get(t['status'], '[ ]')} {t['content']}"
            + (" (in progress)" if t["status"] == "in_progress" else "")
            for t in ledger.todos
        ]
    return lines


def span_text(span: list[Message]) -> str:
    """What a collapsed span did, from its own calls and prompts (the placeholder carries it); "" if nothing."""
    ledger = derive(span, "")
    lines = _sections(ledger)
    users = [f"<user-message>\n{cut_middle(p, SPAN_PROMPT_TOKENS)}\n</user-message>" for p in ledger.prompts]
    if users:
        lines += ["The user's own messages in this span, word for word:", *users]
    if not lines:
        return ""
    return "\n".join(["<working-state of-collapsed-span>", *lines, "</working-state>"])


def render_user(messages: list[tuple[str, bool]]) -> str:
    if not messages:
        return ""
    parts = [USER_HEADER]
    for text, current in messages:
        tag = '<user-message current-request="true">' if current else "<user-message>"
        parts.append(f"{tag}\n{text}\n</user-message>")
    return "\n".join(parts)


@dataclass(frozen=True)
class Attachment:
    message: Message
    summary: str  # the counts line for the compaction notice


def attachment(history: list[Message], kept: list[Message], cwd: str, threshold: int) -> Attachment:
    """The one meta message that follows the summary and the kept messages after a compaction."""
    ledger = derive(history, cwd)
    users = user_messages(ledger.prompts, kept, user_budget(threshold))
    body = "\n\n".join(p for p in (render(ledger), render_user(users)) if p)
    text = (
        "The working state at the moment of the compaction follows; it is exact and complete where the "
        f"summary is not.\n\n{body}"
    )
    message = meta(text, **{SNAPSHOT_KEY: ledger.to_dict()})
    return Attachment(message, ledger.counts(len(users)))
