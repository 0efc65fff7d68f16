"""Thinking: whether a main request thinks, and how deeply — a budget on the 4.x models, an effort on the
models that think by effort (core.models.Family).

Claude Code's controls keep their meaning on both:

| control | budget models (4.x) | effort models (Claude 4.7 on, the 5.5 family) |
|---|---|---|
| ``MAX_THINKING_TOKENS`` / ``maxThinkingTokens`` N | on, budget N | on, effort ``budget_effort(N)`` |
| ``MAX_THINKING_TOKENS=0`` | off | off (see the toggle) |
| ``alwaysThinkingEnabled`` | on, ``DEFAULT_BUDGET`` | on, the session's effort |
| Tab on an empty line (the toggle) | on / off | off = ``between_tools`` where the model allows it |
| "think" | budget 4,000 | at least ``medium`` |
| "think hard", "megathink" | budget 10,000 | at least ``high`` |
| "think harder" (and alike) | budget 31,999 | at least ``xhigh`` |
| "ultrathink" | budget 31,999 | the deepest effort the model offers (``max``) |
| ``/effort``, ``--effort``, ``effortLevel``, ``CLAUDE_CODE_EFFORT_LEVEL`` | — | the session's effort |

Words raise the depth for their turn only and never lower it (a session at ``max`` stays there). An
effort a model lacks is lowered to the deepest it has (core.model.Request.legal_thinking). On a model
that thinks by default (the Claude 5 families) thinking is on until the user turns it off. Turning it
off: ``between_tools`` on Sonnet 5.5 (no up-front thinking, only its short notes between tool calls),
which the API takes at low/medium/high effort only, and then at one effort for the whole conversation
(``Thinking.pinned``); ``disabled`` where the model accepts it; on Opus 5.5 and Fable it can't be turned
off, and ``toggle`` says so.

Only the main loop's requests are given thinking settings; side requests (summary, notes, collapse) send
none, so each model does its default. A main request on the 5.5 family asks for ``display: "updates"``:
the text the model writes between tool calls comes back (inside thinking blocks) and is shown as text
(agent.runtime.sdk), while its reasoning stays hidden. Other effort models ask for ``summarized`` and
show the thinking dimmed and folded, as the budget models always did.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from core.models import EFFORTS, Family

MIN_BUDGET = 1024  # the API's smallest budget
DEFAULT_BUDGET = 31_999  # alwaysThinkingEnabled, the toggle, and "ultrathink"
ANSWER_ROOM = 4_096  # output tokens kept for the answer beyond the thinking budget, when the model allows
DEEPEST = "deepest"  # "ultrathink": the deepest effort the model offers

# most specific first: the first pattern that matches sets the depth (a budget, and an effort)
_WORDS: list[tuple[re.Pattern[str], int, str]] = [
    (re.compile(p, re.IGNORECASE), budget, effort)
    for p, budget, effort in (
        (r"\bultrathink\b", DEFAULT_BUDGET, DEEPEST),
        (r"\bthink (?:harder|intensely|very hard|super hard|really hard|longer)\b", DEFAULT_BUDGET, "xhigh"),
        (r"\bmegathink\b", 10_000, "high"),
        (r"\bthink (?:hard|deeply|a lot|more)\b", 10_000, "high"),
        (r"\bthink\b", 4_000, "medium"),
    )
]

# MAX_THINKING_TOKENS on an effort model: the effort of the first bound the budget is below
BUDGET_EFFORTS: list[tuple[int, str]] = [
    (4_000, "low"),
    (10_000, "medium"),
    (16_000, "high"),
    (31_999, "xhigh"),
]


def prompt_budget(text: str) -> int | None:
    """The budget the words of a prompt ask for ("think hard" → 10000), or None."""
    for pattern, budget, _ in _WORDS:
        if pattern.search(text):
            return budget
    return None


def prompt_effort(text: str) -> str | None:
    """The effort the words of a prompt ask for ("think hard" → high, "ultrathink" → DEEPEST), or None."""
    for pattern, _, effort in _WORDS:
        if pattern.search(text):
            return effort
    return None


def budget_effort(budget: int) -> str:
    """MAX_THINKING_TOKENS as an effort: below 4,000 low, below 10,000 medium, below 16,000 high, below
    31,999 xhigh, from 31,999 (the budget "ultrathink" gives) max."""
    for bound, effort in BUDGET_EFFORTS:
        if budget < bound:
            return effort
    return "max"


def supports_thinking(model: str) -> bool:
    """Claude 3.7 and every later model think; older ones refuse the parameter."""
    name = model.lower()
    return not (name.startswith("claude-3-") and not name.startswith("claude-3-7"))


def budget_for(*, enabled: bool, configured: int | None, prompt: int | None) -> int | None:
    """This turn's budget: the prompt's words raise it (and turn it on); None means no thinking."""
    base = (configured or DEFAULT_BUDGET) if enabled else None
    if prompt is None:
        return base
    return max(prompt, base or 0)


def fit(budget: int, max_tokens: int, model_max: int) -> tuple[int, int] | None:
    """(budget_tokens, max_tokens) the API accepts: max_tokens grown to leave room for an answer where
    the model allows it, the budget cut below it; None when no valid budget fits."""
    max_tokens = min(model_max, max(max_tokens, budget + ANSWER_ROOM))
    budget = min(budget, max_tokens - 1)
    if budget < MIN_BUDGET:
        return None
    return budget, max_tokens


def deeper(a: str | None, b: str | None, family: Family) -> str | None:
    """The deeper of two efforts (DEEPEST is the model's deepest; None is the model's default)."""
    levels = [family.deepest or "max" if e == DEEPEST else e for e in (a, b) if e is not None]
    return max(levels, key=EFFORTS.index) if levels else None


@dataclass
class Plan:
    """What a main request carries: ``thinking`` (API form, or None) and ``effort`` (or None)."""

    thinking: dict[str, Any] | None
    effort: str | None


def plan_effort(
    family: Family, *, on: bool, session_effort: str | None, prompt: str | None, pinned: str | None
) -> Plan:
    """The thinking of a main request on a model that thinks by effort.

    ``on``: thinking on (the toggle, MAX_THINKING_TOKENS, alwaysThinkingEnabled, or the model's default);
    ``session_effort``: the session's effort (None: the model's default); ``prompt``: what the prompt's
    words ask for; ``pinned``: the effort between_tools began at in this conversation."""
    effort = deeper(session_effort, prompt, family)
    if on or prompt is not None:
        display = "updates" if family.progress_in_thinking else "summarized"
        return Plan({"type": "adaptive", "display": display}, effort)
    if family.stop == "between_tools":
        stop_at = pinned or effort or "high"
        if stop_at in family.stop_efforts:
            return Plan({"type": "between_tools"}, stop_at)
        # above the efforts between_tools allows: thinking stays on (toggle_line says so)
        return Plan({"type": "adaptive", "display": "updates"}, effort)
    if family.stop == "disabled":
        return Plan({"type": "disabled"}, effort)
    return Plan(
        {"type": "adaptive", "display": "updates" if family.progress_in_thinking else "summarized"}, effort
    )


def toggle_line(family: Family, on: bool, effort: str | None) -> str:
    """What the toggle did, in a line for the user (and where the model would not let it)."""
    if not family.adaptive:
        return "Thinking on." if on else "Thinking off."
    if on:
        return "Thinking on."
    if family.stop is None:
        return f"{family.name} can't turn thinking off: it keeps thinking (lower /effort to think less)."
    if family.stop == "between_tools" and (effort or "high") not in family.stop_efforts:
        return (
            f"{family.name} turns thinking off only at low, medium or high effort: it keeps thinking at "
            f"{effort} (/effort high, then Tab, to turn it off)."
        )
    if family.stop == "between_tools":
        return "Thinking off: no thinking up front, only short notes between tool calls."
    return "Thinking off."
