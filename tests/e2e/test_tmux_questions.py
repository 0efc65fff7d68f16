"""How the REPL asks, in a real terminal: every question (trust, permission, /model, a # note, /rewind)
answered one way, and /trust listing the rules "always" answers added. The real REPL in tmux against the
fake Messages API."""

from __future__ import annotations

import json
import re
import time

from tests.helpers.tmux import Pane


def test_trust_lists_the_rules_always_answers_added(agent_in_tmux, fake_api, project):  # noqa: F811
    fake_api.reply_tool("Bash", {"command": "touch made.txt"})
    fake_api.reply_text("Made it.")
    pane = agent_in_tmux()
    pane.type("make a file")
    pane.wait_for(r"Allow\?|\[y\]")
    pane.wait_answer()
    pane.type("a")
    pane.wait_for("Made it.")
    pane.wait_prompt()
    pane.type("/trust")
    screen = pane.wait_for(r'Allowed for this session by "always" answers: \S')
    assert re.search(r'"always" answers: Bash\(touch[^)]*\)', screen)


def test_every_question_is_answered_one_way(fake_api, project, isolated_env):
    """Issue 41 item 6: the trust dialog, a permission question, the /model and /rewind pickers and a
    # note's question all end with what Enter alone does, and all take their answer the same way: typed
    after ›, sent with Enter (a single key alone answers nothing)."""
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["Bash(make:*)"]}})
    )
    env = {**fake_api.env(), "COMPACT_AGENT_SESSION_MEMORY": "0"}
    pane = Pane(isolated_env, project, env, [], width=80)
    try:
        pane.wait_for(r"Trust this project and apply them\? \[y\]es / \[n\]o · Enter: no")
        pane.wait_answer()
        pane.keys("Enter")  # Enter alone: the answer that changes nothing
        pane.wait_for("Not trusted: going on without them")
        pane.wait_prompt()

        fake_api.reply_tool("Bash", {"command": "touch made.txt"})
        fake_api.reply_text("Made it.")
        pane.type("make a file")
        screen = pane.wait_for(r"Allow\? \[y\]es / \[n\]o / \[a\]lways for this session")
        assert "(adds Bash(touch:*)) · Enter: no" in " ".join(screen.split())  # wrapped at 80
        pane.wait_answer()
        pane.keys("y")  # a key alone is only typed ...
        pane.wait_for(r"  › y\n*$", visible=True)  # drawn: the key has been read
        time.sleep(0.3)
        assert "→ Yes" not in pane.screen() and not (project / "made.txt").exists()
        pane.keys("Enter")  # ... Enter sends it
        pane.wait_for("Made it.")
        pane.wait_prompt()
        assert (project / "made.txt").exists()

        pane.type("/model")
        pane.wait_for(r"Switch to which model\? 1-4 or a name · Enter: keep claude-sonnet-5-5")
        pane.wait_answer()
        pane.keys("Enter")
        pane.wait_prompt()

        pane.type("# indent with tabs")
        pane.wait_for(  # 81 characters: the hint on a line of its own at 80 columns
            r"Add to memory: \[p\]roject CLAUDE.md or \[u\]ser ~/.claude/CLAUDE.md\?\n· Enter: cancel"
        )
        pane.wait_answer()
        pane.type("u")
        pane.wait_for(r"Noted in ~/.claude/CLAUDE.md \(read with every request\)")
        pane.wait_prompt()

        pane.type("/rewind")
        pane.wait_for(r"Rewind to which prompt\? N, cN or sN \(1-1\) · Enter: stay here")
        pane.wait_answer()
        pane.keys("Escape")  # Esc is Enter alone
        pane.wait_prompt()
        screen = pane.screen()
        assert len(re.findall(r" · Enter: ", " ".join(screen.split()))) == 5, screen
        answers = [line.strip() for line in screen.splitlines() if line.startswith("  ›")]
        assert answers == ["›", "› y", "›", "› u", "›"], screen
        assert "Model set to" not in screen and "Rewound" not in screen
        assert "indent with tabs" in (isolated_env / ".claude" / "CLAUDE.md").read_text()
    finally:
        pane.close()
