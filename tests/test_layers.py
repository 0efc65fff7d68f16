"""The floors hold: each package imports only those below it, there is no import circle, the project's own
modules are imported at the top of a module (start-up exceptions are named here), and the terminal
libraries stay in the front end that owns them. The floors and rooms are written once, in
scripts/floors.py; every ruff.toml ban list is generated from them (scripts/gen_bans.py).

The imports are read from the source (every ``import`` statement, wherever it is: at the top, inside a
function, under ``if TYPE_CHECKING:``) and all of them count, for the floors and for circles; then every
module is imported in a fresh interpreter to be sure the static picture is the real one.
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripts import gen_bans
from scripts.floors import FLOORS, OWNERS, SUBFLOORS
from tests.helpers.cli import ROOT

# function-local imports of the project's own modules allowed, each for start-up speed
# (None: any of them; commands: custom commands read on first use; tools: the Bash reader and its program
# tables, ~25 ms of imports, load with the first command judged, not on the way to the first prompt)
LOCAL_IMPORTS_ALLOWED: dict[str, set[str] | None] = {
    "agent.cli": None,
    "agent.frontend.commands": None,
    "tools.permissions.engine": {"tools.shell.reader", "tools.shell.readonly"},
    "tools.permissions.bash_rules": {"tools.shell.programs", "tools.shell.subcommands"},
    "tools.shell.readonly": {"tools.shell.reader"},
    "tools.shell.reads": {"tools.shell.programs"},
}


def _allowed_locally(i: Import) -> bool:
    targets = LOCAL_IMPORTS_ALLOWED.get(i.module, set())
    return targets is None or i.target in targets


# one worker runs them all, so the import graph (all_imports) is parsed once in a run, not once per worker
pytestmark = pytest.mark.xdist_group("layers")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (dotted)
    line: int
    local: bool  # inside a function
    type_only: bool  # under ``if TYPE_CHECKING:``


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for floor in FLOORS for p in sorted((ROOT / floor).rglob("*.py"))}


# where Python's grammar puts statements: bodies (of a module, a def, a class, a loop, an if, a with, a try,
# an except clause, a match case), else and finally branches, except clauses and match cases
_STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements_in(node: ast.AST) -> list[ast.AST]:
    return [child for field in _STATEMENT_LISTS for child in getattr(node, field, None) or ()]


def imports_of(name: str, path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[Import] = []

    def visit(node: ast.AST, local: bool, type_only: bool) -> None:
        # an import is a statement: only the statement lists are walked, never an expression (a third of
        # the nodes, and the walk took 0.9 of all_imports' 1.2 s when it went through every node)
        for child in _statements_in(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for sub in child.body:
                    visit_one(sub, local, True)
                for sub in child.orelse:
                    visit_one(sub, local, type_only)
                continue
            visit_one(child, local, type_only)

    def visit_one(node: ast.AST, local: bool, type_only: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(name, a.name, node.lineno, local, type_only) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            base = node.module
            # "from compact.compaction import notes" imports the module compact.compaction.notes
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
            found.extend(Import(name, t, node.lineno, local, type_only) for t in targets)
        inner = local or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        visit(node, inner, type_only)

    visit(tree, False, False)
    return found


MODULES = modules()


@functools.cache
def all_imports() -> tuple[Import, ...]:
    """Every import in our modules, parsed when a test first asks (~0.5 s), not when the module is
    collected: each xdist worker collects this file, and one of them runs its tests."""
    return tuple(i for name, path in MODULES.items() for i in imports_of(name, path))


def floor_of(module: str) -> int | None:
    top = module.split(".")[0]
    return FLOORS.index(top) if top in FLOORS else None


def test_each_floor_imports_only_floors_below_it() -> None:
    upward = [
        f"{i.module}:{i.line} imports {i.target}"
        for i in all_imports()
        if floor_of(i.target) is not None and floor_of(i.target) > floor_of(i.module)
    ]  # type: ignore[operator]
    assert upward == []


def subfloor_of(module: str) -> tuple[int, str] | None:
    """(level, room) of a module inside a floor with rooms; loose modules get the level above every room."""
    rooms = SUBFLOORS.get(module.split(".")[0])
    if rooms is None:
        return None
    for level, names in enumerate(rooms):
        for room in names:
            if module == room or module.startswith(room + "."):
                return level, room
    return len(rooms), module.split(".")[0]


def test_each_room_imports_only_rooms_below_it() -> None:
    upward = []
    for i in all_imports():
        if floor_of(i.module) != floor_of(i.target) or i.target.split(".")[0] not in SUBFLOORS:
            continue
        mine, theirs = subfloor_of(i.module), subfloor_of(i.target)
        assert mine is not None and theirs is not None
        if i.target in (
            i.module.split(".")[0],
            mine[1],
        ):  # the package itself (``from agent import __version__``)
            continue
        if theirs[0] > mine[0] or (theirs[0] == mine[0] and theirs[1] != mine[1]):
            upward.append(f"{i.module}:{i.line} imports {i.target}")
    assert upward == []


def test_every_room_is_known_to_the_layer_test() -> None:
    """A new sub-package of a floor with rooms must take its place in SUBFLOORS."""
    known = {room for levels in SUBFLOORS.values() for level in levels for room in level}
    packages = {name for name, path in MODULES.items() if path.name == "__init__.py" and name.count(".") == 1}
    assert {p for p in packages if p.split(".")[0] in SUBFLOORS} == known


def test_the_room_check_catches_an_upward_import() -> None:
    """The room check can fail: a config module importing the runtime is upward, runtime importing config is not."""
    assert subfloor_of("agent.config.settings") == (0, "agent.config")
    assert subfloor_of("agent.runtime.loop")[0] > subfloor_of("agent.config.trust")[0]  # type: ignore[index]
    assert subfloor_of("agent.cli")[0] > subfloor_of("agent.demo.run")[0]  # type: ignore[index]
    assert subfloor_of("tools.read")[0] > subfloor_of("tools.permissions.engine")[0]  # type: ignore[index]


def test_there_is_no_import_circle() -> None:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for i in all_imports():
        if i.target in MODULES and i.target != i.module:  # type-only and function-local ones too
            graph[i.module].add(i.target)
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                walk(nxt, path + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name, [name])
    assert circles == []


def test_the_reader_sees_type_only_and_function_local_imports(tmp_path: Path) -> None:
    """The circle test counts what it must: the reader finds both kinds of import."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from compact.stages import view\n"
        "def f():\n    import compact.stages.state\n"
    )
    found = {(i.target, i.type_only, i.local) for i in imports_of("sample", sample)}
    assert {("compact.stages.view", True, False), ("compact.stages.state", False, True)} <= found


def test_the_projects_own_modules_are_imported_at_the_top() -> None:
    local = [
        f"{i.module}:{i.line} imports {i.target} inside a function"
        for i in all_imports()
        if i.local and floor_of(i.target) is not None and not _allowed_locally(i)
    ]
    assert local == []


def test_terminal_libraries_and_the_sdk_stay_with_their_owner() -> None:
    strays = [
        f"{i.module}:{i.line} imports {i.target}"
        for i in all_imports()
        for lib, owners in OWNERS.items()
        if (i.target == lib or i.target.startswith(lib + ".")) and i.module not in owners
    ]
    assert strays == []


# Imports each module first in a process of its own, all at once, each forked from one in which none of
# ours is loaded (the libraries are, so a child costs milliseconds instead of a fresh interpreter's
# seconds); prints {module: last line of the error} for the modules that failed. Our sources are compiled
# once before the children fork, into a bytecode cache of this run's own: with PYTHONDONTWRITEBYTECODE
# each child compiled every module it imports again, 163 times over (22 s of CPU; 9 s with the cache).
# The parent imports the libraries (stdlib and third-party) our modules import when they are imported (the
# first argument, from the source), not those imported inside a function: no child imports anthropic or
# mcp (1.3 s of the parent's CPU, for nothing), and none imports statistics, rich.console... again. Its
# objects are frozen out of the collector (gc.freeze) before it forks: a child's collections no longer walk
# (and copy, page by page) the parent's 200,000 objects. 7.0 s of CPU before, 4.0 s after.
_IMPORT_EACH_FIRST = """
import compileall, gc, importlib, json, os, shutil, sys, tempfile, traceback
own = tempfile.mkdtemp(prefix="layers-pyc-") if sys.dont_write_bytecode else None
sys.pycache_prefix = own or sys.pycache_prefix
for floor in ("core", "tools", "compact", "agent"):
    compileall.compile_dir(floor, quiet=1)
for library in json.loads(sys.argv[1]):
    try:
        importlib.import_module(library)
    except ImportError:
        pass
assert not [m for m in sys.modules if m.split(".")[0] in ("core", "tools", "compact", "agent")]
gc.freeze()
children = {}
for name in sys.argv[2:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(name)
        except BaseException:
            os.write(write, traceback.format_exc().strip().splitlines()[-1].encode())
            os._exit(1)
        os._exit(0)
    os.close(write)
    children[name] = (pid, os.fdopen(read, "rb"))
failed = {}
for name, (pid, pipe) in children.items():
    error = pipe.read().decode()
    pipe.close()
    if os.waitpid(pid, 0)[1] != 0:
        failed[name] = error or "died"
if own:
    shutil.rmtree(own, ignore_errors=True)
print(json.dumps(failed))
"""


def test_every_module_imports_in_a_fresh_interpreter() -> None:
    """Static analysis aside, importing any module first must work (a circle would show here)."""
    names = sorted(n for n in MODULES if not n.endswith("__main__"))  # __main__ would run the program
    libraries = sorted(
        {i.target for i in all_imports() if floor_of(i.target) is None and not (i.local or i.type_only)}
    )
    assert "rich.console" in libraries and "anthropic" not in libraries  # read as the comment above says
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH_FIRST, json.dumps(libraries), *names],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {}


def test_the_bash_reader_loads_with_the_first_command_not_before_the_first_prompt() -> None:
    """The REPL's start-up path leaves the Bash grammar's reader and its program tables unimported."""
    code = (
        "import sys, agent.cli, agent.frontend.repl, agent.runtime.lifecycle, agent.runtime.session\n"
        "print(sorted(m for m in ('tools.shell.reader', 'tools.shell.effects', 'tools.shell.subcommands') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# the fake Messages API: its server is agent/demo's scripted server, its client the agent's SDK client, so a
# test that talks to it is on the agent floor (tests/agent/), however it reaches it
WIRE = "tests.fakeapi"
# the conftest fixtures and markers that start the fake for a test (tests/conftest.py)
WIRE_FIXTURES = {"api", "fake_api"}
WIRE_MARKERS = {"fake_api", "fake_profile"}


def module_path_in_tests(name: str) -> Path | None:
    """The file of a tests module (a package: its __init__.py); None for a name that is not one."""
    base = ROOT / name.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def agent_imports_below(start: list[Path]) -> tuple[list[str], set[str]]:
    """The imports of agent/ or of the fake API in ``start`` and in every tests module they import,
    followed through, and the tests modules walked."""
    upward: list[str] = []
    seen: set[str] = set()
    todo = list(start)
    while todo:
        path = todo.pop()
        name = module_name(path)
        if name in seen:
            continue
        seen.add(name)
        for i in imports_of(name, path):
            if i.target == "agent" or i.target.startswith("agent.") or i.target == WIRE:
                upward.append(f"{path.relative_to(ROOT)}:{i.line} imports {i.target}")
            elif i.target.startswith("tests."):
                found = module_path_in_tests(i.target)
                if found is not None:
                    todo.append(found)
    return upward, seen


def wire_fixtures_in(path: Path) -> list[str]:
    """The places a test module asks conftest for the fake API: a test or fixture taking ``api`` or
    ``fake_api``, a ``fake_api`` or ``fake_profile`` marker."""
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = {a.arg for a in node.args.args + node.args.kwonlyargs}
            if args & WIRE_FIXTURES:
                found.append(f"{where}:{node.lineno} {node.name} takes {sorted(args & WIRE_FIXTURES)}")
        if isinstance(node, ast.Attribute) and node.attr in WIRE_MARKERS:
            if isinstance(node.value, ast.Attribute) and node.value.attr == "mark":
                found.append(f"{where}:{node.lineno} marks {node.attr}")
    return found


def test_compact_tests_and_the_helpers_they_use_import_nothing_from_agent() -> None:
    """tests/compact/** sit on compact's floor: they and the tests modules they import (the bench, the
    histories, the scripted model's helpers...) import nothing of agent/, and not the fake API either (its
    server is agent/demo's); nor do they take the fake from conftest (the ``api`` / ``fake_api`` fixtures,
    their markers). A test whose subject is the request on the wire belongs to tests/agent/."""
    files = sorted((ROOT / "tests" / "compact").rglob("*.py"))
    upward, seen = agent_imports_below(files)
    assert upward == []
    assert {"tests.helpers.bench", "tests.helpers.compaction", "tests.helpers.histories"} <= seen
    assert [place for path in files for place in wire_fixtures_in(path)] == []


def test_the_compact_floor_check_follows_a_helper_up_to_its_agent_imports() -> None:
    """The walk reads a helper a compact test would import: the agent floor's session_parts is caught, and
    so is the fake API behind the wire tests' helpers."""
    helper = module_path_in_tests("tests.helpers.session_parts")
    assert helper == ROOT / "tests" / "helpers" / "session_parts.py"
    upward, seen = agent_imports_below([helper])
    assert any("imports agent.runtime.hooks" in line for line in upward)
    assert "tests.helpers.bench" in seen  # followed into the bench it builds on
    wire = module_path_in_tests("tests.helpers.wire")
    assert wire is not None
    assert any(line.endswith(f"imports {WIRE}") for line in agent_imports_below([wire])[0])


def test_the_compact_floor_check_sees_a_test_taking_the_fake_from_conftest(tmp_path: Path) -> None:
    """A compact test that imports nothing of the fake but takes the ``api`` fixture, or marks a profile,
    is caught too."""
    path = ROOT / "tests" / "compact" / "test_decide.py"
    assert wire_fixtures_in(path) == []
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import pytest\n"
        "@pytest.mark.fake_profile('4.x', reason='old rules')\n"
        "def test_x(tmp_path, api):\n    pass\n"
    )
    found = {line.split(" ", 1)[1] for line in wire_fixtures_in(probe)}
    assert found == {"test_x takes ['api']", "marks fake_profile"}


def test_modules_of_tests_import_no_test_module() -> None:
    """What tests share is in tests/helpers/ (and conftest's fixtures): no module under tests/ imports a
    test module (``test_*``), whose helpers would then live beside the tests of something else."""
    found = [
        f"{path.relative_to(ROOT)}:{i.line} imports {i.target}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for i in imports_of(module_name(path), path)
        if i.target.startswith("tests.") and i.target.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert found == []


def test_the_ban_lists_are_generated_from_the_floors() -> None:
    """Every floor's and room's ruff.toml is what scripts/gen_bans.py writes from scripts/floors.py."""
    stale = [
        str(p.relative_to(ROOT))
        for p, text in gen_bans.files().items()
        if not p.exists() or p.read_text() != text
    ]
    assert stale == [], "run scripts/gen_bans.py"
    written = {p.relative_to(ROOT) for p in gen_bans.files()}
    on_disk = {p.relative_to(ROOT) for floor in FLOORS for p in (ROOT / floor).rglob("ruff.toml")}
    assert on_disk == written
