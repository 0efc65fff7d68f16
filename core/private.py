"""What the agent keeps private: files and directories readable by their owner only (docs/files.md), and
the API key kept out of anything recorded (``redact``).

``mkdir(parents=True)`` gives parents the umask's mode (often 0755), so every directory made here is
chmod-ed explicitly; files are created 0600 and chmod-ed too (the umask can only remove bits).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def make_private_dirs(directory: Path) -> None:
    """Create ``directory`` and its missing parents, each 0700; existing ones are left as they are."""
    missing = []
    d = directory
    while not d.exists():
        missing.append(d)
        d = d.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(d, 0o700)


def open_private(path: Path, flags: int) -> int:
    """os.open of a file in a private directory, created 0600; returns the descriptor."""
    make_private_dirs(path.parent)
    fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (replacing it), owner-only."""
    fd = open_private(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def replace_private(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all (a private temp file renamed over it): a reader
    never sees it half-written, and a full disk leaves the old file as it was."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write_private(temp, text)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    return path


@contextmanager
def locked(path: Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on the private lock file ``path`` (flock: released when the process dies,
    however). ``wait=False``: yield False at once when another process holds it."""
    fd = open_private(path, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


REDACTED = "[redacted API key]"
# shorter "secrets" would redact ordinary words; real keys and tokens are long (the transcript agrees)
MIN_SECRET_CHARS = 8


def secrets_of(*values: str | None) -> tuple[str, ...]:
    """The credentials worth redacting among ``values`` (unset and too-short ones dropped)."""
    return tuple(v for v in values if v and len(v) >= MIN_SECRET_CHARS)


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every occurrence of each secret replaced, so command output that happens to hold
    the API key (a dotfile, ``env`` in a hook) can be recorded and shown without the key."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text
