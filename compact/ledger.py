"""The working-state ledger: what the agent did, kept from its own tool calls, never from the model.

Triggers: derived on demand from the live list (``derive``): every compaction attaches it, ``/state``
shows it. No model call; the only disk write is the complete lists when the text is over its budget.
Keeps: files modified (edits, lines added/removed, time of the last change), files read (range), each
command's latest result (exit code and a one-line outcome; every failing one, plus the last ten; a
failure a later, wider run of the same program passed is marked), recent Grep/Glob searches (pattern,
path, what they found), the working directory, the todo list (TodoWrite), the files the user named, the
final answers of the last turns, the user's own prompts, and the delegated tasks (Task: agent id,
description, status, sidechain path).
Where it comes from: the assistant's tool_use inputs, the tool_result blocks and the facts the tools
reported (``Message.extra["toolFacts"]``, written by the agent beside each tool_results message); the
attachment of the last compaction carries a snapshot of everything before it
(``Message.extra["workingState"]``), so the fold starts there and a resume, which loads the same
messages, rebuilds the same ledger.
Budgets (all scale with T): the working state 4% (``ledger_budget``; over it SHORT: paths without
details, then GROUPED: paths by directory, and the complete text goes to a private file under
``<session dir>/working-state/`` that the text names), final answers 3%, the user's words 6%
(``user_messages``: never cut in the middle; over budget the current request and rule / correction /
decision messages stay whole, the others show their first line).

The text is line-oriented so a benchmark can check it (``render``, ``render_user``):
    - {path}: {n} edit(s), +{added} -{removed} lines, last changed {ISO time}      (files modified)
    - {path} (whole file | lines A-B | lines A-end)                               (files read)
    - [exit N] $ {command, continuation lines indented}\n    → {outcome}        ([did not finish]: no code)
    - Grep '{pattern}' in {path}: {found}                                          (searches)
    - {agent id} [{status}] {description} ({type}) → {sidechain path}             (delegated tasks)
    - [x] / [>] ... (in progress) / [ ] {content}                                  (todo list)
    <final-answer>\n{text}\n</final-answer>                                         (oldest first)
    <user-message>… oldest first; current-request="true" / kept-above="true" mark the current request
    and one kept verbatim in the tail

    live list ──► [snapshot of the last attachment] + tool calls / results / prompts after it ──► Ledger
    compaction ─► attachment(): working state + final answers + the user's messages, within their
                  budgets, one meta message after the summary and the kept messages
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.messages import Message, meta, new_uuid
from core.private import write_private
from core.tokens import estimate_text

FACTS_KEY = "toolFacts"  # Message.extra of a tool_results message: {tool_use_id: facts}
SNAPSHOT_KEY = "workingState"  # Message.extra of the attachment: Ledger.to_dict()
RECENT_COMMANDS = 10
MAX_FAILURES = 30  # failing commands kept beside the recent ones (the oldest go first)
MAX_READS = 30
RECENT_SEARCHES = 10
RECENT_ANSWERS = 5
LEDGER_SHARE = 0.04  # of T for the working state itself (files, commands, searches, todo)
LEDGER_FLOOR = 400
LEDGER_CAP = 12_000
ANSWER_SHARE = 0.03  # of T for the final answers of recent turns
ANSWER_FLOOR = 300
ANSWER_CAP = 8_000
GROUP_NEWEST = 3  # paths named in each directory group, most recent first
MAX_GROUPS = 12
COMPACT_READS = 3
COMPACT_COMMANDS = 5
FULL, SHORT, GROUPED = 0, 1, 2  # the ledger's levels of detail (render)
FULL_LIST_DIR = "working-state"  # under the session directory: the complete lists, one file a compaction
MAX_PROMPTS = 500  # prompts a snapshot carries (the budget chooses how each is shown)
PROMPT_CHARS = 200_000  # a longer prompt is carried by its head (the transcript has the rest)
OUTCOME_CHARS = 160
COMMAND_CHARS = 1_000
USER_SHARE = 0.06  # of T for the user's own messages (user_budget), at least USER_FLOOR, at most USER_CAP
USER_FLOOR = 600
USER_CAP = 24_000
FIRST_LINE_CHARS = 300
# words that state a rule, a correction or a decision: such messages stay whole over the budget
_RULE = re.compile(
    r"(?i)\b(don'?t|do not|never|always|only|must|instead|actually|should(?: not|n'?t)|make sure|avoid|"
    r"from now on|no longer|rather|stop|revert|remember|keep|prefer|not)\b"
)
SPAN_PROMPT_TOKENS = 500  # of each user message in a collapsed span's placeholder
_EXIT = re.compile(r"\nExit code (-?\d+)\s*$|^Exit code (-?\d+)\s*$")
_PATHISH = re.compile(r"^[\w.~/-]*[\w-](/[\w.-]+|\.[A-Za-z0-9]{1,8})$")  # a/b, x.py, ./x, ~/x.md
_STRIP = "\"'`()[]{}<>,;:!?@"  # "@x.py" is the REPL's way of naming x.py
HEADER = (
    "<working-state>\nRecorded by the agent from its own tool calls (not from the summary), so it is "
    "exact. It says what was done; the summary says why."
)
USER_HEADER = (
    "The user's own messages so far, oldest first, so a later one stands after what it revises; the "
    'current request is marked current-request="true"; kept-above="true" marks one kept word for word in '
    "the messages above (its first line here). They are the user's words, not instructions from the system:"
)
FIRST_LINE_NOTE = "[its first line only: the whole message is in the transcript named above]"


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
    passed_later: str = ""  # a later, wider run of the same program that passed (this failure is old news)


@dataclass
class Ledger:
    cwd: str = ""
    modified: dict[str, FileChange] = field(default_factory=dict)
    read: dict[str, str] = field(default_factory=dict)  # path -> range ("whole file", "lines 10-60")
    commands: list[Command] = field(default_factory=list)
    todos: list[dict[str, str]] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)  # the user's typed prompts, oldest first
    named: list[str] = field(default_factory=list)  # existing files the user's prompts name
    searches: list[dict[str, str]] = field(
        default_factory=list
    )  # recent Grep / Glob: tool, pattern, path, found
    answers: list[str] = field(default_factory=list)  # final replies of recent turns, oldest first
    pending: str = ""  # the latest reply text of the turn in progress (its final answer so far)
    # delegated tasks (Task calls): agent id -> description, status, sidechain transcript path
    tasks: dict[str, dict[str, str]] = field(default_factory=dict)

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
            searches=[dict(x) for x in d.get("searches") or []],
            answers=list(d.get("answers") or []),
            pending=str(d.get("pending") or ""),
            tasks={k: dict(v) for k, v in (d.get("tasks") or {}).items()},
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
            if m.text.strip():
                ledger.pending = m.text.strip()
            continue
        if m.kind == "prompt" and m.text.strip():
            _close_turn(ledger)
            _add_prompt(ledger, m.text)
        if m.tool_results:  # (a Claude Code user record may hold results and the user's text together)
            facts = m.extra.get(FACTS_KEY) or {}
            for r in m.tool_results:
                use = uses.get(r.get("tool_use_id", ""))
                if use is not None:
                    _apply(ledger, use, r, facts.get(r.get("tool_use_id")) or {}, m.timestamp)
    if messages and messages[-1].role == "assistant" and not messages[-1].tool_uses:
        _close_turn(ledger)  # the turn ended with that reply: it is the turn's final answer
    return ledger


def _close_turn(ledger: Ledger) -> None:
    if ledger.pending:
        ledger.answers = [*ledger.answers, ledger.pending][-RECENT_ANSWERS:]
        ledger.pending = ""


def _apply(
    ledger: Ledger, use: dict[str, Any], result: dict[str, Any], facts: dict[str, Any], when: str
) -> None:
    name, args = use.get("name"), use.get("input") or {}
    failed = bool(result.get("is_error"))
    text = _text(result.get("content"))
    if name == "Task" and facts.get("agentId"):  # failed ones too: an interrupted task is worth knowing
        _add_task(ledger, facts)
    elif name == "Bash" and isinstance(args.get("command"), str):
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
    elif name in ("Grep", "Glob") and isinstance(args.get("pattern"), str):
        _add_search(ledger, name, args, text)
    elif name == "TodoWrite" and isinstance(args.get("todos"), list):
        ledger.todos = [
            {k: str(t.get(k, "")) for k in ("content", "status", "activeForm")}
            for t in args["todos"]
            if isinstance(t, dict)
        ]


def _add_task(ledger: Ledger, facts: dict[str, Any]) -> None:
    ledger.tasks[str(facts["agentId"])] = {
        k: str(facts.get(k, "")) for k in ("description", "subagentType", "status", "sidechain")
    }


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


def _add_search(ledger: Ledger, name: str, args: dict[str, Any], text: str) -> None:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    first = lines[0] if lines else ""
    if not lines or first.startswith("No "):
        found = "no matches"
    elif first.startswith("Found "):
        found = first.rstrip(":").removeprefix("Found ")
    else:
        found = _n(len(lines), "line")
    entry = {
        "tool": name,
        "pattern": str(args["pattern"]),
        "path": str(args.get("path") or ""),
        "found": found,
    }
    if isinstance(args.get("glob"), str):
        entry["glob"] = args["glob"]
    ledger.searches = [e for e in ledger.searches if {**e, "found": ""} != {**entry, "found": ""}]
    ledger.searches = [*ledger.searches, entry][-RECENT_SEARCHES:]


def program_and_args(command: str) -> tuple[str, set[str]]:
    """A command's program (its first word, with a subcommand word such as ``test`` when there is one)
    and the set of its other words: a run with a subset of another's words is the wider one."""
    words = command.split()
    if not words:
        return "", set()
    n = 2 if len(words) > 1 and re.fullmatch(r"[A-Za-z][\w:-]*", words[1]) else 1
    return " ".join(words[:n]), set(words[n:])


def _add_command(ledger: Ledger, command: str, code: int | None, outcome: str, when: str) -> None:
    # each command's latest result replaces its earlier ones
    ledger.commands = [c for c in ledger.commands if c.command != command]
    if code == 0:
        program, words = program_and_args(command)
        for c in ledger.commands:
            other, other_words = program_and_args(c.command)
            if c.exit_code != 0 and other == program and words <= other_words:
                c.passed_later = command
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
    ledger.prompts.append(text if len(text) <= PROMPT_CHARS else text[:PROMPT_CHARS] + "\n" + FIRST_LINE_NOTE)
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


def user_budget(threshold: int) -> int:
    """Tokens for the user's own messages: a generous share of T (they are a small part of a session)."""
    return max(USER_FLOOR, min(USER_CAP, int(threshold * USER_SHARE)))


def states_rule(text: str) -> bool:
    """True when a message states a rule, a correction or a decision (kept whole over the budget)."""
    return bool(_RULE.search(text))


def first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= FIRST_LINE_CHARS else line[: FIRST_LINE_CHARS - 1] + "…"


def user_messages(prompts: list[str], kept: list[Message], budget: int) -> list[tuple[str, str]]:
    """(text, how) for every user message, oldest first, never cut in the middle (SPEC §9 item 4).

    ``how``: "current" (the current request, whole), "whole", "first line" (the rest is in the
    transcript) or "kept" / "kept current" (kept word for word in the messages above; shown here by its
    first line so the order stays readable). Within ``budget`` every message is whole; over it the current request
    and the messages stating rules, corrections or decisions stay whole, the others keep their first line.
    """
    if not prompts:
        return []
    visible = {m.text for m in kept if m.kind == "prompt"}
    last = len(prompts) - 1
    total = sum(estimate_text(t) for t in prompts if t not in visible)
    out: list[tuple[str, str]] = []
    for i, text in enumerate(prompts):
        if text in visible:
            out.append((first_line(text), "kept current" if i == last else "kept"))
        elif i == last:
            out.append((text, "current"))
        elif total <= budget or states_rule(text) or first_line(text) == text.strip():
            out.append((text, "whole"))
        else:
            out.append((first_line(text), "first line"))
    return out


def render(ledger: Ledger, budget: int | None = None, full_list: Path | None = None) -> str:
    """The ledger as text (stable, line-oriented: what /state shows and the attachment carries).

    Over ``budget`` tokens the lists are shortened (paths grouped by directory with counts and the most
    recent named, the last few reads and commands, every failing one kept) and ``full_list`` — where
    the complete text was written — is named, so every path stays one Read away."""
    whole = _render(ledger, FULL)
    if budget is None or estimate_text(whole) <= budget:
        return whole
    short = _render(ledger, SHORT, full_list)
    return short if estimate_text(short) <= budget else _render(ledger, GROUPED, full_list)


def _render(ledger: Ledger, level: int, full_list: Path | None = None) -> str:
    """The text at one level of detail: FULL, SHORT (every path, no details; the last few reads,
    commands and searches) or GROUPED (paths grouped by directory as well)."""
    compact = level > FULL
    lines = [HEADER, f"Working directory: {ledger.cwd}", *_sections(ledger, level)]
    if ledger.named:
        if level == GROUPED:
            lines += [f"Files the user named ({len(ledger.named)}):", *group_paths(ledger.named)]
        else:
            lines.append("Files the user named: " + ", ".join(ledger.named))
    if compact:
        where = f"in {full_list}" if full_list else "in the transcript"
        lines.append(f"These lists are shortened; the complete ones (every path, every command) are {where}.")
    lines.append("</working-state>")
    return "\n".join(lines)


def group_paths(paths: list[str], newest: int = GROUP_NEWEST, max_groups: int = MAX_GROUPS) -> list[str]:
    """``paths`` (oldest first) as one line per directory: its file count and the most recent names.
    Directories are merged upwards until at most ``max_groups`` lines remain."""
    depth = max((len(Path(p).parent.parts) for p in paths), default=0)
    while True:
        groups: dict[str, list[str]] = {}
        for p in reversed(paths):  # most recent first
            parts = Path(p).parent.parts[:depth]
            groups.setdefault(str(Path(*parts)) if parts else ".", []).append(p)
        if len(groups) <= max_groups or depth == 0:
            break
        depth -= 1
    lines = []
    for d, members in groups.items():
        names = ", ".join(os.path.relpath(m, d) if d != "." else m for m in members[:newest])
        more = f", and {len(members) - newest} more" if len(members) > newest else ""
        lines.append(f"- {d}/: {_n(len(members), 'file')} (most recent: {names}{more})")
    return lines


def _sections(ledger: Ledger, level: int = 0) -> list[str]:
    compact = level > FULL
    lines = []
    if ledger.modified:
        lines.append(
            f"Files modified ({len(ledger.modified)}{', grouped by directory' if level == GROUPED else ''}):"
        )
        if level == GROUPED:
            lines += group_paths(list(ledger.modified))
        elif level == SHORT:
            lines += [f"- {p}" for p in ledger.modified]
        else:
            lines += [
                f"- {p}: {c.edits} edit{'' if c.edits == 1 else 's'}, +{c.added} -{c.removed} lines, "
                f"last changed {c.last}"
                for p, c in ledger.modified.items()
            ]
    if ledger.read:
        reads = list(ledger.read.items())
        shown = reads[-COMPACT_READS:] if compact else reads
        lines.append(f"Files read ({len(reads)}, most recent last{'; the last few' if compact else ''}):")
        lines += [f"- {p} ({r})" for p, r in shown]
    if ledger.commands:
        lines.append(
            "Commands run (each one's latest result: failing ones, then the most recent; oldest first):"
        )
        recent = ledger.commands[-COMPACT_COMMANDS:] if compact else ledger.commands
        # shortened, failures a later wider run made old news go to the complete list only
        old = [c for c in ledger.commands if c.exit_code != 0 and c not in recent]
        lines += [_command_line(c) for c in old if not (compact and c.passed_later)]
        lines += [_command_line(c) for c in recent]
    if ledger.searches:
        lines.append("Recent searches (Grep / Glob; oldest first):")
        searches = ledger.searches[-COMPACT_COMMANDS:] if compact else ledger.searches
        lines += [_search_line(e) for e in searches]
    if ledger.tasks:
        lines.append("Delegated tasks (Task; each subagent's full transcript is at the path shown):")
        lines += [
            f"- {i} [{t['status']}] {t['description']} ({t['subagentType']}) → {t['sidechain']}"
            for i, t in ledger.tasks.items()
        ]
    if ledger.todos:
        lines.append("Todo list (TodoWrite):")
        marks = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
        lines += [
            f"- {marks.get(t['status'], '[ ]')} {t['content']}"
            + (" (in progress)" if t["status"] == "in_progress" else "")
            for t in ledger.todos
        ]
    return lines


def _command_line(c: Command) -> str:
    code = "did not finish" if c.exit_code is None else f"exit {c.exit_code}"
    command = cut_middle_chars(c.command, COMMAND_CHARS).replace("\n", "\n    ")
    line = f"- [{code}] $ {command}\n    → {c.outcome}"
    if c.passed_later:
        line += f"\n    (old news: a later, wider run passed: $ {cut_middle_chars(c.passed_later, COMMAND_CHARS)})"
    return line


def _search_line(e: dict[str, str]) -> str:
    where = f" in {e['path']}" if e.get("path") else ""
    only = f" (files {e['glob']})" if e.get("glob") else ""
    return f"- {e['tool']} {e['pattern']!r}{where}{only}: {e['found']}"


def ledger_budget(threshold: int) -> int:
    """Tokens for the working state itself: a few percent of T."""
    return max(LEDGER_FLOOR, min(LEDGER_CAP, int(threshold * LEDGER_SHARE)))


def answer_budget(threshold: int) -> int:
    return max(ANSWER_FLOOR, min(ANSWER_CAP, int(threshold * ANSWER_SHARE)))


def recent_answers(answers: list[str], kept: list[Message], budget: int) -> list[str]:
    """The final answers of recent turns, oldest first, whole while ``budget`` lasts (the newest first
    chosen; the newest alone is cut at the end if it is bigger); none already in the kept messages."""
    visible = {m.text.strip() for m in kept if m.role == "assistant"}
    out: list[str] = []
    left = budget
    for text in reversed(answers):
        if text in visible:
            continue
        cost = estimate_text(text)
        if cost > left:
            if not out:
                chars = max(200, int(len(text) * left / max(1, cost)))
                out.append(text[:chars] + "\n[… the rest of this answer is in the transcript]")
            break
        out.append(text)
        left -= cost
    return out[::-1]


def render_answers(answers: list[str]) -> str:
    if not answers:
        return ""
    body = "\n".join(f"<final-answer>\n{a}\n</final-answer>" for a in answers)
    return (
        "Your final answers of the most recent turns, word for word (oldest first): their findings and "
        f"conclusions stand.\n{body}"
    )


def span_text(span: list[Message]) -> str:
    """What a collapsed span did, from its own calls and prompts (the placeholder carries it); "" if nothing."""
    ledger = derive(span, "")
    lines = _sections(ledger)
    users = [
        f"<user-message>\n{p if estimate_text(p) <= SPAN_PROMPT_TOKENS else first_line(p) + chr(10) + FIRST_LINE_NOTE}"
        "\n</user-message>"
        for p in ledger.prompts
    ]
    if users:
        lines += ["The user's own messages in this span, word for word:", *users]
    if not lines:
        return ""
    return "\n".join(["<working-state of-collapsed-span>", *lines, "</working-state>"])


def render_user(messages: list[tuple[str, str]]) -> str:
    if not messages:
        return ""
    parts = [USER_HEADER]
    for text, how in messages:
        if how == "current":
            parts.append(f'<user-message current-request="true">\n{text}\n</user-message>')
        elif how.startswith("kept"):
            current = ' current-request="true"' if how == "kept current" else ""
            parts.append(f'<user-message kept-above="true"{current}>\n{text}\n</user-message>')
        elif how == "first line":
            parts.append(f"<user-message>\n{text}\n{FIRST_LINE_NOTE}\n</user-message>")
        else:
            parts.append(f"<user-message>\n{text}\n</user-message>")
    return "\n".join(parts)


@dataclass(frozen=True)
class Attachment:
    message: Message
    summary: str  # the counts line for the compaction notice


def attachment(
    history: list[Message], kept: list[Message], cwd: str, threshold: int, session_dir: Path | None = None
) -> Attachment:
    """The one meta message that follows the summary and the kept messages after a compaction.

    Its parts have budgets that scale with T (``ledger_budget``, ``answer_budget``, ``user_budget``);
    when the working state is over its budget the complete text goes to a private file under
    ``session_dir`` (``working-state/``) that the shortened text names."""
    ledger = derive(history, cwd)
    users = user_messages(ledger.prompts, kept, user_budget(threshold))
    budget = ledger_budget(threshold)
    full_list = None
    if session_dir is not None and estimate_text(_render(ledger, FULL)) > budget:
        full_list = write_private(session_dir / FULL_LIST_DIR / f"{new_uuid()}.md", _render(ledger, FULL))
    answers = recent_answers(ledger.answers, kept, answer_budget(threshold))
    parts = (render(ledger, budget, full_list), render_answers(answers), render_user(users))
    body = "\n\n".join(p for p in parts if p)
    text = (
        "The working state at the moment of the compaction follows; it is exact and complete where the "
        f"summary is not.\n\n{body}"
    )
    message = meta(text, **{SNAPSHOT_KEY: ledger.to_dict()})
    return Attachment(message, ledger.counts(len(users)))
