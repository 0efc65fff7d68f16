"""Bad input and security edges (the API key in tool and hook output, relative paths and
permissions, deny rules that a shell wrapper must not dodge, special files)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from agent.config.settings import Settings
from tests.helpers.transcripts import records, transcripts
from tools.base import ToolContext
from tools.permissions.engine import Permissions
from tools.read import ReadTool
from tools.runner import run_tool

SECRET = "sk-ant-test-SECRET-0123456789"


def tool_result_texts(api) -> list[str]:
    out = []
    for req in api.message_requests:
        for b in req.body["messages"][-1]["content"]:
            if b.get("type") == "tool_result":
                c = b["content"]
                out.append(c if isinstance(c, str) else "".join(x.get("text", "") for x in c))
    return out


def no_secret_on_disk(*roots: Path) -> None:
    for root in roots:
        for f in root.rglob("*"):
            if f.is_file():
                assert SECRET not in f.read_text(errors="replace"), f


# ---- the API key in what tools and hooks print ------------------------------------------------


def test_tool_output_holding_the_api_key_is_redacted_not_fatal(fake_api, run_cli, project, isolated_env):
    (project / "k.txt").write_text(f"export ANTHROPIC_API_KEY={SECRET}\n")
    fake_api.reply_tool("Bash", {"command": "cat k.txt"})
    fake_api.reply_tool("Read", {"file_path": str(project / "k.txt")})
    fake_api.reply_text("done")

    res = run_cli(
        fake_api, "-p", "show me", "--dangerously-skip-permissions", env={"ANTHROPIC_API_KEY": SECRET}
    )

    assert res.code == 0, res.stderr
    assert res.stdout == "done\n"
    fake_api.check()
    bash_out, read_out = tool_result_texts(fake_api)
    assert bash_out == "export ANTHROPIC_API_KEY=[redacted API key]"
    assert read_out == "     1\texport ANTHROPIC_API_KEY=[redacted API key]"
    no_secret_on_disk(isolated_env)
    [path] = transcripts(isolated_env)
    assert any("[redacted API key]" in str(r.get("message")) for r in records(path))


def test_hook_printing_its_environment_does_not_leak_or_crash(fake_api, run_cli, project, isolated_env):
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        '{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "env; echo key=$ANTHROPIC_API_KEY"}]}]}}'
    )
    fake_api.reply_text("hello")

    res = run_cli(fake_api, "-p", "hi", "--trust-project", env={"ANTHROPIC_API_KEY": SECRET})

    assert res.code == 0, res.stderr
    assert res.stdout == "hello\n"
    no_secret_on_disk(isolated_env, project)
    body = fake_api.message_requests[0].body
    assert SECRET not in str(body)
    assert "CLAUDE_PROJECT_DIR=" in str(body)  # the hook ran and its output reached the model


# ---- relative paths: the permission check and the tool must agree on the file -----------------


def test_relative_read_after_cd_outside_is_judged_where_it_reads(fake_api, run_cli, project, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("outside secret\n")
    fake_api.reply_tool("Bash", {"command": f"cd {outside}"})
    fake_api.reply_tool("Read", {"file_path": "f.txt"})
    fake_api.reply_text("done")

    res = run_cli(fake_api, "-p", "x", "--allowedTools", "Bash")

    assert res.code == 0, res.stderr
    _, read_out = tool_result_texts(fake_api)
    assert "outside secret" not in read_out
    assert "approval" in read_out and str(outside / "f.txt") in read_out


def test_relative_write_in_accept_edits_outside_the_project_is_not_allowed(
    fake_api, run_cli, project, tmp_path
):
    outside = tmp_path / "outside"
    outside.mkdir()
    fake_api.reply_tool("Bash", {"command": f"cd {outside}"})
    fake_api.reply_tool("Write", {"file_path": "planted.txt", "content": "x"})
    fake_api.reply_text("done")

    res = run_cli(fake_api, "-p", "x", "--permission-mode", "acceptEdits", "--allowedTools", "Bash")

    assert res.code == 0, res.stderr
    assert not (outside / "planted.txt").exists()
    assert not (project / "planted.txt").exists()


def test_relative_path_deny_rule_still_applies_after_cd(fake_api, run_cli, project):
    (project / "sub").mkdir()
    (project / "sub" / "secret.env").write_text("TOKEN=1\n")
    fake_api.reply_tool("Bash", {"command": "cd sub"})
    fake_api.reply_tool("Read", {"file_path": "secret.env"})
    fake_api.reply_text("done")

    res = run_cli(
        fake_api, "-p", "x", "--dangerously-skip-permissions", "--disallowedTools", "Read(sub/secret.env)"
    )

    assert res.code == 0, res.stderr
    _, read_out = tool_result_texts(fake_api)
    assert "TOKEN=1" not in read_out and "denied" in read_out


# ---- deny rules and shell wrappers ------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "(rm x)",
        "( rm -rf x )",
        "{ rm x; }",
        "if true; then rm x; fi",
        "true && ! rm x",
        'bash -c "rm x"',
        "sh -c 'rm -rf /tmp/x'",
        'eval "rm x"',
        "sudo rm x",
        "sudo -u root rm x",
        "timeout 5 rm x",
        "env FOO=1 rm x",
        "nohup rm x &",
        "command rm x",
        "time rm x",
        "exec rm x",
        "/bin/rm x",
        "\\rm x",
        'r"m" x',
        "nice -n 5 rm x",
        "xargs rm < list",
    ],
)
def test_deny_rule_wins_through_shell_wrappers(command, tmp_path):
    s = Settings(cwd=tmp_path, home=tmp_path / "h", deny=["Bash(rm:*)"], permission_mode="bypassPermissions")
    assert Permissions(s).check("Bash", {"command": command}).behavior == "deny"


@pytest.mark.parametrize("command", ["echo rm x", "git rm x", "grep -r rm .", "ls rmdir", "echo '(rm x)'"])
def test_deny_rule_leaves_commands_that_only_mention_the_word(command, tmp_path):
    s = Settings(cwd=tmp_path, home=tmp_path / "h", deny=["Bash(rm:*)"], permission_mode="bypassPermissions")
    assert Permissions(s).check("Bash", {"command": command}).behavior == "allow"


def test_allow_rule_is_not_widened_by_wrappers(tmp_path):
    s = Settings(cwd=tmp_path, home=tmp_path / "h", allow=["Bash(git status:*)"])
    p = Permissions(s)
    assert p.check("Bash", {"command": "git status"}).behavior == "allow"
    assert p.check("Bash", {"command": 'bash -c "git status; rm -rf x"'}).behavior == "ask"


# ---- special files ----------------------------------------------------------------------------


def test_read_of_a_fifo_fails_at_once_instead_of_hanging(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    ctx = ToolContext(project_dir=tmp_path, session_dir=tmp_path / "s", cwd=tmp_path)
    box = {}
    t = threading.Thread(
        target=lambda: box.setdefault("r", run_tool(ReadTool(), {"file_path": str(fifo)}, ctx)), daemon=True
    )
    t.start()
    t.join(5)
    if t.is_alive():  # unblock the reader so the test process can exit
        open(fifo, "wb").close()
        pytest.fail("Read blocked on a FIFO")
    result = box["r"]
    assert result.is_error
    assert (
        result.content
        == f"{fifo} is not a regular file (a FIFO), so Read cannot show it. Inspect it with a Bash command instead."
    )


# ---- the command line: a bad flag is one line on stderr --------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--max-turns", "0", "-p", "hi"], "--max-turns"),
        (["--max-turns", "many", "-p", "hi"], "--max-turns"),
        (["--output-format", "xml", "-p", "hi"], "--output-format"),
        (["--no-such-flag"], "--no-such-flag"),
        (["-p", "hi", "--resume"], "--resume"),
    ],
)
def test_bad_flag_is_one_clear_line_and_exit_2(run_cli, args, needle):
    res = run_cli(None, *args)
    assert res.code == 2
    assert res.stdout == ""
    [line] = res.stderr.splitlines()
    assert line.startswith("compact-agent: ") and needle in line and "see --help" in line
    assert "Traceback" not in res.stderr
