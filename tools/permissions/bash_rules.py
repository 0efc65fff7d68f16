"""Bash permission rules matched against the simple commands ``tools.shell.reader`` finds.

A rule's text is ``prefix:*`` (the command's words start with the prefix's whole words), a pattern where
``*`` stands for anything, or an exact command. It is matched against one simple command's words after
quote removal, joined by spaces (``git "status"`` is ``git status``). Deny and ask rules also see the
program by its base name (``/bin/rm x`` is ``rm x``); allow rules see it only as written, so ``./git
status`` is not ``git status``.

``could_match`` is the fail-closed half: when a word has an expansion, a rule that might match once the
expansion is known (``git $X`` against ``git push:*``) is reported, so a deny rule can ask instead of
letting the command through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.shell.reader import Command

_ANY = None  # a "*" in a pattern


@dataclass(frozen=True)
class BashPattern:
    """One Bash rule's text compiled to token lists (characters and ``_ANY``); any list may match."""

    alternatives: tuple[tuple[str | None, ...], ...]
    exact: str | None  # the rule is an exact command: a whole line equal to it matches too
    # a prefix rule's words ("git push:*" -> git, push): deny and ask rules find them among a command's
    # non-option words in order, whatever options stand between (issue 30)
    words: tuple[str, ...] = ()

    @classmethod
    def parse(cls, content: str) -> BashPattern:
        content = content.strip()
        if content.endswith(":*") or (content.endswith(" *") and "*" not in content[:-1]):
            head = content[:-2].strip()
            prefix = tuple(head)
            words = tuple(head.split()) if "*" not in head and len(head.split()) > 1 else ()
            return cls((prefix, (*prefix, " ", _ANY)), None, words)
        if "*" in content:
            return cls((tuple(_ANY if ch == "*" else ch for ch in content),), None)
        return cls((tuple(content),), content)

    def matches(self, text: str) -> bool:
        return any(len(tokens) in _states(tokens, text) for tokens in self.alternatives)

    def could_start(self, text: str) -> bool:
        """True when some command this pattern matches begins with ``text``."""
        return any(_states(tokens, text) for tokens in self.alternatives)


def matches(pattern: BashPattern, command: Command, *, by_base_name: bool) -> bool:
    """Deny and ask rules (``by_base_name``) also see the line past global options (``git -C . push`` is
    ``git push``); allow rules see past them only when they just change output (``git --no-pager log``)."""
    lines = [command.line()]
    bare = command.without_globals()
    if bare is not None and (by_base_name or command.quiet_globals):
        lines.append(bare)
    if by_base_name:
        lines.extend(_undashed(command))
        name = command.program.rsplit("/", 1)[-1]
        if name in _SAME_AS:  # "unlink f" is "rm f" to a deny rule
            lines.append(" ".join([_SAME_AS[name], *command.line().split(" ")[1:]]))
    if any(pattern.matches(form) for line in lines for form in _forms(line, by_base_name)):
        return True
    return by_base_name and bool(pattern.words) and _words_in_order(pattern.words, command)


# programs that do what another does, for deny and ask rules: unlink removes a file as rm does
_SAME_AS = {"unlink": "rm"}


def _undashed(command: Command) -> list[str]:
    """``git-push x`` (and ``/usr/lib/git-core/git-push x``) is ``git push x``: the dashed form of a
    subcommand is the same command, split at every dash."""
    name = command.program.rsplit("/", 1)[-1]
    rest = [w.value if w.value is not None else w.text for w in command.words[1:]]
    return [" ".join([name[:i], name[i + 1 :], *rest]) for i, ch in enumerate(name) if ch == "-" and 0 < i]


def _words_in_order(words: tuple[str, ...], command: Command) -> bool:
    """The rule's words found among the command's non-option words in order (``make -C . deploy`` is
    ``make deploy``, ``aws s3 --profile p rm`` is ``aws s3 rm``). For a program with a table of global
    options the first word after the program must be its subcommand (``git commit -m push`` is not
    ``git push``)."""
    name = command.program.rsplit("/", 1)[-1]
    values = [w.value for w in command.words[1:]]
    forms = [(name, values, command.subcommand)]
    forms += [(name[:i], [name[i + 1 :], *values], 1) for i, ch in enumerate(name) if ch == "-" and 0 < i]
    for program, rest, subcommand in forms:
        if program != words[0] and command.program != words[0]:
            continue
        if subcommand is not None:  # the grammar says where the subcommand is
            at = subcommand - 1
            if at >= len(rest) or rest[at] != words[1]:
                continue
            wanted, rest = list(words[2:]), rest[at + 1 :]
        else:
            wanted = list(words[1:])
        for word in rest:
            if wanted and word == wanted[0]:
                wanted.pop(0)
        if not wanted:
            return True
    return False


def could_match(pattern: BashPattern, command: Command) -> bool:
    """The command has a word with an expansion, or an option before its subcommand that isn't known,
    and the rule may match once the words are known."""
    head = command.known_head()
    if head is not None and any(pattern.could_start(form) for form in _forms(head, True)):
        return True
    program = command.program.rsplit("/", 1)[-1]
    return command.subcommand_unknown is not None and pattern.could_start(program + " ")


def suggest(command: str, target: Command | None) -> str:
    """The rule an "always" answer adds for ``target`` (the first command of the line no rule allows yet):
    its program and subcommand (``Bash(git commit:*)``), the module or script of an interpreter
    (``Bash(python3 -m unittest:*)``, never ``Bash(python3:*)``), or, when it can't be narrowed safely,
    the exact line. It depends only on ``target``, not on what follows it in a pipeline."""
    exact = f"Bash({command.strip()})"
    if target is None or "\n" in command:
        return exact
    prefix = _prefix(target)
    if prefix is None or any(not w or re.search(r"\s", w) for w in prefix):
        return exact
    return f"Bash({' '.join(prefix)}:*)"


_SUBCOMMAND = re.compile(r"[A-Za-z][\w:.-]*")
# programs whose first argument is never a subcommand: "echo hi" is Bash(echo:*)
_NO_SUBCOMMANDS = frozenset(
    "echo printf cat ls grep egrep fgrep rg head tail wc sort uniq cut tr diff cmp comm rm rmdir mkdir touch cp "
    "mv ln chmod chown du df stat file which whereis type pwd basename dirname realpath readlink tree less "
    "more jq yq sed awk find fd xxd od hexdump md5sum sha1sum sha256sum base64 date sleep true false test "
    "pytest ruff mypy black flake8 pylint eslint prettier tsc curl wget tar zip unzip gzip gunzip ps kill "
    "env printenv id whoami uname hostname nproc free uptime seq yes tee column paste join fold nl".split()
)
# subcommands that run a package, script or program named next: that name is kept too
_RUN_SUBCOMMANDS = frozenset({"exec", "x", "dlx", "run", "tool", "run-script"})


def _prefix(target: Command) -> list[str] | None:
    """The words a narrow rule for ``target`` keeps, or None when only the exact line is safe."""
    words: list[str] = []
    for w in target.words:
        if w.value is None:
            break
        words.append(w.value)
    if not words:
        return None
    # start-up speed: the shell's program tables load with the first command judged, not before the prompt
    from tools.shell.programs import runs_anything
    from tools.shell.subcommands import has_globals

    name = words[0].rsplit("/", 1)[-1]
    narrow = runs_anything(name)
    if narrow == "exact":
        return None
    if narrow == "script":
        # an interpreter or launcher: keep its options up to the module or script it runs
        for i, word in enumerate(words[1:], 1):
            if word in ("-m", "-jar") and i + 1 < len(words):
                return words[: i + 2]
            if not word.startswith("-"):
                return words[: i + 1]
        return None
    start = 1
    if has_globals(name):
        if target.subcommand is None or (target.subcommand > 1 and not target.quiet_globals):
            return None if len(words) > 1 else words
        start = target.subcommand
    if len(words) <= start or not _SUBCOMMAND.fullmatch(words[start]) or name in _NO_SUBCOMMANDS:
        return [words[0]]
    kept = [words[0], words[start]]  # a subcommand: "git commit", "npm test"
    if (
        words[start] in _RUN_SUBCOMMANDS
        and len(words) > start + 1
        and _SUBCOMMAND.fullmatch(words[start + 1])
    ):
        kept.append(words[start + 1])  # "npm exec prettier", "uv run pytest"
    elif words[start] in _RUN_SUBCOMMANDS and has_globals(name):
        return None
    return kept


def _forms(line: str, by_base_name: bool) -> list[str]:
    forms = [line]
    program, space, rest = line.partition(" ")
    if by_base_name and "/" in program:
        forms.append(program.rsplit("/", 1)[-1] + space + rest)
    return forms


def _states(tokens: tuple[str | None, ...], text: str) -> set[int]:
    """Positions in ``tokens`` reachable after reading ``text`` (a tiny NFA: ``_ANY`` loops)."""

    def close(states: set[int]) -> set[int]:
        out = set(states)
        for s in states:
            while s < len(tokens) and tokens[s] is _ANY:
                s += 1
                out.add(s)
        return out

    states = close({0})
    for ch in text:
        states = close(
            {
                s + (tokens[s] is not _ANY)
                for s in states
                if s < len(tokens) and (tokens[s] is _ANY or tokens[s] == ch)
            }
        )
        if not states:
            break
    return states
