"""Append-only at the request layer (issue 31 §1): on a preserved-thinking model the system prompt is fixed
for the session; a changed CLAUDE.md, a new day or another model's name reaches the model as an appended
``role: "system"`` message kept in the history, so every request extends the one before it — checked by
the enforcing fake (0 refusals) and by cache diagnostics (0 misses). A resume sends the recorded prompt.
Older models keep a prompt rebuilt for each request."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from agent.runtime import context_updates, lifecycle, subagents
from agent.runtime.loop import run_turn
from tests.fakeapi import FakeAPI, Reply, thinking_block
from tests.helpers.session import make_session
from tests.helpers.transcripts import records

MODEL = "claude-sonnet-5-5"


def thought(text: str) -> Reply:
    return Reply([thinking_block(f"about {text}"), {"type": "text", "text": text}])


def system_messages(body: dict) -> list[str]:
    return [m["content"][0]["text"] for m in body["messages"] if m["role"] == "system"]


def extends(before: dict, after: dict) -> bool:
    """``after`` sends ``before``'s system, tools and messages unchanged (cache_control aside)."""
    strip = context_updates_strip
    return (
        strip(after["system"]) == strip(before["system"])
        and strip(after["tools"]) == strip(before["tools"])
        and strip(after["messages"][: len(before["messages"])]) == strip(before["messages"])
    )


def context_updates_strip(value):
    if isinstance(value, dict):
        return {k: context_updates_strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [context_updates_strip(v) for v in value]
    return value


def test_a_changed_claude_md_is_appended_not_rebuilt(tmp_path: Path) -> None:
    with FakeAPI(binding="error") as api:
        session, _ = make_session(tmp_path, api, model=MODEL, model_explicit=True)
        project = session.settings.cwd
        (project / "CLAUDE.md").write_text("Use tabs.\n")
        api.add(Reply.tools([("Read", {"file_path": str(project / "CLAUDE.md")})], thinking="look at it"))
        api.add(thought("read"))
        run_turn(session, "read the rules")
        (project / "CLAUDE.md").write_text("Use four spaces, never tabs.\n")
        api.add(thought("noted"))
        run_turn(session, "the rules changed")
        api.add(thought("still"))
        run_turn(session, "and now?")
        bodies = [r.body for r in api.message_requests]
        assert all(extends(a, b) for a, b in zip(bodies, bodies[1:]))  # append-only, request after request
        assert "Use tabs." in str(bodies[-1]["system"]) and "four spaces" not in str(bodies[-1]["system"])
        updates = system_messages(bodies[-1])
        assert len(updates) == 1 and "Use four spaces, never tabs." in updates[0]  # told once, kept
        assert system_messages(bodies[1]) == []
        assert api.binding.refused == [] and api.binding.cache_misses == []
        api.check()


def test_a_new_day_is_appended_and_a_resume_sends_the_prompt_as_it_was(tmp_path: Path) -> None:
    now = [datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc)]
    with FakeAPI(binding="error") as api:
        session, _ = make_session(tmp_path, api, model=MODEL, model_explicit=True)
        subagents.install(session)  # the Task tool, as every session opened by the front ends has it
        session.clock = lambda: now[0]
        api.add(thought("one"))
        run_turn(session, "first")
        now[0] += timedelta(days=1)
        api.add(thought("two"))
        run_turn(session, "second")
        first, second = (r.body for r in api.message_requests)
        assert second["system"] == first["system"] and extends(first, second)
        assert "2026-11-28" in system_messages(second)[0]
        recs = [r for r in records(session.transcript_path) if r.get("type") == "system-prompt"]
        assert len(recs) == 1 and context_updates_strip(recs[0]["blocks"]) == context_updates_strip(
            first["system"]
        )

        resumed = lifecycle.open_session(
            session.settings, emit=lambda e: None, ask=None, resume=session.session_id
        )
        resumed.clock = lambda: now[0]
        api.add(thought("three"))
        run_turn(resumed, "third")
        third = api.message_requests[-1].body
        assert extends(second, third)  # the same system bytes, the same history, the update kept
        assert third["diagnostics"]["previous_message_id"] == resumed.messages[-3].message_id
        assert len(system_messages(third)) == 1
        assert api.binding.refused == [] and api.binding.cache_misses == []
        api.check()


def test_older_models_keep_a_prompt_rebuilt_for_each_request(tmp_path: Path) -> None:
    with FakeAPI() as api:
        session, _ = make_session(tmp_path, api, model="claude-sonnet-4-6", model_explicit=True)
        project = session.settings.cwd
        api.add(Reply.text("one"))
        run_turn(session, "first")
        (project / "CLAUDE.md").write_text("NEW-RULE\n")
        api.add(Reply.text("two"))
        run_turn(session, "second")
        first, second = (r.body for r in api.message_requests)
        assert "NEW-RULE" in str(second["system"]) and system_messages(second) == []
        assert session.fixed_system() is None and context_updates.refresh(session) == []
        api.check()


def test_on_the_2026_profile_a_tool_chain_with_updates_and_a_resume_is_never_refused(tmp_path: Path) -> None:
    """The fake playing the 5.5 family (a signed thinking block on every reply, text between tool calls
    inside thinking): a tool chain, an edited CLAUDE.md, a new day and a resume, all append-only."""
    now = [datetime(2026, 11, 27, 23, 0, tzinfo=timezone.utc)]
    with FakeAPI(binding="error", profile="2026") as api:
        session, _ = make_session(
            tmp_path,
            api,
            model=MODEL,
            model_explicit=True,
            session_memory=False,
            permission_mode="bypassPermissions",
        )
        subagents.install(session)
        session.clock = lambda: now[0]
        project = session.settings.cwd
        (project / "CLAUDE.md").write_text("rule one\n")
        (project / "a.txt").write_text("alpha\n")
        api.add(Reply.tool("Read", {"file_path": str(project / "a.txt")}, text="Reading it first."))
        api.add(Reply.tool("Bash", {"command": "echo two > CLAUDE.md"}))
        api.add(Reply.text("done"))
        assert run_turn(session, "read a.txt, then change the rules").stop_reason == "end_turn"
        now[0] += timedelta(hours=2)  # past midnight
        api.add(Reply.text("noted"))
        run_turn(session, "what day is it?")
        resumed = lifecycle.open_session(
            session.settings, emit=lambda e: None, ask=None, resume=session.session_id
        )
        resumed.clock = lambda: now[0]
        api.add(Reply.text("resumed"))
        assert run_turn(resumed, "go on").stop_reason == "end_turn"
        bodies = [r.body for r in api.message_requests]
        assert all(extends(a, b) for a, b in zip(bodies, bodies[1:]))
        updates = system_messages(bodies[-1])
        assert any("two" in u for u in updates) and any("2026-11-28" in u for u in updates)
        assert api.binding.refused == [] and api.binding.cache_misses == []
        api.check()


def test_a_request_to_an_older_model_carries_no_system_messages_and_no_binding() -> None:
    """A compaction model of the 4.x family reads the conversation's appended system messages as user text,
    and the drop_block setting (which it does not know) is not sent to it."""
    from core.model import Request

    messages = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "system", "content": [{"type": "text", "text": "the date changed"}]},
    ]
    old = Request("claude-haiku-4-5", [], [], messages, 100, block_binding="drop_block").params()
    assert [m["role"] for m in old["messages"]] == ["user", "user"] and "thinking" not in old
    new = Request(MODEL, [], [], messages, 100, block_binding="drop_block").params()
    assert [m["role"] for m in new["messages"]] == ["user", "system"]
    assert new["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}
