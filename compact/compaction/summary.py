"""Full LLM compaction: ask the model for a structured summary of the conversation (docs/compaction.md).

Triggers: auto-compact, ``/compact`` and reactive compaction, when the session-memory notes can't be
used (or ``/compact`` was given instructions).
Drops: everything; the summary replaces the whole history (compact.compaction.compactor swaps the list).
Keeps: nothing verbatim — the finishing steps restore recent files and hook context.
Writes to disk: nothing (the compactor writes once the summary is in hand).
Model calls: one side request; when that request is itself too long, its oldest rounds are summarized
first in a request of their own (the same way, up to 3 levels deep) and the rest is summarized behind
that summary — never dropped unseen; one more with a smaller max_tokens when only the reserved output
does not fit.

The request shares the main conversation's cached prefix: the same system blocks, the same tools and
the same (tagged) messages, with images and documents replaced by ``[image]`` / ``[document]``, then
one final user message carrying the instruction. ``tool_choice`` is ``none``: text only.

On prompt-too-long the oldest whole rounds are summarized on their own first::

    [prompt, asst₁, results₁] [asst₂, results₂, prompt₂] [asst₃ …] …   ← a round starts at each response
     └──── summarized first ───┘ → [summary of that part] [asst₃ …] …  ← then this, retried
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from compact.context.conversation import Conversation, Ports
from compact.context.result import Compaction
from compact.stages import binding
from compact.stages.refused import told
from core.errors import CompactionError, MaxTokensOverflow, PromptTooLong
from core.messages import Message, meta, to_api
from core.model import max_output_tokens
from core.private import make_private_dirs, write_private

SUMMARY_MAX_TOKENS = 20_000
PTL_RETRIES = 3
DROP_FRACTION = 0.2  # of the rounds, when the error states no gap
PART_INTRO = (
    "The start of this conversation was too long for one request; it was summarized first, and that "
    "summary stands here in its place:"
)

INSTRUCTION = """\
Stop working on the task for a moment. Your only job in this reply is to write a summary of the \
conversation so far. Answer with plain text only: do not call any tool — not one, not at the start of \
your reply and not at the end of it. Tool calls are refused here, and a reply that makes one is lost.

The summary will replace the conversation: afterwards you will see only the summary, so it must carry \
everything needed to go on working without asking the user to repeat anything.

First think inside <analysis> tags. That part is private scratch work and is thrown away. In it, walk \
through the conversation from the first message to the last, in order, and note for each part:
- what the user asked for and what they meant by it;
- what you did about it, and the decisions you took;
- concrete details: file paths, function and class names, commands, code you wrote or changed, error \
messages;
- mistakes, and every time the user corrected you or changed direction.
Then check that nothing important is missing and that every detail is right.

Then write the summary inside <summary> tags, with these nine numbered sections, in this order:

1. Primary Request and Intent: everything the user asked for, in detail, and the intent behind it.
2. Key Technical Concepts: the technologies, libraries, frameworks and ideas that matter to the work.
3. Files and Code Sections: each file you read, created or changed, why it matters and what changed. \
Give code snippets for the recent work, exactly as they are now.
4. Errors and fixes: each error you hit and how it was fixed, including what the user told you to do \
differently.
5. Problem Solving: problems solved so far and any investigation still under way.
6. All user messages: every message the user wrote, in order. Only real user turns count: tool results \
and text the system added are not user messages.
7. Pending Tasks: what you were asked to do and have not finished.
8. Current Work: precisely what you were doing just before this summary — the file, the change, the \
command — with snippets where they help.
9. Optional Next Step: the next step, only if it follows directly from the user's most recent request \
and the work in progress. Quote the latest request word for word so the task does not drift. If the \
last task was finished, or the next step is unclear, leave this section empty rather than guess.

A working-state record will be attached after the summary by the agent itself: the files modified \
and read, the commands run with their exit codes, the todo list and the user's own messages word for word. \
Do not spend words copying those lists; spend them on the reasoning, the decisions and why they were \
taken, what was learnt, and the next steps.

Any rule or security constraint the user stated (what must not be done, touched, run or shared) must \
appear in the summary word for word.

The shape of the reply:

<analysis>
[your walk through the conversation]
</analysis>

<summary>
1. Primary Request and Intent:
   ...
9. Optional Next Step:
   ...
</summary>

Remember: text only, no tool calls, from the first character of the reply to the last."""


def build_instruction(custom: list[str] | None = None) -> str:
    """The instruction, with the user's extra instructions (in the order given) appended."""
    extra = [c.strip() for c in custom or [] if c and c.strip()]
    if not extra:
        return INSTRUCTION
    return INSTRUCTION + "\n\nAdditional instructions:\n" + "\n\n".join(extra)


# --- the request --------------------------------------------------------------------------------------


def _strip_blocks(blocks: list[dict[str, Any]], thinking: bool = False) -> list[dict[str, Any]] | None:
    """Blocks with media replaced by text markers and, unless ``thinking``, thinking left out (a summary
    reads what was said and done, not how the model got there); None when nothing needed changing."""
    changed = False
    out = []
    for b in blocks:
        kind = b.get("type")
        if kind in ("thinking", "redacted_thinking") and not thinking:
            changed = True
            continue
        if kind in ("image", "document"):
            b, changed = {"type": "text", "text": f"[{kind}]"}, True
        elif kind == "tool_result" and isinstance(b.get("content"), list):
            inner = _strip_blocks(b["content"], thinking)
            if inner is not None:
                b, changed = {**b, "content": inner}, True
        out.append(b)
    return out if changed else None


def strip_media(messages: list[Message], preserved: bool = False) -> list[Message]:
    """Images become ``[image]`` and documents ``[document]`` text, also inside tool results, and
    thinking is left out; never mutates. On a model with preserved thinking (``preserved``) thinking is
    bound to its prefix (compact.stages.binding): it stays as it was sent (the latest assistant message of a tool
    loop must bring its own back, and the request reads the main conversation's cache only if it repeats
    it), and media are replaced only where no thinking follows them (else they go as they were sent)."""
    out = []
    for m in messages:
        blocks = _strip_blocks(m.content, thinking=preserved)
        out.append(m if blocks is None else m.replace(content=blocks))
    if preserved and binding.invalidated(messages, out):
        return list(messages)
    return out


def rounds(messages: list[Message]) -> list[list[Message]]:
    """Split into rounds: each starts at an assistant response (what precedes the first joins it)."""
    groups: list[list[Message]] = []
    for i, m in enumerate(messages):
        starts = m.role == "assistant" and i > 0 and messages[i - 1].role != "assistant"
        if groups and starts and any(x.role == "assistant" for x in groups[-1]):
            groups.append([m])
        elif groups:
            groups[-1].append(m)
        else:
            groups.append([m])
    return groups


def oldest_part(messages: list[Message], gap: int | None) -> tuple[list[Message], list[Message]] | None:
    """The conversation split after its oldest rounds: enough of them to cover ``gap`` tokens, else
    20% of them; at least one round stays in the second part. None when there is only one round."""
    groups = rounds(messages)
    if len(groups) < 2:
        return None
    if gap and gap > 0:
        drop, freed = 0, 0
        while drop < len(groups) - 1 and freed < gap:
            freed += sum(m.tokens for m in groups[drop])
            drop += 1
    else:
        drop = max(1, math.floor(len(groups) * DROP_FRACTION))
    drop = min(drop, len(groups) - 1)
    return [m for g in groups[:drop] for m in g], [m for g in groups[drop:] for m in g]


# a text of one message longer than this share of the window goes to disk for the summary request
OVERSIZE_SHARE = 0.25
OVERSIZE_EDGE_CHARS = 20_000  # of it the request keeps this much of the start and of the end


def oversized_to_disk(conv: Conversation, ports: Ports, messages: list[Message]) -> list[Message] | None:
    """``messages`` with each text block over OVERSIZE_SHARE of the window (in characters, at 4 a token:
    the estimate can be far off for text the server refused) replaced by its start, its end and the path
    of a private file holding it whole; None when there is none to shrink."""
    limit = max(4 * OVERSIZE_EDGE_CHARS, int(conv.window.thresholds().window * OVERSIZE_SHARE * 4))
    out, changed = [], False
    for m in messages:
        if not isinstance(m.content, list):
            text = m.content if isinstance(m.content, str) else ""
            if len(text) <= limit:
                out.append(m)
                continue
            out.append(m.replace(content=_shrunk_text(conv, text)))
            changed = True
            continue
        blocks = []
        for block in m.content:
            text = block.get("text") if block.get("type") == "text" else None
            if isinstance(text, str) and len(text) > limit:
                blocks.append({**block, "text": _shrunk_text(conv, text)})
                changed = True
            else:
                blocks.append(block)
        out.append(m.replace(content=blocks) if blocks != m.content else m)
    return out if changed else None


def _shrunk_text(conv: Conversation, text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    path = conv.session_dir / "oversized" / f"{digest}.txt"
    if not path.exists():
        make_private_dirs(path.parent)
        write_private(path, text)
    left = len(text) - 2 * OVERSIZE_EDGE_CHARS
    return (
        f"{text[:OVERSIZE_EDGE_CHARS]}\n\n[... {left:,} characters of this message are left out of this "
        f"request, too long for the context window; the whole text is in {path} ...]\n\n"
        f"{text[-OVERSIZE_EDGE_CHARS:]}"
    )


def with_part_summary(part: str, rest: list[Message]) -> list[Message]:
    """The rest of the conversation behind the summary of its first part (a user message, so a rest
    that starts with the assistant stays valid). The rest's thinking is left out: on a model with
    preserved thinking each block is bound to everything before it, and the part it followed is now a
    summary written here, so not one of them would still be valid (compact.stages.binding); a tool loop the
    rest ends in is closed (``close_loop``)."""
    kept = binding.drop_all(rest)[0]
    return [meta(f"{PART_INTRO}\n\n{part}"), *(close_loop(kept) if binding.in_tool_loop(rest) else kept)]


def close_loop(messages: list[Message]) -> list[Message]:
    """A tool loop whose latest assistant message lost its thinking, with that step told as text: the
    calls as the assistant's text, their results as the user's (the caller knows the message held
    thinking: a model that never thinks needs no closing). The API refuses a request that continues a
    tool loop unless the assistant message it continues starts with its thinking, and thinking left out
    cannot be put back; a summary request continues nothing, so the step is told, not replayed, word
    for word (unchanged when there is no such loop)."""
    at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), None)
    if at is None or not messages[at].tool_uses or binding.holds_thinking(messages[at]):
        return messages
    if any(m.is_typed_prompt for m in messages[at + 1 :]):
        return messages
    after = [told(m) if m.tool_results else m for m in messages[at + 1 :]]
    return [*messages[:at], told(messages[at]), *after]


def summary_request(
    ports: Ports, messages: list[Message], instruction: str, max_tokens: int | None = None
) -> Any:
    """The side request: main system + tools + these messages + the instruction, tool use off."""
    # the models that write the server's summary are those whose thinking is bound to its prefix
    sent = strip_media(messages, preserved=ports.offers_compaction())
    if binding.in_tool_loop(messages):  # its latest thinking left out (no preserved thinking): told
        sent = close_loop(sent)
    api = to_api([*sent, meta(instruction)])
    req = ports.request(api, tool_choice={"type": "none"})
    req.retry = "compaction"  # the user waits for it: a shorter retry budget, each retry shown
    req.max_tokens = max_tokens or min(SUMMARY_MAX_TOKENS, max_output_tokens(req.model))
    if ports.config.compaction_model:
        req.model = ports.config.compaction_model
    return req


# --- the reply ----------------------------------------------------------------------------------------

_ANALYSIS = re.compile(r"<analysis>.*?(?:</analysis>|(?=<summary>)|\Z)", re.S)
_SUMMARY = re.compile(r"<summary>(.*?)(?:</summary>|\Z)", re.S)


def parse_summary(text: str) -> str:
    """The summary body: the <analysis> block dropped, the <summary> tags taken off."""
    without = _ANALYSIS.sub("", text)
    found = _SUMMARY.search(without)
    body = found.group(1) if found else without
    return body.strip()


EMPTY_SUMMARY = (
    "(The summary came back empty. The working state, the user's own messages and the restored files "
    "below, and the transcript, hold what happened.)"
)


def check_reply(reply: Message) -> str:
    """The summary in a reply, or CompactionError when the reply can't be one."""
    text = reply.text.strip()
    if text.startswith("API Error"):
        raise CompactionError(f"the summary request failed: {text.splitlines()[0]}")
    body = parse_summary(text)
    if body:
        return body
    if reply.stop_reason != "end_turn" or (text and not _SUMMARY.search(text)):
        raise CompactionError(
            "the model returned no summary text" if not text else "the model's reply held no summary"
        )
    # an empty answer that ended normally is a (very) poor summary, not a failure: the request saw every
    # message, and the working state, the user's words and the restored files still follow it
    return EMPTY_SUMMARY


def summarize(
    conv: Conversation,
    ports: Ports,
    messages: list[Message],
    instructions: list[str] | str | None = None,
    *,
    depth: int = 0,
) -> Compaction:
    """Ask the model for a summary of ``messages`` (the model's current view, tagged).

    Raises CompactionError when no usable summary comes back, errors.Interrupted on Ctrl-C, and lets
    other ModelErrors through (the compactor turns every failure into the same "nothing changed").
    """
    custom = [instructions] if isinstance(instructions, str) else list(instructions or [])
    instruction = build_instruction(custom)
    current = list(messages)
    max_tokens: int | None = None
    attempt = 0
    while True:
        req = summary_request(ports, current, instruction, max_tokens)
        try:
            reply = ports.model.stream(req, cancel=conv.cancel, emit_text=False)
        except MaxTokensOverflow as e:
            if max_tokens is not None:
                raise CompactionError("no room is left for the summary in the context window") from None
            max_tokens = e.smaller_max_tokens()  # the input fits, the reserved output does not
            continue
        except PromptTooLong as e:
            attempt += 1
            split = oldest_part(current, e.gap) if attempt <= PTL_RETRIES and depth < PTL_RETRIES else None
            if split is None and attempt <= PTL_RETRIES:
                # one round bigger than the window (a transcript holding one 30 MB message): its oversized
                # texts are kept on disk whole and the request carries their start and end (issue 40)
                shrunk = oversized_to_disk(conv, ports, current)
                if shrunk is not None:
                    current, max_tokens = shrunk, None
                    continue
            if split is None:
                raise CompactionError("the conversation is too long even for the summary request") from None
            head, rest = split  # summarized first, on its own: no round leaves unseen (docs/compaction.md)
            part = summarize(conv, ports, head, custom, depth=depth + 1)
            current, max_tokens = with_part_summary(part.summary, rest), None
            continue
        ports.account(reply)
        return Compaction(method="summary", summary=check_reply(reply), usage=reply.usage)
