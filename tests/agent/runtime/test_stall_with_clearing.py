"""No wait at an automatic compaction in a tool chain on a model with preserved thinking (issue 31's stall
figure): the server clears old tool results (compact.context.context_editing), so what it counts stays clear of
the blocking limit while the history as kept passes T; the compaction due at T is put off while the
server's summary prepared in the background is still being written, and applied the moment it is
ready — the user never waits, no thinking is dropped, and the post-compaction guard does not count a
kept tail the server will clear (over T as kept) as a compaction that failed. Against the 5.5 family's fake with
the prefix check enforced; the summary is held back until the chain is well past T."""

from __future__ import annotations

import threading
from pathlib import Path

from agent.runtime.loop import run_turn
from compact.workers.preparer import WAIT_NOTICE
from core.events import CompactFailed, CompactFinished, Notice, TokenState
from tests.fakeapi import FakeAPI, Reply, estimate_tokens, model_info
from tests.helpers.session import make_session

MODEL = "claude-sonnet-5-5"
WINDOW = 60_000
THRESHOLD = WINDOW - 20_000 - 13_000  # T (compact.decision.thresholds)
PAST_T = 4  # main requests past T before the server's summary may come back


def test_the_compaction_waits_for_its_candidate_not_the_user(tmp_path: Path) -> None:
    with FakeAPI(profile="2026", binding="error", models=[model_info(MODEL, max_input_tokens=WINDOW)]) as api:
        session, events = make_session(
            tmp_path,
            api,
            model=MODEL,
            model_explicit=True,
            context_window=WINDOW,
            permission_mode="bypassPermissions",
            session_memory=False,
            keep_recent=2,
        )
        src = session.settings.cwd / "src"
        src.mkdir()
        paths = []
        for n in range(26):  # ~2,800 tokens each
            path = src / f"m{n:02d}.py"
            path.write_text(
                "".join(f"def f{n}_{i}(x): return x + {i}  # step {i} of {n}\n" for i in range(250))
            )
            paths.append(path)
        gate = threading.Event()
        past: list[int] = []  # raw sizes of the main requests sent at or over T

        def main(body: dict) -> Reply:
            if estimate_tokens(body) >= THRESHOLD:  # the history as sent, old results uncleared
                past.append(estimate_tokens(body))
                if len(past) >= PAST_T:
                    gate.set()
            if paths:
                return Reply.tools([("Read", {"file_path": str(paths.pop(0))})], thinking="next one")
            return Reply.text("All read.", thinking="done")

        answer = api.compactions.answer

        def held_back(body: dict, tokens: int, cache: dict | None = None):  # written once past T
            step = answer(body, tokens, cache)
            return lambda b: (gate.wait(30), step)[1]

        api.compactions.answer = held_back
        api.on(lambda body: "compaction" not in body, main)
        finished = run_turn(session, "Read every module in src/, one at a time.")

        assert finished.stop_reason == "end_turn", finished.error
        done = [e for e in events if isinstance(e, CompactFinished)]
        assert done and done[0].method == "server-summary" and done[0].candidate == "prepared"
        assert len(past) >= PAST_T  # put off, request after request, while the summary was written
        notices = [e.text for e in events if isinstance(e, Notice)]
        assert not any(n.startswith(WAIT_NOTICE.split("(")[0]) for n in notices)  # nobody waited
        # a kept tail over T that the server clears is no failed compaction: the next one came as usual
        assert not any(isinstance(e, CompactFailed) for e in events)
        assert (
            len(done) >= 2 and all(d.candidate == "prepared" for d in done) and not session.conv.breaker.open
        )
        # what the server counts stayed clear of the blocking limit (the history as kept did not)
        states = [e for e in events if isinstance(e, TokenState)]
        assert states and not any(s.blocking for s in states) and max(past) > THRESHOLD + 10_000
        assert any("context_management" in r.body for r in api.message_requests)  # it cleared
        conv = session.conv
        assert (
            conv.view_ctx.thinking.dropped_between == 0 and conv.view_ctx.thinking.dropped_at_compaction == 0
        )
        assert api.binding.refused == [] and api.binding.fallbacks == [] and api.violations == []
