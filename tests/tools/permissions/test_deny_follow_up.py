"""Issue 40, what was still open: the code a line runs is followed or asked about under a deny rule, and a
read is judged by the file it reaches. Each case is first run for real (bash, real files, real git) to show
it reads the secret or runs ``rm``; then the check must not let it run without a question in any mode
(``bypassPermissions`` included; print mode turns a question into a refusal).

- a script the line runs, wherever it is (after ``cd``, ``source``/``.``, fed to a shell on its input) and
  in whatever language (a python file, a ``#!`` program): followed where it can be read, asked about where
  it can't;
- ``$VAR`` computed where the line sets it or the shell has it (``HOME``, ``PWD``), asked about otherwise;
- a hard link to a denied file is the denied file;
- ``-f.env``: an option's attached value names a file too;
- ``git commit`` runs the repository's commit hooks (the pre-commit framework's among them): code;
- ``python -m MODULE`` of a module not known here runs code no one has read.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.permissions import RuleSettings
from tools.permissions.engine import Permissions

MODES = ("bypassPermissions", "default", "acceptEdits")
ENV_SECRET = "ENV-SECRET-40d"
KEY_SECRET = "PRIVATE-KEY-40e"
RULES = ["Read(.env)", "Read(~/.ssh/**)"]


@pytest.fixture
def world(tmp_path):
    """A home with a key and a project inside it (so ``..`` is the home) holding ``.env``."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(KEY_SECRET + "\n")
    (home / "outside.txt").write_text("outside\n")
    project = home / "project"
    (project / "src").mkdir(parents=True)
    (project / ".env").write_text(f"TOKEN={ENV_SECRET}\n")
    (project / "src" / "app.py").write_text("print('hello')\n")
    return project, home


def run_bash(command: str, project: Path, home: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("GLOBIGNORE", "BASHOPTS", "CDPATH")}
    env.update({"HOME": str(home)})
    done = subprocess.run(
        ["bash", "-c", command], cwd=project, env=env, capture_output=True, text=True, timeout=60
    )
    return done.stdout + done.stderr


def decision(project: Path, home: Path, command: str, mode: str):
    settings = RuleSettings(
        cwd=project, home=home / ".compact-agent", user_home=home, permission_mode=mode, deny=list(RULES)
    )
    return Permissions(settings).check("Bash", {"command": command})


def _files(project: Path, home: Path) -> None:
    def put(name: str, text: str, mode: int = 0o755) -> None:
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)

    put("scripts/show.sh", "#!/bin/bash\ncat ../.env\n")
    put("leak.sh", "cat .env\n")
    put("leak.py", "print(open('.env').read())\n")
    put("leakx", "#!/usr/bin/env python3\nprint(open('.env').read())\n")
    put("keyread.rb.py", "import os\nprint(open(os.path.expanduser('~/.ssh/id_rsa')).read())\n")
    put("notes.txt", f"TOKEN={ENV_SECRET}\n{KEY_SECRET}\nother\n", 0o644)
    os.link(home / ".ssh" / "id_rsa", project / "key-copy")
    os.link(project / ".env", project / "env-copy")


# (command, the secret the real shell prints, the decision in every mode: "deny" where the read is certain)
READS = [
    # a script the line runs: after cd, sourced, fed on the input, another language
    ("cd scripts && bash show.sh", ENV_SECRET, "deny"),
    ("cd scripts && ./show.sh", ENV_SECRET, "deny"),
    ("source leak.sh", ENV_SECRET, "deny"),
    (". ./leak.sh", ENV_SECRET, "deny"),
    ("bash < leak.sh", ENV_SECRET, "ask"),
    ("cat leak.sh | bash", ENV_SECRET, "ask"),
    ("sh < leak.sh", ENV_SECRET, "ask"),
    ("python3 leak.py", ENV_SECRET, "ask"),
    ("./leakx", ENV_SECRET, "ask"),
    ("python3 keyread.rb.py", KEY_SECRET, "ask"),
    # $VAR computed: set on the line, or the shell's own HOME and PWD
    ("f=.env; cat $f", ENV_SECRET, "deny"),
    ('f=.env && cat "$f"', ENV_SECRET, "deny"),
    ("n=env; cat .$n", ENV_SECRET, "deny"),
    ("cat $HOME/.ssh/id_rsa", KEY_SECRET, "deny"),
    ('cat "${HOME}/.ssh/id_rsa"', KEY_SECRET, "deny"),
    ('cat "$PWD/.env"', ENV_SECRET, "deny"),
    ("d=.ssh; cat ~/$d/id_rsa", KEY_SECRET, "ask"),  # ~ then an expansion: not computed, asked
    # a hard link to a denied file is that file
    ("cat key-copy", KEY_SECRET, "deny"),
    ("head -c 200 key-copy", KEY_SECRET, "deny"),
    ("sort env-copy", ENV_SECRET, "deny"),
    # an option's attached value
    ("grep -f.env notes.txt", ENV_SECRET, "deny"),
    ("grep -hf.env notes.txt", ENV_SECRET, "deny"),
    ("grep -Ff.env notes.txt", ENV_SECRET, "deny"),
    ("grep -f../.ssh/id_rsa notes.txt", KEY_SECRET, "deny"),
]


@pytest.mark.parametrize(("command", "secret", "expected"), READS)
def test_a_read_through_code_a_variable_a_link_or_an_option_is_judged(world, command, secret, expected):
    project, home = world
    _files(project, home)
    assert secret in run_bash(command, project, home), f"{command!r} did not read the secret for real"
    for mode in MODES:
        got = decision(project, home, command, mode)
        assert got.behavior == expected, (mode, command, got)


# the same words doing ordinary work stay ordinary under the Read deny rules
ORDINARY_READS = [
    "X=notes.txt; cat $X",
    "cat $HOME/outside.txt",
    'cat "$PWD/src/app.py"',
    "cut -d, -f1 notes.txt",
    "cut -d/ -f2 notes.txt",
    "python3 src/app.py",
    "bash scripts/../leak-free.sh",
]


@pytest.mark.parametrize("command", ORDINARY_READS)
def test_the_same_forms_reading_nothing_denied_run(world, command):
    project, home = world
    _files(project, home)
    (project / "leak-free.sh").write_text("echo fine\n")
    got = decision(project, home, command, "bypassPermissions")
    assert got.behavior == "allow", (command, got)


# ---- code that runs rm: unknown python modules, the repository's commit hooks ------------------------


def _perms(project: Path, **kwargs) -> Permissions:
    return Permissions(
        RuleSettings(
            cwd=project, home=project.parent / "agent-home", user_home=project.parent / "home", **kwargs
        )
    )


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd.parent / "home")}
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
    )


def _hook(project: Path, name: str) -> None:
    hook = project / ".git" / "hooks" / name
    hook.write_text("#!/bin/sh\nrm -f victim\n")
    hook.chmod(0o755)


def _module(project: Path, name: str) -> None:
    package = project / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text("import os\nos.remove('victim')\n")


@pytest.fixture
def repo(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "home").mkdir()
    _git(project, "init", "-q")
    (project / "a.txt").write_text("a\n")
    _git(project, "add", "a.txt")
    return project


# (command, what the project needs: a hook's name or a module's)
RUNS_RM = [
    ("git commit -qm x", "hook:pre-commit"),
    ("git commit -qam x", "hook:commit-msg"),
    ("git commit --no-verify -qm x", "hook:post-commit"),
    ("git -C . commit -qm x", "hook:prepare-commit-msg"),
    ("cd . && git commit -qm x", "hook:pre-commit"),
    ("python3 -m mytool", "module:mytool"),
    ("python3 -m mytool --flag", "module:mytool"),
    ("python3 -B -m mytool", "module:mytool"),
]


@pytest.mark.parametrize(("command", "needs"), RUNS_RM)
def test_code_the_line_runs_asks_under_a_deny_rule(repo, command, needs):
    kind, name = needs.split(":")
    (repo / "victim").write_text("precious")
    (_hook if kind == "hook" else _module)(repo, name)
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent / "home")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True, timeout=60)
    assert not (repo / "victim").exists(), f"{command!r} did not run rm, so the case shows nothing"
    (repo / "victim").write_text("precious")
    for mode in MODES:
        got = _perms(repo, deny=["Bash(rm:*)"], permission_mode=mode).check("Bash", {"command": command})
        assert got.behavior in ("ask", "deny"), (mode, got)
    # and under a Read deny rule: the code may read what it denies
    got = _perms(repo, deny=["Read(.env)"], permission_mode="bypassPermissions").check(
        "Bash", {"command": command}
    )
    assert got.behavior == "ask", got


def test_a_repository_without_hooks_and_known_modules_stay_ordinary(repo):
    for command in ("git commit -qm x", "git status", "python3 -m pytest -q", "python3 -m json.tool a.json"):
        got = _perms(repo, deny=["Bash(rm:*)"], permission_mode="bypassPermissions").check(
            "Bash", {"command": command}
        )
        assert got.behavior == "allow", (command, got)
    _hook(repo, "pre-push")  # a hook git commit doesn't run
    got = _perms(repo, deny=["Bash(rm:*)"], permission_mode="bypassPermissions").check(
        "Bash", {"command": "git commit -qm x"}
    )
    assert got.behavior == "allow", got
    got = _perms(repo, deny=["Bash(rm:*)"], permission_mode="bypassPermissions").check(
        "Bash", {"command": "git push origin main"}
    )
    assert got.behavior == "ask", got  # ... but git push does


def test_a_hook_manager_runs_the_repositorys_code_even_bare(repo):
    (repo / ".pre-commit-config.yaml").write_text(
        "repos:\n- repo: local\n  hooks:\n  - id: x\n    name: x\n    entry: rm -f victim\n    language: system\n"
    )
    for command in ("pre-commit", "pre-commit run --all-files", "lefthook run pre-commit"):
        got = _perms(repo, deny=["Bash(rm:*)"], permission_mode="bypassPermissions").check(
            "Bash", {"command": command}
        )
        assert got.behavior == "ask", (command, got)


def test_the_users_name_is_computed_from_the_environment(world, monkeypatch):
    """$USER, $LOGNAME and $TMPDIR are what the agent's commands inherit: computed, not asked about."""
    project, home = world
    monkeypatch.setenv("USER", "tester")
    (home / ".ssh" / "tester").write_text(KEY_SECRET + "\n")
    (home / "tester.txt").write_text("fine\n")
    assert KEY_SECRET in run_bash("cat $HOME/.ssh/$USER", project, home)
    for mode in MODES:
        assert decision(project, home, "cat $HOME/.ssh/$USER", mode).behavior == "deny"
    assert decision(project, home, "cat $HOME/${USER}.txt", "bypassPermissions").behavior == "allow"
