"""The demo's narration says what the screen shows (issue 41, item 5): the whole tour played by --auto's
driver through the real REPL (prompt_toolkit's pipe input), at 80 and 160 columns; each narration is
checked against the REPL at the moment it is printed: the bar's colour it names is the bar's colour,
a compaction it tells of happened, a compaction it promises for the next turn comes. Then ``--demo
--auto`` into a file: plain lines, no carriage returns, no warning."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent.demo.run import demo
from agent.frontend.repl import Repl
from agent.frontend.ui import warning_of
from tests.helpers.cli import ROOT

AUTO = "Compacted · auto"
PROMISE = re.compile(r"next (read|request|turn)[^.]*compact", re.IGNORECASE)


@pytest.mark.parametrize("width", [80, 160])
def test_the_narration_says_only_what_the_screen_shows(tmp_path: Path, width: int) -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None)
    said: list[tuple[str, str | None, int]] = []  # (narration, the bar's severity then, auto compactions)
    with demo(tmp_path, auto=True, environ={"HOME": os.environ["HOME"]}) as d, create_pipe_input() as pipe:
        repl = Repl(d.settings, console, environ=d.environ, input=pipe, output=DummyOutput(), driver=d.driver)
        narrate = d.driver.prompt_args

        def watched(r: Repl) -> dict:
            before = len(buf.getvalue())
            shown = warning_of(r.token_state, r.settings.compaction.disable_compact)
            autos = buf.getvalue().count(AUTO)
            args = narrate(r)
            text = " ".join(buf.getvalue()[before:].split())
            said.extend((part, shown[0] if shown else None, autos) for part in text.split("demo ▸ ")[1:])
            return args

        d.driver.prompt_args = watched  # type: ignore[method-assign]
        repl.open()
        assert repl.run() == 0
        assert d.story.problems == []
    screen = buf.getvalue()
    assert screen.count(AUTO) >= 1 and "to refund in all" in screen
    told_of = 0
    for i, (text, severity, autos) in enumerate(said):
        lower = text.lower()
        if re.search(r"\byellow\b", lower):
            assert severity == "warning", f"{text!r} said over a bar that is {severity}"
        if re.search(r"\bred\b", lower):
            assert severity in ("error", "blocking"), f"{text!r} said over a bar that is {severity}"
        if "no bar under the prompt" in lower:
            assert severity is None, text
        if "compacted on its own" in lower:  # told after the fact: it happened, and is told once
            assert autos > told_of, f"{text!r}: no automatic compaction on screen"
            told_of = autos
        if PROMISE.search(text):  # promised: the turn after it compacts
            later = next((a for _, _, a in said[i + 1 :]), screen.count(AUTO))
            assert later > autos, f"{text!r} promised a compaction that did not come"
    assert told_of == screen.count(AUTO) or told_of >= 1  # the automatic compaction was told of
    # the notes the tour shows are filled in, one up-to-date page: no section repeated, no stacked lines
    memory = screen[screen.index("Session notes (") : screen.index("demo ▸ /compact with no")]
    assert "Fixing tinyshop's discount bug" in memory and memory.count("Working on:") == 1
    worklog = memory[memory.index("Worklog") :]
    assert worklog.count("apply_discount took the percentage off as money") == 1


def test_demo_auto_into_a_file_writes_plain_lines(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "COMPACT_AGENT_"))
    }
    env.update(HOME=str(tmp_path), TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT), COLUMNS="80")
    out = tmp_path / "demo.txt"
    with open(out, "wb") as f:
        proc = subprocess.run(
            [sys.executable, "-m", "agent", "--demo", "--auto"],
            stdin=subprocess.DEVNULL,
            stdout=f,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tmp_path,
            timeout=240,
        )
    data = out.read_bytes()
    assert proc.returncode == 0 and proc.stderr == b""
    assert b"\r" not in data and b"\x1b" not in data
    text = data.decode()
    assert "> Fix it and run the tests.\n" in text and "> /summary\n" in text  # each line sent, once
    assert text.count("> Fix it and run the tests.") == 1
