"""Tool output of any size: a head kept in memory for the result, the whole of it spilled to a file.

Bash and Grep write their output, as it streams, into a ``SpillingOutput``. The first ``HEAD_BYTES``
stay in memory. Once the output outgrows them, all of it (the head too) goes to
``<session dir>/tool-results/<prefix>-<unique>.txt`` (file 0600, directories 0700) and keeps going
there, so memory stays bounded however much a command prints. The tool then shows the head and
``spill_note()``: how much was shown, the total size and the file's path, which the model can Read
with offset and limit. So no tool result, and no transcript line, holds more than about
``HEAD_BYTES``; output that fits is passed on untouched, with no file written.

The budget stage (compact/stages/budget.py) may still move a result of this size out of the context and
show a ~2,000-character preview, which is why tools put the note first.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import IO

from core.private import REDACTED, open_private

# Well above what a useful result holds (the budget stage moves results over 20-50,000 characters to
# disk anyway, keeping all of what it is given), well below what would make a transcript line heavy.
HEAD_BYTES = 1024 * 1024


class SpillingOutput:
    """A byte stream's head in memory and, once it outgrows ``spill_after`` bytes (``head_bytes`` unless
    said), the whole stream in a file.

    ``secrets`` are replaced by ``REDACTED`` in the file as it is written: the last ``longest secret - 1``
    bytes are held back from each write, so a secret split across two writes is still found (the head
    is the caller's to redact when it shows it). With ``strict=False`` a file that can't be opened or
    written is no error: ``problem`` says why the whole output could not be saved."""

    def __init__(
        self,
        directory: Path | None,
        prefix: str,
        head_bytes: int | None = None,
        *,
        spill_after: int | None = None,
        secrets: tuple[str, ...] = (),
        strict: bool = True,
    ) -> None:
        self.directory, self.prefix = directory, prefix
        self.head_bytes = HEAD_BYTES if head_bytes is None else head_bytes
        self.spill_after = self.head_bytes if spill_after is None else min(spill_after, self.head_bytes)
        self.secrets = tuple(s.encode() for s in secrets if s)
        self._keep = max((len(s) for s in self.secrets), default=1) - 1
        self.strict = strict
        self.head = bytearray()
        self.total_bytes = 0
        self.newlines = 0
        self.ends_with_newline = False
        self.path: Path | None = None
        self.problem = ""
        self._file: IO[bytes] | None = None
        self._pending = b""  # held back from the file: a secret may go on in the next write

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
        before = self.total_bytes  # all of it is in the head until the file opens
        self.total_bytes += len(data)
        self.newlines += data.count(b"\n")
        self.ends_with_newline = data.endswith(b"\n")
        room = self.head_bytes - len(self.head)
        if room > 0:
            self.head += data[:room]
        if self._file is not None:
            self._put(data)
        elif self.total_bytes > self.spill_after and self.path is None and not self.problem:
            self._spill(bytes(self.head[:before]) + data)

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.write(self._redacted(self._pending))
                self._file.close()
            except OSError as exc:
                self._failed(exc)
            self._file, self._pending = None, b""

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

    def _spill(self, so_far: bytes) -> None:
        if self.directory is None:
            return
        path = self.directory / f"{self.prefix}-{uuid.uuid4().hex[:12]}.txt"
        try:
            self._file = os.fdopen(open_private(path, os.O_WRONLY | os.O_EXCL), "wb")
        except OSError as exc:
            self._failed(exc)
            return
        self.path = path
        self._put(so_far)

    def _put(self, data: bytes) -> None:
        assert self._file is not None
        if self.secrets:
            # a secret is at most keep + 1 bytes: one still incomplete lies wholly in the last keep
            data = self._redacted(self._pending + data)
            cut = max(0, len(data) - self._keep)  # a short write may be all held back
            data, self._pending = data[:cut], data[cut:]
        try:
            self._file.write(data)
        except OSError as exc:
            self._file.close()
            self._file = None
            self._failed(exc)

    def _redacted(self, data: bytes) -> bytes:
        for secret in self.secrets:
            data = data.replace(secret, REDACTED.encode())
        return data

    def _failed(self, exc: OSError) -> None:
        if self.strict:
            raise exc
        self.problem = exc.strerror or str(exc)


def _lines(count: int) -> str:
    return f"{count:,} line{'' if count == 1 else 's'}"
