"""The REPL in a real terminal: the CLI in a pane of a private tmux server (its own socket), typed into with
send-keys and read with capture-pane, polling with a deadline (the agent_in_tmux fixture, tests/conftest.py,
starts one against the test's fake API)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.helpers.cli import ROOT

TMUX = shutil.which("tmux") or "/usr/bin/tmux"
CLI = ROOT / ".venv" / "bin" / "compact-agent"


LONG_REPLY = (
    "".join(f"Reply line {i:03d}: the quick brown fox jumps over the lazy dog again.\n" for i in range(560))
    + "END-OF-LONG-REPLY"
)


class Pane:
    """One agent process in a private tmux server."""

    def __init__(
        self, home: Path, project: Path, env: dict[str, str], args: list[str], width: int = 120
    ) -> None:
        self.socket = f"ca-test-{uuid.uuid4().hex[:10]}"
        command = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "agent"]
        full_env = {
            "HOME": str(home),
            "COMPACT_AGENT_HOME": str(home / ".compact-agent"),
            "PYTHONPATH": str(ROOT),
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            **env,
        }
        self.home = home
        # the pane's own size, as in a terminal: readline in this process may have exported COLUMNS=80 and
        # LINES=24 into the environment tmux hands on, and Rich would take them over the pane's width
        shell = " ".join(
            [
                "env",
                "-u",
                "COLUMNS",
                "-u",
                "LINES",
                *(f"{k}={v}" for k, v in full_env.items()),
                *command,
                *args,
            ]
        )
        self.tmux("new-session", "-d", "-s", "main", "-x", str(width), "-y", "40", "-c", str(project), shell)

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TMUX, "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=10
        )

    def screen(self) -> str:
        """The visible screen and the scrollback."""
        return self.tmux("capture-pane", "-p", "-J", "-t", "main", "-S", "-2000").stdout

    def visible(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", "main").stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "main", *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "main", "-l", text)
        self.keys("Enter")

    def wait_for(self, pattern: str, *, count: int = 1, timeout: float = 30, visible: bool = False) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.visible() if visible else self.screen()
            if len(re.findall(pattern, text)) >= count:
                return text
            assert time.monotonic() < deadline, f"{pattern!r} (x{count}) never appeared:\n{text.rstrip()}"
            time.sleep(0.05)

    def wait_prompt(self, timeout: float = 30) -> None:
        """Until the input prompt is drawn on the last non-empty line of the screen."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [ln for ln in self.visible().splitlines() if ln.strip()]
            # the prompt is the last line, or the one above the toolbar; a line of the reply below an
            # earlier prompt's echo ("> still there?" over "● Back…", the prompt not drawn yet) is no toolbar
            toolbar = len(lines) > 1 and not lines[-1].startswith(("●", " "))
            if lines and lines[-1].startswith(">") or (toolbar and lines[-2].startswith(">")):
                return
            assert time.monotonic() < deadline, f"no prompt:\n{self.visible().rstrip()}"
            time.sleep(0.05)

    def wait_answer(self, timeout: float = 30) -> None:
        """Until a question's answer line (``›``, where every question's answer is typed) is the last line."""
        deadline = time.monotonic() + timeout
        while [ln for ln in self.visible().splitlines() if ln.strip()][-1:] != ["  ›"]:
            assert time.monotonic() < deadline, f"no question waits:\n{self.visible().rstrip()}"
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.tmux("has-session", "-t", "main").returncode == 0

    def wait_exit(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.alive():
            assert time.monotonic() < deadline, f"the agent did not exit:\n{self.screen()}"
            time.sleep(0.05)

    def close(self) -> None:
        self.tmux("kill-server")
        folder = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        (folder / self.socket).unlink(missing_ok=True)
