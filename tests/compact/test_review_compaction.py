"""Review findings in the compaction path, each pinned by a test that failed before its fix."""

from __future__ import annotations

from pathlib import Path

from agent.transcript.loader import load_transcript
from compact.compaction import compactor
from compact.compaction.notes import ensure_notes
from compact.compaction.notes_template import TEMPLATE
from core.messages import assistant, tool_result_block, tool_results, user_prompt
from tests.compact.test_session_memory import answer, guide, notes_bench, read_round
from tests.fakeapi import FakeAPI
from tools.read import number_lines, record_read

# --- resume after two notes compactions whose kept tails overlap ------------------------------------------


def _real_read(bench, path: Path) -> None:
    """A Read of a file that exists, so the compaction restores it after the kept tail."""
    use_id = f"toolu_real{len(bench.messages):04d}"
    bench.add(
        assistant(
            [
                {"type": "text", "text": "Reading the real file."},
                {"type": "tool_use", "id": use_id, "name": "Read", "input": {"file_path": str(path)}},
            ],
            stop_reason="tool_use",
        )
    )
    bench.add(tool_results([tool_result_block(use_id, number_lines(path.read_text().splitlines(), 1))]))
    record_read(bench.tool_ctx, path)


def test_resume_after_a_second_notes_compaction_whose_tail_reaches_into_the_first_kept_segment(tmp_path):
    with FakeAPI() as api:
        bench = notes_bench(tmp_path, api)
        real = bench.cwd / "parser.py"
        real.write_text("def parse(text):\n    return text.split()\n")
        bench.add(user_prompt("Please fix the parser."))
        _real_read(bench, real)
        for _ in range(30):
            read_round(bench, 1_500)
        reply = answer(bench, "The parser is fixed.")
        notes = TEMPLATE.replace(guide("Current State"), guide("Current State") + "\nParser fixed.")
        ensure_notes(bench.conv, bench.ports).write_text(notes)
        bench.state.last_summarized_uuid = reply.uuid
        bench.add(user_prompt("Now add a test."))
        read_round(bench, 800)
        assert compactor.compact(bench.conv, bench.ports, "auto")
        first_kept = [m.uuid for m in bench.messages[1:] if m.kind != "meta"]
        assert any(m.kind == "meta" for m in bench.messages)  # the restored file follows the kept tail

        bench.add(user_prompt("And document it."))
        read_round(bench, 3_000)  # something for the second compaction to take away (else it would grow)
        later = answer(bench, "Documented.")
        bench.state.last_summarized_uuid = later.uuid
        assert compactor.compact(bench.conv, bench.ports, "auto")
        kept_again = [m.uuid for m in bench.messages]
        assert set(first_kept[-4:]) <= set(kept_again)  # the second tail starts inside the first one

        loaded = load_transcript(bench.transcript_path)

        assert loaded.warnings == []
        assert [m.uuid for m in loaded.messages] == [m.uuid for m in bench.messages]


# --- calibration after a reactive compaction ----------------------------------------------------------------


def test_reactive_compaction_calibrates_against_the_view_actually_sent(tmp_path):
    from agent.runtime.loop import run_turn
    from compact.request_cycle import overhead_tokens
    from tests.compact.test_compactor import SUMMARY_REPLY, conversation
    from tests.conftest import make_session

    with FakeAPI() as api:
        session, _ = make_session(tmp_path, api, auto_compact=False, session_memory=False)
        conversation(session, [f"f{i}.py" for i in range(30)])
        api.prompt_too_long(actual=210_000, maximum=200_000)
        api.reply_text(SUMMARY_REPLY)
        api.reply_text("Carrying on.")

        assert run_turn(session, "go on").stop_reason == "end_turn"

        reply = session.messages[-1]
        sent = session.conv.view().tagged[:-1]  # the compacted view the retry carried
        real = sum(
            reply.usage[k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        expected = real / (overhead_tokens(session.request([])) + sum(m.tokens for m in sent))
        assert 0.5 < expected < 2.0
        assert session.conv.calibration.samples == 1
        assert abs(session.conv.calibration.ratio - expected) < 1e-9


# --- the count right after a snip ----------------------------------------------------------------------------


def test_a_snip_takes_effect_on_the_count_before_the_next_response(tmp_path):
    from compact.request_cycle import before_request
    from compact.stages.snip import NUDGE_TEXT, snip_id
    from tests.helpers.bench import make_bench

    with FakeAPI() as api:
        bench = make_bench(tmp_path, api)
        old = user_prompt("Show me the whole log.")
        bench.add(old)
        bench.add(
            assistant(
                [{"type": "text", "text": "log line " * 30_000}],
                usage={"input_tokens": 100, "output_tokens": 60_000},
            )
        )
        prompt = user_prompt("That log is no longer needed; snip it.")
        bench.add(prompt)
        bench.conv.current_prompt_uuid = prompt.uuid
        bench.add(
            assistant(
                [
                    {
                        "type": "tool_use",
                        "id": "toolu_snip1",
                        "name": "Snip",
                        "input": {"ids": [snip_id(old.uuid)]},
                    }
                ],
                stop_reason="tool_use",
                usage={"input_tokens": 60_200, "output_tokens": 50},
            )
        )
        bench.state.tokens_at_last_nudge = 55_000  # a nudge came at 55K, before the log grew
        before = bench.view().tokens
        assert before > 60_000

        sentence = bench.snip([snip_id(old.uuid)], None)
        bench.add(tool_results([tool_result_block("toolu_snip1", sentence)]))
        after = before_request(bench.conv, bench.ports)

        # the Snip reply's usage measured the log; it no longer counts once the log is gone
        assert after.tokens < 1_000
        # and the snip restarts the nudge's count: no reminder right after it
        assert NUDGE_TEXT not in [m.text for m in bench.messages]
        assert bench.state.tokens_at_last_nudge < 1_000
