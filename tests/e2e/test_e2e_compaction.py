"""End-to-end compaction: the real CLI in print mode (run in this process) against the loopback fake API.

A scripted model reads file after file (each ~5,500 tokens) until the context crosses the thresholds;
the tests then look at what the API received and at the transcript on disk. Session memory is off
(``COMPACT_AGENT_SESSION_MEMORY=0``) and so is the server's summary (``COMPACT_AGENT_SERVER_COMPACTION=0``),
so every compaction takes the LLM-summary path, under the 5.5 family's rules (the fake's default): the
kept turns' thinking is left out and no request may be refused. The server's summary end to end is
tests/agent/runtime/test_compaction_backends.py's.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fakeapi import (
    Error,
    FakeAPI,
    Reply,
    estimate_tokens,
    is_compaction,
    last_user_text,
    read_paths,
    request_text,
)
from tests.helpers.compaction import make_files
from tests.helpers.transcripts import records, transcripts

SUMMARY = (
    "<analysis>PRIVATE-ANALYSIS walking through every read</analysis>\n"
    "<summary>1. Primary Request and Intent: read every file in the project and report.\n"
    "8. Current Work: reading the files one by one.</summary>"
)
FINAL = "All files read."
# compaction at T (cost-aware compaction, which may come earlier, is tested in tests/compact/test_economics.py)
ENV = {
    "COMPACT_AGENT_SESSION_MEMORY": "0",
    "COMPACT_AGENT_COST_AWARE": "0",
    "COMPACT_AGENT_SERVER_COMPACTION": "0",
}
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


class Reader:
    """The scripted model: one Read per main request until every file is read, then a final answer."""

    def __init__(self, paths: list[Path]):
        self.paths = list(paths)
        self.next = 0

    def __call__(self, body: dict) -> Reply:
        if self.next < len(self.paths):
            self.next += 1
            return Reply.tool("Read", {"file_path": str(self.paths[self.next - 1])})
        return Reply.text(FINAL)


def script(api: FakeAPI, paths: list[Path], summary: Reply | None = None) -> Reader:
    reader = Reader(paths)
    api.on(is_compaction, summary or Reply.text(SUMMARY))
    api.on(lambda body: True, reader)
    return reader


def bodies(api: FakeAPI) -> list[tuple[int | None, dict]]:
    return [(r.status, r.body) for r in api.message_requests]


def boundaries(home: Path) -> list[dict[str, Any]]:
    [path] = transcripts(home)
    return [r for r in records(path) if r.get("subtype") == "compact_boundary"]


# --- one auto-compaction on a 200K window ------------------------------------------------------------------


@pytest.mark.fake_profile(
    "4.x",
    reason="a local summary prepared ahead and applied mid tool loop: on the 5.5 family such a candidate is refused (its kept loop's thinking can't follow it) and the loop is summarized whole at T (two summary requests)",
)
def test_long_task_compacts_once_near_the_threshold_and_finishes(
    run_cli, project: Path, isolated_env: Path
) -> None:
    (project / "screenshot.png").write_bytes(PNG)
    paths = [project / "screenshot.png", *make_files(project, 36)]
    with FakeAPI(context_window=200_000) as api:
        script(api, paths)
        res = run_cli(api, "-p", "Read every file in the project, one at a time.", env=ENV, timeout=300)
    assert res.code == 0, res.stderr
    assert res.stdout == FINAL + "\n"
    assert api.violations == []
    sent = bodies(api)
    assert all(status == 200 for status, _ in sent), [s for s, _ in sent]
    assert max(estimate_tokens(b) for _, b in sent) <= 200_000

    compactions = [i for i, (_, b) in enumerate(sent) if is_compaction(b)]
    assert len(compactions) == 1
    at = compactions[0]
    side, before = sent[at][1], sent[at - 1][1]
    # prepared in the background from the preparation level (30-85% of T = 167K, from measurements),
    # applied at T
    assert 0.3 * 167_000 <= estimate_tokens(side) <= 0.85 * 167_000 + 12_000
    mains = [b for _, b in sent if not is_compaction(b)]
    swapped = next(i for i, b in enumerate(mains) if "Primary Request and Intent" in request_text(b))
    after = mains[swapped]
    assert 150_000 <= estimate_tokens(mains[swapped - 1]) <= 185_000  # the swap came at the threshold
    assert all(estimate_tokens(b) < 185_000 for b in mains)
    # the compaction request: no media, the instruction last, tools off, same prefix as the main requests
    assert '"type": "image"' in json.dumps(before["messages"])
    assert '"type": "image"' not in json.dumps(side["messages"]) and "[image]" in json.dumps(side["messages"])
    assert side["tool_choice"] == {"type": "none"}
    assert side["system"] == before["system"] and side["tools"] == before["tools"]
    # the request after it: the summary without analysis, the reads the summary did not see kept verbatim
    text = request_text(after)
    assert "Primary Request and Intent: read every file" in text
    assert "PRIVATE-ANALYSIS" not in text and "<analysis>" not in text
    seen, kept, reads = read_paths(side), read_paths(after), [str(p) for p in paths]
    start = reads.index(kept[0])
    assert reads[start : start + len(kept)] == kept  # a verbatim tail, in order
    assert start <= len(seen) and set(reads[len(seen) : start + len(kept)]) <= set(kept)  # all it did not see
    assert read_paths(side)[0] not in kept  # what the summary covers is gone from the context
    # the transcript keeps everything from before, then the boundary
    [path] = transcripts(isolated_env)
    recs = records(path)
    read_inputs = [
        b["input"]["file_path"]
        for r in recs
        if r.get("type") == "assistant"
        for b in r["message"]["content"]
        if b.get("type") == "tool_use"
    ]
    assert read_inputs == [str(p) for p in paths]
    [boundary] = [r for r in recs if r.get("subtype") == "compact_boundary"]
    assert boundary["compactMetadata"]["trigger"] == "auto"
    assert boundary["compactMetadata"]["preTokens"] >= 150_000
    assert boundary["parentUuid"] is None and boundary["logicalParentUuid"]


def test_pct_override_compacts_early(run_cli, project: Path, isolated_env: Path) -> None:
    paths = make_files(project, 8)
    with FakeAPI() as api:
        script(api, paths)
        res = run_cli(api, "-p", "Read every file.", env={**ENV, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "15"})
    assert res.code == 0, res.stderr
    sent = bodies(api)
    first = next(i for i, (_, b) in enumerate(sent) if is_compaction(b))
    # T = 15% of 180K = 27,000; the summary is prepared from the preparation level, 30-85% of T
    assert 0.3 * 27_000 <= estimate_tokens(sent[first][1]) <= 40_000
    assert all(estimate_tokens(b) < 27_000 for _, b in sent[: first - 1])
    assert boundaries(isolated_env)[0]["compactMetadata"]["trigger"] == "auto"
    assert api.violations == []


# --- switches ----------------------------------------------------------------------------------------------


def test_manual_compact_with_auto_compact_off(run_cli, project: Path, isolated_env: Path) -> None:
    env = {**ENV, "DISABLE_AUTO_COMPACT": "1", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "15"}
    paths = make_files(project, 8)
    with FakeAPI() as api:
        script(api, paths)
        first = run_cli(api, "-p", "Read every file.", env=env)
        assert first.code == 0, first.stderr
        assert not any(is_compaction(b) for _, b in bodies(api))  # well over T, never on its own

        manual = run_cli(api, "-p", "/compact keep the file names", "--continue", env=env)
        assert manual.code == 0, manual.stderr
        side = bodies(api)[-1][1]
        assert is_compaction(side) and "keep the file names" in last_user_text(side)

        api.on(lambda body: True, Reply.text("Next step noted."))
        nxt = run_cli(api, "-p", "what is next?", "--continue", env=env)
    assert nxt.code == 0, nxt.stderr
    body = bodies(api)[-1][1]
    assert "Primary Request and Intent" in request_text(body) and "PRIVATE-ANALYSIS" not in request_text(body)
    assert read_paths(body) == []
    assert estimate_tokens(body) < estimate_tokens(side) / 2
    [boundary] = boundaries(isolated_env)
    assert boundary["compactMetadata"]["trigger"] == "manual"
    assert api.violations == []


def test_disable_compact_refuses_manual_compaction(run_cli, project: Path, fake_api: FakeAPI) -> None:
    fake_api.reply_text("hello")
    assert run_cli(fake_api, "-p", "hi", env={**ENV, "DISABLE_COMPACT": "1"}).code == 0
    res = run_cli(fake_api, "-p", "/compact", "--continue", env={**ENV, "DISABLE_COMPACT": "1"})
    assert res.code != 0
    assert "Compaction is disabled (DISABLE_COMPACT is set)" in res.stdout + res.stderr
    assert len(fake_api.message_requests) == 1


# --- recovery ------------------------------------------------------------------------------------------------


def test_prompt_too_long_compacts_once_and_retries(run_cli, project: Path, isolated_env: Path) -> None:
    paths = make_files(project, 12)
    with FakeAPI(context_window=60_000) as api:
        script(api, paths)
        res = run_cli(api, "-p", "Read every file.", env={**ENV, "DISABLE_AUTO_COMPACT": "1"})
    assert res.code == 0, res.stderr + res.stdout
    assert res.stdout == FINAL + "\n"
    sent = bodies(api)
    too_long = [i for i, (status, b) in enumerate(sent) if status == 400 and not is_compaction(b)]
    assert len(too_long) == 1
    after = sent[too_long[0] + 1 :]
    served = [b for status, b in after if status == 200]
    assert is_compaction(served[0])  # the summary request (perhaps after its own trimming retries)
    assert "Primary Request and Intent" in request_text(served[1])  # the retried main request
    assert len(boundaries(isolated_env)) == 1
    assert api.violations == []
    # the user is told the server refused, and which window was learned from its answer
    [told] = [line for line in res.stderr.splitlines() if "refused" in line]
    assert told.startswith("The server refused the request as too long (")
    assert told.endswith(
        "limit 60,000); the context window is taken as 60,000 tokens from now on. Compacting the conversation."
    )


def test_failing_compactions_trip_the_breaker_and_the_session_finishes(run_cli, project: Path) -> None:
    paths = make_files(project, 14)
    with FakeAPI() as api:
        # every reply holds an analysis and no summary (an empty one would be a poor summary, not a failure)
        script(api, paths, summary=Reply.text("<analysis>ran out before the summary</analysis>"))
        res = run_cli(api, "-p", "Read every file.", env={**ENV, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "15"})
    assert res.code == 0, res.stderr
    assert res.stdout == FINAL + "\n"
    sent = bodies(api)
    # the candidate prepared in the background (its failure costs only that), then 3 foreground attempts
    assert sum(1 for _, b in sent if is_compaction(b)) == 4
    assert len(sent) - 4 == 15  # 14 reads and the final answer
    assert res.stderr.count("Auto-compact failed 3 times in a row") == 1
    assert api.violations == []


def test_an_always_failing_summary_endpoint_costs_bounded_time_with_retries_shown(
    run_cli, project: Path
) -> None:
    """Every summary request answers 500: each compaction retries on its own short budget (an eighth of
    the main one), says so on stderr, and the breaker stops it after 3; the session finishes."""
    paths = make_files(project, 24)
    env = {**ENV, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "15", "COMPACT_AGENT_RETRY_SECONDS": "8"}
    with FakeAPI() as api:
        script(api, paths, summary=Error(500, "api_error", "summary backend down"))
        res = run_cli(api, "-p", "Read every file.", env=env)
    assert res.code == 0, res.stderr
    assert res.stdout == FINAL + "\n"
    retries = re.findall(
        r"^Compacting… retrying in ([\d.]+)s \(attempt (\d+)\) · API error 500", res.stderr, re.M
    )
    assert len(retries) >= 3 and all(k == "2" for _, k in retries), res.stderr
    # three foreground compactions, each within its 1 s budget (8 s x 1/8): waits that add up to < 3 s,
    # where the main requests' budget would have allowed 3 x 8 s
    assert sum(float(w) for w, _ in retries) < 3 * 1.0
    assert res.stderr.count("Compaction failed: API error 500") == 3
    assert res.stderr.count("Auto-compact failed 3 times in a row") == 1
    main_requests = [b for _, b in bodies(api) if not is_compaction(b)]
    assert len(main_requests) == 25 and api.violations == []


@pytest.mark.fake_profile(
    "4.x",
    reason="the PreCompact hook's words reach the candidate applied mid tool loop; on the 5.5 family that local candidate is refused (compact/compaction/backend.py) and the foreground summary runs the hooks again",
)
def test_compaction_hooks_fire_in_print_mode(run_cli, project: Path) -> None:
    log = project / "hooks.log"
    hooks = {
        "PreCompact": [
            {
                "matcher": "auto",
                "hooks": [
                    {"type": "command", "command": f"echo pre >> {log}; echo 'List every module name.'"}
                ],
            }
        ],
        "PostCompact": [{"hooks": [{"type": "command", "command": f"echo post >> {log}"}]}],
        "SessionStart": [
            {
                "matcher": "compact",
                "hooks": [{"type": "command", "command": "echo 'REMINDER: branch main, tree clean'"}],
            }
        ],
    }
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    paths = make_files(project, 8)
    with FakeAPI() as api:
        script(api, paths)
        res = run_cli(
            api,
            "-p",
            "Read every file.",
            "--trust-project",
            env={**ENV, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "15"},
        )
    assert res.code == 0, res.stderr
    sent = [b for _, b in bodies(api)]
    # the hook ran when the summary was prepared in the background, so that summary followed its
    # instructions and was applied: no compaction made in the foreground, no wait
    summaries = [b for b in sent if is_compaction(b)]
    assert summaries and "List every module name." in last_user_text(summaries[0])
    at = sent.index(summaries[0])
    assert any("REMINDER: branch main, tree clean" in request_text(b) for b in sent[at + 1 :])
    assert "PreCompact hook output added to the instructions of the compaction prepared" in res.stderr
    assert "set aside" not in res.stderr and "· prepared" in res.stderr
    assert log.read_text().split()[:2] == ["pre", "post"]
