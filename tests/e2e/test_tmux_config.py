"""/config in a real terminal: changing settings through its rows (saved 0600, read back at the next
start) and its lines laid out for 80 and 160 columns, never wrapped by the terminal. The real REPL in
tmux against the fake Messages API."""

from __future__ import annotations

import json
import re

import pytest


def test_config_changes_settings_through_its_rows_and_keeps_them(agent_in_tmux, fake_api, isolated_env):  # noqa: F811
    """Issue 41 item 8: /config asks which setting and its value, as every question is asked; the value
    goes to the user's settings file (0600) and into the session, and the next start reads it back."""
    pane = agent_in_tmux(width=80)
    pane.type("/config")
    screen = pane.wait_for(r"Change which setting\? 1-7 or a name · Enter: none")
    assert "Change these here (saved to ~/.compact-agent/settings.json, yours):" in screen
    pane.wait_answer()
    pane.type("2")
    pane.wait_for(r"autoCompactEnabled \(now on\): on \| off\? · Enter: keep it")
    pane.wait_answer()
    pane.type("off")
    pane.wait_for(r"autoCompactEnabled set to off \(saved to ~/.compact-agent/settings.json\)\.")
    pane.wait_prompt()
    pane.type("/config effortLevel max")
    pane.wait_for(r"effortLevel set to max")
    pane.wait_prompt()
    path = isolated_env / ".compact-agent" / "settings.json"
    assert json.loads(path.read_text()) == {"autoCompactEnabled": False, "effortLevel": "max"}
    assert path.stat().st_mode & 0o777 == 0o600
    pane.type("/context")  # the session compacts no more on its own: the bar says so
    screen = pane.wait_for(r"Context usage")
    pane.wait_prompt()
    pane.type("/exit")
    pane.wait_exit()

    pane = agent_in_tmux(width=80)
    pane.type("/config")
    screen = pane.wait_for(r"Change which setting\?")
    pane.wait_answer()
    pane.keys("Enter")
    pane.wait_prompt()
    assert re.search(r"  autoCompactEnabled +off +\(~/\.compact-agent/settings\.json\)", screen), screen
    assert re.search(r"  2\. autoCompactEnabled +off +on \| off", screen)
    assert re.search(r"  4\. effortLevel +max ", screen)


@pytest.mark.parametrize("width", [80, 160])
def test_config_is_laid_out_for_the_terminal_never_wrapped_by_it(
    agent_in_tmux,  # noqa: F811 - the fixture imported above
    fake_api,
    isolated_env,
    width,
):
    """Issue 41 item 6 (what its third round left): every line of /config fits the terminal, at 80 and at
    160 columns; a source goes under its value when both don't fit, a path too long for its column loses
    its middle (never its end), and the prose and the list of values break between words."""
    memory = isolated_env / "memory-of-the-widget-project" / "kept-apart-from-its-repository"
    shown = "~/memory-of-the-widget-project/kept-apart-from-its-repository"  # under home: ~/…
    home = isolated_env / ".compact-agent"
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"autoMemoryDirectory": str(memory)}))
    pane = agent_in_tmux(width=width)
    pane.type("/config")
    screen = pane.wait_for(r"Change which setting\? 1-7 or a name · Enter: none")
    pane.wait_answer()
    pane.keys("Enter")
    pane.wait_prompt()
    said = screen[screen.index("> /config") : screen.index("Change which setting?")]
    lines = said.splitlines()
    # capture-pane -J joins what the terminal wrapped: a longer line is one the terminal broke
    assert all(len(line) <= width for line in lines), "\n".join(ln for ln in lines if len(ln) > width)
    words = " ".join(said.split())
    assert (
        "Values without a source are the defaults. Change them in ~/.claude/settings.json or "
        "~/.compact-agent/settings.json (yours), .claude/settings.json (the project's), or the environment."
    ) in words
    row = next(i for i, line in enumerate(lines) if line.startswith("  autoMemoryDirectory "))
    effort = next(i for i, line in enumerate(lines) if line.startswith("  4. effortLevel "))
    if width == 160:  # the whole path, its source beside it; the values on one line
        assert lines[row].endswith(f"  {shown}  (~/.compact-agent/settings.json)"), lines[row]
        assert lines[effort].endswith("auto               low | medium | high | xhigh | max | auto")
    else:  # the path's end kept, its source under it, in the value's column
        value_at = lines[row].index("~/memory-of")
        assert "…" in lines[row] and lines[row].endswith("/kept-apart-from-its-repository"), lines[row]
        assert lines[row + 1] == " " * value_at + "(~/.compact-agent/settings.json)"
        assert lines[effort].endswith("low | medium | high | xhigh |")
        assert lines[effort + 1].strip() == "max | auto"
        assert lines[effort + 1].index("max") == lines[effort].index("low")
    assert "  COMPACT_AGENT_HOME" in said and "~/.compact-agent  (env COMPACT_AGENT_HOME)" in said
    assert str(isolated_env) not in said  # a path under home as ~/…, as on the rest of the screen
