"""Extended thinking with a budget (issue 22 §1), as the 4.x models take it: Claude Code's controls,
thinking blocks kept valid through tool loops, context management, the REPL's toggle and display, and the
loopback fake checking thinking blocks and their signatures as the real API does. Every test here pins a
4.x model and the fake's 4.x profile (the effort models: tests/agent/runtime/test_effort.py)."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import anthropic
import pytest
from rich.console import Console

from agent.frontend.ui import Renderer
from agent.runtime.thinking import DEFAULT_BUDGET, budget_for, fit, prompt_budget, supports_thinking
from core.events import MessageRecorded, ThinkingDelta
from core.messages import assistant
from core.model import Request
from tests.fakeapi import FakeAPI, Reply, thinking_block
from tests.helpers.frontend import repl_for
from tests.helpers.transcripts import records, transcripts

MODEL_4X = "claude-sonnet-4-5"
PIN = {"ANTHROPIC_MODEL": MODEL_4X}


pytestmark = pytest.mark.fake_api(profile="4.x")  # the budget rules, for the 4.x models these tests pin


@pytest.fixture
def run_cli(run_cli):
    """The real CLI on a 4.x model."""
    return lambda api, *args, env=None, **kw: run_cli(api, *args, env={**PIN, **(env or {})}, **kw)


THOUGHT = "The user wants the file.\nI should read it first.\nThen answer.\nLine four.\nLine five."


def think_then(reply: Reply, thought: str = THOUGHT) -> Reply:
    return Reply([thinking_block(thought), *reply.content])


# --- the controls ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "budget"),
    [
        ("fix it", None),
        ("something is off, think about it", 4_000),
        ("Think hard about the parser", 10_000),
        ("megathink: the cache", 10_000),
        ("think harder please", DEFAULT_BUDGET),
        ("ULTRATHINK the design", DEFAULT_BUDGET),
        ("thinking blocks are fine", None),
    ],
)
def test_words_in_a_prompt_raise_the_budget(prompt, budget):
    assert prompt_budget(prompt) == budget


def test_budget_rules():
    assert budget_for(enabled=False, configured=None, prompt=None) is None
    assert budget_for(enabled=True, configured=None, prompt=None) == DEFAULT_BUDGET
    assert budget_for(enabled=True, configured=2048, prompt=4000) == 4000  # words raise it
    assert budget_for(enabled=True, configured=20000, prompt=4000) == 20000  # never lower it
    assert fit(31_999, 32_000, 64_000) == (31_999, 36_095)  # room for an answer where the model allows
    assert fit(31_999, 8_192, 8_192) == (8_191, 8_192)  # else the budget is cut below max_tokens
    assert fit(4_000, 1_000, 1_000) is None  # no valid budget fits
    assert not supports_thinking("claude-3-5-sonnet-latest") and supports_thinking("claude-sonnet-4-5")


def test_request_params_keep_the_apis_rules():
    think = {"type": "enabled", "budget_tokens": 5_000}
    edits = {"context_management": {"edits": [{"type": "clear_thinking_20251015"}, {"type": "x"}]}}
    req = Request(MODEL_4X, [], [], [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], 4_000)
    req.thinking, req.extra_body = think, edits
    assert req.params()["thinking"]["budget_tokens"] == 3_999  # max_tokens shrank after an overflow
    req.max_tokens = 1_000
    params = req.params()
    assert "thinking" not in params and params["extra_body"]["context_management"]["edits"] == [{"type": "x"}]
    req.max_tokens, req.tool_choice = 10_000, {"type": "any"}
    assert "thinking" not in req.params()


# --- the fake checks thinking as the real API does -------------------------------------------------------


def test_the_fake_refuses_altered_or_dropped_thinking_and_bad_parameters():
    with FakeAPI(profile="4.x") as api:
        api.expect_refusals()  # the refusals are what this test shows
        client = anthropic.Anthropic(base_url=api.url, api_key="k", max_retries=0)
        api.add(think_then(Reply.tool("Read", {"file_path": "/x"}, id="toolu_1")))
        tools = [{"name": "Read", "description": "r", "input_schema": {"type": "object"}}]
        base = {"model": "claude-sonnet-4-5", "max_tokens": 4000, "tools": tools}
        thinking = {"type": "enabled", "budget_tokens": 2000}
        first = client.messages.create(
            **base, thinking=thinking, messages=[{"role": "user", "content": "go"}]
        )
        [block, use] = [b.model_dump(exclude_none=True) for b in first.content]
        assert block["signature"].startswith("sig_")
        result = {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}],
        }

        def send(content, **extra):  # type: ignore[no-untyped-def]
            messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": content}, result]
            return client.messages.create(**{**base, "thinking": thinking, **extra}, messages=messages)

        api.reply_text("ok")
        assert send([block, use]).content[0].text == "ok"  # unchanged: accepted
        refusals = {
            "signature": [{**block, "signature": block["signature"][:-2] + "zz"}, use],
            "text": [{**block, "thinking": block["thinking"] + " (edited)"}, use],
            "dropped": [use],
            "redacted": [{"type": "redacted_thinking", "data": "forged"}, use],
        }
        for content in refusals.values():
            with pytest.raises(anthropic.BadRequestError):
                send(content)
        for extra in (
            {"thinking": {"type": "enabled", "budget_tokens": 1000}},
            {"thinking": {"type": "enabled", "budget_tokens": 4000}},
            {"tool_choice": {"type": "any"}},
            {"extra_body": {"temperature": 0.5}},
        ):
            with pytest.raises(anthropic.BadRequestError):
                send([block, use], **extra)
        refused = {v.split(":")[0] for v in api.violations}  # "POST /v1/messages (request N)"
        assert len(refused) == 8 and all(r.status == 400 for r in api.message_requests[2:])
        assert any("Invalid `signature`" in v for v in api.violations)
        assert any("must start with a thinking block" in v for v in api.violations)


# --- end to end -------------------------------------------------------------------------------------------


def test_max_thinking_tokens_thinks_and_keeps_the_blocks_through_a_tool_loop(fake_api, run_cli, project):
    (project / "notes.txt").write_text("alpha\n")
    fake_api.add(think_then(Reply.tool("Read", {"file_path": str(project / "notes.txt")})))
    fake_api.add(think_then(Reply.text("It says alpha."), "Now answer."))
    res = run_cli(fake_api, "-p", "what is in notes.txt?", env={"MAX_THINKING_TOKENS": "2048"})
    assert res.code == 0 and res.stdout == "It says alpha.\n", res.stderr
    first, second = fake_api.message_requests
    assert first.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first.body["max_tokens"] > 2048
    sent = second.body["messages"][1]["content"][0]
    assert sent["type"] == "thinking" and sent["thinking"] == THOUGHT and sent["signature"].startswith("sig_")
    fake_api.check()  # no violation: the signature verified, the loop's thinking came back first


def test_always_thinking_setting_words_and_off_by_default(fake_api, run_cli, project, isolated_env):
    fake_api.reply_text("plain")
    assert run_cli(fake_api, "-p", "hello").code == 0
    assert "thinking" not in fake_api.message_requests[-1].body
    fake_api.add(think_then(Reply.text("hard")))
    assert run_cli(fake_api, "-p", "think hard about this").code == 0
    assert fake_api.message_requests[-1].body["thinking"]["budget_tokens"] == 10_000
    (isolated_env / ".claude").mkdir()
    (isolated_env / ".claude" / "settings.json").write_text(json.dumps({"alwaysThinkingEnabled": True}))
    fake_api.add(think_then(Reply.text("always")))
    assert run_cli(fake_api, "-p", "hello").code == 0
    assert fake_api.message_requests[-1].body["thinking"]["budget_tokens"] == DEFAULT_BUDGET
    fake_api.reply_text("off")
    assert run_cli(fake_api, "-p", "hello", env={"MAX_THINKING_TOKENS": "0"}).code == 0
    assert "thinking" not in fake_api.message_requests[-1].body
    bad = run_cli(fake_api, "-p", "hello", env={"MAX_THINKING_TOKENS": "500"})
    assert bad.code == 2 and "MAX_THINKING_TOKENS" in bad.stderr and "1024" in bad.stderr
    fake_api.check()


def test_context_editing_clears_older_thinking_and_a_summary_reads_none(fake_api, run_cli, project):
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"contextEditing": True}))
    env = {"MAX_THINKING_TOKENS": "4096"}
    # a 4.x model: its earlier thinking is not bound to a prefix (the 5.5 family's summary keeps it)
    fake_api.add(think_then(Reply.text("first answer"), "SECRET-REASONING-MARK"))
    assert run_cli(fake_api, "-p", "one", "--model", "claude-sonnet-4-5", env=env).code == 0
    # a second turn with a long output: something for /compact to take away (else nothing to compact)
    (project / "log.txt").write_text("".join(f"line {i} of an old log\n" for i in range(600)))
    fake_api.add(Reply.tool("Read", {"file_path": str(project / "log.txt")}))
    fake_api.add(Reply.text("counted"))
    assert run_cli(fake_api, "-p", "count", "--continue", "--model", "claude-sonnet-4-5", env=env).code == 0
    body = fake_api.message_requests[0].body
    edits = body["context_management"]["edits"]
    assert edits[0]["type"] == "clear_thinking_20251015" and edits[1]["type"].startswith("clear_tool_uses")
    fake_api.reply_text("<analysis>a</analysis><summary>the summary</summary>")
    res = run_cli(fake_api, "-p", "/compact", "--continue", "--model", "claude-sonnet-4-5", env=env)
    assert res.code == 0, res.stderr
    summary = fake_api.message_requests[-1].body
    assert "SECRET-REASONING-MARK" not in json.dumps(summary) and "thinking" not in summary
    assert "first answer" in json.dumps(summary)
    fake_api.check()


def test_thinking_is_counted_in_the_context_estimate():
    from core.tokens import estimate_blocks

    text = [{"type": "text", "text": "answer"}]
    assert estimate_blocks([thinking_block("x " * 4000), *text]) > estimate_blocks(text) + 1000


# --- the REPL ---------------------------------------------------------------------------------------------


def test_thinking_is_shown_dimmed_and_folded():
    buf = io.StringIO()
    renderer = Renderer(Console(file=buf, width=80, force_terminal=False, color_system=None), spinner=False)
    for part in (
        "The user wants the file.\nI should ",
        "read it first.\nThen answer.\nLine four.\nLine five.",
    ):
        renderer(ThinkingDelta(part))
    renderer(MessageRecorded(assistant([thinking_block(THOUGHT), {"type": "text", "text": "hi"}])))
    out = buf.getvalue()
    assert out.startswith(
        "✻ Thinking…\n  The user wants the file.\n  I should read it first.\n  Then answer.\n"
    )
    assert "Line four" not in out and "2 more lines of thinking" in out


def test_tab_on_an_empty_line_toggles_thinking(fake_api, project: Path):
    fake_api.reply_text("not thinking")
    fake_api.add(think_then(Reply.text("thinking now")))
    with repl_for(fake_api, project, **PIN) as d:
        assert d.repl.session.thinking_on is False
        d.type("hello\r")
        d.wait_for("not thinking")
        d.wait_idle()
        d.type("\t")
        deadline = time.monotonic() + 30  # the key is handled by the prompt: poll for its effect
        while not d.repl.session.thinking_on:
            assert time.monotonic() < deadline, "Tab did not turn thinking on"
            time.sleep(0.02)
        d.type("again\r")
        d.wait_for("thinking now")
        d.wait_for("✻ Thinking…")
    first, second = fake_api.message_requests
    assert "thinking" not in first.body and second.body["thinking"]["budget_tokens"] == DEFAULT_BUDGET
    fake_api.check()


def test_context_shows_what_thinking_takes(fake_api, tmp_path):
    from agent.frontend import commands
    from agent.runtime.loop import run_turn
    from tests.helpers.session import make_session

    session, _ = make_session(
        tmp_path, fake_api, max_thinking_tokens=2048, model=MODEL_4X, model_explicit=True
    )
    fake_api.add(think_then(Reply.text("answer"), "pondering " * 800))
    assert run_turn(session, "hello").stop_reason == "end_turn"
    assert fake_api.message_requests[0].body["thinking"]["budget_tokens"] == 2048
    text = commands.run(session, "/context").text
    assert "Of the messages, extended thinking: " in text
    assert commands.thinking_tokens(session) > 1000
    fake_api.check()


# --- issue 30: a secret inside a signed block, an unsigned block on disk ------------------------------

KEY = "sk-ant-test-SECRET-0123456789"


def test_a_thinking_block_holding_the_key_is_left_out_whole_and_the_session_goes_on(
    fake_api, run_cli, project, isolated_env
):
    """The key inside a signed thinking block used to be redacted on disk, which broke its signature: every
    --continue after was refused. Now the block is left out whole (with every earlier message's thinking,
    oldest first), nothing on disk holds the key, and the next run is accepted."""
    env = {"ANTHROPIC_API_KEY": KEY, "MAX_THINKING_TOKENS": "2048"}
    fake_api.add(think_then(Reply.text("first answer"), "An earlier thought, kept on disk."))
    fake_api.add(think_then(Reply.text("second answer"), f"The key is {KEY}, as the env said."))
    fake_api.reply_text("third answer")
    assert run_cli(fake_api, "-p", "one", env=env).code == 0
    assert run_cli(fake_api, "--continue", "-p", "two", env=env).code == 0
    [path] = transcripts(isolated_env)
    assert KEY not in path.read_text()
    dropped = [r for r in records(path) if r.get("thinkingDropped")]
    assert len(dropped) == 1 and all(b["type"] != "thinking" for b in dropped[0]["message"]["content"])
    res = run_cli(fake_api, "--continue", "-p", "three", env=env)
    assert (res.code, res.stdout) == (0, "third answer\n"), res.stderr
    last = fake_api.message_requests[-1].body
    assert not any(
        b.get("type") == "thinking" for m in last["messages"] for b in m["content"] if isinstance(b, dict)
    )
    assert KEY not in json.dumps(last)
    fake_api.check()  # no refusal: nothing altered was sent back


def test_an_unsigned_thinking_block_on_disk_never_breaks_the_session(
    fake_api, run_cli, project, isolated_env
):
    """A crash mid-stream can leave a thinking block without its signature; sent back, every request would
    be refused. The loader leaves it out, and the thinking before it (oldest first)."""
    env = {"MAX_THINKING_TOKENS": "2048"}
    fake_api.add(think_then(Reply.text("first answer"), "thought one"))
    fake_api.add(think_then(Reply.text("second answer"), "thought two"))
    fake_api.add(think_then(Reply.text("third answer"), "thought three"))
    fake_api.reply_text("fourth answer")
    assert run_cli(fake_api, "-p", "one", env=env).code == 0
    assert run_cli(fake_api, "--continue", "-p", "two", env=env).code == 0
    assert run_cli(fake_api, "--continue", "-p", "three", env=env).code == 0
    [path] = transcripts(isolated_env)
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if "thought two" in line:  # the middle answer's block loses its signature
            rec = json.loads(line)
            for b in rec["message"]["content"]:
                b.pop("signature", None)
            lines[i] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    res = run_cli(fake_api, "--continue", "-p", "four", env=env)
    assert (res.code, res.stdout) == (0, "fourth answer\n"), res.stderr
    sent = [
        b.get("thinking")
        for m in fake_api.message_requests[-1].body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "thinking"
    ]
    assert sent == ["thought three"]  # the unsigned block and the one before it are gone; the later kept
    fake_api.check()
