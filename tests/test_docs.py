"""The README is the front door: under 150 lines, linking every page of docs/; links resolve; what the docs
and --help derive from declarations (slash commands here, settings in test_settings_rows) is current."""

from __future__ import annotations

import re
from pathlib import Path

from agent import cli
from agent.frontend import commands
from scripts import gen_docs

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file, without their #anchors."""
    targets = [t.split("#")[0] for t in LINK.findall(path.read_text())]
    return [t for t in targets if t and not re.match(r"[a-z]+:", t)]


def test_the_readme_fits_on_a_screen() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) < 150


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(ROOT / t).resolve() for t in links(ROOT / "README.md")}
    pages = sorted((ROOT / "docs").glob("*.md"))
    assert pages, "docs/ has pages"
    assert [p.name for p in pages if p.resolve() not in linked] == []


def test_every_relative_link_in_the_docs_resolves() -> None:
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [
        f"{path.relative_to(ROOT)}: {target}"
        for path in files
        for target in links(path)
        if not (path.parent / target).exists()
    ]
    assert broken == []


def test_the_slash_command_list_in_the_docs_and_in_help_is_generated_from_the_commands() -> None:
    usage = (ROOT / "docs" / "usage.md").read_text()
    assert gen_docs.between(usage, "slash commands") == gen_docs.commands_table(), "run scripts/gen_docs.py"
    assert cli.COMMAND_LIST == gen_docs.command_block(), "run scripts/gen_docs.py"


def test_every_generated_part_is_current() -> None:
    """What scripts/gen_docs.py would write is what is there (so running it changes nothing)."""
    for path, parts in gen_docs.pages().items():
        text = path.read_text()
        for name, content in parts:
            assert gen_docs.between(text, name) == content, f"{path.name}: {name} (run scripts/gen_docs.py)"
    for name, make in gen_docs.CONSTANTS.items():
        assert getattr(cli, name) == make(), f"agent/cli.py {name} (run scripts/gen_docs.py)"


def test_the_slash_commands_the_readme_names_exist() -> None:
    named = set(re.findall(r"(?<![\w/.])/([a-z][a-z-]*)\b", (ROOT / "README.md").read_text()))
    assert named and named <= set(commands.names()), named - set(commands.names())


def _readme_rows(readme: Path) -> set[str]:
    """The files a package's or room's README lists in its tables (a row's first cell: `name.py` or `room/name.py`)."""
    rows = set()
    for line in readme.read_text().splitlines():
        m = re.match(r"\| `([\w/]+\.py)` \|", line)
        if m:
            rows.add(m.group(1))
    return rows


def test_every_package_and_room_readme_lists_exactly_its_files() -> None:
    """Each README of a floor or room names every module in it (its own files, or a room's as `room/x.py`) and no other."""
    wrong = {}
    for floor in ("core", "tools", "compact", "agent"):
        for readme in sorted((ROOT / floor).rglob("README.md")):
            folder = readme.parent
            if "sample" in folder.parts:
                continue
            own = {p.name for p in folder.glob("*.py") if p.name != "__init__.py"}
            listed = _readme_rows(readme)
            plain = {r for r in listed if "/" not in r}
            nested = {r for r in listed if "/" in r}
            missing = own - plain
            extra = plain - own
            extra |= {r for r in nested if not (folder / r).exists()}
            if missing or extra:
                wrong[str(readme.relative_to(ROOT))] = {"missing": sorted(missing), "extra": sorted(extra)}
    assert wrong == {}


def test_the_documented_defaults_are_what_the_screen_shows(tmp_path: Path) -> None:
    """docs/settings.md's table and docs/usage.md say what a session started with no settings shows: the
    model's row default is the model the banner names, every row's default is what /config shows for it,
    and the thinking section says thinking is on or off as the toolbar does for it (issue 41: the docs said
    claude-sonnet-4-5 and "off" over a 5.5 screen; /config showed "(none)" where they said false)."""
    from agent.config.settings import load_settings
    from agent.frontend.repl import thinking_status
    from agent.runtime import lifecycle
    from core.models import family_of

    env = {"HOME": str(tmp_path), "COMPACT_AGENT_HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": "k"}
    settings = load_settings(cwd=tmp_path, environ=env, cli={})
    session = lifecycle.open_session(settings, emit=lambda e: None, ask=None, environ=env)
    rows = {}
    for line in (DOCS / "settings.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[3]
    assert rows["model"] == session.model  # the banner's model
    # every documented default is what /config's settings rows show where no source set the value
    shown = {"on": "true", "off": "false", "(none)": "—", "[]": "—", "{}": "—"}
    documented = {}
    for line in (DOCS / "settings.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and "`" in cells[0] + cells[1]:
            documented[(cells[0] if cells[0] != "—" else cells[1]).strip("`")] = cells[3]
    menu = commands.run(session, "/config")
    assert isinstance(menu, commands.ConfigMenu)
    defaults = [
        (name, value) for name, value, source in menu.rows if not source or source.startswith("default")
    ]
    assert len(defaults) >= 30, menu.rows
    differ = {
        name: (value, documented.get(name))
        for name, value in defaults
        if re.sub(r"^(\d+)\.0$", r"\1", shown.get(value, value)) != documented.get(name)
    }
    assert differ == {}, "screen vs docs/settings.md"
    thinking = (DOCS / "usage.md").read_text().split("## Extended thinking", 1)[1].strip()
    first = thinking.split(".", 1)[0]
    on = session.thinking_on and "thinking off" not in thinking_status(session)
    assert first.startswith("On by default on the default model") == on, first
    assert family_of(session.model).thinks_by_default == on


def test_the_generated_help_file_is_current() -> None:
    """agent/help_text.py is exactly what scripts/gen_docs.py writes (the CLI keeps no generated text)."""
    assert (ROOT / "agent" / "help_text.py").read_text() == gen_docs.help_text(), "run scripts/gen_docs.py"
    assert '"""\\\n  /help' not in (ROOT / "agent" / "cli.py").read_text()


def test_the_code_cites_no_document_outside_the_repository() -> None:
    """The behaviour the code relies on is described in docs/, in our words: no reference to a section of
    the spec or the contract points to a document the repository does not hold."""
    cited = [
        f"{p.relative_to(ROOT)}:{n}"
        for folder in ("core", "tools", "compact", "agent", "tests", "benchmarks", "scripts", "docs")
        for p in sorted((ROOT / folder).rglob("*"))
        if p.suffix in (".py", ".md")
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if re.search(r"\b(SPEC|CONTRACT) \u00a7", line)
    ]
    assert cited == []
