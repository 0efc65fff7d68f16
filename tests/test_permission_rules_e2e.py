"""Issue 20 end to end: what an "always" answer adds is named in the REPL's question and stays narrow, and
in print mode a deny rule refuses commands it can't judge statically, so the file is never created."""

from __future__ import annotations

import json

from tests.test_e2e_print import result_text, tool_results_of
from tests.test_repl import repl_for


def test_the_question_names_the_rule_and_always_adds_only_that(fake_api, project):
    fake_api.reply_tool("Bash", {"command": "python3 -m unittest -q 2>&1 | tail -1"})
    fake_api.reply_text("Tests ran.")
    fake_api.reply_tool("Bash", {"command": "python3 -m unittest discover -q"})
    fake_api.reply_text("Again.")
    fake_api.reply_tool("Bash", {"command": 'python3 -c \'open("PWNED", "w")\''})
    with repl_for(fake_api, project) as d:
        d.type("run the tests\r")
        d.wait_for("(adds Bash(python3 -m unittest:*))")
        d.type("a")
        d.wait_for("Tests ran.")
        d.wait_idle()
        d.type("again\r")
        d.wait_for("Again.")  # covered by the rule just added: no question
        d.wait_idle()
        d.type("now this\r")
        d.wait_for("(adds Bash(python3 -c")  # never widened to Bash(python3:*)
        d.type("n")
        d.wait_for("→ No")
        d.wait_idle()  # a "no" ends the turn
        d.type("/exit\r")
        assert d.finish() == 0
    assert d.repl.session.permissions.session_allow == ["Bash(python3 -m unittest:*)"]
    assert d.out.count("Allow?") == 2
    assert "tail" not in d.repl.session.permissions.session_allow[0]
    assert not (project / "PWNED").exists()


FORMS = [
    "x='$(touch PWNED)'; echo \"${x@P}\"",
    "x='a[$(touch PWNED)]'; echo $((x))",
    "echo y | xargs --replace touch PWNED",
    "sed -n '1e touch PWNED' /dev/null; echo | sed 's/.*/touch PWNED/e'",
    "tar -cf /dev/null --checkpoint=1 --checkpoint-action=exec='touch PWNED' /dev/null",
    "flock /tmp/compact-agent-test.lock -c 'touch PWNED'",
    "git -C . -c alias.p='!touch PWNED' p",
]


def test_print_mode_refuses_what_a_deny_rule_might_cover(fake_api, run_cli, project):
    """Under deny Bash(touch:*) and --dangerously-skip-permissions, every form is refused and nothing runs."""
    claude = project / ".claude"
    claude.mkdir()
    (claude / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Bash(touch:*)"]}}))
    for form in FORMS:
        fake_api.reply_tool("Bash", {"command": form})
    fake_api.reply_text("done")

    res = run_cli(fake_api, "-p", "try", "--dangerously-skip-permissions")

    assert res.code == 0, res.stderr
    results = [tool_results_of(r.body)[0] for r in fake_api.message_requests[1:]]
    assert len(results) == len(FORMS)
    for form, result in zip(FORMS, results, strict=True):
        assert result["is_error"] is True and "denied" in result_text(result), form
    assert not (project / "PWNED").exists()
