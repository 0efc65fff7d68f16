"""Typed events the query loop emits; the REPL and print mode render them (nothing else prints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.messages import Message


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    text: str


@dataclass(frozen=True)
class MessageRecorded:
    """A message was added to the conversation (and the transcript)."""

    message: Message


@dataclass(frozen=True)
class ToolStarted:
    tool_use_id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolFinished:
    tool_use_id: str
    name: str
    content: Any
    is_error: bool
    summary: str = ""


@dataclass(frozen=True)
class TodosChanged:
    """The model updated its todo list (TodoWrite); the whole list, in order."""

    todos: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Retrying:
    attempt: int
    reason: str
    delay: float
    compaction: bool = False  # a compaction's own request, not the main reply


@dataclass(frozen=True)
class CompactStarted:
    trigger: str  # "manual" | "auto" | "reactive"


@dataclass(frozen=True)
class CompactFinished:
    trigger: str
    pre_tokens: int
    post_tokens: int
    duration: float
    method: str  # "summary" | "session-memory" | "server-summary"
    summary: str = ""
    hook_messages: tuple[str, ...] = ()
    state: str = ""  # how much of the working-state ledger was attached ("state: 3 modified files, ...")
    candidate: str = ""  # "prepared" when a background candidate was applied, or why one was refused


@dataclass(frozen=True)
class CompactFailed:
    trigger: str
    reason: str


@dataclass(frozen=True)
class Notice:
    """A one-line message for the user (hook output, circuit breaker, snips...)."""

    text: str
    level: str = "info"  # "info" | "warning" | "error"


@dataclass(frozen=True)
class TokenState:
    tokens: int
    window: int
    threshold: int
    warning: bool
    error: bool
    blocking: bool
    percent_left: int
    auto_compact: bool


@dataclass(frozen=True)
class SubagentStarted:
    """A Task call started a subagent (agent.runtime.subagents) in its own context."""

    agent_id: str
    tool_use_id: str
    description: str
    subagent_type: str


@dataclass(frozen=True)
class SubagentProgress:
    """A running subagent's progress: tool calls so far and the tokens of its context."""

    agent_id: str
    tool_uses: int
    tokens: int


@dataclass(frozen=True)
class SubagentFinished:
    agent_id: str
    status: str  # "completed" | "interrupted" | "error"
    tool_uses: int
    tokens: int
    duration: float  # seconds
    error: str = ""


@dataclass(frozen=True)
class SubagentEvent:
    """An event of a subagent's own loop, tagged with its id (print mode's stream-json shows its messages;
    the REPL shows only the progress line)."""

    agent_id: str
    tool_use_id: str
    event: Any


@dataclass(frozen=True)
class TurnFinished:
    text: str
    stop_reason: str  # "end_turn" | "max_turns" | "error" | "interrupted" | "context_limit"
    error: str = ""
    usage: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolOutput:
    """Output of a running command as it arrives (the REPL shows its last lines while it runs)."""

    text: str


@dataclass(frozen=True)
class CallsInParallel:
    """These calls of one message (in its order) are about to run side by side: their events may arrive
    in any order, and a front end shows each call whole, in this order."""

    tool_use_ids: tuple[str, ...]


@dataclass(frozen=True)
class PermissionDenied:
    """A tool call was not run for want of permission: a deny rule, the user's "no", or nobody to ask."""

    tool_use_id: str
    tool_name: str
    tool_input: dict[str, Any]
    reason: str


Event = (
    TextDelta
    | ThinkingDelta
    | MessageRecorded
    | ToolStarted
    | ToolFinished
    | TodosChanged
    | Retrying
    | CompactStarted
    | CompactFinished
    | CompactFailed
    | Notice
    | TokenState
    | SubagentStarted
    | SubagentProgress
    | SubagentFinished
    | SubagentEvent
    | TurnFinished
    | PermissionDenied
    | ToolOutput
    | CallsInParallel
)
