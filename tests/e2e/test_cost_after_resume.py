"""/cost read back after a resume: the compaction's summary request and a reply cut short by Esc count
the same as in the live session."""

from __future__ import annotations

from agent.frontend import commands
from agent.runtime import lifecycle
from tests.helpers.compaction import TEST_RUN, run_round
from tests.helpers.frontend import ESC, chat, new_session, repl_for, wait_until


def test_cost_after_a_resume_counts_the_summary_request_too(fake_api, project):
    session = new_session(fake_api, project)
    chat(session, "remember apricot", "noted", tokens=4_000)
    chat(session, "and plum", "noted too", tokens=4_100)
    run_round(session, "python -m pytest -v", TEST_RUN)  # what the compaction takes away
    fake_api.reply_text("<summary>The user named two fruits.</summary>")
    assert commands.run(session, "/compact").ok
    live = commands.run(session, "/cost").text
    assert session.cost > 0 and "$0.0000" not in live
    lifecycle.close(session)
    resumed = lifecycle.open_session(
        session.settings, emit=lambda e: None, ask=None, resume=session.session_id, environ=session.environ
    )
    # the summary request is read back as well (the time is this run's)
    assert without_time(commands.run(resumed, "/cost").text) == without_time(live)
    fake_api.check()


def without_time(cost: str) -> str:
    return "\n".join(line for line in cost.splitlines() if not line.startswith("Time: "))


def test_a_reply_cut_short_by_esc_counts_in_cost_and_after_a_resume(fake_api, project):
    fake_api.chunk, fake_api.pace = 4, 0.05  # a slow stream: about 100 deltas
    fake_api.reply_text("word " * 80)
    with repl_for(fake_api, project) as d:
        d.type("talk slowly\r")
        wait_until(lambda: d.repl.renderer._out_chars > 0)  # the reply has started
        d.type(ESC)
        d.wait_for("Interrupted by user")
        d.wait_idle()
        session = d.repl.session
        assert not any(m.role == "assistant" for m in session.messages)  # nothing of it was kept
        assert sum(session.usage_total.values()) > 1000 and session.cost > 0  # but what it read was billed
        live = commands.run(session, "/cost").text
    lifecycle.close(session)
    resumed = lifecycle.open_session(
        session.settings, emit=lambda e: None, ask=None, resume=session.session_id, environ=session.environ
    )
    assert without_time(commands.run(resumed, "/cost").text) == without_time(live)
