"""Working state put back after a compaction, read from disk, not from the summary (docs/compaction.md).

Triggers: every compaction that succeeds (compact.compaction.compactor.finish), on every path.
Adds: files the session edited repeatedly (a plan, a TODO list: at least 3 edits) first, then the most
recently read or written files (at most 5 in all, most recent first, each cut to 5,000 tokens,
50,000 together), re-read from disk now with numbered lines as the Read tool shows them, one meta
message each; then the plan (``<session dir>/plan.md``) if there is one.
Skips: files still visible in the kept messages (a Read of that path; such a file takes one of the five
slots, so a kept tail and the restored files together show at most five), instruction files (CLAUDE.md),
the agent's own files under the session directory, deleted, binary and image files.
Budgets: scaled by min(1, T / 167,000) so a small window still ends well under the threshold, and never
more than the room the compactor offers.
Afterwards the "files read" state holds only what the model can now see (restored files and those
visible in kept messages), so editing any other file requires reading it again.
Until the next compaction, a Read of a restored file that is unchanged on disk and asks for exactly the
lines shown is answered with a short "unchanged since it was restored" result (``unchanged_since_restore``).
Writes to disk: no. Model calls: none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compact.compaction import ledger
from compact.context.conversation import Conversation, Ports
from compact.decision.thresholds import window_scale
from core.declaration import declaration_of
from core.messages import Message, meta
from core.tokens import estimate_text
from tools.read import DEFAULT_LIMIT, IMAGE_TYPES, number_lines

MAX_FILES = 5
FILE_TOKENS = 5_000
TOTAL_TOKENS = 50_000
MAX_LINE_CHARS = 2_000
SNIFF_BYTES = 8_192
REPEATED_EDITS = (
    ledger.REPEATED_EDITS
)  # a file edited this often is the session's working document: restored first
MAX_FIRST = 2  # of the five slots, at most this many go to such files
FIRST_FLOOR = 200  # tokens such a file gets even when the room the compactor offers is smaller


@dataclass
class Restored:
    messages: list[Message] = field(default_factory=list)
    files: dict[str, float] = field(default_factory=dict)  # path -> mtime of each restored file
    # path -> (mtime, size, lines shown, lines in the file): what a Read may be answered from
    copies: dict[str, tuple[float, int, int, int]] = field(default_factory=dict)
    tokens: int = 0


def _paths_in(messages: list[Message], conv: Conversation, *, reads: bool = False) -> list[str]:
    """Resolved paths of the calls of tools whose files may be restored (core.declaration), most recent
    first, each once; ``reads``: only the calls that read a file (its text is in view)."""
    out: list[str] = []
    for m in reversed(messages):
        for b in reversed(m.tool_uses):
            d = declaration_of(str(b.get("name")))
            if d is None or not d.restorable or d.path_arg is None or (reads and d.records != "read"):
                continue
            path = (b.get("input") or {}).get(d.path_arg)
            if isinstance(path, str) and path:
                resolved = str(conv.tools.resolve(path).resolve())
                if resolved not in out:
                    out.append(resolved)
    return out


def recent_files(conv: Conversation, history: list[Message]) -> list[str]:
    """Files the model has seen, most recently read or written first.

    The order comes from the Read/Write/Edit calls in ``history`` (a resumed session starts with an
    empty read state, but its history still shows what was read); files known only from the read state
    (restored by an earlier compaction) follow, latest recorded first.
    """
    ordered = _paths_in(history, conv)
    ordered += [p for p in reversed(list(conv.tools.read_files)) if p not in ordered]
    first = [p for p in edited_repeatedly(conv, history) if p in ordered or Path(p).is_file()]
    return first + [p for p in ordered if p not in first]


def edited_repeatedly(conv: Conversation, history: list[Message]) -> list[str]:
    """Files the session keeps editing (a plan, a TODO list, a notes file): at least REPEATED_EDITS
    edits over the whole session (the ledger carries the counts across compactions), most recently
    changed first. They are restored before the merely recent ones."""
    state = ledger.derive(history, str(conv.tools.project_dir))
    repeated = [(c.last, p) for p, c in state.modified.items() if c.edits >= REPEATED_EDITS]
    return [str(conv.tools.resolve(p).resolve()) for _, p in sorted(repeated, reverse=True)][:MAX_FIRST]


def _excluded(conv: Conversation, ports: Ports) -> tuple[set[str], Path]:
    instructions = {str(p.resolve()) for p in ports.instruction_files()}
    return instructions, conv.session_dir.resolve()


def _numbered(path: Path, budget: int) -> tuple[str, int, int, int] | None:
    """The file as numbered lines, cut to ``budget`` tokens; None if it can't be shown as text."""
    try:
        with path.open("rb") as f:
            if b"\0" in f.read(SNIFF_BYTES):
                return None
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    lines = text.splitlines()
    shown: list[str] = []
    used = 0
    for line in lines:
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + "... [line cut]"
        cost = estimate_text(line) + 3  # number, tab and newline
        if used + cost > budget:
            break
        shown.append(line)
        used += cost
    if not lines:
        return "(the file is empty)", 5, 0, 0
    if not shown:
        return None
    body = number_lines(shown, 1)
    if len(shown) < len(lines):
        body += (
            f"\n\n(Only lines 1-{len(shown)} of {len(lines)} are shown here. Read the file with "
            f"offset={len(shown) + 1} for the rest.)"
        )
    return body, used, len(shown), len(lines)


def _file_message(path: str, body: str) -> Message:
    return meta(
        f"Before the conversation was compacted you had read {path}. Here is its current content, "
        f"read from disk again just now (numbered lines, as the Read tool shows them):\n\n{body}"
    )


def _plan_message(path: Path, budget: int) -> tuple[Message, int] | None:
    shown = _numbered(path, budget) if path.is_file() else None
    if shown is None:
        return None
    body, used = shown[0], shown[1]
    return meta(
        f"A plan was being followed before the compaction. It is kept at {path}; its current "
        f"content:\n\n{body}"
    ), used


def worth_restoring(conv: Conversation, history: list[Message]) -> set[str]:
    """The files a restore pays for (cost-aware compaction, compact.compaction.economics): those the session wrote or
    edited, which the work is likely to touch again. A copy costs a cache write of the file whether or
    not it is used, the same as reading it again when it is needed; a file only read once is named in
    the working state and read again if the work comes back to it."""
    state = ledger.derive(history, str(conv.tools.project_dir))
    return {str(conv.tools.resolve(p).resolve()) for p in state.modified}


def plan_restore(
    conv: Conversation,
    ports: Ports,
    kept: list[Message],
    history: list[Message],
    *,
    room: int | None = None,
    tail: list[Message] | None = None,
) -> Restored:
    """What to restore after a compaction (no side effects). ``tail``: with cost-aware compaction, the
    whole kept tail (its cleared reads included): a file it read is not restored — its Read call stays
    in view and can be run again — and only files that pay (``worth_restoring``) are."""
    scale = window_scale(conv.window.thresholds().auto_compact)
    per_file = int(FILE_TOKENS * scale)
    total = int(TOTAL_TOKENS * scale)
    if room is not None:
        total = min(total, max(0, room))
    visible = set(_paths_in(kept, conv, reads=True))
    in_tail = set(_paths_in(tail, conv, reads=True)) if tail is not None else set()
    paying = worth_restoring(conv, history) if tail is not None else None
    instructions, own_dir = _excluded(conv, ports)
    out = Restored()
    shown_in_kept = 0  # recent files the kept messages show take their slots among the five
    first = set(edited_repeatedly(conv, history))
    for name in recent_files(conv, history):
        if len(out.files) + shown_in_kept >= MAX_FILES:
            break
        if name in visible or name in in_tail:
            shown_in_kept += 1
            continue
        if paying is not None and name not in paying and name not in first:
            continue
        path = Path(name)
        if (
            name in instructions
            or path.name == "CLAUDE.md"
            or path.is_relative_to(own_dir)
            or path.suffix.lower() in IMAGE_TYPES
            or not path.is_file()
        ):
            continue
        room_left = min(per_file, total - out.tokens)
        if name in first:  # the session's working document comes back even when the room is short
            room_left = max(room_left, min(per_file, FIRST_FLOOR))
        if room_left < per_file // 4:
            break  # what would fit is too small a piece to be worth showing
        shown = _numbered(path, room_left)
        if shown is None:
            continue
        body, used, lines_shown, lines_total = shown
        out.messages.append(_file_message(name, body))
        stat = path.stat()
        out.files[name] = stat.st_mtime
        out.copies[name] = (stat.st_mtime, stat.st_size, lines_shown, lines_total)
        out.tokens += used
    plan = _plan_message(conv.session_dir / "plan.md", max(0, min(per_file, total - out.tokens)))
    if plan is not None:
        out.messages.append(plan[0])
        out.tokens += plan[1]
    return out


def apply_read_state(conv: Conversation, restored: Restored, kept: list[Message]) -> None:
    """Only what the model can see now counts as read: restored files and those visible in kept messages."""
    visible = set(_paths_in(kept, conv, reads=True))
    state = conv.tools.read_files
    still = {p: t for p, t in state.items() if p in visible}
    state.clear()
    state.update(still)
    state.update(restored.files)
    conv.restored = dict(restored.copies)


UNCHANGED = (
    "The file {path} is unchanged since it was restored after the compaction: its content (lines "
    "{first}-{last}) is shown above, in the message that restored it. Use that copy instead of reading "
    "it again."
)


def unchanged_since_restore(conv: Conversation, args: dict[str, Any]) -> str | None:
    """The short answer to a Read of a restored copy still in the context, when the file has not changed
    since and the Read asks for exactly the lines shown; None when the Read must run."""
    path = args.get("file_path")
    if not isinstance(path, str) or not conv.restored:
        return None
    try:
        resolved = Path(path).resolve()
        copy = conv.restored.get(str(resolved))
        if copy is None:
            return None
        stat = resolved.stat()
    except OSError:
        return None
    mtime, size, shown, total = copy
    offset, limit = int(args.get("offset") or 1), int(args.get("limit") or DEFAULT_LIMIT)
    whole = shown == total and limit >= total
    if (
        stat.st_mtime != mtime
        or stat.st_size != size
        or offset != 1
        or not (whole or limit == shown)
        or not shown
    ):
        return None
    return UNCHANGED.format(path=path, first=1, last=shown)
