"""Each kind of stale memory, against real files: a session's records are written to memory, the working
tree changes, and the next load finds out by content (agent/memory/verify.py), refreshing where the tree
shows the new value and marking the rest stale, never serving them as current."""

from __future__ import annotations

import json
from pathlib import Path

from agent.memory import service
from agent.memory.entries import CURRENT, REFRESHED, STALE
from tests.helpers.memory import NOW, Records, repo, settings_for

MAKEFILE = "include mk/test.mk\n\nbuild:\n\tpython3 -m compileall -q src\n\nlint:\n\truff check src\n"
FILES = {
    "Makefile": MAKEFILE,
    "mk/test.mk": "test:\n\tpython3 -m pytest -q tests\n",
    "pyproject.toml": '[project]\nname = "x"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
    "src/calc.py": "def add(a, b):\n    return a - b\n",
    "src/helpers.py": "def double(x):\n    return 2 * x\n",
    "package.json": '{"scripts": {"test": "jest", "lint": "eslint ."}}',
    "tools/gen.py": "print('generated')\n",
}


def remembered(tmp_path: Path) -> tuple[Path, Path]:
    project = repo(tmp_path / "project", FILES)
    home = tmp_path / "home"
    r = Records()
    r.read(project / "Makefile").read(project / "pyproject.toml")
    r.run("make build").run("make test", 2, "FAILED tests/test_calc.py::test_add")
    r.read(project / "src/calc.py").edit(project / "src/calc.py", "a - b", "a + b")
    r.run("make test").run("make lint").run("python3 tools/gen.py")
    r.read(project / "src/helpers.py").edit(project / "src/helpers.py", "2 * x", "x + x")
    written, problems = service.remember(settings_for(project, home), r.messages, NOW)
    assert written >= 7 and problems == []
    return project, home


def states(project: Path, home: Path) -> dict[str, tuple[str, str, str]]:
    loaded = service.load(settings_for(project, home), NOW)
    return {m.slot: (m.state, m.reason, m.text) for m in loaded.memories}


def test_unchanged_tree_serves_every_memory_as_current(tmp_path: Path) -> None:
    project, home = remembered(tmp_path)
    found = states(project, home)
    assert {s for s, (state, _, _) in found.items() if state != CURRENT} == set()
    assert "`make test` runs `python3 -m pytest -q tests`; failed first (exit 2" in found["command:test"][2]
    assert "passed after editing src/calc.py" in found["command:test"][2]
    assert found["file:src/calc.py"][2] == "src/calc.py:2 was edited: `return a + b`"


def test_a_renamed_make_target_is_refreshed_with_its_new_name(tmp_path: Path) -> None:
    project, home = remembered(tmp_path)
    (project / "Makefile").write_text(MAKEFILE.replace("build:", "compile:"))
    state, reason, text = states(project, home)["command:build"]
    assert state == REFRESHED and "`build` is now called `compile`" in reason
    assert text == "`make compile` runs `python3 -m compileall -q src`"


def test_a_changed_linter_is_refreshed_from_the_recipe(tmp_path: Path) -> None:
    project, home = remembered(tmp_path)
    (project / "Makefile").write_text(MAKEFILE.replace("ruff check src", "flake8 src"))
    state, reason, text = states(project, home)["command:lint"]
    assert (state, text) == (REFRESHED, "`make lint` runs `flake8 src`")
    # the next load finds it true as refreshed
    assert states(project, home)["command:lint"][0] == CURRENT


def test_a_deleted_cited_file_is_stale(tmp_path: Path) -> None:
    project, home = remembered(tmp_path)
    (project / "src/helpers.py").unlink()
    (project / "tools/gen.py").unlink()
    found = states(project, home)
    assert found["file:src/helpers.py"][:2] == (STALE, "src/helpers.py no longer exists")
    assert found["command:run"][:2] == (STALE, "tools/gen.py no longer exists")


def test_a_target_whose_file_is_no_longer_included_is_stale_though_its_lines_are_unchanged(
    tmp_path: Path,
) -> None:
    project, home = remembered(tmp_path)
    before = (project / "mk/test.mk").read_text()
    (project / "Makefile").write_text(MAKEFILE.replace("include mk/test.mk\n", ""))
    assert (project / "mk/test.mk").read_text() == before
    state, reason, _ = states(project, home)["command:test"]
    assert state == STALE
    assert reason == "mk/test.mk still defines `test`, but Makefile no longer includes it: `make test` fails"


def test_a_config_file_read_first_makes_the_cited_unchanged_section_stale(tmp_path: Path) -> None:
    project, home = remembered(tmp_path)
    (project / "pytest.ini").write_text("[pytest]\naddopts = -x\n")
    state, reason, _ = states(project, home)["config:pytest"]
    assert state == STALE and reason.startswith(
        "pytest.ini now configures pytest and is read before pyproject.toml"
    )


def test_changed_cited_lines_are_stale_and_moved_ones_refreshed(tmp_path: Path) -> None:
    project, home = remembered(tmp_path)
    (project / "src/calc.py").write_text("# calc\n\ndef add(a, b):\n    return a + b\n")
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.pytest.ini_options]\ntestpaths = ["t"]\n'
    )
    found = states(project, home)
    assert found["file:src/calc.py"][0] == REFRESHED
    assert found["file:src/calc.py"][2] == "src/calc.py:4 was edited: `return a + b`"
    state, reason, _ = found["config:pytest"]
    assert state == STALE and "no longer says what was cited" in reason


def test_a_removed_makefile_and_a_removed_npm_script(tmp_path: Path) -> None:
    project, home = remembered(tmp_path)
    (project / "Makefile").unlink()
    assert states(project, home)["command:build"][:2] == (STALE, "there is no makefile in . any more")
    later = Records(start="2026-11-29T11:00:00Z").run("npm run lint")
    service.remember(settings_for(project, home), later.messages, NOW)
    assert states(project, home)["command:lint"][0] == CURRENT  # the newer evidence took the slot
    (project / "package.json").write_text('{"scripts": {"test": "jest"}}')
    assert states(project, home)["command:lint"][:2] == (
        STALE,
        "package.json no longer has the script 'lint'",
    )


def test_stale_memories_are_served_only_as_stale(tmp_path: Path) -> None:
    project, home = remembered(tmp_path)
    (project / "src/helpers.py").unlink()
    loaded = service.load(settings_for(project, home), NOW)
    current, _, stale = loaded.text.partition("## Stale")
    assert "src/helpers.py" not in current
    assert "src/helpers.py" in stale and "STALE, not current" in stale and "no longer exists" in stale
    assert (loaded.stale, loaded.served) == (1, len(loaded.memories) - 1)
    on_disk = json.loads((service.folder(settings_for(project, home)) / "memories.json").read_text())
    assert {m["slot"]: m["state"] for m in on_disk["memories"]}["file:src/helpers.py"] == STALE


def test_newer_evidence_wins_over_a_stale_memory(tmp_path: Path) -> None:
    project, home = remembered(tmp_path)
    (project / "Makefile").write_text(MAKEFILE.replace("include mk/test.mk\n", ""))
    assert states(project, home)["command:test"][0] == STALE
    later = Records(start="2026-11-29T11:00:00Z").run("make -f mk/test.mk test")
    service.remember(settings_for(project, home), later.messages, NOW)
    state, _, text = states(project, home)["command:test"]
    assert (state, text) == (CURRENT, "`make -f mk/test.mk test` runs `python3 -m pytest -q tests`")
