"""MCP servers for a run of the CLI: a --mcp-config file that starts tests/mcp_servers.py's servers by name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.helpers.cli import ROOT

SERVERS = str(ROOT / "tests" / "mcp_servers.py")


def config_file(tmp: Path, servers: dict[str, str]) -> Path:
    path = tmp / "servers.json"
    path.write_text(
        json.dumps(
            {"mcpServers": {n: {"command": sys.executable, "args": [SERVERS, k]} for n, k in servers.items()}}
        )
    )
    return path
