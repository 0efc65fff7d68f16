"""A session's MCP servers from its settings: the configuration read, the hub built (not yet started).

``setup_of`` reads every source (agent/config/mcp_servers.py); ``hub_for`` makes the hub for the servers
that may start; ``approve`` records the user's answer to the ``.mcp.json`` prompt and returns the setup
as it is then.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.config import mcp_servers
from agent.config.mcp_servers import McpSetup, ServerConfig, Sources
from agent.config.settings import Settings
from agent.mcp.client import McpHub, ServerState

LOG_DIR = "mcp-logs"  # under COMPACT_AGENT_HOME: each stdio server's stderr


def sources_of(s: Settings) -> Sources:
    return Sources(
        root=s.root,
        home=s.home,
        user_home=s.user_home,
        environ=s.environ,
        trusted=s.report.trust.trusted,
        settings_servers=s.mcp_servers,
        enabled=tuple(s.enabled_mcpjson),
        disabled=tuple(s.disabled_mcpjson),
        enable_all=s.enable_all_project_mcp,
        flag_files=tuple(s.mcp_config),
        strict=s.strict_mcp_config,
    )


def setup_of(s: Settings) -> McpSetup:
    return mcp_servers.load(sources_of(s))


def hub_for(s: Settings, setup: McpSetup) -> McpHub:
    return McpHub(
        setup.servers,
        log_dir=s.home / LOG_DIR,
        cwd=s.cwd,
        connect_timeout=s.mcp_timeout,
        call_timeout=s.mcp_tool_timeout,
    )


def approve(s: Settings, configs: list[ServerConfig], approved: bool) -> McpSetup:
    mcp_servers.record_approval(s.home, s.root, configs, approved)
    return setup_of(s)


def report(state: ServerState, notice: Callable[[str, str], None]) -> None:
    """One line for a server that failed (connecting, or later: it crashed, hung up, sent garbage)."""
    if state.status == "failed":
        notice(f'MCP server "{state.name}" failed: {state.error}. /mcp reconnects it.', "warning")


def failure_lines(hub: McpHub) -> list[str]:
    return [f'MCP server "{s.name}" failed: {s.error}' for s in hub.states.values() if s.status == "failed"]
