"""/model in a real terminal: the picker and its table laid out for 80 and 160 columns, a bad model id
(typed or on the command line) answered with the valid ones. The real REPL in tmux against the fake
Messages API."""

from __future__ import annotations

import pytest


def test_model_is_a_picker_and_a_bad_model_id_is_answered_with_the_valid_ones(agent_in_tmux, fake_api):  # noqa: F811
    fake_api.strict_models = True  # a model id the server does not list is a 404, as on the real API
    pane = agent_in_tmux()
    pane.type("/model")
    screen = pane.wait_for(r"Switch to which model\? 1-4 or a name · Enter: keep claude-sonnet-5-5")
    rows = {
        line.split()[1]: line for line in screen.splitlines() if line.strip()[:2] in ("1.", "2.", "3.", "4.")
    }
    assert list(rows) == ["sonnet", "opus", "haiku", "fable"]
    assert "claude-sonnet-5-5  Sonnet 5.5  1M" in rows["sonnet"] and rows["sonnet"].endswith("← current")
    assert "2 / 10 / 0.10" in rows["sonnet"] and "low–max (high)" in rows["sonnet"]
    assert "claude-fable-5-2   Fable 5.2   1M" in rows["fable"] and "8 / 40 / 0.20" in rows["fable"]
    assert "0.10 / 0.50 / 0.01 *" in rows["haiku"] and "at 5x" in screen
    pane.wait_answer()
    pane.type("2")
    pane.wait_for(r"Model set to claude-opus-5-5 · Opus 5.5, 1M window, \$4 in / \$20 out")
    pane.wait_prompt()

    pane.type("/model claude-sonet-5-5")  # a typo: refused at once, with the valid ones
    screen = pane.wait_for(r"The API has no model named claude-sonet-5-5\. Did you mean claude-sonnet-5-5\?")
    pane.wait_prompt()
    assert "claude-fable-5-2" in screen[screen.index("The API has no model named") :]
    fake_api.reply_text("Opus here.")
    pane.type("who answers?")
    pane.wait_for("Opus here.")
    assert fake_api.message_requests[-1].body["model"] == "claude-opus-5-5"  # the typo changed nothing
    assert fake_api.violations == []


def test_a_bad_model_on_the_command_line_is_answered_with_the_valid_ones(agent_in_tmux, fake_api):  # noqa: F811
    fake_api.strict_models = True
    pane = agent_in_tmux("--model", "claude-sonet-5-5")
    pane.type("hello")
    screen = pane.wait_for(r"The API has no model named claude-sonet-5-5\.")
    pane.wait_prompt()
    words = " ".join(screen.split())
    assert "Did you mean claude-sonnet-5-5?" in words and "claude-haiku-5-5" in words
    assert "Pick one with /model, or start with --model." in words
    assert "API error 404" not in screen


@pytest.mark.parametrize("width", [80, 160])
def test_the_model_table_fits_80_columns_and_uses_160(agent_in_tmux, fake_api, width):  # noqa: F811
    """Issue 41 item 4: the /model table is laid out for the terminal, never wrapped by it."""
    pane = agent_in_tmux(width=width)
    pane.type("/model")
    screen = pane.wait_for(r"Switch to which model\? 1-4 or a name")
    pane.keys("Enter")
    pane.wait_prompt()
    table = screen[screen.index("Model: claude-sonnet-5-5") : screen.index("Switch with /model N")]
    lines = table.splitlines()
    assert all(len(line) <= width for line in lines), table  # -J joins what the terminal wrapped
    rows = [line for line in lines if line.lstrip().startswith(("1.", "2.", "3.", "4."))]
    assert len(rows) == 4 and "claude-opus-5-5" in rows[1] and "4 / 20 / 0.20" in rows[1]
    if width == 80:
        assert rows[0].endswith("low–max (high) ←") and "opus: deeper work" in table
    else:  # the family, the whole mark, and what each model is for on its row
        assert "Opus 5.5" in rows[1] and "deeper work; thinking can't be turned off" in rows[1]
        assert rows[0].endswith("← current")
