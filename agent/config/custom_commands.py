"""Custom slash commands, as Claude Code users write them: Markdown files whose body is a prompt.

Where: the user's ``~/.claude/commands/`` and ``$COMPACT_AGENT_HOME/commands/``, and the project's
``.claude/commands/`` (at the project root). A file ``review.md`` is ``/review``; one in a subdirectory,
``git/commit.md``, is ``/git:commit``. Front matter (agent/config/frontmatter.py): ``description`` (shown in
/help and completion), ``argument-hint`` (shown after the name), ``allowed-tools`` (permission rules that
allow those calls without asking while the command's turn runs). In the body, ``$ARGUMENTS`` is what
followed the name and ``$1``…``$9`` its words; a body without ``$ARGUMENTS`` gets the arguments appended.

Trust: a project's commands are the repository's words. They can be run (the user types them), but
until the project is trusted their ``allowed-tools`` are ignored, like a project's ``allow`` rules; a
command file that resolves outside the project is not read. A built-in command's name can't be taken,
and on a clash the user's own command wins over the project's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from agent.config import frontmatter
from agent.config.project import FileProblem, read_inside
from core.rules import is_rule

MAX_FILES = 500  # per directory tree: a huge tree must not slow every command line
_NAME = re.compile(r"^[A-Za-z][\w-]*(?::[A-Za-z][\w-]*)*$")


@dataclass(frozen=True)
class CustomCommand:
    name: str
    path: Path
    scope: str  # "user" | "project"
    body: str
    description: str = ""
    argument_hint: str = ""
    allowed_tools: tuple[str, ...] = ()
    trusted: bool = True  # False: a project's command while the project is untrusted

    @property
    def allowances(self) -> tuple[str, ...]:
        """The allow rules its turn gets (none from an untrusted project)."""
        return self.allowed_tools if self.trusted else ()

    def expand(self, args: str) -> str:
        words = args.split()
        text = re.sub(
            r"\$([1-9])",
            lambda m: words[int(m.group(1)) - 1] if int(m.group(1)) <= len(words) else "",
            self.body,
        )
        if "$ARGUMENTS" in text:
            return text.replace("$ARGUMENTS", args)
        return f"{text}\n\nArguments: {args}" if args else text


@dataclass
class Found:
    commands: dict[str, CustomCommand] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # "path: why", files that were not read


def load(
    *, user_dirs: list[Path], project_dir: Path | None, project_root: Path, trusted: bool, reserved: set[str]
) -> Found:
    """Every custom command: the user's first (they win a clash), then the project's."""
    found = Found()
    for directory in user_dirs:
        _scan(found, directory, "user", True, None, reserved)
    if project_dir is not None:
        _scan(found, project_dir, "project", trusted, project_root, reserved)
    return found


def _scan(
    found: Found, directory: Path, scope: str, trusted: bool, root: Path | None, reserved: set[str]
) -> None:
    if not directory.is_dir():
        return
    try:
        files = sorted(directory.rglob("*.md"))[:MAX_FILES]
    except OSError:
        return
    for path in files:
        name = ":".join(path.relative_to(directory).with_suffix("").parts)
        if not _NAME.match(name) or name.lower() in reserved or name.lower() in found.commands:
            continue
        try:
            text = read_inside(path, root)
        except FileProblem as exc:
            found.problems.append(f"{path}: {exc}")
            continue
        if text is None:
            continue
        doc = frontmatter.parse(text)
        tools = tuple(rule for rule in doc.items("allowed-tools") if is_rule(rule))
        found.commands[name.lower()] = CustomCommand(
            name=name,
            path=path,
            scope=scope,
            body=doc.body.strip(),
            description=doc.text("description") or _first_line(doc.body),
            argument_hint=doc.text("argument-hint"),
            allowed_tools=tools,
            trusted=trusted,
        )


def _first_line(body: str) -> str:
    line = next((text.strip() for text in body.splitlines() if text.strip()), "")
    return line if len(line) <= 60 else line[:59] + "…"
