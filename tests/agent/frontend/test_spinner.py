"""The spinner and the lines printed while it turns, on a real terminal (tmux draws what the Renderer
wrote): a frame never stays on screen in front of a tool's header, however slowly the printing thread
runs (issue 41: once, on a loaded machine, "⠙ Working… 0s● Read(a.txt)" stayed in the scrollback)."""

from __future__ import annotations

import io
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent.frontend import ui
from agent.frontend.ui import Renderer, SafeConsole
from core.events import MessageRecorded, ToolFinished, ToolOutput, ToolStarted
from core.messages import assistant

TMUX = shutil.which("tmux") or "/usr/bin/tmux"
pytestmark = pytest.mark.skipif(not Path(TMUX).exists(), reason="tmux is not installed")
SPINNER = set("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")  # Rich's "dots" frames
END = "END-OF-THE-RENDERERS-OUTPUT"


class LoadedConsole(SafeConsole):
    """A terminal console whose printing thread is slow, as on a loaded machine: each line of ours is
    rendered ``delay`` seconds after the live display placed the cursor for it (the spinner's frames,
    drawn by another thread, are not slowed)."""

    def __init__(self, delay: float, **kw: Any) -> None:
        super().__init__(**kw)
        self.delay, self.printer, self.fresh = delay, threading.get_ident(), False

    def print(self, *args: Any, **kw: Any) -> None:
        self.fresh = threading.get_ident() == self.printer
        super().print(*args, **kw)

    def render(self, renderable: Any, options: Any = None) -> Any:
        # the first of ours in a print (after the cursor move the live display put before it)
        if self.fresh and type(renderable).__name__ not in ("Control", "LiveRender"):
            self.fresh = False
            time.sleep(self.delay)
        return super().render(renderable, options)


def on_a_terminal(written: str, width: int = 80) -> list[str]:
    """What a terminal shows once it has drawn ``written``: tmux runs ``cat`` on it; its lines."""
    path = Path(f"/tmp/ca-spinner-{uuid.uuid4().hex[:10]}.out")
    path.write_text(written + "\n" + END + "\n")
    socket = f"ca-spinner-{uuid.uuid4().hex[:10]}"

    def tmux(*args: str) -> str:
        done = subprocess.run(
            [TMUX, "-L", socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=10
        )
        return done.stdout

    try:
        tmux("new-session", "-d", "-x", str(width), "-y", "50", f"cat {path}; sleep 60")
        deadline = time.monotonic() + 30
        while END not in (screen := tmux("capture-pane", "-p", "-S", "-200")):
            assert time.monotonic() < deadline, screen
            time.sleep(0.05)
        return screen[: screen.index(END)].rstrip("\n").splitlines()
    finally:
        tmux("kill-server")
        path.unlink(missing_ok=True)


def test_a_spinner_frame_never_stays_in_front_of_a_tool_header(monkeypatch) -> None:
    """A turn as the fake serves one: the spinner starts, the model's call comes back at once (its header
    printed before the spinner's first frame), a command prints lines under the spinner (the frames grow
    taller), its result, a second call. Every line of ours is printed ``delay`` s after the live display
    made room for it, long enough for the spinner to draw frames meanwhile: 4 of its frames (every 50 ms
    here, every 125 ms for users), and more than one of Rich's own refresh thread's (8 a second), which
    drew the frame that stayed (with 994f2c5's fix undone, this fails at 0.2 s as at 0.4 s: 4 of 4 runs)."""
    monkeypatch.setattr(ui, "SPINNER_FRAME", 0.05)
    delay = 0.2
    out = io.StringIO()
    console = LoadedConsole(
        delay, file=out, width=80, force_terminal=True, force_interactive=True, color_system=None
    )
    r = Renderer(console, spinner=True)
    r.begin_turn()
    r(MessageRecorded(assistant([{"type": "text", "text": ""}])))
    r(ToolStarted("t1", "Read", {"file_path": "/p/a.txt"}))
    r(ToolFinished("t1", "Read", "     1\ta\n", False, "Read 1 line"))
    r(ToolStarted("t2", "Bash", {"command": "make test"}))
    time.sleep(0.15)  # a few frames of the spinner alone
    for n in range(4):
        r(ToolOutput(f"test {n} passed\n"))
    r(ToolFinished("t2", "Bash", "test 0 passed\ntest 3 passed", False))
    r(ToolStarted("t3", "Read", {"file_path": "/p/b.txt"}))
    r(ToolFinished("t3", "Read", "     1\tb\n", False, "Read 1 line"))
    r.end_work()
    lines = on_a_terminal(out.getvalue())
    assert [line for line in lines if "●" in line] == [
        "● Read(/p/a.txt)",
        "● Bash(make test)",
        "● Read(/p/b.txt)",
    ], "\n".join(lines)
    assert not any(SPINNER & set(line) for line in lines), "\n".join(lines)  # the spinner went with the turn
    assert [line for line in lines if line.strip()] == [
        "● Read(/p/a.txt)",
        "  ⎿  Read 1 line",
        "● Bash(make test)",
        "  ⎿  test 0 passed",
        "     test 3 passed",
        "● Read(/p/b.txt)",
        "  ⎿  Read 1 line",
    ], "\n".join(lines)
