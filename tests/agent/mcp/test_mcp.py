"""MCP: the configuration as Claude Code writes it, the permissions, and the client against real servers
(tests/mcp_servers.py, written with the SDK's own MCPServer, started by the tests as processes)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import tools.registry  # noqa: F401  (the built-in tools declare themselves, as in a session: Read is known)
from agent.config import mcp_servers
from agent.config.mcp_servers import Sources, load, parse_server
from agent.config.settings import Settings
from agent.mcp.client import CallFailed, McpHub
from agent.mcp.tools import CAP_TOKENS, McpTool, rank, result_of, tool_name
from tests.helpers.cli import ROOT, wait_for
from tools.base import ToolContext, ToolError
from tools.permissions.engine import Permissions

SERVERS = str(ROOT / "tests" / "mcp_servers.py")
MODES = ("default", "acceptEdits", "bypassPermissions", "plan")


def stdio(name: str, kind: str, *extra: str) -> dict:
    return {"command": sys.executable, "args": [SERVERS, kind, *extra]}


def sources(tmp: Path, **kw: object) -> Sources:
    base = dict(root=tmp / "project", home=tmp / "home", user_home=tmp / "user", environ={}, trusted=True)
    base.update(kw)
    return Sources(**base)  # type: ignore[arg-type]


# --- configuration ---------------------------------------------------------------------------------


def test_every_scope_is_read_and_the_closer_one_wins(tmp_path):
    (tmp_path / "project").mkdir()
    (tmp_path / "user").mkdir()
    root = tmp_path / "project"
    claude = {
        "mcpServers": {"shared": {"command": "user-cmd"}, "mine": {"command": "mine"}},
        "projects": {str(root): {"mcpServers": {"shared": {"command": "local-cmd"}}}},
    }
    (tmp_path / "user" / ".claude.json").write_text(json.dumps(claude))
    flag = tmp_path / "extra.json"
    flag.write_text(
        json.dumps({"mcpServers": {"flagged": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}})
    )
    setup = load(sources(tmp_path, settings_servers={"ours": {"command": "ours"}}, flag_files=(str(flag),)))
    found = {c.name: c for c in setup.servers}
    assert set(found) == {"shared", "mine", "ours", "flagged"}
    assert (found["shared"].command, found["shared"].scope) == ("local-cmd", "local")
    assert found["ours"].scope == "settings" and found["flagged"].remote
    strict = load(sources(tmp_path, flag_files=(str(flag),), strict=True))
    assert [c.name for c in strict.servers] == ["flagged"]


def test_variables_are_expanded_with_defaults_but_never_the_agents_credentials(tmp_path):
    env = {"HOME": "/h", "GH_TOKEN": "ghp_x", "ANTHROPIC_API_KEY": "sk-ant-secret"}
    c = parse_server("s", {"command": "${HOME}/bin/s", "args": ["${MODE:-fast}"]}, "user", "f", env)
    assert (c.command, c.args, c.problem) == ("/h/bin/s", ("fast",), "")
    leak = parse_server("s", {"command": "x", "env": {"K": "${ANTHROPIC_API_KEY}"}}, "user", "f", env)
    assert "ANTHROPIC_API_KEY" in leak.problem and "sk-ant" not in json.dumps(dict(leak.env))
    missing = parse_server("s", {"command": "${NOPE}"}, "user", "f", env)
    assert "NOPE (not set)" in missing.problem
    # a repository's .mcp.json never sends a credential-like variable to a remote server...
    remote = {
        "type": "http",
        "url": "https://x.example/mcp",
        "headers": {"Authorization": "Bearer ${GH_TOKEN}"},
    }
    assert "GH_TOKEN" in parse_server("s", remote, "project", ".mcp.json", env).problem
    # ...the user's own configuration may
    mine = parse_server("s", remote, "user", "~/.claude.json", env)
    assert mine.problem == "" and mine.headers["Authorization"] == "Bearer ghp_x"


def test_a_project_mcp_json_server_waits_for_trust_and_then_for_approval(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"db": {"command": "db-server"}}}))
    untrusted = load(sources(tmp_path, trusted=False, enable_all=True, enabled=("db",)))
    assert untrusted.servers == [] and [c.name for c in untrusted.untrusted] == ["db"]
    unapproved = load(sources(tmp_path))
    assert unapproved.servers == [] and [c.name for c in unapproved.unapproved] == ["db"]
    assert [c.name for c in load(sources(tmp_path, enabled=("db",))).servers] == ["db"]
    assert load(sources(tmp_path, enable_all=True, disabled=("db",))).servers == []
    mcp_servers.record_approval(tmp_path / "home", root, unapproved.unapproved, True)
    assert [c.name for c in load(sources(tmp_path)).servers] == ["db"]
    assert oct((tmp_path / "home" / "mcp.json").stat().st_mode & 0o777) == "0o600"
    # the approval is bound to the entry approved: another command is asked about again (issue 40)
    (root / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"db": {"command": "db-server", "args": ["-x"]}}})
    )
    changed = load(sources(tmp_path))
    assert changed.servers == [] and [c.name for c in changed.unapproved] == ["db"]


def test_names_fit_the_api(tmp_path):
    assert tool_name("my server", "get.item") == "mcp__my_server__get_item"
    long = tool_name("s" * 40, "t" * 40)
    assert len(long) == 64 and long.startswith("mcp__") and long != tool_name("s" * 40, "t" * 41)


# --- permissions -------------------------------------------------------------------------------------


def perms(tmp_path: Path, mode: str, **rules: list[str]) -> Permissions:
    s = Settings(cwd=tmp_path, home=tmp_path / "home", permission_mode=mode, **rules)  # type: ignore[arg-type]
    return Permissions(s)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rule", ["mcp__*", "mcp__s", "mcp__s__*", "mcp__s__t"])
def test_deny_rules_on_mcp_tools_hold_in_every_mode(tmp_path, mode, rule):
    p = perms(tmp_path, mode, deny=[rule], allow=["mcp__s__t", "mcp__*"])
    decision = p.check("mcp__s__t", {"x": 1})
    assert decision.behavior == "deny" and decision.rule == rule
    assert p.check("mcp__other__t", {}).behavior != "deny" or rule == "mcp__*"


def test_mcp_tools_ask_by_default_and_plan_refuses_them_unless_allowed(tmp_path):
    assert perms(tmp_path, "default").check("mcp__s__t", {}).behavior == "ask"
    assert perms(tmp_path, "acceptEdits").check("mcp__s__t", {}).behavior == "ask"
    assert perms(tmp_path, "bypassPermissions").check("mcp__s__t", {}).behavior == "allow"
    assert perms(tmp_path, "plan").check("mcp__s__t", {}).behavior == "deny"
    assert perms(tmp_path, "plan", allow=["mcp__s"]).check("mcp__s__t", {}).behavior == "allow"
    assert perms(tmp_path, "default", allow=["mcp__s__*"]).check("mcp__s__t", {}).behavior == "allow"
    asked = perms(tmp_path, "default", allow=["mcp__s"], ask=["mcp__s__t"]).check("mcp__s__t", {})
    assert asked.behavior == "ask"


def test_a_servers_read_only_annotation_allows_nothing(tmp_path):
    listed = {"name": "look", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
    tool = McpTool.from_listing("s", listed, lambda *a: {}, CAP_TOKENS)
    assert tool.read_only  # it may run beside other read-only calls...
    for mode in ("default", "acceptEdits", "plan"):  # ...but it is asked about (refused in plan)
        assert perms(tmp_path, mode).check(tool.name, {}).behavior in ("ask", "deny")


def test_read_only_shell_commands_run_without_asking_inside_the_project(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    p = perms(tmp_path, "default")
    for line in ("ls", "pwd", "cat a.txt | grep x", "git status", "wc -l a.txt"):
        assert p.check("Bash", {"command": line}, cwd=tmp_path).behavior == "allow", line
    for line in ("rm a.txt", "cat /etc/passwd", "ls ..", "echo hi > b.txt", "cat ~/.ssh/id_rsa"):
        assert p.check("Bash", {"command": line}, cwd=tmp_path).behavior == "ask", line
    denied = perms(tmp_path, "default", deny=["Read(a.txt)"])
    assert denied.check("Bash", {"command": "cat a.txt"}, cwd=tmp_path).behavior != "allow"
    assert perms(tmp_path, "default", deny=["Bash(ls:*)"]).check("Bash", {"command": "ls"}).behavior == "deny"


# --- the client against real servers ------------------------------------------------------------------


def hub_of(tmp_path: Path, servers: dict[str, dict], **kw: object) -> McpHub:
    configs = [parse_server(n, raw, "flag", "test", {}) for n, raw in servers.items()]
    return McpHub(configs, log_dir=tmp_path / "logs", cwd=tmp_path, **kw)  # type: ignore[arg-type]


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(project_dir=tmp_path, session_dir=tmp_path / "session", cwd=tmp_path)


def test_stdio_calls_bring_content_and_structured_content_and_failures_stay_one_line(tmp_path, ctx):
    hub = hub_of(
        tmp_path,
        {
            "basic": stdio("basic", "basic"),
            "gone": {"command": str(tmp_path / "no-such-program")},
            "quits": stdio("quits", "exit"),
            "noisy": stdio("noisy", "garbage"),  # lines on stdout that are not JSON-RPC
        },
    )
    try:
        hub.start()
        assert hub.wait(60)
        assert hub.states["basic"].status == "connected", hub.states["basic"].error
        assert hub.states["noisy"].status == "connected"  # the SDK skips what is not a message
        assert hub.call("noisy", "echo", {"text": "x"}, ctx.cancel)["content"][0]["text"] == "echo: x"
        assert {t["name"] for t in hub.states["basic"].tools} >= {"echo", "add", "weather", "picture"}
        assert hub.states["gone"].status == "failed" and "not found" in hub.states["gone"].error
        assert hub.states["quits"].status == "failed" and "\n" not in hub.states["quits"].error
        weather = result_of(hub.call("basic", "weather", {"city": "Oslo"}, ctx.cancel), ctx, "w")
        assert '"temperature_c": 21' in weather.content and not weather.is_error
        picture = result_of(hub.call("basic", "picture", {}, ctx.cancel), ctx, "p")
        assert [b["type"] for b in picture.content] == ["text", "image"]
        with pytest.raises(CallFailed, match="not connected"):
            hub.call("gone", "x", {}, ctx.cancel)
    finally:
        hub.close()


def test_a_server_flooding_stderr_keeps_working_and_its_log_stays_capped(tmp_path, ctx):
    """3 MB on stderr: the server is still served (the pipe is drained), and its private log keeps the first
    LOG_CAP bytes of the connection and a line saying the rest was dropped."""
    from agent.mcp.client import LOG_CAP

    hub = hub_of(tmp_path, {"flood": stdio("flood", "flood")})
    try:
        hub.start()
        assert hub.wait(60)
        assert hub.states["flood"].status == "connected", hub.states["flood"].error
        assert hub.call("flood", "echo", {"text": "x"}, ctx.cancel)["content"][0]["text"] == "echo: x"
    finally:
        hub.close()
    log = tmp_path / "logs" / "flood.log"
    deadline = time.monotonic() + 30
    while "dropped past" not in log.read_text(errors="replace") and time.monotonic() < deadline:
        time.sleep(0.05)
    text = log.read_text(errors="replace")
    assert text.startswith("x" * 1_023 + "\n") and "dropped past" in text
    assert LOG_CAP <= log.stat().st_size < LOG_CAP + 200
    assert log.stat().st_mode & 0o777 == 0o600


def test_ctrl_c_cancels_the_call_and_the_server_stays(tmp_path, ctx):
    hub = hub_of(tmp_path, {"basic": stdio("basic", "basic")})
    try:
        hub.start()
        assert hub.wait(60) and hub.states["basic"].status == "connected"
        timer = threading.Timer(0.5, ctx.cancel.set)
        timer.start()
        started = time.monotonic()
        with pytest.raises(InterruptedError):
            hub.call("basic", "nap", {"seconds": 30}, ctx.cancel)
        assert time.monotonic() - started < 10
        ctx.cancel.clear()
        assert hub.call("basic", "echo", {"text": "still here"}, ctx.cancel)["content"][0]["text"] == (
            "echo: still here"
        )
    finally:
        hub.close()


def test_a_slow_server_fails_its_start_and_a_crash_mid_call_is_one_line(tmp_path, ctx):
    # the slow server sleeps 30 s before it serves: a start timeout (what MCP_TIMEOUT sets) of 1 s fails it.
    # It has a hub of its own, so the crash server starts with the default timeout however loaded the
    # machine; its hub is closed last, when the SDK's grace for a server that ignores stdin is long over.
    slow = hub_of(tmp_path, {"slow": stdio("slow", "slow", "--delay", "30")}, connect_timeout=1)
    hub = hub_of(tmp_path, {"crash": stdio("crash", "crash")})
    try:
        slow.start()
        hub.start()
        assert slow.wait(60) and hub.wait(60)
        assert slow.states["slow"].status == "failed" and "within 1 s" in slow.states["slow"].error
        assert hub.states["crash"].status == "connected"
        tool = McpTool.from_listing(
            "crash", {"name": "boom", "inputSchema": {"type": "object"}}, hub.call, 25_000
        )
        with pytest.raises(ToolError, match='"crash" stopped during the call'):
            tool.run({}, ctx)
        assert hub.states["crash"].status == "failed"
        hub.reconnect("crash")
        wait_for(lambda: hub.states["crash"].status == "connected", 60)
    finally:
        hub.close()
        slow.close()


def test_a_one_megabyte_result_goes_to_disk_and_the_model_gets_a_preview(tmp_path, ctx):
    hub = hub_of(tmp_path, {"big": stdio("big", "big")})
    try:
        hub.start()
        assert hub.wait(60) and hub.states["big"].status == "connected"
        tool = McpTool.from_listing(
            "big", {"name": "dump", "inputSchema": {"type": "object"}}, hub.call, 25_000
        )
        result = tool.run({}, ctx)
        assert isinstance(result.content, str) and len(result.content) < 5_000
        assert "<persisted-output>" in result.content
        [saved] = (ctx.session_dir / "tool-results").glob("*.txt")
        assert saved.stat().st_size == 1_000_000 and oct(saved.stat().st_mode & 0o777) == "0o600"
        assert str(saved) in result.content
    finally:
        hub.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_streamable_http_server_with_200_tools_is_listed_and_searchable(tmp_path, ctx):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, SERVERS, "many", "--http", str(port), "--name", "github"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    hub = hub_of(tmp_path, {"github": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}})
    try:

        def up() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_for(up, 60)
        hub.start()
        assert hub.wait(60)
        state = hub.states["github"]
        assert state.status == "connected", state.error
        assert len(state.tools) == 200
        schemas = [McpTool.from_listing("github", t, hub.call, 25_000).schema() for t in state.tools]
        assert rank("archive the old milestones", schemas, 3)[0] == "mcp__github__archive_milestones"
        reply = hub.call("github", "list_issues", {"target": "o/r"}, ctx.cancel)
        assert reply["content"][0]["text"] == "github:list_issues target=o/r limit=10"
    finally:
        hub.close()
        proc.kill()
        proc.wait()


def test_descriptions_are_capped_and_odd_schemas_become_objects():
    listed = {"name": "t", "description": "word " * 1_000, "inputSchema": {"type": "string"}}
    tool = McpTool.from_listing("s", listed, lambda *a: {}, CAP_TOKENS)
    assert len(tool.description) == 2_048 and tool.description.endswith("…")
    assert tool.input_schema == {"type": "object", "properties": {}}


def test_slash_mcp_lists_servers_with_their_state(fake_api, tmp_path):
    from agent.frontend import commands
    from tests.helpers.session import make_session

    session, _ = make_session(tmp_path, fake_api)
    broken = parse_server("db", {"command": "${DB_BIN}"}, "local", "mcp.json", {})
    session.attach_mcp(McpHub([broken], log_dir=tmp_path / "logs", cwd=tmp_path))
    text = commands.run(session, "/mcp").text
    assert "db [local] : failed (variables not expanded: DB_BIN (not set))" in text.replace("  ", " ")
    assert not commands.run(session, "/mcp reconnect nope").ok
    assert (
        "deferred (not in the context until a search finds them): 0" in commands.run(session, "/context").text
    )


def test_search_ranks_names_over_descriptions_and_meets_plurals_halfway():
    def schema(name: str, description: str, **params: str) -> dict:
        props = {k: {"type": "string", "description": v} for k, v in params.items()}
        return {
            "name": name,
            "description": description,
            "input_schema": {"type": "object", "properties": props},
        }

    schemas = [
        schema("mcp__gh__create_releases", "Publish a tagged version."),
        schema("mcp__gh__list_issues", "Issues of a repository; mentions releases in passing."),
        schema("mcp__db__run_query", "Run SQL.", statement="the SQL statement to execute"),
        schema("mcp__web__fetch", "Download a page."),
    ]
    assert rank("create a release", schemas, 2) == ["mcp__gh__create_releases", "mcp__gh__list_issues"]
    assert rank("execute a statement", schemas, 5) == ["mcp__db__run_query"]  # found by its parameter
    assert rank("the a to", schemas, 5) == []
