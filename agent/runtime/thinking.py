"""Extended thinking: whether a main request asks for it, and with what budget.

Claude Code's controls, kept: ``MAX_THINKING_TOKENS`` (or the ``maxThinkingTokens`` setting) turns it on
with that budget; ``alwaysThinkingEnabled`` turns it on with ``DEFAULT_BUDGET``; the REPL toggles it for
the session (Tab on an empty input line); and words in a prompt raise the budget for that turn —
"think" < "think hard" / "megathink" < "think harder" / "ultrathink" — even when it is off.

Only the main loop's requests think (never a summary, notes or collapse request: those force or forbid
tools). The API's rules are kept by ``core.model.Request.params``: the budget is at least
``MIN_BUDGET`` and below ``max_tokens``, and a request that forces a tool or changes the temperature
does not think. Thinking blocks come back in the reply and are sent back unchanged (signatures and
all); the server clears older turns' thinking when context editing is on (compact.context_editing).
"""

from __future__ import annotations

import re

MIN_BUDGET = 1024  # the API's smallest budget
DEFAULT_BUDGET = 31_999  # alwaysThinkingEnabled, the toggle, and "ultrathink"
ANSWER_ROOM = 4_096  # output tokens kept for the answer beyond the thinking budget, when the model allows

# most specific first: the first pattern that matches sets the budget
_WORDS: list[tuple[re.Pattern[str], int]] = [
    (re.compile(p, re.IGNORECASE), budget)
    for p, budget in (
        (r"\bultrathink\b", DEFAULT_BUDGET),
        (r"\bthink (?:harder|intensely|very hard|super hard|really hard|longer)\b", DEFAULT_BUDGET),
        (r"\bmegathink\b", 10_000),
        (r"\bthink (?:hard|deeply|a lot|more)\b", 10_000),
        (r"\bthink\b", 4_000),
    )
]


def prompt_budget(text: str) -> int | None:
    """The budget the words of a prompt ask for ("think hard" → 10000), or None."""
    for pattern, budget in _WORDS:
        if pattern.search(text):
            return budget
    return None


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
