"""A Claude Code user's working day in a real terminal (issue 41, items 1-3): the compaction still readable
after ``/exit`` and ``--continue``, what did not run said on screen, and the model picker. Each test runs
the real REPL in tmux (tests/e2e/test_tmux.py's panes) against the fake Messages API, with a real
transcript on disk."""

from __future__ import annotations

import pytest

from tests.e2e.test_tmux import LONG_REPLY, agent_in_tmux  # noqa: F401 - the fixture
from tests.fakeapi import Reply, is_compaction, is_server_compaction

LOCAL_SUMMARY = "LOCAL-SUMMARY-7c1: a reply of 560 numbered lines was written."


@pytest.mark.parametrize("writer", ["server", "local"])
def test_the_compaction_stays_readable_after_exit_and_continue(
    agent_in_tmux,  # noqa: F811 - the fixture imported above
    fake_api,
    writer,
):
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "60000"}
    if writer == "local":
        env["COMPACT_AGENT_SERVER_COMPACTION"] = "0"
        fake_api.on(is_compaction, Reply.text(f"<summary>{LOCAL_SUMMARY}</summary>"))
    pane = agent_in_tmux(**env)
    fake_api.reply_text(LONG_REPLY, thinking="Writing the long version.")
    pane.type("hello, please write a lot")
    pane.wait_for("END-OF-LONG-REPLY")
    pane.wait_prompt()
    pane.type("/compact")
    pane.wait_for(r"Compacted · manual")
    pane.wait_prompt()
    pane.type("/summary")
    live = pane.wait_for(r"Summary from the last compaction \(manual · [^)]*\):")
    pane.wait_prompt()
    # three exchanges after it: the recap's walk back no longer reaches the summary itself
    for n in range(3):
        fake_api.reply_text(f"ANSWER-{n} after the compaction.")
        pane.type(f"question {n}")
        pane.wait_for(f"ANSWER-{n} after")
        pane.wait_prompt()
    pane.type("/exit")
    pane.wait_exit()
    server = [r for r in fake_api.message_requests if is_server_compaction(r.body)]
    assert len(server) == (1 if writer == "server" else 0)

    pane = agent_in_tmux("--continue", **env)
    screen = pane.wait_for(r"Resumed session")
    assert "(earlier messages were compacted · /summary shows the summary" in screen
    assert screen.index("earlier messages were compacted") < screen.index("question 0") or (
        "question 0" not in screen  # the recap shows the last three exchanges
    )
    pane.type("/summary")
    screen = pane.wait_for(r"Summary from the last compaction \(manual · ")
    pane.wait_prompt()
    written = "server's summary" if writer == "server" else "local summary"
    assert f"(manual · {written} · " in screen
    assert "No compaction in this session yet" not in screen
    assert "This session continues an earlier conversation" not in screen  # the model's wrapper
    # the summary itself, as shown live: the one scripted above, or the one the fake's server wrote
    said = LOCAL_SUMMARY if writer == "local" else "Summary of the conversation so far"
    assert live.count(said) == 1 and screen.count(said) == 1
    pane.type("/history")
    screen = pane.wait_for(r"Before the last compaction \(\d+ messages\):")
    assert "user: hello, please write a lot" in screen
    assert fake_api.violations == []
