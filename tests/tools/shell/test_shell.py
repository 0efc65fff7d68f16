"""tools.shell.reader: what a Bash line runs and writes, read with tree-sitter-bash (real parses, no mocks)."""

import subprocess
import sys
from pathlib import Path

import pytest

from tools.shell.programs import Run, unwrap
from tools.shell.reader import Command, Word, analyze, risky_variable

CWD = Path("/work/project")


def lines(command):
    return [c.line() for c in analyze(command, CWD).commands]


def test_the_grammar_loads_on_the_first_bash_check_not_at_import():
    script = (
        "import sys\n"
        "import agent.runtime.session, tools.permissions.engine\n"
        "from pathlib import Path\n"
        "from agent.config.settings import Settings\n"
        "p = tools.permissions.engine.Permissions(Settings(cwd=Path('/tmp'), home=Path('/tmp/h')))\n"
        "p.check('Read', {'file_path': '/tmp/x'})\n"
        "print('tree_sitter' in sys.modules, end=' ')\n"
        "p.check('Bash', {'command': 'ls'})\n"
        "print('tree_sitter' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout == "False True\n", out.stderr


@pytest.mark.parametrize(
    ("command", "program"),
    [
        ("git status", "git"),
        ("'git' status", "git"),
        ('"git" status', "git"),
        ("\\git status", "git"),
        ("g\\it status", "git"),
        ("g''it status", "git"),
        ('"g"it status', "git"),
        ("/usr/bin/git status", "/usr/bin/git"),
        ("a\\ b status", "a b"),
        ("$'git' status", None),
        ('"$G" status', None),
        ("${G} status", None),
        ("$(which git) status", None),
        ("g*t status", None),
        ("g[i]t status", None),
        ("~/bin/git status", None),
    ],
)
def test_a_program_name_is_literal_only_after_plain_quote_removal(command, program):
    a = analyze(command, CWD)
    resolved = [c.program for c in a.commands if c.line().endswith(" status")]
    assert resolved == ([program] if program else [])
    assert bool(a.unresolved or a.error) == (program is None)


def test_arguments_keep_their_text_when_they_have_an_expansion():
    (command,) = analyze('grep -rn "$PAT" src/*.py "a b" \'c\'', CWD).commands
    assert command.words == (
        Word("grep", "grep"),
        Word("-rn", "-rn"),
        Word('"$PAT"', None),
        Word("src/*.py", None),
        Word('"a b"', "a b"),
        Word("'c'", "c"),
    )
    assert command.line() == 'grep -rn "$PAT" src/*.py a b c'
    assert command.known_head() == "grep -rn"


def test_simple_commands_are_found_wherever_they_are_nested():
    command = (
        "if a; then b | c; fi && (d) && { e; } ; f $(g `h`) <(i) >(j); k() { l; }; "
        "for x in y; do m; done; while n; do o; done; case z in z) p;; esac; cat <<EOF\n$(q)\nEOF"
    )
    programs = [c.program for c in analyze(command, CWD).commands]
    assert sorted(programs) == sorted("a b c d e h g f i j l m n o p q cat".split())


def test_wrappers_list_what_they_run():
    a = analyze("timeout 5 nice -n 2 env A=1 pytest -q", CWD)
    assert [(c.line(), c.wrapper) for c in a.commands] == [
        ("timeout 5 nice -n 2 env A=1 pytest -q", True),
        ("nice -n 2 env A=1 pytest -q", True),
        ("env A=1 pytest -q", True),
        ("pytest -q", False),
    ]


def test_shell_scripts_are_parsed_in_turn():
    assert lines("bash -c 'cd x && make' && sh -c \"eval 'ls'\"") == [
        "bash -c cd x && make",
        "cd x",
        "make",
        "sh -c eval 'ls'",
        "eval ls",
        "ls",
    ]


def test_unresolved_reasons_name_the_command():
    a = analyze("echo ok; $CMD x; source env.sh", CWD)
    assert a.unresolved == (
        "$CMD x: the program name comes from a variable expansion",
        "source env.sh: source runs the commands of a script file",
    )


@pytest.mark.parametrize(
    ("command", "variables"),
    [
        ("PATH=/x ls", ("sets PATH",)),
        ("export LD_PRELOAD=/x.so", ("sets LD_PRELOAD",)),
        ("FOO=1 BAR=2 ls; X=3", ()),
        ("env GIT_SSH_COMMAND=x git fetch", ("sets GIT_SSH_COMMAND",)),
        ("git -c core.pager=less log", ("sets git configuration with -c",)),
        ("for IFS in a; do :; done", ("sets IFS",)),
        ("IFS=, read -r a b < f", ()),  # only read's own splitting
        ("IFS=, ls", ("sets IFS",)),
        ("IFS=$(cat f) read -r a", ("sets IFS",)),
    ],
)
def test_variables_that_change_what_runs(command, variables):
    assert analyze(command, CWD).variables == variables


def test_risky_variable():
    assert [
        risky_variable(n) for n in ["PATH", "LD_LIBRARY_PATH", "GIT_CONFIG_COUNT", "CI", "PYTEST_ADDOPTS"]
    ] == [True, True, True, False, False]


def test_writes_are_resolved_in_every_directory_the_line_may_be_in():
    a = analyze("echo a > out; (cd sub && echo b >> log) ; echo c 2>&1 >/dev/null; cat < in", CWD)
    assert [(w.target, w.paths) for w in a.writes] == [
        ("out", (CWD / "out", CWD / "sub" / "out")),
        ("log", (CWD / "log", CWD / "sub" / "log")),
        ("/dev/null", (Path("/dev/null"),)),
    ]


def test_a_cd_is_followed_both_textually_and_through_symlinks():
    # plain cd takes "up/.." as the current directory; cd -P as the parent of wherever up points
    assert analyze("cd -P up/.. && echo > out", CWD).writes[0].paths == (
        CWD / "out",
        CWD / "up" / ".." / "out",
    )


def test_time_is_the_keyword_timing_a_pipeline():
    assert lines("time ! rm f") == ["time ! rm f", "rm f"]
    assert analyze("time { rm f; }", CWD).unresolved == (
        "time { rm f: time runs a compound command that the parser splits apart",
    )


def test_writes_that_cannot_be_placed_have_no_paths():
    assert [w.paths for w in analyze('echo > "$F"; cd "$D"; echo > x', CWD).writes] == [(), ()]
    assert [w.paths for w in analyze("for d in a b; do cd $d; done; echo > x", CWD).writes] == [()]


def test_a_redirect_target_is_not_normalised():
    # "link/../x" is resolved through the link by the kernel, so the permission check must see the ".."
    assert analyze("echo > link/../x", CWD).writes[0].paths == (CWD / "link" / ".." / "x",)


@pytest.mark.parametrize("command", ["echo 'a", "if true; then", "ls )", "{rm,f}", "r\\\nm f", "a <> b"])
def test_lines_bash_cannot_parse_report_an_error(command):
    assert analyze(command, CWD).error is not None


def test_a_backslash_newline_between_words_is_fine():
    a = analyze("pytest \\\n  -q", CWD)
    assert (a.error, lines("pytest \\\n  -q")) == (None, ["pytest -q"])


def test_backquotes_are_parsed_after_their_own_unescaping():
    assert "rm f" in lines("echo `echo \\`rm f\\``")


@pytest.mark.parametrize(
    ("command", "unresolved"),
    [
        ("echo $((1 + 2))", False),
        ("for ((i = 0; i < 3; i++)); do echo $i; done", False),
        ("n=5; echo $((n * 2))", False),
        ("x=$(cat f); echo $((x + 1))", True),
        ("read n < f; [[ $n -gt 1 ]]", True),
        ("for f in *; do echo $((f)); done", True),
    ],
)
def test_arithmetic_on_data_is_unresolved(command, unresolved):
    assert any("arithmetic" in u for u in analyze(command, CWD).unresolved) == unresolved


@pytest.mark.parametrize(
    ("values", "runs", "scripts", "unresolved", "transparent"),
    [
        (["timeout", "-s", "KILL", "5", "rm", "x"], (Run(4, 6),), (), False, True),
        (["xargs", "-0", "rm"], (Run(2, 3, appends_input=True),), (), False, True),
        (["sudo", "-u", "root", "rm", "x"], (Run(3, 5),), (), False, False),
        (
            ["find", ".", "-exec", "rm", "{}", ";", "-o", "-execdir", "ls", "+"],
            (Run(3, 5, placeholder="{}"), Run(8, 9, placeholder="{}")),
            (),
            False,
            False,
        ),
        (["bash", "-o", "pipefail", "-c", "ls"], (), ("ls",), False, True),
        (["watch", "-n", "1", "ls", "-l"], (), ("ls -l",), False, True),
        (["eval", "ls", "-l"], (), ("ls -l",), True, False),
        (["python3", "-m", "pytest", "-c", "x.ini"], (), (), False, False),
        (["python3", "-c", "print(1)"], (), (), True, False),
        (["perl", "-pi", "-e", "s/a/b/", "f"], (), (), True, False),
        (["node", "script.js"], (), (), False, False),
        (["awk", "{print $1}"], (), (), False, False),
        (["command", "-v", "git"], (), (), False, False),
        (["ls", "-l"], (), (), False, False),
    ],
)
def test_unwrap(values, runs, scripts, unresolved, transparent):
    how = unwrap(values)
    assert (how.runs, how.scripts, how.unresolved is not None, how.transparent) == (
        runs,
        scripts,
        unresolved,
        transparent,
    )


def test_command_line_and_head():
    command = Command((Word("git", "git"), Word("$X", None), Word("push", "push")))
    assert (command.line(), command.known_head(), command.program) == ("git $X push", "git", "git")


# ---- issue 20: evaluation, arguments that run commands or write files, subcommands -------------------


def test_commands_written_inside_arguments_are_parsed_as_commands():
    assert lines("sed '1e rm f' x")[1:] == ["rm f"]
    assert lines("git -C . rebase --exec 'make test' main")[1:] == ["make test"]
    assert lines("git bisect run ./check.sh 3")[1:] == ["./check.sh 3"]
    assert lines("flock /tmp/l -c 'rm -f a'")[1:] == ["rm -f a"]
    assert lines("fd -e py -x wc -l")[1:] == ["wc -l"]


@pytest.mark.parametrize(
    ("command", "targets"),
    [
        ("cp a b", ["b", "b/a"]),
        ("cp -t out a b", ["out", "out/a", "out/b"]),
        ("mv -f a dir/", ["dir/", "dir/a"]),
        ("install -D -m 644 a /tmp/x", ["/tmp/x", "/tmp/x/a"]),
        ("echo x | tee -a log1 log2", ["log1", "log2"]),
        ("dd if=/dev/zero of=disk.img bs=1M", ["disk.img"]),
        ("sed -n 's/a/b/w out1\nw out2' f", ["out1", "out2"]),
        ("sed -i.bak -e 's/a/b/' f1 f2", ["f1", "f2"]),
        ("git log -p --output=log.txt", ["log.txt"]),
        ("git format-patch -o patches HEAD~2", ["patches"]),
        ("sort -o sorted f", ["sorted"]),
        ("curl -sSo page.html https://x", ["page.html"]),
        ("touch -d yesterday a", ["a"]),
    ],
)
def test_files_programs_write_through_their_arguments(command, targets):
    assert [w.target for w in analyze(command, CWD).writes] == targets


def test_unpacking_and_recursive_copies_fill_trees_and_symlinks_hide_later_writes():
    unpack = analyze("tar -xzf a.tgz -C build", CWD).writes
    assert [(w.target, w.tree, w.unpacked) for w in unpack] == [("build", True, True)]
    copy = analyze("cp -r src build", CWD).writes
    assert [(w.target, w.tree, w.unpacked) for w in copy] == [
        ("build", True, False),
        ("build/src", True, False),
    ]
    linked = analyze("echo a > before; ln -s /etc up && echo x > up/passwd", CWD).writes
    assert [(w.target, bool(w.paths)) for w in linked] == [
        ("before", True),
        ("up", True),
        ("up/etc", True),
        ("up/passwd", False),
    ]


@pytest.mark.parametrize(
    ("command", "subcommand", "unknown"),
    [
        ("git -C . --no-pager push origin", 4, None),
        ("git --work-tree=. push", 2, None),
        ("kubectl -nprod --context=x delete pod", 3, None),
        ("terraform -chdir=infra apply", 2, None),
        ("cargo +nightly -q build", 3, None),
        ("git --frobnicate push", None, "the option --frobnicate before the subcommand is unknown here"),
        ("git --version", None, None),
        ("ls -la", None, None),
    ],
)
def test_the_subcommand_is_found_past_global_options(command, subcommand, unknown):
    (c,) = analyze(command, CWD).commands
    assert (c.subcommand if c.subcommand != 1 else None, c.subcommand_unknown) == (subcommand, unknown)


@pytest.mark.parametrize(
    "command",
    [
        "x=$(cat f); echo $((x))",
        "read -r ref; echo ${!ref}",
        "read -r v; echo ${v@P}",
        "v=$1; echo ${s:v}",
        "[[ $(cat f) -ne 0 ]]",
    ],
)
def test_expansions_that_evaluate_data_are_unresolved(command):
    unresolved = analyze(command, CWD).unresolved
    assert any("evaluat" in u or "expansion" in u for u in unresolved), unresolved


def test_expansions_of_the_users_environment_or_fixed_values_are_not():
    for command in ("echo ${!ref} ${HOME@P}", "v=3; echo ${s:v} $((v + 1))", "echo ${a[@]:1} $(( $# ))"):
        assert analyze(command, CWD).unresolved == (), command


def test_a_caller_already_deep_in_its_stack_gets_a_refusal_not_a_recursion_error():
    def deep(n):
        return deep(n - 1) if n else analyze("echo " + "$(" * 100 + "x" + ")" * 100, CWD)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        a = deep(150)
    finally:
        sys.setrecursionlimit(limit)
    assert a.error is not None and "deep" in a.error
