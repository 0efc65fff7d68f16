"""What a model accepts and what it costs: one ``Family`` per model generation, found by name, corrected
by what the Models API reports.

Every request passes through ``core.model.Request.params``, which asks the model's family what it
refuses and leaves it out, so no kind of request (main, summary, notes update, collapse, subagent) can
carry it. A family comes from, in order:

1. the Models API's ``capabilities`` for that model, once learned (``learn``; the SDK client fetches them
   in the background when a session starts, so the first prompt never waits on it, and keeps what it
   learned for its own requests): the thinking types, effort levels, limits and whether it offers the
   server's on-demand summary (``compaction``) replace the table's;
2. the table below, by name;
3. for a name the table doesn't know, the newest family's rules (a newer model keeps the newest rules
   more likely than the oldest's; the strictest rules are also the ones that every model accepts).

Sources (the provider's pages, read late 2026): models/sonnet-5-5/migration-guide and
whats-new-sonnet-5-5 (the five refused settings, between_tools at low/medium/high, 1M window, 128K output,
$2/$10, cache reads $0.10, 512-token cacheable minimum), models/opus-5-5/whats-new-opus-5-5 (thinking
can't be turned off, forced tool use refused, $4/$20; the same rules on Fable 5.1), models/sonnet-5
migration guide (adaptive on by default, budgets and sampling refused, $2/$10), build-with-claude/
thinking-troubleshooting (budgets refused from Claude 4.7 on, deprecated on 4.6), the pricing page
(cache writes 1.25x input, reads 0.1x input unless stated). Late 2026 (docs/preserved-thinking.md): models/haiku-5-5/overview
($0.10/$0.50 up to a 100K-token prompt, every token of a longer one at 5x, cache reads $0.01),
models/fable-5/overview and fable-5-1/overview ($10/$50; cache reads $1.00 on Fable 5, a quarter of that
from 5.1), Fable 5.2 at $8/$40 with reads at 1/40 of input as the providers reselling it list it, Opus
5.5's cache reads at 1/20 of input (docs/preserved-thinking.md), and each model's default effort from the lineup table of
those pages. ``PICKER`` is what ``/model`` offers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

EFFORTS = ("low", "medium", "high", "xhigh", "max")  # shallowest to deepest
# what /effort, --effort, effortLevel and CLAUDE_CODE_EFFORT_LEVEL take ("auto": the model's default)
EFFORT_NAMES = (*EFFORTS, "auto")


def effort_name(text: str) -> str:
    """The effort name ``text`` gives (any case, blanks around ignored); ValueError when it names none."""
    name = text.strip().lower()
    if name not in EFFORT_NAMES:
        raise ValueError(text)
    return name


@dataclass(frozen=True)
class Family:
    name: str
    thinking: frozenset[str]  # the thinking.type values it accepts
    efforts: tuple[str, ...] = ()  # output_config.effort levels it accepts (none: no effort parameter)
    stop_efforts: tuple[str, ...] = EFFORTS  # efforts at which between_tools is accepted
    refuses_sampling: bool = False  # temperature other than 1, top_p, top_k
    refuses_prefill: bool = False  # a final assistant message
    refuses_forced_tool: bool = False  # tool_choice any / tool
    progress_in_thinking: bool = False  # text written between tool calls comes back in thinking blocks
    window: int = 200_000
    max_output: int = 64_000
    price_in: float = 3.0  # USD per million tokens
    price_out: float = 15.0
    cache_read: float | None = None  # USD per million; None: a tenth of price_in
    min_cache_tokens: int = 1024
    thinks_by_default: bool = False  # a request that says nothing about thinking thinks (Claude 5 on)
    # whether it takes the top-level ``compaction: {type: "summarize"}`` (the server's on-demand summary), as
    # the Models API's capabilities.compaction says; None where it said nothing (core.model.offers_compaction
    # then goes by the name)
    compaction: bool | None = None
    default_effort: str | None = None  # the effort a request that names none gets (the provider's default)
    # a prompt (input, cache reads and writes) longer than this bills every token of its request, output
    # included, at ``long_factor`` times the prices (0: one band)
    long_prompt: int = 0
    long_factor: float = 1.0
    source: str = ""

    @property
    def budgets(self) -> bool:
        """Thinks with a budget (``enabled``): the 4.x form, kept wherever the model takes no effort."""
        return "enabled" in self.thinking and not self.efforts

    @property
    def adaptive(self) -> bool:
        """Thinks by effort (``adaptive`` plus ``output_config.effort``)."""
        return "adaptive" in self.thinking and not self.budgets

    @property
    def stop(self) -> str | None:
        """How thinking is turned off: ``between_tools``, ``disabled``, or None when it can't be."""
        if "between_tools" in self.thinking:
            return "between_tools"
        return "disabled" if "disabled" in self.thinking else None

    @property
    def deepest(self) -> str | None:
        return self.efforts[-1] if self.efforts else None


_BUDGET = frozenset({"enabled", "disabled"})
_ALL4 = frozenset({"enabled", "disabled", "adaptive"})
_ADAPTIVE_OFF = frozenset({"adaptive", "disabled"})

SONNET_55 = Family(
    "Sonnet 5.5",
    frozenset({"adaptive", "between_tools"}),
    EFFORTS,
    stop_efforts=("low", "medium", "high"),
    refuses_sampling=True,
    refuses_prefill=True,
    refuses_forced_tool=True,
    progress_in_thinking=True,
    thinks_by_default=True,
    window=1_000_000,
    max_output=128_000,
    price_in=2.0,
    price_out=10.0,
    cache_read=0.10,
    min_cache_tokens=512,
    default_effort="high",
    source="models/sonnet-5-5/migration-guide, whats-new-sonnet-5-5",
)
OPUS_55 = replace(
    SONNET_55,
    name="Opus 5.5",
    thinking=frozenset({"adaptive"}),
    price_in=4.0,
    price_out=20.0,
    cache_read=0.20,
    default_effort="medium",
    source="models/opus-5-5/whats-new-opus-5-5; cache reads 1/20 of input (docs/preserved-thinking.md)",
)
FABLE_5 = replace(
    OPUS_55,
    name="Fable 5",
    price_in=10.0,
    price_out=50.0,
    cache_read=1.00,
    default_effort="high",
    source="whats-new-opus-5-5 (rules); models/fable-5/overview (prices)",
)
FABLE_51 = replace(FABLE_5, name="Fable 5.1", cache_read=0.25, source="models/fable-5-1/overview")
FABLE_52 = replace(
    FABLE_5,
    name="Fable 5.2",
    price_in=8.0,
    price_out=40.0,
    cache_read=0.20,
    source="models/fable-5-1 (rules); $8/$40, reads 1/40 of input (docs/preserved-thinking.md, resellers' list prices)",
)
HAIKU_55 = replace(
    SONNET_55,
    name="Haiku 5.5",
    price_in=0.10,
    price_out=0.50,
    cache_read=0.01,
    default_effort="medium",
    long_prompt=100_000,
    long_factor=5.0,
    source="rules assumed Sonnet 5.5's until the Models API says; models/haiku-5-5/overview (prices)",
)
CLAUDE_5 = Family(
    "Claude 5",
    _ADAPTIVE_OFF,
    EFFORTS,
    refuses_sampling=True,
    refuses_prefill=True,
    thinks_by_default=True,
    window=1_000_000,
    max_output=128_000,
    price_in=2.0,
    price_out=10.0,
    cache_read=0.20,
    source="models/sonnet-5/migration-guide",
)
OPUS_47 = Family(
    "Opus 4.7/4.8",
    _ADAPTIVE_OFF,
    EFFORTS,
    refuses_sampling=True,
    refuses_prefill=True,
    max_output=128_000,
    price_in=5.0,
    price_out=25.0,
    source="build-with-claude/thinking-troubleshooting",
)
CLAUDE_46 = Family(
    "Claude 4.6",
    _ALL4,
    (),  # the budget form stays on 4.6 (deprecated there, still accepted): as it always was
    max_output=64_000,
    source="build-with-claude/thinking-troubleshooting",
)
CLAUDE_4 = Family("Claude 4", _BUDGET, source="build-with-claude/extended-thinking")
CLAUDE_3 = Family("Claude 3", frozenset(), max_output=8_192, source="models overview")

# what an unknown (newer) name is taken for: the newest family's rules, but no way of turning thinking
# off until the Models API says the model has one (between_tools is refused where it isn't offered)
NEWEST = replace(SONNET_55, name="the newest family", thinking=frozenset({"adaptive"}), source="assumed")

# (pattern on the API model name, family, overrides); the first match wins
_TABLE: list[tuple[str, Family, dict[str, Any]]] = [
    (r"^claude-sonnet-5-5", SONNET_55, {}),
    (r"^claude-opus-5-5", OPUS_55, {}),
    (r"^claude-haiku-5-5", HAIKU_55, {}),
    (r"^claude-(fable|mythos)-5-2(?!\d)", FABLE_52, {}),
    (r"^claude-(fable|mythos)-5-1(?!\d)", FABLE_51, {}),
    (r"^claude-(fable|mythos)-5", FABLE_5, {}),
    (r"^claude-(sonnet|opus|haiku)-5(?!-\d)", CLAUDE_5, {}),
    (r"^claude-opus-4-[78]", OPUS_47, {}),
    (r"^claude-mythos-preview", OPUS_47, {}),
    (r"^claude-(sonnet|opus)-4-6", CLAUDE_46, {}),
    (r"^claude-opus-4-5", CLAUDE_4, {"price_in": 5.0, "price_out": 25.0}),
    (r"^claude-opus-4-(0|1|2)", CLAUDE_4, {"max_output": 32_000, "price_in": 15.0, "price_out": 75.0}),
    (r"^claude-opus-4-20", CLAUDE_4, {"max_output": 32_000, "price_in": 15.0, "price_out": 75.0}),
    (r"^claude-haiku-4", CLAUDE_4, {"price_in": 1.0, "price_out": 5.0}),
    (r"^claude-(sonnet|opus|haiku)-4", CLAUDE_4, {}),
    (r"^claude-3-7", CLAUDE_4, {}),
    (r"^claude-3-5-haiku", CLAUDE_3, {"price_in": 0.8, "price_out": 4.0}),
    (r"^claude-3-haiku", CLAUDE_3, {"max_output": 4_096, "price_in": 0.25, "price_out": 1.25}),
    (r"^claude-3", CLAUDE_3, {}),
]

# Claude Code's model aliases: each names the newest model of its kind (``default`` is ours)
ALIASES = {
    "sonnet": "claude-sonnet-5-5",
    "opus": "claude-opus-5-5",
    "haiku": "claude-haiku-5-5",
    "fable": "claude-fable-5-2",
    "best": "claude-opus-5-5",
    "sonnet[1m]": "claude-sonnet-5-5[1m]",
    "opus[1m]": "claude-opus-5-5[1m]",
    "opusplan": "claude-opus-5-5",
}


# what /model offers to pick from: (alias, model id, what it is for), the newest of each kind
PICKER: tuple[tuple[str, str, str], ...] = (
    ("sonnet", "claude-sonnet-5-5", "fast, for most coding work (the default)"),
    ("opus", "claude-opus-5-5", "deeper work; thinking can't be turned off"),
    ("haiku", "claude-haiku-5-5", "fastest and cheapest; prompts over 100K cost 5x"),
    ("fable", "claude-fable-5-2", "the most capable, for the hardest long tasks"),
)


def api_name(model: str) -> str:
    return model.replace("[1m]", "")


def resolve(model: str) -> str:
    """A Claude Code alias (``opus``, ``sonnet``, ``haiku``, …, any case) as the model id it names; any
    other name as given."""
    return ALIASES.get(model.strip().lower(), model.strip())


def family_of(model: str) -> Family:
    """The table's family for ``model`` (a client that asked the Models API knows better: ``learn``)."""
    name = api_name(model).lower()
    for pattern, family, overrides in _TABLE:
        if re.match(pattern, name):
            return replace(family, **overrides) if overrides else family
    return NEWEST


def learn(model: str, info: dict[str, Any]) -> Family:
    """Take in what ``GET /v1/models/{id}`` reported (``max_input_tokens``, ``max_tokens`` and
    ``capabilities``, any of them missing): a family made from the table's, corrected by it."""
    family = family_of(model)
    changes: dict[str, Any] = {}
    if isinstance(info.get("max_input_tokens"), int) and info["max_input_tokens"] > 0:
        changes["window"] = info["max_input_tokens"]
    if isinstance(info.get("max_tokens"), int) and info["max_tokens"] > 0:
        changes["max_output"] = info["max_tokens"]
    caps = info.get("capabilities")
    if isinstance(caps, dict):
        changes.update(_from_capabilities(caps))
    return replace(family, **changes) if changes else family


THINKING_TYPES = ("enabled", "disabled", "adaptive", "between_tools")


def corrected(family: Family, model: str, refused: frozenset[str]) -> Family:
    """``family`` without the settings the API refused for ``model`` (thinking types, ``effort``). Where
    the family came from the Models API's report (it isn't the table's) and the API refused a thinking
    type that report offered, the report is wrong about thinking: the table's thinking and efforts stand
    instead, less what was refused, so the next request is one the API takes."""
    if not refused:
        return family
    table = family_of(model)
    kinds = refused & frozenset(THINKING_TYPES)
    changes: dict[str, Any] = {}
    if kinds and family != table:
        changes.update(thinking=table.thinking, efforts=table.efforts, stop_efforts=table.stop_efforts)
    changes["thinking"] = changes.get("thinking", family.thinking) - kinds
    if "effort" in refused:
        changes["efforts"] = ()
    return replace(family, **changes)


def _supported(node: Any) -> bool:
    return isinstance(node, dict) and bool(node.get("supported"))


def _from_capabilities(caps: dict[str, Any]) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    thinking = caps.get("thinking")
    if isinstance(thinking, dict) and isinstance(thinking.get("types"), dict):
        types = thinking["types"]
        kinds = ("enabled", "disabled", "adaptive", "between_tools")
        changes["thinking"] = frozenset(t for t in kinds if _supported(types.get(t)))
    compaction = caps.get("compaction")
    if isinstance(compaction, dict) and isinstance(compaction.get("supported"), bool):
        changes["compaction"] = compaction["supported"] and _supported(compaction.get("summarize"))
    effort = caps.get("effort")
    if isinstance(effort, dict):
        changes["efforts"] = (
            tuple(e for e in EFFORTS if _supported(effort.get(e))) if _supported(effort) else ()
        )
    return changes


def cost_usd(model: str, usage: dict[str, Any]) -> float:
    """What ``usage`` cost on ``model``, at its family's prices."""
    f = family_of(model)
    read_price = f.cache_read if f.cache_read is not None else f.price_in * 0.1
    tokens_in = usage.get("input_tokens", 0) or 0
    write = usage.get("cache_creation_input_tokens", 0) or 0
    read = usage.get("cache_read_input_tokens", 0) or 0
    out = usage.get("output_tokens", 0) or 0
    band = f.long_factor if f.long_prompt and tokens_in + write + read > f.long_prompt else 1.0
    usd = tokens_in * f.price_in + write * f.price_in * 1.25 + read * read_price + out * f.price_out
    return usd * band / 1e6
