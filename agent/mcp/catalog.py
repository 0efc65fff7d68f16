"""The MCP part of a request's ``tools`` array, kept stable between compaction points.

    [built-in tools] [search tool] [loaded MCP tools, by name] [deferred MCP tools, defer_loading: true]
     \\________________ the prefix: changes only at a compaction point ______/ \\__ grows as servers connect __/

Every MCP tool is sent with ``defer_loading: true`` behind a tool search, whatever the base URL: the API's
own tool-search tool (``tool_search_tool_bm25``) when the API is the provider's own, else our client-side
``ToolSearch`` (agent/mcp/tools.py). A deferred tool costs nothing in the context until a search
returns a ``tool_reference`` to it, and adding deferred tools does not change the prefix the prompt
cache and preserved thinking depend on, so servers may connect at any time.

A tool found by a search stays callable while the reference is in the conversation. A compaction takes
the reference away, so the tools found before a compaction point are *loaded* after it: sent in full
(no ``defer_loading``), sorted by name. The loaded set is read from the conversation itself (the last
compaction's record of found tools, compact/context/discovered.py), so it changes only at a compaction point
and a resumed session rebuilds the same array. ``mode = "off"`` (``ENABLE_TOOL_SEARCH=false``) loads
every MCP tool instead, the user's explicit choice.
"""

from __future__ import annotations

from typing import Any

from agent.mcp.client import McpHub
from agent.mcp.tools import CAP_TOKENS, SEARCH_NAME, McpTool, ToolSearchTool
from core.mcp_names import tool_name
from core.tokens import estimate_text

API_SEARCH = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
LOAD_WAIT = 5.0  # seconds a request waits for the server of a loaded tool (a resumed session)


class McpCatalog:
    def __init__(self, hub: McpHub, mode: str, cap_tokens: int = CAP_TOKENS) -> None:
        self.hub = hub
        self.mode = mode  # api | client | off
        self.cap_tokens = cap_tokens
        self._tools: dict[str, McpTool] = {}
        self._seen_generation = -1
        self.search = ToolSearchTool(list(hub.states), self.deferred_schemas, self.waiting)

    @property
    def configured(self) -> bool:
        return bool(self.hub.states)

    def waiting(self) -> list[str]:
        return [s.name for s in self.hub.states.values() if s.status in ("pending", "connecting")]

    def refresh(self) -> None:
        """Take in the tools of servers that connected since the last look (arrival order is kept)."""
        if self.hub.generation == self._seen_generation:
            return
        self._seen_generation = self.hub.generation
        for state in self.hub.states.values():
            if state.status != "connected":
                continue
            listing = [t for t in state.tools if isinstance(t, dict) and t.get("name")]
            # two tools whose names read the same once made fit ("a.b" and "a_b"): a call or a rule for the
            # name couldn't tell which one is meant, so neither is offered
            remote: dict[str, set[str]] = {}
            for listed in listing:
                remote.setdefault(tool_name(state.name, str(listed["name"])), set()).add(str(listed["name"]))
            for listed in listing:
                tool = McpTool.from_listing(state.name, listed, self.hub.call, self.cap_tokens)
                if len(remote[tool.name]) > 1:
                    continue
                if tool.name not in self._tools:
                    self._tools[tool.name] = tool
                else:  # a reconnected server: the same name calls the same tool, its schema as now
                    self._tools[tool.name] = tool

    def tool(self, name: str) -> McpTool | ToolSearchTool | None:
        if name == SEARCH_NAME and self.mode == "client" and self.configured:
            return self.search
        self.refresh()
        return self._tools.get(name)

    def all_tools(self) -> list[McpTool]:
        self.refresh()
        return list(self._tools.values())

    def deferred_schemas(self, loaded: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
        return [t.schema() for t in self.all_tools() if t.name not in loaded]

    def wait_for(self, names: frozenset[str]) -> None:
        """Wait (a little) for the servers of tools the request must send in full."""
        servers = {n.split("__")[1] for n in names if n.count("__") >= 2}
        unknown = [s for s in self.hub.states if s in servers]
        if unknown and any(n not in self._tools for n in names):
            self.hub.start()
            self.hub.wait(LOAD_WAIT, unknown)

    def schemas(self, loaded: frozenset[str]) -> list[dict[str, Any]]:
        """The MCP part of the tools array: the search tool, the loaded tools, then the deferred ones."""
        if not self.configured:
            return []
        if loaded:
            self.wait_for(loaded)
        tools = self.all_tools()
        if self.mode == "off":
            return [t.schema() for t in sorted(tools, key=lambda t: t.name)]
        head: list[dict[str, Any]] = [dict(API_SEARCH) if self.mode == "api" else _search_schema(self.search)]
        head += [t.schema() for t in sorted(tools, key=lambda t: t.name) if t.name in loaded]
        tail = [{**t.schema(), "defer_loading": True} for t in tools if t.name not in loaded]
        return head + tail

    def counts(self, loaded: frozenset[str]) -> dict[str, int]:
        """Tokens of MCP definitions: loaded (in the context) and deferred (not, until found)."""
        tools = self.all_tools()
        sizes = {t.name: estimate_text(str(t.schema())) for t in tools}
        if self.mode == "off":
            return {"loaded": sum(sizes.values()), "deferred": 0, "tools": len(tools)}
        return {
            "loaded": sum(v for k, v in sizes.items() if k in loaded),
            "deferred": sum(v for k, v in sizes.items() if k not in loaded),
            "tools": len(tools),
        }


def _search_schema(tool: ToolSearchTool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}


def choose_mode(setting: str, base_url: str | None) -> str:
    """``auto``: the API's tool search on the provider's own API, ours anywhere else (a gateway or a local
    server may not run a server-side tool); ``api``/``client``/``off`` as the user chose."""
    if setting in ("api", "client", "off"):
        return setting
    if not base_url:
        return "api"
    from urllib.parse import urlsplit

    host = (urlsplit(base_url).hostname or "").lower()
    return "api" if host == "api.anthropic.com" or host.endswith(".anthropic.com") else "client"
