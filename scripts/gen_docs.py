"""Regenerate what the docs and ``--help`` derive from declarations (the pattern of llm's docs/help.md).

    .venv/bin/python scripts/gen_docs.py

Each generated part sits between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->`` in a docs page,
or in a constant of agent/cli.py; tests/agent/config/test_settings_rows.py and tests/test_docs.py fail when one is
stale. What is generated: the settings table (docs/settings.md) and ``--help``'s list of environment
variables (``agent.cli.ENVIRONMENT``), from the settings rows (agent.config.settings.TABLE); the slash
commands (docs/usage.md) and ``--help``'s list of them (``agent.cli.COMMAND_LIST``), from the commands
registered in agent.frontend.commands.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from agent.config.settings import TABLE  # noqa: E402
from agent.frontend.commands import COMMANDS, Command  # noqa: E402
from core.setting import help_lines, markdown_table  # noqa: E402


def between(text: str, name: str) -> str:
    """The generated part NAME of a page ("" when it has none)."""
    match = re.search(rf"<!-- generated: {name} -->\n(.*?)<!-- end: {name} -->", text, re.DOTALL)
    return match.group(1) if match else ""


def put(text: str, name: str, content: str) -> str:
    start, end = f"<!-- generated: {name} -->\n", f"<!-- end: {name} -->"
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"no generated part {name!r} to fill")
    return pattern.sub(lambda _: start + content + end, text)


def environment_block() -> str:
    return "\n".join(help_lines(TABLE))


def _commands() -> list[Command]:
    """Each built-in command once (an alias is a second key of the same command), in registration order."""
    return list({id(cmd): cmd for cmd in COMMANDS.values()}.values())


def _label(cmd: Command) -> str:
    return "/" + cmd.name + (" " + cmd.usage if cmd.usage else "")


def commands_table() -> str:
    lines = ["| command | what it does |", "|---|---|"]
    for cmd in _commands():
        aliases = "".join(f" (or `/{a}`)" for a in cmd.aliases)
        label = _label(cmd).replace("|", "\\|")  # a pipe inside a table cell must be escaped
        lines.append(f"| `{label}`{aliases} | {cmd.summary} |")
    return "\n".join(lines) + "\n"


def command_block() -> str:
    """``--help``'s list of the slash commands."""
    labels = {cmd.name: _label(cmd) + "".join(f", /{a}" for a in cmd.aliases) for cmd in _commands()}
    width = max(len(label) for label in labels.values()) + 2
    return "\n".join(f"  {labels[cmd.name].ljust(width)}{cmd.summary}" for cmd in _commands())


CONSTANTS = {"ENVIRONMENT": environment_block, "COMMAND_LIST": command_block}


def pages() -> dict[Path, list[tuple[str, str]]]:
    """Each page and the generated parts it holds, by name."""
    return {
        ROOT / "docs" / "settings.md": [("settings table", markdown_table(TABLE))],
        ROOT / "docs" / "usage.md": [("slash commands", commands_table())],
    }


def main() -> int:
    changed = []
    for path, parts in pages().items():
        text = path.read_text()
        new = text
        for name, content in parts:
            new = put(new, name, content)
        if new != text:
            path.write_text(new)
            changed.append(path)
    cli = ROOT / "agent" / "cli.py"
    text = cli.read_text()
    new = text
    for name, make in CONSTANTS.items():
        new = re.sub(
            rf'({name} = """\\\n).*?(""")',
            lambda m, make=make: m.group(1) + make() + m.group(2),
            new,
            count=1,
            flags=re.DOTALL,
        )
    if new != text:
        cli.write_text(new)
        changed.append(cli)
    for path in changed:
        print(f"regenerated {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
