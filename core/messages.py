"""The conversation's data model.

A ``Message`` is one API message plus what the agent knows about it (uuid, kind, usage). Content is a
list of API content blocks (plain dicts). Messages are immutable by convention: nothing mutates a
message or its blocks after creation; a stage that changes one builds a new Message with
``dataclasses.replace`` (same uuid), so caches keyed on the object stay correct.

Kinds
  user:      "prompt" (typed by the user), "tool_results", "meta" (context the agent injected),
             "summary" (the text that replaces history after a compaction)
  assistant: "response"

``to_api`` turns a list of messages into the ``messages`` parameter of a request: consecutive
messages of one role are merged, tool_result blocks come first in a user message, empty text blocks
are dropped, and a conversation that starts with the assistant gets a short user marker first.
"""

from __future__ import annotations

import dataclasses
import uuid as _uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from typing import Any, Iterable

from core import images
from core import tokens as _tokens

Block = dict[str, Any]

START_MARKER = "(Earlier conversation continues here.)"


def new_uuid() -> str:
    return str(_uuid.uuid4())


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Message:
    role: str
    content: list[Block]
    kind: str = "prompt"
    uuid: str = field(default_factory=new_uuid)
    timestamp: str = field(default_factory=now_iso)
    # assistant responses only
    message_id: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    usage: dict[str, Any] | None = None
    # record fields we carry through untouched (toolUseResult, isMeta details, ...)
    extra: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def tokens(self) -> int:
        """Estimated tokens of this message (cached on the object; see core.tokens)."""
        return _tokens.estimate_blocks(self.content)

    def replace(self, **changes: Any) -> Message:
        return dataclasses.replace(self, **changes)

    # --- convenience views -------------------------------------------------------------------
    @property
    def text(self) -> str:
        return "\n".join(b.get("text", "") for b in self.content if b.get("type") == "text")

    @property
    def tool_uses(self) -> list[Block]:
        return [b for b in self.content if b.get("type") == "tool_use"]

    @property
    def tool_results(self) -> list[Block]:
        return [b for b in self.content if b.get("type") == "tool_result"]

    @property
    def is_typed_prompt(self) -> bool:
        return self.role == "user" and self.kind == "prompt"


# --- constructors -------------------------------------------------------------------------------


def user_prompt(text: str) -> Message:
    return Message("user", [{"type": "text", "text": text}], kind="prompt")


def meta(text: str, **extra: Any) -> Message:
    return Message("user", [{"type": "text", "text": text}], kind="meta", extra=dict(extra))


def tool_result_block(tool_use_id: str, content: str | list[Block], is_error: bool = False) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def tool_results(blocks: list[Block]) -> Message:
    return Message("user", list(blocks), kind="tool_results")


def assistant(
    content: list[Block],
    *,
    message_id: str | None = None,
    model: str | None = None,
    stop_reason: str | None = "end_turn",
    usage: dict[str, Any] | None = None,
) -> Message:
    return Message(
        "assistant",
        list(content),
        kind="response",
        message_id=message_id,
        model=model,
        stop_reason=stop_reason,
        usage=usage,
    )


# --- the API view -------------------------------------------------------------------------------


def _clean_block(block: Block) -> Block | None:
    kind = block.get("type")
    if kind == "text":
        if not block.get("text", "").strip():
            return None
        return {k: v for k, v in block.items() if k in ("type", "text", "cache_control", "citations")}
    if kind == "tool_result":
        content = block.get("content")
        if content == "" or content == []:
            block = {**block, "content": "(no output)"}
        elif isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "image" for b in content
        ):
            block = {**block, "content": [images.checked(b) if isinstance(b, dict) else b for b in content]}
        return block
    if kind == "image":
        return images.checked(block)  # as the API checks it: a refused picture never refuses the request
    return block


def to_api(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The ``messages`` request parameter for these messages (see module docstring)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        blocks = [b for b in (_clean_block(b) for b in m.content) if b is not None]
        if not blocks:
            continue
        # the server's compaction block stands alone, first: it is never merged with the kept turns
        alone = bool(out) and any(b.get("type") == "compaction" for b in out[-1]["content"])
        if out and out[-1]["role"] == m.role and not alone:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": m.role, "content": blocks})
    for msg in out:
        if msg["role"] == "user":
            results = [b for b in msg["content"] if b.get("type") == "tool_result"]
            if results and msg["content"][: len(results)] != results:
                others = [b for b in msg["content"] if b.get("type") != "tool_result"]
                msg["content"] = results + others
    if out and out[0]["role"] == "assistant" and out[0]["content"][0].get("type") != "compaction":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": START_MARKER}]})
    return out


def tool_pairs_ok(messages: list[Message]) -> bool:
    """True when every tool_use is answered in the next message and every tool_result has its use."""
    api = to_api(messages)
    for i, msg in enumerate(api):
        uses = {b["id"] for b in msg["content"] if b.get("type") == "tool_use"}
        nxt = api[i + 1]["content"] if i + 1 < len(api) else []
        answered = (
            {b["tool_use_id"] for b in nxt if b.get("type") == "tool_result"} if i + 1 < len(api) else set()
        )
        if msg["role"] == "assistant" and uses and uses != answered and i + 1 < len(api):
            return False
        if msg["role"] == "user":
            prev = api[i - 1]["content"] if i > 0 else []
            prev_uses = {b["id"] for b in prev if b.get("type") == "tool_use"}
            mine = {b["tool_use_id"] for b in msg["content"] if b.get("type") == "tool_result"}
            if not mine <= prev_uses:
                return False
    return True


# --- transcript records ------------------------------------------------------------------------


def to_record(
    m: Message, *, parent_uuid: str | None, session_id: str, cwd: str, version: str
) -> dict[str, Any]:
    """The Claude Code transcript record of a message."""
    message: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.role == "assistant":
        message = {
            "id": m.message_id,
            "type": "message",
            "role": "assistant",
            "model": m.model,
            "content": m.content,
            "stop_reason": m.stop_reason,
            "stop_sequence": None,
            "usage": m.usage,
        }
    rec: dict[str, Any] = {
        "parentUuid": parent_uuid,
        "isSidechain": False,
        "userType": "external",
        "cwd": cwd,
        "sessionId": session_id,
        "version": version,
        "type": "user" if m.role == "system" else m.role,  # an appended system message: read back as one
        "message": message,
        "uuid": m.uuid,
        "timestamp": m.timestamp,
    }
    if m.kind == "meta":
        rec["isMeta"] = True
    elif m.kind == "summary":
        rec["isCompactSummary"] = True
        rec["isVisibleInTranscriptOnly"] = True
    if m.extra:
        rec.update(m.extra)
    return rec


_KNOWN_KEYS = {
    "parentUuid",
    "isSidechain",
    "userType",
    "cwd",
    "sessionId",
    "version",
    "type",
    "message",
    "uuid",
    "timestamp",
    "isMeta",
    "isCompactSummary",
    "isVisibleInTranscriptOnly",
    "gitBranch",
    "requestId",
    "logicalParentUuid",
    "slug",
    "permissionMode",
    "thinkingMetadata",
    "todos",
}


def from_record(rec: dict[str, Any]) -> Message | None:
    """A Message from a user/assistant transcript record (ours or Claude Code's); None if unusable."""
    msg = rec.get("message")
    if rec.get("type") not in ("user", "assistant") or not isinstance(msg, dict):
        return None
    role = msg.get("role") or rec["type"]
    content = msg.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        return None
    content = [b for b in content if isinstance(b, dict) and "type" in b]
    extra = {k: v for k, v in rec.items() if k not in _KNOWN_KEYS}
    uuid, timestamp = str(rec.get("uuid") or new_uuid()), str(rec.get("timestamp") or now_iso())
    if role == "assistant":
        return Message(
            "assistant",
            content,
            kind="response",
            message_id=msg.get("id"),
            model=msg.get("model"),
            stop_reason=msg.get("stop_reason"),
            usage=msg.get("usage"),
            uuid=uuid,
            timestamp=timestamp,
            extra=extra,
        )
    if rec.get("isCompactSummary"):
        kind = "summary"
    elif rec.get("isMeta"):
        kind = "meta"
    elif content and all(b.get("type") == "tool_result" for b in content):
        kind = "tool_results"
    else:
        kind = "prompt"
    return Message(
        "system" if role == "system" else "user",
        content,
        kind=kind,
        uuid=uuid,
        timestamp=timestamp,
        extra=extra,
    )
