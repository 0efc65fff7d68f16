"""Files and directories readable by their owner only (CONTRACT §4), for what tools write to disk.

``mkdir(parents=True)`` gives parents the umask's mode (often 0755), so every directory made here is
chmod-ed explicitly; files are created 0600 and chmod-ed too (the umask can only remove bits). The same
helpers live in agent/private.py for now; tools/ may not import agent/, so this is the copy both can share.
"""

from __future__ import annotations

import os
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
