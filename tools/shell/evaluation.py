"""Expansions that bash evaluates as code, and whether the values they evaluate can hold code.

Bash runs a command substitution hidden in a variable's *value* in three places: arithmetic (``$((x))``,
``$[x]``, ``(( ))``, ``for (( ))``, ``[[ x -eq y ]]``, array subscripts, ``${x:off:len}``, ``declare -i``
assignments) evaluates ``x``'s value as an expression, and an array subscript inside it (``a[$(cmd)]``)
runs ``cmd``; an indirect expansion ``${!x}`` evaluates the name in ``x``, subscript included; the prompt
transformation ``${x@P}`` expands ``$(cmd)`` in the value. None of that is visible as a program in the
line, so ``tools.shell.reader`` records every such place here and the line is not judged by its visible
programs when one of them evaluates a value the line could have filled with code.

A value is *plain* when every assignment the line makes to it is a literal without ``[``, ``$`` or
backquotes whose names are plain in turn, or a number from ``$((...))``. Variables the line doesn't assign
come from the user's environment and count as plain, except the ones bash itself fills from the line's
data (``$_``, ``$1``, ``REPLY``, ``BASH_REMATCH``, ``PWD``...). Pure: text in, reasons out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# numbers bash keeps itself: safe to evaluate
_NUMERIC = frozenset(
    "# ? $ ! RANDOM SRANDOM SECONDS LINENO BASHPID EPOCHSECONDS EPOCHREALTIME PPID UID EUID OPTIND "
    "HISTCMD PIPESTATUS".split()
)
# values bash sets from what the line does: arguments, input, directories, matches
_FILLED_BY_LINE = frozenset("_ @ * - REPLY MAPFILE OPTARG PWD OLDPWD DIRSTACK FUNCNAME COPROC".split())
_FILLED_PREFIXES = ("BASH_", "COMP_", "READLINE_", "__compact")
_NUMBER_LITERAL = re.compile(r"\b\d+#[0-9A-Za-z@_]+|\b0[xX][0-9A-Fa-f]+\b|\b\d+\b")
_EXPANDED = re.compile(r"\$\{?([#?$!@*-]|\d+|[A-Za-z_]\w*)")
_BARE = re.compile(r"[A-Za-z_]\w*")
_LENGTH = re.compile(r"\$\{#[A-Za-z_]\w*(\[[@*]\])?\}")
_SUBSTITUTION = re.compile(r"\$\((?!\()|`|<\(|>\(")
_LIST_EXPANSION = re.compile(r"!\w+[*@]|!\w+\[[@*]\]")
_PARAMETER = re.compile(r"[A-Za-z_]\w*|[#?$!@*-]|\d+")
ARITHMETIC_VALUE = "0"  # what $((...)) assigns: a number, whatever the expression


@dataclass
class Evaluations:
    """What one line hands to bash's evaluator, gathered during the walk and judged at its end."""

    contexts: list[tuple[str, str]] = field(default_factory=list)  # (arithmetic text, where it is)
    names: list[tuple[str, str]] = field(default_factory=list)  # (name whose value is evaluated, how)
    values: dict[str, list[str | None]] = field(default_factory=dict)  # every value assigned, None: unknown
    raw: list[tuple[str | None, str]] = field(default_factory=list)  # (value, as written): declare -i
    integer: bool = False  # declare -i: every assignment is arithmetic

    def arithmetic(self, text: str, where: str) -> None:
        self.contexts.append((text, where))

    def assigned(self, name: str, value: str | None, written: str = "") -> None:
        """``name`` (maybe with a subscript, which is arithmetic) gets ``value`` (None: unknown)."""
        base, bracket, subscript = name.partition("[")
        if bracket and subscript.rstrip("]") not in ("@", "*"):
            self.arithmetic(
                subscript[:-1] if subscript.endswith("]") else subscript, f"the subscript of {name}"
            )
        self.values.setdefault(base, []).append(value)
        self.raw.append((value, written))

    def expansion(self, text: str) -> None:
        """Note what ``${...}`` evaluates: indirection, @P, subscripts, substring offsets, := defaults."""
        if not (text.startswith("${") and text.endswith("}")):
            return
        body = text[2:-1]
        if _LIST_EXPANSION.fullmatch(body):
            return  # ${!prefix*}, ${!a[@]}: names and keys, nothing evaluated
        indirect = body.startswith("!")
        body = body[1:] if indirect or (body.startswith("#") and len(body) > 1) else body
        m = _PARAMETER.match(body)
        if m is None:
            return
        name, rest = m.group(), body[m.end() :]
        if rest.startswith("["):
            end = _closing_bracket(rest)
            subscript, rest = rest[1:end], rest[end + 1 :]
            if subscript not in ("@", "*"):
                self.arithmetic(subscript, f"the subscript of {text}")
        if indirect:
            self.names.append((name, f"{text} (indirect expansion) uses the value of {name} as a name"))
        if rest.startswith("@P"):
            self.names.append((name, f"{text} (prompt expansion) runs command substitutions in {name}"))
        if rest.startswith(":") and rest[1:2] not in ("-", "=", "+", "?"):
            self.arithmetic(rest[1:], f"the offset or length in {text}")
        if rest.startswith((":=", "=")):
            self.values.setdefault(name, []).append(None)

    def problems(self) -> list[str]:
        """Why the line's evaluations might run code, one clause each (empty: they can't)."""
        out = []
        if self.integer:
            where = "an assignment to a declare -i variable"
            for value, written in self.raw:
                if value is None and not written:
                    out.append(f"{where} is evaluated as arithmetic and holds data read when the line runs")
                self.arithmetic(written if value is None else value, where)
        for text, where in self.contexts:
            if _SUBSTITUTION.search(text):
                out.append(f"{where} is evaluated as arithmetic and holds a command's output")
                continue
            bad = next((n for n in _names(text) if self._filled(n, set())), None)
            if bad is not None:
                out.append(
                    f"{where} is evaluated as arithmetic and uses ${bad}, whose value comes from data; "
                    f"a value like a[$(cmd)] would run cmd"
                )
        for name, how in self.names:
            if self._filled(name, set()):
                out.append(f"{how}, whose value comes from data and could run a command")
        return out

    def _filled(self, name: str, seen: set[str]) -> bool:
        """True when ``name``'s value may hold something bash would run when evaluating it."""
        if name in _NUMERIC:
            return False
        if name in _FILLED_BY_LINE or name.isdigit() or name.startswith(_FILLED_PREFIXES):
            return True
        if name in seen or name not in self.values:
            return False  # a cycle, or the user's environment
        seen.add(name)
        for value in self.values[name]:
            if value is None or any(ch in value for ch in "[$`"):
                return True
            if any(self._filled(n, seen) for n in _names(value)):
                return True
        return False


def _names(text: str) -> list[str]:
    """The variables an arithmetic expression refers to, by expansion or by bare name."""
    text = _LENGTH.sub(" 0 ", text)  # ${#x} is a number whatever x holds
    expanded = _EXPANDED.findall(text)
    return expanded + _BARE.findall(_NUMBER_LITERAL.sub(" ", _EXPANDED.sub(" ", text)))


def _closing_bracket(text: str) -> int:
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if depth == 0:
            return i
    return len(text)
