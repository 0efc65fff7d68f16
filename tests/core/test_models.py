"""The model table (core/models.py): the late-2026 prices, Haiku 5.5's long-prompt band, the picker."""

from __future__ import annotations

import pytest

from core.models import PICKER, cost_usd, family_of, resolve

MTOK = 1_000_000


@pytest.mark.parametrize(
    ("model", "name", "prices", "effort"),
    [
        ("claude-sonnet-5-5", "Sonnet 5.5", (2.0, 10.0, 0.10), "high"),
        ("claude-opus-5-5", "Opus 5.5", (4.0, 20.0, 0.20), "medium"),
        ("claude-haiku-5-5", "Haiku 5.5", (0.10, 0.50, 0.01), "medium"),
        ("claude-fable-5-2", "Fable 5.2", (8.0, 40.0, 0.20), "high"),
        ("claude-mythos-5-2", "Fable 5.2", (8.0, 40.0, 0.20), "high"),
        ("claude-fable-5-1", "Fable 5.1", (10.0, 50.0, 0.25), "high"),
        ("claude-fable-5", "Fable 5", (10.0, 50.0, 1.00), "high"),
    ],
)
def test_the_2026_models_prices_and_default_effort(model, name, prices, effort):
    f = family_of(model)
    assert (f.name, (f.price_in, f.price_out, f.cache_read), f.default_effort) == (name, prices, effort)
    assert f.window == MTOK and f.max_output == 128_000
    assert cost_usd(model, {"cache_read_input_tokens": 50_000}) == pytest.approx(prices[2] / 20)


def test_a_haiku_prompt_over_100k_bills_every_token_at_five_times():
    short = {"input_tokens": 60_000, "cache_read_input_tokens": 40_000, "output_tokens": 1_000}
    long = {**short, "input_tokens": 60_001}
    assert cost_usd("claude-haiku-5-5", short) == pytest.approx(
        (60_000 * 0.10 + 40_000 * 0.01 + 1_000 * 0.5) / MTOK
    )
    assert cost_usd("claude-haiku-5-5", long) == pytest.approx(
        5 * (60_001 * 0.10 + 40_000 * 0.01 + 1_000 * 0.5) / MTOK
    )
    assert cost_usd("claude-sonnet-5-5", long) == pytest.approx(
        (60_001 * 2 + 40_000 * 0.1 + 1_000 * 10) / MTOK
    )


def test_the_picker_names_the_newest_of_each_alias():
    assert [(alias, resolve(alias)) for alias, _, _ in PICKER] == [(a, m) for a, m, _ in PICKER]
