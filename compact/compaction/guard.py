"""The post-compaction guard: did a compaction help? (docs/compaction.md)

A compaction whose result is still over the auto-compact threshold T is kept (it did shrink the context)
but counts as a failure for the circuit breaker (compact.decision.breaker); so does an automatic one that started
from a full context (the warning level or above) and freed less than MIN_FREED of it or left it at the
warning level. The user is told once, until a compaction helps again, what fills the context, and the
same content is not compacted again (compact.autocompact). A compaction that helps resets the breaker.
"""

from __future__ import annotations

from compact.context import usage
from compact.context.conversation import Conversation, Ports, Trigger
from compact.decision.thresholds import Thresholds
from core.events import CompactFailed, Notice

STILL_OVER = "still over the threshold after compacting"
MIN_FREED = 0.2  # an automatic compaction freeing less than this share of the context did not help


def check(
    conv: Conversation,
    ports: Ports,
    trigger: Trigger,
    shown: str,
    pre_tokens: int,
    post_tokens: int,
    clears: bool = False,
) -> None:
    """Count a compaction that did not help as a failure and say what fills the context; else reset.
    ``clears``: the server clears old tool results (compact.context.context_editing), so the history kept may
    stand near the warning level, or over T, while the server counts far less of it: then only what it
    freed counts."""
    th = conv.window.thresholds()
    # the history kept may stay over T while what the server counts of it is far under: the next
    # compaction is prepared and put off as usual (compact.workers.preparer), this one still helped
    still_over = post_tokens >= th.auto_compact and not clears
    level = warning_level(th)
    weak = (
        trigger == "auto"
        and pre_tokens >= level
        and (post_tokens > pre_tokens * (1 - MIN_FREED) or (post_tokens >= level and not clears))
    )
    if not (still_over or weak):
        conv.breaker.reset()
        conv.guard_warned = False
        return
    if trigger == "auto":
        conv.breaker.failed()
    if still_over:
        ports.emit(CompactFailed(shown, STILL_OVER))
    if not conv.guard_warned:
        conv.guard_warned = True
        ports.emit(Notice(guard_text(pre_tokens, post_tokens, usage.categories(conv, ports)), "warning"))


def warning_level(th: Thresholds) -> int:
    """The warning level, or ¾ of T on a window so small that the warning level sits below it."""
    return max(th.warning, th.auto_compact * 3 // 4)


def guard_text(pre_tokens: int, post_tokens: int, parts: list[tuple[str, int]]) -> str:
    freed = max(0, pre_tokens - post_tokens)
    share = round(freed / pre_tokens * 100) if pre_tokens else 0
    filled = ", ".join(f"{name} {tokens:,}" for name, tokens in parts)
    return (
        f"Compaction did not free enough room ({pre_tokens:,} → {post_tokens:,} tokens, {share}% freed), so "
        f"auto-compact will not run again on the same content. What fills the context (tokens): {filled}. "
        "Run /context for details; remove large memory files or tools, or /clear to start afresh."
    )
