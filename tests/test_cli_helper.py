"""The in-process CLI runner (tests/helpers/cli.py) behaves as a process's exit would."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tests.helpers.cli import run_in_process


def test_the_runs_threads_end_under_the_runs_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a thread the agent starts (the model-info lookup) may still read the environment after main returns;
    # in a process nothing changes it meanwhile, so the runner must not restore the test's environment first
    seen: list[str | None] = []

    def late_reader() -> None:
        time.sleep(0.3)
        seen.append(os.environ.get("RUN_MARK"))

    late_reader.__module__ = "agent.runtime.sdk"  # started by the agent, as the runner tells them apart

    def main() -> None:
        threading.Thread(target=late_reader, daemon=True).start()

    monkeypatch.setattr("agent.cli.main", main)
    monkeypatch.delenv("RUN_MARK", raising=False)
    result = run_in_process([], {"RUN_MARK": "the run's"}, tmp_path, None, timeout=10)
    assert result.code == 0
    assert seen == ["the run's"]
    assert "RUN_MARK" not in os.environ
