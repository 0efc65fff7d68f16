"""Memories built from what the agent recorded itself, with no model call.

Sources, all in the live list (``harvest``):

- the Bash commands it ran, with their exit codes (the tool's facts, else the result's "Exit code N"):
  a build, test, lint, type-check, format or run command that passed becomes the memory of how to do that
  (with the failures it passed after, and the files edited in between: "failed first, fixed by ...");
  a command that failed and never passed becomes a failed approach;
- the files it edited (the lines its last edit left, as they are on disk now) and the tool configuration
  files it read (the section that configures pytest, ruff, mypy, ...): where things are;
- the user's own typed messages, with their time: standing rules ("always", "never", "don't", "from now
  on", ...), corrections ("no, ...", "actually ...", "instead"), decisions ("let's ...") and what they
  asked to be remembered ("remember ...").

Everything is redacted (agent.memory.secrets) before it becomes a memory; a secret file's lines are never
cited. The working state's ledger (compact.compaction.ledger) folds the same records for a compaction; this module
reads the tool calls itself because it needs each run of a command, not only the latest.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.memory.entries import Evidence, Memory
from agent.memory.secrets import is_secret_file, redact
from agent.memory.verify import CONFIG_ORDER, Tree
from compact.compaction.ledger import FACTS_KEY, SNAPSHOT_KEY, Ledger, exit_code, result_text
from core.messages import Message

MAX_PLACES = 8
MAX_FAILED = 6
MAX_USER = 24
SENTENCE_CHARS = 300
PASTE_CHARS = 2_000  # a longer message is mostly pasted text: no rules are read from it
OUTCOME_CHARS = 120
_EXIT = re.compile(r"(?:^|\n)Exit code (-?\d+)\s*$")
# make targets (and npm scripts) by name
TARGET_WORDS = {
    "test": ("test", "tests", "check", "unittest", "unit", "pytest", "spec"),
    "lint": ("lint", "style", "check-style", "flake", "flake8", "ruff", "pylint", "eslint", "lint-check"),
    "build": ("build", "compile", "all", "dist", "package"),
    "typecheck": ("typecheck", "type-check", "types", "mypy", "pyright", "tsc"),
    "format": ("fmt", "format", "black", "prettier"),
    "run": ("run", "serve", "start", "dev", "server"),
    "install": ("install", "deps", "setup", "bootstrap"),
}
# programs run directly
PROGRAMS = {
    "pytest": "test",
    "py.test": "test",
    "tox": "test",
    "nox": "test",
    "unittest": "test",
    "jest": "test",
    "vitest": "test",
    "ruff": "lint",
    "flake8": "lint",
    "pylint": "lint",
    "eslint": "lint",
    "pyflakes": "lint",
    "mypy": "typecheck",
    "pyright": "typecheck",
    "tsc": "typecheck",
    "black": "format",
    "isort": "format",
    "prettier": "format",
    "compileall": "build",
    "build": "build",
}
RULE = re.compile(
    r"(?i)^(?:please\s+)?(?:always|never|don'?t|do not|must|make sure|from now on|in this (?:project|repo)|"
    r"we (?:always|never|use|prefer)|prefer|avoid|only use|use\b.*\binstead\b)|\b(?:always|never)\b|"
    r"^(?:please\s+)?(?:use|keep|write|put|name|run|add)\b.*\b(?:every|each|whenever|all new|by default)\b"
)
CORRECTION = re.compile(
    r"(?i)^(?:no[,.!:]|nope|actually\b|that'?s (?:wrong|not)|wrong[,.!]|not\s+\S.*,\s*but\b|instead\b)"
)
DECISION = re.compile(r"(?i)^(?:let'?s\b|we(?:'ll| will) go with\b|we decided\b|decision:|go with\b)")
REMEMBER = re.compile(r"(?i)^\s*(?:please\s+)?remember(?:\s+that)?[\s,:]+(.+)$", re.S)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'`(])|\n+")
CONFIG_FILES = {
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "pytest.ini",
    ".pytest.ini",
    "ruff.toml",
    ".ruff.toml",
    "mypy.ini",
    ".mypy.ini",
    ".flake8",
    ".isort.cfg",
    "pylintrc",
    ".pylintrc",
    ".coveragerc",
}


@dataclass
class Run:
    command: str
    exit_code: int | None
    outcome: str
    time: str


def explicit(prompt: str) -> bool:
    """Whether a typed prompt asks for something to be remembered."""
    return REMEMBER.match(prompt.strip()) is not None


def harvest(
    messages: list[Message], root: Path, cwd: Path, *, session: str = "", secrets: Iterable[str] = ()
) -> list[Memory]:
    """The memories this conversation's records hold (newest evidence last within each slot)."""
    secrets = list(secrets)
    tree = Tree(root)
    runs, edits, reads, prompts = _records(messages)
    base = _rel(cwd, root)
    found: list[Memory] = []
    found += _command_memories(runs, edits, tree, base, session, secrets)
    found += _place_memories(edits, tree, root, session, secrets)
    found += _config_memories(reads, tree, root, session)
    found += _user_memories(prompts, session, secrets)
    return found


def _rel(path: Path, root: Path) -> str:
    try:
        rel = str(Path(path).resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)
    return rel or "."


# --- the records -------------------------------------------------------------------------------------


def _records(
    messages: list[Message],
) -> tuple[list[Run], list[tuple[str, str, str]], list[str], list[tuple[str, str]]]:
    runs: list[Run] = []
    edits: list[tuple[str, str, str]] = []  # (file, new text, time)
    reads: list[str] = []
    prompts: list[tuple[str, str]] = []  # (text, time)
    uses: dict[str, dict[str, Any]] = {}
    for m in messages:
        snapshot = m.extra.get(SNAPSHOT_KEY)
        if isinstance(snapshot, dict):  # a compaction's working state: what came before it
            ledger = Ledger.from_dict(snapshot)
            runs += [Run(c.command, c.exit_code, c.outcome, c.time) for c in ledger.commands]
            reads += list(ledger.read)
            edits += [(path, "", change.last) for path, change in ledger.modified.items()]
            continue
        if m.role == "assistant":
            uses.update({b["id"]: b for b in m.tool_uses if "id" in b})
            continue
        if m.is_typed_prompt and m.text.strip() and not m.tool_results:
            prompts.append((m.text.strip(), m.timestamp))
        facts_all = m.extra.get(FACTS_KEY) or {}
        for r in m.tool_results:
            use = uses.get(r.get("tool_use_id", ""))
            if use is not None:
                _record_result(
                    use, r, facts_all.get(r.get("tool_use_id")) or {}, m.timestamp, runs, edits, reads
                )
    return runs, edits, reads, prompts


def _record_result(
    use: dict[str, Any],
    r: dict[str, Any],
    facts: dict[str, Any],
    time: str,
    runs: list[Run],
    edits: list[tuple[str, str, str]],
    reads: list[str],
) -> None:
    """One tool call's result into the records: a command run (failed too), or a file edited or read."""
    name, args = use.get("name"), use.get("input") or {}
    failed = bool(r.get("is_error"))
    if name == "Bash" and isinstance(args.get("command"), str):
        text = result_text(r.get("content"))
        runs.append(Run(args["command"], _code(failed, text, facts), _outcome(text), time))
    elif failed or not isinstance(args.get("file_path"), str):
        return
    elif name == "Edit":
        edits.append((args["file_path"], str(args.get("new_string") or ""), time))
    elif name == "Write":
        edits.append((args["file_path"], str(args.get("content") or "")[:400], time))
    elif name == "Read":
        reads.append(args["file_path"])


def _code(failed: bool, text: str, facts: dict[str, Any]) -> int:
    """The ledger's reading of the exit code; a failure that names none counts as 1."""
    code = exit_code(failed, text, facts)
    return (1 if failed else 0) if code is None else code


def _outcome(text: str) -> str:
    lines = [
        line.strip()
        for line in text.strip().splitlines()
        if line.strip() and not _EXIT.search("\n" + line.strip())
    ]
    line = lines[-1] if lines else ""
    return line if len(line) <= OUTCOME_CHARS else line[: OUTCOME_CHARS - 1] + "…"


# --- commands ------------------------------------------------------------------------------------------


@dataclass
class Parsed:
    category: str
    check: dict[str, Any]
    what: str  # how the memory names it ("make test", "pytest")


def parse_command(command: str, tree: Tree, base: str) -> Parsed | None:
    """What a command is for, and what to check before trusting it; None for commands that aren't one of
    the project's ways to build, test, lint, type-check, format, run or install."""
    split = _split_command(command, base)
    if split is None:
        return None
    words, directory = split
    program = Path(words[0]).name
    if program in ("make", "gmake"):
        return _make_command(command, words[1:], directory, tree)
    if program in ("npm", "pnpm", "yarn") and len(words) >= 2:
        script = words[2] if words[1] == "run" and len(words) > 2 else words[1]
        category = _category_of_target(script)
        if category is None:
            return None
        return Parsed(category, {"kind": "npm", "dir": directory, "script": script}, f"{program} {script}")
    python = re.fullmatch(r"python[0-9.]*", program) is not None
    if python and len(words) >= 3 and words[1] == "-m":
        return _python_module(command, words[2], words[3:], directory, tree)
    if python and len(words) >= 2 and words[1].endswith(".py"):
        script = str(Path(directory) / words[1]) if directory != "." else words[1]
        return Parsed("run", {"kind": "script", "path": script}, f"python {words[1]}")
    return _tool_command(command, program, words[1:], directory, tree)


def _split_command(command: str, base: str) -> tuple[list[str], str] | None:
    """The words of one simple command (a leading ``cd DIR &&`` moves the directory, ``NAME=value``
    assignments dropped) and the directory it runs in; None for a pipeline, a list, or unparsable text."""
    text, directory = command.strip(), base
    cd = re.match(r"^cd\s+(\S+)\s*&&\s*(.+)$", text, re.S)
    if cd:
        directory = str(Path(base) / cd.group(1)) if not cd.group(1).startswith("/") else cd.group(1)
        text = cd.group(2).strip()
    if re.search(r"&&|\|\||;|\|", text):
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words = words[1:]
    return (words, directory) if words else None


def _make_arguments(rest: list[str], directory: str) -> tuple[str, str, list[str]]:
    """make's ``-C DIR`` and ``-f FILE`` read, and its targets: (directory, makefile, targets)."""
    makefile, targets = "", []
    i = 0
    while i < len(rest):
        w = rest[i]
        if w in ("-C", "--directory") and i + 1 < len(rest):
            directory, i = str(Path(directory) / rest[i + 1]), i + 2
            continue
        if w in ("-f", "--file") and i + 1 < len(rest):
            makefile, i = rest[i + 1], i + 2
            continue
        if not w.startswith("-") and "=" not in w:
            targets.append(w)
        i += 1
    return directory, makefile, targets


def _make_command(command: str, rest: list[str], directory: str, tree: Tree) -> Parsed | None:
    directory, makefile, targets = _make_arguments(rest, directory)
    if len(targets) > 1:
        return None
    targets_now, _ = tree.make_targets(directory, makefile)
    target = targets[0] if targets else next(iter(targets_now), "")
    category = _category_of_target(target) if target else None
    if category is None:
        return None
    recipe = list(targets_now.get(target, ("", 0, []))[2])
    made: dict[str, Any] = {
        "kind": "make",
        "dir": directory,
        "makefile": makefile,
        "target": target,
        "command": command.strip(),
        "recipe": recipe,
    }
    if target in targets_now:
        rel, line, _ = targets_now[target]
        made["defined"] = f"{rel}:{line}"
    return Parsed(category, made, f"make {target}")


def _python_module(command: str, module: str, args: list[str], directory: str, tree: Tree) -> Parsed | None:
    """``python -m MODULE``: a known tool, or the project's own module run as a script."""
    if module in PROGRAMS:
        return _tool_command(command, module, args, directory, tree)
    stem = module.replace(".", "/")
    candidates = [f"{stem}.py", f"{stem}/__main__.py", f"src/{stem}.py", f"src/{stem}/__main__.py"]
    candidates = [str(Path(directory) / c) if directory != "." else c for c in candidates]
    if any(tree.exists(c) for c in candidates):
        return Parsed(
            "run",
            {"kind": "script", "path": candidates[0], "candidates": candidates},
            f"python -m {module}",
        )
    return None


def _tool_command(command: str, tool: str, args: list[str], directory: str, tree: Tree) -> Parsed | None:
    """A known tool (pytest, ruff, mypy, ...): the paths it was given, and the config it reads first."""
    category = PROGRAMS.get(tool)
    if category is None:
        return None
    paths = [a for a in args if not a.startswith("-") and tree.exists(str(Path(directory) / a))]
    check: dict[str, Any] = {
        "kind": "tool",
        "tool": tool,
        "command": command.strip(),
        "paths": [str(Path(directory) / p) if directory != "." else p for p in paths],
    }
    in_effect = tree.config_in_effect(tool)
    found = tree.section(*in_effect) if in_effect is not None else None
    if in_effect is not None and found is not None:
        start, _, content = found
        check["config"] = {
            "kind": "config",
            "tool": tool,
            "path": in_effect[0],
            "section": in_effect[1],
            "start": start,
            "content": "\n".join(content.splitlines()[:6]),
        }
    return Parsed(category, check, tool)


def _category_of_target(name: str) -> str | None:
    low = name.lower()
    for category, words in TARGET_WORDS.items():
        if low in words:
            return category
    for category, words in TARGET_WORDS.items():
        if any(low.startswith(w + "-") or low.endswith("-" + w) for w in words):
            return category
    return None


def _fixed_note(
    first: Run, run: Run, edits: list[tuple[str, str, str]], tree: Tree, secrets: list[str]
) -> str:
    """How a command that failed first came to pass: the files edited between the two runs."""
    changed = sorted(
        {
            Path(p).name if not Path(p).is_absolute() else _short(p, tree.root)
            for p, _, t in edits
            if first.time <= t <= run.time
        }
    )
    outcome = redact(first.outcome, secrets)
    return f"; failed first (exit {first.exit_code}: {outcome})" + (
        f", passed after editing {', '.join(changed)}" if changed else ", passed when run again"
    )


def _command_memories(
    runs: list[Run],
    edits: list[tuple[str, str, str]],
    tree: Tree,
    base: str,
    session: str,
    secrets: list[str],
) -> list[Memory]:
    out: dict[str, Memory] = {}
    failed_only: dict[str, Run] = {}
    passed_programs: set[str] = set()
    for i, run in enumerate(runs):
        command = redact(run.command, secrets)
        parsed = parse_command(run.command, tree, base) if run.command == command else None
        program = " ".join(run.command.split()[:2])
        if run.exit_code == 0:
            passed_programs.add(program)
            failed_only.pop(run.command, None)
        if parsed is None:
            if run.exit_code not in (0, None) and run.command not in failed_only:
                failed_only[run.command] = run
            continue
        if run.exit_code != 0:
            failed_only.setdefault(run.command, run)
            continue
        earlier = [r for r in runs[:i] if r.command == run.command and r.exit_code not in (0, None)]
        fixed = _fixed_note(earlier[0], run, edits, tree, secrets) if earlier else ""
        recipe = parsed.check.get("recipe") or []
        runs_what = f" runs `{'; '.join(recipe)}`" if recipe else ""
        text = redact(f"`{command}`{runs_what}{fixed}", secrets)
        evidence = [
            Evidence(
                "command", run.time, command, run.exit_code, redact(run.outcome, secrets), session=session
            )
        ]
        evidence += [
            Evidence("command", e.time, command, e.exit_code, redact(e.outcome, secrets), session=session)
            for e in earlier[:1]
        ]
        if parsed.check.get("defined"):
            rel, line = parsed.check["defined"].rsplit(":", 1)
            evidence.append(
                Evidence(
                    "file",
                    run.time,
                    path=rel,
                    lines=f"{line}-{int(line) + len(recipe)}",
                    content="\n".join([f"{parsed.check['target']}:", *recipe]),
                    session=session,
                )
            )
        cited = parsed.check.get("config")
        if isinstance(cited, dict):
            evidence.append(
                Evidence(
                    "file",
                    run.time,
                    path=cited["path"],
                    lines=str(cited["start"]),
                    content=cited["content"],
                    session=session,
                )
            )
        slot = f"command:{parsed.category}"
        out[slot] = Memory(
            slot, "commands", parsed.category, text, evidence, parsed.check, written=run.time, used=run.time
        )
    for command, run in list(failed_only.items())[-MAX_FAILED:]:
        if (
            " ".join(command.split()[:2]) in passed_programs
            and parse_command(command, tree, base) is not None
        ):
            continue  # a narrower run of a program that passed later: old news
        shown = redact(command, secrets)
        outcome = redact(run.outcome, secrets)
        code = "did not finish" if run.exit_code is None else f"exit {run.exit_code}"
        text = f"`{shown}` failed ({code}{': ' + outcome if outcome else ''}): an approach that did not work"
        slot = f"failed:{' '.join(shown.split())[:200]}"
        out[slot] = Memory(
            slot,
            "decisions",
            "failed approach",
            text,
            [Evidence("command", run.time, shown, run.exit_code, outcome, session=session)],
            written=run.time,
            used=run.time,
        )
    return list(out.values())


def _short(path: str, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except (ValueError, OSError):
        return path


# --- files ---------------------------------------------------------------------------------------------


def _place_memories(
    edits: list[tuple[str, str, str]], tree: Tree, root: Path, session: str, secrets: list[str]
) -> list[Memory]:
    last: dict[str, tuple[str, str]] = {}
    for path, new, time in edits:
        last.pop(path, None)
        last[path] = (new, time)
    out = []
    for path, (new, time) in list(last.items())[-MAX_PLACES:]:
        rel = _short(path, root)
        if is_secret_file(rel) or rel.startswith(("/", "..")):
            continue
        text = tree.read(rel)
        if text is None:
            continue
        start, count = _located(text, new)
        if start is None:
            check: dict[str, Any] = {"kind": "lines", "path": rel, "start": 0, "content": ""}
            cited = ""
            where = rel
        else:
            content = "\n".join(text.splitlines()[start - 1 : start - 1 + count])
            check = {"kind": "lines", "path": rel, "start": start, "content": content}
            cited = redact(" / ".join(line.strip() for line in content.splitlines()), secrets)
            where = f"{rel}:{start}" if count == 1 else f"{rel}:{start}-{start + count - 1}"
        memo = f"{where} was edited{': `' + cited + '`' if cited else ''}"
        evidence = [
            Evidence(
                "file",
                time,
                path=rel,
                lines=where.rpartition(":")[2] if start else "",
                content=redact(check["content"], secrets),
                session=session,
            )
        ]
        out.append(Memory(f"file:{rel}", "places", rel, memo, evidence, check, written=time, used=time))
    return out


def _located(text: str, new: str) -> tuple[int | None, int]:
    """Where an edit's new text is in the file now: (first line, number of lines, at most 3), by the lines
    that hold it (an edit of part of a line cites the whole line)."""
    lines = [line for line in new.splitlines() if line.strip()][:3]
    if not lines:
        return None, 0
    have = text.splitlines()
    for i in range(len(have) - len(lines) + 1):
        if all(want.strip() in have[i + k] for k, want in enumerate(lines)):
            return i + 1, len(lines)
    return None, 0


def _config_memories(reads: list[str], tree: Tree, root: Path, session: str) -> list[Memory]:
    out = []
    for path in dict.fromkeys(reads):
        rel = _short(path, root)
        if Path(rel).name not in CONFIG_FILES or rel.startswith(("/", "..")):
            continue
        for tool, places in CONFIG_ORDER.items():
            for file, section in places:
                if file != rel:
                    continue
                found = tree.section(rel, section)
                if found is None:
                    continue
                start, end, content = found
                content = "\n".join(content.splitlines()[:6])
                body = " / ".join(
                    line.strip() for line in content.splitlines()[1 if section else 0 :][:3] if line.strip()
                )
                where = f"{rel} [{section}]" if section else rel
                text = f"{tool} is configured in {where} (lines {start}-{end}): {body}"
                check = {
                    "kind": "config",
                    "tool": tool,
                    "path": rel,
                    "section": section,
                    "start": start,
                    "content": content,
                }
                evidence = [
                    Evidence(
                        "file",
                        "",
                        path=rel,
                        lines=f"{start}-{start + len(content.splitlines()) - 1}",
                        content=content,
                        session=session,
                    )
                ]
                out.append(Memory(f"config:{tool}", "places", f"{tool} configuration", text, evidence, check))
    return out


# --- the user's words ------------------------------------------------------------------------------------


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def _user_memories(prompts: list[tuple[str, str]], session: str, secrets: list[str]) -> list[Memory]:
    out: dict[str, Memory] = {}
    for text, time in prompts:
        for topic, title, said in _user_items(text):
            said = _clip(redact(" ".join(said.split()), secrets), SENTENCE_CHARS)
            if len(said) < 6:
                continue
            slot = f"{title}:{_norm(said)}"
            evidence = [Evidence("user", time, message=said, session=session)]
            memo = Memory(slot, topic, title, said, evidence, written=time, used=time, origin="user")
            if slot in out:
                out[slot].merge(memo)
            else:
                out[slot] = memo
    return list(out.values())[-MAX_USER:]


def _user_items(text: str) -> list[tuple[str, str, str]]:
    """What one prompt says to keep: (topic, title, the words): a "remember ...", or its rules,
    corrections and decisions; nothing from a command, a shell escape or a paste."""
    if text.startswith("/") or text.startswith("!"):
        return []
    remembered = REMEMBER.match(text)
    if remembered:
        return [("notes", "remember", remembered.group(1).strip())]
    if len(text) > PASTE_CHARS:
        return []  # a paste (a log, a file): its "always" and "never" are not the user's rules
    items = []
    for said in sentences(text):
        if CORRECTION.match(said):
            items.append(("rules", "correction", said))
        elif RULE.search(said):
            items.append(("rules", "rule", said))
        elif DECISION.match(said):
            items.append(("decisions", "decision", said))
    return items


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", "", text.lower()).split())[:160]
