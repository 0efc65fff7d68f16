"""The hooks and instruction files a session gives compaction (agent.runtime.hooks, agent.config.system_prompt) at work in a compaction on the bench: PreCompact's words and CLAUDE.md's Compact Instructions in the summary request, SessionStart and PostCompact after it, failing and hanging hooks reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compact.compaction import compactor
from core.events import CompactFinished, Notice
from core.messages import user_prompt
from tests.fakeapi import FakeAPI, last_user_text, request_text
from tests.helpers.bench import make_bench
from tests.helpers.compaction import (
    SUMMARY_REPLY,
    conversation,
    hook,
    main_request,
    of_type,
)
from tests.helpers.session_parts import with_session_parts
from tests.helpers.thinking import read_step, thinking_bench


def test_pre_compact_hook_output_reaches_the_summary_request(tmp_path: Path, api: FakeAPI) -> None:
    hooks = {
        "PreCompact": hook("echo 'Preserve the list of modified files.'", matcher="auto")
        + hook("echo 'manual only'", matcher="manual")
    }
    bench = with_session_parts(make_bench(tmp_path, api), hooks)
    conversation(bench, ["a.py"])
    (bench.cwd / "CLAUDE.md").write_text("# Compact Instructions\nMention the test command.\n")
    api.reply_text(SUMMARY_REPLY)
    assert compactor.compact(bench.conv, bench.ports, "auto")
    text = last_user_text(api.message_requests[-1].body)
    assert "<analysis>" in text and "<summary>" in text
    extra = text.split("Additional instructions:")[1]
    assert extra.index("Preserve the list of modified files.") < extra.index("Mention the test command.")
    assert "manual only" not in text


def test_custom_instructions_come_first(tmp_path: Path, api: FakeAPI) -> None:
    bench = with_session_parts(make_bench(tmp_path, api), {"PreCompact": hook("echo from-the-hook")})
    conversation(bench, ["a.py"])
    (bench.cwd / "CLAUDE.md").write_text("## Compact Instructions\nfrom-claude-md\n")
    api.reply_text(SUMMARY_REPLY)
    assert compactor.compact(bench.conv, bench.ports, "manual", "from-the-command")
    extra = last_user_text(api.message_requests[-1].body).split("Additional instructions:")[1]
    assert extra.index("from-the-command") < extra.index("from-the-hook") < extra.index("from-claude-md")


def test_session_start_and_post_compact_hooks(tmp_path: Path, api: FakeAPI) -> None:
    seen = tmp_path / "post.json"
    hooks = {
        "SessionStart": hook("echo 'You are on branch feature/x.'", matcher="compact")
        + hook("echo 'startup only'", matcher="startup"),
        "PostCompact": hook(f"cat > {seen}"),
    }
    bench = with_session_parts(make_bench(tmp_path, api), hooks)
    events = bench.events
    conversation(bench, ["a.py"])
    api.reply_text(SUMMARY_REPLY)
    api.reply_text("ok")
    assert compactor.compact(bench.conv, bench.ports, "auto")
    main_request(bench)
    body = api.message_requests[-1].body
    assert "You are on branch feature/x." in request_text(body)
    assert "startup only" not in request_text(body)
    payload = json.loads(seen.read_text())
    assert payload["hook_event_name"] == "PostCompact" and payload["trigger"] == "auto"
    assert payload["compact_summary"].startswith("1. Primary Request and Intent")
    assert (
        "SessionStart hook output added to the context" in of_type(events, CompactFinished)[0].hook_messages
    )


def test_failing_and_hanging_hooks_are_reported_and_compaction_proceeds(tmp_path: Path, api: FakeAPI) -> None:
    hooks = {"PreCompact": hook("echo broken >&2; exit 3") + hook("sleep 5", timeout=1)}
    bench = with_session_parts(make_bench(tmp_path, api), hooks)
    events = bench.events
    conversation(bench, ["a.py"])
    api.reply_text(SUMMARY_REPLY)
    assert compactor.compact(bench.conv, bench.ports, "auto")
    notices = [e.text for e in of_type(events, Notice)]
    assert any("failed (exit 3): broken" in n for n in notices)
    assert any("timed out after 1s" in n for n in notices)
    assert of_type(events, CompactFinished)


@pytest.mark.fake_api(profile="2026")  # the server's summary, prepared ahead
def test_a_precompact_hook_runs_when_the_candidate_is_prepared_and_its_words_go_into_it(
    tmp_path: Path, api: FakeAPI
) -> None:
    from compact.workers import preparer
    from tests.helpers.compaction import hook

    log = tmp_path / "hook.log"
    hooks = {"PreCompact": hook(f"echo ran >> {log}; echo 'Name every module.'", matcher="auto")}
    bench = with_session_parts(thinking_bench(tmp_path, api), hooks)
    bench.add(user_prompt("Read the modules."))
    read_step(bench, api, "a.py", lines=300)
    read_step(bench, api, "b.py")  # its request sends a.py's result: what the server's summary stands for
    preparer.start_if_due(bench.conv, bench.ports, int(bench.conv.window.thresholds().auto_compact * 0.9))
    p = preparer.preparer(bench.conv)
    assert p is not None and p.thread is not None
    p.thread.join(30)
    asked = next(r.body for r in api.message_requests if "compaction" in r.body)
    assert "Name every module." in asked["compaction"]["instructions"]
    read_step(bench, api, "c.py")

    assert preparer.at_threshold(bench.conv, bench.ports, 10**9, compactor.compact) is True

    assert log.read_text().split() == ["ran"]  # once, when it was prepared; not again at T
    done = of_type(bench.events, CompactFinished)[0]
    assert done.candidate == "prepared" and done.method == "server-summary"
