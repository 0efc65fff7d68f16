"""The demo's narration says what the screen shows (issue 41, item 5): the whole tour played by --auto's
driver through the real REPL (prompt_toolkit's pipe input), at 80 and 160 columns; each narration is
checked against the REPL at the moment it is printed: the bar's colour it names is the bar's colour,
a compaction it tells of happened, a compaction it promises for the next turn comes. Then ``--demo
--auto`` into a file: plain lines, no carriage returns, no warning. And the interactive tour's narration,
played with the keys it names, at 80 and 160 columns: how a question is answered, as the screen asks it."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent.demo.driver import STOPPED
from agent.demo.run import PACE_VARIABLE, demo
from agent.frontend.repl import Repl
from agent.frontend.ui import warning_of
from tests.helpers.cli import ROOT

AUTO = "Compacted · auto"
PROMISE = re.compile(r"next (read|request|turn)[^.]*compact", re.IGNORECASE)
# narration that tells the user how to answer: "answer y", "type y", "answer the questions"
HOW_TO_ANSWER = re.compile(r"\b(answer|type)\b[^.]*", re.IGNORECASE)


@pytest.mark.parametrize("width", [80, 160])
def test_the_narration_says_only_what_the_screen_shows(tmp_path: Path, width: int) -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None)
    said: list[tuple[str, str | None, int]] = []  # (narration, the bar's severity then, auto compactions)
    with (
        demo(tmp_path, auto=True, environ={"HOME": os.environ["HOME"]}, pace=0) as d,
        create_pipe_input() as pipe,
    ):
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
    # (the heading's path on a line of its own when the heading is longer than the terminal)
    memory = screen[
        re.search(r"Session notes\s+\(", screen).start() : screen.index("demo ▸ /compact with no")
    ]
    assert "Fixing tinyshop's discount bug" in memory and memory.count("Working on:") == 1
    worklog = memory[memory.index("Worklog") :]
    assert worklog.count("apply_discount took the percentage off as money") == 1


def test_demo_auto_into_a_file_writes_plain_lines(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "COMPACT_AGENT_"))
    }
    # the user's command, with the demo's documented knob for a check: no pauses (docs/usage.md)
    env.update(HOME=str(tmp_path), TMPDIR=str(tmp_path), PYTHONPATH=str(ROOT), COLUMNS="80")
    env[PACE_VARIABLE] = "0"
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


@pytest.mark.parametrize("width", [80, 160])
def test_the_interactive_narration_says_how_a_question_is_answered(tmp_path: Path, width: int) -> None:
    """Every question takes a typed answer and Enter (docs/usage.md). The interactive tour's narration says
    so wherever it tells the user to answer ("type y and press Enter", not "answer y"), and doing just what
    it says plays the tour: n and Enter refuses the fix (the narration offers it again), Enter sends the
    line again, y alone answers nothing, Enter then allows it."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None)
    with (
        demo(tmp_path, auto=False, environ={"HOME": os.environ["HOME"]}, pace=0) as d,
        create_pipe_input() as pipe,
    ):
        told = [*d.driver.intro, *(b.say for b in d.story.beats), *d.driver.outro, STOPPED]
        for text in told:  # the whole tour's narration, including what only a "no" brings
            for found in HOW_TO_ANSWER.finditer(text):
                assert "Enter" in found.group(0), f"{found.group(0)!r} does not say to press Enter"
        repl = Repl(d.settings, console, environ=d.environ, input=pipe, output=DummyOutput(), driver=d.driver)
        repl.open()
        box: dict[str, int] = {}
        thread = threading.Thread(target=lambda: box.setdefault("code", repl.run()), daemon=True)
        thread.start()

        def wait_for(text: str, count: int = 1) -> str:
            deadline = time.monotonic() + 60
            while " ".join(buf.getvalue().split()).count(text) < count:
                assert time.monotonic() < deadline, f"{text!r} never appeared in:\n{buf.getvalue()}"
                time.sleep(0.02)
            return buf.getvalue()

        def at_prompt() -> None:
            while not repl.prompt.app.is_running:
                time.sleep(0.02)

        wait_for("demo ▸ The model explores")
        at_prompt()
        pipe.send_text("\r")  # "Press Enter to send each line the demo puts in the prompt"
        wait_for("demo ▸ An Edit changes a file, so the agent asks first: type y and press Enter")
        at_prompt()
        pipe.send_text("\r")
        screen = wait_for("Allow? [y]es")
        assert " ".join(screen.split()).count("[a]lways for this session (adds Edit) · Enter: no") == 1
        pipe.send_text("n\r")  # "n and Enter ... tells the model no"
        wait_for("demo ▸ That step did not finish")
        at_prompt()
        pipe.send_text("\r")  # "press Enter to send it"
        wait_for("Allow? [y]es", count=2)
        pipe.send_text("y")  # "then type y ..."
        time.sleep(0.5)
        assert "All tests pass now" not in buf.getvalue() and d.story.played == d.story.beats[:1]
        pipe.send_text("\r")  # "... and press Enter"
        wait_for("All tests pass now")
        wait_for("demo ▸ This command prints")
        at_prompt()
        pipe.send_text("\x03/exit\r")  # Ctrl-C clears the offered line first
        thread.join(20)
        assert not thread.is_alive() and box["code"] == 0
        assert d.story.played == d.story.beats[:2]
    out = buf.getvalue()
    words = " ".join(out.split())
    for text in (d.driver.intro[-1], d.story.beats[1].say, STOPPED):  # (the intro's paths may be broken)
        assert "demo ▸ " + text in words  # said as the tests above read it
    narration = [line for line in out.splitlines() if "demo ▸" in line]
    assert narration and all(len(line) <= 80 for line in narration)  # at 160 columns too
