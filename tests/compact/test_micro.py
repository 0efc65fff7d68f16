from __future__ import annotations

import copy
from datetime import timedelta

import pytest

import core.tokens as tokens
import tools.registry  # noqa: F401  (the tools declare themselves clearable on import)
from compact.stages.micro import (
    CLEARED,
    cache_expired,
    in_tail,
    microcompact,
    size_after,
    stale_results,
    without_calls,
)
from compact.stages.state import ContextState
from core.messages import Message, tool_pairs_ok
from tests.helpers.histories import NOW, Builder, image_block, old_bash_history, output


def sent_results(messages: list[Message]) -> list[object]:
    return [b["content"] for m in messages for b in m.tool_results]


def tool_uses(messages: list[Message]) -> list[dict]:
    return [b for m in messages for b in m.tool_uses]


def test_after_two_hours_all_but_the_five_most_recent_results_are_cleared() -> None:
    messages = old_bash_history(8, timedelta(hours=2))
    before = copy.deepcopy(messages)
    state = ContextState()
    out = microcompact(messages, state, NOW)
    assert messages == before
    assert tool_uses(out.messages) == tool_uses(messages)  # all 8 calls still sent
    contents = sent_results(out.messages)
    assert contents[:3] == [CLEARED] * 3
    assert contents[3:] == sent_results(messages)[3:]
    ids = [b["id"] for b in tool_uses(messages)]
    assert out.newly_cleared == ids[:3] and state.cleared == set(ids[:3])
    assert tool_pairs_ok(out.messages)


def test_a_warm_cache_changes_nothing() -> None:
    messages = old_bash_history(8, timedelta(minutes=59))
    state = ContextState()
    out = microcompact(messages, state, NOW)
    assert out.messages == messages and out.newly_cleared == [] and state.cleared == set()


def test_disabled_changes_nothing() -> None:
    messages = old_bash_history(8, timedelta(hours=5))
    state = ContextState()
    out = microcompact(messages, state, NOW, enabled=False)
    assert out.messages == messages and state.cleared == set()


def test_clearing_is_sticky_once_the_cache_is_warm_again() -> None:
    messages = old_bash_history(8, timedelta(hours=2))
    state = ContextState()
    first = microcompact(messages, state, NOW)
    # a minute later, after a new (recent) response: the same results stay cleared
    b = Builder(99, NOW)
    later = messages + [
        b.prompt("and?"),
        *b.round("Bash", output(800)),
        b.assistant([{"type": "text", "text": "ok"}]),
    ]
    second = microcompact(later, state, NOW + timedelta(minutes=1))
    assert second.newly_cleared == []
    assert second.messages[: len(messages)] == first.messages


def test_other_tools_and_images_and_short_results() -> None:
    b = Builder(12, NOW - timedelta(hours=3))
    call, ids = b.calls("Read", "TodoWrite", "Bash", "Grep")
    picture = [{"type": "text", "text": "shot.png"}, image_block()]
    messages = [
        b.prompt("look"),
        call,
        b.results(
            [(ids[0], picture), (ids[1], output(5_000)), (ids[2], "ok"), (ids[3], output(3_000))],
            errors={ids[3]},
        ),
    ]
    messages.append(b.assistant([{"type": "text", "text": "seen"}]))
    state = ContextState()
    out = microcompact(messages, state, NOW, keep_recent=0)
    result = out.messages[2].tool_results
    assert result[0]["content"] == CLEARED  # the image is cleared with its result
    assert result[1]["content"] == output(5_000)  # not a compactable tool
    assert result[2]["content"] == "ok"  # shorter than the marker: nothing to gain
    assert result[3] == {"type": "tool_result", "tool_use_id": ids[3], "content": CLEARED, "is_error": True}
    assert state.cleared == {ids[0], ids[2], ids[3]}


def test_the_gap_is_measured_from_the_last_assistant_message() -> None:
    b = Builder(13, NOW - timedelta(hours=2))
    messages = [b.prompt("a"), b.assistant([{"type": "text", "text": "b"}])]
    assert cache_expired(messages, NOW, 60)
    assert not cache_expired(messages, NOW, 180)
    assert not cache_expired(messages[:1], NOW, 60)  # no response yet
    assert cache_expired(messages, NOW.replace(tzinfo=None), 60)  # a naive clock is read as UTC


def test_the_cache_returns_the_same_objects() -> None:
    messages = old_bash_history(8, timedelta(hours=2))
    state, cache = ContextState(), {}
    first = microcompact(messages, state, NOW, cache=cache)
    second = microcompact(messages, state, NOW, cache=cache)
    assert all(a is b for a, b in zip(first.messages, second.messages, strict=True))


def test_a_compaction_clears_the_kept_tails_old_results_whatever_the_cache() -> None:
    messages = old_bash_history(8, timedelta(minutes=1))  # the cache is warm: microcompact itself waits
    ids = [b["id"] for b in tool_uses(messages)]
    state = ContextState(cleared={ids[0]})
    assert (
        stale_results(messages, state, keep_recent=5) == ids[1:3]
    )  # the oldest not yet cleared, not the 5 newest
    assert stale_results(messages, state, keep_recent=8) == []
    shown = without_calls(messages, ids[1:3])
    assert [b["id"] for b in tool_uses(shown)] == [ids[0], *ids[3:]]  # for restore: those calls show nothing
    assert tool_uses(messages) != tool_uses(shown) and len(shown) == len(messages)


def test_a_kept_tail_keeps_its_newest_results_within_a_tenth_of_the_threshold() -> None:
    b = Builder(3, NOW)
    messages = [b.prompt("read them all")]
    for i in range(8):
        messages += b.round("Read", output(20_000 + i))  # ~5,000 tokens each
    ids = [u["id"] for u in tool_uses(messages)]
    state = ContextState(cleared={ids[0]})
    # T = 120K: 12K for the kept results, two of them; the five newest at most at any T
    assert in_tail(messages, state, keep_recent=5, threshold=120_000) == ids[1:6]
    assert in_tail(messages, state, keep_recent=5, threshold=10_000_000) == ids[1:3]
    # the newest is kept whatever its size; an already cleared one costs only its marker
    assert in_tail(messages, state, keep_recent=5, threshold=1_000) == ids[1:7]
    shrunk = ContextState(cleared={ids[0], ids[6]})  # so the third newest still fits beside the newest
    assert in_tail(messages, shrunk, keep_recent=5, threshold=120_000) == ids[1:5]
    # what the view will count once they are cleared
    assert size_after(messages, ids[:6]) < sum(m.tokens for m in messages) - 5 * 4_500
    assert size_after(messages, []) == sum(m.tokens for m in messages)


def test_a_cold_cache_tokenizes_none_of_the_results_it_clears(monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumed session's first request clears nearly its whole tail: telling that each result outweighs
    the marker, and which ones are kept, needs no tokenizing of results thousands of characters long (it
    was ~0.1 s for a 30 MB session's tail, 140 results of 2,200 characters, each tokenized twice)."""
    tokenized: list[int] = []
    enc = tokens.encoding()
    assert enc is not None

    class Counting:
        def encode_ordinary(self, text: str) -> list[int]:
            tokenized.append(len(text))
            return list(enc.encode_ordinary(text))

    monkeypatch.setattr(tokens, "_encoding", Counting())
    b = Builder(3, NOW - timedelta(hours=3))
    messages = [b.prompt("investigate")]
    for i in range(40):
        messages += b.round("Bash", output(2_200 + i))
    messages.append(b.assistant([{"type": "text", "text": "Found it."}]))
    out = microcompact(messages, ContextState(), NOW)
    assert sent_results(out.messages)[:35] == [CLEARED] * 35
    assert sent_results(out.messages)[35:] == sent_results(messages)[35:]
    assert sum(tokenized) <= len(CLEARED)  # at most the marker itself
