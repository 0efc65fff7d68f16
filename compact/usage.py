"""What fills the context, by the /context categories (system prompt, tools, memory files, messages).

Used by the post-compaction guard (compact.compactor) to tell the user why a compaction could not free
enough room. Figures are scaled as the server counts (the calibration), like every threshold.
Writes to disk: no. Model calls: none.
"""

from __future__ import annotations

import json

from compact.conversation import Conversation, Ports
from core.tokens import estimate_text


def categories(conv: Conversation, ports: Ports) -> list[tuple[str, int]]:
    """(name, tokens) for system prompt, tools, memory files and messages, largest first."""
    scale = conv.calibration.scale
    req = ports.request([])
    memory = 0
    for path in ports.instruction_files():
        try:
            memory += scale(estimate_text(path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    system_text = "\n\n".join(b.get("text", "") for b in req.system)
    system = max(0, scale(estimate_text(system_text)) - memory)
    tools = scale(estimate_text(json.dumps(req.tools, ensure_ascii=False))) if req.tools else 0
    messages = max(0, conv.view().tokens - system - tools - memory)
    parts = [("system prompt", system), ("tools", tools), ("memory files", memory), ("messages", messages)]
    return sorted(parts, key=lambda p: -p[1])
