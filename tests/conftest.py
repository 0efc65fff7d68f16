"""Shared fixtures: an isolated HOME / COMPACT_AGENT_HOME / environment for every test, the fake API,
and the ways to run the real CLI against it: in this process (``run_cli``), as a subprocess
(``run_cli_process``, where the process is what is tested), as a process a test kills or reads while it
runs (``spawn``), and as the REPL in tmux (``agent_in_tmux``). The functions they and the tests share are
in tests/helpers/ (a test imports those from there, never from here)."""

from __future__ import annotations

import compileall
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import (
    SCRUBBED,
    CliResult,
    cli_env,
    kill_tree,
    run_in_process,
    run_process,
)
from tests.helpers.tmux import Pane

# COMPACT_TESTS_CLI=process: run_cli starts a real process too (to check the in-process runner against it)


def pytest_configure(config: pytest.Config) -> None:
    """Bytecode cached as Python caches it by default (``__pycache__``, ignored by git), also under
    PYTHONDONTWRITEBYTECODE: with it, every xdist worker rewrote and compiled every test module again (5
    of its 9 s of collection) and every process a test starts (the CLI, a tmux pane's agent, an MCP server,
    test_layers' 163 first imports) compiled our sources again. The process that starts the workers
    compiles ours once before they start; the workers and what they start inherit the setting."""
    if hasattr(config, "workerinput") or not os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        return
    sys.dont_write_bytecode = False
    root = Path(__file__).resolve().parents[1]
    for folder in ("core", "tools", "compact", "agent", "scripts"):
        compileall.compile_dir(root / folder, quiet=1)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` (scripts/check) as pytest-xdist means it: a test marked
    ``xdist_group(name)`` runs on the one worker of its group. xdist finds the group in the node id's
    ``@name`` suffix, which it adds by setting ``item._nodeid``; pytest 9.2 reads a node's id from
    ``item._id``, so the suffix was lost and test_layers' tests ran on 4 workers, each parsing the
    import graph again. The suffix is added here where xdist's did not take."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        groups = sorted(
            {
                str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                for m in item.iter_markers("xdist_group")
            }
        )
        if groups and "@" not in item.nodeid and hasattr(item, "_id"):
            item._id = type(item._id).parse(f"{item.nodeid}@{'_'.join(groups)}")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    for key in list(os.environ):
        if key.startswith(SCRUBBED):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("COMPACT_AGENT_HOME", str(home / ".compact-agent"))
    return home


@pytest.fixture(autouse=True)
def fake_profile(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """``@pytest.mark.fake_profile("4.x", reason=...)``: the fakes this test makes without naming a profile
    play the 4.x budget rules instead of the 5.5 family's (the default). For tests about the 4.x rules;
    the reason says why the test is not on today's models."""
    marker = request.node.get_closest_marker("fake_profile")
    if marker is None:
        return
    assert marker.kwargs.get("reason"), "fake_profile needs a reason="
    from tests import fakeapi

    monkeypatch.setattr(fakeapi, "DEFAULT_PROFILE", marker.args[0])


@pytest.fixture(autouse=True)
def no_refused_requests() -> Any:
    """Every test on the fake API sends only requests the API accepts: after the test, a request any fake
    refused (a 400 of the profile's rules, of validation or of the prefix check) that the test did not
    clear from ``api.violations`` or declare with ``api.expect_refusals()``, and any drop_block fallback
    it did not clear, fails it (a request the script had no step for is ``check()``'s to fail). The
    fakes run on the 5.5 family's rules by default, so this is what "the suite runs on the 2026 profile
    with 0 refused requests" rests on."""
    yield
    fakeapi = sys.modules.get("tests.fakeapi")  # not imported: no fake was made (nor is it imported here)
    live = list(fakeapi.LIVE) if fakeapi is not None else []
    found = [problem for api in live for problem in api.unexpected()]
    assert not found, "the fake API refused requests the test did not expect:\n" + "\n".join(found)


@pytest.fixture
def fake_api(request: pytest.FixtureRequest) -> Any:
    """The one fake Messages API fixture (tests/fakeapi.py), started for the test and stopped after it.
    ``@pytest.mark.fake_api(profile=..., binding=..., ...)`` on the test, its class or its module (as
    ``pytestmark``) gives the ``FakeAPI`` options: with none, the 5.5 family's rules (or FAKEAPI_PROFILE's,
    or the test's ``fake_profile``). After the test the fake holds no violation the test did not clear
    (an unscripted request too), unless the test declared ``api.expect_refusals()``."""
    from tests.fakeapi import FakeAPI

    marker = request.node.get_closest_marker("fake_api")
    with FakeAPI(**(marker.kwargs if marker else {})) as api:
        yield api
    if not api.refusals_expected:  # a test of refusals looks at its own (api.expect_refusals())
        assert api.violations == [], "the fake API recorded violations:\n" + "\n".join(api.violations)


@pytest.fixture
def api(fake_api: Any) -> Any:
    """The same fake under the shorter name most tests use."""
    return fake_api


@pytest.fixture(scope="session")
def warm_sdk() -> None:
    """One streamed request through the client, once per process: the SDK's import and the parts it loads
    on first use take seconds on a loaded machine (more in a fresh xdist worker), which a test that times
    retries or a cancel must not count. (Imported first: a request made while it is not goes the standard
    library's way, agent.runtime.first_request.)"""
    from agent.runtime.sdk import ModelClient, sdk
    from core.model import Request
    from tests.fakeapi import FakeAPI

    sdk()
    with FakeAPI() as api:
        api.reply_text("warm")
        ModelClient(api_key="test-key", auth_token=None, base_url=api.url).stream(
            Request(
                model="claude-sonnet-4-6",
                system=[{"type": "text", "text": "s"}],
                tools=[],
                messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                max_tokens=100,
            )
        )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    return p


@pytest.fixture
def run_cli(project: Path, isolated_env: Path):
    """run_cli(api, *args, env={...}, stdin=None, cwd=project) -> CliResult: the CLI's ``main`` run in
    this process, as ``python -m agent`` would run it (see ``run_in_process``). For print-mode behaviour;
    where the process itself is the subject (signals, start-up, what it imports) use ``run_cli_process``."""

    def run(
        api: Any,
        *args: str,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
        cwd: Path | None = None,
        timeout: float = 120,
    ) -> CliResult:
        if os.environ.get("COMPACT_TESTS_CLI") == "process":  # the same tests against real processes
            return run_process(list(args), cli_env(isolated_env, api, env), cwd or project, stdin, timeout)
        return run_in_process(list(args), cli_env(isolated_env, api, env), cwd or project, stdin, timeout)

    return run


@pytest.fixture
def run_cli_process(project: Path, isolated_env: Path):
    """run_cli_process(api, *args, env={...}, stdin=None, cwd=project) -> CliResult (a real subprocess)."""

    def run(
        api: Any,
        *args: str,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
        cwd: Path | None = None,
        timeout: float = 120,
    ) -> CliResult:
        return run_process(list(args), cli_env(isolated_env, api, env), cwd or project, stdin, timeout)

    return run


@pytest.fixture
def spawn(project: Path, isolated_env: Path):
    """spawn(api, *args, env=...) -> Popen of the real CLI in its own process group, for a test that kills
    it or reads it while it runs; what is left of it is killed at teardown (tests.helpers.cli.kill_tree)."""
    started: list[subprocess.Popen[str]] = []

    def start(api: Any, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        full_env = cli_env(isolated_env, api, env)
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent", *args],
            cwd=project,
            env=full_env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            kill_tree(proc)


@pytest.fixture
def agent_in_tmux(fake_api, project, isolated_env):
    """agent_in_tmux(*args, width=120, **env) -> Pane: the REPL against the test's fake API in a terminal of
    its own (tests/helpers/tmux.py), once its prompt is up; closed at teardown."""
    panes: list[Pane] = []

    def start(*args: str, width: int = 120, **env: str) -> Pane:
        pane = Pane(
            isolated_env,
            project,
            {**fake_api.env(), "COMPACT_AGENT_SESSION_MEMORY": "0", **env},
            list(args),
            width,
        )
        panes.append(pane)
        pane.wait_for(r"/help for commands")
        pane.wait_prompt()
        return pane

    yield start
    for pane in panes:
        pane.close()
