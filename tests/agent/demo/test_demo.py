"""compact-agent --demo: the real REPL against the scripted model, in a throwaway sample project.

End to end in tmux with --auto (it plays itself and exits 0); the interactive driver through prompt_toolkit's
pipe input (Enter sends the line the demo offers, the user answers the permission question); and the
command line around it: the no-key message, --help, the flags' checks, start-up not paying for the demo.
"""

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

from agent.demo.project import copy_project
from agent.demo.run import PACE_VARIABLE, demo
from agent.demo.story import Story, tour
from agent.frontend import commands
from agent.frontend.repl import Repl
from tests.helpers.cli import ROOT
from tests.helpers.tmux import Pane

YELLOW, RED = "\x1b[33m", "\x1b[31m"


@pytest.mark.slow
def test_demo_auto_plays_the_whole_story_and_exits_0(tmp_path: Path, isolated_env: Path) -> None:
    here = tmp_path / "where-the-user-is"
    here.mkdir()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    pane = Pane(
        isolated_env,
        here,
        # the demo's pauses halved (its documented knob): the bar and the spinner stay on screen for 0.2 s
        # and 0.5 s at least, time for several looks each; at 0 they would be gone before a look
        {"TMPDIR": str(scratch), "ANTHROPIC_API_KEY": "", "DISABLE_COMPACT": "1", PACE_VARIABLE: "0.5"},
        ["--demo", "--auto", ";", "echo", "DEMO-EXIT=$?", ";", "sleep", "60"],
    )
    seen: list[str] = []  # what was on screen at some moment, in order
    try:
        deadline = time.monotonic() + 180  # generous: it only matters when the test fails
        while True:
            assert time.monotonic() < deadline, f"the demo did not finish:\n{pane.screen()}"
            # one capture a look (the bar and the spinner are on screen for a fraction of a second each)
            coloured = pane.tmux("capture-pane", "-p", "-e", "-t", "main").stdout
            for line in coloured.splitlines():
                if ("until auto-compact" in line or "Compacting conversation" in line) and line not in seen:
                    seen.append(line)
            if "DEMO-EXIT=" in coloured:
                break
            time.sleep(0.02)
        screen = pane.screen()
    finally:
        pane.close()

    assert "DEMO-EXIT=0" in screen
    assert "demo ▸ No key needed" in screen
    # narration is wrapped at 80 columns: a long path may be broken across lines
    assert "throwawaycopyin" + str(scratch) in re.sub(r"\s+", "", screen)
    # after the compactions: /history and /state, for a person
    assert "> /memory" in screen and re.search(r"Session notes\s+\(", screen) and "Working on: " in screen
    # a notes compaction: /compact without instructions, then /summary shows the notes it used
    assert len(re.findall(r"Compacted · manual · [\d.]+k → [\d.]+k tokens", screen)) == 2
    assert screen.count("Session Title") >= 2  # in /memory, then in the notes compaction's /summary
    assert "> /history" in screen and "Before the last compaction (" in screen
    assert "> /state" in screen and "What a compaction would carry over" in screen
    # reading and grepping, then the Edit's permission question, answered by --auto
    assert "● Glob(**/*.py)" in screen and "● Grep(apply_discount)" in screen and "Read 13 lines" in screen
    assert "Allow? [y]es / [n]o / [a]lways for this session" in screen and "→ Yes" in screen
    assert "Edited pricing.py" in screen and "Ran 5 tests" in screen
    # the huge output went to disk; the model searched the saved file
    assert re.search(r"tool-results/\s*toolu_\w+\.txt", screen.replace("\n", "")) is not None
    assert "10000 checkouts, revenue" in screen
    # the bar under the prompt: yellow first (red only if the window fills that far before the agent
    # compacts on its own: cost-aware compaction usually comes first; test_demo_narration checks that
    # the narration says which); then the automatic compaction's status and line
    bars = [
        line for line in seen if "until auto-compact" in line and line.startswith("\x1b[")
    ]  # not narration
    assert bars and YELLOW in bars[0] and all(YELLOW in line or RED in line for line in bars), bars
    assert any("Compacting conversation" in line for line in seen)
    assert re.search(r"Compacted · auto · \d+k → \d+(\.\d)?k tokens", screen) is not None
    assert "Picking up from the summary" in screen and "to refund in all" in screen  # after it
    # the commands typed by the demo
    assert "> /context" in screen and "Context usage" in screen and "Autocompact buffer" in screen
    assert re.search(
        r"Summary from the last compaction \(auto · (?:[a-z' ]+ · )?\d+k → [\d.]+k tokens\)", screen
    )
    assert "Primary Request and Intent" in screen
    assert re.search(r"Compacted · manual · [\d.]+k → [\d.]+k tokens", screen) is not None
    assert "Written as asked: keep only what the refund team needs" in screen
    # nothing of the user's was touched, and --auto cleaned up after itself
    assert list(here.iterdir()) == [] and not (isolated_env / ".compact-agent").exists()
    assert list(scratch.glob("compact-agent-demo-*")) == []


def test_demo_offers_each_line_and_the_user_answers_the_question(tmp_path: Path) -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=120, force_terminal=False, color_system=None)
    environ = {"HOME": os.environ["HOME"], "ANTHROPIC_API_KEY": "the-users-own", "DISABLE_COMPACT": "1"}
    with demo(tmp_path, auto=False, environ=environ, pace=0) as d, create_pipe_input() as pipe:
        assert d.settings.api_key != "the-users-own" and not d.settings.compaction.disable_compact
        repl = Repl(d.settings, console, environ=d.environ, input=pipe, output=DummyOutput(), driver=d.driver)
        repl.open()
        box: dict[str, int] = {}
        thread = threading.Thread(target=lambda: box.setdefault("code", repl.run()), daemon=True)
        thread.start()

        def wait_for(text: str) -> str:
            deadline = time.monotonic() + 40
            while text not in buf.getvalue():
                assert time.monotonic() < deadline, f"{text!r} never appeared in:\n{buf.getvalue()}"
                time.sleep(0.02)
            return buf.getvalue()

        wait_for("demo ▸ The model explores")
        pipe.send_text("\r")  # Enter sends the offered line as it is
        wait_for("Found it.")
        wait_for("demo ▸ An Edit changes a file, so the agent asks first: type y and press Enter")
        pipe.send_text("\r")
        wait_for("Allow? [y]es")
        pipe.send_text("n\r")
        wait_for("→ No")
        # the narration does not go on as if the fix had been made: the same line comes back
        wait_for("demo ▸ That step did not finish")
        assert "This command prints" not in buf.getvalue()
        pricing = (d.project / "shop" / "pricing.py").read_text()
        assert "return round(total - percent, 2)" in pricing  # the "no" kept the file as it was
        assert d.story.played == d.story.beats[:1]  # the fix was not made
        while not repl.prompt.app.is_running:
            time.sleep(0.02)
        pipe.send_text("\r")  # the fix's line again; this time: yes
        deadline = time.monotonic() + 40
        while buf.getvalue().count("Allow? [y]es") < 2:
            assert time.monotonic() < deadline, buf.getvalue()
            time.sleep(0.02)
        pipe.send_text("y\r")
        wait_for("All tests pass now")
        wait_for("demo ▸ This command prints")
        while not repl.prompt.app.is_running:  # back at the prompt, with the next line offered
            time.sleep(0.02)
        pipe.send_text("\x03/exit\r")  # Ctrl-C clears the offered line first
        thread.join(20)
        assert not thread.is_alive() and box["code"] == 0
        assert d.story.played == d.story.beats[:2]
    # narration: at most 80 columns, broken between words (the console itself is 120 wide)
    out = buf.getvalue().splitlines()
    start = next(i for i, line in enumerate(out) if line.startswith("demo ▸ An Edit changes"))
    end = next(i for i in range(start + 1, len(out)) if out[i].startswith(("> ", "●")))
    wrapped = out[start:end]
    assert len(wrapped) > 1 and all(len(line) <= 80 for line in wrapped)
    narration = d.story.beats[1].say
    assert " ".join(line.strip() for line in wrapped) == "demo ▸ " + narration
    # tool headers show paths relative to the project
    assert "● Read(shop/pricing.py)" in buf.getvalue()


def test_the_scripted_model_follows_the_story_stops_on_a_refusal_and_summarises(tmp_path: Path) -> None:
    project = tmp_path / "tinyshop"
    project.mkdir()
    story = Story(tour(project, copy_project(project), auto=True))
    explore, fix = story.beats[0], story.beats[1]

    def body(*blocks: dict, **extra: object) -> dict:
        return {"model": "m", "messages": [{"role": "user", "content": list(blocks)}], **extra}

    def typed(line: str) -> dict:
        return body({"type": "text", "text": f"{line} [id:abc123]"})

    first = story.respond(typed(explore.line))
    assert [b["name"] for b in first.content if b["type"] == "tool_use"] == ["Glob"]
    edit = story.respond(typed(fix.line))
    [use] = [b for b in edit.content if b["type"] == "tool_use"]
    assert use["name"] == "Edit" and use["input"]["file_path"] == str(project / "shop" / "pricing.py")
    refused = story.respond(
        body(
            {
                "type": "tool_result",
                "tool_use_id": use["id"],
                "is_error": True,
                "content": "The user declined this Edit call; it was not run.",
            }
        )
    )
    assert "That call did not go through (The user declined this Edit call" in refused.content[0]["text"]
    assert story.problems == ["a tool call failed: The user declined this Edit call; it was not run."]
    assert story.played == []  # neither beat went to its end

    aside = story.respond(typed("tell me a joke"))
    assert "scripted model" in aside.content[0]["text"] and len(story.problems) == 2
    summary = story.respond(
        body(
            {"type": "text", "text": "...<summary>...\n\nAdditional instructions:\nbe brief"},
            tool_choice={"type": "none"},
        )
    )
    text = summary.content[0]["text"]
    assert "<summary>" in text and "(Written as asked: be brief.)" in text
    assert explore.line in text and fix.line in text and "tell me a joke" not in text


def test_no_key_mentions_the_demo_and_help_lists_commands_and_variables(run_cli) -> None:
    no_key = run_cli(None, env={"ANTHROPIC_API_KEY": ""})
    [line] = no_key.stderr.strip().splitlines()
    assert no_key.code == 2 and "ANTHROPIC_API_KEY" in line and "ANTHROPIC_AUTH_TOKEN" in line
    assert "compact-agent --demo" in line
    help_ = run_cli(None, "--help")
    assert help_.code == 0
    assert "/compact [instructions]" in help_.stdout
    for name in commands.names():  # every command the REPL knows, aliases included
        assert f"/{name}" in help_.stdout, name
    for name in [
        "--demo",
        "--auto",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
        "COMPACT_AGENT_HOME",
        "DISABLE_COMPACT",
        PACE_VARIABLE,
    ]:
        assert name in " ".join(help_.stdout.split()), name


def test_auto_needs_demo_and_demo_takes_no_other_options(run_cli) -> None:
    auto = run_cli(None, "--auto")
    assert auto.code == 2 and auto.stderr.strip().splitlines() == [
        "compact-agent: --auto only goes with --demo"
    ]
    mixed = run_cli(None, "--demo", "-p", "hi")
    assert mixed.code == 2 and len(mixed.stderr.strip().splitlines()) == 1 and "--demo" in mixed.stderr
    # the pace knob takes a number >= 0 and says so in one line before anything starts
    for bad in ("soon", "-1", "nan"):
        paced = run_cli(None, "--demo", "--auto", env={PACE_VARIABLE: bad})
        assert paced.code == 2 and paced.stderr.strip().splitlines() == [
            f'compact-agent: {PACE_VARIABLE}: expected a number >= 0 (1: as shipped, 0: no pauses), got "{bad}"'
        ], paced.stderr


def test_normal_start_up_does_not_load_the_demo() -> None:
    code = (
        "import sys, agent.cli, agent.frontend.repl, agent.frontend.printmode; "
        "print(sorted(m for m in sys.modules if m.startswith('agent.demo')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
