"""Rebuilding a session from its transcript (docs/files.md), ours or Claude Code's.

    file ──(bytes search from the end)──> last compact_boundary line
         ──(json only from there on)────> records after the boundary
         + kept segment (head..tail, found by searching for their uuids before the boundary)
         ──(walk parentUuid from the newest leaf back to the boundary)──> chain
         ──(merge streamed blocks, recover parallel tool results: agent.transcript.claude_code)──> messages
         ──(drop unanswered tool_use / orphan tool_result / foreign thinking)──> live list
           (except the last response's open calls: ``pending`` error results answer them, for the
            resuming session to record, so a crash mid-call is told to the model, once)
         + our own state records replayed (compact.stages.state.replay)

Nothing before the last boundary is parsed except the kept segment's lines and the state records that
lie between the kept head and the boundary, and nothing is tokenized, so a long session resumes about as
fast as a short one. Each assistant response Claude Code streamed as several records becomes one
Message: blocks in file order, the *last* record's uuid (the one the next record points at, so a kept
segment's ``tailUuid`` and the writer's parent stay right), the first record's timestamp and extras,
the last record's usage and stop reason.
"""

from __future__ import annotations

import json
import mmap
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterator

from agent.transcript.claude_code import Rec, clean, merge, recover_siblings
from compact.context.cache_health import CACHE_MISS
from compact.stages import refused
from compact.stages.state import STATE_TYPES, ContextState, price_of, replay
from core.messages import Message, from_record, tool_result_block, tool_results
from core.transcript_writer import (
    BINDING_NEEDLE,
    BOUNDARY_NEEDLE,
    MEMORY_LOAD,
    MEMORY_LOAD_NEEDLE,
    MESSAGE_TYPES,
    SIDE_USAGE,
    SYSTEM_PROMPT,
    SYSTEM_PROMPT_NEEDLE,
    THINKING_BINDING,
    agent_id_for,
    is_boundary,
    sidechain_path,
)

REWIND = (
    "rewind"  # the user went back to an earlier point (agent.runtime.rewind): its leafUuid is the new leaf
)
# record types that carry no message: skipped without a word
QUIET_TYPES = frozenset(
    {
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "summary",
        "custom-title",
        "tag",
        "agent-name",
        "last-prompt",
        "pr-link",
        "system",
        REWIND,
        SIDE_USAGE,
        THINKING_BINDING,
        SYSTEM_PROMPT,
        MEMORY_LOAD,
        CACHE_MISS,
        *STATE_TYPES,
    }
)


@dataclass
class LoadedSession:
    """A session rebuilt from its transcript: the live list after the last boundary, plus state.

    ``pre_boundary_count`` and ``all_records_count`` are counted on first access (they need a pass over
    the whole file, which resuming itself never makes).
    """

    path: Path
    session_id: str
    messages: list[Message]
    state: ContextState
    last_uuid: str | None
    boundary: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)
    boundary_offset: int = 0  # byte offset of the boundary line (0 without one)
    size: int = 0  # file size when loaded
    readable: bool = False  # the file holds at least one record of a type a transcript has
    # tool calls the leaf response made that were never answered (the agent stopped while they ran):
    # the answers to record, so the model learns of them (``interrupted_answers``)
    pending: list[Message] = field(default_factory=list)
    # preserved thinking's escape hatch, if the session ever needed it: sent on every request from then on
    thinking_binding: str | None = None
    # the system prompt the session fixed on its first request (preserved-thinking models), sent as it was
    system_prompt: list[dict[str, Any]] | None = None
    # the memory the session loaded at its start (agent/memory): a resume serves the same text
    memory_text: str = ""

    @cached_property
    def pre_boundary_count(self) -> int:
        """Message records (user/assistant, not sidechain) before the last boundary."""
        if not self.boundary_offset:
            return 0
        with open(self.path, "rb") as f:
            data = f.read(self.boundary_offset)
        return sum(1 for line in data.split(b"\n") if _is_message_line(line))

    @cached_property
    def all_records_count(self) -> int:
        """Non-empty lines in the file as it was loaded (torn ones included)."""
        with open(self.path, "rb") as f:
            data = f.read(self.size)
        return sum(1 for line in data.split(b"\n") if line.strip())


def messages_before(path: Path, offset: int) -> list[Message]:
    """The main-conversation messages recorded before byte ``offset`` (what a compaction replaced), in
    file order; read only when a user asks to see them (/history after a resume)."""
    with open(path, "rb") as f:
        data = f.read(offset)
    out = []
    for line in data.split(b"\n"):
        if _is_message_line(line):
            m = from_record(json.loads(line))
            if m is not None:
                out.append(m)
    return out


def _is_message_line(line: bytes) -> bool:
    """A user/assistant record of the main conversation (cheap bytes test first, then JSON)."""
    if b'"type":"user"' not in line and b'"type":"assistant"' not in line:
        return False
    try:
        rec = json.loads(line)
    except ValueError:
        return False
    return isinstance(rec, dict) and rec.get("type") in MESSAGE_TYPES and not rec.get("isSidechain")


class _NeedFullParse(Exception):
    """The chain leaves the part of the file that was parsed: parse all of it."""


class _Loader:
    def __init__(self, path: Path, mm: mmap.mmap | bytes, size: int, model: str | None) -> None:
        self.path = path
        self.mm = mm
        self.size = size
        self.model = model
        self.warnings: list[str] = []
        self._unknown_types: set[str] = set()

    # -- raw access --------------------------------------------------------------------------------------
    def _line_at(self, i: int) -> tuple[int, int]:
        start = self.mm.rfind(b"\n", 0, i) + 1
        end = self.mm.find(b"\n", i)
        return start, self.size if end < 0 else end

    def _line_number(self, offset: int) -> int:
        return self.mm[:offset].count(b"\n") + 1

    def _parse_line(self, start: int, end: int) -> dict[str, Any] | None:
        try:
            rec = json.loads(self.mm[start:end])
        except (ValueError, RecursionError):
            return None
        return rec if isinstance(rec, dict) else None

    def _search_back(
        self, needle: bytes, end: int, wanted: Callable[[dict[str, Any]], bool]
    ) -> tuple[int, dict[str, Any]] | None:
        """(offset, record) of the last line before ``end`` that holds ``needle`` and is a record ``wanted``
        takes (a bytes search: the lines passed over stay unparsed)."""
        while True:
            i = self.mm.rfind(needle, 0, end)
            if i < 0:
                return None
            start, stop = self._line_at(i)
            rec = self._parse_line(start, stop)
            if rec is not None and wanted(rec):
                return start, rec
            end = start

    def _last_boundary(self, end: int) -> tuple[int, dict[str, Any]] | None:
        return self._search_back(BOUNDARY_NEEDLE, end, is_boundary)

    def _find_uuid(self, uuid: str, end: int) -> Rec | None:
        """The record whose own uuid is ``uuid``, searching backwards from ``end``."""
        found = self._search_back(f'"{uuid}"'.encode(), end, lambda rec: rec.get("uuid") == uuid)
        return Rec(*found) if found is not None else None

    def _records(self, start: int) -> Iterator[Rec]:
        pos = start
        while pos < self.size:
            end = self.mm.find(b"\n", pos)
            end = self.size if end < 0 else end
            if end > pos:
                rec = self._parse_line(pos, end)
                if rec is None:
                    self._warn_bad_line(pos, end)
                else:
                    yield Rec(pos, rec)
            pos = end + 1

    def _warn_bad_line(self, start: int, end: int) -> None:
        if not self.mm[start:end].strip():
            return
        n = self._line_number(start)
        if end >= self.size and self.mm[self.size - 1 : self.size] != b"\n":
            self.warnings.append(
                f"{self.path.name}: line {n} is incomplete (the session was interrupted "
                "while writing it); skipped"
            )
        else:
            self.warnings.append(f"{self.path.name}: line {n} is not valid JSON; skipped")

    # -- the whole load ----------------------------------------------------------------------------------
    def load(self) -> LoadedSession:
        loaded = self._load()
        binding = self._last_record(BINDING_NEEDLE, THINKING_BINDING)
        loaded.thinking_binding = str(binding.get("behavior") or "") or None if binding else None
        fixed = self._last_record(SYSTEM_PROMPT_NEEDLE, SYSTEM_PROMPT)
        blocks = fixed.get("blocks") if fixed else None
        loaded.system_prompt = blocks if isinstance(blocks, list) and blocks else None
        memory = self._last_record(MEMORY_LOAD_NEEDLE, MEMORY_LOAD)
        loaded.memory_text = str(memory.get("text") or "") if memory else ""
        return loaded

    def _load(self) -> LoadedSession:
        found = self._last_boundary(self.size)
        if found is not None:
            warnings_before = len(self.warnings)
            try:
                return self._load_from(found[0], found)
            except _NeedFullParse:
                del self.warnings[warnings_before:]
                self._unknown_types.clear()
        return self._load_from(0, None)

    def _last_record(self, needle: bytes, kind: str) -> dict[str, Any] | None:
        """The main conversation's last record of type ``kind``, wherever it lies (a bytes search: the
        setting and the fixed system prompt outlive compactions, and the rest of the file stays unparsed)."""
        found = self._search_back(
            needle, self.size, lambda rec: rec.get("type") == kind and not rec.get("isSidechain")
        )
        return found[1] if found is not None else None

    def _load_from(self, start: int, found: tuple[int, dict[str, Any]] | None) -> LoadedSession:
        partial = found is not None
        records = list(self._records(start))
        for r in records:
            self._note_type(r.data)
        main = [r for r in records if not r.data.get("isSidechain")]
        messages = [r for r in main if r.is_message]
        session_id = next((r.data["sessionId"] for r in records if r.data.get("sessionId")), self.path.stem)
        if not messages:
            return self._no_messages(session_id, records, partial)
        leaf = messages[-1]
        target = self._rewind_target(main, leaf)
        if target == "":  # rewound to before the first message: nothing is live
            return self._nothing_live(session_id, True)
        index = {r.uuid: r for r in main if r.uuid and "parentUuid" in r.data}
        if target and not partial and target in index:
            leaf = index[target]  # before picking the boundary, which is the last one before the leaf
        if found is None:  # full parse: the boundary that matters is the last one before the leaf
            bounds = [r for r in main if is_boundary(r.data) and r.offset < leaf.offset]
            found = (bounds[-1].offset, bounds[-1].data) if bounds else None
        boundary_offset, boundary = found if found else (0, None)

        kept = self._kept_segment(boundary, boundary_offset, index)  # (adds the kept records to index)
        if target and target in index:
            leaf = index[target]
        elif target and partial:
            raise _NeedFullParse
        elif target:
            self.warnings.append(f"{self.path.name}: a rewind points at {target}, which is missing; ignored")
        rewound_at = _rewound_to_summary(main, boundary, boundary_offset)
        chain = self._walk(leaf, index, boundary, kept, partial, rewound_at)
        live, pending = self._live(chain, main, kept)

        state_from = self._kept_start(kept, boundary_offset)
        before, after = self._state_records(records, state_from, boundary_offset)
        live = refused.apply([r.data for r in before + after], live)  # a refusal never outlives its request
        state = self._replay_state(before, after, live)
        return LoadedSession(
            self.path,
            session_id,
            live,
            state,
            leaf.uuid,
            boundary,
            self.warnings,
            boundary_offset=boundary_offset,
            size=self.size,
            readable=True,
            pending=pending,
        )

    def _no_messages(self, session_id: str, records: list[Rec], partial: bool) -> LoadedSession:
        if partial:
            raise _NeedFullParse  # a boundary with nothing after it: an interrupted compaction
        if any(r.data.get("isSidechain") for r in records):
            self.warnings.append(
                f"{self.path.name} holds only sub-agent (sidechain) records; "
                "there is no main conversation to resume"
            )
        return self._nothing_live(session_id, any(r.is_message or r.type in QUIET_TYPES for r in records))

    def _nothing_live(self, session_id: str, readable: bool) -> LoadedSession:
        return LoadedSession(
            self.path,
            session_id,
            [],
            ContextState(),
            None,
            None,
            self.warnings,
            size=self.size,
            readable=readable,
        )

    def _live(
        self, chain: list[Rec], main: list[Rec], kept: list[Rec]
    ) -> tuple[list[Message], list[Message]]:
        """The messages a resumed session sends, and the answers an interrupted turn left pending."""
        kept_uuids = {r.uuid for r in kept}
        groups = recover_siblings(chain, main)
        merged = [m for m in map(merge, groups) if m is not None]
        pending = interrupted_answers(merged, self.path)
        live = clean([*merged, *pending], self.model)
        if pending and live and live[-1].uuid == pending[0].uuid:
            live.pop()  # recorded by the session that resumes, so a second resume sends the same
        else:
            pending = []
        live = [m.replace(usage=None) if m.uuid in kept_uuids and m.usage is not None else m for m in live]
        return live, pending

    def _rewind_target(self, main: list[Rec], leaf: Rec) -> str | None:
        """The leafUuid of a rewind written after the newest message ("" when it went back to before
        the first message); None without one."""
        last = next((r for r in reversed(main) if r.type == REWIND), None)
        if last is None or last.offset < leaf.offset:
            return None
        return str(last.data.get("leafUuid") or "")

    def _note_type(self, rec: dict[str, Any]) -> None:
        kind = rec.get("type")
        if kind in MESSAGE_TYPES or kind in QUIET_TYPES:
            return
        name = str(kind)
        if name not in self._unknown_types:
            self._unknown_types.add(name)
            self.warnings.append(f"{self.path.name}: unknown record type {name!r}; skipped")

    # -- the chain ---------------------------------------------------------------------------------------
    def _kept_segment(
        self, boundary: dict[str, Any] | None, boundary_offset: int, index: dict[str, Rec]
    ) -> list[Rec]:
        """The records head..tail the boundary kept verbatim (chain order), found by uuid."""
        seg = ((boundary or {}).get("compactMetadata") or {}).get("preservedSegment")
        if not isinstance(seg, dict) or not seg.get("headUuid") or not seg.get("tailUuid"):
            return []
        head, tail = seg["headUuid"], seg["tailUuid"]
        out: list[Rec] = []
        uuid: str | None = tail
        end = boundary_offset
        seen: set[str] = set()
        while uuid and uuid not in seen:
            seen.add(uuid)
            rec = index.get(uuid) or self._find_uuid(uuid, end)
            if rec is None:
                self.warnings.append(
                    f"{self.path.name}: the kept segment of the last compaction is incomplete "
                    f"(record {uuid} not found); resuming without the missing part"
                )
                break
            if rec.offset < boundary_offset:
                end = rec.offset  # a parent is always written before its child
            if is_boundary(rec.data):
                self.warnings.append(
                    f"{self.path.name}: the kept segment of the last compaction crosses an "
                    "earlier boundary; kept only the part after it"
                )
                break
            out.append(rec)
            index.setdefault(uuid, rec)
            if uuid == head:
                break
            uuid = self._live_parent(rec, end, index)
        out.reverse()
        return out

    def _live_parent(self, rec: Rec, end: int, index: dict[str, Rec]) -> str | None:
        """The message before ``rec`` in the live list of its time.

        That is its ``parentUuid``, except for a message written right after an earlier compaction that
        kept a segment: it hangs off that compaction's summary (the anchor) in the file but followed the
        kept tail in the conversation. A later kept segment reaching back into the earlier one needs
        the conversation's order, so the earlier boundary's relink is applied here too.
        """
        parent = rec.data.get("parentUuid")
        anchor = (index.get(parent) or self._find_uuid(parent, end)) if parent else None
        if anchor is None or not anchor.data.get("isCompactSummary"):
            return parent
        found = self._find_uuid(anchor.data.get("parentUuid") or "", anchor.offset)
        if found is None or not is_boundary(found.data):
            return parent
        seg = (found.data.get("compactMetadata") or {}).get("preservedSegment") or {}
        if seg.get("anchorUuid") == parent and seg.get("tailUuid") and rec.uuid != seg.get("headUuid"):
            return seg["tailUuid"]
        return parent

    def _kept_start(self, kept: list[Rec], boundary_offset: int) -> int:
        """Where the kept messages were first written: state records about them lie after that."""
        if not kept:
            return boundary_offset
        if kept[0].offset < boundary_offset:
            return kept[0].offset
        first = self._find_uuid(kept[0].uuid, boundary_offset)  # written again after the boundary
        return first.offset if first else boundary_offset

    def _walk(
        self,
        leaf: Rec,
        index: dict[str, Rec],
        boundary: dict[str, Any] | None,
        kept: list[Rec],
        partial: bool,
        rewound_at: int | None = None,
    ) -> list[Rec]:
        """Message records from the boundary (exclusive) to the leaf, kept segment re-linked.

        ``rewound_at``: where a rewind went back to the summary itself, before the kept segment (a
        rewind to its first prompt): what was written after it follows the summary, not the segment."""
        relink = _relinks(kept, boundary, index, rewound_at)
        head = kept[0].uuid if kept else None
        anchor = _preserved(boundary).get("anchorUuid") if kept else None
        chain: list[Rec] = []
        seen: set[str] = set()
        cur: Rec | None = leaf
        while cur is not None and not is_boundary(cur.data):
            if cur.uuid in seen:
                self.warnings.append(
                    f"{self.path.name}: the parentUuid links loop at {cur.uuid}; stopped there"
                )
                break
            seen.add(cur.uuid)
            chain.append(cur)
            parent = relink.get(cur.uuid) or cur.data.get("parentUuid")
            if parent is None:
                break
            cur = index.get(parent)
            if cur is None:
                if partial:
                    raise _NeedFullParse
                self.warnings.append(
                    f"{self.path.name}: the record before {chain[-1].uuid} ({parent}) is "
                    "missing; the history starts after it"
                )
        chain.reverse()
        if kept and anchor in seen and head not in seen and rewound_at is None:  # nothing after the tail yet
            at = next(i for i, r in enumerate(chain) if r.uuid == anchor) + 1
            chain[at:at] = kept
        return [r for r in chain if r.is_message]

    # -- our own records ---------------------------------------------------------------------------------
    def _state_records(
        self, records: list[Rec], state_from: int, boundary_offset: int
    ) -> tuple[list[Rec], list[Rec]]:
        """Our state records about the live messages: those between the kept head and the boundary, and
        those after the boundary."""
        before = self._state_lines(state_from, boundary_offset)
        after = [r for r in records if r.type in STATE_TYPES and r.offset >= boundary_offset]
        return before, after

    def _replay_state(self, before: list[Rec], after: list[Rec], live: list[Message]) -> ContextState:
        # a compaction resets the collapses, so only commits after the boundary count
        return replay(
            [r.data for r in before + after],
            live,
            collapses_from=len(before),
            last_summarized=self._last_summarized(),
            server_price=self._server_price(),
        )

    def _state_lines(self, start: int, end: int) -> list[Rec]:
        """State records between ``start`` and ``end`` (before the boundary), picked out by a bytes test."""
        if start >= end:
            return []
        needles = [f'"type":"{t}"'.encode() for t in STATE_TYPES if t != "collapse-commit"]
        out = []
        pos = start
        for line in self.mm[start:end].split(b"\n"):
            if any(n in line for n in needles):
                rec = self._parse_line(pos, pos + len(line))
                if rec is not None and rec.get("type") in STATE_TYPES:
                    out.append(Rec(pos, rec))
            pos += len(line) + 1
        return out

    def _server_price(self) -> dict[str, float] | None:
        """The newest server-price record anywhere in the file (an earlier cycle's server summary priced
        the compactions after it, whatever compacted last)."""
        end = self.size
        needle = b'"server-price"'
        while (i := self.mm.rfind(needle, 0, end)) >= 0:
            start, stop = self._line_at(i)
            price = price_of(self._parse_line(start, stop))
            if price is not None:
                return price
            end = start
        return None

    def _last_summarized(self) -> str | None:
        end = self.size
        # the type's value alone (its record is checked below): a reverse search for a needle that starts
        # with '"type":"' stops at every record's type and took ~15x as long over a 30 MB file
        needle = b'"session-memory"'
        while (i := self.mm.rfind(needle, 0, end)) >= 0:
            start, stop = self._line_at(i)
            rec = self._parse_line(start, stop)
            if rec is not None and rec.get("type") == "session-memory":
                return rec.get("lastSummarizedUuid")
            end = start
        return None


INTERRUPTED_BY_STOP = (
    "Interrupted: the agent stopped (it was closed or crashed) while this tool call was "
    "running, so it has no result. It may have partly run: check what it changed before "
    "relying on it or running it again."
)


def interrupted_answers(messages: list[Message], transcript: Path | None = None) -> list[Message]:
    """Error results for the tool calls of the last response that nothing after it answers.

    A Task call's answer names its subagent's transcript (beside ``transcript``) when there is one.

    Only user messages may follow that response (an answer to some of its calls, a prompt): an
    appended user message is merged with them into the one message the API wants after the calls.
    """
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), None)
    if last is None or not messages[last].tool_uses:
        return []
    answered = {b.get("tool_use_id") for m in messages[last + 1 :] for b in m.tool_results}
    missing = [u["id"] for u in messages[last].tool_uses if u.get("id") not in answered]
    if not missing:
        return []
    names = {u.get("id"): u.get("name") for u in messages[last].tool_uses}
    return [
        tool_results([tool_result_block(i, _stopped(i, names.get(i), transcript), True) for i in missing])
    ]


def _stopped(tool_use_id: str, name: Any, transcript: Path | None) -> str:
    if name != "Task" or transcript is None:
        return INTERRUPTED_BY_STOP
    side = sidechain_path(transcript, agent_id_for(tool_use_id))
    if not side.is_file():
        return INTERRUPTED_BY_STOP
    return (
        f"Interrupted: the agent stopped (it was closed or crashed) while this subagent was running, so it "
        f"has no result. What it did so far is in its transcript, {side} (JSONL, one record per line): "
        "read it for the findings, or run the task again."
    )


def load_transcript(path: Path, *, model: str | None = None) -> LoadedSession:
    """Rebuild the live session from a transcript (ours or Claude Code's); see the module docstring.

    ``model`` is the model the resumed session will use: thinking blocks another model produced are
    dropped (their signatures only verify for the producer). Raises OSError if the file can't be read.
    """
    path = Path(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return LoadedSession(path, path.stem, [], ContextState(), None, None, [])
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return _Loader(path, mm, size, model).load()
    finally:
        mm.close()


def _preserved(boundary: dict[str, Any] | None) -> dict[str, Any]:
    """A boundary's ``preservedSegment`` ({} without one)."""
    return ((boundary or {}).get("compactMetadata") or {}).get("preservedSegment") or {}


def _rewound_to_summary(main: list[Rec], boundary: dict[str, Any] | None, boundary_offset: int) -> int | None:
    """Where a rewind after the boundary went back to the summary itself (to the kept segment's anchor)."""
    anchor = _preserved(boundary).get("anchorUuid")
    if not anchor:
        return None
    return min(
        (
            r.offset
            for r in main
            if r.type == REWIND and r.offset > boundary_offset and r.data.get("leafUuid") == anchor
        ),
        default=None,
    )


def _relinks(
    kept: list[Rec], boundary: dict[str, Any] | None, index: dict[str, Rec], rewound_at: int | None
) -> dict[str, str]:
    """uuid -> the parent it follows once the kept segment is put back after the summary: inside the
    segment, the order _kept_segment found (it may differ from the file's links); its head after the
    anchor; what followed the anchor (not after a rewind to the summary) after its tail."""
    if not kept:
        return {}
    relink = {later.uuid: earlier.uuid for earlier, later in zip(kept, kept[1:])}
    anchor = _preserved(boundary).get("anchorUuid")
    if anchor:
        relink[kept[0].uuid] = anchor
        kept_set = {r.uuid for r in kept}
        for r in index.values():
            after_rewind = rewound_at is not None and r.offset > rewound_at
            if r.data.get("parentUuid") == anchor and r.uuid not in kept_set and not after_rewind:
                relink[r.uuid] = kept[-1].uuid
    return relink
