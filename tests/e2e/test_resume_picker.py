"""--resume without an id: the picker in the REPL, a unique prefix of an id is enough, print mode needs
the id."""

from __future__ import annotations

import io
import os

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent import RESUME_PICK
from agent.cli import resume_pick
from agent.frontend.repl import Repl
from agent.runtime import lifecycle
from core.errors import SessionError
from tests.helpers.frontend import chat, new_session


def test_resume_without_an_id_opens_the_picker_and_a_unique_prefix_is_enough(fake_api, project):
    assert resume_pick(["--resume"]) == ["--resume", RESUME_PICK]
    assert resume_pick(["-r", "-p", "hi"]) == ["-r", RESUME_PICK, "-p", "hi"]
    assert resume_pick(["--resume", "abc", "hi"]) == ["--resume", "abc", "hi"]
    older = new_session(fake_api, project)
    chat(older, "the older one", "ok")
    newer = new_session(fake_api, project)
    chat(newer, "the newer one", "ok")
    settings = older.settings
    assert lifecycle.locate(settings, older.session_id[:8], False) == older.transcript_path
    twin = older.transcript_path.with_name(older.session_id[:8] + "-twin.jsonl")
    twin.write_bytes(older.transcript_path.read_bytes())
    with pytest.raises(SessionError, match="2 sessions start with .*give more of the id"):
        lifecycle.locate(settings, older.session_id[:8], False)
    twin.unlink()

    buf = io.StringIO()
    console = Console(file=buf, width=120, force_terminal=False, color_system=None)
    with create_pipe_input() as pipe:
        repl = Repl(
            settings, console, environ={**os.environ, **fake_api.env()}, input=pipe, output=DummyOutput()
        )
        pipe.send_text("2\r")  # the list is newest first: 2 is the older session
        repl.open(resume=RESUME_PICK)
    assert "  1. " in buf.getvalue() and "the newer one" in buf.getvalue()
    assert repl.session.session_id == older.session_id
    assert [m.text for m in repl.session.messages][:1] == ["the older one"]


def test_print_mode_needs_an_id_for_resume(fake_api, run_cli):
    res = run_cli(fake_api, "-p", "hi", "--resume")
    assert res.code == 2 and "--resume needs a session id" in res.stderr
