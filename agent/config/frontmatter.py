"""Front matter of Claude Code's Markdown definitions (custom commands, custom agents).

A file may open with a block between two ``---`` lines holding ``key: value`` lines, the small subset of
YAML those files use: plain or quoted strings, and lists written ``[a, b]`` or as ``- item`` lines under
an empty ``key:``. Anything fancier is kept as the raw text after the colon. ``parse`` never raises: a
file without (or with an unclosed) front matter is all body.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FENCE = "---"


@dataclass
class Document:
    meta: dict[str, str | list[str]] = field(default_factory=dict)
    body: str = ""

    def text(self, key: str) -> str:
        """A key as one string (a list joined by ", "); "" when absent."""
        value = self.meta.get(key, "")
        return ", ".join(value) if isinstance(value, list) else value

    def items(self, key: str) -> list[str]:
        """A key as a list: ``[a, b]``, ``- a`` lines, or a comma/blank separated string."""
        value = self.meta.get(key, "")
        if isinstance(value, list):
            return [v for v in value if v]
        return [v for v in split_list(value) if v]


def parse(text: str) -> Document:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != FENCE:
        return Document(body=text)
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == FENCE)
    except StopIteration:
        return Document(body=text)
    return Document(meta=_pairs(lines[1:end]), body="\n".join(lines[end + 1 :]).strip("\n"))


def _pairs(lines: list[str]) -> dict[str, str | list[str]]:
    meta: dict[str, str | list[str]] = {}
    current: str | None = None  # a key whose value is a "- item" list below it
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("- ") and current is not None:
            items = meta.setdefault(current, [])
            if isinstance(items, list):
                items.append(_unquote(stripped[2:].strip()))
            continue
        key, colon, value = stripped.partition(":")
        if not colon or not key.strip():
            continue
        key, value = key.strip(), value.strip()
        if not value:
            meta[key], current = [], key
            continue
        current = None
        meta[key] = _list(value) if value.startswith("[") and value.endswith("]") else _unquote(value)
    return {k: ("" if v == [] else v) for k, v in meta.items()}


def _list(value: str) -> list[str]:
    return [_unquote(v.strip()) for v in value[1:-1].split(",") if v.strip()]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def split_list(value: str) -> list[str]:
    """ "Read, Bash(git status:*) Edit" → three items (commas and blanks inside parentheses kept)."""
    out: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in value:
        depth += (ch == "(") - (ch == ")")
        if depth <= 0 and (ch == "," or ch.isspace()):
            if current:
                out.append("".join(current))
            current, depth = [], 0
        else:
            current.append(ch)
    if current:
        out.append("".join(current))
    return out
