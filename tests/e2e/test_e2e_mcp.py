"""End-to-end: the real CLI with real MCP servers (tests/mcp_servers.py) against the fake Messages API."""

from __future__ import annotations

import json
import sys

from agent.config import trust
from tests.fakeapi import server_tool_search
from tests.helpers.mcp import SERVERS, config_file
from tests.helpers.transcripts import records, transcripts
from tests.helpers.wire import tool_result


def test_a_search_finds_a_deferred_tool_and_its_call_reaches_the_server(fake_api, run_cli, project, tmp_path):
    api = fake_api
    cfg = config_file(tmp_path, {"basic": "basic"})
    api.reply_tool("ToolSearch", {"query": "weather of a city"})
    api.reply_tool("mcp__basic__weather", {"city": "Oslo"})
    api.reply_text("It is clear in Oslo.")

    res = run_cli(api, "-p", "weather in Oslo?", "--mcp-config", str(cfg), "--allowedTools", "mcp__basic")

    assert res.code == 0, res.stderr
    assert res.stdout == "It is clear in Oslo.\n"
    api.check()
    first, second, third = (r.body for r in api.message_requests)
    tools = {t["name"]: t for t in first["tools"]}
    assert "ToolSearch" in tools and not tools["ToolSearch"].get("defer_loading")
    assert tools["mcp__basic__weather"]["defer_loading"] is True
    assert all(t.get("defer_loading") for n, t in tools.items() if n.startswith("mcp__"))
    assert not any(t.get("cache_control") and t.get("defer_loading") for t in first["tools"])
    found = tool_result(second)["content"]
    assert {"type": "tool_reference", "tool_name": "mcp__basic__weather"} in found
    weather = tool_result(third)["content"]
    assert json.loads(weather if isinstance(weather, str) else weather[0]["text"])["sky"] == "clear"
    assert first["tools"] == second["tools"] == third["tools"]  # stable between compaction points


def test_without_approval_the_call_is_refused_in_print_mode_and_a_deny_rule_wins(fake_api, run_cli, tmp_path):
    api = fake_api
    cfg = config_file(tmp_path, {"basic": "basic"})
    api.reply_tool("mcp__basic__echo", {"text": "hi"})
    api.reply_text("ok")
    res = run_cli(api, "-p", "echo", "--mcp-config", str(cfg))
    assert res.code == 0, res.stderr
    refused = tool_result(api.message_requests[1].body)
    assert refused["is_error"] and "approval" in json.dumps(refused["content"])
    api.reply_tool("mcp__basic__echo", {"text": "hi"})
    api.reply_text("ok")
    res = run_cli(
        api,
        "-p",
        "echo",
        "--mcp-config",
        str(cfg),
        "--dangerously-skip-permissions",
        "--disallowedTools",
        "mcp__*",
    )
    assert res.code == 0, res.stderr
    denied = tool_result(api.message_requests[3].body)
    assert denied["is_error"] and 'rule "mcp__*"' in str(denied["content"])


def test_a_project_mcp_json_server_never_starts_before_trust_and_approval(
    fake_api, run_cli, project, isolated_env, tmp_path
):
    marker = tmp_path / "started"
    starter = f"open({str(marker)!r}, 'w').close()"
    (project / ".git").mkdir()
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"probe": {"command": sys.executable, "args": ["-c", starter]}}})
    )
    for _ in range(2):
        fake_api.reply_text("ok")
    res = run_cli(fake_api, "-p", "hi")
    assert res.code == 0 and not marker.exists()
    assert "not trusted" in res.stderr and "probe" in res.stderr
    trust.grant(isolated_env / ".compact-agent", project)
    res = run_cli(fake_api, "-p", "hi")
    assert res.code == 0 and not marker.exists()
    assert "not approved" in res.stderr
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.local.json").write_text(json.dumps({"enabledMcpjsonServers": ["probe"]}))
    fake_api.reply_text("ok")
    res = run_cli(fake_api, "-p", "hi")
    # a trust record without the digest of what was trusted doesn't cover servers the project enables
    assert res.code == 0 and not marker.exists()
    fake_api.reply_text("ok")
    res = run_cli(
        fake_api, "-p", "hi", "--trust-project"
    )  # trusted with its settings and .mcp.json as they are
    assert res.code == 0 and marker.exists()  # trusted and approved: it started (and failed: not MCP)
    assert 'MCP server "probe" failed' in res.stderr


def test_the_apis_own_tool_search_is_used_on_the_providers_api_and_found_tools_survive(
    fake_api, run_cli, tmp_path, isolated_env
):
    api = fake_api
    cfg = config_file(tmp_path, {"basic": "basic"})
    api.reply(
        server_tool_search("echo text", ["mcp__basic__echo"], then=("mcp__basic__echo", {"text": "hi"}))
    )
    api.reply_text("done")
    res = run_cli(
        api,
        "-p",
        "echo hi",
        "--mcp-config",
        str(cfg),
        "--allowedTools",
        "mcp__basic__echo",
        env={"ENABLE_TOOL_SEARCH": "api"},
    )
    assert res.code == 0, res.stderr
    api.check()
    first, second = (r.body for r in api.message_requests)
    search = [t for t in first["tools"] if t.get("type") == "tool_search_tool_bm25_20251119"]
    assert len(search) == 1 and search[0]["name"] == "tool_search_tool_bm25"
    assert "ToolSearch" not in {t.get("name") for t in first["tools"]}
    assert tool_result(second)["content"] in ("echo: hi", [{"type": "text", "text": "echo: hi"}])
    # a long read (what a compaction takes away: else there is nothing to compact) ...
    (tmp_path / "project" / "log.txt").write_text("".join(f"line {i} of an old log\n" for i in range(600)))
    api.reply_tool("Read", {"file_path": str(tmp_path / "project" / "log.txt")})
    api.reply_text("read")
    # (with the same tool search: the tools are part of what the thinking so far is bound to)
    assert (
        run_cli(
            api,
            "-p",
            "read log.txt",
            "--continue",
            "--mcp-config",
            str(cfg),
            env={"ENABLE_TOOL_SEARCH": "api"},
        ).code
        == 0
    )
    # ... then a compaction takes the search result away: the found tool stays deferred in ``tools`` (the
    # thinking is bound to them) and a system message's tool_addition makes it available again
    api.reply_text("<analysis>a</analysis><summary>the user asked for an echo</summary>")
    res = run_cli(
        api, "-p", "/compact", "--continue", "--mcp-config", str(cfg), env={"ENABLE_TOOL_SEARCH": "api"}
    )
    assert res.code == 0, res.stderr
    api.reply_text("still here")
    res = run_cli(
        api, "-p", "and now?", "--continue", "--mcp-config", str(cfg), env={"ENABLE_TOOL_SEARCH": "api"}
    )
    assert res.code == 0, res.stderr
    last = api.message_requests[-1].body
    assert last["tools"] == first["tools"]
    added = [
        b["tool"]
        for m in last["messages"]
        if m["role"] == "system"
        for b in m["content"]
        if b.get("type") == "tool_addition"
    ]
    assert added == [{"type": "tool_reference", "name": "mcp__basic__echo"}]
    [path] = transcripts(isolated_env)
    assert any(r.get("discoveredTools") == ["mcp__basic__echo"] for r in records(path))


def test_hooks_match_mcp_tool_names(fake_api, run_cli, project, isolated_env, tmp_path):
    cfg = config_file(tmp_path, {"basic": "basic"})
    (project / ".claude").mkdir()
    hook = {
        "matcher": "mcp__basic__.*",
        "hooks": [{"type": "command", "command": "echo 'no echoes today' >&2; exit 2"}],
    }
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [hook]}}))
    trust.grant(isolated_env / ".compact-agent", project)
    fake_api.reply_tool("mcp__basic__echo", {"text": "hi"})
    fake_api.reply_text("ok")
    res = run_cli(fake_api, "-p", "echo", "--mcp-config", str(cfg), "--allowedTools", "mcp__basic")
    assert res.code == 0, res.stderr
    blocked = tool_result(fake_api.message_requests[1].body)
    assert blocked["is_error"] and "no echoes today" in str(blocked["content"])


def test_the_repl_asks_before_a_projects_servers_start_and_connects_them_after_the_prompt(
    fake_api, project, isolated_env
):
    import io
    import os

    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput
    from rich.console import Console

    from agent.config.settings import load_settings
    from agent.frontend.repl import Repl
    from tests.helpers.cli import wait_for
    from tests.helpers.frontend import Driver

    (project / ".git").mkdir()
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"basic": {"command": sys.executable, "args": [SERVERS, "basic"]}}})
    )
    trust.grant(isolated_env / ".compact-agent", project)
    environ = {
        "HOME": os.environ["HOME"],
        "COMPACT_AGENT_HOME": os.environ["COMPACT_AGENT_HOME"],
        **fake_api.env(),
    }
    settings = load_settings(cwd=project, environ=environ, cli={})
    buf = io.StringIO()
    # wide enough that the /mcp line (which names the interpreter's and the server's full paths) never
    # wraps "connected, 5 tools", whatever directory the checkout sits in
    console = Console(file=buf, width=400, force_terminal=False, color_system=None)
    with create_pipe_input() as pipe:
        pipe.send_text("y\r")  # the answer to the question open() asks
        repl = Repl(settings, console, environ=environ, input=pipe, output=DummyOutput())
        repl.open()
        assert repl.mcp.states["basic"].status == "pending"  # nothing started before the prompt
        d = Driver(repl, pipe, buf)
        d.thread.start()
        try:
            wait_for(lambda: repl.mcp.states["basic"].status == "connected", 60)
            d.type("/mcp\r")
            d.wait_for("connected, 5 tools")
            d.type("/exit\r")
            assert d.finish() == 0
        finally:
            repl.mcp.close()
    out = buf.getvalue()
    assert "This project's .mcp.json configures MCP servers:" in out and f"basic: {sys.executable}" in out
    local = json.loads((isolated_env / ".compact-agent" / "mcp.json").read_text())
    assert list(local["projects"][str(project)]["approved"]) == ["basic"]  # with its entry's digest


def test_mcp_add_list_get_remove_as_claude_mcp(run_cli, project, isolated_env):
    home = isolated_env / ".compact-agent"
    res = run_cli(None, "mcp", "add", "basic", "--", sys.executable, SERVERS, "basic")
    assert res.code == 0, res.stderr
    assert 'Added MCP server "basic" (local scope)' in res.stdout
    res = run_cli(
        None,
        "mcp",
        "add",
        "-s",
        "user",
        "-t",
        "http",
        "-H",
        "X-Team: core",
        "remote",
        "http://127.0.0.1:9/mcp",
    )
    assert res.code == 0, res.stderr
    assert json.loads((home / "settings.json").read_text())["mcpServers"]["remote"] == {
        "type": "http",
        "url": "http://127.0.0.1:9/mcp",
        "headers": {"X-Team": "core"},
    }
    assert oct((home / "settings.json").stat().st_mode & 0o777) == "0o600"
    res = run_cli(None, "mcp", "list")
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert any(line.startswith("basic [local]: ") and line.endswith("connected (5 tools)") for line in lines)
    assert any(line.startswith("remote [settings]: http http://127.0.0.1:9/mcp - failed") for line in lines)
    res = run_cli(None, "mcp", "get", "basic")
    assert res.code == 0 and "scope: local" in res.stdout
    assert run_cli(None, "mcp", "remove", "basic").stdout.startswith(
        'Removed MCP server "basic" (local scope)'
    )
    res = run_cli(None, "mcp", "remove", "basic")
    assert (
        res.code == 1
        and res.stderr == 'compact-agent mcp: no MCP server "basic" in any scope this command writes\n'
    )


def test_append_system_prompt_and_add_dir_reach_the_request_and_the_permissions(
    fake_api, run_cli, project, tmp_path
):
    first, second = tmp_path / "lib1", tmp_path / "lib2"
    first.mkdir()
    second.mkdir()
    (second / "util.py").write_text("VALUE = 7\n")
    fake_api.reply_tool("Read", {"file_path": str(second / "util.py")})
    fake_api.reply_text("VALUE is 7.")
    res = run_cli(
        fake_api,
        "-p",
        "--append-system-prompt",
        "Answer in one short sentence.",
        "--add-dir",
        str(first),
        str(second),
        "--",
        "what is VALUE?",
    )
    assert res.code == 0, res.stderr
    body = fake_api.message_requests[0].body
    system = "\n".join(b["text"] for b in body["system"])
    assert "Answer in one short sentence." in system
    assert f"Additional working directories: {first}, {second}" in system
    read = tool_result(fake_api.message_requests[1].body)
    assert not read.get("is_error") and "VALUE = 7" in str(read["content"])  # no question: an added directory


def test_a_general_purpose_subagent_finds_and_calls_mcp_tools_too(fake_api, run_cli, tmp_path):
    api = fake_api
    cfg = config_file(tmp_path, {"basic": "basic"})
    api.reply_tool(
        "Task", {"description": "echo via mcp", "prompt": "echo hi", "subagent_type": "general-purpose"}
    )
    api.reply_tool("ToolSearch", {"query": "echo text"})
    api.reply_tool("mcp__basic__echo", {"text": "from the child"})
    api.reply_text("child done")
    api.reply_text("done")
    res = run_cli(api, "-p", "delegate", "--mcp-config", str(cfg), "--allowedTools", "mcp__basic")
    assert res.code == 0, res.stderr
    child_first, child_last = api.message_requests[1].body, api.message_requests[3].body
    names = {t["name"]: t for t in child_first["tools"]}
    assert "ToolSearch" in names and names["mcp__basic__echo"]["defer_loading"] is True
    assert "echo: from the child" in str(tool_result(child_last)["content"])
