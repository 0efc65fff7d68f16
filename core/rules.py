"""Permission rule text, as settings files, ``--allowedTools`` and a custom command's ``allowed-tools`` write
it: whether a string is a rule (one grammar for all three), and splitting a flag's value into rules. What a
rule allows is tools/permissions' (its engine parses a rule into tool and content)."""

from __future__ import annotations

import re

RULE_EXAMPLE = 'a rule like "Read", "Bash(git status:*)" or "Edit(src/**)"'

# a tool name ("mcp__server__*" too), then optionally its content in parentheses
_RULE = re.compile(r"^[A-Za-z_][\w.-]*\*?(\(.*\))?$", re.DOTALL)


def is_rule(text: str) -> bool:
    """True when ``text`` (surrounding blanks ignored) is written as a permission rule."""
    return bool(_RULE.match(text.strip()))


def split_rules(text: str) -> list[str]:
    """Split a flag value like ``"Bash(git log:*) Edit,Read"`` into rules (commas/blanks inside () kept)."""
    rules: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        if depth == 0 and (ch == "," or ch.isspace()):
            if current:
                rules.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        rules.append("".join(current))
    return rules
