"""What a Claude Code user expects at the edges: print mode's permission denials, and the REPL's
small edges (pipe input, the loopback fake API)."""

from __future__ import annotations

import io
import time

from agent import commands
from tests.test_commands import new_session
from tests.test_repl import repl_for
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
        deadline = time.monotonic() + 15
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


def wait_until(check, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.02)
