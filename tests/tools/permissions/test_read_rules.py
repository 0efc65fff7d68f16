"""Read deny rules under Bash judge what a command reads, not the words it shows (issue 40 classes 1 and 2).

Every case runs twice: once in a real bash in a real project (a git repository with ``.env`` committed, a
symlink to the key, a home directory with ``~/.ssh/id_rsa``) to show that the command does print the
secret, and once through the permission check, which must not let it run: ``default`` mode must not take
the read-only fast path (it asks or refuses; print mode refuses either), and in ``bypassPermissions`` a
deny rule still wins, so every such line is refused or asked about. Ordinary reads stay as they were.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.permissions import RuleSettings
from tools.permissions.engine import Permissions

ENV_SECRET = "ENV-SECRET-41a"
KEY_SECRET = "PRIVATE-KEY-41b"
OUTSIDE = "OUTSIDE-41c"
RULES = ["Read(.env)", "Read(~/.ssh/**)"]


@pytest.fixture(scope="module")
def world_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with a key, a project inside it (so ``..`` is the home) under git with ``.env`` committed:
    built once a module (git init, add and commit), each test getting a copy of its own."""
    home = tmp_path_factory.mktemp("world") / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(KEY_SECRET + "\n")
    (home / "outside.txt").write_text(OUTSIDE + "\n")
    project = home / "project"
    (project / "src").mkdir(parents=True)
    (project / ".env").write_text(f"TOKEN={ENV_SECRET}\n")
    (project / "src" / "app.py").write_text("print('hello')\n")
    (project / "outside.txt").write_text("inside\n")
    (project / "list0").write_bytes(b".env\0src/app.py\0")
    env = {**os.environ, "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    for line in (
        "git init -q",
        "git add .env src list0",
        "git -c user.email=t@t -c user.name=t commit -qm first",
    ):
        subprocess.run(line, shell=True, cwd=project, env=env, check=True)
    (project / "src" / "app.py").write_text("print('changed')\n")
    return home


@pytest.fixture
def world(tmp_path: Path, world_template: Path) -> tuple[Path, Path]:
    """The template copied (git's files and all), with the symlink to the key made in the copy: the
    repository was built by 6 processes per test (140 tests: 2 s of CPU)."""
    home = tmp_path / "home"
    shutil.copytree(world_template, home, symlinks=True)
    project = home / "project"
    (project / "keys").symlink_to(home / ".ssh" / "id_rsa")
    return project, home


def run_bash(command: str, project: Path, home: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("GLOBIGNORE", "BASHOPTS", "CDPATH")}
    env.update({"HOME": str(home), "GIT_PAGER": "cat", "PAGER": "cat"})
    done = subprocess.run(
        ["bash", "-c", command], cwd=project, env=env, capture_output=True, text=True, timeout=60
    )
    return done.stdout + done.stderr


def decision(project: Path, home: Path, command: str, mode: str, deny=RULES, allow=()):
    settings = RuleSettings(
        cwd=project,
        home=home / ".compact-agent",
        user_home=home,
        permission_mode=mode,
        deny=list(deny),
        allow=list(allow),
    )
    return Permissions(settings).check("Bash", {"command": command})


def prints_secret(command: str, project: Path, home: Path, secret: str) -> None:
    """The real shell shows the command reads the secret (when the program is installed here)."""
    programs = {"rg": "rg"}
    needed = next(
        (p for word, p in programs.items() if command.startswith(word) or f" {word} " in command), None
    )
    if needed and shutil.which(needed) is None:
        return  # the decision below is still checked; the program isn't here to show the read
    assert secret in run_bash(command, project, home), command


# ---- class 1: the read-only fast path judged what a command reads ---------------------------------

CLASS_1 = [
    # the named cases
    ("grep -r SECRET .", ENV_SECRET),
    ("grep -r TOKEN .", ENV_SECRET),
    ("rg --hidden TOKEN", ENV_SECRET),
    ("grep -R PRIVATE .", KEY_SECRET),
    ("rg -L PRIVATE", KEY_SECRET),
    ("grep --dereference-recursive PRIVATE .", KEY_SECRET),
    ("git show HEAD:.env", ENV_SECRET),
    ("git show :.env", ENV_SECRET),
    ("git grep TOKEN", ENV_SECRET),
    ("git log -p", ENV_SECRET),
    ("echo HEAD:.env | git cat-file --batch", ENV_SECRET),
    ("env --chdir=.. cat .ssh/id_rsa", KEY_SECRET),
    ("diff --from-file=.. outside.txt", OUTSIDE),
    ("sort --files0-from=list0", ENV_SECRET),
    # variations: other recursive readers, other ways into the objects, other lists and directory options
    ("grep -rl TOKEN . | xargs cat", ENV_SECRET),
    ("grep -d recurse TOKEN .", ENV_SECRET),
    ("grep -Rn PRIVATE src ..", KEY_SECRET),
    ("grep -r PRIVATE ../.ssh", KEY_SECRET),
    ("git show HEAD:./.env", ENV_SECRET),
    ("git show HEAD~0:.env", ENV_SECRET),
    ("git cat-file -p HEAD:.env", ENV_SECRET),
    ("git log -p -- .env", ENV_SECRET),
    ("git show", ENV_SECRET),
    ("git log -U3", ENV_SECRET),
    ("git -C src grep TOKEN -- :/", ENV_SECRET),
    ("git grep TOKEN HEAD", ENV_SECRET),
    ("env -C .. cat .ssh/id_rsa", KEY_SECRET),
    ("env --ch=.. cat .ssh/id_rsa", KEY_SECRET),
    ("cd .. && cat .ssh/id_rsa", KEY_SECRET),
    ("diff --to-file=.. outside.txt", OUTSIDE),
    ("diff .. outside.txt", OUTSIDE),
    ("wc --files0-from=list0 && sort --files0-from list0", ENV_SECRET),
    ("ls ../.ssh", "id_rsa"),
    ("find . -name .env -exec cat {} +", ENV_SECRET),
    ("cat keys", KEY_SECRET),
    ("head -n 5 *", KEY_SECRET),
]


@pytest.mark.parametrize(("command", "secret"), CLASS_1)
def test_a_read_only_command_reading_a_denied_path_is_not_run_without_a_question(world, command, secret):
    project, home = world
    prints_secret(command, project, home, secret)
    got = decision(project, home, command, "default")
    assert got.behavior in ("ask", "deny"), (command, got)


@pytest.mark.parametrize(
    "command",
    [
        c
        for c, _ in CLASS_1
        if c
        not in (
            "diff --from-file=.. outside.txt",
            "diff --to-file=.. outside.txt",
            "diff .. outside.txt",
            "ls ../.ssh",
        )
    ],
)
def test_a_deny_rule_holds_for_what_a_command_reads_in_bypass_mode_too(world, command):
    project, home = world
    got = decision(project, home, command, "bypassPermissions")
    assert got.behavior in ("ask", "deny"), (command, got)


def test_a_read_outside_the_project_through_an_option_is_not_read_only_here(world):
    """With no rule at all, --from-file=.. and env -C .. read outside the project: they ask."""
    project, home = world
    for command in (
        "diff --from-file=.. outside.txt",
        "env -C .. cat outside.txt",
        "sort --files0-from=list0",
    ):
        assert decision(project, home, command, "default", deny=()).behavior == "ask", command


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git show HEAD:.env", "deny"),  # the path is known: refused like cat .env
        ("git show :.env", "deny"),
        ("git log -p -- .env", "deny"),
        ("grep -r TOKEN .", "deny"),  # .env is there now and grep reads every file below
        ("grep -r --exclude=.env TOKEN .", "allow"),  # grep's filter, applied exactly, leaves it out
        ("grep -r --exclude-from=list0 TOKEN .", "ask"),  # a filter not read here: asked
        ("grep -R PRIVATE src", "ask"),  # nothing denied below src, but links are followed: not read-only
        ("grep -R PRIVATE .", "deny"),  # keys -> ~/.ssh/id_rsa, followed
        ("grep -r PRIVATE .", "deny"),  # .env is below anyway
        ("git log -p", "ask"),  # the history may hold it: can't be told from here
        ("git diff", "ask"),  # .env is in the index: shown if it changed
        ("git diff --cached", "ask"),
        ("git log --oneline", "allow"),
        ("git status", "allow"),
        ("git show HEAD:src/app.py", "allow"),
        ("git diff -- src", "allow"),  # the index holds nothing denied below src
        ("git diff -- src/app.py", "allow"),
        ("cat src/app.py", "allow"),
        ("grep -rn print src", "allow"),
        ("ls src", "allow"),
    ],
)
def test_what_is_refused_what_asks_and_what_stays_read_only(world, command, expected):
    project, home = world
    assert decision(project, home, command, "default").behavior == expected, command


def test_recursive_reads_find_what_is_below_and_only_that(world):
    """grep -r in a directory with no denied file runs read-only; rg without --hidden skips dot files and
    doesn't follow links (so it doesn't read .env or the key), -L follows."""
    project, home = world
    (project / "keys").unlink()
    assert decision(project, home, "grep -r print src", "default").behavior == "allow"
    assert decision(project, home, "rg print", "bypassPermissions").behavior == "allow"
    assert decision(project, home, "rg --hidden print", "bypassPermissions").behavior == "deny"
    (project / "src" / "k").symlink_to(home / ".ssh" / "id_rsa")
    assert decision(project, home, "rg -L print src", "bypassPermissions").behavior == "deny"
    assert (
        decision(project, home, "grep -r print src", "default").behavior == "allow"
    )  # -r: links below not followed
    assert decision(project, home, "grep -R print src", "default").behavior == "deny"


def test_a_denied_directory_is_not_listed(world):
    project, home = world
    for command in ("ls ~/.ssh", "ls ../.ssh", "cd ../.ssh && ls", "find ../.ssh"):
        got = decision(project, home, command, "bypassPermissions")
        assert got.behavior in ("deny", "ask"), (command, got)


# ---- class 2: expansions by the shell's rules or not at all ---------------------------------------

CLASS_2 = [
    # the named cases
    ("shopt -s nocaseglob; cat .EN?", ENV_SECRET),
    ("cat .en[[:alpha:]]", ENV_SECRET),
    ("cat .[^x]nv", ENV_SECRET),
    ("cat .{e,x}nv", ENV_SECRET),
    ("cat ~+/.env", ENV_SECRET),
    ('cat "$PWD/.env"', ENV_SECRET),
    ("cat $HOME/.ssh/id_rsa", KEY_SECRET),
    ("pushd src && cat ../.env", ENV_SECRET),
    ("pushd src >/dev/null; pushd .. >/dev/null; popd >/dev/null; cat ../.env", ENV_SECRET),
    ("shopt -s cdable_vars; cd HOME; cat .ssh/id_rsa", KEY_SECRET),
    ("shopt -s dotglob; cat *", ENV_SECRET),
    ("GLOBIGNORE=x; cat *", ENV_SECRET),
    # variations: other globs, tildes, parameters, braces, directory changes
    ("cat .[!x]nv", ENV_SECRET),
    ("cat .e[n]v", ENV_SECRET),
    ("cat .?nv", ENV_SECRET),
    ("cat .e*", ENV_SECRET),
    ("cat ./.[[:lower:]]nv", ENV_SECRET),
    ("shopt -s nocaseglob; cat .E*", ENV_SECRET),
    ("shopt -s extglob\ncat .@(env)", ENV_SECRET),
    ("shopt -s dotglob; cat */../*", ENV_SECRET),
    ("GLOBIGNORE=.; cat *", ENV_SECRET),
    ("cat ${PWD}/.env", ENV_SECRET),
    ("cd src; cat ~-/.env", ENV_SECRET),
    ("f=.env; cat $f", ENV_SECRET),
    ('f=.e; cat "${f}nv"', ENV_SECRET),
    ("cat $(echo .env)", ENV_SECRET),
    ("cat `echo .env`", ENV_SECRET),
    ("cat {.env,src/app.py}", ENV_SECRET),
    ("cat .{en,x}v", ENV_SECRET),
    ("cd src && cat ../.env", ENV_SECRET),
    ("cd src; cd ..; cat ../.ssh/id_rsa", KEY_SECRET),
    ("for d in src; do cd $d; done; cat ../.env", ENV_SECRET),
    ("cd $HOME && cat .ssh/id_rsa", KEY_SECRET),
    ("cd && cat .ssh/id_rsa", KEY_SECRET),
    ("CDPATH=.. cd .ssh && cat id_rsa", KEY_SECRET),
    ("bash -O dotglob -c 'cat *'", ENV_SECRET),
    ("echo .env | xargs cat", ENV_SECRET),
    ("cat ~/.ssh/id_rsa", KEY_SECRET),
    ("cat < .env", ENV_SECRET),
    ("cat < $HOME/.ssh/id_rsa", KEY_SECRET),
]


@pytest.mark.parametrize(("command", "secret"), CLASS_2)
def test_an_expansion_that_may_name_a_denied_file_never_runs_in_bypass_mode(world, command, secret):
    project, home = world
    (project / "keys").unlink()  # only the expansion itself may reach the secret
    prints_secret(command, project, home, secret)
    for mode in ("bypassPermissions", "default", "acceptEdits"):
        got = decision(project, home, command, mode, allow=["Bash(cat:*)"])
        assert got.behavior in ("ask", "deny"), (command, mode, got)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat .en[[:alpha:]]", "deny"),  # computed by bash's rules: it names .env
        ("cat .[^x]nv", "deny"),
        ("cat .[!x]nv", "deny"),
        ("cat .e*", "deny"),
        ("pushd src && cat ../.env", "deny"),  # followed: src/../.env
        ("shopt -s nocaseglob; cat .EN?", "ask"),  # a shell option: not computed, asked
        ("cat .{e,x}nv", "ask"),  # a brace: asked
        ('cat "$PWD/.env"', "deny"),  # $PWD is where it runs: computed (issue 40 follow-up)
        ("cat *.py src/*.py", "allow"),  # bash's rules: * doesn't match .env, src has no secret
        ("cat *", "deny"),  # ... but keys -> ~/.ssh/id_rsa is one of *'s names
        ("cat .[^e]nv", "allow"),  # matches nothing: passed as written, and no such file exists
        ("cat $HOME/notes.txt", "allow"),  # $HOME is the user's home: computed, and no rule covers it
        ("echo $HOME", "allow"),  # echo reads no file
        ("for f in src/*.py; do wc -l $f; done", "allow"),  # $f walks src/*.py, computed
        ('for f in .e* src/*.py; do cat "$f"; done', "deny"),  # ... which may name .env
        ("f=.env; cat $f; for f in src/*.py; do :; done", "ask"),  # f set twice: not the loop's alone
        ('ls src/*.py | while read -r f; do cat "$f"; done', "ask"),  # read from the input
        ("find src -name '*.py' -exec cat {} +", "allow"),  # {} is a path below src: nothing denied
        ("find . -name '*.py' -exec cat {} +", "deny"),  # ... below ., where .env is
        ("grep -rn print --include=*.py .", "allow"),  # grep's own filter keeps .env out
        ("grep -rn TOKEN --exclude=*.py .", "deny"),  # ... or lets it in
        ("git diff", "allow"),  # the index holds no denied path (.env is untracked here)
        ("shopt -s nullglob; cat src/*.py", "allow"),  # the shape can't reach .env or the key
    ],
)
def test_expansions_computed_exactly_are_judged_and_the_rest_ask(world, command, expected):
    project, home = world
    if command == "git diff":
        subprocess.run(["git", "rm", "-q", "--cached", ".env"], cwd=project, check=True)
    (project / "keys").unlink() if expected != "deny" or command != "cat *" else None
    got = decision(project, home, command, "bypassPermissions")
    assert got.behavior == expected, (command, got)


def test_without_a_read_deny_rule_nothing_changes_in_bypass_mode(world):
    project, home = world
    for command, _ in CLASS_2:
        assert decision(project, home, command, "bypassPermissions", deny=()).behavior == "allow", command


# ---- end to end: print mode in bypassPermissions, a real shell, nothing leaks ---------------------


def test_print_mode_in_bypass_mode_never_sends_the_secrets(fake_api, run_cli, project, isolated_env):
    home = isolated_env
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text(KEY_SECRET)
    (project / ".env").write_text(f"TOKEN={ENV_SECRET}")
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("print(1)\n")
    subprocess.run(
        "git init -q && git add -A && git -c user.email=t@t -c user.name=t commit -qm x",
        shell=True,
        cwd=project,
        check=True,
        env={**os.environ, "HOME": str(home)},
    )
    (home / ".compact-agent").mkdir(exist_ok=True)
    (home / ".compact-agent" / "settings.json").write_text(json.dumps({"permissions": {"deny": RULES}}))
    commands = [c for c, _ in CLASS_2 if "cd HOME" not in c] + [
        "grep -r TOKEN .",
        "git show HEAD:.env",
        "git log -p",
    ]
    fake_api.reply_tools([("Bash", {"command": c}) for c in commands])
    fake_api.reply_text("done")
    result = run_cli(fake_api, "-p", "--permission-mode", "bypassPermissions", "look around")
    assert result.code == 0, result.stderr
    sent = json.dumps(fake_api.message_requests[-1].body)
    assert ENV_SECRET not in sent and KEY_SECRET not in sent
    results = [
        b
        for b in fake_api.message_requests[-1].body["messages"][-1]["content"]
        if b.get("type") == "tool_result"
    ]
    assert len(results) == len(commands) and all(b.get("is_error") for b in results)


@pytest.mark.parametrize(
    "command",
    ["sed 'r .env' src/app.py", "sed -n '1R .env' src/app.py", "sed -e p -e '$r ../.ssh/id_rsa' src/app.py"],
)
def test_a_file_a_sed_script_reads_is_a_read(world, command):
    project, home = world
    assert ENV_SECRET in run_bash(command, project, home) or KEY_SECRET in run_bash(command, project, home)
    for mode in ("default", "bypassPermissions"):
        assert decision(project, home, command, mode).behavior == "deny", (command, mode)
    assert (
        decision(project, home, "sed --sandbox 'r .env' src/app.py", "bypassPermissions").behavior == "allow"
    )


@pytest.mark.parametrize("target", [".git/config", ".claude/settings.json", "~/.bashrc"])
def test_a_redirection_glued_to_its_word_is_a_write_like_any_other(world, target):
    """Issue 30's minor, still standing in issue 40: echo hi>P under Bash(echo:*). P is written, so a
    steering file asks and an Edit deny rule refuses, however the redirection is spaced."""
    project, home = world
    for command in (f"echo hi>{target}", f"echo hi >{target}", f"echo hi>>{target}", f"echo hi 1>{target}"):
        assert decision(project, home, command, "default", deny=(), allow=["Bash(echo:*)"]).behavior == "ask"
        denied = decision(project, home, command, "bypassPermissions", deny=[f"Edit({target})"])
        assert denied.behavior == "deny", (command, denied)


def test_other_ways_to_name_a_denied_file(world):
    """A hard link to .env (the Read tool refuses it; so does Bash now), another process's view of the
    file system, a list of files from a short option or the input."""
    project, home = world
    os.link(project / ".env", project / "notes.txt")
    (project / "names").write_text(".env\n")
    for command, secret in (
        ("cat notes.txt", ENV_SECRET),
        ("cat /proc/self/cwd/.env", ENV_SECRET),
        ("tar -cf - -T names | tar -xOf -", ENV_SECRET),
        ("ls .env | zip -q - -@ | funzip", None),
    ):
        if secret:
            prints_secret(command, project, home, secret)
        for mode in ("default", "bypassPermissions"):
            got = decision(project, home, command, mode)
            assert got.behavior in ("ask", "deny"), (command, mode, got)
    os.unlink(project / "notes.txt")
    (project / "notes.txt").write_text("plain\n")
    assert decision(project, home, "cat notes.txt", "bypassPermissions").behavior == "allow"


def test_the_working_day_under_read_deny_rules(tmp_path):
    """The price: of the 92-line working day (test_bash_permissions.WORKING_DAY) under its allow rules, with
    Read(.env) and Read(~/.ssh/**) denied and a .env in the project, three lines ask, each for a read that
    can't be told before it runs; the rest run as before, in default mode and in bypassPermissions."""
    from tests.helpers.permissions import WORKING_DAY, WORKING_DAY_RULES

    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / ".env").write_text(f"TOKEN={ENV_SECRET}\n")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    asked = {
        "git diff HEAD~1 -- src/",  # the history below src may hold a .env
        'grep -l TODO -r src | while IFS= read -r f; do wc -l "$f"; done',  # f is read from the input
        "find src -name '*.py' | xargs grep -l TODO",  # xargs' input
    }
    for mode, allow in (("default", WORKING_DAY_RULES), ("bypassPermissions", [])):
        settings = RuleSettings(
            cwd=project,
            home=tmp_path / "agent",
            user_home=tmp_path / "home",
            permission_mode=mode,
            allow=list(allow),
            deny=RULES,
        )
        p = Permissions(settings)
        got = {c for c in WORKING_DAY if p.check("Bash", {"command": c}).behavior != "allow"}
        assert got == asked, (mode, got ^ asked)
