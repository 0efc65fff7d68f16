"""Cost-aware compaction: when a reset pays for itself, by the prompt cache's arithmetic (issue 33).

Every request reads its whole prefix back from the prompt cache, so a context of P tokens costs
P × read on every request it is sent with. A compaction replaces it with R tokens: the system prompt and
tools (still cached), plus the summary, tail and attachments, which are written to the cache once more.
It pays once

    requests left × (P − R) × read  >  rewritten × write + the compaction's call

where rewritten is R less the fixed part and less the newest tool results no request has sent yet (the
next request writes those to the cache whether or not a compaction ran): the last compaction's
(``LastCompaction.written``), before the first R − fixed.

Prices are the model family's (core.models), relative to an uncached input token: a cache write 1.25, a
cache read the family's (a tenth of input unless the table says otherwise), output the family's ratio.
The compaction's call, by the backend the next compaction would use (compact.compaction.backend):

    notes       a notes update reads P from the cache and writes what the last one was seen to write out
                and to the cache (``observe_notes``; before one, NOTES_OUT tokens out) — none when the
                notes are current already: then the compaction makes no call at all
    summary     the local summary reads P from the cache and writes ~2,500 tokens
    server      the server's summary at the price it was seen to cost (``observe``: its response's
                ``usage.iterations`` say what the compaction step read uncached, wrote to and read from the
                prompt cache, and wrote out, per token it summarized); until the first observation of the
                conversation, the prior: an uncached read of P (the worst case) plus SERVER_OUT

The requests left are unknown: the cycle so far is the estimate (a conversation that has made n requests
since the last compaction point is taken to make n more: the longer a piece of work has run, the longer it
is expected to go on). R is what the last compaction left, or, before the first, the system prompt and tools
plus RESET_SHARE of T.

``point`` turns that into a token count — the smallest P at which a reset pays now — which auto-compact and
the background preparation use in place of the threshold T (compact.autocompact, compact.workers.preparer) when
``costAwareCompaction`` is on, for the notes and the server's summary (the local summary, which keeps
nothing verbatim, still runs at T). It is never below FLOOR_SHARE of T nor twice R (a compaction must free
something worth having; below that there is nothing to compact), and never above T: at T a compaction runs
whatever the arithmetic says, as before. (On a model that keeps its thinking, a turn's first server's
summary starts no lower than BOUNDARY_SHARE of T either: compact.workers.preparer, ``turn_compacted``.) The budgets of a compaction (tail, ledger, restored files) stay scaled by T. What is restored follows the same arithmetic (compact.compaction.restore.worth_restoring).

Pure arithmetic over the conversation's state; no I/O, no model calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from compact.compaction.ledger import referred_to, result_text
from compact.context.conversation import Conversation, Ports
from core.messages import Message
from core.models import family_of

WRITE = 1.25  # a cache write, relative to an uncached input token (every family)
READ = 0.1  # a cache read, unless the family's table says otherwise
NOTES_OUT = 500  # output tokens of a notes update (a few Edit calls)
SUMMARY_OUT = 2_500  # output tokens of the local summary (its analysis and the summary)
SERVER_OUT = 1_000  # output tokens of the server's summary, until one was seen
# the server summary's price per token it summarizes until one was seen, in cache reads: its request goes
# over exactly the messages of a request already sent, whose prefix the prompt cache holds; the margin
# stands for what is not known (it may read less of the cache than a request of ours would)
SERVER_PRIOR = 2.0
RESET_SHARE = 0.08  # before the first compaction, R = the system prompt and tools + this share of T
FLOOR_SHARE = 0.15  # never compact for cost below this share of T
# on a model that keeps its thinking, a turn boundary with current notes compacts from this share of T:
# the turn that follows would otherwise likely reach T inside its tool loop, where only the server's
# summary (an uncached read of the whole context) keeps the loop's thinking valid
BOUNDARY_SHARE = 0.5
KINDS = ("notes-current", "notes", "summary", "server")
# the backends a compaction may run early with: the notes (the tail kept verbatim, the notes written from
# the whole history) and the server's summary (the kept turns as they were). The local summary keeps
# nothing verbatim and its ~2,500 written tokens rarely pay back early: it runs at T, as before
EARLY_KINDS = ("notes-current", "notes", "server")


@dataclass(frozen=True)
class Prices:
    """A model's prices relative to an uncached input token; ``server_in`` is what the server's summary
    costs per token it summarizes and ``server_out`` the tokens it writes (learned: ``observe``)."""

    read: float = READ
    write: float = WRITE
    output: float = 5.0
    server_in: float = 1.0
    server_out: float = SERVER_OUT
    notes_out: float = NOTES_OUT  # a notes update's output tokens (learned: ``observe_notes``)
    notes_written: float = 0.0  # and what it writes to the cache beyond the context it reads

    @classmethod
    def of(
        cls, model: str, seen: dict[str, float] | None = None, notes: dict[str, float] | None = None
    ) -> Prices:
        """The family's prices; with ``seen`` (an ``observe`` of this conversation) the server summary's
        price as observed, and with ``notes`` (``observe_notes``) a notes update's, at these prices."""
        family = family_of(model)
        read = family.cache_read / family.price_in if family.cache_read is not None else READ
        prices = cls(read=read, output=family.price_out / family.price_in, server_in=read * SERVER_PRIOR)
        if notes:
            prices = replace(prices, notes_out=notes["output"], notes_written=notes["written"])
        if not seen:
            return prices
        server_in = seen["uncached"] + seen["written"] * prices.write + seen["read"] * prices.read
        return replace(prices, server_in=server_in, server_out=seen["output"])


def observe(usage: dict[str, Any] | None) -> dict[str, float] | None:
    """What one server summary cost, from its response's ``usage``: the shares of the tokens it read that
    were billed uncached, written to the cache and read from it, and the tokens it wrote. The compaction
    step's own figures are its ``iterations`` entry (the top-level fields leave it out); a response
    without one is billed at the top level. None when it says nothing usable."""
    usage = usage or {}
    steps = [
        i for i in usage.get("iterations") or [] if isinstance(i, dict) and i.get("type") == "compaction"
    ]
    parts = steps or [usage]

    def total(key: str) -> int:
        return sum(int(p.get(key) or 0) for p in parts)

    uncached, written = total("input_tokens"), total("cache_creation_input_tokens")
    read, out = total("cache_read_input_tokens"), total("output_tokens")
    seen = uncached + written + read
    if seen <= 0:
        return None
    return {"uncached": uncached / seen, "written": written / seen, "read": read / seen, "output": float(out)}


def observe_notes(usage: dict[str, Any] | None) -> dict[str, float] | None:
    """What one notes update cost beyond reading the context from the cache, from its response's
    ``usage``: the tokens it wrote out and those it wrote to the cache (its instruction, and whatever of
    the context was not cached yet). None when it says nothing usable."""
    usage = usage or {}
    out = int(usage.get("output_tokens") or 0)
    if out <= 0:
        return None
    written = int(usage.get("cache_creation_input_tokens") or 0) + int(usage.get("input_tokens") or 0)
    return {"output": float(out), "written": float(written)}


def call_cost(kind: str, tokens: int, prices: Prices) -> float:
    """What the compaction's own model call costs for a context of ``tokens`` (see the docstring)."""
    if kind == "notes-current":
        return 0.0
    if kind == "notes":
        return tokens * prices.read + prices.notes_written * prices.write + prices.notes_out * prices.output
    if kind == "summary":
        return tokens * prices.read + SUMMARY_OUT * prices.output
    if kind == "server":
        return tokens * prices.server_in + prices.server_out * prices.output
    raise ValueError(f"unknown compaction kind: {kind}")


def pays(
    tokens: int, post: int, fixed: int, left: int, kind: str, prices: Prices, written: int | None = None
) -> bool:
    """Whether a reset from ``tokens`` to ``post`` (``fixed`` of it still cached) pays for itself over
    ``left`` more requests; ``written``: what of ``post`` the reset writes to the cache that the next
    request would not have written anyway (default: all but ``fixed``)."""
    saved = left * max(0, tokens - post) * prices.read
    return saved > _rewrite(post, fixed, written) * prices.write + call_cost(kind, tokens, prices)


def break_even(
    post: int, fixed: int, left: int, kind: str, prices: Prices, written: int | None = None
) -> float:
    """The smallest context at which ``pays`` holds (infinite when none does: too few requests left to
    win back the call)."""
    a = {"notes-current": 0.0, "notes": prices.read, "summary": prices.read, "server": prices.server_in}[kind]
    b = call_cost(kind, 0, prices)
    slope = left * prices.read - a
    if slope <= 0:
        return math.inf
    return (_rewrite(post, fixed, written) * prices.write + b + left * prices.read * post) / slope


def _rewrite(post: int, fixed: int, written: int | None) -> int:
    return max(0, post - fixed) if written is None else max(0, min(written, post - fixed))


def requests_in_cycle(messages: list[Message], after: str | None = None) -> int:
    """Main requests since the last compaction point, counted by their replies in the live list: those
    after message ``after`` (the last one the compaction added), else after its summary (a kept tail's
    replies were counted in the cycle before)."""
    at = (
        next((i for i in range(len(messages) - 1, -1, -1) if messages[i].uuid == after), None)
        if after
        else None
    )
    if at is None:
        at = max((i for i, m in enumerate(messages) if m.kind in ("summary", "compaction")), default=-1)
    return sum(1 for m in messages[at + 1 :] if m.role == "assistant")


def tail_unused(conv: Conversation) -> bool:
    """Whether the session has not gone back to the results the last compaction kept verbatim although
    its notes or summary had seen them: no reply since made the same call again or named anything they
    hold (compact.compaction.ledger ``referred_to``). Then the next compaction keeps, of the seen results,
    only the newest (compact.compaction.compactor): kept again, they would be written to the prompt cache
    once more and read on every request after it, where the working state names them and a Read brings
    one back. False before a first compaction (it keeps the usual tail); a compaction that kept no seen
    result passes on the verdict it was made with."""
    last = conv.last_compaction
    if last is None:
        return False
    if not last.kept_seen:
        return last.lean
    looked = last.looked  # each reply is read once: the verdict so far, and what it was made from
    if looked.get("used"):
        return False
    with conv.lock:
        messages = list(conv.messages)
    at = next((i for i, m in enumerate(messages) if m.uuid == last.tail_uuid), None)
    if at is None:
        return False
    if "results" not in looked:
        wanted = set(last.kept_seen)
        uses = {str(b.get("id")): b for m in messages[:at] for b in m.tool_uses if b.get("id") in wanted}
        looked["results"] = [
            (uses[str(b.get("tool_use_id"))], result_text(b.get("content")))
            for m in messages[:at]
            for b in m.tool_results
            if str(b.get("tool_use_id")) in uses
        ]
        looked["read"] = set()
    read: set[str] = looked["read"]
    replies = [m for m in messages[at + 1 :] if m.role == "assistant" and m.uuid not in read]
    read.update(m.uuid for m in replies)
    if replies and referred_to(looked["results"], replies):
        looked["used"] = True
    return bool(looked["results"]) and not looked.get("used")


def post_estimate(conv: Conversation, threshold: int) -> tuple[int, int]:
    """(R, fixed): what a compaction is expected to leave, and the part of it that stays cached: what the
    last one left (less the seen results it kept when the next one won't keep them: ``tail_unused``)."""
    cal = conv.calibration
    fixed = cal.scale(cal.fixed_tokens())
    last = conv.last_compaction
    if last is not None and last.post_tokens > fixed:
        return last.post_tokens - _unkept(conv), fixed
    return fixed + int(threshold * RESET_SHARE), fixed


def _unkept(conv: Conversation) -> int:
    """What of the last compaction's post the next one will not keep again (``tail_unused``)."""
    last = conv.last_compaction
    return last.kept_seen_tokens if last is not None and last.kept_seen and tail_unused(conv) else 0


def written_estimate(conv: Conversation, threshold: int) -> int:
    """What a compaction is expected to write to the cache beyond what the next request writes anyway:
    the last one's (its summary, attachments and the kept messages already sent — the newest results,
    sent for the first time, are written either way), else R less the system prompt and tools and less
    the newest results as large as the last step's (``_last_results``), at least half of R less them."""
    post, fixed = post_estimate(conv, threshold)
    last = conv.last_compaction
    if last is not None and last.post_tokens > fixed and last.written is not None:
        return max(0, min(last.written - _unkept(conv), post - fixed))
    # never below half of it: the summary and the working state are written whatever the step
    return max((post - fixed) // 2, post - fixed - _last_results(conv))


def _last_results(conv: Conversation) -> int:
    """The size of the newest tool results in the conversation (the last step's), as the server counts:
    what the next step is expected to bring, which its request writes to the cache either way."""
    with conv.lock:
        last = next((m for m in reversed(conv.messages) if m.role == "user" and m.tool_results), None)
    return conv.calibration.scale(last.tokens) if last is not None else 0


def requests_left(conv: Conversation) -> int:
    """The requests the current piece of work is expected to go on for: as many as since the last
    compaction point (``requests_in_cycle``)."""
    last = conv.last_compaction
    with conv.lock:
        return requests_in_cycle(conv.messages, last.tail_uuid if last is not None else None)


def turn_compacted(conv: Conversation) -> bool:
    """Whether the current turn has compacted: a summary or the server's block stands after the prompt
    it began with, or right before it (a compaction at the turn's boundary keeps the prompt)."""
    with conv.lock:
        messages = list(conv.messages)
    stand_in = max((i for i, m in enumerate(messages) if m.kind in ("summary", "compaction")), default=-1)
    if stand_in < 0:
        return False
    prompt = max((i for i, m in enumerate(messages) if m.is_typed_prompt), default=-1)
    # a compaction at a turn boundary keeps the new prompt right after its summary: that turn has compacted
    return stand_in > prompt or not any(m.role == "assistant" for m in messages[stand_in + 1 : prompt])


def model_name(ports: Ports) -> str:
    return ports.request([], tools=False).model


def point(conv: Conversation, ports: Ports, kind: str, threshold: int | None = None) -> int:
    """The context size from which a compaction of ``kind`` pays now (see the docstring): between
    max(FLOOR_SHARE × T, 2R) and T; T itself when cost-aware compaction is off."""
    th = threshold if threshold is not None else conv.window.thresholds().auto_compact
    if not ports.config.cost_aware or kind not in EARLY_KINDS:
        return th
    left = requests_left(conv)
    post, fixed = post_estimate(conv, th)
    written = written_estimate(conv, th)
    prices = Prices.of(model_name(ports), conv.state.server_price, conv.state.notes_price)
    even = break_even(post, fixed, left, kind, prices, written)
    low = max(th * FLOOR_SHARE, 2 * post)
    if not math.isfinite(even):
        return th
    return int(min(th, max(low, math.ceil(even))))
