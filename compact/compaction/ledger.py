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
``<session dir>/working-state/`` that the text names; the shortest form, for a tight room, keeps
counts, failing commands, searches, and the last 10 commands and the todo one line each: every form names
those two), final answers 3%, the user's words 6%
(``user_messages``: never cut in the middle; over budget shortened by shape and age, never by words),
the findings 3% (``render_findings``: the plan document, subagents' answers, milestones); all of them
bounded together by the room a compaction leaves (``attachment(room=…)``).

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

import json
import os
import re
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from compact.compaction.candidate import contradictions  # the check sits with the candidate's other checks
from core.declaration import declaration_of
from core.messages import Message, meta, new_uuid
from core.private import write_private
from core.tokens import estimate_text

FACTS_KEY = "toolFacts"  # Message.extra of a tool_results message: {tool_use_id: facts}
SNAPSHOT_KEY = "workingState"  # Message.extra of the attachment: Ledger.to_dict()
# Message.extra of a compaction's summary: the ledger of what it replaced (the kept tail not yet folded in),
# so a /rewind into the kept tail, which cuts the attachment, still finds the working state before it
BASE_KEY = "workingStateBefore"
RECENT_COMMANDS = 10
MAX_FAILURES = 30  # failing commands kept beside the recent ones (the oldest go first)
MAX_READS = 30
MAX_TODOS_SHOWN = 100  # todo items a summary or restore lists; the rest are counted
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
# the last RECENT_COMMANDS commands and the todo list are named in every form, one line each: they are
# small and what the next step resumes from (only the complete lists would hold them otherwise)
RECENT_COMMANDS = 10
BRIEF_CHARS = 200  # of a command or todo item in the shortest form's one-line entries
MINIMAL_TODOS = 20  # todo items the shortest form lists (the rest are counted)
MINIMAL_FACTS = 3  # results whose used lines the shortest form names
MINIMAL_MODIFIED = 12  # modified files the shortest form names (a few words each; the newest past it)
FULL, SHORT, GROUPED = 0, 1, 2  # the ledger's levels of detail (render)
FULL_LIST_DIR = "working-state"  # under the session directory: the complete lists, one file a compaction
MAX_PROMPTS = 500  # prompts a snapshot carries (the budget chooses how each is shown)
PROMPT_CHARS = 200_000  # a longer prompt is carried by its head and its tail (the transcript has the rest)
PROMPT_TAIL_CHARS = 4_000  # of those, its last lines
OUTCOME_CHARS = 160
COMMAND_CHARS = 1_000
USER_SHARE = 0.06  # of T for the user's own messages (user_budget), at least USER_FLOOR, at most USER_CAP
USER_FLOOR = 1_000
USER_CAP = 24_000
FIRST_LINE_CHARS = 300
# over the user budget a message is shortened by what it is (never by the words in it): a paste (many
# lines that are not prose: a log, a file, a trace) or a long line first, then the oldest, then the oldest
# are only counted; the current request and the NEWEST_WHOLE newest messages stay whole
NEWEST_WHOLE = 3
PASTE_LINES = 12  # more lines than this, mostly not prose: a paste
PROSE_SHARE = 0.8  # letters and spaces in prose (a log line, a traceback or code has fewer)
LONG_LINE_CHARS = 2_000  # a single line longer than this that is not prose is a paste (prose never is)
HEAD_LINES = 2
TAIL_LINES = 3
# a shortened paste keeps its last lines too (the last one always, LAST_LINE_CHARS of it at most): an
# instruction often closes it ("… fix the first error above")
TAIL_CHARS = 160
LAST_LINE_CHARS = 300
# the first message (the task) and the current request stay whole up to this share of T (at least the
# user floor, at most the cap), whatever their shape; over it they keep their head and their tail
WHOLE_SHARE = 0.1
TAG_TOKENS = 8  # a message's <user-message …> tags as rendered
HEAD_CHARS = 300
# the rest of a tight room: the working state, the final answers, the findings (plan, subagents, milestones)
TIGHT_SHARES = (0.35, 0.25, 0.4)
MIN_PART = 100  # tokens each part keeps however little room the summary and the tail leave
FINDINGS_SHARE = 0.03  # of T for the plan file, the subagents' answers and older milestones
FINDINGS_FLOOR = 300
FINDINGS_CAP = 6_000
REPEATED_EDITS = 2  # a file edited this often is the session's working document (compact.compaction.restore)
PLAN_SUFFIXES = (".md", ".markdown", ".txt", ".org", ".rst")
TASK_ANSWER_CHARS = 4_000  # of a subagent's answer carried in the snapshot (its sidechain has it all)
MAX_MILESTONES = 30  # first lines of older final answers
MILESTONE_CHARS = 200
SEARCH_HITS = 5  # files or lines a search found, named in its entry
HIT_CHARS = 160
MAX_FAILED_TOOLS = 10  # failed tool calls (an Edit whose old_string was not found …), the newest
MAX_OTHER_TOOLS = 10  # outcomes of tools the ledger has no section for, the newest
FACT_LINES = 3  # lines of one tool result the next step used, kept in the ledger
MAX_FACTS = 12  # such results, the newest
FACT_CHARS = 240
FACT_SCAN_CHARS = 2_000
MAX_UNREAD = 3  # results a snapshot carries until a reply answers them
UNREAD_CHARS = 12_000  # a longer line (minified, a blob) is not read for facts
SPAN_PROMPT_TOKENS = 500  # of each user message in a collapsed span's placeholder
_EXIT = re.compile(r"\nExit code (-?\d+)\s*$|^Exit code (-?\d+)\s*$")
_PATHISH = re.compile(r"^[\w.~/-]*[\w-](/[\w.-]+|\.[A-Za-z0-9]{1,8})$")  # a/b, x.py, ./x, ~/x.md
_STRIP = "\"'`()[]{}<>,;:!?@"  # "@x.py" is the REPL's way of naming x.py
HEADER = (
    "<working-state>\nRecorded by the agent from its own tool calls (not from the summary), so it is "
    "exact. It says what was done; the summary says why."
)
FLAGS_HEADER = (
    "The summary above contradicts these records; the records are right (they come from the tool calls):"
)
INVENTED_FLAG = (
    "it gives as the user's words what no message of the user says, so the user did not say it and it is "
    "no instruction: “{passage}” (the user's own messages are below)"
)
INVENTED_CHARS = 400
USER_HEADER = (
    "The user's own messages so far, oldest first, so a later one stands after what it revises; the "
    'current request is marked current-request="true" (answered="true" marks a latest request whose turn '
    'has ended: the user\'s next message is the current request); kept-above="true" marks one kept word '
    "for word in the messages above (its first line here). They are the user's words, not instructions "
    "from the system:"
)
FIRST_LINE_NOTE = "[its first line only: the whole message is in the transcript named above]"
HEAD_NOTE = (
    "[{what}, {lines} lines, ~{tokens:,} tokens: its beginning and its end only; the whole message is in the "
    "transcript named above]"
)
CUT_NOTE = "[… {n:,} lines left out here …]"
CUT_CHARS_NOTE = "[… {n:,} characters left out here …]"
OLDER_NOTE = (
    "[{n} older messages of the user are left out here for room; every one is in the transcript named "
    "above, word for word]"
)
AFTER_TASK_NOTE = (
    "[{n} messages of the user after the first one are left out here for room; every one is in the "
    "transcript named above, word for word]"
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
    # delegated tasks (Task calls): agent id -> description, status, sidechain transcript path, answer
    tasks: dict[str, dict[str, str]] = field(default_factory=dict)
    milestones: list[str] = field(default_factory=list)  # first lines of final answers older than `answers`
    failed: list[dict[str, str]] = field(default_factory=list)  # failed tool calls: tool, target, error
    other: list[dict[str, str]] = field(
        default_factory=list
    )  # tools without a section: tool, target, outcome
    # lines of tool output the next step used (its text or its calls name what they hold): tool, target,
    # lines (newline-joined)
    facts: list[dict[str, str]] = field(default_factory=list)
    # the newest results no reply has answered yet (id, tool, input as JSON, text bounded): the reply after
    # a compaction says which of their lines matter, though the results may be gone by then
    unread: list[dict[str, str]] = field(default_factory=list)

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
            milestones=list(d.get("milestones") or []),
            failed=[dict(x) for x in d.get("failed") or []],
            other=[dict(x) for x in d.get("other") or []],
            facts=[dict(x) for x in d.get("facts") or []],
            unread=[dict(x) for x in d.get("unread") or []],
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
    unread: list[tuple[dict[str, Any], str]] = []  # results the model has not answered yet: (call, text)
    for m in messages:
        snapshot = m.extra.get(SNAPSHOT_KEY, m.extra.get(BASE_KEY))
        if isinstance(snapshot, dict):
            # it covers everything before it, kept messages included (a result the next step has not
            # answered yet stays unread: that step, after it, says which of its lines matter)
            ledger = Ledger.from_dict(snapshot)
            seen = {use.get("id") for use, _ in unread}
            unread = [
                *unread,
                *(
                    ({"id": e["id"], "name": e["tool"], "input": json.loads(e["input"])}, e["text"])
                    for e in ledger.unread
                    if e["id"] not in seen
                ),
            ]
            continue
        if m.role == "assistant":
            if unread:
                _add_facts(ledger, unread, m)
                unread = []
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
                    if not r.get("is_error") and use.get("name") not in _NO_FACTS:
                        unread.append((use, result_text(r.get("content"))))
    if messages and messages[-1].role == "assistant" and not messages[-1].tool_uses:
        _close_turn(ledger)  # the turn ended with that reply: it is the turn's final answer
    ledger.unread = [
        {
            "id": str(use.get("id")),
            "tool": str(use.get("name")),
            "input": json.dumps(use.get("input") or {}),
            # its head and its tail (a file's last lines hold facts too: a setting at the end of a config)
            "text": text
            if len(text) <= UNREAD_CHARS
            else text[: UNREAD_CHARS // 2] + "\n" + text[-(UNREAD_CHARS // 2) :],
        }
        for use, text in unread[-MAX_UNREAD:]
    ]
    return ledger


def _close_turn(ledger: Ledger) -> None:
    if ledger.pending:
        answers = [*ledger.answers, ledger.pending]
        # an answer that falls out of the recent ones leaves its first line: a milestone the work reached
        ledger.milestones = [
            *ledger.milestones,
            *(_clip(first_line(a), MILESTONE_CHARS) for a in answers[:-RECENT_ANSWERS]),
        ]
        del ledger.milestones[:-MAX_MILESTONES]
        ledger.answers = answers[-RECENT_ANSWERS:]
        ledger.pending = ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _apply(
    ledger: Ledger, use: dict[str, Any], result: dict[str, Any], facts: dict[str, Any], when: str
) -> None:
    name, args = use.get("name"), use.get("input") or {}
    failed = bool(result.get("is_error"))
    text = result_text(result.get("content"))
    decl = declaration_of(str(name))
    kind = decl.records if decl is not None else "outcome"
    path = args.get(decl.path_arg) if decl is not None and decl.path_arg else None
    if kind == "answer" and facts.get("agentId"):  # failed ones too: an interrupted task is worth knowing
        _add_task(ledger, facts, text)
    elif kind == "command" and isinstance(args.get("command"), str):
        _add_command(ledger, args["command"], exit_code(failed, text, facts), _outcome(text), when)
        if isinstance(facts.get("cwd"), str):
            ledger.cwd = facts["cwd"]
    elif failed:
        # the next step depends on what did not work: an Edit whose old_string was not there, a Read of a
        # missing file (one line each, the newest kept)
        entry = {"tool": str(name), "target": _target(args), "error": _outcome(text)}
        ledger.failed = [*[e for e in ledger.failed if e != entry], entry][-MAX_FAILED_TOOLS:]
        return
    elif kind == "outcome":
        entry = {"tool": str(name), "target": _target(args), "outcome": _outcome(text)}
        ledger.other = [
            *[e for e in ledger.other if e["tool"] != entry["tool"] or e["target"] != entry["target"]],
            entry,
        ][-MAX_OTHER_TOOLS:]
        return
    elif kind == "edit" and isinstance(path, str):
        change = ledger.modified.pop(path, FileChange())
        added, removed = _lines_changed(str(name), args, facts)
        ledger.modified[path] = FileChange(
            change.edits + 1, change.added + added, change.removed + removed, when
        )
    elif kind == "read" and isinstance(path, str):
        ledger.read.pop(path, None)
        ledger.read[path] = _range(args)
        while len(ledger.read) > MAX_READS:
            ledger.read.pop(next(iter(ledger.read)))
    elif kind == "search" and isinstance(args.get("pattern"), str):
        _add_search(ledger, str(name), args, text)
    elif kind == "todo" and isinstance(args.get("todos"), list):
        ledger.todos = [
            {k: str(t.get(k, "")) for k in ("content", "status", "activeForm")}
            for t in args["todos"]
            if isinstance(t, dict)
        ]


# tools whose output holds no fact of the work (a confirmation; the subagent's answer is kept whole)
_NO_FACTS = frozenset(("Edit", "Write", "NotebookEdit", "TodoWrite", "Task", "Snip"))
# what names a fact: a token with a digit, an underscore, a dot, a slash or a capital inside (an identifier,
# a number, a path), found in one linear pass (a pattern that backtracks took 0.6 s on a 2,000-char word)
_TOKEN = re.compile(r"[\w./:-]+")
_INNER_CAPITAL = re.compile(r"[a-z][A-Z]")


_LINE_NUMBER = re.compile(r"^\s*\d+(?:\t|→|:\s)")  # a Read's line number, not a fact


def _names(text: str) -> set[str]:
    out = set()
    for token in _TOKEN.findall(text):
        token = token.strip(".:-/")
        if len(token) < 2:
            continue
        if (
            any(c.isdigit() for c in token)
            or "_" in token
            or any(c in token for c in "./:")
            or _INNER_CAPITAL.search(token)
        ):
            out.add(token)
    return out


def _add_facts(ledger: Ledger, unread: list[tuple[dict[str, Any], str]], reply: Message) -> None:
    """The lines of the results ``reply`` answers that it refers to (a value, an identifier, a path its
    text or its calls name), FACT_LINES a result at most: what the next step depends on, which lived only
    in the tool output (a poor summary loses it once the result leaves the context)."""
    said = reply.text + "\n" + "\n".join(str(b.get("input") or "") for b in reply.tool_uses)
    wanted = _names(said)
    if not wanted:
        return
    for use, text in unread:
        asked = json.dumps(use.get("input") or {})  # the call's own path or pattern says nothing new
        # a line names one only if it holds it as text: the names the result holds nowhere are left out
        # first, and only lines holding one of the rest are parsed (the ledger is derived again at every
        # decision near T: parsing each line of every result each time was seconds of a tool chain's turn)
        named = {n for n in wanted if n not in asked and n in text}
        if not named:
            continue
        scored: list[tuple[int, int, str]] = []
        for i, line in enumerate(text.splitlines()):
            line = line.strip()
            if not line or len(line) > FACT_SCAN_CHARS or not any(n in line for n in named):
                continue
            hits = len(_names(_LINE_NUMBER.sub("", line)) & named)
            if hits:
                scored.append((-hits, i, line))
        if not scored:
            continue
        lines = [line for _, _, line in sorted(sorted(scored)[:FACT_LINES], key=lambda t: t[1])]
        entry = {
            "tool": str(use.get("name")),
            "target": _target(use.get("input") or {}),
            "lines": "\n".join(_clip(line, FACT_CHARS) for line in lines),
        }
        ledger.facts = [
            *[e for e in ledger.facts if (e["tool"], e["target"]) != (entry["tool"], entry["target"])],
            entry,
        ][-MAX_FACTS:]


def referred_to(results: list[tuple[dict[str, Any], str]], replies: list[Message]) -> bool:
    """Whether any of ``replies`` went back to one of these tool results: made the same call again, or
    named a value, an identifier or a path the result holds (other than the call's own input), as
    ``_add_facts`` finds what a reply depends on."""
    calls = {json.dumps([u.get("name"), u.get("input")], sort_keys=True) for u, _ in results}
    wanted: set[str] = set()
    for reply in replies:
        if any(json.dumps([b.get("name"), b.get("input")], sort_keys=True) in calls for b in reply.tool_uses):
            return True
        wanted |= _names(reply.text + "\n" + "\n".join(str(b.get("input") or "") for b in reply.tool_uses))
    for use, text in results:
        asked = json.dumps(use.get("input") or {})
        if any(n not in asked and n in text for n in wanted):
            return True
    return False


def _target(args: dict[str, Any]) -> str:
    """What a call was about, in a few words: its path, command, pattern or first argument."""
    for key in ("file_path", "path", "notebook_path", "command", "pattern", "url", "query"):
        if isinstance(args.get(key), str) and args[key]:
            return _clip(" ".join(str(args[key]).split()), 120)
    first = next((v for v in args.values() if isinstance(v, (str, int, float))), "")
    return _clip(" ".join(str(first).split()), 120)


def _add_task(ledger: Ledger, facts: dict[str, Any], text: str = "") -> None:
    task = {k: str(facts.get(k, "")) for k in ("description", "subagentType", "status", "sidechain")}
    # the answer is what the parent acts on: kept (bounded) so a poor summary cannot lose it; the usage
    # block the Task result ends with is left out
    answer = text.split("\nagentId: ")[0].strip() if text else ""
    task["answer"] = answer if len(answer) <= TASK_ANSWER_CHARS else answer[:TASK_ANSWER_CHARS] + " […]"
    ledger.tasks[str(facts["agentId"])] = task


def result_text(content: Any) -> str:
    """The text of a tool result's content (a string, or its text blocks joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def exit_code(failed: bool, text: str, facts: dict[str, Any]) -> int | None:
    """A Bash result's exit code: its recorded fact, 0 for a success, the code its last line names, else None."""
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
    elif first.startswith("Found "):  # a count line, then the files: the next step reads those
        found = first.rstrip(":").removeprefix("Found ") + _hits(lines[1:])
    else:  # matching lines (path:line:text): the files and lines themselves
        found = _n(len(lines), "line") + _hits(lines)
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


def _hits(lines: list[str]) -> str:
    """The first few files or lines a search found, on the search's line (``; …`` for the rest)."""
    if not lines:
        return ""
    shown = " | ".join(_clip(line.strip(), HIT_CHARS) for line in lines[:SEARCH_HITS])
    more = f" | and {len(lines) - SEARCH_HITS} more" if len(lines) > SEARCH_HITS else ""
    return f": {shown}{more}"


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


def carried(text: str) -> str:
    """A prompt as a snapshot carries it: whole up to PROMPT_CHARS; past that its head and its last
    lines (PROMPT_TAIL_CHARS: an instruction often closes a paste, also a paste of 1M tokens), the
    lines between counted (the transcript has them)."""
    if len(text) <= PROMPT_CHARS:
        return text
    head, tail = text[: PROMPT_CHARS - PROMPT_TAIL_CHARS], text[-PROMPT_TAIL_CHARS:]
    if "\n" not in head or "\n" not in tail:  # one long line: its first and last characters
        return f"{head} {CUT_CHARS_NOTE.format(n=len(text) - len(head) - len(tail))} {tail}"
    head, tail = head[: head.rfind("\n")], tail[tail.find("\n") + 1 :]
    left = text.count("\n") - head.count("\n") - tail.count("\n") - 1
    return f"{head}\n{CUT_NOTE.format(n=max(1, left))}\n{tail}"


# what a long text is and the words in it that look like paths, remembered by the text's length and hash
# (not the text: a 1M-token paste is not kept alive): every compaction derives the ledger and shapes the
# user's words again, and at 1M a pasted log of ~1.5M characters cost ~3 s of each compaction's wait
MEMO_CHARS = 20_000  # shorter texts are cheap to look at again
MEMO_SIZE = 64  # each a few words, or a carried prompt (200,000 characters at most)
_memo: dict[tuple[str, int, int], Any] = {}
_memo_lock = threading.Lock()


def _remembered(kind: str, text: str, compute: Any) -> Any:
    if len(text) < MEMO_CHARS:
        return compute(text)
    key = (kind, len(text), hash(text))
    with _memo_lock:
        if key in _memo:
            return _memo[key]
    value = compute(text)
    with _memo_lock:
        _memo[key] = value
        while len(_memo) > MEMO_SIZE:
            del _memo[next(iter(_memo))]
    return value


def _pathish(text: str) -> tuple[str, ...]:
    """The words of ``text`` that look like paths (the user naming a file), in order. Only a word with a
    '/' or a '.' can be one (_PATHISH ends in one of them): the others are not stripped and matched
    (a pasted 30 MB log: 1.7 s -> 0.4 s with dots in it, nothing to do without)."""
    if "/" not in text and "." not in text:
        return ()
    words = (token.strip(_STRIP).rstrip(".") for token in text.split() if "/" in token or "." in token)
    return tuple(w for w in words if len(w) >= 3 and _PATHISH.match(w))


def _add_prompt(ledger: Ledger, text: str) -> None:
    ledger.prompts.append(_remembered("carried", text, carried))
    del ledger.prompts[:-MAX_PROMPTS]
    base = Path(ledger.cwd)
    for word in _remembered("paths", text, _pathish):
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


def whole_bound(threshold: int) -> int:
    """Tokens up to which the first message (the task) and the current request stay whole."""
    return max(USER_FLOOR, min(USER_CAP, int(threshold * WHOLE_SHARE)))


def first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= FIRST_LINE_CHARS else line[: FIRST_LINE_CHARS - 1] + "…"


def shape_of(text: str) -> str:
    """What a message is, from its shape alone: "paste" (many lines that are mostly not prose — a log,
    a file, a trace — or one very long line), "long line" (one line past HEAD_CHARS that is not prose)
    or "prose". Never from the words in it: a log that says "must" is still a log."""
    return str(_remembered("shape", text, _shape))


def _shape(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if _prose_share(text) >= PROSE_SHARE:
        return "prose"  # whatever its line count: a 600-word spec on one line is the task, not a paste
    if any(len(ln) > LONG_LINE_CHARS for ln in lines) or len(lines) > PASTE_LINES:
        return "paste"
    if len(lines) == 1 and len(lines[0]) > HEAD_CHARS:
        return "long line"
    return "prose"


def _prose_share(text: str) -> float:
    chars = [c for c in text if not c.isspace() or c == " "]
    return sum(c.isalpha() or c == " " for c in chars) / len(chars) if chars else 1.0


def head_of(text: str, head_lines: int = HEAD_LINES, tail_chars: int = TAIL_CHARS) -> str:
    """A message shortened to its head and its tail, its size and where the rest is: the first
    ``head_lines`` lines (HEAD_CHARS at most) and the last lines (``tail_chars`` at most, TAIL_LINES at
    most; the last line always), then what it is and how big. The tail stays because an instruction
    often closes a paste ("… fix the first error above")."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    head = lines[:head_lines]
    shown = "\n".join(head)
    if len(shown) > HEAD_CHARS:
        shown = shown[: HEAD_CHARS - 1] + "…"
    rest = lines[len(head) :]
    tail: list[str] = []
    for ln in reversed(rest[-TAIL_LINES:]):  # the last line always (its end, when it is long)
        if tail and sum(len(t) for t in tail) + len(ln) > tail_chars:
            break
        tail.insert(0, ln if len(ln) <= LAST_LINE_CHARS else "…" + ln[-(LAST_LINE_CHARS - 1) :])
    cut = len(rest) - len(tail)
    if cut:
        shown += "\n" + CUT_NOTE.format(n=cut)
    if tail:
        shown += "\n" + "\n".join(tail)
    elif len(lines) == 1 and len(lines[0]) > HEAD_CHARS:  # one long line: its last characters too
        more = len(lines[0]) - HEAD_CHARS - LAST_LINE_CHARS
        if more > 0:
            shown += f" {CUT_CHARS_NOTE.format(n=more)} {lines[0][-LAST_LINE_CHARS:]}"
        else:
            shown = lines[0]
    what = {"paste": "pasted text", "long line": "one long line"}.get(shape_of(text), "a long message")
    size = _remembered("tokens", text, estimate_text)
    return f"{shown}\n" + HEAD_NOTE.format(what=what, lines=len(lines), tokens=size)


def user_messages(
    prompts: list[str],
    kept: list[Message],
    budget: int,
    current_room: int | None = None,
    whole: int | None = None,
    answered: bool = False,
) -> list[tuple[str, str]]:
    """(text, how) for every user message, oldest first, never cut in the middle (docs/compaction.md).

    ``how``: "current" (the current request, whole), "answered" (the latest request when its turn has
    ended with a final answer: the next message the user types is the current request, so this one is
    not labelled current), "whole", "head" (its first and last lines, its size and a pointer to the
    transcript), "older" (one line counting messages left out) or "kept" / "kept current" / "kept
    answered" (kept word for word in the messages above; shown here by its first line so the order stays
    readable). Within ``budget`` every message is whole. Over it, messages are shortened by what they
    are and by age, never by their words: first pastes and long non-prose lines (oldest first), then the
    oldest messages, then the oldest are only counted; the latest request and the NEWEST_WHOLE newest
    stay whole. ``whole``: the first message (the task) and the latest request stay whole up to this
    many tokens whatever their shape (prose is never a paste; past it they keep their head and tail);
    without it the latest request stays whole unless it is a paste larger than ``budget`` and
    ``current_room`` (what the compaction leaves beside the summary). Order never changes, so a revision
    always stands after what it revises (the task is the one exception: it stays while messages after it
    may be counted).
    """
    if not prompts:
        return []
    visible = {m.text for m in kept if m.kind == "prompt"}
    last = len(prompts) - 1
    latest = "answered" if answered else "current"
    out: list[tuple[str, str]] = []
    for i, text in enumerate(prompts):
        if text in visible:
            out.append((first_line(text), f"kept {latest}" if i == last else "kept"))
        else:
            out.append((text, latest if i == last else "whole"))
    task = 0 if whole is not None and last > 0 else None  # the first message: the task

    budget -= estimate_text(USER_HEADER)
    counted: dict[str, int] = {}

    def tokens(t: str) -> int:  # each text tokenized once: size() is asked after every change
        if t not in counted:
            counted[t] = _remembered("tokens", t, estimate_text)
        return counted[t]

    def size() -> int:  # as rendered: each message in its tags
        return sum(tokens(t) + TAG_TOKENS for t, how in out if how != "gone")

    if size() <= budget:
        return out

    def too_big(i: int, text: str, how: str) -> bool:
        """The task or the latest request past its bound (a whole one, or a paste past the room)."""
        if whole is not None:
            return tokens(text) > whole
        return how == latest and tokens(text) > max(budget, current_room or 0) and shape_of(text) != "prose"

    # pastes go first at any age (five pasted logs must not fill the context), the task and the latest
    # request only past their bound; then the oldest, the newest few staying whole
    by_shape = [
        i
        for i, (text, how) in enumerate(out)
        if (too_big(i, text, how) if i in (task, last) else how == "whole" and shape_of(text) != "prose")
        and how in ("whole", latest)
    ]
    # strictly by age: a message is never shown while a newer one (which may revise it) is left out
    movable = [
        i
        for i, (_, how) in enumerate(out)
        if how in ("whole", "head") and i < last - NEWEST_WHOLE and i != task
    ]
    whole_text: dict[int, str] = {}
    for order in (by_shape, movable):
        for i in order:
            if size() <= budget:
                return out
            text, how = out[i]
            if how not in ("whole", latest):
                continue
            shorter = head_of(text)
            if tokens(shorter) < tokens(text):
                out[i] = (shorter, f"head {latest}" if how == latest else "head")
                whole_text[i] = text
    for i in movable:  # the oldest shortened ones down to their first and last line, before any goes
        if size() <= budget:
            return out
        if out[i][1] == "head":
            out[i] = (head_of(whole_text[i], 1, 0), "head")
    gone = 0
    note = AFTER_TASK_NOTE if task is not None else OLDER_NOTE
    for i in movable:  # still over: the oldest are counted, not shown (the transcript has them)
        if size() + tokens(note) <= budget:
            break
        out[i] = ("", "gone")
        gone += 1
    if not gone:
        return out
    rest = [entry for entry in out if entry[1] != "gone"]
    counted_note = (note.format(n=gone), "older")
    return [rest[0], counted_note, *rest[1:]] if task is not None else [counted_note, *rest]


def render(
    ledger: Ledger, budget: int | None = None, full_list: Path | None = None, flags: list[str] | None = None
) -> str:
    """The ledger as text (stable, line-oriented: what /state shows and the attachment carries).

    Over ``budget`` tokens the lists are shortened (paths grouped by directory with counts and the most
    recent named, the last few reads and commands, every failing one kept) and ``full_list`` — where
    the complete text was written — is named, so every path stays one Read away."""
    whole = _render(ledger, FULL, flags=flags)
    if budget is None or estimate_text(whole) <= budget:
        return whole
    short = _render(ledger, SHORT, full_list, flags)
    if estimate_text(short) <= budget:
        return short
    grouped = _render(ledger, GROUPED, full_list, flags)
    return grouped if estimate_text(grouped) <= budget else _minimal(ledger, full_list, flags)


def _minimal(ledger: Ledger, full_list: Path | None, flags: list[str] | None) -> str:
    """The least the next step needs, for a window where little room is left: counts, the failing
    commands, the last commands and the todo list one line each, the last searches, and where the
    complete lists are."""
    lines = [HEADER, *([FLAGS_HEADER, *(f"- {f}" for f in flags)] if flags else [])]
    lines.append(f"Working directory: {ledger.cwd}")
    if ledger.modified:
        modified = list(ledger.modified)
        names = ", ".join(Path(p).name for p in modified[-MINIMAL_MODIFIED:])
        which = "oldest first" if len(modified) <= MINIMAL_MODIFIED else "the most recent, oldest first"
        lines.append(f"Files modified: {len(modified)} ({which}: {names})")
    if ledger.read:
        lines.append(f"Files read: {len(ledger.read)} (most recent: {Path(list(ledger.read)[-1]).name})")
    failing = [c for c in ledger.commands if c.exit_code not in (0, None) and not c.passed_later]
    if failing:
        lines.append("Commands whose latest run failed:")
        lines += [f"- [exit {c.exit_code}] $ {_clip(' '.join(c.command.split()), 200)}" for c in failing]
    recent = [c for c in ledger.commands[-RECENT_COMMANDS:] if c not in failing]
    if recent:
        lines.append(f"Recent commands (the last {RECENT_COMMANDS} run, oldest first; failing ones above):")
        lines += [_brief_command(c, BRIEF_CHARS) for c in recent]
    if ledger.searches:
        lines.append("Recent searches:")
        lines += [_clip(_search_line(e), HIT_CHARS) for e in ledger.searches[-3:]]
    if ledger.facts:
        lines.append("Lines of tool output the next step used (the newest):")
        lines += [
            _clip(_fact_line(e).replace("\n    ", " "), HIT_CHARS) for e in ledger.facts[-MINIMAL_FACTS:]
        ]
    if ledger.todos:
        lines.append(f"Todo list ({len(ledger.todos)} items):")
        lines += [_todo_line(t, BRIEF_CHARS) for t in ledger.todos[:MINIMAL_TODOS]]
        if len(ledger.todos) > MINIMAL_TODOS:
            lines.append(f"- … and {len(ledger.todos) - MINIMAL_TODOS:,} more tasks")
    where = f"in {full_list}" if full_list else "in the transcript"
    lines.append(f"Only the essentials fit here; the complete lists (every path, every command) are {where}.")
    lines.append("</working-state>")
    return "\n".join(lines)


def _render(ledger: Ledger, level: int, full_list: Path | None = None, flags: list[str] | None = None) -> str:
    """The text at one level of detail: FULL, SHORT (every path, no details; the last few reads,
    commands and searches) or GROUPED (paths grouped by directory as well). ``flags``: where the summary
    contradicts these records (compact.compaction.candidate.contradictions), said first."""
    compact = level > FULL
    said = [FLAGS_HEADER, *(f"- {f}" for f in flags)] if flags else []
    lines = [HEADER, *said, f"Working directory: {ledger.cwd}", *_sections(ledger, level)]
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
        listed = [c for c in old if not (compact and c.passed_later)]
        lines += [_command_line(c) for c in listed]
        if compact:  # the ones before the last few: one line each, no outcome
            before = ledger.commands[-RECENT_COMMANDS:-COMPACT_COMMANDS]
            lines += [_brief_command(c, COMMAND_CHARS) for c in before if c not in listed]
        lines += [_command_line(c) for c in recent]
    if ledger.searches:
        lines.append("Recent searches (Grep / Glob; oldest first):")
        searches = ledger.searches[-COMPACT_COMMANDS:] if compact else ledger.searches
        lines += [_search_line(e) for e in searches]
    if ledger.failed:
        lines.append("Tool calls that failed (the newest last; what they tried did not happen):")
        lines += [
            f"- {e['tool']} {e['target']}: {e['error']}"
            for e in ledger.failed[-COMPACT_COMMANDS if compact else 0 :]
        ]
    if ledger.other:
        lines.append("Other tools' latest outcomes (one line each, oldest first):")
        lines += [
            f"- {e['tool']} {e['target']}: {e['outcome']}"
            for e in ledger.other[-COMPACT_COMMANDS if compact else 0 :]
        ]
    if ledger.facts:
        lines.append("Lines of tool output the next step used (the newest last; the results may be gone):")
        # shortened: the newest few, one clipped line each (the paths come first in a tight room)
        lines += (
            [_clip(_fact_line(e).replace("\n    ", " "), HIT_CHARS) for e in ledger.facts[-MINIMAL_FACTS:]]
            if compact
            else [_fact_line(e) for e in ledger.facts]
        )
    if ledger.tasks:
        lines.append("Delegated tasks (Task; each subagent's full transcript is at the path shown):")
        lines += [
            f"- {i} [{t['status']}] {t['description']} ({t['subagentType']}) → {t['sidechain']}"
            for i, t in ledger.tasks.items()
        ]
    if ledger.todos:
        lines.append("Todo list (TodoWrite):")
        # a huge list (50,000 tasks) would make every summary request too long: its head is shown
        todos = ledger.todos[:MAX_TODOS_SHOWN]
        lines += [_todo_line(t, COMMAND_CHARS) for t in todos]
        if len(ledger.todos) > len(todos):
            lines.append(f"- … and {len(ledger.todos) - len(todos):,} more tasks")
    return lines


_MARKS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}


def _todo_line(t: dict[str, Any], chars: int) -> str:
    return f"- {_MARKS.get(t['status'], '[ ]')} {cut_middle_chars(t['content'], chars)}" + (
        " (in progress)" if t["status"] == "in_progress" else ""
    )


def _brief_command(c: Command, chars: int) -> str:
    """One entry without its outcome (the command as run, so it can be found and run again)."""
    code = "did not finish" if c.exit_code is None else f"exit {c.exit_code}"
    return f"- [{code}] $ {cut_middle_chars(c.command, chars)}".replace("\n", "\n    ")


def _command_line(c: Command) -> str:
    code = "did not finish" if c.exit_code is None else f"exit {c.exit_code}"
    command = cut_middle_chars(c.command, COMMAND_CHARS).replace("\n", "\n    ")
    line = f"- [{code}] $ {command}\n    → {c.outcome}"
    if c.passed_later:
        line += f"\n    (old news: a later, wider run passed: $ {cut_middle_chars(c.passed_later, COMMAND_CHARS)})"
    return line


def _fact_line(e: dict[str, str]) -> str:
    lines = e["lines"].split("\n")
    return f"- {e['tool']} {e['target']}: " + (
        lines[0] if len(lines) == 1 else "\n    " + "\n    ".join(lines)
    )


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
        latest = (
            ' current-request="true"'
            if how.endswith("current")
            else ' latest-request="true" answered="true"'
            if how.endswith("answered")
            else ""
        )
        if how in ("current", "answered"):
            parts.append(f"<user-message{latest}>\n{text}\n</user-message>")
        elif how.startswith("kept"):
            parts.append(f'<user-message kept-above="true"{latest}>\n{text}\n</user-message>')
        elif how == "first line":
            parts.append(f"<user-message>\n{text}\n{FIRST_LINE_NOTE}\n</user-message>")
        elif how.startswith("head"):
            parts.append(f'<user-message shortened="true"{latest}>\n{text}\n</user-message>')
        elif how == "older":
            parts.append(text)
        else:
            parts.append(f"<user-message>\n{text}\n</user-message>")
    return "\n".join(parts)


def findings_budget(threshold: int) -> int:
    return max(FINDINGS_FLOOR, min(FINDINGS_CAP, int(threshold * FINDINGS_SHARE)))


def plan_file(ledger: Ledger) -> Path | None:
    """The document this session wrote most recently (a plan, a TODO.md, notes for the user): its
    current text is what the next step follows, and a summary rarely copies it."""
    for p, change in reversed(list(ledger.modified.items())):
        path = Path(p)
        if change.edits >= REPEATED_EDITS:
            continue  # restored as a file (compact.compaction.restore), first
        if path.suffix.lower() in PLAN_SUFFIXES:
            try:
                if path.is_file() and path.stat().st_size <= PROMPT_CHARS:
                    return path
            except OSError:
                continue
    return None


def bounded(text: str, tokens: int, where: str) -> str:
    """``text`` within about ``tokens``: whole lines from the start, then how many are left and where."""
    if estimate_text(text) <= tokens:
        return text
    lines = text.splitlines()
    out: list[str] = []
    for line in lines:
        if estimate_text("\n".join([*out, line])) > tokens:
            break
        out.append(line)
    if not out:
        out = [lines[0][: tokens * 3] + "…"] if lines else []
    return "\n".join(out) + f"\n[… {len(lines) - len(out)} more lines: {where}]"


def render_findings(ledger: Ledger, budget: int, spare: int = 0) -> str:
    """What the work found that a summary tends to drop, within ``budget``: the plan file as it is on
    disk, the subagents' answers (newest first chosen), the milestones of older turns (``spare`` fewer
    tokens of them: what the working state's shortest form took past its share)."""
    parts: list[str] = []
    left = budget
    plan = plan_file(ledger)
    if plan is not None:
        try:
            text = plan.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            text = ""
        if text:
            shown = bounded(text, max(100, budget * 6 // 10), f"the whole file is {plan}")
            parts.append(
                f"The plan file this session wrote, {plan}, as it is on disk now:\n<plan-file>\n{shown}\n</plan-file>"
            )
            left -= estimate_text(parts[-1])
    answers: list[str] = []
    for agent_id, t in reversed(list(ledger.tasks.items())):
        if not t.get("answer") or left <= 50:
            continue
        head = f"- subagent {agent_id} [{t['status']}] {t['description']} → {t['sidechain']}:"
        body = bounded(t["answer"], max(50, left - estimate_text(head)), f"the rest is in {t['sidechain']}")
        answers.insert(0, f"{head}\n{body}")
        left -= estimate_text(answers[0])
    if answers:
        parts += [
            "What the subagents answered (newest last; each one's whole transcript at its path):",
            *answers,
        ]
    steps: list[str] = []
    left -= spare
    for m in reversed(ledger.milestones):
        if estimate_text(m) + 2 > left:
            break
        steps.insert(0, f"- {m}")
        left -= estimate_text(m) + 2
    if steps:
        parts.append("Milestones of earlier turns (the first line of each older final answer, oldest first):")
        parts.append("\n".join(steps))
    return "\n".join(parts)


@dataclass(frozen=True)
class Attachment:
    message: Message
    summary: str  # the counts line for the compaction notice


def attachment(
    history: list[Message],
    kept: list[Message],
    cwd: str,
    threshold: int,
    session_dir: Path | None = None,
    summary: str = "",
    room: int | None = None,
    invented: list[str] | None = None,
) -> Attachment:
    """The one meta message that follows the summary and the kept messages after a compaction.

    Its parts have budgets that scale with T (``ledger_budget``, ``answer_budget``, ``findings_budget``,
    ``user_budget``) and are bounded together by ``room`` (what is left beside the summary and the
    tail): the user's words get their share first and what the others leave unused. When the working state is over its budget the complete text goes to a
    private file under ``session_dir`` (``working-state/``) that the shortened text names. ``summary``:
    the text that stands in for the history, checked against the records (candidate.contradictions);
    ``invented``: what it gives as the user's words that no message of the user says (a text that can't
    be edited: the server's signed summary), flagged first."""
    ledger = derive(history, cwd)
    budgets = [ledger_budget(threshold), answer_budget(threshold), findings_budget(threshold)]
    # the user's words first, at their own budget whatever the room: they outrank verbatim tool output (a
    # tail of tool results that leaves no room must not cost the task statement or a correction)
    user_room = user_budget(threshold)
    answered = turn_ended(history)

    def words(budget: int) -> list[tuple[str, str]]:
        return user_messages(ledger.prompts, kept, budget, room, whole_bound(threshold), answered)

    users = words(user_room)
    if room is not None and room < sum(budgets) + user_room:
        # what is left beside the summary, the tail and the user's words is shared in proportion (the
        # complete lists are one Read away)
        rest = max(0, room - estimate_text(render_user(users)))
        budgets = [max(MIN_PART, int(rest * share)) for share in TIGHT_SHARES]
    budget, answer_room, findings_room = budgets
    full_list = None
    spare = 0
    flags = contradictions(summary, failing_commands(ledger), list(ledger.modified)) if summary else []
    flags = [*(INVENTED_FLAG.format(passage=_clip(p, INVENTED_CHARS)) for p in invented or []), *flags]
    if session_dir is not None and estimate_text(_render(ledger, FULL)) > budget:
        full_list = write_private(session_dir / FULL_LIST_DIR / f"{new_uuid()}.md", _render(ledger, FULL))
    state = render(ledger, budget, full_list, flags)
    if room is not None:
        # the shortest form can pass its share (the failing and recent commands and the todo are never
        # cut): the answers give the difference back (down to their floor), so the room still holds; the
        # findings keep theirs (a subagent's answer is nowhere else once its result is cleared)
        over = max(0, estimate_text(state) - budget)
        given = min(over, max(0, answer_room - MIN_PART))
        answer_room -= given
        spare = over - given  # and then the older milestones (the first lines of answers: the least of it)
    answers = recent_answers(ledger.answers, kept, answer_room)
    found = render_findings(ledger, findings_room, spare)
    said = render_answers(answers)
    left = sum(budgets) - sum(estimate_text(p) for p in (state, said, found))
    if left > 0 and any(how.startswith("head") or how == "older" for _, how in users):
        users = words(user_room + left)  # what the others left unused
    parts = (state, said, found, render_user(users))
    body = "\n\n".join(p for p in parts if p)
    text = (
        "The working state at the moment of the compaction follows; it is exact and complete where the "
        f"summary is not.\n\n{body}"
    )
    message = meta(text, **{SNAPSHOT_KEY: ledger.to_dict()})
    return Attachment(message, ledger.counts(len(users)))


def turn_ended(messages: list[Message]) -> bool:
    """True when the history ends with a turn's final answer (no request is in progress: the user's next
    message will be the current request)."""
    for m in reversed(messages):
        if m.role == "user" and m.kind == "meta":
            continue
        if m.kind == "summary" or SNAPSHOT_KEY in m.extra or BASE_KEY in m.extra:
            return True  # nothing after a compaction's summary (a rewind to its kept prompt): no turn runs
        return m.role == "assistant" and not m.tool_uses
    return False


def failing_commands(ledger: Ledger) -> list[str]:
    """Commands whose latest run failed and that no later, wider run made old news."""
    return [c.command for c in ledger.commands if c.exit_code not in (0, None) and not c.passed_later]
