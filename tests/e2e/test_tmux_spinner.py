"""The spinner in a real terminal: its seconds leave out the time a permission question waited. The real
REPL in tmux against the fake Messages API."""

from __future__ import annotations

import re
import time


def test_the_spinner_leaves_out_the_time_a_question_waited(agent_in_tmux, fake_api, project):  # noqa: F811
    """Issue 41 item 2: "Working… 12s" counted the seconds a permission question waited for the user. The
    user thinks 4 s before answering; the command then runs under the spinner (until the test has read it),
    whose seconds count the work only."""
    fake_api.reply_tool("Bash", {"command": "until [ -e read.flag ]; do sleep 0.05; done; echo slept"})
    fake_api.reply_text("Slept.")
    pane = agent_in_tmux(width=80)
    pane.type("sleep a little")
    pane.wait_for(r"Allow\? \[y\]es")
    pane.wait_answer()
    time.sleep(4)  # the user reads the question
    pane.type("y")
    screen = pane.wait_for(r"Running Bash… \d+s", visible=True)
    shown = int(re.search(r"Running Bash… (\d+)s", screen).group(1))
    assert shown < 3, screen  # with the wait counted: 4 s or more (seen: 0, 4 runs beside 10 panes, load 11)
    (project / "read.flag").touch()
    pane.wait_for("Slept.")
    pane.wait_prompt()
    assert fake_api.violations == []
