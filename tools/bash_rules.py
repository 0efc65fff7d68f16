"""Bash permission rules matched against the simple commands ``tools.shell`` finds.

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

from tools.shell import Command

_ANY = None  # a "*" in a pattern


@dataclass(frozen=True)
class BashPattern:
    """One Bash rule's text compiled to token lists (characters and ``_ANY``); any list may match."""

    alternatives: tuple[tuple[str | None, ...], ...]
    exact: str | None  # the rule is an exact command: a whole line equal to it matches too

    @classmethod
    def parse(cls, content: str) -> BashPattern:
        content = content.strip()
        if content.endswith(":*"):
            prefix = tuple(content[:-2].strip())
            return cls((prefix, (*prefix, " ", _ANY)), None)
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
    return any(pattern.matches(form) for line in lines for form in _forms(line, by_base_name))


def could_match(pattern: BashPattern, command: Command) -> bool:
    """The command has a word with an expansion, or an option before its subcommand that isn't known,
    and the rule may match once the words are known."""
    head = command.known_head()
    if head is not None and any(pattern.could_start(form) for form in _forms(head, True)):
        return True
    program = command.program.rsplit("/", 1)[-1]
    return command.subcommand_unknown is not None and pattern.could_start(program + " ")


def suggest(command: str, commands: list[Command], simple: bool) -> str:
    """The rule an "always" answer adds: ``Bash(git commit:*)`` for one plain command, else the exact line."""
    command = command.strip()
    words = [w.value for w in commands[0].words] if simple and len(commands) == 1 else []
    if not words or any(w is None or not w or re.search(r"\s", w) for w in words[:2]) or "\n" in command:
        return f"Bash({command})"
    prefix = [words[0] or ""]
    if len(words) > 1 and re.fullmatch(r"[A-Za-z][\w:-]*", words[1] or ""):
        prefix.append(words[1] or "")  # a subcommand: "git commit", "npm test"
    return f"Bash({' '.join(prefix)}:*)"


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
