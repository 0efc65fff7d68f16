"""The front end driven from a test: the REPL on a pipe input (repl_for, Driver), the banner, a chat of slash commands on a session, the UI's rendering captured (render, screen), waiting on a
condition (wait_until)."""

from __future__ import annotations

import io
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent.config.settings import load_settings
from agent.frontend import commands
from agent.frontend.repl import Repl
from agent.frontend.ui import Renderer
from agent.runtime.lifecycle import open_session
from agent.runtime.session import Session
from core.messages import assistant, user_prompt

ESC, CTRL_C, CTRL_D = "\x1b", "\x03", "\x04"


class Driver:
    def __init__(self, repl: Repl, pipe, buf: io.StringIO, first: str | None = None) -> None:
        self.repl, self.pipe, self.buf, self.first = repl, pipe, buf, first
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.code = self.repl.run(self.first)

    @property
    def out(self) -> str:
        return self.buf.getvalue()

    def type(self, text: str) -> None:
        self.pipe.send_text(text)

    def wait_for(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.out:
            assert time.monotonic() < deadline, f"{text!r} never appeared in:\n{self.out}"
            time.sleep(0.02)
        return self.out

    def wait_idle(self, timeout: float = 30) -> None:
        """Until the REPL is back at its prompt (no worker running)."""
        deadline = time.monotonic() + timeout
        while not self.repl.prompt.app.is_running:
            assert time.monotonic() < deadline, f"the prompt never came back:\n{self.out}"
            time.sleep(0.02)

    def finish(self, timeout: float = 30) -> int | None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the REPL did not exit:\n{self.out}"
        return self.code


@contextmanager
def repl_for(api, project: Path, first: str | None = None, resume: str | None = None, **env: str):
    environ = {
        "HOME": os.environ["HOME"],
        "COMPACT_AGENT_HOME": os.environ["COMPACT_AGENT_HOME"],
        **api.env(),
        **env,
    }
    settings = load_settings(cwd=project, environ=environ, cli={})
    buf = io.StringIO()
    console = Console(file=buf, width=100, force_terminal=False, color_system=None)
    with create_pipe_input() as pipe:
        repl = Repl(settings, console, environ=environ, input=pipe, output=DummyOutput())
        repl.open(resume=resume)
        driver = Driver(repl, pipe, buf, first)
        driver.thread.start()
        yield driver
        if driver.thread.is_alive():
            driver.type("/exit\r")
            driver.finish()


def banner(repl: Repl, project: Path, width: int = 100) -> str:
    """The first screen's two lines (three when the directory doesn't fit beside the model at ``width``)."""
    head = f"✻ Compact Agent v0.1.0 · {repl.session.model}"
    if len(head) + 3 + len(str(project)) <= width:
        return f"{head} · {project}\n/help for commands\n"
    return f"{head}\n  {project}\n/help for commands\n"


def new_session(api, project: Path, events: list | None = None, **env: str) -> Session:
    environ = {
        "HOME": os.environ["HOME"],
        "COMPACT_AGENT_HOME": os.environ["COMPACT_AGENT_HOME"],
        **api.env(),
        **env,
    }
    settings = load_settings(cwd=project, environ=environ, cli={})
    sink = events if events is not None else []
    return open_session(settings, emit=sink.append, ask=None, environ=environ)


def chat(session: Session, prompt: str, reply: str, tokens: int = 1200) -> None:
    """A finished exchange, recorded without calling the model."""
    session.add(user_prompt(prompt))
    session.add(
        assistant(
            [{"type": "text", "text": reply}],
            model=session.model,
            usage={"input_tokens": tokens, "output_tokens": 30},
        )
    )


def console(**kw) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    options = {"width": 80, "force_terminal": False, "color_system": None, **kw}
    return Console(file=buf, **options), buf


def render(*events, **kw) -> str:
    con, buf = console(**kw)
    r = Renderer(con)
    for e in events:
        r(e)
    return buf.getvalue()


def screen(*events, width: int = 80, cwd: Path | None = None) -> str:
    buf = io.StringIO()
    renderer = Renderer(Console(file=buf, width=width, color_system=None, force_terminal=False))
    renderer.cwd = cwd
    for e in events:
        renderer(e) if not isinstance(e, commands.Result) else renderer.result(e)
    return buf.getvalue()


def wait_until(check, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.02)
