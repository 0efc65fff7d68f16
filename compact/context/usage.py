"""What fills the context, by the /context categories (system prompt, tools, memory files, messages).

The one computation behind ``/context`` (agent.frontend.commands) and the post-compaction guard's message
(compact.compaction.compactor). Figures are scaled as the server counts (the calibration), like every threshold, and
add up to the count the auto-compact trigger uses.
Writes to disk: no. Model calls: none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from compact.context.conversation import Conversation, Ports
from core.model import in_context
from core.tokens import estimate_text


@dataclass(frozen=True)
class Breakdown:
    system: int  # the system prompt without the memory files in it
    tools: int
    memory: list[tuple[str, int]]  # (path, tokens) of each CLAUDE.md file
    messages: int

    @property
    def memory_tokens(self) -> int:
        return sum(t for _, t in self.memory)

    @property
    def used(self) -> int:
        return self.system + self.tools + self.memory_tokens + self.messages


def breakdown(conv: Conversation, ports: Ports) -> Breakdown:
    scale = conv.calibration.scale
    req = ports.request([])
    memory = []
    for path in ports.instruction_files():
        try:
            memory.append(
                (str(path), scale(estimate_text(path.read_text(encoding="utf-8", errors="replace"))))
            )
        except OSError:
            continue
    memory_tokens = sum(t for _, t in memory)
    system_text = "\n\n".join(b.get("text", "") for b in req.system)
    system = max(0, scale(estimate_text(system_text)) - memory_tokens)
    sent = in_context(req.tools)
    tools = scale(estimate_text(json.dumps(sent, ensure_ascii=False))) if sent else 0
    # the count includes the system prompt and tools (reported, or estimated when nothing was reported yet)
    messages = max(0, conv.view().tokens - system - tools - memory_tokens)
    return Breakdown(system, tools, memory, messages)


def categories(conv: Conversation, ports: Ports) -> list[tuple[str, int]]:
    """(name, tokens) for system prompt, tools, memory files and messages, largest first."""
    b = breakdown(conv, ports)
    parts = [
        ("system prompt", b.system),
        ("tools", b.tools),
        ("memory files", b.memory_tokens),
        ("messages", b.messages),
    ]
    return sorted(parts, key=lambda p: -p[1])
