"""A mistyped or near slash command: /init is not taken for /quit, /contxt suggests /context."""

from __future__ import annotations

from agent.frontend import commands
from tests.helpers.frontend import new_session


def test_init_is_not_taken_for_quit(fake_api, project):
    session = new_session(fake_api, project)
    assert "/quit" not in commands.run(session, "/init").text
    assert commands.run(session, "/contxt").text.endswith("Did you mean /context?")
