"""Issue 20 end to end: what an "always" answer adds is named in the REPL's question and stays narrow, and
in print mode a deny rule refuses commands it can't judge statically, so the file is never created."""

from __future__ import annotations

import json

from tests.helpers.frontend import repl_for
from tests.helpers.wire import result_text, tool_results_of


def test_the_question_names_the_rule_and_always_adds_only_that(fake_api, project):
    fake_api.reply_tool("Bash", {"command": "python3 -m unittest -q 2>&1 | tail -1"})
    fake_api.reply_text("Tests ran.")
    fake_api.reply_tool("Bash", {"command": "python3 -m unittest discover -q"})
    fake_api.reply_text("Again.")
    fake_api.reply_tool("Bash", {"command": 'python3 -c \'open("PWNED", "w")\''})
    with repl_for(fake_api, project) as d:
        d.type("run the tests\r")
        d.wait_for("(adds Bash(python3 -m unittest:*))")
        d.type("a\r")
        d.wait_for("Tests ran.")
        d.wait_idle()
        d.type("again\r")
        d.wait_for("Again.")  # covered by the rule just added: no question
        d.wait_idle()
        d.type("now this\r")
        d.wait_for("(adds Bash(python3 -c")  # never widened to Bash(python3:*)
        d.type("n\r")
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


# issue 30: programs no table lists, options and variables that run commands, every subscript, script files
OPEN_WORLD_FORMS = [
    "setarch x86_64 touch PWNED",
    "logsave /dev/null touch PWNED",
    "split --filter='touch PWNED' data.txt",
    "split -l 1 --fil='touch PWNED' data.txt",
    "TAR_OPTIONS='--to-command=touch PWNED' tar -xf data.tar",
    "a=(['$(touch PWNED)']=1)",
    "b='a[$(touch PWNED)]'; a=([b]=1)",
    "wait -p 'a[$(touch PWNED)]'",
    "getopts a 'a[$(touch PWNED)]'",
    "./mk.sh",
    "bash mk.sh",
    "./mytool --run 'touch PWNED'",
    "/usr/bin/unknown-runner touch PWNED",
]


def test_print_mode_refuses_what_a_deny_rule_cant_vouch_for_in_an_open_world(fake_api, run_cli, project):
    """Under deny Bash(touch:*) and --dangerously-skip-permissions: each form is refused (a program that
    can't be told is asked about, and print mode can't ask), the reason names the rule, nothing runs."""
    claude = project / ".claude"
    claude.mkdir()
    (claude / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Bash(touch:*)"]}}))
    (project / "data.txt").write_text("a\nb\n")
    (project / "mk.sh").write_text("#!/bin/sh\ntouch PWNED\n")
    (project / "mk.sh").chmod(0o755)
    (project / "mytool").write_text(
        "#!/usr/bin/env python3\nimport sys, subprocess\nsubprocess.run(sys.argv[2], shell=True)\n"
    )
    (project / "mytool").chmod(0o755)
    for form in OPEN_WORLD_FORMS:
        fake_api.reply_tool("Bash", {"command": form})
    fake_api.reply_tool("Bash", {"command": "sort data.txt"})  # an ordinary command still runs
    fake_api.reply_text("done")

    res = run_cli(fake_api, "-p", "try", "--dangerously-skip-permissions")

    assert res.code == 0, res.stderr
    results = [tool_results_of(r.body)[0] for r in fake_api.message_requests[1:]]
    assert len(results) == len(OPEN_WORLD_FORMS) + 1
    for form, result in zip(OPEN_WORLD_FORMS, results, strict=False):
        text = result_text(result)
        assert result["is_error"] is True and ("denied" in text or "approval" in text), (form, text)
    untold = result_text(results[OPEN_WORLD_FORMS.index("./mytool --run 'touch PWNED'")])
    assert 'the deny rule "Bash(touch:*)"' in untold
    assert results[-1].get("is_error") is not True and "a\nb" in result_text(results[-1])
    assert not (project / "PWNED").exists()


def test_print_mode_keeps_a_denied_file_out_through_code_variables_links_and_options(
    fake_api, run_cli, project, isolated_env
):
    """Issue 40 follow-up, under Read(.env) and Read(~/.ssh/**) with --dangerously-skip-permissions: each
    form reached the secret before (it ran, and the next request carried it); now each is refused or asked
    about (print mode refuses) and no request holds the secret."""
    import os

    claude = project / ".claude"
    claude.mkdir()
    (claude / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["Read(.env)", "Read(~/.ssh/**)"]}})
    )
    (project / ".env").write_text("TOKEN=ENV-SECRET-40f\n")
    (isolated_env / ".ssh").mkdir(exist_ok=True)
    (isolated_env / ".ssh" / "id_rsa").write_text("KEY-SECRET-40f\n")
    os.link(isolated_env / ".ssh" / "id_rsa", project / "key-copy")
    (project / "notes.txt").write_text("x\n")
    (project / "scripts").mkdir()
    (project / "scripts" / "show.sh").write_text("cat ../.env\n")
    (project / "leak.py").write_text("print(open('.env').read())\n")
    forms = [
        "f=.env; cat $f",
        "cat $HOME/.ssh/id_rsa",
        "cat key-copy",
        "grep -f.env notes.txt",
        "cd scripts && bash show.sh",
        "bash < scripts/show.sh",
        "python3 leak.py",
    ]
    for form in forms:
        fake_api.reply_tool("Bash", {"command": form})
    fake_api.reply_text("done")
    res = run_cli(fake_api, "-p", "try", "--dangerously-skip-permissions")
    assert res.code == 0, res.stderr
    results = [tool_results_of(r.body)[0] for r in fake_api.message_requests[1:]]
    assert len(results) == len(forms)
    for form, result in zip(forms, results, strict=True):
        text = result_text(result)
        assert result["is_error"] is True and ("denied" in text or "approval" in text), (form, text)
    sent = json.dumps([r.body for r in fake_api.message_requests])
    assert "ENV-SECRET-40f" not in sent and "KEY-SECRET-40f" not in sent
