"""Settings that parse but can't work are refused at start, by the real CLI, with one line and a non-zero
exit, before any request: a window cap that leaves no room, a blocking limit <= 0, a COMPACT_AGENT_HOME
that can't be made, a base URL that is no URL, settings JSON nested too deeply; and the retry budget."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent.config.settings import SettingsError, load_settings
from compact.decision.thresholds import compute, smallest_window
from tests.fakeapi import FakeAPI


def refused(res, line: str) -> None:  # type: ignore[no-untyped-def]
    assert res.code == 2, res.stderr
    assert res.stderr == f"compact-agent: {line}\n"
    assert res.stdout == ""


def test_the_smallest_window_leaves_the_minimum_threshold() -> None:
    assert smallest_window() == 43_000
    th = compute(200_000, 64_000, window_cap=smallest_window())
    assert th.auto_compact == 10_000 and th.blocking > th.auto_compact > 0
    assert compute(200_000, 64_000, window_cap=20_000).effective == 0  # what the check keeps out


@pytest.mark.parametrize("value", ["20000", "1", "42999"])
def test_a_window_cap_without_room_is_refused(run_cli, fake_api: FakeAPI, value: str) -> None:
    res = run_cli(fake_api, "-p", "hi", env={"CLAUDE_CODE_AUTO_COMPACT_WINDOW": value})
    refused(
        res,
        f"CLAUDE_CODE_AUTO_COMPACT_WINDOW={value} leaves no room for the conversation (after the output "
        "reserve and the auto-compact buffer); the smallest usable window is 43000",
    )
    assert fake_api.requests == []


def test_the_smallest_window_works(run_cli, fake_api: FakeAPI) -> None:
    fake_api.reply_text("fine")
    res = run_cli(fake_api, "-p", "hi", env={"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "43000"})
    assert (res.code, res.stdout) == (0, "fine\n"), res.stderr


def test_a_window_cap_in_a_settings_file_is_named(run_cli, fake_api: FakeAPI, project: Path) -> None:
    path = project / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"compaction": {"contextWindow": 30000}}))
    res = run_cli(fake_api, "-p", "hi")
    refused(
        res,
        f'"compaction.contextWindow": 30000 in {path} leaves no room for the conversation (after the '
        "output reserve and the auto-compact buffer); the smallest usable window is 43000",
    )


@pytest.mark.parametrize("value", ["0", "-3"])
def test_a_blocking_limit_at_or_below_zero_is_refused(run_cli, fake_api: FakeAPI, value: str) -> None:
    res = run_cli(fake_api, "-p", "hi", env={"CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE": value})
    refused(res, f'CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE: expected a positive integer, got "{value}"')


@pytest.mark.parametrize("under", ["file/home", "file"])
def test_a_home_that_cannot_be_created(run_cli, fake_api: FakeAPI, tmp_path: Path, under: str) -> None:
    (tmp_path / "file").write_text("a regular file")
    home = tmp_path / under
    started = time.monotonic()
    res = run_cli(fake_api, "-p", "hi", env={"COMPACT_AGENT_HOME": str(home)})
    refused(res, f"COMPACT_AGENT_HOME {home}: cannot create the directory (Not a directory)")
    assert time.monotonic() - started < 10
    assert fake_api.requests == []


def test_a_new_home_is_created_private(run_cli, fake_api: FakeAPI, tmp_path: Path) -> None:
    home = tmp_path / "a" / "b"
    fake_api.reply_text("ok")
    assert run_cli(fake_api, "-p", "hi", env={"COMPACT_AGENT_HOME": str(home)}).code == 0
    assert (home.stat().st_mode & 0o777, (tmp_path / "a").stat().st_mode & 0o777) == (0o700, 0o700)


@pytest.mark.parametrize("url", ["not a url", "localhost:8080", "ftp://example.com", "http://"])
def test_a_base_url_that_is_not_an_http_url(run_cli, url: str) -> None:
    started = time.monotonic()
    res = run_cli(None, "-p", "hi", env={"ANTHROPIC_BASE_URL": url})
    refused(res, f'ANTHROPIC_BASE_URL must be an http:// or https:// URL (got "{url}")')
    assert time.monotonic() - started < 10


def test_deeply_nested_settings_json(run_cli, fake_api: FakeAPI, project: Path, isolated_env: Path) -> None:
    path = isolated_env / ".compact-agent" / "settings.json"  # the user's own file: it stops the agent
    path.parent.mkdir()
    path.write_text("[" * 100_000 + "]" * 100_000)
    res = run_cli(fake_api, "-p", "hi")
    refused(res, f"{path}: invalid JSON (nested too deeply)")
    path.unlink()
    local = project / ".claude" / "settings.local.json"  # a project's: skipped with one warning
    local.parent.mkdir()
    local.write_text("[" * 100_000 + "]" * 100_000)
    fake_api.reply_text("fine")
    res = run_cli(fake_api, "-p", "hi")
    assert (res.code, res.stdout) == (0, "fine\n")
    assert res.stderr == (
        f"compact-agent: warning: {local}: invalid JSON (nested too deeply); going on without this file\n"
    )


# --- the retry budget setting ------------------------------------------------------------------------------


def load(tmp_path: Path, files: dict | None = None, **env: str):  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    if files is not None:
        home.mkdir(exist_ok=True)
        (home / "settings.json").write_text(json.dumps(files))
    return load_settings(
        cwd=tmp_path, environ={"HOME": str(tmp_path), "COMPACT_AGENT_HOME": str(home), **env}, cli={}
    )


def test_retry_seconds_default_file_and_environment(tmp_path: Path) -> None:
    assert load(tmp_path).retry_seconds == 120.0
    s = load(tmp_path, {"retry": {"maxSeconds": 5}})
    assert (s.retry_seconds, s.report.sources["retry_seconds"]) == (
        5.0,
        str(tmp_path / "home" / "settings.json"),
    )
    s = load(tmp_path, {"retry": {"maxSeconds": 5}}, COMPACT_AGENT_RETRY_SECONDS="0.5")
    assert (s.retry_seconds, s.report.sources["retry_seconds"]) == (0.5, "env COMPACT_AGENT_RETRY_SECONDS")


@pytest.mark.parametrize(
    ("files", "env", "message"),
    [
        ({"retry": {"maxSeconds": -1}}, {}, '"retry.maxSeconds" must be a number of seconds >= 0 (got -1)'),
        ({"retry": 3}, {}, '"retry" must be an object (got 3)'),
        (
            None,
            {"COMPACT_AGENT_RETRY_SECONDS": "soon"},
            'COMPACT_AGENT_RETRY_SECONDS: expected a number of seconds >= 0, got "soon"',
        ),
    ],
)
def test_bad_retry_settings(tmp_path: Path, files, env, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SettingsError) as err:
        load(tmp_path, files, **env)
    assert str(err.value).endswith(message)
