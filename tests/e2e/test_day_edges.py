"""What a Claude Code user expects at the edges: print mode's permission denials, and the REPL's
small edges (pipe input, the loopback fake API)."""

from __future__ import annotations

import io
import os
import re
import stat
import threading
import time

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent import RESUME_PICK
from agent.cli import resume_pick
from agent.frontend import commands
from agent.frontend.repl import Repl
from agent.runtime import lifecycle
from agent.runtime.loop import run_turn
from compact.stages.snip import snip_id
from core.errors import SessionError
from core.messages import assistant, tool_result_block, tool_results, user_prompt
from tests.fakeapi import Reply, last_user_text
from tests.helpers.compaction import TEST_RUN, run_round
from tests.helpers.frontend import ESC, chat, new_session, repl_for
from tools.todo import RESULT


def test_print_mode_lists_permission_denials_in_the_json_result_and_one_stderr_line(
    fake_api, run_cli, project
):
    api = fake_api
    api.reply_tools(
        [
            ("Bash", {"command": "touch made.txt"}, "toolu_touch"),
            ("Read", {"file_path": str(project / "x.txt")}, "toolu_read"),
        ]
    )
    api.reply_text("I could not run it.")
    (project / "x.txt").write_text("x\n")
    res = run_cli(api, "-p", "make a file", "--output-format", "json")
    assert res.code == 0, res.stderr
    result = res.json()
    assert result["permission_denials"] == [
        {"tool_name": "Bash", "tool_use_id": "toolu_touch", "tool_input": {"command": "touch made.txt"}}
    ]
    [line] = [x for x in res.stderr.splitlines() if "Permission denied" in x]
    assert line.startswith("Permission denied for 1 tool call(s): Bash (")
    assert not (project / "made.txt").exists()

    api.reply_text("nothing to deny")
    clean = run_cli(api, "-p", "hello", "--output-format", "json")
    assert clean.json()["permission_denials"] == [] and "Permission denied" not in clean.stderr
    api.check()


BIG_USAGE = {
    "input_tokens": 165_000,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "output_tokens": 10,
}


def test_with_compaction_disabled_the_bar_does_not_advise_compact(fake_api, project):
    fake_api.reply_text("That was a lot.", usage=BIG_USAGE)
    with repl_for(fake_api, project, DISABLE_COMPACT="1") as d:
        d.type("read everything\r")
        d.wait_for("That was a lot.")
        d.wait_idle()
        [(style, text)] = d.repl._toolbar()
        assert "/compact" not in text and "/clear" in text and "remaining" in text


def test_clear_clears_the_screen_of_a_terminal(fake_api, project):
    with repl_for(fake_api, project) as d:
        d.repl.console.file = screen = io.StringIO()
        d.repl.console._force_terminal = True  # the pipe test's console stands in for a terminal
        d.type("/clear\r")
        d.wait_idle()
        deadline = time.monotonic() + 30
        while "Started a new session." not in screen.getvalue():
            assert time.monotonic() < deadline, screen.getvalue()
            time.sleep(0.02)
    assert "\x1b[2J" in screen.getvalue()


def test_init_is_not_taken_for_quit(fake_api, project):
    session = new_session(fake_api, project)
    assert "/quit" not in commands.run(session, "/init").text
    assert commands.run(session, "/contxt").text.endswith("Did you mean /context?")


def test_the_todo_list_shows_as_a_checklist_without_the_reminder_for_the_model(fake_api, project):
    todos = [
        {"content": "Write the parser", "activeForm": "Writing the parser", "status": "in_progress"},
        {"content": "Test it", "activeForm": "Testing it", "status": "pending"},
    ]
    fake_api.reply_tool("TodoWrite", {"todos": todos})
    fake_api.reply_text("Planned.")
    with repl_for(fake_api, project) as d:
        d.type("plan it\r")
        d.wait_for("Planned.")
        d.wait_idle()
    assert "☐ Writing the parser" in d.out and "☐ Test it" in d.out
    assert RESULT.split("{counts}")[0].strip()[:30] not in d.out  # the model's reminder stays with the model


SHIFT_TAB = "\x1b[Z"


def test_shift_tab_cycles_the_permission_mode_shown_under_the_input(fake_api, project):
    fake_api.reply_tool("Write", {"file_path": str(project / "a.txt"), "content": "new\n"})
    fake_api.reply_text("Written.")
    with repl_for(fake_api, project) as d:
        assert d.repl._toolbar() == ""
        d.type(SHIFT_TAB)
        wait_until(lambda: d.repl.session.permissions.mode == "acceptEdits")
        assert d.repl._toolbar() == [("class:mode", "⏵⏵ accept edits on (shift+tab to cycle)")]
        d.type("write a.txt\r")  # accepted without a question
        d.wait_for("Written.")
        d.wait_idle()
        assert "Allow?" not in d.out and (project / "a.txt").read_text() == "new\n"
        d.type(SHIFT_TAB)
        wait_until(lambda: d.repl.session.permissions.mode == "plan")
        assert d.repl._toolbar() == [("class:mode", "⏸ plan mode on (shift+tab to cycle)")]
        d.type(SHIFT_TAB)
        wait_until(lambda: d.repl.session.permissions.mode == "default")
        assert d.repl._toolbar() == ""


def wait_until(check, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.02)


def test_resume_without_an_id_opens_the_picker_and_a_unique_prefix_is_enough(fake_api, project):
    assert resume_pick(["--resume"]) == ["--resume", RESUME_PICK]
    assert resume_pick(["-r", "-p", "hi"]) == ["-r", RESUME_PICK, "-p", "hi"]
    assert resume_pick(["--resume", "abc", "hi"]) == ["--resume", "abc", "hi"]
    older = new_session(fake_api, project)
    chat(older, "the older one", "ok")
    newer = new_session(fake_api, project)
    chat(newer, "the newer one", "ok")
    settings = older.settings
    assert lifecycle.locate(settings, older.session_id[:8], False) == older.transcript_path
    twin = older.transcript_path.with_name(older.session_id[:8] + "-twin.jsonl")
    twin.write_bytes(older.transcript_path.read_bytes())
    with pytest.raises(SessionError, match="2 sessions start with .*give more of the id"):
        lifecycle.locate(settings, older.session_id[:8], False)
    twin.unlink()

    buf = io.StringIO()
    console = Console(file=buf, width=120, force_terminal=False, color_system=None)
    with create_pipe_input() as pipe:
        repl = Repl(
            settings, console, environ={**os.environ, **fake_api.env()}, input=pipe, output=DummyOutput()
        )
        pipe.send_text("2\r")  # the list is newest first: 2 is the older session
        repl.open(resume=RESUME_PICK)
    assert "  1. " in buf.getvalue() and "the newer one" in buf.getvalue()
    assert repl.session.session_id == older.session_id
    assert [m.text for m in repl.session.messages][:1] == ["the older one"]


def test_print_mode_needs_an_id_for_resume(fake_api, run_cli):
    res = run_cli(fake_api, "-p", "hi", "--resume")
    assert res.code == 2 and "--resume needs a session id" in res.stderr


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


def test_text_typed_while_the_agent_works_is_shown_then_sent(fake_api, project):
    release = threading.Event()

    def slow(body: dict) -> Reply:
        release.wait(15)
        return Reply.text("First done.")

    fake_api.on(lambda body: "slow please" in last_user_text(body), slow, once=True)
    fake_api.reply_text("Second done.")
    with repl_for(fake_api, project) as d:
        d.type("slow please\r")
        wait_until(lambda: d.repl.renderer._turn_since is not None)
        d.type("next onx\x7fe")  # a typo mended with backspace
        wait_until(lambda: "queued: next one" in d.repl.renderer.status_text())
        release.set()
        d.wait_for("First done.")
        d.wait_idle()
        assert d.repl.renderer.queued == ""
        d.type("\r")  # what was typed is in the input line
        d.wait_for("Second done.")
    assert last_user_text(fake_api.message_requests[-1].body).startswith("next one")


def test_a_running_command_shows_its_last_lines_and_ctrl_c_gives_the_model_what_it_printed(fake_api, project):
    command = (
        "for i in 1 2 3 4 5 6 7; do echo line$i; done; while [ ! -f go ]; do sleep 0.05; done; echo never"
    )
    fake_api.reply_tool("Bash", {"command": command})
    fake_api.reply_text("I see it stopped.")
    with repl_for(fake_api, project) as d:
        d.type("count\r")
        d.wait_for("Allow?")
        d.type("y\r")
        # the last five lines, live, while it runs
        wait_until(lambda: d.repl.renderer.live_lines() == [f"line{i}" for i in range(3, 8)])
        d.type(ESC)
        d.wait_for("Interrupted by user")
        d.wait_idle()
        assert d.repl.renderer.live_lines() == []
        d.type("what happened?\r")
        d.wait_for("I see it stopped.")
    [result] = [
        b
        for m in fake_api.message_requests[-1].body["messages"]
        for b in (m["content"] if isinstance(m["content"], list) else [])
        if b.get("type") == "tool_result"
    ]
    text = str(result["content"])
    assert "line1" in text and "line7" in text and "never" not in text


def test_the_snip_result_reports_what_the_request_loses(fake_api, project):
    session = new_session(fake_api, project)
    first = user_prompt("read the big log")
    session.add(first)
    use = {"type": "tool_use", "id": "toolu_big", "name": "Read", "input": {"file_path": "/p/big.log"}}
    session.add(assistant([use], model=session.model, usage={"input_tokens": 100, "output_tokens": 5}))
    session.add(tool_results([tool_result_block("toolu_big", "x" * 40_000)]))
    session.add(
        assistant(
            [{"type": "text", "text": "read it"}],
            model=session.model,
            usage={"input_tokens": 10_100, "output_tokens": 5},
        )
    )
    current = user_prompt("now drop that")
    session.add(current)
    session.conv.current_prompt_uuid = current.uuid
    session.conv.state.cleared.add("toolu_big")  # micro-compaction already cleared the big result
    full = sum(m.tokens for m in session.messages[:4])
    sent = sum(m.tokens for m in session.conv.view().messages[:4])
    assert sent < full / 10
    answer = session.tool_ctx.services["snip"]([snip_id(first.uuid)], "done with it")
    assert answer == f"Snipped 4 messages, freeing about {sent:,} tokens."


def test_a_paste_too_big_for_the_window_is_saved_and_the_note_counts_exactly(fake_api, project):
    session = new_session(fake_api, project, CLAUDE_CODE_AUTO_COMPACT_WINDOW="60000")
    budget = session.thresholds().auto_compact // 2
    small = "line of a log\n" * (budget * 2 // 14)  # about half the budget: sent whole
    fake_api.reply_text("read the small one")
    run_turn(session, small)
    assert last_user_text(fake_api.message_requests[-1].body).startswith(small.rstrip("\n"))
    huge = "".join(f"row {i:06d} of the paste\n" for i in range(5_000))  # 116,000 characters
    fake_api.reply_text("I will read the file")
    run_turn(session, huge)
    sent = last_user_text(fake_api.message_requests[-1].body)
    note = re.search(r"the ([\d,]+) characters after the first ([\d,]+) are not shown here", sent)
    assert note is not None and f"This message is {len(huge):,} characters long" in sent
    left_out, shown = (int(n.replace(",", "")) for n in note.groups())
    assert shown + left_out == len(huge) and sent.startswith(huge[:shown])
    [saved] = (session.session_dir / "pastes").iterdir()
    assert saved.read_text() == huge and str(saved) in sent
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    fake_api.check()


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


KEY = "sk-ant-test-PASTED-0123456789"


def test_a_saved_paste_never_holds_the_api_key(fake_api, project):
    """Issue 30: the key pasted into a huge prompt stayed in clear in the saved paste file."""
    session = new_session(fake_api, project, CLAUDE_CODE_AUTO_COMPACT_WINDOW="60000", ANTHROPIC_API_KEY=KEY)
    huge = f"export ANTHROPIC_API_KEY={KEY}\n" + "".join(f"row {i:06d} of the paste\n" for i in range(5_000))
    fake_api.reply_text("I will read the file")
    run_turn(session, huge)
    [saved] = (session.session_dir / "pastes").iterdir()
    text = saved.read_text()
    assert KEY not in text and "row 004999 of the paste" in text and "ANTHROPIC_API_KEY=" in text
    fake_api.check()


def test_a_server_error_echoing_the_key_is_shown_without_it(fake_api, run_cli, project):
    """Issue 30: a server's error message that echoed the key was printed on stderr as it was."""
    fake_api.error(400, "invalid_request_error", f"bad header x-api-key: {KEY}")
    res = run_cli(fake_api, "-p", "hi", env={"ANTHROPIC_API_KEY": KEY})
    assert res.code != 0 and "bad header x-api-key: [redacted" in res.stderr, res.stderr
    assert KEY not in res.stderr and KEY not in res.stdout
