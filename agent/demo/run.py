"""``compact-agent --demo``: the real REPL against the scripted model, in a throwaway sample project.

    temp dir ─┬─ tinyshop/   the sample project (agent/demo/project.py): the agent's working directory
              └─ home/       COMPACT_AGENT_HOME: settings.json (below), transcript, saved outputs

Nothing of the user's is read or written: the environment's API and compaction variables are left out,
the key is a dummy, and ``ANTHROPIC_BASE_URL`` points at the scripted server (agent/demo/server.py) on
127.0.0.1, whose model (agent/demo/story.py) serves a 60k-token window so compaction comes quickly.
Everything else is the product as it ships: SDK, streaming, tools, permissions, pipeline, REPL.
With ``auto`` the demo types and answers by itself, removes its directory and exits 0 (1 if the
story went off script). ``COMPACT_AGENT_DEMO_PACE`` scales the pauses written for a person watching
(docs/usage.md): 1 as shipped, 0 none (a check in CI), 2 twice as slow (a talk).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agent.config.settings import Settings, load_settings
from agent.demo.driver import Driver
from agent.demo.project import copy_project
from agent.demo.server import ScriptedAPI, model_info
from agent.demo.story import Story, tour
from agent.frontend.repl import run_repl
from core.errors import SettingsError
from core.private import write_private

MODEL = "scripted-demo"
WINDOW = (
    60_000  # auto-compact at 27k, warning from 7k, error colour from 17k (compact/decision/thresholds.py)
)
# what the user's environment may say about the API or compaction does not reach the demo
LEFT_OUT = ("ANTHROPIC_", "CLAUDE_", "COMPACT_AGENT_", "DISABLE_COMPACT", "DISABLE_AUTO_COMPACT")
SETTINGS = {
    "permissions": {"allow": ["Bash(python3 -m unittest:*)", "Bash(python3 scripts/simulate.py:*)"]},
    "sessionMemory": True,  # notes kept in the background; the automatic compaction uses them
    # The tour shows the client's compactions (the notes, the LLM summary). The scripted model plays the 5.5
    # family, whose tool loops would otherwise be compacted by the server's summary, which a scripted
    # server can only imitate.
    "serverSummary": False,
}
# (latency of each reply, of a summary, streamed text chunk, pause between chunks, pause before auto keys)
INTERACTIVE_PACE = (0.4, 2.0, 12, 0.012, 0.0)
AUTO_PACE = (0.05, 1.0, 48, 0.002, 0.4)
PACE_VARIABLE = "COMPACT_AGENT_DEMO_PACE"  # scales the pauses above (1: as written; 0: none)


@dataclass
class Demo:
    """A demo ready to run: the REPL's settings, environment and driver, and the story being played."""

    root: Path
    project: Path
    settings: Settings
    environ: dict[str, str]
    story: Story
    driver: Driver


def run_demo(*, auto: bool, environ: Mapping[str, str]) -> int:
    pace = pace_of(environ)
    root = Path(tempfile.mkdtemp(prefix="compact-agent-demo-"))
    previous = Path.cwd()
    try:
        with demo(root, auto=auto, environ=environ, pace=pace) as d:
            os.chdir(d.project)
            # --auto with no terminal (CI, a recording into a file): nothing to draw the input line on and
            # no keys to read; the lines the driver sends are printed as plain lines instead
            plain = auto and not (os.isatty(0) and os.isatty(1))
            code = run_repl(d.settings, None, environ=d.environ, driver=d.driver, plain=plain)
    finally:
        os.chdir(previous)
        if auto:
            shutil.rmtree(root, ignore_errors=True)
    if auto and d.story.problems:
        sys.stderr.write("compact-agent: the demo went off script: " + "; ".join(d.story.problems) + "\n")
        return 1
    return code


def pace_of(environ: Mapping[str, str]) -> float:
    """How the demo's pauses are scaled: ``COMPACT_AGENT_DEMO_PACE``, 1 when unset."""
    raw = environ.get(PACE_VARIABLE, "").strip()
    if not raw:
        return 1.0
    try:
        pace = float(raw)
    except ValueError:
        pace = -1.0
    if not (pace >= 0 and math.isfinite(pace)):
        raise SettingsError(
            f'{PACE_VARIABLE}: expected a number >= 0 (1: as shipped, 0: no pauses), got "{raw}"'
        )
    return pace


@contextmanager
def demo(root: Path, *, auto: bool, environ: Mapping[str, str], pace: float = 1.0) -> Iterator[Demo]:
    """The sample project and the agent's home in ``root``, the scripted server running meanwhile.
    ``pace`` scales every wait written for a person watching (1: as shipped; 0: none)."""
    project, home = root / "tinyshop", root / "home"
    project.mkdir()
    home.mkdir(mode=0o700)
    facts = copy_project(project)
    write_private(home / "settings.json", json.dumps(SETTINGS, indent=2) + "\n")
    latency, summary_latency, chunk, between, pause = AUTO_PACE if auto else INTERACTIVE_PACE
    latency, summary_latency, between, pause = (pace * t for t in (latency, summary_latency, between, pause))
    story = Story(tour(project, facts, auto=auto), latency=latency, summary_latency=summary_latency)
    models = [model_info(MODEL, max_input_tokens=WINDOW)]
    with ScriptedAPI(story.respond, models=models, chunk=chunk, pace=between) as api:
        env = {k: v for k, v in environ.items() if not k.startswith(LEFT_OUT)}
        env.update(
            {
                "ANTHROPIC_BASE_URL": api.url,
                "ANTHROPIC_API_KEY": "demo-key-not-a-secret",
                "ANTHROPIC_MODEL": MODEL,
                "COMPACT_AGENT_HOME": str(home),
            }
        )
        settings = load_settings(cwd=project, environ=env, cli={})
        driver = Driver(
            story, _intro(api.url, project, home, auto), _outro(project, auto), auto=auto, pause=pause
        )
        yield Demo(root, project, settings, env, story, driver)


def _intro(url: str, project: Path, home: Path, auto: bool) -> list[str]:
    keys = (
        "--auto: the demo types and answers by itself."
        if auto
        else "Press Enter to send each line the demo puts in the prompt. A question is answered by typing "
        "the answer after › and pressing Enter; Enter alone takes the answer that changes nothing. "
        "Ctrl-D leaves."
    )
    return [
        f"No key needed: a scripted model answers on {url}. Only its words are written in advance; "
        "the SDK, streaming, tools, permissions and context pipeline are the real ones.",
        f"The sample project is a throwaway copy in {project}; the agent's state goes to {home}.",
        keys,
    ]


def _outro(project: Path, auto: bool) -> list[str]:
    if auto:
        return ["That was the tour. --auto leaves now and removes its copy of the project."]
    return [
        "That was the tour: a bug found and fixed, a 720 KB output kept on disk, the window filling "
        "up, and compaction, automatic and by hand.",
        f"The project stays in {project}; delete it when you like. /exit leaves. With ANTHROPIC_API_KEY "
        "set, compact-agent works on your own code.",
    ]
