"""The API key kept out of what the agent's child processes can read.

The key usually arrives in the environment, and a process's environment is readable by every process
of the same user: ``/proc/PID/environ`` shows the block the process started with, whatever it changed
later, so ``cat /proc/*/environ`` in a Bash command would find the agent's key (and that of any child
started with the agent's environment). Once the settings have their copy, ``hide_credentials`` takes the
key out of ``os.environ`` (children started without an explicit environment, such as the watchdog or
rg, no longer get it) and overwrites its value in the process's initial environment block (Linux:
``env_start`` of ``/proc/self/stat``), so ``/proc/self/environ`` shows the name with an empty value.
Bash commands already get an environment without it (tools/bash.py); hooks get the key on purpose, as
Claude Code's hooks do (a hook may call the API).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def hide_credentials(names: tuple[str, ...] = CREDENTIALS) -> None:
    """Take ``names`` out of this process's environment, both the live one and the one it started with."""
    for name in names:
        os.environ.pop(name, None)
    try:
        _wipe_initial_block(names)
    except (OSError, ValueError, IndexError):
        pass  # not Linux, or /proc is not mounted: the live environment is cleaned all the same


def _wipe_initial_block(names: tuple[str, ...]) -> None:
    stat = Path("/proc/self/stat").read_text()
    # fields after the command name in parentheses (which may hold spaces): state is field 3, and
    # env_start and env_end are fields 50 and 51
    fields = stat[stat.rindex(")") + 2 :].split()
    env_start, env_end = int(fields[50 - 3]), int(fields[51 - 3])
    block = Path("/proc/self/environ").read_bytes()
    if not env_start or len(block) > env_end - env_start:
        return
    for name in names:
        prefix = name.encode() + b"="
        at = block.find(prefix)
        while at >= 0:
            if at == 0 or block[at - 1] == 0:
                start = at + len(prefix)
                end = block.find(b"\0", start)
                end = len(block) if end < 0 else end
                ctypes.memset(env_start + start, 0, end - start)
            at = block.find(prefix, at + 1)
