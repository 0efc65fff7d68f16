"""The 5.5 family end to end (issue 38): what the Models API says of a model decides whether the agent asks
it for the server's summary; the real CLI in print mode against the loopback fake, which answers the
Models API with each model's ``capabilities`` and refuses a ``compaction`` request for a model whose
capabilities say no, as the API does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_e2e_compaction import make_files
from tests.e2e.test_e2e_resume import Reader
from tests.fakeapi import FakeAPI, Reply, is_compaction, is_server_compaction, model_info

MODEL = "claude-sonnet-5-5"
WINDOW = 60_000
PROMPT = "Read every file in the project, one at a time."
FINAL = "All files read."


def sonnet(compaction: bool) -> dict:
    """Sonnet 5.5 at a small window, its capabilities as the Models API reports them, with or without the
    top-level compaction parameter."""
    from agent.demo.server import capabilities

    caps = capabilities(MODEL)
    caps["compaction"] = {"supported": compaction, "summarize": {"supported": compaction}}
    return {**model_info(MODEL, WINDOW), "capabilities": caps}


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
