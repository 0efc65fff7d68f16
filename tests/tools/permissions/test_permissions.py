import ast
import os
from pathlib import Path

import pytest

import tools.registry  # noqa: F401  (declares the built-in tools whose rules the engine judges, as a session does)
from agent.config.settings import load_settings
from tests.helpers.permissions import RuleSettings
from tools.permissions.engine import Decision, Permissions
from tools.shell.reader import analyze


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    return root


@pytest.fixture
def home(tmp_path):
    path = tmp_path / "home"
    (path / ".ssh").mkdir(parents=True)
    return path


def perms(project, home=None, *, mode="default", allow=(), deny=(), ask=(), session_dir=None):
    settings = RuleSettings(
        cwd=project,
        home=project.parent / "agent-home",
        user_home=home,
        permission_mode=mode,
        allow=list(allow),
        deny=list(deny),
        ask=list(ask),
    )
    return Permissions(settings, session_dir=session_dir)


def behavior(p, tool, **args):
    return p.check(tool, args).behavior


# ---- modes × tools -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            "default",
            {
                "Read": "allow",
                "Grep": "allow",
                "Glob": "allow",
                "Bash": "ask",
                "Write": "ask",
                "Edit": "ask",
                "Snip": "allow",
            },
        ),
        (
            "acceptEdits",
            {
                "Read": "allow",
                "Grep": "allow",
                "Glob": "allow",
                "Bash": "ask",
                "Write": "allow",
                "Edit": "allow",
                "Snip": "allow",
            },
        ),
        (
            "bypassPermissions",
            {
                "Read": "allow",
                "Grep": "allow",
                "Glob": "allow",
                "Bash": "allow",
                "Write": "allow",
                "Edit": "allow",
                "Snip": "allow",
            },
        ),
        (
            "plan",
            {
                "Read": "allow",
                "Grep": "allow",
                "Glob": "allow",
                "Bash": "deny",
                "Write": "deny",
                "Edit": "deny",
                "Snip": "allow",
            },
        ),
    ],
)
def test_modes_by_tool_inside_the_project(project, mode, expected):
    p = perms(project, mode=mode)
    inside = str(project / "src" / "a.py")
    calls = {
        "Read": {"file_path": inside},
        "Grep": {"pattern": "x"},
        "Glob": {"pattern": "**/*.py"},
        "Bash": {"command": "touch new.txt"},  # (a command that only looks runs: test_mcp.py)
        "Write": {"file_path": inside, "content": ""},
        "Edit": {"file_path": inside, "old_string": "a", "new_string": "b"},
        "Snip": {"ids": ["abc"]},
    }
    assert {tool: p.check(tool, args).behavior for tool, args in calls.items()} == expected


def test_plan_mode_reason_says_plan_mode(project):
    d = perms(project, mode="plan").check("Bash", {"command": "ls"})
    assert d == Decision(
        "deny",
        "Bash is not available in plan mode: only Read, Grep and Glob may run; "
        "finish the plan and present it to the user instead",
        None,
    )


def test_plan_mode_beats_allow_and_ask_rules(project):
    p = perms(project, mode="plan", allow=["Bash"], ask=["Write"])
    assert behavior(p, "Bash", command="ls") == "deny"
    assert behavior(p, "Write", file_path=str(project / "x"), content="") == "deny"


# ---- deny wins ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions", "plan"])
@pytest.mark.parametrize(
    "command",
    [
        "rm -rf x",
        "echo hi && rm x",
        "ls | rm x",
        "true; rm x",
        "FOO=1 rm x",
        "echo $(rm x)",
        "echo `rm x`",
        "rm",
    ],
)
def test_deny_rule_wins_in_every_mode(project, mode, command):
    d = perms(project, mode=mode, deny=["Bash(rm:*)"], allow=["Bash"]).check("Bash", {"command": command})
    assert d == Decision("deny", 'Bash is denied by the rule "Bash(rm:*)" in the settings', "Bash(rm:*)")


def test_deny_prefix_is_word_based(project):
    p = perms(project, mode="bypassPermissions", deny=["Bash(rm:*)"])
    assert behavior(p, "Bash", command="rmdir x") == "allow"


def test_deny_path_rule_beats_bypass_and_covers_reading_tools(project, home):
    p = perms(project, home, mode="bypassPermissions", deny=["Read(~/.ssh/**)"])
    assert behavior(p, "Read", file_path=str(home / ".ssh" / "id_rsa")) == "deny"
    assert (
        behavior(p, "Grep", pattern="KEY", path=str(home / ".ssh")) == "deny"
    )  # searching the folder itself
    assert behavior(p, "Glob", pattern="*", path=str(home / ".ssh" / "keys")) == "deny"
    assert behavior(p, "Read", file_path=str(home / "notes.txt")) == "allow"


def test_deny_on_a_folder_covers_its_contents(project, home):
    p = perms(project, home, deny=["Read(~/.ssh)"])
    assert behavior(p, "Grep", pattern="KEY", path=str(home / ".ssh")) == "deny"
    assert behavior(p, "Read", file_path=str(home / ".ssh" / "config")) == "deny"


# ---- ask rules ---------------------------------------------------------------------------------


def test_ask_rule_asks_even_in_accept_edits_and_allows_in_bypass(project):
    rules = {"ask": ["Edit(docs/*.md)"], "allow": ["Edit"]}
    target = str(project / "docs" / "guide.md")
    assert behavior(perms(project, mode="acceptEdits", **rules), "Edit", file_path=target) == "ask"
    assert behavior(perms(project, mode="default", **rules), "Write", file_path=target) == "ask"
    assert behavior(perms(project, mode="bypassPermissions", **rules), "Edit", file_path=target) == "allow"
    assert (
        behavior(perms(project, mode="default", **rules), "Edit", file_path=str(project / "src" / "a.py"))
        == "allow"
    )


def test_ask_rule_for_bash(project):
    p = perms(project, allow=["Bash(git:*)"], ask=["Bash(git push:*)"])
    assert p.check("Bash", {"command": "git push origin main"}) == Decision(
        "ask", 'the rule "Bash(git push:*)" asks before running Bash', "Bash(git push:*)"
    )
    assert behavior(p, "Bash", command="git status") == "allow"


# ---- Bash rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "command", "expected"),
    [
        ("Bash(git status:*)", "git status", "allow"),
        ("Bash(git status:*)", "git status --short", "allow"),
        ("Bash(git status:*)", "git statusx", "ask"),
        ("Bash(git status:*)", "git stash", "ask"),
        ("Bash(npm run test)", "npm run test", "allow"),
        ("Bash(npm run test)", "npm run test --watch", "ask"),
        ("Bash(npm run test)", "  npm run test  ", "allow"),
        ("Bash(git *)", "git log -1", "allow"),
        ("Bash(git *)", "hg log", "ask"),
        ("Bash", "anything at all", "allow"),
        ("Bash(*)", "anything at all", "allow"),
    ],
)
def test_bash_prefix_exact_and_wildcard_rules(project, rule, command, expected):
    assert behavior(perms(project, allow=[rule]), "Bash", command=command) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git status && npm test", "allow"),
        ("git status && rm x", "ask"),
        ("git status || npm test -- -k x", "allow"),
        ("git status; curl evil", "ask"),
        ("git status | npm test", "allow"),
        ("git status & curl evil", "ask"),
        ("git status\ncurl evil", "ask"),
        ("git status $(curl evil)", "ask"),
        ("git status 2>&1", "allow"),
        ("git status 'a && b'", "allow"),
    ],
)
def test_compound_commands_need_every_part_allowed(project, command, expected):
    p = perms(project, allow=["Bash(git status:*)", "Bash(npm test:*)"])
    assert behavior(p, "Bash", command=command) == expected


def test_exact_rule_may_name_a_compound_line(project):
    p = perms(project, allow=["Bash(make && make install)"])
    assert behavior(p, "Bash", command="make && make install") == "allow"
    assert behavior(p, "Bash", command="make && make install && rm x") == "ask"


def test_every_simple_command_is_found():
    def lines(command):
        return [c.line() for c in analyze(command, Path("/p")).commands]

    assert lines("a && b || c; d | e & f") == ["a", "b", "c", "d", "e", "f"]
    assert lines("echo 'x && y' \"; z\"") == ["echo x && y ; z"]
    assert lines("echo $(git rev-parse HEAD) && ls 2>&1 >/dev/null") == [
        "git rev-parse HEAD",
        "echo $(git rev-parse HEAD)",
        "ls",
    ]
    assert lines("diff <(ls a) <(ls b)") == ["ls a", "ls b", "diff <(ls a) <(ls b)"]


# ---- path rules ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "path", "expected"),
    [
        ("Write(src/**)", "src/a.py", "allow"),
        ("Write(src/**)", "src/deep/er/a.py", "allow"),
        ("Write(src/**)", "docs/a.py", "ask"),
        ("Write(src/**)", "other/src/a.py", "ask"),
        ("Edit(docs/*.md)", "docs/guide.md", "allow"),
        ("Edit(docs/*.md)", "docs/sub/guide.md", "ask"),
        ("Edit(*.md)", "docs/sub/guide.md", "allow"),  # no slash: any depth
        ("Edit(/docs/**)", "docs/x.txt", "allow"),  # leading / = project root
        ("Edit(/README.md)", "docs/README.md", "ask"),
        ("Edit(src/[ab].py)", "src/b.py", "allow"),
        ("Edit(src/?.py)", "src/ab.py", "ask"),
    ],
)
def test_relative_path_rules(project, rule, path, expected):
    p = perms(project, allow=[rule])
    assert behavior(p, "Write", file_path=str(project / path), content="x") == expected


def test_absolute_and_home_path_rules(project, home, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    p = perms(project, home, allow=[f"Read(/{elsewhere}/**)", "Edit(~/notes/**)"])
    assert behavior(p, "Read", file_path=str(elsewhere / "a" / "b.txt")) == "allow"
    assert behavior(p, "Read", file_path=str(tmp_path / "other.txt")) == "ask"
    assert behavior(p, "Edit", file_path=str(home / "notes" / "todo.md")) == "allow"
    assert behavior(p, "Edit", file_path="~/notes/todo.md") == "allow"
    assert behavior(p, "Edit", file_path=str(home / "todo.md")) == "ask"


def test_relative_file_paths_resolve_against_the_project(project):
    p = perms(project, allow=["Write(src/**)"])
    assert behavior(p, "Write", file_path="src/new.py", content="") == "allow"
    assert behavior(p, "Write", file_path="src/../../escape.py", content="") == "ask"


def test_edit_rule_covers_write_and_read_rule_covers_grep(project, tmp_path):
    p = perms(project, allow=["Edit", f"Read(/{tmp_path}/data/**)"])
    assert behavior(p, "Write", file_path=str(tmp_path / "out.txt"), content="") == "allow"
    assert behavior(p, "Grep", pattern="x", path=str(tmp_path / "data" / "sub")) == "allow"
    assert behavior(p, "Bash", command="touch new.txt") == "ask"


def test_symlink_out_of_the_project_is_not_inside(project, tmp_path):
    secret = tmp_path / "secret"
    secret.mkdir()
    (project / "link").symlink_to(secret)
    p = perms(project, mode="acceptEdits", allow=["Write(link/**)"], deny=[f"Read(/{secret}/**)"])
    assert behavior(p, "Read", file_path=str(project / "link" / "key")) == "deny"
    assert behavior(p, "Write", file_path=str(project / "link" / "key"), content="") == "ask"


# ---- reads -------------------------------------------------------------------------------------------


def test_reads_inside_and_outside_the_project(project, tmp_path):
    p = perms(project)
    assert p.check("Read", {"file_path": str(project / "src" / "a.py")}) == Decision(
        "allow", "reading inside the project", None
    )
    outside = tmp_path / "outside.txt"
    assert p.check("Read", {"file_path": str(outside)}) == Decision(
        "ask", f"Read of {outside} is outside the project", None
    )
    assert behavior(p, "Grep", pattern="x", path="/etc") == "ask"
    assert behavior(p, "Glob", pattern="/etc/*.conf") == "ask"
    assert behavior(p, "Glob", pattern="*.conf", path=str(project)) == "allow"


def test_reads_of_the_session_store_never_ask(project, tmp_path):
    store = RuleSettings(cwd=project, home=tmp_path / "agent-home").project_dir
    session = store / "1234"
    p = perms(project, session_dir=session)
    assert p.store_dir == store
    assert behavior(p, "Read", file_path=str(session / "tool-results" / "toolu_1.txt")) == "allow"
    assert behavior(p, "Grep", pattern="x", path=str(store)) == "allow"
    assert behavior(p, "Edit", file_path=str(session / "session-memory" / "summary.md")) == "ask"


def test_from_settings(project, home, tmp_path):
    agent_home = tmp_path / "agent-home"
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        '{"permissions": {"deny": ["Read(~/.ssh/**)"], "additionalDirectories": ["../shared"]}}'
    )
    settings = load_settings(
        cwd=project,
        environ={"HOME": str(home), "COMPACT_AGENT_HOME": str(agent_home)},
        cli={"permission_mode": "acceptEdits", "trust_project": True},
    )
    session = settings.project_dir / "abc"
    p = Permissions(settings, session_dir=session)
    assert behavior(p, "Read", file_path=str(home / ".ssh" / "id_ed25519")) == "deny"
    assert behavior(p, "Read", file_path=str(session / "tool-results" / "t.txt")) == "allow"
    assert behavior(p, "Write", file_path=str(tmp_path / "shared" / "x"), content="") == "allow"
    assert behavior(p, "Write", file_path=str(tmp_path / "x"), content="") == "ask"


# ---- acceptEdits ---------------------------------------------------------------------------------


def test_accept_edits_inside_and_outside_the_project(project, tmp_path):
    p = perms(project, mode="acceptEdits")
    assert p.check("Edit", {"file_path": str(project / "src" / "a.py")}) == Decision(
        "allow", "acceptEdits mode: edits inside the project are allowed", None
    )
    outside = tmp_path / "x.py"
    assert p.check("Write", {"file_path": str(outside), "content": ""}) == Decision(
        "ask", f"Write of {outside} (outside the project) needs approval", None
    )
    assert behavior(p, "Bash", command="touch new.txt") == "ask"


# ---- session rules, suggestions, descriptions ------------------------------------------------------


def test_allow_for_session(project):
    p = perms(project)
    assert behavior(p, "Bash", command="npm test -- -x") == "ask"
    rule = p.suggest_rule("Bash", {"command": "npm test -- -x"})
    assert rule == "Bash(npm test:*)"
    p.allow_for_session(rule)
    p.allow_for_session(rule)
    assert p.session_allow == ["Bash(npm test:*)"]
    assert p.check("Bash", {"command": "npm test"}) == Decision(
        "allow", 'allowed by the rule "Bash(npm test:*)"', "Bash(npm test:*)"
    )
    assert behavior(p, "Bash", command="npm install") == "ask"


def test_session_rule_never_beats_a_deny(project):
    p = perms(project, deny=["Bash(git push:*)"])
    p.allow_for_session("Bash(git:*)")
    assert behavior(p, "Bash", command="git push") == "deny"


@pytest.mark.parametrize(
    ("tool", "args", "rule"),
    [
        ("Bash", {"command": "git commit -m 'x'"}, "Bash(git commit:*)"),
        ("Bash", {"command": "ls -la"}, "Bash(ls:*)"),
        # a program not known here: only the exact line (issue 30), since "prog:*" could never allow it
        ("Bash", {"command": "./run.sh fast"}, "Bash(./run.sh fast)"),
        ("Bash", {"command": "pytest tests/test_a.py"}, "Bash(pytest:*)"),
        ("Bash", {"command": "make && make install"}, "Bash(make:*)"),
        ("Bash", {"command": "python3 -m unittest -q"}, "Bash(python3 -m unittest:*)"),
        ("Bash", {"command": "python3 -m unittest -q 2>&1 | tail -5"}, "Bash(python3 -m unittest:*)"),
        ("Bash", {"command": "python3 tools/gen.py --all"}, "Bash(python3 tools/gen.py:*)"),
        ("Bash", {"command": "node -e 'x'"}, "Bash(node -e 'x')"),
        ("Bash", {"command": "bash -c 'make'"}, "Bash(make:*)"),  # never Bash(bash:*)
        ("Bash", {"command": "env CI=1 npm test"}, "Bash(npm test:*)"),
        ("Bash", {"command": "sudo apt install x"}, "Bash(sudo apt install x)"),
        ("Bash", {"command": "npx prettier --write ."}, "Bash(prettier:*)"),  # npx wraps it (issue 30)
        ("Bash", {"command": "uv run pytest -q"}, "Bash(pytest:*)"),  # uv run is a wrapper (issue 30)
        ("Bash", {"command": "git --no-pager log -3"}, "Bash(git log:*)"),
        ("Bash", {"command": "git -C ../other push"}, "Bash(git -C ../other push)"),
        ("Bash", {"command": "echo hi | xargs -n1 echo"}, "Bash(echo:*)"),
        ("Write", {"file_path": "/x", "content": ""}, "Edit"),
        ("Edit", {"file_path": "/x"}, "Edit"),
        ("Read", {"file_path": "/opt/data/a.csv"}, "Read(//opt/data/**)"),
        ("Grep", {"pattern": "x", "path": "/opt/data"}, "Read(//opt/data/**)"),
        ("Snip", {"ids": []}, "Snip"),
    ],
)
def test_suggest_rule(project, tool, args, rule):
    assert perms(project).suggest_rule(tool, args) == rule


def test_a_read_under_the_home_directory_suggests_a_home_rule_that_allows_it(project, tmp_path):
    """The question shows ~/… for the home directory (issue 41 item 6): the rule "always" adds reads so too."""
    home = tmp_path / "home"
    p = perms(project, home)
    target = {"file_path": str(home / "notes" / "a.txt")}
    assert p.suggest_rule("Read", target) == "Read(~/notes/**)"
    assert p.suggest_rule("Read", {"file_path": str(home / "a.txt")}) == "Read(~/**)"
    p.allow_for_session(p.suggest_rule("Read", target))
    assert behavior(p, "Read", **target) == "allow"
    assert behavior(p, "Read", file_path=str(home / "b.txt")) == "ask"


def test_suggested_read_rule_allows_the_read(project, tmp_path):
    p = perms(project)
    target = {"file_path": str(tmp_path / "data" / "a.csv")}
    p.allow_for_session(p.suggest_rule("Read", target))
    assert behavior(p, "Read", **target) == "allow"
    assert behavior(p, "Read", file_path=str(tmp_path / "data" / "deeper" / "b.csv")) == "allow"
    assert behavior(p, "Read", file_path=str(tmp_path / "c.csv")) == "ask"


def test_describe(project):
    p = perms(project)
    assert p.describe("Bash", {"command": "npm test"}) == "npm test"
    assert p.describe("Bash", {"command": "rm -r build", "description": "clean"}) == "rm -r build\n# clean"
    target = project / "src" / "a.py"
    assert p.describe(
        "Edit", {"file_path": str(target), "old_string": "x = 1\ny = 2", "new_string": "x = 1\ny = 3"}
    ) == (f"Edit {target}\n--- a.py before\n+++ a.py after\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3")
    assert p.describe("Write", {"file_path": str(target), "content": "a\nb\n"}) == (
        f"Write {target}\n(new file, 2 lines)\n+a\n+b"
    )
    target.write_text("a\nc\n")
    assert p.describe("Write", {"file_path": str(target), "content": "a\nb\n"}) == (
        f"Write {target}\n--- a.py now\n+++ a.py after\n@@ -1,2 +1,2 @@\n a\n-c\n+b"
    )
    assert p.describe("Read", {"file_path": "src/a.py"}) == f"Read {target}"
    assert p.describe("Grep", {"pattern": "TODO"}) == f'Grep "TODO" in {project}'
    assert p.describe("Snip", {"ids": ["a1"]}) == 'Snip\nids: ["a1"]'
    # a text's line breaks are real ones, never an escaped "\\n" (issue 41, item 3)
    assert p.describe("mcp__notes__save", {"title": "plan", "body": "one\ntwo"}) == (
        "mcp__notes__save\ntitle: plan\nbody: one\n  two"
    )
    target.unlink()
    assert p.describe("Write", {"file_path": str(target), "content": "a\n"}).splitlines()[1] == (
        "(new file, 1 line)"
    )


def test_describe_an_edit_with_the_files_line_numbers(project):
    target = project / "big.py"
    target.write_text("".join(f"line {n}\n" for n in range(1, 31)))
    text = perms(project).describe(
        "Edit", {"file_path": str(target), "old_string": "line 20\n", "new_string": "line twenty\n"}
    )
    assert text.splitlines()[3:] == [
        "@@ -17,7 +17,7 @@",
        " line 17",
        " line 18",
        " line 19",
        "-line 20",
        "+line twenty",
        " line 21",
        " line 22",
        " line 23",
    ]


def test_describe_caps_long_previews(project):
    content = "".join(f"line {i}\n" for i in range(100))
    text = perms(project).describe("Write", {"file_path": str(project / "big.txt"), "content": content})
    assert text.splitlines()[-1] == "... (60 more lines)"
    assert len(text.splitlines()) == 1 + 1 + 40 + 1


def test_home_rules_without_a_known_home_match_nothing(project):
    p = perms(project, None, deny=["Read(~/.ssh/**)"])
    assert behavior(p, "Read", file_path=str(project / "a")) == "allow"


def test_paths_are_compared_after_normalising(project):
    p = perms(project, deny=["Edit(src/secret.py)"], mode="acceptEdits")
    assert behavior(p, "Edit", file_path=str(project / "docs" / ".." / "src" / "secret.py")) == "deny"
    assert behavior(p, "Edit", file_path=os.path.join(str(project), "src", ".", "secret.py")) == "deny"
    assert Path(project).is_dir()


# ---- every rule reaches every tool that touches the same thing -----------------------------------


@pytest.mark.parametrize("rule_tool", ["Write", "Edit"])
@pytest.mark.parametrize("tool", ["Write", "Edit"])
def test_edit_and_write_rules_govern_each_other(project, rule_tool, tool):
    target = str(project / "src" / "a.py")
    assert (
        behavior(perms(project, mode="acceptEdits", deny=[f"{rule_tool}(src/**)"]), tool, file_path=target)
        == "deny"
    )
    assert (
        behavior(perms(project, mode="acceptEdits", ask=[f"{rule_tool}(src/**)"]), tool, file_path=target)
        == "ask"
    )
    assert behavior(perms(project, allow=[f"{rule_tool}(src/**)"]), tool, file_path=target) == "allow"


@pytest.mark.parametrize(("kind", "expected"), [("deny", "deny"), ("ask", "ask"), ("allow", "allow")])
def test_read_rules_govern_grep_and_glob(project, tmp_path, kind, expected):
    data = tmp_path / "data"
    p = perms(project, **{kind: [f"Read(/{data}/**)"]})
    assert behavior(p, "Grep", pattern="x", path=str(data / "sub")) == expected
    assert behavior(p, "Glob", pattern="*.csv", path=str(data / "sub")) == expected
    assert behavior(p, "Glob", pattern="data/sub/*.csv", path=str(tmp_path)) == expected


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("../home/.ssh/*", None),
        ("../../home/.ssh/*", "src"),  # relative to the path argument
        ("src/../../home/.ssh/id_rsa", None),
        ("./../home/.ssh/*", None),
        ("/etc/*.conf", None),
        ("*", "../home/.ssh"),
    ],
)
def test_glob_climbing_out_of_the_project_asks(project, home, pattern, path):
    args = {"pattern": pattern} | ({"path": str(project / path) if path else ""} if path else {})
    assert behavior(perms(project, home), "Glob", **args) == "ask"
    assert behavior(perms(project, home, deny=["Read(~/.ssh/**)"]), "Glob", **args) == (
        "ask" if pattern.startswith("/") else "deny"
    )


@pytest.mark.parametrize("pattern", ["**/*.py", "src/*.py", "src/../docs/*", "*/../*"])
def test_glob_inside_the_project_stays_allowed(project, pattern):
    assert behavior(perms(project), "Glob", pattern=pattern) == "allow"


def test_glob_and_grep_without_a_path_search_where_the_call_acts(project, tmp_path):
    p = perms(project)
    assert p.check("Glob", {"pattern": "*"}, cwd=project / "src").behavior == "allow"
    assert p.check("Glob", {"pattern": "*"}, cwd=tmp_path).behavior == "ask"
    assert p.check("Grep", {"pattern": "x"}, cwd=tmp_path).behavior == "ask"


def test_read_denied(project, home):
    p = perms(project, home, deny=["Read(~/.ssh/**)", "Read(.env)", "Edit(src/**)"])
    assert [
        p.read_denied(path)
        for path in [
            home / ".ssh" / "id_rsa",
            project / ".env",
            project / "sub" / ".env",
            project / "src" / "a.py",
            home / "notes.txt",
        ]
    ] == [True, True, True, False, False]
    assert perms(project, deny=["Read"]).read_denied(project / "anything")
    assert not perms(project).read_denied(project / "anything")


def test_read_denied_sees_through_symlinks(project, home):
    (project / "keys").symlink_to(home / ".ssh")
    assert perms(project, home, deny=["Read(~/.ssh/**)"]).read_denied(project / "keys" / "id_rsa")


# ---- files that steer the agent --------------------------------------------------------------------


@pytest.fixture
def steering(project, home, tmp_path):
    """Paths whose change alters what the agent does next, each with the word its reason names."""
    agent_home = project.parent / "agent-home"
    return {
        project / ".claude" / "settings.json": "hooks/settings",
        project / ".claude" / "settings.local.json": "hooks/settings",
        project / ".claude" / "hooks" / "pre.sh": "hooks/settings",
        project / "sub" / ".claude" / "settings.json": "hooks/settings",
        home / ".claude" / "settings.json": "hooks/settings",
        project / ".claude" / "commands" / "deploy.md": "custom commands",
        home / ".claude" / "commands" / "git" / "push.md": "custom commands",
        tmp_path / "elsewhere" / "CLAUDE.md": "CLAUDE.md",
        project / ".git" / "hooks" / "pre-commit": "git hooks/config",
        project / ".git" / "config": "git hooks/config",
        project / ".git" / "worktrees" / "w" / "config.worktree": "git hooks/config",
        project / ".git" / "modules" / "m" / "hooks" / "post-checkout": "git hooks/config",
        home / ".gitconfig": "git hooks/config",
        home / ".bashrc": "shell start-up",
        home / ".bash_profile": "shell start-up",
        home / ".profile": "shell start-up",
        home / ".zshrc": "shell start-up",
        home / ".zshenv": "shell start-up",
        home / ".config" / "fish" / "config.fish": "shell start-up",
        agent_home / "settings.json": "agent's home",
        agent_home / "CLAUDE.md": "CLAUDE.md",
        agent_home / "projects" / "x" / "other-session" / "notes.md": "agent's home",
    }


@pytest.mark.parametrize("tool", ["Write", "Edit"])
def test_files_that_steer_the_agent_always_ask(project, home, steering, tool):
    for mode, rules in [("acceptEdits", ["Edit"]), ("default", ["Edit", "Write(//**)"])]:
        p = perms(project, home, mode=mode, allow=rules)
        for path, what in steering.items():
            d = p.check(tool, {"file_path": str(path), "content": ""})
            assert d.behavior == "ask", path
            assert "controls the agent's own behaviour" in d.reason and what in d.reason, d.reason


def test_steering_files_allow_in_bypass_and_deny_still_wins(project, home, steering):
    for path in steering:
        assert (
            behavior(perms(project, home, mode="bypassPermissions"), "Edit", file_path=str(path)) == "allow"
        )
        assert (
            behavior(
                perms(project, home, mode="bypassPermissions", deny=[f"Edit(/{path})"]),
                "Edit",
                file_path=str(path),
            )
            == "deny"
        )


def test_steering_files_through_bash_redirections(project, home, steering):
    p = perms(project, home, allow=["Bash"])
    for path in steering:
        d = p.check("Bash", {"command": f"echo x >> {path}"})
        assert d.behavior == "ask" and "controls the agent's own behaviour" in d.reason, (path, d)


def test_ordinary_files_near_steering_ones_do_not_ask(project, home):
    p = perms(project, home, mode="acceptEdits")
    for path in [
        project / "CLAUDE.md",
        project / ".claude" / "commands.md",  # (.claude/commands/*.md carry allowed-tools: they ask)
        project / "git" / "config",
        project / "src" / ".bashrc",
        project / ".github" / "hooks" / "x",
    ]:
        assert behavior(p, "Write", file_path=str(path)) == "allow", path


def test_the_sessions_own_directory_is_not_protected(project):
    session = project.parent / "agent-home" / "projects" / "key" / "abcd"
    note = str(session / "session-memory" / "summary.md")
    assert behavior(perms(project, session_dir=session), "Edit", file_path=note) == "ask"
    assert behavior(perms(project, session_dir=session, allow=["Edit"]), "Edit", file_path=note) == "allow"


def test_a_hard_linked_file_asks(project, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    os.link(outside, project / "linked.txt")
    (project / "plain.txt").write_text("x")
    p = perms(project, mode="acceptEdits", allow=["Bash(echo:*)"])
    d = p.check("Edit", {"file_path": str(project / "linked.txt")})
    assert d.behavior == "ask" and "2 hard links" in d.reason
    assert behavior(p, "Edit", file_path=str(project / "plain.txt")) == "allow"
    assert behavior(p, "Bash", command="echo y > linked.txt") == "ask"
    assert behavior(p, "Bash", command="echo y > plain.txt") == "allow"


def test_dot_dot_after_a_symlink_is_judged_where_it_lands(project, tmp_path):
    (tmp_path / "away" / "deep").mkdir(parents=True)
    (project / "link").symlink_to(tmp_path / "away" / "deep")
    p = perms(project, mode="acceptEdits", allow=["Bash(echo:*)"])
    escaped = str(project / "link" / ".." / "x.txt")  # the kernel writes tmp_path/away/x.txt
    assert behavior(p, "Write", file_path=escaped, content="") == "ask"
    assert behavior(p, "Bash", command="echo x > link/../x.txt") == "ask"


# ---- Bash redirections meet Edit rules, and the directory the command runs in ------------------------


def test_edit_rules_govern_bash_redirections(project):
    assert perms(project, allow=["Bash"], deny=["Edit(.env)"]).check(
        "Bash", {"command": "echo x > .env"}
    ) == Decision(
        "deny",
        f'the command writes {project / ".env"}, and the rule "Edit(.env)" in the settings denies changing it',
        "Edit(.env)",
    )
    assert (
        behavior(perms(project, allow=["Bash"], ask=["Write(docs/**)"]), "Bash", command="echo x > docs/a")
        == "ask"
    )
    assert (
        behavior(perms(project, allow=["Bash"], deny=["Edit(.env)"]), "Bash", command='echo x > "$F"')
        == "deny"
    )


def test_a_write_rule_lets_bash_write_outside_as_it_lets_write(project, tmp_path):
    p = perms(project, allow=["Bash(echo:*)", f"Write(/{tmp_path}/out/**)"])
    assert behavior(p, "Bash", command=f"echo x > {tmp_path}/out/log") == "allow"
    assert behavior(p, "Bash", command=f"echo x > {tmp_path}/other") == "ask"


def test_redirections_resolve_where_the_command_runs(project, tmp_path):
    p = perms(project, allow=["Bash(echo:*)"])
    assert p.check("Bash", {"command": "echo x > out"}, cwd=project / "src").behavior == "allow"
    assert p.check("Bash", {"command": "echo x > out"}, cwd=tmp_path).behavior == "ask"
    assert p.check("Bash", {"command": "echo x > ../out"}, cwd=project / "src").behavior == "allow"


@pytest.mark.parametrize("target", ["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/fd/3"])
def test_harmless_device_writes(project, target):
    assert behavior(perms(project, allow=["Bash(echo:*)"]), "Bash", command=f"echo x > {target}") == "allow"


def test_deny_rule_in_force_refuses_what_cannot_be_judged_and_says_why(project):
    p = perms(project, mode="bypassPermissions", deny=["Bash(git push:*)"])
    assert p.check("Bash", {"command": "$'git' push"}) == Decision(
        "deny",
        "the command's program can't be determined statically ($'git' push: the program name uses $'...' "
        "quoting); a deny rule is in force and might cover it, so it is refused (fail closed)",
    )
    assert p.check("Bash", {"command": "git $WHAT origin"}) == Decision(
        "deny",
        'in "git $WHAT origin" a word before the subcommand comes from an expansion, so the deny rule '
        '"Bash(git push:*)" '
        "might match it; it is refused (fail closed)",
    )
    assert behavior(p, "Bash", command='git commit -m "$MSG"') == "allow"
    assert behavior(p, "Bash", command="git push") == "deny"


def test_ask_rules_also_catch_what_might_match(project):
    p = perms(project, allow=["Bash(git:*)"], ask=["Bash(git push:*)"])
    assert behavior(p, "Bash", command="git $X") == "ask"
    assert behavior(p, "Bash", command="git log $X") == "allow"


def test_a_bare_bash_rule_allows_what_cannot_be_resolved_but_not_risky_variables(project):
    p = perms(project, allow=["Bash"])
    assert behavior(p, "Bash", command="$CMD x") == "allow"
    assert behavior(p, "Bash", command="PATH=. ls") == "ask"
    assert behavior(p, "Bash", command="echo x > ../out") == "ask"


def test_a_line_with_no_program_is_not_allowed_by_an_allow_rule(project):
    decision = perms(project, allow=["Bash(ls:*)"]).check("Bash", {"command": "X=1"})
    # it only sets a variable of its own shell: allowed as a read-only line, never by the rule
    assert decision.rule is None and decision.reason == "a read-only command inside the project"


def test_tools_never_import_the_agent():
    """tools/ stays below agent/: Permissions takes any object with the settings it reads."""
    tools = Path(__file__).resolve().parents[3] / "tools"
    for path in tools.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            assert not any(n == "agent" or n.startswith("agent.") for n in names), path
