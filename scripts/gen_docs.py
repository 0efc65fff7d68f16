"""Regenerate what the docs and ``--help`` derive from declarations (the pattern of llm's docs/help.md).

    .venv/bin/python scripts/gen_docs.py

Each generated part sits between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->`` in a docs page,
or in a constant of agent/cli.py; tests/test_settings_rows.py and tests/test_docs.py fail when one is
stale. What is generated: the settings table (docs/settings.md) and ``--help``'s list of environment
variables (``agent.cli.ENVIRONMENT``), from the settings rows (agent.config.settings.TABLE).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from agent.config.settings import TABLE  # noqa: E402
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


def pages() -> dict[Path, list[tuple[str, str]]]:
    """Each page and the generated parts it holds, by name."""
    return {ROOT / "docs" / "settings.md": [("settings table", markdown_table(TABLE))]}


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
    new = re.sub(
        r'(ENVIRONMENT = """\\\n).*?(""")',
        lambda m: m.group(1) + environment_block() + m.group(2),
        text,
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
