"""What owns a Conversation: the session (agent/runtime/session.py) and the tests' compaction bench
(tests/compact/bench.py) alike, so the two can't drift apart: the main request, a ready Conversation with
the Snip tool's service, and ``ConversationOwner``, the methods both have over their Conversation
(recording, usage, requests, the Ports compaction works through, thresholds, shortcuts).

The owner's own parts (the SDK client, the transcript writer, the hook runner, the system prompt) stay
with it; agent/runtime/wiring.py builds a session's.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from compact import start
from compact.context.conversation import Conversation, LastCompaction, Ports, TranscriptSink
from compact.decision.config import CompactConfig
from compact.decision.thresholds import Thresholds
from compact.stages.snip import perform_snip
from compact.stages.state import ContextState
from core.errors import ThinkingBindingMismatch
from core.events import Event, MessageRecorded, Notice
from core.messages import Message
from core.model import Model, Request, cost_usd, max_output_tokens
from tools.base import ToolContext

DEFAULT_MAX_OUTPUT = 32_000  # the main reply's max_tokens unless CLAUDE_CODE_MAX_OUTPUT_TOKENS says more

# said once, when a request's earlier thinking no longer matched what came before it (a resume with other
# tools or settings, most often) and the request went again without that thinking: nothing is lost but the
# model's old reasoning, and the user has nothing to do
FALLBACK_NOTICE = (
    "Note: the model's earlier thinking in this conversation no longer matches what came before it "
    "(the tools or settings changed, as a resume with other ones does), so it is left out from now on. "
    "Your messages, the replies and the tool results are all kept, and there is nothing to do; resuming "
    "with the same tools and settings keeps the thinking."
)
# the usage counted toward /cost and the turn's totals
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _no_count(req: Request) -> int | None:
    return None


# T under which the tools are described briefly (ConversationOwner.brief_tools)
BRIEF_TOOLS_BELOW = 20_000


def request(
    model: str,
    system: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    api_messages: list[dict[str, Any]],
    max_tokens: int | None,
    configured_max: int | None,
    **kw: Any,
) -> Request:
    """A request with the main conversation's system prompt and tools (``tools=[]`` for none)."""
    default = configured_max or min(max_output_tokens(model), DEFAULT_MAX_OUTPUT)
    return Request(
        model=model, system=system, tools=tools, messages=api_messages, max_tokens=max_tokens or default, **kw
    )


def conversation(
    writer: TranscriptSink,
    session_dir: Path,
    tools: ToolContext,
    ports: Ports,
    *,
    history: list[Message] | None = None,
    replayed: ContextState | None = None,
    clock: Callable[[], datetime] | None = None,
) -> Conversation:
    """A ready Conversation; the tools get its Ctrl-C and the Snip tool its service."""
    conv = start.conversation(
        writer, session_dir, tools, ports, messages=history, state=replayed, clock=clock
    )
    tools.cancel = conv.cancel
    tools.services["snip"] = snipper(conv)
    return conv


def snipper(conv: Conversation) -> Callable[[list[str], str | None], str]:
    """The Snip tool's service: remove the turns the model named, under the conversation's lock."""

    def snip(ids: list[str], reason: str | None = None) -> str:
        with conv.lock:
            return perform_snip(
                conv.messages,
                conv.state,
                ids,
                reason,
                conv.current_prompt_uuid,
                conv.record,
                sent=lambda: conv.view().messages,  # what the request loses, as it shows the messages
            )

    return snip


class ConversationOwner(ABC):
    """What a session and the tests' bench do the same way over their Conversation. The owner sets the
    attributes declared here and gives ``system_blocks``, ``tool_schemas`` and ``model_window``, and what
    compaction is given through ``compaction_ports`` (the one assembly of ``Ports``): ``account_side_request``,
    ``hook_context``, ``compaction_instructions`` and ``instruction_paths``."""

    model: str
    conv: Conversation
    ports: Ports
    usage_total: dict[str, int]
    cost: float
    emit: Callable[[Event], None]

    @abstractmethod
    def system_blocks(self) -> list[dict[str, Any]]:
        """The request's system prompt blocks."""

    @abstractmethod
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The request's tool schemas."""

    @abstractmethod
    def model_window(self) -> int:
        """The model's whole context window (before the conversation's own limit)."""

    @abstractmethod
    def account_side_request(self, message: Message) -> None:
        """Count a side request's usage (compaction, notes, collapse): toward the bill, not the context."""

    @abstractmethod
    def hook_context(self, event: str, match_value: str | None, **fields: Any) -> str:
        """Run a hook event; what its successful hooks printed."""

    @abstractmethod
    def compaction_instructions(self) -> str:
        """The instruction files' ``## Compact Instructions``, added to every summary request."""

    @abstractmethod
    def instruction_paths(self) -> list[Path]:
        """The instruction files in force (a compaction's restore step leaves them out: they are re-sent)."""

    def apply_thinking(self, req: Request) -> None:
        """Extended thinking on a main-loop request; none unless the owner says otherwise."""
        return None  # the bench's requests never think; a Session sets budget and max_tokens

    def compaction_ports(
        self, model: Model, emit: Callable[[Event], None], config: CompactConfig, **more: Any
    ) -> Ports:
        """The ports compaction works through, filled from this owner's methods (``more``: further ports)."""
        return Ports(
            model=model,
            emit=emit,
            request=self.request,
            account=self.account_side_request,
            hooks=self.hook_context,
            instructions=self.compaction_instructions,
            instruction_files=self.instruction_paths,
            thinking=self.apply_thinking,
            model_window=self.model_window,
            max_output=lambda: max_output_tokens(self.model),
            count=getattr(model, "count", _no_count),
            config=config,
            **more,
        )

    # --- shortcuts to the conversation -----------------------------------------------------------
    @property
    def messages(self) -> list[Message]:
        return self.conv.messages

    @property
    def state(self) -> ContextState:
        return self.conv.state

    @property
    def last_compaction(self) -> LastCompaction | None:
        return self.conv.last_compaction

    @property
    def notes_path(self) -> Path:
        return self.conv.notes_path

    @property
    def cancel(self) -> threading.Event:
        return self.conv.cancel

    # --- recording and usage ---------------------------------------------------------------------
    def add(self, message: Message) -> None:
        """Everything added to the conversation comes here: list + transcript + event, never apart."""
        self.conv.append(message)
        if message.role == "assistant" and message.usage:
            self.count_usage(message.model or self.model, message.usage)
        self.emit(MessageRecorded(message))

    def count_usage(self, model: str, usage: dict[str, Any]) -> None:
        for key in USAGE_KEYS:
            self.usage_total[key] = self.usage_total.get(key, 0) + int(usage.get(key) or 0)
        self.cost += cost_usd(model, usage)

    # --- requests and thresholds -----------------------------------------------------------------
    def request(
        self,
        api_messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        tools: bool = True,
        **kw: Any,
    ) -> Request:
        req = request(
            self.model,
            self.system_blocks(),
            self.tool_schemas() if tools else [],
            api_messages,
            max_tokens,
            self.configured_max_output(),
            **kw,
        )
        req.block_binding = self.conv.thinking_binding  # the escape hatch travels with the conversation
        return req

    def configured_max_output(self) -> int | None:
        """The main reply's max_tokens the settings ask for (None: the model's, at most DEFAULT_MAX_OUTPUT)."""
        return self.ports.config.max_output_tokens

    def binding_fallback(self, error: ThinkingBindingMismatch) -> None:
        """A request's thinking failed the prefix check and goes again with drop_block, that request only
        (agent.runtime.sdk): the thinking the server dropped is left out of the conversation once its
        reply names it (compact.request_cycle.settle_dropped), so later requests need no escape hatch.
        The user hears of it once per conversation."""
        with self.conv.lock:
            if self.conv.binding_told:
                return
            self.conv.binding_told = True
        self.emit(Notice(FALLBACK_NOTICE, "info"))

    @property
    def window(self) -> int:
        """The model's window, or less when the conversation learned a lower limit."""
        return self.conv.window.size()

    def brief_tools(self) -> bool:
        """Whether the tools go with their short descriptions: under a small T (a 43K window's is 10,000)
        the full text of the built-in tools is over a quarter of it, and what a compaction leaves must fit
        in half of T beside them. The input schemas stay whole."""
        return self.thresholds().auto_compact < BRIEF_TOOLS_BELOW

    def thresholds(self) -> Thresholds:
        """The conversation's thresholds, for the warning bar and /context: compaction's own
        (compact.decision.window), never handed to it."""
        return self.conv.window.thresholds()
