"""Tool output of any size: a head kept in memory for the result, the whole of it spilled to a file.

Bash and Grep write their output, as it streams, into a ``SpillingOutput``. The first ``HEAD_BYTES``
stay in memory. Once the output outgrows them, all of it (the head too) goes to
``<session dir>/tool-results/<prefix>-<unique>.txt`` (file 0600, directories 0700) and keeps going
there, so memory stays bounded however much a command prints. The tool then shows the head and
``spill_note()``: how much was shown, the total size and the file's path, which the model can Read
with offset and limit. So no tool result, and no transcript line, holds more than about
``HEAD_BYTES``; output that fits is passed on untouched, with no file written.

The budget stage (compact/budget.py) may still move a result of this size out of the context and
show a ~2,000-character preview, which is why tools put the note first.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import IO

from core.private import open_private

# Well above what a useful result holds (the budget stage moves results over 20-50,000 characters to
# disk anyway, keeping all of what it is given), well below what would make a transcript line heavy.
HEAD_BYTES = 1024 * 1024


class SpillingOutput:
    """A byte stream's head in memory and, once it outgrows ``head_bytes``, the whole stream in a file."""

    def __init__(self, directory: Path, prefix: str, head_bytes: int | None = None) -> None:
        self.directory, self.prefix = directory, prefix
        self.head_bytes = HEAD_BYTES if head_bytes is None else head_bytes
        self.head = bytearray()
        self.total_bytes = 0
        self.newlines = 0
        self.ends_with_newline = False
        self.path: Path | None = None
        self._file: IO[bytes] | None = None

    def __enter__(self) -> SpillingOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def spilled(self) -> bool:
        return self.path is not None

    @property
    def total_lines(self) -> int:
        return self.newlines + (1 if self.total_bytes and not self.ends_with_newline else 0)

    def write(self, data: bytes) -> None:
        if not data:
            return
        self.total_bytes += len(data)
        self.newlines += data.count(b"\n")
        self.ends_with_newline = data.endswith(b"\n")
        room = self.head_bytes - len(self.head)
        if self._file is None and len(data) > room:
            self._spill()
        if room > 0:
            self.head += data[:room]
        if self._file is not None:
            self._file.write(data)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def discard(self) -> None:
        """Close and delete the spill file, if any (for a tool that ends in an error instead)."""
        self.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None

    def text(self) -> str:
        """The head as text: all of the output when it fit; when it spilled, its whole lines (or, if the
        first line alone is longer than the head, the head's part of it)."""
        head = bytes(self.head)
        if self.spilled and b"\n" in head:
            head = head[: head.rindex(b"\n") + 1]
        return head.decode("utf-8", errors="replace")

    def spill_note(self, shown_lines: int, hint: str = "") -> str:
        """One line for the top of the result: what is shown, the total, and where all of it is."""
        if shown_lines:
            shown = f"the first {_lines(shown_lines)} {'is' if shown_lines == 1 else 'are'} shown"
        else:
            shown = f"the first {len(self.head):,} bytes of its first line are shown"
        return (
            f"(Output too large to show in full: {self.total_bytes:,} bytes in {_lines(self.total_lines)}; "
            f"{shown}. All of it is saved in {self.path} - Read that file with offset and limit to see "
            f"the rest{hint}.)"
        )

    def _spill(self) -> None:
        path = self.directory / f"{self.prefix}-{uuid.uuid4().hex[:12]}.txt"
        fd = open_private(path, os.O_WRONLY | os.O_EXCL)
        self._file = os.fdopen(fd, "wb")
        self._file.write(self.head)
        self.path = path


def _lines(count: int) -> str:
    return f"{count:,} line{'' if count == 1 else 's'}"
