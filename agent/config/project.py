"""The project around the working directory: where its root is, and how its files are read safely.

The root is the nearest directory, from the working directory upwards, that holds a ``.git`` or a
``.claude/`` — so an agent started in ``src/`` still finds the project's settings and CLAUDE.md. The
user's home directory is never a project root by way of its ``.claude/`` (that one is the user's own).

Files a repository supplies (settings, instruction files, custom commands) are read with ``read_small``:
regular files only (a FIFO would block start-up, ``/dev/zero`` would never end) and at most ``cap``
bytes. ``inside`` says whether a path, with every symlink resolved, stays under a directory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

SETTINGS_CAP = 1_000_000  # bytes: far beyond any real settings file
TEXT_CAP = 4_000_000  # bytes: an instruction file or a custom command (~1M tokens, past any window)


class FileProblem(Exception):
    """A file that exists but can't be used; the message says why (no path)."""


def project_root(cwd: Path, user_home: Path | None = None) -> Path:
    """The nearest directory at or above ``cwd`` holding ``.git`` or ``.claude/``; ``cwd`` if none does."""
    home = _resolved(user_home) if user_home is not None else None
    for directory in (cwd, *cwd.parents):
        if (directory / ".git").exists():
            return directory
        if (directory / ".claude").is_dir() and _resolved(directory) != home:
            return directory
    return cwd


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


def inside(path: Path, directory: Path) -> bool:
    """Whether ``path``, symlinks resolved, is ``directory`` or below it (resolved too)."""
    try:
        return _resolved(path).is_relative_to(_resolved(directory))
    except ValueError:
        return False


def read_inside(path: Path, root: Path | None, cap: int = TEXT_CAP) -> str | None:
    """``read_small`` for a file a project supplies: one that resolves outside ``root`` is a FileProblem
    (``root`` None: the user's own file, read wherever it lives)."""
    if root is not None and not inside(path, root):
        raise FileProblem(f"it resolves outside the project ({_resolved(path)})")
    return read_small(path, cap)


def read_small(path: Path, cap: int = TEXT_CAP) -> str | None:
    """The text of a regular file of at most ``cap`` bytes; None when it does not exist.

    Raises FileProblem for anything else that is there: not a regular file, too large, unreadable, not
    UTF-8. Opened non-blocking, so a FIFO put in the file's place can't stall the caller.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise FileProblem(f"cannot read it ({exc.strerror or type(exc).__name__})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileProblem("it is not a regular file")
        if info.st_size > cap:
            raise FileProblem(f"it is larger than {cap} bytes")
        chunks, size = [], 0
        while size <= cap:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > cap:  # it grew while being read
            raise FileProblem(f"it is larger than {cap} bytes")
    except OSError as exc:
        raise FileProblem(f"cannot read it ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileProblem(f"it is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
