"""Review findings in the compaction path, each pinned by a test that failed before its fix."""

from __future__ import annotations

from pathlib import Path

from agent.context import view
from agent.transcript import load_transcript
from compact import compactor
from compact import session_memory as sm
from compact.notes_template import TEMPLATE
from core.messages import assistant, tool_result_block, tool_results, user_prompt
from tests.fakeapi import FakeAPI
from tests.test_session_memory import answer, guide, make_session, read_round
from tools.read import number_lines, record_read

# --- resume after two notes compactions whose kept tails overlap ------------------------------------------


def _real_read(session, path: Path) -> None:
    """A Read of a file that exists, so the compaction restores it after the kept tail."""
    use_id = f"toolu_real{len(session.messages):04d}"
    session.add(assistant([{"type": "text", "text": "Reading the real file."},
                           {"type": "tool_use", "id": use_id, "name": "Read", "input": {"file_path": str(path)}}],
                          stop_reason="tool_use"))
    session.add(tool_results([tool_result_block(use_id, number_lines(path.read_text().splitlines(), 1))]))
    record_read(session.tool_ctx, path)


def test_resume_after_a_second_notes_compaction_whose_tail_reaches_into_the_first_kept_segment(tmp_path):
    with FakeAPI() as api:
        session, _ = make_session(tmp_path, api)
        real = session.settings.cwd / "parser.py"
        real.write_text("def parse(text):\n    return text.split()\n")
        session.add(user_prompt("Please fix the parser."))
        _real_read(session, real)
        for _ in range(30):
            read_round(session, 1_500)
        reply = answer(session, "The parser is fixed.")
        notes = TEMPLATE.replace(guide("Current State"), guide("Current State") + "\nParser fixed.")
        sm.ensure_notes(session).write_text(notes)
        session.state.last_summarized_uuid = reply.uuid
        session.add(user_prompt("Now add a test."))
        read_round(session, 800)
        assert compactor.compact(session, "auto")
        first_kept = [m.uuid for m in session.messages[1:] if m.kind != "meta"]
        assert any(m.kind == "meta" for m in session.messages)  # the restored file follows the kept tail

        session.add(user_prompt("And document it."))
        later = answer(session, "Documented.")
        session.state.last_summarized_uuid = later.uuid
        assert compactor.compact(session, "auto")
        kept_again = [m.uuid for m in session.messages]
        assert set(first_kept[-4:]) <= set(kept_again)  # the second tail starts inside the first one

        loaded = load_transcript(session.transcript_path)

        assert loaded.warnings == []
        assert [m.uuid for m in loaded.messages] == [m.uuid for m in session.messages]


# --- calibration after a reactive compaction ----------------------------------------------------------------


def test_reactive_compaction_calibrates_against_the_view_actually_sent(tmp_path):
    from agent.loop import run_turn
    from tests.test_compactor import SUMMARY_REPLY, conversation
    from tests.test_compactor import make_session as make_plain_session

    with FakeAPI() as api:
        session, _ = make_plain_session(tmp_path, api, auto_compact=False)
        conversation(session, [f"f{i}.py" for i in range(30)])
        api.prompt_too_long(actual=210_000, maximum=200_000)
        api.reply_text(SUMMARY_REPLY)
        api.reply_text("Carrying on.")

        assert run_turn(session, "go on").stop_reason == "end_turn"

        reply = session.messages[-1]
        sent = view(session).messages[:-1]  # the compacted view the retry carried
        real = sum(reply.usage[k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        expected = (real - session.overhead_tokens()) / sum(m.tokens for m in sent)
        assert 0.5 < expected < 2.0
        assert session.calibration.samples == 1
        assert abs(session.calibration.ratio - expected) < 1e-9


# --- the count right after a snip ----------------------------------------------------------------------------


def test_a_snip_takes_effect_on_the_count_before_the_next_response(tmp_path):
    from agent.context import prepare_context
    from compact.snip import NUDGE_TEXT, snip_id
    from tests.test_compactor import make_session as make_plain_session

    with FakeAPI() as api:
        session, _ = make_plain_session(tmp_path, api)
        old = user_prompt("Show me the whole log.")
        session.add(old)
        session.add(assistant([{"type": "text", "text": "log line " * 30_000}],
                              usage={"input_tokens": 100, "output_tokens": 60_000}))
        prompt = user_prompt("That log is no longer needed; snip it.")
        session.add(prompt)
        session.current_prompt_uuid = prompt.uuid
        session.add(assistant([{"type": "tool_use", "id": "toolu_snip1", "name": "Snip",
                                "input": {"ids": [snip_id(old.uuid)]}}],
                              stop_reason="tool_use", usage={"input_tokens": 60_200, "output_tokens": 50}))
        session.state.tokens_at_last_nudge = 55_000  # a nudge came at 55K, before the log grew
        before = view(session).tokens
        assert before > 60_000

        sentence = session._snip([snip_id(old.uuid)], None)
        session.add(tool_results([tool_result_block("toolu_snip1", sentence)]))
        after = prepare_context(session)

        # the Snip reply's usage measured the log; it no longer counts once the log is gone
        assert after.tokens < 1_000
        # and the snip restarts the nudge's count: no reminder right after it
        assert NUDGE_TEXT not in [m.text for m in session.messages]
        assert session.state.tokens_at_last_nudge < 1_000
