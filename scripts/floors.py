"""The floors and rooms of the code, written once: the layer test (tests/test_layers.py) checks the imports
against them and ``scripts/gen_bans.py`` writes every floor's and room's ``ruff.toml`` ban list from them
(tests/test_layers.py fails when a ban list is stale).

    agent/    cli.py on top; demo/ < frontend/ < runtime/ < mcp/ and memory/ < config/ and transcript/ (side by side)
    compact/  request_cycle.py, autocompact.py, start.py, owner.py on top; workers/ < compaction/ < context/ < stages/ < decision/
    tools/    the model's tools on top; permissions/ < shell/ < process/
    core/     messages, token estimate, events, errors, private files, the model protocol

Inside a floor the rooms are floors too: a room imports only the rooms below it (rooms on one level, a
tuple, may not import each other), and the floor's loose modules sit on top of all its rooms.
"""

from __future__ import annotations

FLOORS = ["core", "tools", "compact", "agent"]
# the rooms of a floor, lowest first; a tuple is one level whose rooms don't import each other.
SUBFLOORS: dict[str, list[tuple[str, ...]]] = {
    "agent": [
        ("agent.config", "agent.transcript"),
        ("agent.mcp", "agent.memory"),
        ("agent.runtime",),
        ("agent.frontend",),
        ("agent.demo",),
    ],
    "compact": [
        ("compact.decision",),
        ("compact.stages",),
        ("compact.context",),
        ("compact.compaction",),
        ("compact.workers",),
    ],
    "tools": [("tools.process",), ("tools.shell",), ("tools.permissions",)],
}
# third-party packages that belong to one module (or a few)
OWNERS = {
    "rich": {"agent.frontend.ui", "agent.frontend.repl"},
    "prompt_toolkit": {"agent.frontend.repl"},
    "anthropic": {"agent.runtime.sdk"},
    "mcp": {"agent.mcp.client"},
}
