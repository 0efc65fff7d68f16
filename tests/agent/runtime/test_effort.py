"""The models people run today (issue 29): model families and aliases, thinking by effort with Claude
Code's controls mapped onto it, every kind of request legal under both of the fake's profiles, and the
model's progress between tool calls on screen. The 4.x budget form: tests/agent/runtime/test_thinking.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.frontend import commands
from agent.runtime import subagents, thinking
from agent.runtime.loop import run_turn
from compact.compaction import notes_updater
from compact.workers import collapse_worker
from core.model import Request
from core.models import ALIASES, EFFORTS, family_of, learn, resolve
from tests.fakeapi import (
    FakeAPI,
    Reply,
    first_user_text,
    is_compaction,
    is_notes_update,
    is_server_compaction,
)
from tests.helpers.session import make_session

SONNET, OPUS, OLD = "claude-sonnet-5-5", "claude-opus-5-5", "claude-sonnet-4-5"
USER = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


pytestmark = pytest.mark.fake_api(profile="2026")  # this file is about that profile


# --- the mapping of every control --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "effort"),
    [
        ("fix it", None),
        ("think about it", "medium"),
        ("think hard about the parser", "high"),
        ("megathink: the cache", "high"),
        ("think harder please", "xhigh"),
        ("ULTRATHINK the design", thinking.DEEPEST),
    ],
)
def test_prompt_words_ask_for_an_effort_in_claude_codes_order(prompt, effort):
    assert thinking.prompt_effort(prompt) == effort


def test_ultrathink_reaches_the_deepest_effort_the_model_offers():
    for model in (SONNET, OPUS, "claude-opus-4-8"):
        family = family_of(model)
        plan = thinking.plan_effort(
            family, on=True, session_effort="low", prompt=thinking.DEEPEST, pinned=None
        )
        assert plan.effort == family.deepest == "max"
    lesser = learn(
        SONNET,
        {
            "capabilities": {
                "effort": {"supported": True, "low": {"supported": True}, "high": {"supported": True}}
            }
        },
    )
    plan = thinking.plan_effort(lesser, on=True, session_effort=None, prompt=thinking.DEEPEST, pinned=None)
    assert plan.effort == "high"  # the deepest this model reports


@pytest.mark.parametrize(
    ("budget", "effort"),
    [(1024, "low"), (3_999, "low"), (4_000, "medium"), (10_000, "high"), (16_000, "xhigh"), (31_999, "max")],
)
def test_max_thinking_tokens_maps_to_an_effort(budget, effort):
    assert thinking.budget_effort(budget) == effort


def test_words_raise_the_effort_and_never_lower_it():
    family = family_of(SONNET)
    on = dict(on=True, pinned=None)
    assert thinking.plan_effort(family, session_effort="max", prompt="medium", **on).effort == "max"
    assert thinking.plan_effort(family, session_effort="low", prompt="high", **on).effort == "high"
    assert thinking.plan_effort(family, session_effort=None, prompt=None, **on).effort is None  # the default
    plan = thinking.plan_effort(family, session_effort=None, prompt=None, **on)
    assert plan.thinking == {"type": "adaptive", "display": "updates"}


def test_the_toggle_off_is_between_tools_where_the_model_allows_it():
    sonnet, opus = family_of(SONNET), family_of(OPUS)
    off = thinking.plan_effort(sonnet, on=False, session_effort="medium", prompt=None, pinned=None)
    assert off.thinking == {"type": "between_tools"} and off.effort == "medium"
    # the conversation keeps the effort it began at, whatever /effort says later
    pinned = thinking.plan_effort(sonnet, on=False, session_effort="low", prompt=None, pinned="medium")
    assert pinned.effort == "medium"
    # above high, between_tools is refused: thinking stays on, and the toggle says why
    high = thinking.plan_effort(sonnet, on=False, session_effort="max", prompt=None, pinned=None)
    assert high.thinking is not None and high.thinking["type"] == "adaptive"
    assert "only at low, medium or high" in thinking.toggle_line(sonnet, False, "max")
    # Opus 5.5 can't turn it off at all: it says so instead of pretending
    stays = thinking.plan_effort(opus, on=False, session_effort=None, prompt=None, pinned=None)
    assert stays.thinking is not None and stays.thinking["type"] == "adaptive"
    assert "can't turn thinking off" in thinking.toggle_line(opus, False, None)
    # a word turns it on for its turn, as on the budget models
    word = thinking.plan_effort(sonnet, on=False, session_effort=None, prompt="xhigh", pinned="low")
    assert word.thinking is not None and word.thinking["type"] == "adaptive" and word.effort == "xhigh"


# --- model families and aliases ---------------------------------------------------------------------


def test_aliases_name_the_newest_of_each_kind_and_unknown_names_get_the_newest_rules():
    assert resolve("opus") == OPUS and resolve("Sonnet") == SONNET and resolve("haiku") == "claude-haiku-5-5"
    assert resolve("claude-sonnet-4-5") == "claude-sonnet-4-5" and set(ALIASES) >= {"opus", "sonnet", "haiku"}
    newer = family_of("claude-sonnet-7")
    assert newer.adaptive and newer.refuses_forced_tool and not newer.budgets
    assert family_of(OLD).budgets and not family_of(OLD).refuses_prefill
    assert family_of(SONNET).window == 1_000_000 and family_of(SONNET).max_output == 128_000


def test_what_the_models_api_reports_corrects_the_table():
    caps = {
        "thinking": {
            "supported": True,
            "types": {
                k: {"supported": k == "adaptive"}
                for k in ("adaptive", "between_tools", "disabled", "enabled")
            },
        },
        "effort": {"supported": True, **{e: {"supported": e != "max"} for e in EFFORTS}},
    }
    family = learn(SONNET, {"max_input_tokens": 500_000, "capabilities": caps})
    assert family.stop is None and family.deepest == "xhigh" and family.window == 500_000


def test_one_place_leaves_out_what_a_5_5_model_refuses():
    req = Request(
        SONNET, [], [], [*USER, {"role": "assistant", "content": [{"type": "text", "text": "Sure"}]}], 200_000
    )
    req.thinking = {"type": "enabled", "budget_tokens": 5_000}
    req.tool_choice = {"type": "tool", "name": "Edit"}
    req.extra_body = {"temperature": 0.2, "top_k": 3}
    params = req.params()
    assert "thinking" not in params and params["tool_choice"] == {"type": "auto"}
    assert params["messages"][-1]["role"] == "user"  # no prefill
    assert "extra_body" not in params and params["max_tokens"] == 128_000
    req.thinking, req.effort = {"type": "between_tools"}, "max"
    assert "thinking" not in req.params()  # between_tools only up to high: the default thinking instead
    req.thinking = {"type": "adaptive", "display": "updates"}
    params = req.params()
    assert (
        params["output_config"] == {"effort": "max"}
        and "thinking-display-updates-2026-08-18" in params["betas"]
    )
    four = Request("claude-sonnet-4-6", [], [], USER, 4_000, effort="high")
    assert "output_config" not in four.params()  # a model without effort gets none


def test_prices_windows_and_limits_come_from_the_family():
    from core.model import context_window_for, cost_usd, max_output_tokens

    million = {"input_tokens": 1_000_000, "output_tokens": 1_000_000, "cache_read_input_tokens": 1_000_000}
    assert cost_usd(SONNET, million) == pytest.approx(2 + 10 + 0.10)
    assert cost_usd(OPUS, million) == pytest.approx(
        4 + 20 + 0.20
    )  # cache reads 1/20 of input (docs/preserved-thinking.md)
    assert cost_usd(OLD, million) == pytest.approx(3 + 15 + 0.30)
    assert context_window_for(SONNET) == 1_000_000 and context_window_for(OLD) == 200_000
    assert max_output_tokens(SONNET) == 128_000 and max_output_tokens("claude-opus-4-1") == 32_000


# --- every kind of request, under both profiles --------------------------------------------------------

PROFILES = {
    "2026": {"model": SONNET},
    "4.x": {"model": OLD, "max_thinking_tokens": 2048},  # thinking by budget, as today
}


@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("kind", ["main", "summary", "server summary", "notes", "collapse", "subagent"])
def test_every_kind_of_request_is_accepted(tmp_path: Path, profile: str, kind: str) -> None:
    """No title/probe request and no count_tokens request exist in the agent (it counts locally)."""
    local = {"server_compaction": False} if kind == "summary" else {}
    with FakeAPI(profile=profile) as api:
        session, _ = make_session(tmp_path, api, model_explicit=True, **PROFILES[profile], **local)
        subagents.install(session)  # as a session starts: the Task tool is there from the first request
        target = tmp_path / "project" / "notes.txt"
        target.write_text("alpha\n" + "an older line\n" * 400)  # something for /compact to take away
        api.add(Reply.tool("Read", {"file_path": str(target)}, text="Reading the notes."))
        api.add(Reply.text("It says alpha."))
        assert run_turn(session, "what is in notes.txt?").stop_reason == "end_turn"
        if kind == "summary":  # the LLM summary (the client's own)
            api.on(is_compaction, Reply.text("<analysis>a</analysis><summary>alpha</summary>"))
            assert commands.run(session, "/compact").ok
            assert [r for r in api.message_requests if is_compaction(r.body)]
        elif kind == "server summary":  # the default backend: the server's where the kept reply thinks
            api.on(is_compaction, Reply.text("<analysis>a</analysis><summary>alpha</summary>"))
            assert commands.run(session, "/compact").ok
            server = [r for r in api.message_requests if is_server_compaction(r.body)]
            assert bool(server) == (profile == "2026")  # a 4.x model doesn't offer it: the LLM summary
            api.add(Reply.text("Still alpha."))  # the next request sends the server's block first
            assert run_turn(session, "and now?").stop_reason == "end_turn"
        elif kind == "notes":
            api.on(is_notes_update, Reply.text("Nothing new to note."))
            assert notes_updater.update_notes(session.conv, session.ports)
        elif kind == "collapse":
            api.on(lambda b: True, Reply.text("SUMMARY: read."), once=True)  # the next request: the span's
            view = session.conv.view().messages
            assert collapse_worker.summarise(session.ports, session.messages[:3], view=view)
        elif kind == "subagent":
            api.conversation("Count the lines", Reply.text("One line."))
            api.add(
                Reply.tool(
                    "Task",
                    {
                        "description": "count",
                        "prompt": "Count the lines of notes.txt",
                        "subagent_type": "general-purpose",
                    },
                )
            )
            api.add(Reply.text("The subagent says one line."))
            assert run_turn(session, "delegate it").stop_reason == "end_turn"
            assert any("Count the lines" in first_user_text(r.body) for r in api.message_requests)
        refused = [r for r in api.requests if r.status == 400]
        assert refused == [] and api.violations == []
        main = api.message_requests[0].body
        if profile == "2026":
            assert main["thinking"] == {"type": "adaptive", "display": "updates"}
        else:
            assert main["thinking"] == {"type": "enabled", "budget_tokens": 2048}


# --- end to end: the controls reach the request ---------------------------------------------------------


def test_cli_controls_reach_the_request(api, run_cli, project, isolated_env):
    def last_body():
        return api.message_requests[-1].body

    api.reply_text("deep")
    assert run_cli(api, "-p", "ultrathink about it").code == 0
    assert last_body()["output_config"] == {"effort": "max"} and last_body()["model"] == SONNET
    assert "thinking-display-updates-2026-08-18" in api.message_requests[-1].headers["anthropic-beta"]
    api.reply_text("budget")
    assert run_cli(api, "-p", "hello", env={"MAX_THINKING_TOKENS": "12000"}).code == 0
    assert last_body()["output_config"] == {"effort": "high"}
    api.reply_text("env")
    assert run_cli(api, "-p", "hello", env={"CLAUDE_CODE_EFFORT_LEVEL": "low"}).code == 0
    assert last_body()["output_config"] == {"effort": "low"}
    api.reply_text("flag")
    assert run_cli(api, "-p", "hello", "--effort", "medium", "--model", "opus").code == 0
    assert last_body()["output_config"] == {"effort": "medium"} and last_body()["model"] == OPUS
    (isolated_env / ".claude").mkdir()
    (isolated_env / ".claude" / "settings.json").write_text(
        json.dumps({"effortLevel": "xhigh", "model": "sonnet"})
    )
    api.reply_text("settings")
    assert run_cli(api, "-p", "hello").code == 0
    assert last_body()["output_config"] == {"effort": "xhigh"} and last_body()["model"] == SONNET
    api.reply_text("off")
    assert (
        run_cli(api, "-p", "hello", env={"MAX_THINKING_TOKENS": "0", "CLAUDE_CODE_EFFORT_LEVEL": "low"}).code
        == 0
    )
    assert last_body()["thinking"] == {"type": "between_tools"} and last_body()["output_config"] == {
        "effort": "low"
    }
    bad = run_cli(api, "-p", "hello", "--effort", "huge")
    assert bad.code == 2 and "--effort" in bad.stderr and "xhigh" in bad.stderr
    api.check()


def test_effort_command_sets_and_shows_it(api, tmp_path):
    session, _ = make_session(tmp_path, api, model=OPUS, model_explicit=True)
    assert commands.run(session, "/effort").text == "Effort: auto"
    assert commands.run(session, "/effort xhigh").text == "Effort: xhigh"
    assert not commands.run(session, "/effort huge").ok
    assert commands.run(session, "/model haiku").text.startswith(
        "Model set to claude-haiku-5-5 (haiku) · Haiku 5.5"
    )
    api.reply_text("ok")
    assert run_turn(session, "hello").stop_reason == "end_turn"
    body = api.message_requests[-1].body
    assert body["model"] == "claude-haiku-5-5" and body["output_config"] == {"effort": "xhigh"}
    api.check()


# --- the model's progress on screen ---------------------------------------------------------------------


def test_stream_json_shows_the_progress_between_tool_calls_as_text(api, run_cli, project):
    (project / "a.txt").write_text("alpha\n")
    api.add(Reply.tool("Read", {"file_path": str(project / "a.txt")}, text="First I will read a.txt."))
    api.add(Reply.tool("Bash", {"command": "echo checked"}, text="Now a quick check."))
    api.add(Reply.text("All done."))
    res = run_cli(api, "-p", "go", "--output-format", "stream-json", "--verbose")
    assert res.code == 0, res.stderr
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    said = [
        b["text"]
        for rec in lines
        if rec.get("type") == "assistant"
        for b in rec["message"]["content"]
        if b["type"] == "text"
    ]
    assert said == ["First I will read a.txt.", "Now a quick check.", "All done."]
    assert lines[-1]["result"] == "All done."
    api.check()  # the thinking blocks went back as they came: no violation
