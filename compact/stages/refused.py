"""Blocks the API refused, left out of the conversation for good (issue 40).

A 400 that names one block of a request (``messages.N.content.M``) is answered by changing the
conversation so the same request can't be refused again (compact.request_cycle.send):

    a thinking block whose signature no longer verifies     left out
    a compaction block the server can't read                its summary, as text
    a picture or a document                                 a line saying it was left out
    a tool loop whose latest step lost its thinking         the step told as text: the calls as the
    (the key was inside it, so the transcript could not     assistant's words, their results as the
    keep it, and the API wants it back first)               user's (a tool loop can't go on without it)

Each change is one transcript record (``record``), and ``apply`` makes it again on the messages a resume
loads, so a refusal never outlives its request: the next ``--continue`` sends what the last request
after the refusal sent, not the block again. A block is named by a digest of its JSON (what the
transcript holds), so the record finds it whatever the message's other blocks became.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from core.messages import Message

REFUSED_BLOCK = "refused-block"  # the transcript record of a change made for a refused block
LOOP = "tool-loop"  # the record's kind for a tool loop told as text
REMOVABLE = ("thinking", "redacted_thinking", "compaction", "image", "document")


def block_key(block: Any) -> str:
    """A block's name in a record: a digest of its JSON (cache markers aside, which move)."""
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    text = json.dumps(block, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def record(message_uuid: str, kind: str, path: str, reason: str, **more: Any) -> dict[str, Any]:
    return {
        "type": REFUSED_BLOCK,
        "uuid": message_uuid,
        "kind": kind,
        "path": path,
        "reason": reason,
        **more,
    }


def without(blocks: list[Any], is_target: Any) -> list[Any] | None:
    """``blocks`` with the first block ``is_target`` accepts replaced as the module docstring says (None:
    not among them, nor inside one of their tool results)."""
    out: list[Any] = []
    found = False
    for block in blocks:
        if not found and isinstance(block, dict) and is_target(block):
            found = True
            kind = block.get("type")
            if kind in ("thinking", "redacted_thinking"):
                continue
            if kind == "compaction":
                text = block.get("content") or ""
                out.append(
                    {"type": "text", "text": f"Summary of the earlier conversation:\n{text}"}
                    if text
                    else {"type": "text", "text": "[the earlier conversation's summary could not be read]"}
                )
                continue
            out.append({"type": "text", "text": f"[a {kind} the API refused was left out]"})
            continue
        if not found and isinstance(block, dict) and isinstance(block.get("content"), list):
            inner = without(block["content"], is_target)
            if inner is not None:
                found = True
                out.append({**block, "content": inner})
                continue
        out.append(block)
    return out if found else None


def told(m: Message) -> Message:
    """A message of a tool loop as plain text: calls and results in words, pictures and documents named
    (``[image]``, inside a result too). The one copy: a refused tool loop (here) and a summary request
    that can't continue its loop (compact.compaction.summary.close_loop) tell a step the same way."""
    lines = []
    for b in m.content:
        kind = b.get("type")
        if kind == "text" and str(b.get("text", "")).strip():
            lines.append(str(b["text"]))
        elif kind == "tool_use":
            lines.append(f"[called {b.get('name')}: {json.dumps(b.get('input', {}), ensure_ascii=False)}]")
        elif kind == "tool_result":
            label = "tool error" if b.get("is_error") else "tool result"
            lines.append(f"[{label}]\n{result_text(b.get('content'))}")
        elif kind in ("image", "document"):
            lines.append(f"[{kind}]")
    return m.replace(content=[{"type": "text", "text": "\n\n".join(lines) or "(empty)"}])


def result_text(content: Any) -> str:
    """A tool result's content as text: its text blocks as they are, anything else named (``[image]``).
    The one copy: ``told`` here and a collapse span's rendering (compact.stages.collapse) read a result
    alike."""
    if isinstance(content, str):
        return content
    parts = []
    for b in content or []:
        kind = b.get("type") if isinstance(b, dict) else None
        parts.append(str(b.get("text", "")) if kind == "text" else f"[{kind or 'non-text content'}]")
    return "\n".join(parts)


def loop_messages(messages: list[Message], at: int) -> list[int]:
    """Indexes of the assistant message at ``at`` and of the messages after it that answer its calls."""
    ids = {b.get("id") for b in messages[at].tool_uses}
    out = [at]
    for i in range(at + 1, len(messages)):
        m = messages[i]
        if m.role == "assistant":
            break
        if any(b.get("tool_use_id") in ids for b in m.tool_results):
            out.append(i)
    return out


def apply(records: Iterable[dict[str, Any]], live: list[Message]) -> list[Message]:
    """The loaded messages with every recorded change made again (records about messages no longer live
    change nothing)."""
    out = list(live)
    for rec in records:
        if not isinstance(rec, dict) or rec.get("type") != REFUSED_BLOCK:
            continue
        at = next((i for i, m in enumerate(out) if m.uuid == rec.get("uuid")), None)
        if at is None:
            continue
        if rec.get("kind") == LOOP:
            if out[at].role == "assistant" and out[at].tool_uses:
                for i in loop_messages(out, at):
                    out[i] = told(out[i])
            continue
        key = rec.get("block")
        if isinstance(key, str):
            changed = without(out[at].content, lambda b, key=key: block_key(b) == key)
        elif rec.get("kind") in ("thinking", "redacted_thinking"):  # a record from before blocks were named
            kinds = (rec.get("kind"),)
            changed = without(out[at].content, lambda b, kinds=kinds: b.get("type") in kinds)
        else:
            changed = None
        if changed is not None:
            out[at] = out[at].replace(content=changed)
    return out
