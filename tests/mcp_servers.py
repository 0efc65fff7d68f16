"""Real MCP servers for the tests and benchmarks, written with the ``mcp`` SDK's own server side (MCPServer).

    python tests/mcp_servers.py KIND [--http PORT] [--tools N] [--name NAME]

Kinds: ``basic`` (echo, add, a structured result, an image), ``slow`` (sleeps ``--delay`` seconds before it
serves, as ``many`` does when given ``--delay``; a tool that sleeps), ``crash`` (a tool that kills the process mid-call), ``big``
(a 1 MB result), ``many`` (N tools, 200 by default, with realistic descriptions), ``garbage`` (writes
lines that are not JSON-RPC to stdout, then serves as ``basic``), ``exit`` (exits at once), ``flood`` (writes 3 MB to stderr, then serves as ``basic``), ``collide`` (two tools
named ``get.item`` and ``get_item``, and ``echo``), ``images`` (pictures the Messages API refuses: over 5 MB,
not base64, ``text/html``, GIF bytes labelled PNG; and a good one).
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import time
from typing import Any

# a 1x1 PNG
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
BIG = 1_000_000
# a 1x1 GIF
GIF = base64.b64decode("R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==")


def build(kind: str, tools: int, name: str) -> Any:
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ImageContent, TextContent

    server = MCPServer(name)

    if kind in ("basic", "garbage", "slow", "crash", "big", "flood"):

        @server.tool(description="Echo the text back, prefixed with 'echo:'.")
        def echo(text: str) -> str:
            return f"echo: {text}"

        @server.tool(description="Add two integers and return the sum.")
        def add(a: int, b: int) -> int:
            return a + b

        @server.tool(description="The weather of a city, as structured data.")
        def weather(city: str) -> dict[str, Any]:
            return {"city": city, "temperature_c": 21, "sky": "clear"}

        @server.tool(description="A tiny picture and a caption.")
        def picture() -> list[Any]:
            data = base64.b64encode(PIXEL).decode()
            return [
                TextContent(type="text", text="a pixel"),
                ImageContent(type="image", data=data, mimeType="image/png"),
            ]

        @server.tool(description="Sleep for the given seconds, then answer 'woke'.")
        async def nap(seconds: float) -> str:
            await anyio.sleep(seconds)  # asleep on the event loop: a cancelled call ends its nap at once
            return "woke"

    if kind == "crash":

        @server.tool(description="Kill the server process in the middle of the call.")
        def boom() -> str:
            os._exit(3)

    if kind == "big":

        @server.tool(description="Return one megabyte of text.")
        def dump() -> str:
            line = "0123456789abcdef" * 4 + "\n"
            return (line * (BIG // len(line) + 1))[:BIG]

    if (
        kind == "collide"
    ):  # two tools whose names read the same once made fit for the API ("get.item", "get_item")

        @server.tool(name="get.item", description="Get an item (the dotted one).")
        def get_dotted(key: str) -> str:
            return f"dotted {key}"

        @server.tool(name="get_item", description="Get an item (the underscored one).")
        def get_underscored(key: str) -> str:
            return f"underscored {key}"

        @server.tool(description="Echo the text back, prefixed with 'echo:'.")
        def echo(text: str) -> str:
            return f"echo: {text}"

    if kind == "images":  # pictures the Messages API refuses, each with a caption, and one it takes

        def shot(caption: str, data: str, mime: str) -> list[Any]:
            return [
                TextContent(type="text", text=caption),
                ImageContent(type="image", data=data, mimeType=mime),
            ]

        @server.tool(description="A picture over the API's 5 MB limit.")
        def huge() -> list[Any]:
            # 4 MiB of bytes are 5.6 MB of base64, over the limit (on the base64): the SDK's reader joins
            # a long line's pieces again for each piece it reads, so 8 MB (6 MiB) cost 2 s of CPU
            return shot("huge", base64.b64encode(PIXEL + b"\0" * (4 * 1024 * 1024)).decode(), "image/png")

        @server.tool(description="A picture whose data is not base64.")
        def garbled() -> list[Any]:
            return shot("garbled", "this is %% not base64 at all!", "image/png")

        @server.tool(description="A web page labelled as a picture type the API doesn't take.")
        def page() -> list[Any]:
            return shot("page", base64.b64encode(b"<html><body>hi</body></html>").decode(), "text/html")

        @server.tool(description="GIF bytes labelled PNG.")
        def mislabelled() -> list[Any]:
            return shot("mislabelled", base64.b64encode(GIF).decode(), "image/png")

        @server.tool(description="A tiny picture and a caption.")
        def picture() -> list[Any]:
            return shot("a pixel", base64.b64encode(PIXEL).decode(), "image/png")

    if kind == "many":
        for tool_name in tool_names(name, tools):
            _add_numbered(server, name, tool_name)
    return server


_VERBS = ["list", "get", "create", "update", "delete", "search", "archive", "export", "sync", "count"]
# each benchmark server has its own things, as real servers do (a generic list for any other name)
_NOUNS = {
    "github": [
        "issues",
        "pull_requests",
        "branches",
        "commits",
        "releases",
        "labels",
        "milestones",
        "workflows",
    ],
    "jira": ["tickets", "sprints", "epics", "boards", "worklogs", "components", "versions"],
    "slack": ["channels", "messages", "threads", "reactions", "bookmarks", "reminders"],
    "postgres": ["tables", "indexes", "queries", "schemas", "roles", "extensions"],
    "browser": ["tabs", "screenshots", "cookies", "downloads", "bookmarks_bar", "forms", "pages"],
    "docs": ["documents", "folders", "comments_doc", "revisions", "templates", "permissions"],
}
_GENERIC = [
    "issues", "pull_requests", "branches", "commits", "releases", "labels", "milestones", "comments",
    "reviews", "workflows", "runners", "secrets", "webhooks", "deployments", "environments", "packages",
    "projects", "discussions", "gists", "teams",
]  # fmt: skip
_WHAT = {
    "github": "a GitHub repository (owner/name)",
    "jira": "a Jira project key",
    "slack": "a Slack workspace channel",
    "postgres": "a PostgreSQL database",
    "browser": "the controlled browser session",
    "docs": "a shared document drive",
}


def tool_names(prefix: str, count: int) -> list[str]:
    """The names ``many`` gives its tools (the benchmark's ground truth reads them from here)."""
    nouns = _NOUNS.get(prefix, _GENERIC)
    names = []
    for i in range(count):
        verb, noun = _VERBS[i % len(_VERBS)], nouns[(i // len(_VERBS)) % len(nouns)]
        names.append(f"{verb}_{noun}" if i < len(_VERBS) * len(nouns) else f"{verb}_{noun}_{i}")
    return names


def _add_numbered(server: Any, prefix: str, tool_name: str) -> None:
    verb, _, noun = tool_name.partition("_")
    noun = noun.rstrip("_0123456789").replace("_", " ")
    what = _WHAT.get(prefix, f"a {prefix} repository or organisation")

    def handler(target: str, limit: int = 10, include_archived: bool = False) -> str:
        return f"{prefix}:{tool_name} target={target} limit={limit}"

    description = (
        f"{verb.capitalize()} {noun} in {what}. Use this when the user asks to {verb} {noun}; the target "
        "names where to look, the limit caps how many items come back, and archived items are left out "
        "unless include_archived is true. Results are sorted newest first and paginated by the server; "
        "errors name the missing permission when the credentials cannot see the target."
    )
    server.add_tool(handler, name=tool_name, description=description)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind")
    parser.add_argument("--http", type=int, default=0)
    parser.add_argument("--tools", type=int, default=200)
    parser.add_argument("--name", default="test")
    parser.add_argument("--delay", type=float, default=3.0)
    args = parser.parse_args()
    if args.kind == "exit":
        sys.exit(2)
    if args.kind == "flood":
        for _ in range(3_000):
            sys.stderr.write("x" * 1_023 + "\n")
        sys.stderr.flush()
    if args.kind == "garbage":
        sys.stdout.write('this is not json\n{"also": "not rpc"}\n')
        sys.stdout.flush()
    if args.kind == "slow" or (args.kind == "many" and "--delay" in sys.argv):
        time.sleep(args.delay)
    server = build(args.kind, args.tools, args.name)
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
