"""The demo's sample project: a toy shop copied into a fresh directory, its order logs generated there.

The source files ship in ``sample/`` with a ``.sample`` suffix (so linters, type checks and import
checks never take them for the package's own modules); the copy drops it. The three order logs are
made from fixed seeds, so the story can quote their facts: each holds orders that the shop's bug
(a percentage taken off as money) overcharged.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent / "sample"
SUFFIX = ".sample"
YEARS = (2025, 2024, 2023)  # the order the story reads them in
ORDERS_PER_YEAR = 520  # one log, once Read numbers its lines, is about 9k tokens
COUPONS = {"SAVE10": 10, "SAVE25": 25, "WELCOME5": 5}
CODES = ["", "", "", "SAVE10", "SAVE25", "WELCOME5"]


@dataclass(frozen=True)
class YearFacts:
    year: int
    orders: int
    overcharged: int
    overcharge: float  # the money to give back


def copy_project(target: Path) -> dict[int, YearFacts]:
    """Copy the sample into ``target`` (an empty directory) and write its order logs."""
    for source in sorted(SAMPLE.rglob("*" + SUFFIX)):
        dest = target / source.relative_to(SAMPLE).with_name(source.name.removesuffix(SUFFIX))
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    (target / "data").mkdir(exist_ok=True)
    facts = {}
    for year in YEARS:
        text, facts[year] = order_log(year)
        (target / "data" / f"orders-{year}.csv").write_text(text, encoding="utf-8")
    return facts


def order_log(year: int) -> tuple[str, YearFacts]:
    """A year of orders as CSV, with what the buggy discount charged, and the year's facts."""
    rng = random.Random(year)
    lines = ["order,date,customer,coupon,subtotal,charged"]
    overcharged, overcharge = 0, 0.0
    for n in range(1, ORDERS_PER_YEAR + 1):
        code = rng.choice(CODES)
        subtotal = round(rng.uniform(30, 400), 2)
        percent = COUPONS.get(code, 0)
        charged = round(subtotal - percent, 2)  # the bug: 10% off became 10.00 off
        fair = round(subtotal * (1 - percent / 100), 2)
        if charged > fair:
            overcharged += 1
            overcharge += charged - fair
        date = f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        lines.append(
            f"{year}-{n:04d},{date},c{rng.randrange(10_000):04d},{code},{subtotal:.2f},{charged:.2f}"
        )
    return "\n".join(lines) + "\n", YearFacts(year, ORDERS_PER_YEAR, overcharged, round(overcharge, 2))
