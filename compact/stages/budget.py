"""Tool-result budget: large tool outputs move to disk and the context keeps a preview (docs/compaction.md).

Triggers: a tool result longer than its tool's threshold (Bash 30,000 characters, Grep 20,000, any
other tool 50,000; Read never, results holding images or documents never), then, per round (the
consecutive user messages between two assistant responses, which the API sees as one message), the
largest results not decided before, while the round's results together exceed 200,000 characters.
Drops: nothing is lost. The full output is written to ``<results_dir>/<tool_use_id>.txt`` first
(directory 0700, file 0600), and only then replaced by a ``<persisted-output>`` block giving the
original size, the file path and a preview of the first ~2,000 characters. Empty results become
"(<tool> completed with no output)".
Keeps: every other result, byte for byte; the tool_use / tool_result pairing.
Model calls: none.

Decisions are sticky, so the prompt cache prefix never changes: each result is decided once, the
replacement text is stored in ``ContextState.replacements`` (the caller records ``new_replacements``
as a content-replacement transcript record) and sent identically ever after; a result kept inline is
remembered in ``ContextState.inline`` and never revisited.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compact.stages.state import ContextState
from core.declaration import declaration_of
from core.messages import Block, Message
from core.private import write_private

DEFAULT_THRESHOLD = 50_000  # a tool nobody declared (each declaration names its own limit)
ROUND_BUDGET = 200_000
PREVIEW_CHARS = 2_000
PREVIEW_MIN_CUT = 1_000  # cut the preview at a newline only if one falls after this many chars


@dataclass
class BudgetResult:
    messages: list[Message]
    new_replacements: dict[str, str] = field(default_factory=dict)


def tool_names_of(messages: list[Message]) -> dict[str, str]:
    """tool_use_id -> tool name, from the assistant tool_use blocks of these messages."""
    return {
        b["id"]: b.get("name", "")
        for m in messages
        if m.role == "assistant"
        for b in m.content
        if b.get("type") == "tool_use"
    }


def threshold_for(tool: str) -> float:
    """The size in characters past which the tool's result goes to disk (its declaration's limit)."""
    d = declaration_of(tool)
    return d.result_limit if d is not None else DEFAULT_THRESHOLD


def result_text(content: str | list[Block]) -> str | None:
    """The text of a tool result, or None when it holds something other than text (image, document)."""
    if isinstance(content, str):
        return content
    if any(b.get("type") != "text" for b in content):
        return None
    return "\n".join(b.get("text", "") for b in content)


def preview(text: str) -> tuple[str, bool]:
    """The first ~2,000 characters, cut at the last newline when one falls after character 1,000."""
    if len(text) <= PREVIEW_CHARS:
        return text, False
    head = text[:PREVIEW_CHARS]
    cut = head.rfind("\n")
    if cut > PREVIEW_MIN_CUT:
        head = head[:cut]
    return head, True


def persisted_block(text: str, path: Path) -> str:
    head, more = preview(text)
    return (
        f"<persisted-output>\nOutput too large ({len(text)} characters). Full output saved to: {path}\n"
        f"Use Read on that file (with offset/limit) to see more.\n\nPreview (first 2KB):\n{head}\n"
        f"{'...' + chr(10) if more else ''}</persisted-output>"
    )


def result_path(results_dir: Path, tool_use_id: str) -> Path:
    safe_id = "".join(c if c.isalnum() or c in "-_" else "_" for c in tool_use_id)
    return results_dir / f"{safe_id}.txt"


def write_result(results_dir: Path, tool_use_id: str, text: str) -> Path:
    """Write a full result to disk (owner-only permissions) and return its path."""
    return write_private(result_path(results_dir, tool_use_id), text)


def apply_budget(
    messages: list[Message],
    state: ContextState,
    tool_names: dict[str, str] | None,
    results_dir: Path,
    cache: dict[str, Any] | None = None,
) -> BudgetResult:
    """The messages with oversized results replaced by persisted-output blocks (see module docstring).

    ``tool_names`` may be None: names are then taken from the assistant message before each round.
    ``cache`` (optional, owned by the caller, tied to this ``state``) remembers each processed
    message's output so a steady-state call only works on new messages.
    """
    cache = {} if cache is None else cache
    new: dict[str, str] = {}
    out: list[Message] = []  # one output per input message, in order
    prev_assistant: Message | None = None
    i, n = 0, len(messages)
    while i < n:
        m = messages[i]
        if m.role != "user":
            prev_assistant = m
            out.append(m)
            i += 1
            continue
        hit = cache.get(m.uuid)
        if hit is not None and hit[0] is m:
            out.append(hit[1])
            i += 1
            continue
        # a message not seen yet: decide its whole round (the run of user messages it belongs to)
        start = i
        while start > 0 and messages[start - 1].role == "user":
            start -= 1
        end = i
        while end < n and messages[end].role == "user":
            end += 1
        group = messages[start:end]
        names = _names_for(group, tool_names, prev_assistant, messages)
        del out[start:]
        for g, o in zip(group, _decide_round(group, state, names, results_dir, new), strict=True):
            cache[g.uuid] = (g, o)
            out.append(o)
        i = end
    return BudgetResult(out, new)


def _names_for(
    group: list[Message], tool_names: dict[str, str] | None, prev: Message | None, messages: list[Message]
) -> dict[str, str]:
    if tool_names is not None:
        return tool_names
    names = {
        b["id"]: b.get("name", "") for b in (prev.content if prev else ()) if b.get("type") == "tool_use"
    }
    wanted = {b.get("tool_use_id") for g in group for b in g.content if b.get("type") == "tool_result"}
    if not wanted <= names.keys():  # an unusual layout: fall back to the whole history, rarely
        names = tool_names_of(messages)
    return names


def _decide_round(
    group: list[Message], state: ContextState, names: dict[str, str], results_dir: Path, new: dict[str, str]
) -> list[Message]:
    """Decide every undecided result of one round, then rebuild the round's messages."""
    sizes: dict[str, int] = {}  # size as it will be sent, for the round total
    undecided: dict[str, tuple[str, str]] = {}  # id -> (tool, text) for results that may still move
    for g in group:
        for b in g.content:
            if b.get("type") != "tool_result":
                continue
            tid = b.get("tool_use_id", "")
            if tid in state.replacements:
                sizes[tid] = len(state.replacements[tid])
                continue
            text = result_text(b.get("content", ""))
            sizes[tid] = len(text) if text is not None else 0
            if tid in state.inline or text is None:
                continue
            tool = names.get(tid, "")
            if len(text) > threshold_for(tool):
                _persist(tid, text, state, results_dir, new, sizes)
            elif threshold_for(tool) != float("inf"):
                undecided[tid] = (tool, text)
    total = sum(sizes.values())
    for tid in sorted(undecided, key=lambda t: len(undecided[t][1]), reverse=True):
        if total <= ROUND_BUDGET:
            break
        text = undecided[tid][1]
        total -= len(text)
        _persist(tid, text, state, results_dir, new, sizes)
        total += sizes[tid]
    for g in group:
        for b in g.content:
            if b.get("type") == "tool_result" and b.get("tool_use_id", "") not in state.replacements:
                state.inline.add(b.get("tool_use_id", ""))
    return [_rebuild(g, state, names) for g in group]


def _persist(
    tid: str, text: str, state: ContextState, results_dir: Path, new: dict[str, str], sizes: dict[str, int]
) -> None:
    if len(persisted_block(text, result_path(results_dir, tid))) >= len(text):
        return  # too small to gain anything by moving it
    try:
        path = write_result(results_dir, tid, text)
    except OSError:
        return  # can't save it: keep it inline rather than lose it
    replacement = persisted_block(text, path)
    state.replacements[tid] = replacement
    new[tid] = replacement
    sizes[tid] = len(replacement)


def _rebuild(m: Message, state: ContextState, names: dict[str, str]) -> Message:
    blocks: list[Block] = []
    changed = False
    for b in m.content:
        if b.get("type") == "tool_result":
            tid = b.get("tool_use_id", "")
            content = b.get("content", "")
            if tid in state.replacements:
                content = state.replacements[tid]
            elif content == "" or content == []:
                content = f"({names.get(tid) or 'tool'} completed with no output)"
            if content is not b.get("content"):
                b = {**b, "content": content}
                changed = True
        blocks.append(b)
    return m.replace(content=blocks) if changed else m
