"""Issue 40, class 3: programs that run code are code runners. Under a deny rule ``Bash(rm:*)`` none of these
may run without a question, in any mode (bypassPermissions included; print mode turns a question into a
refusal). Each case is first run for real in a shell on a scratch directory where the program is installed,
to show that it does run ``rm f``: the check is about what the program does, not about its name.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.permissions import RuleSettings
from tools.permissions.engine import Permissions

DENY_RM = ["Bash(rm:*)"]


def perms(project, **kwargs):
    return Permissions(
        RuleSettings(
            cwd=project, home=project.parent / "agent-home", user_home=project.parent / "home", **kwargs
        )
    )


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    return root


def _setup(project: Path, kind: str) -> None:
    (project / "f").write_text("precious")
    if kind == "sort":
        # more than the 16k buffer, so sort writes runs through its compressor (sh), which runs them as
        # scripts: one line removes f, the rest are comments (3,000 lines of rm were 3,000 processes, 2 s)
        padding = "".join(f"# {i} padding padding padding padding\n" for i in range(3000))
        (project / "in.txt").write_text("rm -f f\n" + padding)
    elif kind == "zip":
        (project / "a.txt").write_text("a")
        subprocess.run(["zip", "-q", "x.zip", "a.txt"], cwd=project, check=True)
    elif kind == "install":
        (project / "a").write_text("a")
    elif kind == "npm":
        pkg = project / "node_modules" / "x"
        pkg.mkdir(parents=True)
        (pkg / "package.json").write_text('{"name": "x", "version": "1.0.0"}')


# (command, what the scratch directory needs, the program that must be installed to run it for real, the
# file whose loss shows rm ran)
RUNS_RM = [
    ("python3 -m timeit -n1 -r1 'import os; os.remove(\"f\")'", "", "python3", "f"),
    ("echo 'import os; os.remove(\"f\")' | python3 -m code", "", "python3", "f"),
    ("echo 'import os; os.remove(\"f\")' | python3 -m asyncio", "", "python3", "f"),
    ("echo 'import os; os.remove(\"f\")' > s.py; echo 'c' | python3 -m pdb s.py", "", "python3", "f"),
    ("echo 'import os; os.remove(\"f\")' | python3 -i /dev/null", "", "python3", "f"),
    ("sqlite3 t.db \".import '|rm f' t\"", "", "sqlite3", "f"),
    ("sqlite3 t.db \".read '|rm f'\"", "", "sqlite3", "f"),
    ("sqlite3 t.db 'select 1' -cmd '.shell rm f'", "", "sqlite3", "f"),
    ("sqlite3 t.db \"select edit('x', 'rm f')\"", "", "sqlite3", "f"),
    ("sort -S 16k --compress-prog=sh in.txt", "sort", "sort", "f"),
    ("sort -S 16k --compress=sh in.txt", "sort", "sort", "f"),
    ("install -s --strip-prog=rm a dest", "install", "install", "dest"),
    ("zip -T --unzip-com='rm f' x.zip a.txt", "zip", "zip", "f"),
    ("zip -T --unzip-command='rm f' x.zip a.txt", "zip", "zip", "f"),
    ("sftp -D 'rm f'", "", "sftp", "f"),
    ("npm edit x --editor='rm f'", "npm", "npm", "f"),
    ("npm edi x --editor='rm f'", "npm", "npm", "f"),
]

# the same, where running them here would reach outside the scratch directory (apt's lists, a network) or
# the program is not installed in the test environment
DECIDED_ONLY = [
    "coverage run -m timeit 'import os; os.remove(\"f\")'",
    "coverage run --branch --module pdb s.py",
    "python3 -m coverage run -m code",
    "python3 -mtimeit 'import os'",
    "python3 -I -m cProfile -c 'x'",
    "python3 -m IPython",
    "aws configure set profile.x.credential_process 'rm f'",
    "aws configure set credential_process 'rm f' --profile x",
    "apt-get -o APT::Update::Pre-Invoke::='rm f' update",
    "apt-get -oAPT::Update::Pre-Invoke::='rm f' update",
    "apt --option=DPkg::Pre-Install-Pkgs::='rm f' install x",
    "apt-get -c ./apt.conf update",
    "scp -D /usr/lib/openssh/sftp-server a host:b",
    "sftp -b cmds.txt host",
    "sftp host",
    "sftp -qS ./evil host:f",
    "scp -qS ./evil a host:b",
    "ssh -qoProxyCommand='rm f' host",
    "npm docs x --browser='rm f'",
    "npm help npm --viewer=browser --browser='rm f'",
    "npm bug x",
    "npm --git='rm f' install ./dep",
    "rsync --rs='rm f' a b",
    "rsync --rsync-p='rm f' a b",
    "install --strip-program=rm a b",
    "sort --compress-program=sh a",
    "zip -TT 'rm f' x.zip a",
    "sqlite3 db -init evil.sql",
    "sqlite3 db .output /tmp/x",
    "sqlite3 db \"attach 'x.db' as y\"",
    "sqlite3 db",
]

# the same programs doing ordinary work stay ordinary under the deny rule
ORDINARY = [
    "python3 -m pytest -q",
    "python3 -m json.tool data.json",
    "python3 -m venv .venv",
    "python3 -m pip install -e .",
    "python3 script.py",
    "coverage run -m pytest -q",
    "coverage report -m",
    "install -s a b",
    "install --strip a b",
    "zip -r x.zip src",
    "sqlite3 db '.tables'",
    "sqlite3 db 'select count(*) from t'",
    "sqlite3 -readonly db '.schema t'",
    "sftp host:file",
    "scp a host:b",
    "aws configure get region",
    "aws sts get-caller-identity",
    "apt-get -y install x",
    "npm install",
    "npm i -D x",
    "npm run build",
    "npm test",
]


@pytest.mark.parametrize(("command", "kind", "program", "victim"), RUNS_RM)
def test_a_code_runner_runs_rm_for_real_and_asks_under_a_deny_rule(project, command, kind, program, victim):
    assert shutil.which(program), f"{program} is part of the test environment"
    _setup(project, kind)
    if victim != "f":
        (project / victim).write_text("x")
    subprocess.run(
        ["bash", "-c", command],
        cwd=project,
        env={**os.environ, "HOME": str(project.parent / "home"), "EDITOR": "true"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert not (project / victim).exists(), f"{command!r} did not run rm, so the case shows nothing"

    _judged(project, command)


@pytest.mark.parametrize("command", DECIDED_ONLY)
def test_other_code_runners_ask_under_a_deny_rule(project, command):
    _judged(project, command)


def _judged(project: Path, command: str) -> None:
    for mode in ("bypassPermissions", "default", "acceptEdits"):
        decision = perms(project, deny=DENY_RM, permission_mode=mode).check("Bash", {"command": command})
        assert decision.behavior in ("ask", "deny"), (mode, decision.reason)
    # an allow rule for the program doesn't cover what it runs
    program = command.split("|")[-1].split()[0] if "|" in command else command.split()[0]
    decision = perms(project, allow=[f"Bash({program}:*)"]).check("Bash", {"command": command})
    assert decision.behavior == "ask", decision.reason


@pytest.mark.parametrize("command", ORDINARY)
def test_the_same_programs_doing_ordinary_work_stay_ordinary(project, command):
    decision = perms(project, deny=DENY_RM, permission_mode="bypassPermissions").check(
        "Bash", {"command": command}
    )
    assert decision.behavior == "allow", decision.reason


# ---- the repository's own git configuration ---------------------------------------------------------


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _repository(root: Path) -> Path:
    root.mkdir(exist_ok=True)
    _git(root, "init", "-q")
    (root / "a.txt").write_text("a\n")
    _git(root, "add", "a.txt")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a")
    return root


def _fsmonitor(project: Path) -> str:
    _git(_repository(project), "config", "core.fsmonitor", "rm -f f; echo")
    return "git status"


def _diff_external(project: Path) -> str:
    _repository(project)
    sub = _repository(project / "sub")
    _git(sub, "config", "diff.external", "sh -c 'rm -f ../f'")
    (sub / "a.txt").write_text("b\n")
    return "git -C sub diff"


def _diff_external_after_cd(project: Path) -> str:
    _diff_external(project)
    return "cd sub && git diff"


def _textconv(project: Path) -> str:
    _repository(project)
    _git(project, "config", "diff.evil.textconv", "sh -c 'rm -f f; cat \"$0\"'")
    (project / ".gitattributes").write_text("*.txt diff=evil\n")
    (project / "a.txt").write_text("b\n")
    return "git diff"


def _included(project: Path) -> str:
    _repository(project)
    (project / "evil.cfg").write_text("[core]\n\tfsmonitor = rm -f f; echo\n")
    _git(project, "config", "include.path", "../evil.cfg")
    return "git status"


def _index_hook(project: Path) -> str:
    _repository(project)
    hook = project / ".git" / "hooks" / "post-index-change"
    hook.write_text("#!/bin/sh\nrm -f f\n")
    hook.chmod(0o755)
    os.utime(project / "a.txt", (1, 1))  # git status refreshes the index, and the hook runs
    return "git status"


def _gitdir_file(project: Path) -> str:
    elsewhere = _repository(project.parent / "elsewhere")
    _git(elsewhere, "config", "core.fsmonitor", "rm -f ../project/f; echo")
    (project / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")
    _git(project, "--work-tree", str(project), "read-tree", "HEAD")
    return "git status"


@pytest.mark.parametrize(
    "setup",
    [_fsmonitor, _diff_external, _diff_external_after_cd, _textconv, _included, _index_hook, _gitdir_file],
)
def test_a_repository_that_makes_git_run_a_program_asks(project, setup):
    command = setup(project)
    (project / "f").write_text("precious")
    subprocess.run(["bash", "-c", command], cwd=project, capture_output=True, timeout=60)
    assert not (project / "f").exists(), f"{command!r} did not run the repository's program"
    (project / "f").write_text("precious")

    default = perms(project).check("Bash", {"command": command})
    assert default.behavior == "ask" and "not known to be inert" in default.reason or "hook" in default.reason
    for mode in ("bypassPermissions", "default", "acceptEdits"):
        decision = perms(project, deny=DENY_RM, permission_mode=mode).check("Bash", {"command": command})
        assert decision.behavior == "ask", (mode, decision.reason)
        assert "Bash(rm:*)" in decision.reason
    allowed = perms(project, allow=["Bash(git:*)"]).check("Bash", {"command": command})
    assert allowed.behavior == "ask", allowed.reason


def test_an_ordinary_repository_stays_read_only(project):
    _repository(project)
    _git(project, "remote", "add", "origin", "https://example.com/x.git")
    _git(project, "config", "branch.main.remote", "origin")
    _git(project, "config", "pull.rebase", "true")
    for key, value in (("clean", "git-lfs clean -- %f"), ("smudge", "git-lfs smudge -- %f")):
        _git(project, "config", f"filter.lfs.{key}", value)
    _git(project, "config", "core.fsmonitor", "false")
    for command in ("git status", "git diff", "git log --oneline -5", "cd . && git status"):
        if "cd" not in command:  # the read-only fast path takes no cd
            assert perms(project).check("Bash", {"command": command}).behavior == "allow", command
        decision = perms(project, deny=DENY_RM, permission_mode="bypassPermissions").check(
            "Bash", {"command": command}
        )
        assert decision.behavior == "allow", decision.reason


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("core.pager", "rm -f f"),
        ("alias.st", "!rm -f f"),
        ("core.sshCommand", "rm -f f"),
        ("credential.helper", "!rm -f f"),
        ("submodule.x.update", "!rm -f f"),
        ("remote.origin.uploadpack", "rm -f f"),
        ("gpg.program", "rm"),
        ("core.hooksPath", "evil-hooks"),
        ("something.new", "x"),
    ],
)
def test_any_key_not_known_to_be_inert_asks(project, key, value):
    _repository(project)
    _git(project, "config", key, value)
    decision = perms(project).check("Bash", {"command": "git status"})
    assert decision.behavior == "ask" and key.split(".")[-1].lower() in decision.reason.lower(), (
        decision.reason
    )


def test_a_bare_repository_and_an_unknown_directory_ask(project):
    bare = project / "evil.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    _git(bare, "config", "alias.x", "!rm -f f")
    assert perms(project).check("Bash", {"command": "git -C evil.git log"}).behavior == "ask"
    decision = perms(project, deny=DENY_RM, permission_mode="bypassPermissions").check(
        "Bash", {"command": 'cd "$X" && git status'}
    )
    assert decision.behavior in ("ask", "deny"), decision.reason
