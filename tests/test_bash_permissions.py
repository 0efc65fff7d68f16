"""Bash permission decisions on real parses: ways to hide a program from a rule, and a normal working day.

Each bypass row gives the decision under a deny rule ``Bash(rm:*)`` in bypassPermissions mode (deny wins
in every mode, so nothing that might run rm may be allowed there), and under an allow rule chosen for the
row in default mode (a wrapper, an expansion or a write outside the project must not ride on it). With no
rules, acceptEdits allows none of them.
"""

import pytest

from tests.test_permissions import RuleSettings
from tools.permissions import Permissions

DENY_RM = ["Bash(rm:*)"]

# (command, decision under deny Bash(rm:*) in bypassPermissions, allow rule(s), decision under them)
BYPASSES = [
    # the program hidden by quoting, escapes, expansions, globs, braces, paths
    ("rm f", "deny", "Bash(rm:*)", "allow"),
    ("\\rm f", "deny", "Bash(rm:*)", "allow"),
    ("r\\m f", "deny", "Bash(rm:*)", "allow"),
    ("r''m f", "deny", "Bash(rm:*)", "allow"),
    ('"r"m f', "deny", "Bash(rm:*)", "allow"),
    ("'rm' f", "deny", "Bash(rm:*)", "allow"),
    ("/usr/bin/rm f", "deny", "Bash(rm:*)", "ask"),
    ("./rm f", "deny", "Bash(rm:*)", "ask"),
    ("$'rm' f", "deny", "Bash(rm:*)", "ask"),
    ("$'\\x72m' f", "deny", "Bash(rm:*)", "ask"),
    ("rm${IFS}f", "deny", "Bash(rm:*)", "ask"),
    ("rm$IFS f", "deny", "Bash(rm:*)", "ask"),
    ("X=rm; $X f", "deny", "Bash(rm:*)", "ask"),
    ("${CMD} f", "deny", "Bash(rm:*)", "ask"),
    ('a=rm; "$a" f', "deny", "Bash(rm:*)", "ask"),
    ("$(echo rm) f", "deny", "Bash(echo:*)", "ask"),
    ("$(printf rm) f", "deny", "Bash(printf:*)", "ask"),
    ("`echo rm` f", "deny", "Bash(echo:*)", "ask"),
    ("/bin/r[m] f", "deny", "Bash(/bin/rm:*)", "ask"),
    ("/bin/r? f", "deny", "Bash(rm:*)", "ask"),
    ("/bin/r* f", "deny", "Bash(rm:*)", "ask"),
    ("{rm,f}", "deny", "Bash(rm:*)", "ask"),
    ("{rm,-f} x", "deny", "Bash(rm:*)", "ask"),
    ("~/bin/rm f", "deny", "Bash(rm:*)", "ask"),
    ("r\\\nm f", "deny", "Bash(r:*)", "ask"),  # bash joins r\<newline>m into rm
    ("rm", "deny", "Bash(echo:*)", "ask"),
    # lists, pipelines, groups, conditionals, loops, case
    ("echo x; rm f", "deny", "Bash(echo:*)", "ask"),
    ("false || rm f", "deny", "Bash(false)", "ask"),
    ("ls | rm f", "deny", "Bash(ls:*)", "ask"),
    ("(rm f)", "deny", "Bash(echo:*)", "ask"),
    ("{ rm f; }", "deny", "Bash(echo:*)", "ask"),
    ("! rm f", "deny", "Bash(echo:*)", "ask"),
    ("if true; then rm f; fi", "deny", "Bash(true)", "ask"),
    ("while false; do rm f; done", "deny", "Bash(false)", "ask"),
    ("for i in 1; do rm f; done", "deny", "Bash(echo:*)", "ask"),
    ("case x in x) rm f;; esac", "deny", "Bash(echo:*)", "ask"),
    ("[[ $(rm f) ]]", "deny", "Bash(echo:*)", "ask"),
    # substitutions and heredocs
    ("echo `rm f`", "deny", "Bash(echo:*)", "ask"),
    ("echo $(rm f)", "deny", "Bash(echo:*)", "ask"),
    ("echo `echo \\`rm f\\``", "deny", "Bash(echo:*)", "ask"),  # backquotes nest through \`
    ("echo `echo \\$(rm f)`", "deny", "Bash(echo:*)", "ask"),
    ("cat <(rm f)", "deny", "Bash(cat:*)", "ask"),
    ("echo x > >(rm f)", "deny", "Bash(echo:*)", "ask"),
    ("x=$(rm f)", "deny", "Bash(echo:*)", "ask"),
    ("a[$(rm f)]=1", "deny", "Bash(echo:*)", "ask"),
    ("echo ${x:-$(rm f)}", "deny", "Bash(echo:*)", "ask"),
    ("cat <<EOF\n$(rm f)\nEOF", "deny", "Bash(cat:*)", "ask"),
    ("cat <<'EOF'\n$(rm f)\nEOF", "allow", "Bash(cat:*)", "allow"),  # a quoted heredoc is only text
    # shells and code runners
    ("bash -c 'rm f'", "deny", "Bash(bash:*)", "ask"),
    ("bash -o pipefail -c 'rm f'", "deny", "Bash(bash:*)", "ask"),
    ("sh -ec 'rm f'", "deny", "Bash(sh:*)", "ask"),
    ("bash -c 'bash -c \"rm f\"'", "deny", "Bash(bash:*)", "ask"),
    ('bash -c "$CMD"', "deny", "Bash(bash:*)", "ask"),
    ("echo 'rm f' | bash", "deny", "Bash(echo:*)", "ask"),
    ("bash <<< 'rm f'", "deny", "Bash(bash:*)", "ask"),
    ("cat <<EOF | bash\nrm f\nEOF", "deny", "Bash(cat:*)", "ask"),
    ("bash -s < script.sh", "deny", "Bash(bash:*)", "ask"),
    ("sh script.sh", "deny", "Bash(sh:*)", "ask"),
    ("bash --rcfile x.sh -c true", "deny", "Bash(true)", "ask"),
    ("zsh -c 'rm f'", "deny", "Bash(zsh:*)", "ask"),
    ("fish -c 'rm f'", "deny", "Bash(fish:*)", "ask"),
    (". ./x.sh", "deny", "Bash(.:*)", "ask"),
    ("source x", "deny", "Bash(source:*)", "ask"),
    ("eval rm f", "deny", "Bash(eval:*)", "ask"),
    ('eval "$(echo rm f)"', "deny", "Bash(echo:*)", "ask"),
    ("exec rm f", "deny", "Bash(exec:*)", "ask"),
    ("exec -a x rm f", "deny", "Bash(exec:*)", "ask"),
    ('f() { rm "$@"; }; f x', "deny", "Bash(f:*)", "ask"),
    ("function g { echo; }; g", "deny", "Bash(g)", "ask"),
    ("alias r=rm", "deny", "Bash(alias:*)", "ask"),
    ("trap 'rm f' EXIT", "deny", "Bash(trap:*)", "ask"),
    ("coproc rm f", "deny", "Bash(coproc:*)", "ask"),
    ("hash -p /bin/rm ls; ls f", "deny", "Bash(ls:*)", "ask"),
    ("enable -f ./x.so rm", "deny", "Bash(enable:*)", "ask"),
    ('python -c "import os"', "deny", "Bash(python:*)", "ask"),
    ("python3 - <<'EOF'\nimport os\nEOF", "deny", "Bash(python3:*)", "ask"),
    ("perl -e 'unlink \"f\"'", "deny", "Bash(perl:*)", "ask"),
    ("ruby -e 'File.delete(\"f\")'", "deny", "Bash(ruby:*)", "ask"),
    ('node -e \'require("fs").rmSync("f")\'', "deny", "Bash(node:*)", "ask"),
    ("awk 'BEGIN { system(\"rm f\") }'", "deny", "Bash(awk:*)", "ask"),
    ("mapfile -C 'rm f' -c 1 a < list", "deny", "Bash(mapfile:*)", "ask"),
    # programs that run programs
    ("command rm f", "deny", "Bash(command:*)", "ask"),
    ("command -p rm f", "deny", "Bash(command:*)", "ask"),
    ("builtin command rm f", "deny", "Bash(builtin:*)", "ask"),
    ("env rm f", "deny", "Bash(env:*)", "ask"),
    ("env -i rm f", "deny", "Bash(env:*)", "ask"),
    ("env -S 'rm f'", "deny", "Bash(env:*)", "ask"),
    ("nice -n 5 rm f", "deny", "Bash(rm:*)", "allow"),  # nice only changes how, not what
    ("nice -5 rm f", "deny", "Bash(nice:*)", "ask"),
    ("timeout 5 rm f", "deny", "Bash(timeout:*)", "ask"),
    ("timeout -s KILL 5s rm f", "deny", "Bash(timeout:*)", "ask"),
    ("timeout --bogus 5 rm f", "deny", "Bash(timeout:*)", "ask"),
    ("nohup rm f &", "deny", "Bash(nohup:*)", "ask"),
    ("time rm f", "deny", "Bash(time:*)", "ask"),
    ("time ! rm f", "deny", "Bash(time:*)", "ask"),  # the keyword times a pipeline, negated or not
    ("time -p rm f | cat", "deny", ("Bash(time:*)", "Bash(cat:*)"), "ask"),
    ("time { rm f; }", "deny", "Bash(time:*)", "ask"),  # the grammar splits the group at its ";"
    ("'time' rm f", "deny", "Bash(time:*)", "ask"),  # /usr/bin/time
    ("stdbuf -o0 rm f", "deny", "Bash(stdbuf:*)", "ask"),
    ("setsid rm f", "deny", "Bash(setsid:*)", "ask"),
    ("sudo rm f", "deny", "Bash(rm:*)", "ask"),  # sudo needs a rule of its own
    ("sudo -u x rm f", "deny", "Bash(sudo:*)", "ask"),
    ("sudo sh -c 'rm f'", "deny", "Bash(sudo:*)", "ask"),
    ("doas rm f", "deny", "Bash(doas:*)", "ask"),
    ("busybox rm f", "deny", "Bash(busybox:*)", "ask"),
    ("watch -n 1 rm f", "deny", "Bash(watch:*)", "ask"),
    ("parallel rm ::: a b", "deny", "Bash(parallel:*)", "ask"),
    ("xargs rm < list", "deny", "Bash(xargs:*)", "ask"),
    ("ls | xargs -0 -I{} rm {}", "deny", ("Bash(ls:*)", "Bash(xargs:*)"), "ask"),
    ("find . -exec rm {} \\;", "deny", "Bash(find:*)", "ask"),
    ("find . -name x -execdir rm {} +", "deny", "Bash(find:*)", "ask"),
    ("find . -ok rm {} \\;", "deny", "Bash(find:*)", "ask"),
    ("find . -name '*.tmp' -delete", "deny", "Bash(find:*)", "ask"),
    ("su -c 'rm f'", "deny", "Bash(su:*)", "ask"),
    ("script -c 'rm f' /dev/null", "deny", "Bash(script:*)", "ask"),
    ("command $RM f", "deny", "Bash(command:*)", "ask"),
    # variables that change which program runs
    ("PATH=./evil:$PATH git status", "deny", "Bash(git status)", "ask"),
    ("export PATH=./evil:$PATH; git status", "deny", "Bash(git status)", "ask"),
    ("env PATH=. git status", "deny", "Bash(git status)", "ask"),
    ("BASH_ENV=./x.sh bash -c true", "deny", "Bash(true)", "ask"),
    ("LD_PRELOAD=./x.so ls", "deny", "Bash(ls:*)", "ask"),
    ("IFS=/ ls", "deny", "Bash(ls:*)", "ask"),
    ("PYTHONPATH=. python -m pytest", "deny", "Bash(python -m pytest:*)", "ask"),
    ("NODE_OPTIONS='--require ./x.js' npm test", "deny", "Bash(npm test)", "ask"),
    ("GIT_SSH_COMMAND='rm f' git fetch", "deny", "Bash(git fetch:*)", "ask"),
    ("GIT_CONFIG_GLOBAL=./x git status", "deny", "Bash(git status)", "ask"),
    ("git -c core.pager='rm f' log", "deny", "Bash(git:*)", "ask"),
    ("declare -n r=PATH; r=./evil; git status", "deny", "Bash(git status)", "ask"),
    ("read PATH < p; git status", "deny", ("Bash(read:*)", "Bash(git status)"), "ask"),
    ("env 'BASH_FUNC_git%%=() { rm f; }' bash -c 'git status'", "deny", "Bash(git status)", "ask"),
    # arithmetic that bash can turn into a command
    ("x=$(cat f); echo $((x))", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("printf -v 'a[$(rm f)]' x", "deny", "Bash(printf:*)", "ask"),
    ("let x=1", "deny", "Bash(let:*)", "ask"),
    # redirections writing outside the project or into the agent's own controls
    ("echo x > ../P", "allow", "Bash(echo:*)", "ask"),
    ("echo x >> /tmp/P", "allow", "Bash(echo:*)", "ask"),
    ("echo x &> ../P", "allow", "Bash(echo:*)", "ask"),
    ("echo x >| ../P", "allow", "Bash(echo:*)", "ask"),
    ("echo x >& ../P", "allow", "Bash(echo:*)", "ask"),
    ("exec 3> ../P", "allow", "Bash(echo:*)", "ask"),
    ('echo x > "$OUT"', "allow", "Bash(echo:*)", "ask"),
    ("echo x > ~/.bashrc", "allow", "Bash(echo:*)", "ask"),
    ("cd .. && echo x > P", "allow", ("Bash(cd:*)", "Bash(echo:*)"), "ask"),
    ("cd /tmp; echo x > P", "allow", ("Bash(cd:*)", "Bash(echo:*)"), "ask"),
    ("cd $D; echo x > P", "allow", ("Bash(cd:*)", "Bash(echo:*)"), "ask"),
    ("cd -P up/.. && echo x > P", "allow", ("Bash(cd:*)", "Bash(echo:*)"), "ask"),  # up -> outside
    ("echo x > .claude/settings.json", "allow", "Bash(echo:*)", "ask"),
    ("echo x > .claude/hooks/pre.sh", "allow", "Bash(echo:*)", "ask"),
    ("echo x > .git/hooks/pre-commit", "allow", "Bash(echo:*)", "ask"),
    ("echo x >> .git/config", "allow", "Bash(echo:*)", "ask"),
    # only mentioning the word
    ("echo rm f", "allow", "Bash(echo:*)", "allow"),
    ("git rm f", "allow", "Bash(git rm:*)", "allow"),
    ("grep -r rm .", "allow", "Bash(grep:*)", "allow"),
    ("echo '(rm f)'", "allow", "Bash(echo:*)", "allow"),
    ("rmdir x", "allow", "Bash(rmdir:*)", "allow"),
]


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


def test_the_bypass_table_is_large():
    assert len(BYPASSES) >= 80


@pytest.mark.parametrize(("command", "under_deny", "rules", "under_allow"), BYPASSES)
def test_bypass_forms(project, command, under_deny, rules, under_allow):
    (project / "up").symlink_to(project.parent)
    rules = [rules] if isinstance(rules, str) else list(rules)
    denying = perms(project, deny=DENY_RM, permission_mode="bypassPermissions")
    allowing = perms(project, allow=rules)
    editing = perms(project, permission_mode="acceptEdits")
    assert (
        denying.check("Bash", {"command": command}).behavior,
        allowing.check("Bash", {"command": command}).behavior,
        editing.check("Bash", {"command": command}).behavior,
    ) == (under_deny, under_allow, "ask")


WORKING_DAY_RULES = [
    "Bash(git status:*)",
    "Bash(git diff:*)",
    "Bash(git log:*)",
    "Bash(pytest:*)",
    "Bash(npm test)",
    "Bash(ls:*)",
    "Bash(grep:*)",
    "Bash(head:*)",
    "Bash(tail:*)",
    "Bash(cd:*)",
    "Bash(make)",
    "Bash(python -m pytest:*)",
    "Bash(echo:*)",
    "Bash(cat:*)",
    "Bash(wc:*)",
    "Bash(find:*)",
    "Bash(sort:*)",
    "Bash(mkdir:*)",
    "Bash(read:*)",
]

WORKING_DAY = [
    "git status",
    "git status --short",
    "git diff --stat",
    "git diff HEAD~1 -- src/",
    "git log --oneline -5",
    "git log --format='%h %s' -n 3",
    "pytest -q",
    'pytest tests/test_x.py -k "name and not slow"',
    "pytest -q > test.log 2>&1",
    "npm test",
    "npm test 2>&1 | tail -20",
    "FOO=bar npm test",
    "export CI=1 && npm test",
    "ls -la | grep x",
    "ls src/*.py",
    "ls | wc -l",
    "cd x && make",
    "cd src && ls",
    "(cd src && ls)",
    "mkdir -p build && cd build && make",
    "make 2>/dev/null",
    "[ -f Makefile ] && make",
    "if [ -d build ]; then ls build; fi",
    "python -m pytest tests/ -q 2>&1 | tail -5",
    "python -m pytest -x -q tests/test_a.py::test_b",
    "echo hi > out.txt",
    "echo hi >> logs/run.txt",
    'echo "$HOME"',
    "echo $((1 + 2))",
    "echo done; ls",
    "grep -rn foo src | head",
    "grep -rn 'def main' --include=*.py . | head -20",
    "grep -c x file || echo none",
    "cat README.md | wc -l",
    "cat > notes.txt <<'EOF'\nhello\nEOF",
    "find . -name '*.py' | sort | head",
    "find src -name '*.py' -exec grep -l TODO {} +",
    'for f in src/*.py; do wc -l "$f"; done',
    "tail -n 20 log.txt",
    "git diff | head -50",
    "ls -la && git status",
    "git status && git diff --stat && pytest -q",
    'grep -l TODO -r src | while IFS= read -r f; do wc -l "$f"; done',
]


def test_the_working_day_table_is_large():
    assert len(WORKING_DAY) >= 40


@pytest.mark.parametrize("deny", [[], DENY_RM], ids=["no deny rule", "deny rm"])
@pytest.mark.parametrize("command", WORKING_DAY)
def test_a_working_day_is_allowed_by_the_rules_that_name_it(project, command, deny):
    (project / "logs").mkdir()
    decision = perms(project, allow=WORKING_DAY_RULES, deny=deny).check("Bash", {"command": command})
    assert decision.behavior == "allow", decision.reason
