"""Issue 40, class 4: an MCP rule names a server and a tool exactly; a project server's approval binds its
entry; ``mcp add/remove`` run at the same time keep every change, never write through a link out of the
project, and ``mcp list/get`` print a repository's text through the terminal-safe printer. Real servers
(tests/mcp_servers.py, the SDK's own MCPServer), the real CLI, real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import mcp_servers, trust
from agent.config.mcp_servers import Sources, load
from agent.config.settings import load_settings
from agent.mcp.catalog import McpCatalog
from agent.mcp.client import McpHub
from agent.mcp.tools import split_name, tool_name
from tests.helpers.cli import ROOT, cli_env
from tests.helpers.permissions import RuleSettings
from tools.permissions.engine import Permissions

SERVERS = str(ROOT / "tests" / "mcp_servers.py")


def perms(tmp: Path, **kw: object) -> Permissions:
    return Permissions(RuleSettings(cwd=tmp, home=tmp / "agent-home", **kw))  # type: ignore[arg-type]


def sources(tmp: Path, **kw: object) -> Sources:
    base = dict(root=tmp / "project", home=tmp / "home", user_home=tmp / "user", environ={}, trusted=True)
    base.update(kw)
    return Sources(**base)  # type: ignore[arg-type]


def flag_config(tmp: Path, servers: dict[str, str]) -> Path:
    path = tmp / "servers.json"
    entries = {n: {"command": sys.executable, "args": [SERVERS, k]} for n, k in servers.items()}
    path.write_text(json.dumps({"mcpServers": entries}))
    return path


# ---- names ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["my__srv", "github__x", "my_", "a.__b", "my..srv", "x" * 33, "__"])
def test_a_server_name_that_would_read_as_another_server_is_refused_at_configuration(tmp_path, name):
    config = mcp_servers.parse_server(name, {"command": "x"}, "flag", "f.json", {})
    assert config.problem and name in config.problem, config.problem


def test_a_server_named_with_double_underscores_never_starts_and_its_look_alike_rules_match_nothing(tmp_path):
    """Before: a server "my__srv" started, and its tools (mcp__my__srv__echo) were split as server "my", so a
    deny rule on mcp__my__srv did not stop them, and an allow rule on mcp__my ran them."""
    setup = load(
        sources(tmp_path, flag_files=(str(flag_config(tmp_path, {"my__srv": "basic", "my": "basic"})),))
    )
    states = {c.name: c for c in setup.servers}
    assert "__" in states["my__srv"].problem and not states["my"].problem
    hub = McpHub(setup.servers, log_dir=tmp_path / "logs", cwd=tmp_path, connect_timeout=30, call_timeout=30)
    hub.start()
    try:
        hub.wait(40)
        assert hub.states["my__srv"].status == "failed" and hub.states["my"].status == "connected"
        catalog = McpCatalog(hub, "client")
        names = {t.name for t in catalog.all_tools()}
        assert "mcp__my__echo" in names and not any(n.startswith("mcp__my__srv") for n in names)
    finally:
        hub.close()


@pytest.mark.parametrize(
    ("rule", "tool", "covered"),
    [
        ("mcp__github", "mcp__github__create_issue", True),
        ("mcp__github__*", "mcp__github__create_issue", True),
        ("mcp__github__create_issue", "mcp__github__create_issue", True),
        ("mcp__*", "mcp__github__create_issue", True),
        ("mcp__github", "mcp__githubx__create_issue", False),
        ("mcp__git", "mcp__github__create_issue", False),
        ("mcp__github__create", "mcp__github__create_issue", False),
        ("mcp__github__create_issue", "mcp__github__create_issue_2", False),
        # forms that can never match: reported at start, and match nothing
        ("mcp__my__srv__*", "mcp__my__srv__x", False),
        ("mcp__github__create*", "mcp__github__create_issue", False),
        ("mcp__git*", "mcp__github__create_issue", False),
        ("mcp__github(create_issue)", "mcp__github__create_issue", False),
    ],
)
def test_a_rule_names_a_server_and_a_tool_exactly(tmp_path, rule, tool, covered):
    allowed = perms(tmp_path, allow=[rule]).check(tool, {})
    denied = perms(tmp_path, deny=[rule], permission_mode="bypassPermissions").check(tool, {})
    assert (allowed.behavior == "allow") == covered, allowed.reason
    assert (denied.behavior == "deny") == covered, denied.reason


def test_a_long_tool_name_is_matched_by_its_own_name_and_the_server_part_is_never_cut(tmp_path):
    server, tool = "s" * 32, "a_tool_with_a_very_long_name_" + "x" * 40
    sent = tool_name(server, tool)
    assert len(sent) == 64 and split_name(sent)[0] == server  # type: ignore[index]
    for rule in (f"mcp__{server}", f"mcp__{server}__*", f"mcp__{server}__{tool}", sent):
        decision = perms(tmp_path, deny=[rule], permission_mode="bypassPermissions").check(sent, {})
        assert decision.behavior == "deny", rule


def test_impossible_rule_forms_are_reported_at_start(tmp_path, isolated_env):
    project = tmp_path / "p"
    (project / ".claude").mkdir(parents=True)
    rules = ["mcp__my__srv__*", "mcp__git*", "mcp__github(create)", "mcp__", "mcp__github", "mcp__*"]
    (project / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"deny": rules}}))
    s = load_settings(cwd=project, environ={"HOME": str(isolated_env)}, cli={})
    reported = [w for w in s.report.warnings if "can never match" in w]
    assert len(reported) == 4, reported
    assert all(any(f'"{r}"' in w for w in reported) for r in rules[:4])


def test_two_tools_whose_names_read_the_same_are_neither_offered(tmp_path):
    setup = load(sources(tmp_path, flag_files=(str(flag_config(tmp_path, {"c": "collide"})),)))
    hub = McpHub(setup.servers, log_dir=tmp_path / "logs", cwd=tmp_path, connect_timeout=30, call_timeout=30)
    hub.start()
    try:
        hub.wait(40)
        assert hub.states["c"].status == "connected"
        names = {t.name for t in McpCatalog(hub, "client").all_tools()}
        assert names == {"mcp__c__echo"}, names
    finally:
        hub.close()


def test_two_servers_whose_names_read_the_same_neither_start(tmp_path):
    setup = load(
        sources(
            tmp_path,
            flag_files=(
                str(flag_config(tmp_path, {"my.srv": "basic", "my-srv": "basic", "my srv": "basic"})),
            ),
        )
    )
    by = {c.name: c.problem for c in setup.servers}
    assert by["my-srv"] == "" and "same names" in by["my.srv"] and "same names" in by["my srv"]


# ---- approvals and trust -------------------------------------------------------------------------------


def _project(tmp_path: Path, marker: Path, extra: str = "") -> Path:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True, exist_ok=True)
    starter = f"open({str(marker)!r}, 'w').write({extra!r})"
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"probe": {"command": sys.executable, "args": ["-c", starter]}}})
    )
    return project


def test_an_approved_project_server_is_asked_about_again_when_the_repository_changes_its_command(
    fake_api, run_cli, tmp_path, isolated_env
):
    home = isolated_env / ".compact-agent"
    marker = tmp_path / "started"
    project = _project(tmp_path, marker)
    fake_api.reply_text("ok")
    run_cli(fake_api, "-p", "hi", "--trust-project", cwd=project)
    assert not marker.exists()
    s = load_settings(
        cwd=project, environ={"HOME": str(isolated_env), "COMPACT_AGENT_HOME": str(home)}, cli={}
    )
    setup = mcp_servers.load(
        sources(tmp_path, root=s.root, home=home, user_home=isolated_env, trusted=s.report.trust.trusted)
    )
    mcp_servers.record_approval(home, s.root, setup.unapproved, True)  # what the REPL's "y" records
    fake_api.reply_text("ok")
    assert run_cli(fake_api, "-p", "hi", cwd=project).code == 0
    assert marker.exists()  # approved: it started (and failed: not MCP)
    marker.unlink()
    _project(tmp_path, marker, extra="changed")  # the repository changes the server's arguments
    fake_api.reply_text("ok")
    res = run_cli(fake_api, "-p", "hi", cwd=project)
    assert res.code == 0 and not marker.exists(), "started a changed server without a question"
    assert "probe" in res.stderr and "not approved" in res.stderr


def test_an_approval_recorded_without_a_digest_counts_for_nothing(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"db": {"command": "db-server"}}}))
    mcp_servers.update_local(
        tmp_path / "home", root, lambda e: e.update({"enabled": ["db"]})
    )  # an old record
    found = load(sources(tmp_path))
    assert found.servers == [] and [c.name for c in found.unapproved] == ["db"]


def test_a_trust_record_without_a_digest_starts_no_server_the_repository_enabled_itself(
    fake_api, run_cli, tmp_path, isolated_env
):
    marker = tmp_path / "started"
    project = _project(tmp_path, marker)
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
    trust.grant(isolated_env / ".compact-agent", project)  # a record without the digest of what was trusted
    fake_api.reply_text("ok")
    res = run_cli(fake_api, "-p", "hi", cwd=project)
    assert res.code == 0 and not marker.exists()
    # trusted with its settings as they are: then it starts; a changed command is a change of the settings
    fake_api.reply_text("ok")
    assert run_cli(fake_api, "-p", "hi", "--trust-project", cwd=project).code == 0 and marker.exists()
    marker.unlink()
    _project(tmp_path, marker, extra="changed")
    fake_api.reply_text("ok")
    res = run_cli(fake_api, "-p", "hi", cwd=project)
    assert res.code == 0 and not marker.exists()


# ---- mcp add/remove/list/get ---------------------------------------------------------------------------


def _cli(project: Path, home: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "agent", "mcp", *args],
        cwd=project,
        env=cli_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("scope", ["local", "project", "user"])
def test_eight_concurrent_adds_all_keep_their_server(tmp_path, isolated_env, scope):
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    procs = [
        _cli(project, isolated_env, "add", "-s", scope, f"srv{i}", "--", "server", str(i)) for i in range(8)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and "Added" in out, err
    home = isolated_env / ".compact-agent"
    if scope == "local":
        data = json.loads((home / "mcp.json").read_text())["projects"][str(project.resolve())]
    elif scope == "project":
        data = json.loads((project / ".mcp.json").read_text())
    else:
        data = json.loads((home / "settings.json").read_text())
    assert sorted(data["mcpServers"]) == [f"srv{i}" for i in range(8)]


def test_mcp_add_and_remove_never_write_through_a_link_out_of_the_project(run_cli, tmp_path, isolated_env):
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    outside = tmp_path / "outside.json"
    outside.write_text('{"mcpServers": {"keep": {"command": "x"}}}\n')
    (project / ".mcp.json").symlink_to(outside)
    before = outside.read_text()
    res = run_cli(None, "mcp", "add", "-s", "project", "evil", "--", "rm", "-rf", "/", cwd=project)
    assert res.code == 1 and "outside the project" in res.stderr
    res = run_cli(None, "mcp", "remove", "-s", "project", "keep", cwd=project)
    assert res.code == 1 and "outside the project" in res.stderr
    assert outside.read_text() == before
    # a link inside the project is the project's file: written whole, never half
    (project / ".mcp.json").unlink()
    inner = project / "config" / "mcp.json"
    inner.parent.mkdir()
    inner.write_text("{}\n")
    (project / ".mcp.json").symlink_to(inner)
    assert run_cli(None, "mcp", "add", "-s", "project", "ok", "--", "srv", cwd=project).code == 0
    assert "ok" in json.loads(inner.read_text())["mcpServers"]


def test_mcp_list_and_get_print_a_repositorys_text_without_escape_sequences(run_cli, tmp_path, isolated_env):
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    evil = "\x1b]0;owned\x07\x1b[2J"
    (project / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "ok": {"command": f"srv{evil}", "args": [f"--x{evil}"]},
                    f"bad{evil}": {"command": "srv"},
                }
            }
        )
    )
    for args in (("list",), ("get", "ok"), ("get", f"bad{evil}"), ("get", f"none{evil}")):
        res = run_cli(None, "mcp", *args, cwd=project)
        assert "\x1b" not in res.stdout + res.stderr and "\x07" not in res.stdout + res.stderr, args
        assert "\\x1b" in res.stdout + res.stderr, args  # shown, as an escape
