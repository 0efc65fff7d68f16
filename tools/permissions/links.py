"""Hard links and the Read deny rules: a denied file must not be readable through another of its names.

A deny rule names paths, but a hard link is the same file under a second name that no rule mentions.
``Hidden`` is what the session gives the tools as ``ctx.hidden``: a path is hidden when a Read deny rule
matches it, or when it is a regular file with more than one name and either one of its other names is
denied or not all of them can be found under the project (a name elsewhere may be the denied one: fail
closed). Files with a single name, the usual case, cost one ``stat``; looking for the other names walks
the project, at most ``WALK_LIMIT`` entries (past that the file counts as hidden).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

WALK_LIMIT = 200_000
SKIPPED_DIRS = frozenset({".git"})


class Hidden:
    """``ctx.hidden``: the Read deny rules, extended to every name of a multiply linked file."""

    def __init__(self, denied: Callable[[Path], bool], roots: list[Path]) -> None:
        self.denied, self.roots = denied, roots

    def __call__(self, path: Path) -> bool:
        if self.denied(path):
            return True
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return False  # nothing there to read
        if st.st_nlink <= 1 or not os.path.isfile(path):
            return False
        return twin_denied(Path(path), (st.st_dev, st.st_ino), st.st_nlink, self.denied, self.roots)


def twin_denied(
    path: Path, identity: tuple[int, int], names: int, denied: Callable[[Path], bool], roots: list[Path]
) -> bool:
    """Whether another name of the file ``identity`` is denied, or not all ``names`` of it are found."""
    found: set[str] = set()
    seen = 0
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
            for name in files:
                seen += 1
                if seen > WALK_LIMIT:
                    return True
                other = os.path.join(folder, name)
                try:
                    st = os.lstat(other)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == identity and other not in found:
                    found.add(other)
                    if denied(Path(other)):
                        return True
    return len(found) < names


def denied_names(
    roots: list[Path], denied: Callable[[Path], bool], limit: int = WALK_LIMIT
) -> dict[tuple[int, int], Path]:
    """The files below ``roots`` (a rule's literal directory, or a file) that ``denied`` covers and that
    have more than one name, by (device, inode): another name of one of them, wherever it is, is the
    denied file itself. Only multiply linked files are kept (a file with one name has no other)."""
    out: dict[tuple[int, int], Path] = {}
    seen = 0

    def take(path: str) -> None:
        try:
            st = os.lstat(path)
        except OSError:
            return
        if st.st_nlink > 1 and os.path.isfile(path) and not os.path.islink(path) and denied(Path(path)):
            out.setdefault((st.st_dev, st.st_ino), Path(path))

    for root in roots:
        if os.path.isfile(root):
            take(str(root))
            continue
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
            for name in files:
                seen += 1
                if seen > limit:
                    return out
                take(os.path.join(folder, name))
    return out
