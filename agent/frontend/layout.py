"""Plain-text layout for a terminal's width, without Rich (commands.py lays out its lists with these, and
ui.py its banner): a line is never left to the terminal's wrapping, which cuts words and paths anywhere."""

from __future__ import annotations

import textwrap


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
    line, a path, stays whole on its own line). ``first`` starts the first line (default ``indent``)."""
    return textwrap.wrap(
        text,
        width,
        initial_indent=indent if first is None else first,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first or indent]


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
