"""``/export``: the conversation as Markdown, for a person to read or share.

Your prompts and the replies in full; each tool call as one line (its name and main argument) with the
first lines of its result; a compaction's summary where the conversation was compacted; thinking and the
context the agent attached for the model left out.
"""

from __future__ import annotations

import json
from typing import Any

from core.messages import Message

RESULT_LINES = 12  # lines of a tool result kept in the export
MAIN_ARGUMENTS = ("file_path", "command", "pattern", "path", "url", "query", "description")


def to_markdown(messages: list[Message], *, title: str) -> str:
    out = [f"# {title}", ""]
    calls: dict[str, str] = {}
    for m in messages:
        if m.kind == "summary":
            out += ["> **Earlier messages were compacted.** Their summary:", ">"]
            out += [f"> {line}".rstrip() for line in m.text.splitlines()] + [""]
        elif m.role == "user" and m.kind == "prompt" and m.text.strip():
            out += ["## You", "", m.text.strip(), ""]
        elif m.role == "assistant":
            said = m.text.strip()
            if said:
                out += ["## Assistant", "", said, ""]
            for call in m.tool_uses:
                line = _call_line(call)
                calls[str(call.get("id"))] = line
                out += [f"- **{line}**"]
            if m.tool_uses:
                out.append("")
        elif m.tool_results:
            for block in m.tool_results:
                out += _result_lines(block, calls.get(str(block.get("tool_use_id")), "a tool"))
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def _call_line(call: dict[str, Any]) -> str:
    args = call.get("input") or {}
    main = next((str(args[k]) for k in MAIN_ARGUMENTS if k in args), "")
    if not main and args:
        main = json.dumps(args, ensure_ascii=False)
    main = " ".join(main.split())
    return f"{call.get('name')}({main[:120]}{'…' if len(main) > 120 else ''})"


def _result_lines(block: dict[str, Any], call: str) -> list[str]:
    content = block.get("content")
    if isinstance(content, list):
        text = "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    else:
        text = str(content or "")
    lines = text.rstrip().splitlines()
    label = "Error" if block.get("is_error") else "Result"
    if not lines:
        return [f"  {label}: (empty)"]
    more = len(lines) - RESULT_LINES
    shown = lines[:RESULT_LINES] + ([f"… {more} more line{'s' if more != 1 else ''}"] if more > 0 else [])
    fence = "````" if any(line.startswith("```") for line in shown) else "```"
    return [f"  {label} of {call}:", f"  {fence}", *[f"  {line}" for line in shown], f"  {fence}"]
