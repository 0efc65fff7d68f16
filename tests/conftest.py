"""Shared fixtures: an isolated HOME / COMPACT_AGENT_HOME / environment for every test, the fake API,
and two ways to run the real CLI against it: in this process (``run_cli``) or as a subprocess
(``run_cli_process``, where the process is what is tested)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
_SCRUB = ("ANTHROPIC_", "CLAUDE_", "COMPACT_AGENT_", "DISABLE_COMPACT", "DISABLE_AUTO_COMPACT", "NO_COLOR")
# COMPACT_TESTS_CLI=process: run_cli starts a real process too (to check the in-process runner against it)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    for key in list(os.environ):
        if key.startswith(_SCRUB):
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
    retries or a cancel must not count."""
    from agent.runtime.sdk import ModelClient
    from core.model import Request
    from tests.fakeapi import FakeAPI

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


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        return json.loads(self.stdout.strip().splitlines()[-1])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    return p


def cli_env(home: Path, api: Any = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the real CLI in a test: this process's without our variables (_SCRUB), HOME and
    COMPACT_AGENT_HOME under ``home``, a test key, the fake API's URL if there is one, and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}
    env.update(
        {
            "HOME": str(home),
            "COMPACT_AGENT_HOME": str(home / ".compact-agent"),
            "ANTHROPIC_API_KEY": "test-key",
            "PYTHONPATH": str(ROOT),
        }
    )
    if api is not None:
        env["ANTHROPIC_BASE_URL"] = api.url
    env.update(extra or {})
    return env


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


def run_process(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str | None, timeout: float = 120
) -> CliResult:
    """``python -m agent`` with ``args`` as a real subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "agent", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def _join(thread: threading.Thread, deadline: float) -> None:
    """``thread.join`` up to ``deadline``; a thread whose ``start()`` was called but which is not yet running
    is listed by ``threading.enumerate`` and can't be joined yet: wait for it to begin (a loaded machine
    makes that moment long enough to see)."""
    while True:
        try:
            thread.join(max(0.0, deadline - time.monotonic()))
            return
        except RuntimeError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)


def run_in_process(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str | None, timeout: float = 120
) -> CliResult:
    """``agent.cli.main`` with ``args``, as a process would run it: ``env`` as the whole environment,
    ``cwd`` as the working directory, ``stdin`` (else an empty, closed one) and the output captured; then
    what a process's exit does: notes updates in flight are waited for (the exit hook), the watchdog's
    groups die, the transcripts' locks are released, and the threads the run started are given ``timeout`` to end (a daemon thread dies
    with a process: here one still running fails the test rather than outlive it)."""
    from agent.cli import main
    from compact.compaction import notes_updater
    from core import transcript_writer as writer
    from tools.process import watchdog

    saved = (dict(os.environ), os.getcwd(), sys.argv, sys.stdin, sys.stdout, sys.stderr)
    before = set(threading.enumerate())
    locked = set(writer._locks)
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.argv = ["compact-agent", *args]
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin or ""), out, err
        try:
            main()
        except SystemExit as e:
            code = e.code
    finally:
        notes_updater.wait_at_exit()
        watchdog.close()
        for path in set(writer._locks) - locked:  # an exit closes the descriptors: the transcripts' locks go
            os.close(writer._locks.pop(path)[0])
        os.environ.clear()
        os.environ.update(saved[0])
        os.chdir(saved[1])
        sys.argv, sys.stdin, sys.stdout, sys.stderr = saved[2:]
    deadline = time.monotonic() + timeout
    for thread in set(threading.enumerate()) - before - {t for t in threading.enumerate() if not _ours(t)}:
        _join(thread, deadline)
        assert not thread.is_alive(), f"the run left {thread.name} running"
    number = code if isinstance(code, int) else (0 if code is None else 1)
    if isinstance(code, str):
        err.write(code + "\n")
    return CliResult(number, out.getvalue(), err.getvalue())


def _ours(thread: threading.Thread) -> bool:
    """Whether the agent started ``thread`` (not the fake API's server, which serves its connections)."""
    target = getattr(thread, "_target", None)
    return getattr(target, "__module__", "").split(".")[0] in ("agent", "compact", "tools", "core")


def make_session(
    tmp: Path,
    api: Any = None,
    *,
    session_id: str = "0b5e3c1e-1111-4222-8333-444455556666",
    environ: dict[str, str] | None = None,
    model_api: Any = None,
    **settings: Any,
) -> tuple[Any, list[Any]]:
    """The agent floor's session builder: a real Session in ``tmp``/project, its model the fake API
    (``api``: the wire, through the SDK) or ``model_api`` (a core.scripted.ScriptedModel: no wire);
    returns it and its event list. (The compact floor's is tests/helpers/bench.py ``make_bench``.)"""
    from agent.config.settings import Settings
    from agent.runtime.session import Session
    from compact.decision.config import CompactConfig

    project = tmp / "project"
    project.mkdir(exist_ok=True)
    settings.setdefault("home", tmp / "home")
    settings.setdefault("retry_seconds", 2.0)  # a persistent API error fails in seconds, not minutes
    compaction = {k: settings.pop(k) for k in list(settings) if k in CompactConfig.__dataclass_fields__}
    events: list[Any] = []
    s = Settings(
        cwd=project,
        base_url=api.url if api is not None else None,
        api_key="test-key",
        compaction=CompactConfig(**compaction),
        **settings,
    )
    session = Session(s, session_id, events.append, None, environ=environ or {}, model_api=model_api)
    return session, events


def transcripts(home: Path) -> list[Path]:
    return sorted((home / ".compact-agent" / "projects").glob("*/*.jsonl"))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(condition: Callable[[], Any], timeout: float = 60) -> Any:
    """Poll ``condition`` until it returns something true (returned), failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def runs_under(pid: int, command: str) -> bool:
    """Whether a process whose command line contains ``command`` runs below ``pid`` (read from /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    for child in parents:
        p = parents[child]
        while p > 1 and p != pid:
            p = parents.get(p, 0)
        if p == pid and command in _cmdline(child):
            return True
    return False


def _cmdline(pid: int) -> str:
    try:
        return (
            (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""
