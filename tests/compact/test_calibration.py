"""The count agrees with the server's, whatever the server's tokenizer (docs/compaction.md).

The fake server here counts tokens its own way: cl100k over each block's content, times a factor (0.5
and 1.6). A session reads source files until auto-compact fires at T = 27,000 (15% of a 200K model's
effective window), then carries on. Against the server's own count of the very requests involved:
the warning bar's number before each request, the moment auto-compact fires, the "a → b" figures of
the compaction and /context all agree within 5%.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.frontend import commands
from agent.runtime.loop import run_turn
from core import tokens as core_tokens
from core.events import CompactFinished, CompactStarted, TokenState
from tests.conftest import make_session
from tests.fakeapi import FakeAPI, Reply, estimate_tokens, last_user_text

THRESHOLD = 27_000  # min(⌊180,000 · 15%⌋, 167,000)
TOLERANCE = 0.05


def block_text(block: Any) -> str:
    """What a content-counting server tokenizes in one block."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        return block.get("text", "")
    if kind == "tool_use":
        return block.get("name", "") + json.dumps(block.get("input", {}))
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
    return json.dumps(block)  # a tool definition, anything else


def server_tokenizer(factor: float) -> Any:
    enc = core_tokens.encoding()
    return lambda block: round(factor * len(enc.encode_ordinary(block_text(block))))


def source(n: int, functions: int) -> str:
    return "".join(
        f"def handler_{n}_{i}(request):\n    return respond(request, code={i * 7 + n})\n"
        for i in range(functions)
    )


class Reader:
    """Reads one file per reply; answers summary requests with a short summary; stops after ``total``."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths, self.next = paths, 0

    def __call__(self, body: dict) -> Reply:
        if "<summary>" in last_user_text(body):
            return Reply.text("<summary>1. Primary Request and Intent: read every handler file.</summary>")
        if self.next < len(self.paths):
            self.next += 1
            return Reply.tool("Read", {"file_path": str(self.paths[self.next - 1])})
        return Reply.text("All handlers read.")


def server_count(api: FakeAPI, session: Any, api_messages: list[dict]) -> int:
    params = session.request(api_messages).params()
    return estimate_tokens(
        {"system": params.get("system"), "tools": params.get("tools"), "messages": params["messages"]},
        api.tokenizer,
    )


def near(ours: int, theirs: int) -> bool:
    return abs(ours - theirs) <= TOLERANCE * theirs


@pytest.mark.parametrize("factor", [0.5, 1.6])
def test_counts_and_the_compaction_moment_follow_the_servers_tokenizer(tmp_path: Path, factor: float) -> None:
    # the 4.x profile: replies as scripted, so the counts compared are the files' (a 5.5-family reply's
    # signed thinking blocks are counted by test_effort's requests)
    with FakeAPI(tokenizer=server_tokenizer(factor), profile="4.x") as api:
        session, events = make_session(  # a 200K window: THRESHOLD is 15% of it
            tmp_path,
            api,
            autocompact_pct=15,
            session_memory=False,
            cost_aware=False,  # the moment checked is T's (cost-aware compaction comes earlier when it pays)
            permission_mode="bypassPermissions",
            model="claude-sonnet-4-5",
            model_explicit=True,
        )
        project = session.settings.cwd
        # files of about 450 tokens as the server counts them: each read is a small step (< 2% of T),
        # and 1.3 T of them in all gets past the threshold once, whatever the factor
        functions = round(18 / factor)
        paths = []
        for n in range(round(1.3 * THRESHOLD / 450)):
            path = project / f"handler_{n:02d}.py"
            path.write_text(source(n, functions))
            paths.append(path)
        api.on(lambda body: True, Reader(paths))
        before_compaction: list[int] = []

        def watch(event: Any) -> None:
            events.append(event)
            if isinstance(event, CompactStarted):  # what the server would count for the compacted view
                before_compaction.append(server_count(api, session, session.conv.view().api))

        session.emit = watch
        finished = run_turn(session, "Read every handler file, one at a time.")
        assert finished.stop_reason == "end_turn", finished.error

        main = [r.body for r in api.message_requests if "<summary>" not in last_user_text(r.body)]
        served = [estimate_tokens(body, api.tokenizer) for body in main]
        shown = [e.tokens for e in events if isinstance(e, TokenState)]
        assert len(shown) == len(served)
        # the bar's number before each request is the server's count of that request, from the second on
        off = [
            (i, ours, theirs)
            for i, (ours, theirs) in enumerate(zip(shown, served, strict=True))
            if i and not near(ours, theirs)
        ]
        assert off == []

        [done] = [e for e in events if isinstance(e, CompactFinished)]
        [pre_server] = before_compaction
        at = next(i for i, body in enumerate(main) if "This session continues" in json.dumps(body))
        # not one request too late: the previous request was under T, give or take the calibrated count's
        # own error right at the line (with TodoWrite among the tools, 27,001 served where we counted 26,975)
        assert served[at - 1] < THRESHOLD * 1.005
        assert THRESHOLD * (1 - TOLERANCE) <= pre_server <= THRESHOLD * (1 + TOLERANCE)  # ... nor late
        assert near(done.pre_tokens, pre_server)
        assert near(done.post_tokens, served[at])  # "a → b": b is what the next request really was

        usage = commands.context_usage(session)
        assert near(usage.used, server_count(api, session, session.conv.view().api))
        api.check()
