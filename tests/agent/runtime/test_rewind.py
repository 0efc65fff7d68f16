"""Rewind (/rewind, Esc Esc): back to just before an earlier prompt, the transcript append-only and a
resume sending what the live session would; and "summarize up to here" from the same menu."""

from __future__ import annotations

import time

from agent.runtime import rewind
from agent.transcript.loader import load_transcript
from compact.compaction import notes
from core.messages import assistant, tool_result_block, tool_results, user_prompt
from tests.helpers.frontend import ESC, chat, new_session, repl_for


def texts(messages) -> list[str]:
    return [m.text for m in messages if m.kind in ("prompt", "response")]


def wait_input(d, text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while d.repl.prompt.default_buffer.text != text:
        assert time.monotonic() < deadline, f"input line is {d.repl.prompt.default_buffer.text!r}"
        time.sleep(0.02)


def test_rewind_goes_back_before_a_prompt_which_returns_to_the_input_line(fake_api, project):
    for reply in ("one done", "two done", "three done"):
        fake_api.reply_text(reply)
    with repl_for(fake_api, project) as d:
        d.type("first\r")
        d.wait_for("one done")
        d.wait_idle()
        d.type("second\r")
        d.wait_for("two done")
        d.wait_idle()
        d.type("/rewind\r")
        d.wait_for("  2. second")
        d.type("2\r")
        d.wait_for("Rewound to just before prompt 2")
        wait_input(d, "second")  # the prompt is back, to edit or send again
        d.type("\x03third\r")  # Ctrl-C clears the line
        d.wait_for("three done")
        d.wait_idle()
        session = d.repl.session
    third = fake_api.message_requests[2].body
    assert "second" not in str(third["messages"]) and "two done" not in str(third["messages"])
    assert texts(session.messages) == ["first", "one done", "third", "three done"]
    lines = session.transcript_path.read_text()
    assert '"second"' in lines and "two done" in lines  # append-only: nothing was removed
    resumed = load_transcript(session.transcript_path)
    assert texts(resumed.messages) == texts(session.messages)
    fake_api.check()


def test_a_resume_right_after_a_rewind_has_the_rewound_conversation(fake_api, project):
    session = new_session(fake_api, project)
    chat(session, "first", "one done")
    chat(session, "second", "two done")
    rewind.rewind(session, rewind.points(session)[1])
    assert texts(load_transcript(session.transcript_path).messages) == ["first", "one done"]
    rewind.rewind(session, rewind.points(session)[0])
    assert load_transcript(session.transcript_path).messages == []
    chat(session, "again", "fresh start")
    assert texts(load_transcript(session.transcript_path).messages) == ["again", "fresh start"]


def test_esc_esc_on_an_empty_line_opens_the_rewind_menu(fake_api, project):
    fake_api.reply_text("one done")
    with repl_for(fake_api, project) as d:
        d.type("first\r")
        d.wait_for("one done")
        d.wait_idle()
        d.type(ESC + ESC)
        d.wait_for("  1. first")
        d.type("\r")  # Enter stays here
        d.wait_idle()
        assert texts(d.repl.session.messages) == ["first", "one done"]


def test_summarize_up_to_a_prompt_keeps_it_and_what_follows_verbatim(fake_api, project):
    fake_api.reply_text("<summary>The user asked two early questions.</summary>")
    with repl_for(fake_api, project) as d:
        session = d.repl.session
        for i in range(1, 4):  # usage as a server reports it: the system prompt and tools (~4K) included
            chat(session, f"question {i}", f"answer {i}", tokens=6_000 + 100 * i)
        d.type("/rewind\r")
        d.wait_for("  3. question 3")
        d.type("s3\r")
        d.wait_for("Compacted")
        d.wait_idle()
    [request] = fake_api.message_requests
    sent = str(request.body["messages"])
    assert "question 2" in sent and "question 3" not in sent  # only what came before is summarized
    live = session.messages
    assert live[0].kind == "summary" and "two early questions" in live[0].text
    assert texts(live)[:2] == ["question 3", "answer 3"]
    resumed = load_transcript(session.transcript_path)
    assert [m.text for m in resumed.messages] == [m.text for m in live]
    fake_api.check()


def test_a_rewind_takes_back_what_the_abandoned_branch_added_to_the_notes(fake_api, project):
    session = new_session(fake_api, project)
    conv = session.conv
    chat(session, "first", "one done")

    def notes_update(
        text: str,
    ) -> None:  # what a completed update leaves (compact.compaction.notes_updater._run)
        conv.notes_path.parent.mkdir(parents=True, exist_ok=True)
        conv.notes_path.write_text(text)
        conv.state.last_summarized_uuid = conv.messages[-1].uuid
        notes.save_version(conv.notes_path, conv.messages[-1].uuid)

    notes_update("# Current State\nThe user asked: first.\n")
    covered = conv.messages[-1].uuid
    chat(session, "second: drop the users table", "two done")
    notes_update("# Current State\nThe user asked: first, then second: drop the users table.\n")
    rewind.rewind(session, rewind.points(session)[1])
    assert "drop the users table" not in conv.notes_path.read_text()  # the rewound prompt is gone
    assert conv.notes_path.read_text() == "# Current State\nThe user asked: first.\n"
    assert conv.state.last_summarized_uuid == covered
    assert load_transcript(session.transcript_path).state.last_summarized_uuid == covered  # a resume too
    # notes that never saw the abandoned branch stay as they are
    chat(session, "third", "three done")
    rewind.rewind(session, rewind.points(session)[1])
    assert conv.notes_path.read_text() == "# Current State\nThe user asked: first.\n"


def test_a_rewind_into_a_compactions_kept_tail_keeps_the_working_state(fake_api, project):
    """Issue 38 item 12: a compaction that keeps just the new prompt (a turn-boundary one on the 5.5
    family, or "summarize up to here") attaches the working state after it; rewinding to that prompt cut
    the attachment, and the failing commands with it (10/18 kept). The kept branch's state comes back,
    without the rewound prompt, and a resume rebuilds the same."""
    fake_api.reply_text("<summary>We worked on some code.</summary>")  # a poor summary
    session = new_session(fake_api, project)
    session.add(user_prompt("Make the parser tests pass."))
    use = {
        "type": "tool_use",
        "id": "toolu_fail",
        "name": "Bash",
        "input": {"command": "pytest tests/parser"},
    }
    session.add(assistant([use], stop_reason="tool_use"))
    failed = tool_result_block("toolu_fail", "E   AssertionError: tokens differ\nExit code 3", is_error=True)
    session.add(tool_results([failed]).replace(extra={"toolFacts": {"toolu_fail": {"exitCode": 3}}}))
    for i in range(1, 4):
        chat(session, f"question {i}", f"answer {i}", tokens=6_000 + 100 * i)
    prompt = rewind.points(session)[-1]
    assert rewind.summarize_up_to(session, prompt) is True
    assert "[exit 3] $ pytest tests/parser" in session.messages[-1].text  # attached after the kept tail

    rewind.rewind(session, prompt)
    state = session.messages[-1]
    assert state.kind == "meta" and "[exit 3] $ pytest tests/parser" in state.text
    assert "question 3" not in state.text  # the rewound prompt does not come back through it
    resumed = load_transcript(session.transcript_path)
    assert [m.text for m in resumed.messages] == [m.text for m in session.messages]
