"""The query loop (agent.runtime.loop.run_turn) on a real session whose model is a script
(core.scripted.ScriptedModel): no wire, no subprocess of the agent; the tools are real.

Each test runs a whole turn and asserts how it ended, how many requests it made, what each request
carried, and every message's role and kind in the conversation (the mini-swe-agent pattern)."""

from __future__ import annotations

from pathlib import Path

from agent.runtime.loop import run_turn
from core.errors import ModelError
from core.scripted import ScriptedModel, reply_text, reply_tool, reply_tools
from tests.helpers.session import make_session


def _shape(session) -> list[tuple[str, str]]:
    return [(m.role, m.kind) for m in session.conv.messages]


def test_a_tool_call_runs_and_its_result_goes_back_with_the_next_request(tmp_path: Path) -> None:
    model = ScriptedModel(
        [reply_tool("Bash", {"command": "echo hi > made.txt; echo made"}), reply_text("Done.")]
    )
    session, events = make_session(tmp_path, model_api=model, permission_mode="bypassPermissions")

    finished = run_turn(session, "make a file")

    assert (finished.stop_reason, finished.text) == ("end_turn", "Done.")
    assert (tmp_path / "project" / "made.txt").read_text() == "hi\n"
    assert len(model.requests) == 2 and model.left == 0
    assert _shape(session) == [
        ("user", "prompt"),
        ("assistant", "response"),
        ("user", "tool_results"),
        ("assistant", "response"),
    ]
    [result] = model.requests[1].messages[-1]["content"]
    assert (result["type"], result["content"], result.get("is_error", False)) == (
        "tool_result",
        "made",
        False,
    )
    assert model.requests[0].messages[-1]["content"][-1]["text"].startswith("make a file")


def test_calls_of_one_reply_each_get_their_result_in_order(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("alpha\n")
    model = ScriptedModel(
        [
            reply_tools([("Read", {"file_path": str(project / "a.txt")}), ("Glob", {"pattern": "*.txt"})]),
            reply_text("Read and listed."),
        ]
    )
    session, _ = make_session(tmp_path, model_api=model, permission_mode="bypassPermissions")

    finished = run_turn(session, "look around")

    assert finished.stop_reason == "end_turn" and len(model.requests) == 2
    calls = [b["id"] for b in model.requests[1].messages[-2]["content"] if b["type"] == "tool_use"]
    results = [b for b in model.requests[1].messages[-1]["content"] if b["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == calls
    assert "alpha" in str(results[0]["content"]) and "a.txt" in str(results[1]["content"])


def test_max_turns_stops_the_loop_after_that_many_requests(tmp_path: Path) -> None:
    model = ScriptedModel([reply_tool("Bash", {"command": f"echo {n}"}) for n in range(3)])
    session, _ = make_session(tmp_path, model_api=model, permission_mode="bypassPermissions")

    finished = run_turn(session, "loop", max_turns=2)

    assert finished.stop_reason == "max_turns"
    assert len(model.requests) == 2 and model.left == 1
    # the last call still got its result: the conversation stays valid for the next turn
    assert _shape(session)[-1] == ("user", "tool_results")


def test_a_model_error_ends_the_turn_as_an_error_and_keeps_the_prompt(tmp_path: Path) -> None:
    model = ScriptedModel([ModelError("overloaded for good")])
    session, _ = make_session(tmp_path, model_api=model)

    finished = run_turn(session, "hello")

    assert finished.stop_reason == "error" and "overloaded for good" in finished.error
    assert _shape(session) == [("user", "prompt")]


def test_a_request_past_the_script_ends_the_turn_saying_so_without_a_retry(tmp_path: Path) -> None:
    model = ScriptedModel([])
    session, _ = make_session(tmp_path, model_api=model)

    finished = run_turn(session, "hello")

    assert finished.stop_reason == "error" and "request 1 has no scripted reply" in finished.error
    assert len(model.requests) == 1
