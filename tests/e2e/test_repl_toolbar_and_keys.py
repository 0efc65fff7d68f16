"""The REPL on a pipe input while it works: the toolbar (no /compact advice with compaction off, the
permission mode Shift+Tab cycles), /clear on a terminal, the todo list as a checklist, text typed while
the agent works, a running command's last lines and Esc stopping it. Against the fake Messages API."""

from __future__ import annotations

import io
import threading
import time

from tests.fakeapi import Reply, last_user_text
from tests.helpers.frontend import ESC, repl_for, wait_until
from tools.todo import RESULT

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
