"""The REPL driven through prompt_toolkit's pipe input, against the fake Messages API on loopback.

The REPL runs in a thread; the test types into the pipe in stages and waits (with a deadline) for the
rendered output, which goes to a StringIO console without colour, so whole strings can be compared.
"""

from __future__ import annotations

import stat
import threading
import time

from prompt_toolkit.document import Document

from agent.frontend.repl import SlashCompleter, history_file
from tests.fakeapi import Reply, last_user_text
from tests.helpers.frontend import CTRL_C, CTRL_D, ESC, banner, chat, new_session, repl_for


def test_a_message_gets_the_streamed_reply_then_exit(fake_api, project):
    fake_api.reply_text("Hello there, human. How can I help?")
    with repl_for(fake_api, project) as d:
        d.type("hi there\r")
        d.wait_for("How can I help?")
        d.type("/exit\r")
        assert d.finish() == 0
    assert d.out == banner(d.repl, project) + "● Hello there, human. How can I help?\n"
    [request] = fake_api.message_requests
    assert last_user_text(request.body).startswith("hi there")
    fake_api.check()


def test_help_context_and_an_unknown_command(fake_api, project):
    with repl_for(fake_api, project) as d:
        d.type("/help\r")
        d.wait_for("Ctrl-D exits")
        d.type("/context\r")
        d.wait_for("Autocompact buffer")
        d.type("/contxt\r")
        d.wait_for("Did you mean")
        d.type("/quit\r")
        assert d.finish() == 0
    out = d.out.removeprefix(banner(d.repl, project))
    assert out.startswith("Commands:\n  /help ")
    context = out[out.index("Context usage") :].splitlines()
    assert context[1].startswith("■ ") and "tokens (" in context[1]
    for name in (
        "System prompt",
        "System tools",
        "Memory files",
        "Messages",
        "Free space",
        "Autocompact buffer",
    ):
        assert any(f" {name}: " in line for line in context), name
    assert out.endswith("Unknown command /contxt. Did you mean /context?\n")
    assert fake_api.message_requests == []  # /context is never sent to the model


def test_permission_question_yes_and_no(fake_api, project):
    fake_api.reply_tool("Bash", {"command": "echo hi > hi.txt && cat hi.txt"})  # (only looking: no question)
    fake_api.reply_text("Ran it.")
    fake_api.reply_tools(
        [
            ("Bash", {"command": "rm -rf build", "description": "Remove the build"}),
            ("Bash", {"command": "rm -rf dist"}),
        ]
    )
    with repl_for(fake_api, project) as d:
        d.type("say hi\r")
        d.wait_for("Allow?")
        d.type("y\r")
        d.wait_for("Ran it.")
        d.wait_idle()
        d.type("clean up\r")
        d.wait_for("rm -rf build")
        d.type("n\r")
        d.wait_for("→ No")
        d.wait_idle()  # a "no" ends the turn: no further model call, the next step is the user's
        d.type("/exit\r")
        assert d.finish() == 0
    # the call's header once, above the question; a box only when it says more than the header
    question = "  Allow? [y]es / [n]o / [a]lways for this session (adds Bash({}:*)) · Enter: no\n"
    assert d.out == banner(d.repl, project) + (
        "● Bash(echo hi > hi.txt && cat hi.txt)\n" + question.format("echo") + "  → Yes\n"
        "  ⎿  hi\n"
        "● Ran it.\n"
        "● Bash(rm -rf build)\n"
        "  ╭────────────────────╮\n"
        "  │ rm -rf build       │\n"
        "  │ # Remove the build │\n"
        "  ╰────────────────────╯\n" + question.format("rm") + "  → No\n"
    )
    assert len(fake_api.message_requests) == 3
    # both calls of the message are answered (the second never asked), so the next request is valid
    declined, skipped = d.repl.session.messages[-1].tool_results
    assert declined["is_error"] and "wait for the user" in str(declined["content"])
    assert skipped["is_error"] and "not run" in str(skipped["content"]).lower()
    fake_api.check()


def test_a_call_that_would_fail_anyway_fails_before_asking(fake_api, project):
    (project / "app.py").write_text("x = 1\n")
    fake_api.reply_tool("Write", {"file_path": str(project / "app.py"), "content": "z\n"})
    fake_api.reply_tool(
        "Edit", {"file_path": str(project / "app.py"), "old_string": "x = 1", "new_string": "x = 2"}
    )
    fake_api.reply_tool("Read", {"file_path": str(project / "app.py")})
    fake_api.reply_tool(
        "Edit", {"file_path": str(project / "app.py"), "old_string": "y = 1", "new_string": "y = 2"}
    )
    fake_api.reply_text("I could not change it.")
    with repl_for(fake_api, project) as d:
        d.type("change it\r")
        d.wait_for("I could not change it.")
        d.type("/exit\r")
        assert d.finish() == 0
    assert "Allow?" not in d.out  # the Write and Edit of a file not read, and the Edit of text not there
    shown = " ".join(d.out.split())
    assert shown.count("has not been read yet") == 2 and "old_string was not found" in shown
    results = [r.body["messages"][-1]["content"][0] for r in fake_api.message_requests[1:]]
    assert [r.get("is_error", False) for r in results] == [True, True, False, True]
    assert (project / "app.py").read_text() == "x = 1\n"
    fake_api.check()


def test_esc_interrupts_a_turn_and_the_next_request_is_valid(fake_api, project):
    started, released = threading.Event(), threading.Event()

    def slow(body: dict) -> Reply:
        started.set()
        released.wait(10)  # held until the turn was interrupted
        return Reply.text("this reply comes too late to be shown in full")

    fake_api.on(lambda body: "slow please" in last_user_text(body), slow, once=True)
    fake_api.reply_text("Back again.")
    with repl_for(fake_api, project) as d:
        d.type("slow please\r")
        assert started.wait(30)
        d.type(ESC)
        d.wait_for("Interrupted by user")
        released.set()
        d.wait_idle()
        d.type("and now?\r")
        d.wait_for("Back again.")
        d.type("/exit\r")
        assert d.finish() == 0
    assert "  ⎿  Interrupted by user\n" in d.out
    assert fake_api.violations == []
    assert "and now?" in last_user_text(fake_api.message_requests[-1].body)


def test_multiline_input_history_file_and_exit_keys(fake_api, project):
    fake_api.reply_text("Two lines received.")
    with repl_for(fake_api, project) as d:
        d.type("line one" + ESC + "\rline two\r")  # Esc then Enter adds a line
        d.wait_for("Two lines received.")
        d.wait_idle()
        d.type(CTRL_C)
        d.wait_for("Press Ctrl-C again to exit")
        d.type(CTRL_C)
        assert d.finish() == 0
    assert last_user_text(fake_api.message_requests[0].body).startswith("line one\nline two")
    path = history_file(d.repl.settings)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert "+line one\n+line two\n" in path.read_text()

    with repl_for(fake_api, project) as d2:
        d2.type(CTRL_D)
        assert d2.finish() == 0


def test_warning_bar_after_a_big_turn(fake_api, project):
    fake_api.reply_text(
        "That was a lot.",
        usage={
            "input_tokens": 150_000,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 10,
        },
    )
    with repl_for(fake_api, project) as d:
        assert d.repl._toolbar() == ""
        d.type("read everything\r")
        d.wait_for("That was a lot.")
        d.wait_idle()
        # 200K window: T = 167,000; 150,010 tokens leave round(16,990 / 167,000 × 100) = 10%
        assert d.repl._toolbar() == [("class:warning", "Context left until auto-compact: 10%")]


def test_clear_then_resume_by_number(fake_api, project):
    fake_api.reply_text("Noted: 42.")
    with repl_for(fake_api, project) as d:
        d.type("remember 42\r")
        d.wait_for("Noted: 42.")
        d.wait_idle()
        first = d.repl.session.session_id
        d.type("/clear\r")
        d.wait_for("Started a new session.")
        d.wait_idle()
        assert d.repl.session.session_id != first and d.repl.session.messages == []
        d.type("/resume\r")
        d.wait_for("Resume one with")
        d.type("1\r")  # the picker reads it, drawn yet or not: keys wait in the input (type-ahead)
        d.wait_for("Resumed session")
        d.wait_idle()
        assert d.repl.session.session_id == first
        assert [m.text for m in d.repl.session.messages] == ["remember 42", "Noted: 42."]
    assert f"Resumed session {first} (2 messages).\n" in d.out


def test_first_prompt_from_the_command_line(fake_api, project):
    fake_api.reply_text("Answering the first prompt.")
    with repl_for(fake_api, project, first="what is here?") as d:
        d.wait_for("Answering the first prompt.")
        d.type("/exit\r")
        assert d.finish() == 0
    assert d.out == banner(d.repl, project) + "> what is here?\n● Answering the first prompt.\n"
    assert last_user_text(fake_api.message_requests[0].body).startswith("what is here?")


def test_resume_shows_the_last_exchanges_its_message_count_and_the_whole_cost(fake_api, project):
    earlier = new_session(fake_api, project)
    for n in range(1, 5):
        chat(earlier, f"question {n}", f"answer {n}" + "\nmore" * (6 if n == 4 else 0), tokens=1000)
    with repl_for(fake_api, project, resume=earlier.session_id) as d:
        d.type("/cost\r")
        d.wait_for("Usage:")
        d.type("/resume\r")
        d.wait_for("Resume one with")
        d.type("\r")  # stay here (type-ahead, like the number above)
        d.wait_idle()
        d.type("/exit\r")
        assert d.finish() == 0
    out = d.out.removeprefix(banner(d.repl, project))
    # the last three exchanges, long replies clipped; then the count /resume's list gives too
    assert out.startswith(
        "> question 2\n● answer 2\n> question 3\n● answer 3\n> question 4\n● answer 4\n  more\n  more\n  more\n"
        "  … +3 lines\n"
        f"Resumed session {earlier.session_id} (8 messages).\n"
    )
    assert " · 8 messages · question 1 · " in out
    # four replies of 1,000 input and 30 output tokens each, all recorded before this process
    assert "Usage: 4,000 input · 120 output · " in out
    assert fake_api.message_requests == []


def test_an_edit_after_a_read_in_the_same_message_is_asked_not_failed_early(fake_api, project):
    path = str(project / "app.py")
    (project / "app.py").write_text("x = 1\n")
    fake_api.reply_tools(
        [
            ("Read", {"file_path": path}),
            ("Edit", {"file_path": path, "old_string": "x = 1", "new_string": "x = 2"}),
        ]
    )
    fake_api.reply_text("Changed.")
    with repl_for(fake_api, project) as d:
        d.type("read and change it\r")
        d.wait_for("Allow?")  # the Read runs before the Edit, so the Edit is not refused ahead
        d.type("y\r")
        d.wait_for("Changed.")
        d.type("/exit\r")
        assert d.finish() == 0
    assert (project / "app.py").read_text() == "x = 2\n"
    fake_api.check()


def test_a_resumed_session_shows_its_warning_at_once(fake_api, project):
    earlier = new_session(fake_api, project)
    chat(earlier, "read the whole repository", "Done reading.", tokens=150_000)
    with repl_for(fake_api, project, resume=earlier.session_id) as d:
        deadline = time.monotonic() + 30
        while d.repl._toolbar() == "":
            assert time.monotonic() < deadline, "no warning bar"
            time.sleep(0.02)
        # 150,030 tokens: round((167,000 − 150,030) / 167,000 × 100) = 10
        assert d.repl._toolbar() == [("class:warning", "Context left until auto-compact: 10%")]


def test_with_auto_compact_off_the_bar_tells_how_close_the_limit_is_and_context_has_no_buffer(
    fake_api, project
):
    fake_api.reply_text(
        "That was a lot.",
        usage={
            "input_tokens": 165_000,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 10,
        },
    )
    # no session notes: at 165K their background updates would ask the fake for replies this test has not
    # scripted (and, on a loaded machine, before the test ends)
    with repl_for(fake_api, project, DISABLE_AUTO_COMPACT="1", COMPACT_AGENT_SESSION_MEMORY="0") as d:
        d.type("read everything\r")
        d.wait_for("That was a lot.")
        d.wait_idle()
        # E = 180,000 takes T's place: round((180,000 − 165,010) / 180,000 × 100) = 8
        assert d.repl._toolbar() == [
            ("class:warning", "Context low (8% remaining) · Run /compact to compact & continue")
        ]
        d.type("/context\r")
        d.wait_for("Free space")
        d.wait_idle()
    assert "Autocompact buffer" not in d.out and "Messages: " in d.out


def test_ctrl_o_shows_the_last_summary_and_keeps_what_was_typed(fake_api, project):
    fake_api.reply_text("Got the draft.")
    with repl_for(fake_api, project) as d:
        d.type("a draft\x0f")
        d.wait_for("No compaction in this session yet.")
        d.wait_idle()
        d.type("\r")  # the draft is back in the input line
        d.wait_for("Got the draft.")
        d.type("/exit\r")
        assert d.finish() == 0
    assert last_user_text(fake_api.message_requests[0].body).startswith("a draft")


def test_slash_completion():
    found = [c.text for c in SlashCompleter().get_completions(Document("/co"), None)]
    assert found == ["/compact", "/config", "/context", "/cost"]
    assert list(SlashCompleter().get_completions(Document("/compact ke"), None)) == []


def test_the_sdk_starts_loading_once_the_user_is_quiet_never_while_a_prompt_is_sent(
    fake_api, project, monkeypatch
):
    """Issue 41 item 5: a prompt typed the moment the REPL appears reached the server 2-5x later than the
    same prompt typed once the REPL had sat idle (benchmarks/startup_repl.py), the SDK's import taking
    the interpreter from it. The import now starts once no key has come for QUIET seconds (or LATEST
    seconds after the prompt was drawn, however fast the keys), and never within QUIET seconds of a
    prompt's request being prepared. (QUIET and LATEST larger here, so a loaded machine can't blur them.)"""
    from agent.frontend import repl as repl_module

    monkeypatch.setattr(repl_module, "QUIET", 1.0)
    monkeypatch.setattr(repl_module, "LATEST", 3.0)
    with repl_for(fake_api, project) as d:
        d.repl.hold_imports_while_typing()
        started: list[float] = []
        begun = time.monotonic()
        d.repl.when_quiet(lambda: started.append(time.monotonic()))
        # keys every 0.1 s, never quiet: typed through the pipe as a user types them, so the prompt's own
        # loop inserts them (inserted from this thread, a key that came before the prompt was running found
        # no loop for the buffer's validation: "no running event loop", 1 run in ~10 of the whole suite)
        while not started and time.monotonic() - begun < 10:
            d.type("x")
            time.sleep(0.1)
        assert started and started[0] - begun >= 2.95  # not before LATEST, keys or not

        started.clear()
        begun = time.monotonic()
        d.repl.when_quiet(lambda: started.append(time.monotonic()))
        time.sleep(0.5)
        sent = time.monotonic()
        d.repl.sending()  # a prompt's request is prepared: QUIET seconds more from now
        while not started and time.monotonic() - begun < 10:
            time.sleep(0.05)
        assert started and started[0] - sent >= 0.95  # (the clocks' granularity)
        d.type("\x15")  # Ctrl-U: the typed x's go before the driver's /exit
