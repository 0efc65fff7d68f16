"""The 5.5 family end to end (issue 38): what the Models API says of a model decides whether the agent asks
it for the server's summary; the real CLI in print mode against the loopback fake, which answers the
Models API with each model's ``capabilities`` and refuses a ``compaction`` request for a model whose
capabilities say no, as the API does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakeapi import FakeAPI, Reply, is_compaction, is_server_compaction
from tests.helpers.compaction import make_files
from tests.helpers.wire import FINAL, MODEL, PROMPT, WINDOW, Reader, sonnet


def run_reads(run_cli, project: Path, compaction: bool) -> FakeAPI:
    paths = make_files(project, 16)
    with FakeAPI(context_window=WINDOW, models=[sonnet(compaction)]) as api:
        api.on(is_compaction, Reply.text("<summary>The files were read one by one.</summary>"))
        api.on(lambda body: True, Reader(paths, FINAL))
        res = run_cli(api, "-p", PROMPT, "--model", MODEL, timeout=240)
    assert res.code == 0, res.stderr
    assert res.stdout.strip() == FINAL
    return api


@pytest.mark.parametrize("offered", [True, False], ids=["offered", "not-offered"])
def test_the_models_api_decides_whether_the_server_summary_is_asked_for(
    run_cli, project: Path, isolated_env: Path, offered: bool
) -> None:
    api = run_reads(run_cli, project, offered)
    bodies = [r.body for r in api.message_requests]
    server = [b for b in bodies if is_server_compaction(b)]
    compacted = [b for b in bodies if is_compaction(b) or is_server_compaction(b)]
    assert compacted, "the session never compacted: the test shows nothing"
    if offered:
        assert server  # the name and the API agree: the server's summary
    else:
        # the API said no: not one compaction request (each would be refused and summarized locally)
        assert server == []
    assert api.violations == []
    assert [r.method + " " + r.path for r in api.requests if r.method == "GET"] == [f"GET /v1/models/{MODEL}"]


class SearchReadCall:
    """The scripted model: a tool search that finds the weather tool, one Read per request until every file
    is read, then the found tool's call, then a final answer."""

    def __init__(self, paths: list[Path]):
        self.steps: list[Reply] = [Reply.tool("ToolSearch", {"query": "select:mcp__basic__weather"})]
        self.steps += [Reply.tool("Read", {"file_path": str(p)}) for p in paths]
        self.steps += [Reply.tool("mcp__basic__weather", {"city": "Oslo"}), Reply.text(FINAL)]

    def __call__(self, body: dict) -> Reply:
        return self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]


def additions_in(body: dict) -> list[str]:
    return [
        b["tool"]["name"]
        for m in body["messages"]
        if m["role"] == "system"
        for b in m["content"]
        if b.get("type") == "tool_addition"
    ]


def test_a_tool_found_before_a_server_compaction_is_added_without_changing_the_tools(
    run_cli, project: Path, isolated_env: Path, tmp_path: Path
) -> None:
    """Issue 38, item 7: after the server's summary took the search result away, the tool it found is made
    available again by a ``tool_addition`` in a system message; ``tools`` never changes, so the kept
    turns' thinking stays valid: no 400, no drop_block (tests/conftest.py fails a test on either), the
    call reaches the MCP server."""
    from tests.helpers.mcp import config_file

    cfg = config_file(tmp_path, {"basic": "basic"})
    paths = make_files(project, 14)
    with FakeAPI(context_window=WINDOW, models=[sonnet(True)]) as api:
        api.on(is_compaction, Reply.text("<summary>The files were read one by one.</summary>"))
        api.on(lambda body: True, SearchReadCall(paths))
        res = run_cli(
            api,
            "-p",
            PROMPT,
            "--model",
            MODEL,
            "--mcp-config",
            str(cfg),
            "--allowedTools",
            "mcp__basic",
            "--allowedTools",
            "ToolSearch",
            timeout=240,
        )
    assert res.code == 0, res.stderr
    assert res.stdout.strip() == FINAL
    api.check()
    bodies = [r.body for r in api.message_requests]
    server = [i for i, b in enumerate(bodies) if is_server_compaction(b)]
    assert server, "no server compaction: the test shows nothing"
    mains = [b for b in bodies if not is_server_compaction(b) and not is_compaction(b)]
    assert all(b["tools"] == mains[0]["tools"] for b in mains)  # one prefix for the whole conversation
    after = [b for b in mains if b["messages"][0]["content"][0].get("type") == "compaction"]
    assert after and all("mcp__basic__weather" in additions_in(b) for b in after)
    called = [b for m in mains[-1]["messages"] if m["role"] == "assistant" for b in m["content"]]
    assert any(b.get("type") == "tool_use" and b["name"] == "mcp__basic__weather" for b in called)
    results = [b for m in mains[-1]["messages"] if m["role"] == "user" for b in m["content"]]
    assert any(b.get("type") == "tool_result" and "clear" in json.dumps(b.get("content")) for b in results)
    assert api.binding.refused == [] and api.binding.fallbacks == []
