"""The system prompt: how to work, the environment, and the instruction files (CLAUDE.md).

Blocks, most stable first so the prompt cache holds across requests and sessions: the fixed guidance
(``INTRO``), then the environment (fixed for a session: the git facts are a snapshot taken once, on the
first request, never on the way to the first prompt), then the instruction files, which are read from
disk for every request, so an edit — or a compaction — never loses them.

Instruction files, as Claude Code reads them (``instruction_files``):

- the user's own: ``~/.claude/CLAUDE.md`` and ``$COMPACT_AGENT_HOME/CLAUDE.md``;
- the project's: ``CLAUDE.md``, ``.claude/CLAUDE.md`` and ``CLAUDE.local.md`` in each directory from the
  project root (agent.config.project) down to the working directory;
- nested ``CLAUDE.md`` files of directories below the working directory, once a file under them was read;
- ``@path`` imports inside any of them (relative to the importing file, ``~/`` for the home directory),
  at most ``MAX_IMPORT_DEPTH`` deep, each file once.

A file (or import) the user's Read deny rules cover is not read either (``@.env`` under ``Read(.env)``).
A project's file (or import) that resolves outside the project, and any file that is not a regular file
or is too large, is not read: a repository must not be able to put ``~/.ssh/id_rsa`` or
``/proc/self/environ`` into a request by way of a symlink. Each refusal is reported (``refused``), and
the session says so once.
"""

from __future__ import annotations

import platform
import re
import subprocess
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Callable, Iterable

from agent.config.project import FileProblem, read_inside

MAX_IMPORT_DEPTH = 5
PROJECT_NAMES = ("CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md")
_IMPORT = re.compile(r"(?<![\w@])@((?:~/|/|\.{1,2}/|[\w.-])[^\s`'\"<>()\[\]]*)")
_FENCE = re.compile(r"^\s*(```|~~~)")

INTRO = """You are Compact Agent, a coding assistant working with the user in their terminal. You help with \
software engineering: understanding code, fixing bugs, adding features, refactoring, running and \
explaining commands. The user sees your text in a terminal, and every tool call you make.

# Working in a repository
- Look before you act. Read a file before you change it, and read enough of the code around a change to \
know how it is used. Never guess at a file's contents, an API or a command's output when you can check.
- Search with the Grep tool (contents) and the Glob tool (file names) rather than running find, grep, \
cat, head or ls through Bash; they are faster and their output is made for you. Read files with Read.
- When several tool calls don't depend on each other (reading three files, two searches, a Glob and a \
Grep), make them all in one response: read-only calls run in parallel, and you save round trips.
- Follow the project's conventions: its style, naming, libraries, test layout and the way neighbouring \
code is written. Don't assume a library is available; check the project's manifest or imports first.
- Prefer small, focused edits with Edit over rewriting whole files. Don't add files (least of all \
documentation) the task doesn't need, and don't leave debugging code behind.
- Verify your work: run the project's tests, linters or type checks when they exist (find out how from \
its README, CLAUDE.md or build files), and report what happened honestly, including failures.
- For work with several steps, keep a todo list with the TodoWrite tool and keep it current: one task \
in progress at a time, each marked completed as soon as it is done.
- Ask before anything destructive, irreversible or visible to others that the user did not ask for: \
deleting files or branches, resetting or rewriting history, force pushes, pushing at all, publishing, \
sending messages, changing shared infrastructure. When unsure what the user wants, ask a short question.
- Never commit unless the user asks you to. Never put secrets or credentials into files, commits or output.
- A tool call the user declines is their decision: don't try to get around it; ask what they prefer.

# Communicating
- Be concise and direct. Lead with the answer or the result; skip preambles and recaps of what you just \
did unless asked. Use Markdown sparingly (it is rendered in a terminal).
- Refer to code as path:line (e.g. src/app.py:42) so the user can jump to it.
- Say plainly when something failed, is unfinished, or when you are unsure.

# Your context
- Tool results may be shortened to save context: a <persisted-output> block names a file holding the \
full output (read it with Read and offset/limit), and "[Old tool result content cleared]" means an old \
result was dropped — run the tool again if you need it.
- Long conversations are summarised automatically when the context fills up; the summary and the files \
you were working on are kept. Instruction files (CLAUDE.md) are always re-read.
- Every message the user typed ends with an [id:…] tag. When earlier turns are no longer useful (a \
finished side task, a large exploration), you may remove them from your context with the Snip tool and \
those ids."""


# --- the environment ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GitFacts:
    """A snapshot of the repository, taken once per session (it is not updated as the session goes)."""

    branch: str = ""
    status: str = ""  # e.g. "clean", or "3 modified, 1 untracked"


def git_facts(cwd: Path, timeout: float = 2.0) -> GitFacts | None:
    """The branch and a short status summary; None when ``cwd`` is not in a git work tree.

    ``git status`` can run programs a repository names: an fsmonitor hook (turned off here on the command
    line, which outranks the repository's config) and clean filters (``filter.*``, possibly pulled in by
    an ``include``). A repository whose own config has either gets no status summary, only its branch.
    """
    risky = _git(cwd, timeout, "config", "--local", "--get-regexp", r"^(filter|include|includeif)\.")
    if risky is None:
        return None  # not a repository (or no git)
    if risky.strip():
        head = _git(cwd, timeout, "symbolic-ref", "--quiet", "--short", "HEAD")
        return GitFacts(branch=(head or "").strip(), status="not checked (the repository configures filters)")
    out = _git(cwd, timeout, "status", "--porcelain=v1", "--branch", "--untracked-files=normal")
    if out is None:
        return None
    lines = out.splitlines()
    head = lines[0][3:] if lines and lines[0].startswith("## ") else ""
    branch = head.split("...")[0].replace("No commits yet on ", "").strip()
    return GitFacts(branch=branch, status=status_summary(lines[1:]))


def _git(cwd: Path, timeout: float, *args: str) -> str | None:
    """A git command's output; None if it could not run or failed (``config --get-regexp`` finding
    nothing exits 1: that is "", not a failure)."""
    try:
        out = subprocess.run(
            ["git", "-c", "core.fsmonitor=false", "--no-optional-locks", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode == 1 and args[0] == "config" and not out.stderr.strip():
        return ""
    return out.stdout if out.returncode == 0 else None


def status_summary(lines: Iterable[str]) -> str:
    """ "clean", or counts of what ``git status --porcelain`` lists: modified, added, deleted, untracked…"""
    counts: dict[str, int] = {}
    names = {"M": "modified", "A": "added", "D": "deleted", "R": "renamed", "C": "copied", "U": "conflicted"}
    for line in lines:
        code = line[:2]
        if code == "??":
            kind = "untracked"
        else:
            kind = next((names[c] for c in code if c in names), "changed")
        counts[kind] = counts.get(kind, 0) + 1
    if not counts:
        return "clean"
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def environment_text(
    cwd: Path, model: str, today: date | None = None, git: GitFacts | None = None, *, root: Path | None = None
) -> str:
    is_git = git is not None or any((p / ".git").exists() for p in [cwd, *cwd.parents])
    lines = ["<env>", f"Working directory: {cwd}"]
    if root is not None and root != cwd:
        lines.append(f"Project root: {root}")
    lines.append(f"Is directory a git repo: {'Yes' if is_git else 'No'}")
    if git is not None:
        lines.append(f"Git branch: {git.branch or '(detached)'}")
        lines.append(f"Git status at the start of the session: {git.status}")
    lines += [
        f"Platform: {platform.system().lower()}",
        f"Today's date: {(today or date.today()).isoformat()}",
        f"Model: {model}",
        "</env>",
    ]
    return "\n".join(lines)


# --- instruction files -------------------------------------------------------------------------------


@dataclass(frozen=True)
class InstructionFile:
    path: Path
    text: str
    imported_by: Path | None = None


@dataclass
class Instructions:
    files: list[InstructionFile] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # "path: why", each a file that was not read


@dataclass(frozen=True)
class Where:
    """Where to look: the working directory, the project root, the two homes, the files read so far."""

    cwd: Path
    home: Path  # COMPACT_AGENT_HOME
    user_home: Path | None = None
    root: Path | None = None
    read: tuple[str, ...] = ()  # files the session has read (for nested CLAUDE.md files)
    # the user's Read deny rules: a file (or import) they cover is not read, as the Read tool wouldn't
    read_denied: Callable[[Path], bool] | None = field(default=None, compare=False)


def instruction_files(where: Where) -> Instructions:
    out = Instructions()
    seen: set[Path] = set()
    for path, own in _candidates(where):
        _add(out, seen, where, path, own, None, 0)
    return out


def _candidates(where: Where) -> list[tuple[Path, bool]]:
    """(path, the user's own) in the order they are sent."""
    user = [where.home / "CLAUDE.md"]
    if where.user_home is not None:
        user.insert(0, where.user_home / ".claude" / "CLAUDE.md")
    out = [(p, True) for p in user]
    root = where.root or where.cwd
    chain = [where.cwd, *where.cwd.parents]
    dirs = chain[: chain.index(root) + 1] if root in chain else [where.cwd]
    out += [(d / name, False) for d in reversed(dirs) for name in PROJECT_NAMES]
    out += [(d / "CLAUDE.md", False) for d in _nested_dirs(where)]
    return out


def _nested_dirs(where: Where) -> list[Path]:
    """Directories strictly below the working directory that hold a file the session has read."""
    found: set[Path] = set()
    for name in where.read:
        parent = Path(name).parent
        try:
            relative = parent.relative_to(where.cwd)
        except ValueError:
            continue
        for depth in range(1, len(relative.parts) + 1):
            found.add(where.cwd.joinpath(*relative.parts[:depth]))
    return sorted(found)


def _add(
    out: Instructions, seen: set[Path], where: Where, path: Path, own: bool, parent: Path | None, depth: int
) -> None:
    if not (path.exists() or path.is_symlink()):
        return
    key = _resolved(path)
    if key in seen:
        return
    seen.add(key)
    if where.read_denied is not None and (where.read_denied(path) or where.read_denied(key)):
        out.refused.append(f"{path}: the user's permission rules deny reading it")
        return
    try:
        text = read_inside(path, None if own else (where.root or where.cwd))
    except FileProblem as exc:
        out.refused.append(f"{path}: {exc}")
        return
    if text is None:
        return
    out.files.append(InstructionFile(path, text, parent))
    if depth >= MAX_IMPORT_DEPTH:
        return
    for target in imports(text, path.parent, where.user_home):
        _add(out, seen, where, target, own, path, depth + 1)


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


def imports(text: str, base: Path, user_home: Path | None) -> list[Path]:
    """The ``@path`` imports of an instruction file, outside code fences and inline code."""
    found: list[Path] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in _IMPORT.finditer(re.sub(r"`[^`]*`", "", line)):
            raw = match.group(1).rstrip(".,;:")
            if raw.startswith("~/"):
                if user_home is None:
                    continue
                found.append(user_home / raw[2:])
            else:
                found.append(base / raw)
    return found


def memory_files(
    cwd: Path, home: Path, *, user_home: Path | None = None, root: Path | None = None
) -> list[Path]:
    """The instruction files that would be sent (imports included), in order."""
    return [f.path for f in instruction_files(Where(cwd, home, user_home, root)).files]


INSTRUCTIONS_HEAD = (
    "Instructions from the user's and the project's CLAUDE.md files. Follow them; they override defaults."
)


def memory_block(instructions: Instructions) -> dict[str, Any] | None:
    if not instructions.files:
        return None
    parts = [INSTRUCTIONS_HEAD]
    for f in instructions.files:
        origin = f" (imported by {f.imported_by})" if f.imported_by else ""
        parts.append(f"Contents of {f.path}{origin}:\n\n{f.text.strip()}")
    return {"type": "text", "text": "\n\n".join(parts)}


def build_system(
    cwd: Path,
    home: Path,
    model: str,
    today: date | None = None,
    *,
    git: GitFacts | None = None,
    where: Where | None = None,
    instructions: Instructions | None = None,
    intro: str = "",
) -> list[dict[str, Any]]:
    """System blocks: the stable guidance (``intro`` in place of ours: --system-prompt) and environment,
    then the instruction files (if any)."""
    where = where or Where(cwd, home)
    env = environment_text(cwd, model, today, git, root=where.root)
    blocks = [{"type": "text", "text": (intro or INTRO) + "\n\n" + env}]
    block = memory_block(instructions if instructions is not None else instruction_files(where))
    if block is not None:
        blocks.append(block)
    return blocks


def compact_instructions(cwd: Path, home: Path, where: Where | None = None) -> str:
    """The body of a "Compact Instructions" section in CLAUDE.md, if any (appended to summary instructions)."""
    for f in instruction_files(where or Where(cwd, home)).files:
        lines = f.text.splitlines()
        for i, line in enumerate(lines):
            stripped = line.strip()
            if stripped.startswith("#") and stripped.lstrip("#").strip().lower() == "compact instructions":
                level = len(stripped) - len(stripped.lstrip("#"))
                body = []
                for nxt in lines[i + 1 :]:
                    s = nxt.strip()
                    if s.startswith("#") and len(s) - len(s.lstrip("#")) <= level:
                        break
                    body.append(nxt)
                return "\n".join(body).strip()
    return ""
