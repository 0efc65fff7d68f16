"""Plain-text layout for a terminal's width, without Rich (commands.py lays out its lists with these, and
ui.py its banner): a line is never left to the terminal's wrapping, which cuts words and paths anywhere."""

from __future__ import annotations

import re
import textwrap

# holds two words together on a line: "·" and the word after it, "Enter:" and what Enter alone does
GLUE = "\x00"


def middle_out(text: str, width: int) -> str:
    """``text`` within ``width`` characters: its head and its end with "…" between (a path keeps the
    directory it names, at its end: its last name whole when that leaves room for a start)."""
    if len(text) <= width or width < 5:
        return text
    tail = (width - 1) * 2 // 3
    last = len(text) - text.rfind("/")  # "/name", or the whole text when it names no directory
    if tail < last <= width - 4:
        tail = last
    return text[: width - 1 - tail] + "…" + text[len(text) - tail :]


def fill(text: str, width: int, indent: str = "", first: str | None = None) -> list[str]:
    """``text`` as lines of at most ``width`` columns, broken between words only (a word longer than the
    line, a path, stays whole on its own line; "· Enter: no" stays together). ``first`` starts the first
    line (default ``indent``)."""
    glued = text.replace("· ", "·" + GLUE).replace("Enter: ", "Enter:" + GLUE)
    return [line.replace(GLUE, " ") for line in _wrap(glued, width, indent, first)] or [first or indent]


def _wrap(text: str, width: int, indent: str, first: str | None) -> list[str]:
    return textwrap.wrap(
        text,
        width,
        initial_indent=indent if first is None else first,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def columns(label: str, value: str, note: str, at: int, width: int) -> list[str]:
    """A row of a two-column list: ``label`` padded to column ``at``, then ``value`` and ``note``
    (``(source)``) beside it when the line fits ``width``; else the note on the next line under the
    value, and a value too long for its column shortened in the middle. A label past its column puts
    the value on a line of its own."""
    pad = " " * at
    head = label.ljust(at) if len(label) < at else None
    line = f"{head}{value}  {note}" if note else f"{head}{value}"
    if head is not None and len(line) <= width:
        return [line]
    rows = [label] if head is None else []
    room = max(width - at, 10)
    rows.append(f"{head if head is not None else pad}{middle_out(value, room)}")
    if note:
        rows.append(pad + middle_out(note, room))
    return rows


def hanging(line: str, width: int) -> str:
    """Where a long line's next lines start: under an item's text ("- ", "✗ ", "2. "), under the line's
    second column when it has one ("  /help    List the commands": under "List", two spaces or more
    apart from the first, in the line's first half), else under its own indent."""
    lead = len(line) - len(line.lstrip(" "))
    marker = re.match(r"(?:[-•*✓✗…]|\d+\.) ", line[lead:])
    if marker:  # a list's item: under its text
        return " " * (lead + marker.end())
    gap = line.find("  ", lead)
    while 0 <= gap < len(line) and line[gap] == " ":
        gap += 1
    if lead < gap <= width // 2 and line[gap:].strip():
        return " " * gap
    return " " * lead


def wrap_lines(text: str, width: int) -> list[str]:
    """A command's plain output for ``width`` columns: a line that fits stays as it is; a longer one is
    broken between words (a word longer than the line, a path, stays whole), its next lines under its
    second column or its indent (``hanging``)."""
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
        else:
            out += fill(line, width, hanging(line, width), first="")
    return out
