"""Never a dead session (issue 31 §4) and cache health (§6), in process against the enforcing fake: a
request whose thinking fails the prefix check is sent once more with drop_block, that request only: the
thinking the server dropped is left out of the conversation from then on (and after a resume), so no later
request needs the setting; the user sees one line, the transcript keeps what was dropped; every
main request names its predecessor and a miss is recorded with its reason."""

from __future__ import annotations

from pathlib import Path

from agent.runtime import lifecycle
from agent.runtime.loop import run_turn
from agent.transcript.loader import load_transcript
from compact.context import cache_health
from compact.owner import FALLBACK_NOTICE
from core.events import Notice
from core.messages import user_prompt
from core.model import BINDING_BETA
from tests.fakeapi import FakeAPI, Reply, thinking_block
from tests.helpers.session import make_session
from tests.helpers.transcripts import records

MODEL = "claude-sonnet-5-5"


def thought(text: str) -> Reply:
    return Reply([thinking_block(f"thinking about: {text}"), {"type": "text", "text": text}])


def break_prefix(session) -> None:
    """Change the session's fixed system prompt: every thinking block sent so far is then invalid."""
    fixed = session.fixed_system()
    session.restore_system([{**fixed[0], "text": fixed[0]["text"] + " (changed)"}, *fixed[1:]], record=False)


def notices(events: list) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice)]


def test_a_refused_prefix_is_sent_again_with_drop_block_for_that_request_only(tmp_path: Path) -> None:
    """Issue 38: drop_block is sent with the request that needs it, never again: the thinking the server
    dropped is left out of the conversation (a recorded decision), so the next requests are valid as
    they are (before, every later request of the conversation sent drop_block, and lost its new
    thinking too)."""
    with FakeAPI(binding="error") as api:
        session, events = make_session(tmp_path, api, model=MODEL, model_explicit=True)
        api.add(thought("first answer"))
        assert run_turn(session, "first question").stop_reason == "end_turn"
        # something rewrites the prefix under the thinking (what the agent must never do): here the system
        # prompt (the pipeline's own history edits are caught before sending: compact.stages.binding)
        break_prefix(session)
        api.add(thought("second answer"))
        assert run_turn(session, "second question").stop_reason == "end_turn"
        api.add(thought("third answer"))
        assert run_turn(session, "third question").stop_reason == "end_turn"
        api.add(Reply.text("fourth answer"))
        assert run_turn(session, "fourth question").stop_reason == "end_turn"

        assert len(api.binding.refused) == 1 and len(api.violations) == 1  # the one refusal, then never again
        retried, third, fourth = api.message_requests[-3:]
        assert retried.body["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}
        assert BINDING_BETA in retried.headers["anthropic-beta"]
        for request in (third, fourth):  # no escape hatch: the second answer's thinking is valid and sent
            assert "block_binding" not in request.body["thinking"]
        assert (
            sum(1 for m in fourth.body["messages"] for b in m["content"] if b.get("type") == "thinking") == 2
        )
        assert len(api.binding.fallbacks) == 1 and api.binding.dropped == api.binding.fallbacks[0]
        assert notices(events).count(FALLBACK_NOTICE) == 1  # one line for the user
        recs = records(session.transcript_path)
        assert not [r for r in recs if r.get("type") == "thinking-binding"]
        first = next(m for m in session.messages if m.role == "assistant")
        assert [r["droppedThinkingUuids"] for r in recs if r.get("where") == "drop-block"] == [[first.uuid]]
        assert api.message_requests[-4].status == 400  # the refused one, then the retry
        answered = next(
            r for r in recs if r.get("type") == "assistant" and "second answer" in str(r["message"])
        )
        assert answered["inputTransformations"] == [
            {"type": "thinking_dropped", "path": "messages.1.content.0", "reason": "prefix_binding_mismatch"}
        ]
        api.violations.clear()
        api.binding.fallbacks.clear()  # this test takes the path on purpose; any other test fails on it
        api.check()

        # a resume needs no setting either
        loaded = load_transcript(session.transcript_path, model=MODEL)
        assert loaded.thinking_binding is None


def test_a_resumed_session_sends_what_the_live_one_sent_after_a_drop_block(tmp_path: Path) -> None:
    with FakeAPI(binding="error") as api:
        built, _ = make_session(tmp_path, api, model=MODEL, model_explicit=True)
        lifecycle.close(built)  # the live session as the CLI opens it (with its Task tool), like the resume
        session = lifecycle.open_session(built.settings, emit=lambda e: None, ask=None)
        api.add(thought("one"))
        run_turn(session, "q1")
        break_prefix(session)
        api.add(thought("two"))
        run_turn(session, "q2")
        resumed = lifecycle.open_session(
            session.settings, emit=lambda e: None, ask=None, resume=session.session_id
        )
        assert resumed.conv.thinking_binding is None
        resumed.restore_system(session.fixed_system(), record=False)  # the changed prompt, as live
        api.add(Reply.text("three"))
        run_turn(resumed, "q3")
        last = api.message_requests[-1].body
        assert "block_binding" not in last["thinking"]
        assert sum(1 for m in last["messages"] for b in m["content"] if b.get("type") == "thinking") == 1
        assert len(api.binding.refused) == 1  # only the live one, before its retry
        api.violations.clear()
        api.binding.fallbacks.clear()
        api.check()


def test_a_second_refusal_with_drop_block_already_on_ends_the_turn_with_the_error(tmp_path: Path) -> None:
    """The retry is once: a server that refuses even with drop_block ends the turn with its error line."""
    with FakeAPI() as api:
        session, _ = make_session(tmp_path, api, model=MODEL, model_explicit=True)
        text = (
            "messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a different "
            'conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
        )
        api.error(400, "invalid_request_error", text)
        api.error(400, "invalid_request_error", text)
        finished = run_turn(session, "q")
        assert finished.stop_reason == "error" and "bound to a different conversation" in finished.error
        assert len(api.message_requests) == 2
        api.check()


def test_every_main_request_names_its_predecessor_and_a_miss_is_kept(tmp_path: Path) -> None:
    with FakeAPI(binding="error") as api:
        session, _ = make_session(tmp_path, api, model=MODEL, model_explicit=True)
        for n in range(3):
            api.add(thought(f"answer {n}"))
            run_turn(session, f"question {n}")
        bodies = [r.body for r in api.message_requests]
        replies = [m.message_id for m in session.messages if m.role == "assistant"]
        assert [b["diagnostics"]["previous_message_id"] for b in bodies] == [None, *replies[:2]]
        assert session.conv.cache_misses == [] and api.binding.cache_misses == []
        # an edit of the history shows as a miss, with its reason, outside any compaction point
        session.conv.thinking_binding = (
            "drop_block"  # (so the edit is not refused: this test is about the cache)
        )
        session.conv.messages[0] = session.conv.messages[0].replace(
            content=[{"type": "text", "text": "edited"}]
        )
        api.add(Reply.text("after the edit"))
        run_turn(session, "question 3")
        assert [m["reason"] for m in cache_health.unexpected(session.conv)] == ["messages_changed"]
        recs = [r for r in records(session.transcript_path) if r.get("type") == "cache-miss"]
        assert recs and recs[0]["reason"] == "messages_changed" and recs[0]["compactionPoint"] is False
        api.binding.fallbacks.clear()
        api.check()


def test_appended_prompts_never_miss(tmp_path: Path) -> None:
    with FakeAPI(binding="error") as api:
        session, _ = make_session(tmp_path, api, model=MODEL, model_explicit=True)
        api.add(
            Reply.tools([("Read", {"file_path": str(tmp_path / "project" / "nothing.txt")})], thinking="look")
        )
        api.add(thought("done"))
        run_turn(session, "read it")
        session.add(user_prompt("and again"))
        api.add(thought("again"))
        run_turn(session, "one more")
        assert api.binding.cache_misses == [] and session.conv.cache_misses == []
        api.check()
