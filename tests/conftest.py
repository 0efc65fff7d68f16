"""Shared fixtures: an isolated HOME / COMPACT_AGENT_HOME / environment for every test, the fake API,
and a helper that runs the real CLI as a subprocess against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
_SCRUB = ("ANTHROPIC_", "CLAUDE_", "COMPACT_AGENT_", "DISABLE_COMPACT", "DISABLE_AUTO_COMPACT", "NO_COLOR")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    for key in list(os.environ):
        if key.startswith(_SCRUB):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("COMPACT_AGENT_HOME", str(home / ".compact-agent"))
    return home


@pytest.fixture
def fake_api():
    from tests.fakeapi import FakeAPI

    with FakeAPI() as api:
        yield api


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
    """run_cli(api, *args, env={...}, stdin=None, cwd=project) -> CliResult (the real CLI, a subprocess)."""

    def run(
        api: Any,
        *args: str,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
        cwd: Path | None = None,
        timeout: float = 120,
    ) -> CliResult:
        proc = subprocess.run(
            [sys.executable, "-m", "agent", *args],
            cwd=cwd or project,
            env=cli_env(isolated_env, api, env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


def make_session(
    tmp: Path,
    api: Any,
    *,
    session_id: str = "0b5e3c1e-1111-4222-8333-444455556666",
    environ: dict[str, str] | None = None,
    **settings: Any,
) -> tuple[Any, list[Any]]:
    """An in-process Session in ``tmp``/project talking to the fake API; returns it and its event list."""
    from agent.config.settings import Settings
    from agent.runtime.session import Session
    from compact.config import CompactConfig

    project = tmp / "project"
    project.mkdir(exist_ok=True)
    settings.setdefault("home", tmp / "home")
    settings.setdefault("retry_seconds", 2.0)  # a persistent API error fails in seconds, not minutes
    compaction = {k: settings.pop(k) for k in list(settings) if k in CompactConfig.__dataclass_fields__}
    events: list[Any] = []
    s = Settings(
        cwd=project, base_url=api.url, api_key="test-key", compaction=CompactConfig(**compaction), **settings
    )
    return Session(s, session_id, events.append, None, environ=environ or {}), events


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
