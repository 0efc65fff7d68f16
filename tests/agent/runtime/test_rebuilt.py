"""Everywhere a conversation is rebuilt (issue 31 §5), against the enforcing fake on a preserved-thinking
model: a /model switch (the earlier model's thinking left out by the agent, counted, shown in /context),
/rewind, a subagent's own conversation, and /context's cache lines. Each asserts 0 refused requests and
0 drop_block fallbacks (api.check()), and where the cache may miss, that it misses only at the rebuild."""

from __future__ import annotations

from pathlib import Path

from agent.frontend import commands
from agent.runtime import rewind, subagents
from agent.runtime.loop import run_turn
from compact.context import cache_health
from core.events import Notice
from tests.fakeapi import FakeAPI, Reply, is_compaction, thinking_block
from tests.helpers.compaction import make_files
from tests.helpers.session import make_session
from tests.helpers.wire import Reader

MODEL = "claude-sonnet-5-5"


def thought(text: str) -> Reply:
    return Reply([thinking_block(f"about {text}"), {"type": "text", "text": text}])


def thinking_in(body: dict) -> int:
    return sum(1 for m in body["messages"] for b in m["content"] if b.get("type") == "thinking")


def test_a_model_switch_leaves_the_earlier_models_thinking_out_counted(tmp_path: Path) -> None:
    with FakeAPI(binding="error") as api:
        session, events = make_session(tmp_path, api, model=MODEL, model_explicit=True)
        for n in range(2):
            api.add(thought(f"answer {n}"))
            run_turn(session, f"question {n}")
        assert thinking_in(api.message_requests[-1].body) == 1
        assert commands.run(session, "/model claude-opus-5-5").text.startswith(
            "Model set to claude-opus-5-5 · "
        )
        assert any(
            "2 thinking blocks of the earlier model left out" in e.text
            for e in events
            if isinstance(e, Notice)
        )
        api.add(thought("from opus"))
        api.add(thought("again"))
        run_turn(session, "question 2")
        run_turn(session, "question 3")
        switched, after = (r.body for r in api.message_requests[-2:])
        assert switched["model"] == "claude-opus-5-5" and thinking_in(switched) == 0
        assert thinking_in(after) == 1  # the new model's own thinking comes back
        assert api.binding.dropped == []  # the agent left them out; the server had nothing to drop
        assert session.conv.foreign_thinking_dropped == 2
        # the model change is a rebuild point: the miss it causes is expected, none after it
        assert [m["reason"] for m in session.conv.cache_misses] == ["model_changed"]
        assert cache_health.unexpected(session.conv) == []
        text = commands.run(session, "/context").text
        assert "Thinking left out after a model switch: 2 blocks" in text
        assert "Prompt cache misses: 1 (0 outside compaction points)" in text
        api.check()


def test_rewind_keeps_the_thinking_before_the_point_valid(tmp_path: Path) -> None:
    with FakeAPI(binding="error") as api:
        session, _ = make_session(tmp_path, api, model=MODEL, model_explicit=True)
        for n in range(3):
            api.add(thought(f"answer {n}"))
            run_turn(session, f"question {n}")
        second = rewind.points(session)[1]
        assert rewind.rewind(session, second) == "question 1"
        api.add(thought("another way"))
        api.add(thought("and on"))
        run_turn(session, "question 1, asked differently")
        run_turn(session, "next")
        assert thinking_in(api.message_requests[-1].body) == 2  # the kept turn's, and the new one before it
        assert [m["reason"] for m in session.conv.cache_misses] == ["messages_changed"]
        assert cache_health.unexpected(session.conv) == []  # the rewind explains the one miss
        api.check()


def test_a_subagents_tool_chain_keeps_its_thinking_valid(tmp_path: Path) -> None:
    with FakeAPI(binding="error") as api:
        session, _ = make_session(tmp_path, api, model=MODEL, model_explicit=True, session_memory=False)
        subagents.install(session)
        paths = make_files(tmp_path / "project", 3)
        reader = Reader(paths, "SUB-ANSWER")

        def thinking_reader(body: dict) -> Reply:
            reply = reader(body)
            return Reply([thinking_block(f"step {reader.next}"), *reply.content])

        api.conversation("SUB-TASK-x1", thinking_reader)
        api.reply(
            [
                thinking_block("delegate it"),
                *Reply.tool(
                    "Task",
                    {"description": "Read", "prompt": "SUB-TASK-x1 read them", "subagent_type": "Explore"},
                ).content,
            ]
        )
        api.add(thought("Done."))
        finished = run_turn(session, "have a subagent read the files")
        assert finished.stop_reason == "end_turn", finished.error
        sub = [r.body for r in api.message_requests if "SUB-TASK-x1" in str(r.body["messages"][0])]
        assert len(sub) == 4 and thinking_in(sub[-1]) == 3  # its whole chain, thinking sent back intact
        assert all(b["system"] == sub[0]["system"] for b in sub)  # its prompt fixed like a session's
        assert api.binding.refused == [] and api.binding.cache_misses == []
        api.check()


def test_the_reactive_path_keeps_every_request_valid(tmp_path: Path) -> None:
    """A prompt-too-long answer mid-conversation: the reactive compaction and the request after it pass
    the prefix check (whichever backend the compaction takes). On the 5.5 family (display "updates" leaves
    the reasoning out of the history) the server's summary of these turns would leave more than there
    was: the compaction falls back to the local summary and the turn goes on (it ended at the limit)."""
    with FakeAPI(binding="error") as api:
        session, events = make_session(tmp_path, api, model=MODEL, model_explicit=True, session_memory=False)
        api.on(
            is_compaction, Reply.text("<analysis>a</analysis>\n<summary>SUMMARY-MARK of the work</summary>")
        )
        for n in range(3):
            api.add(thought(f"answer {n} " + "words " * 600))
            run_turn(session, f"question {n} " + "more " * 200)
        api.prompt_too_long()
        api.add(thought("after the compaction"))
        finished = run_turn(session, "question 3")
        assert finished.stop_reason == "end_turn", finished.error
        assert session.last_compaction is not None
        last = api.message_requests[-1].body
        assert "after the compaction" not in str(last) and "question 3" in str(last)
        assert api.binding.refused == [] and api.binding.fallbacks == []
        assert cache_health.unexpected(session.conv) == []  # the one miss is the compaction's
        api.check()


def test_summarize_from_here_keeps_every_request_valid(tmp_path: Path) -> None:
    """/rewind's "summarize from here": a summary of what came before the chosen prompt, the rest kept
    word for word; the next request passes the prefix check."""
    with FakeAPI(binding="error") as api:
        session, _ = make_session(tmp_path, api, model=MODEL, model_explicit=True, session_memory=False)
        api.on(
            is_compaction, Reply.text("<analysis>a</analysis>\n<summary>SUMMARY-MARK of the start</summary>")
        )
        # the first answer long: what the summary takes away (else it would grow the context: on the 5.5
        # family the kept turns' thinking and the state after it left less than it replaced at 600 lines each)
        for n in range(3):
            api.add(thought(f"answer {n}: " + "a line of detail. " * (1800 if n == 0 else 60)))
            run_turn(session, f"question {n}")
        assert rewind.summarize_up_to(session, rewind.points(session)[1])
        api.add(thought("on we go"))
        finished = run_turn(session, "question 3")
        assert finished.stop_reason == "end_turn", finished.error
        last = api.message_requests[-1].body
        assert "question 1" in str(last) and "question 2" in str(last)  # kept word for word
        assert api.binding.refused == [] and api.binding.fallbacks == []
        api.check()


def test_a_resume_after_a_model_switch_sends_what_the_live_session_sent(tmp_path: Path) -> None:
    """Issue 38: the thinking a /model switch left out stays out after a resume (recorded, like every
    sticky decision), and with no model named the session goes on with the model it was last on: the
    resumed request extends the live one, with no 400 first (the earlier model's thinking came back and
    was refused before)."""
    from agent.runtime import lifecycle
    from tests.helpers.wire import plain

    with FakeAPI(binding="error") as api:
        built, events = make_session(tmp_path, api, model=MODEL, model_explicit=False)
        lifecycle.close(built)
        live = lifecycle.open_session(built.settings, emit=events.append, ask=None)
        for n in range(2):
            api.add(thought(f"answer {n}"))
            run_turn(live, f"question {n}")
        commands.run(live, "/model claude-opus-5-5")
        api.add(thought("from opus"))
        run_turn(live, "question 2")
        last_live = api.message_requests[-1].body
        lifecycle.close(live)

        resumed = lifecycle.open_session(built.settings, emit=events.append, ask=None, continue_last=True)
        assert resumed.model == "claude-opus-5-5"
        api.add(thought("resumed"))
        run_turn(resumed, "question 3")
        first = api.message_requests[-1].body
        assert first["model"] == last_live["model"] and first["tools"] == last_live["tools"]
        assert first["system"] == last_live["system"]
        sent, now = plain(last_live["messages"]), plain(first["messages"])
        assert now[: len(sent)] == sent  # the live history, then the reply and the new prompt
        assert thinking_in(first) == 1  # opus's own thinking came back, sonnet's stayed out
        lifecycle.close(resumed)

        # back on the first model by name: its thinking the switch left out stays out (it was refused)
        import dataclasses

        named = dataclasses.replace(built.settings, model=MODEL, model_explicit=True)
        again = lifecycle.open_session(named, emit=events.append, ask=None, continue_last=True)
        api.add(thought("sonnet again"))
        run_turn(again, "question 4")
        back = api.message_requests[-1].body
        assert back["model"] == MODEL
        # as a live /model back would send it: opus's thinking out (another model), and sonnet's too
        assert thinking_in(back) == 0
        api.check()  # no refusal, no drop_block
