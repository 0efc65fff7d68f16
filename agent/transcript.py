"""Session transcripts on disk: the append-only JSONL writer and the loader that rebuilds a session.

The file is Claude Code's format (CONTRACT §7), so its viewers read our sessions and we resume theirs.

Writing (``TranscriptWriter``): every record is one whole line, written with a single ``os.write`` on an
``O_APPEND`` descriptor, so a crash leaves at most a torn last line; nothing written is ever rewritten.
The file and any directory the writer creates are private (0600 / 0700). A line holding the API key is
refused, never written.

Loading (``load_transcript``), SPEC §12::

    file ──(bytes search from the end)──> last compact_boundary line
         ──(json only from there on)────> records after the boundary
         + kept segment (head..tail, found by searching for their uuids before the boundary)
         ──(walk parentUuid from the newest leaf back to the boundary)──> chain
         ──(merge streamed blocks, recover parallel tool results)──────> messages
         ──(drop unanswered tool_use / orphan tool_result / foreign thinking)──> live list
         + our own records (content-replacement, snip, microcompact, ...) replayed into ContextState

Nothing before the last boundary is parsed except the kept segment's lines and the state records that
lie between the kept head and the boundary, and nothing is tokenized, so a long session resumes about as
fast as a short one. Each assistant response Claude Code streamed as several records (one per content
block, sharing ``message.id``) becomes one Message: blocks in file order, the *last* record's uuid (the
one the next record points at, so a kept segment's ``tailUuid`` and the writer's parent stay right),
the first record's timestamp and extras, the last record's usage and stop reason.
"""

from __future__ import annotations

import json
import mmap
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

from compact.state import ContextState
from core.messages import Message, from_record, new_uuid, now_iso, to_record
from core.private import open_private, redact, secrets_of

STATE_TYPES = ("content-replacement", "snip", "microcompact", "session-memory", "collapse-commit",
               "context-edit")
# record types that carry no message: skipped without a word
QUIET_TYPES = frozenset({"progress", "file-history-snapshot", "queue-operation", "summary", "custom-title",
                         "tag", "agent-name", "last-prompt", "pr-link", "system", *STATE_TYPES})
MESSAGE_TYPES = ("user", "assistant")
THINKING_TYPES = ("thinking", "redacted_thinking")
BOUNDARY_NEEDLE = b'"compact_boundary"'


# --- writing ----------------------------------------------------------------------------------------------


def _dumps(rec: dict[str, Any]) -> str:
    try:
        line = json.dumps(rec, ensure_ascii=False, separators=(",", ":"))
        line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from undecodable tool output: escape it instead
        line = json.dumps(rec, ensure_ascii=True, separators=(",", ":"))
    return line + "\n"


def _ends_torn(path: Path) -> bool:
    with open(path, "rb") as f:
        if f.seek(0, os.SEEK_END) == 0:
            return False
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


class TranscriptWriter:
    """Appends records to one session's transcript; tracks the parentUuid chain of message records.

    The file is created on the first append (a session that never says anything leaves no file, so
    ``--continue`` never lands on an empty one). ``sync`` fsyncs every append; boundaries are fsynced
    unless ``sync_boundaries`` is off. ``secret`` (the API key, or several credentials as a tuple) never appears in a written line: it is
    replaced by a marker, so a prompt or output that holds it is recorded without it and nothing is lost.
    """

    def __init__(self, path: Path, session_id: str, cwd: str, version: str, *, last_uuid: str | None = None,
                 secret: str | tuple[str | None, ...] | None = None, sync: bool = False, sync_boundaries: bool = True) -> None:
        self.path = Path(path)
        self.session_id = session_id
        self.cwd = cwd
        self.version = version
        self.last_uuid = last_uuid  # the parent of the next message record
        self.sync = sync
        self.sync_boundaries = sync_boundaries
        self._secrets = secrets_of(*(secret if isinstance(secret, tuple) else (secret,)))
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            fd = open_private(self.path, os.O_WRONLY | os.O_APPEND)
            if _ends_torn(self.path):  # end a line torn by a crash, so our first record stays whole
                os.write(fd, b"\n")
            self._fd = fd
        return self._fd

    def _write(self, rec: dict[str, Any], *, sync: bool) -> None:
        line = redact(_dumps(rec), self._secrets)
        view = memoryview(line.encode("utf-8"))
        fd = self._open()
        while view:  # a regular file takes the whole line at once; loop only in case it does not
            view = view[os.write(fd, view):]
        if sync or self.sync:
            os.fsync(fd)

    def append_message(self, m: Message) -> dict[str, Any]:
        rec = to_record(m, parent_uuid=self.last_uuid, session_id=self.session_id, cwd=self.cwd,
                        version=self.version)
        self._write(rec, sync=False)
        self.last_uuid = m.uuid
        return rec

    def append_record(self, rec: dict[str, Any]) -> dict[str, Any]:
        """One of our non-message records (compact.state lists them); not part of the parent chain."""
        out = {"type": rec.get("type"), **rec}
        out.setdefault("uuid", new_uuid())
        out.setdefault("timestamp", now_iso())
        out.setdefault("sessionId", self.session_id)
        self._write(out, sync=False)
        return out

    def append_boundary(self, trigger: str, pre_tokens: int, logical_parent_uuid: str | None,
                        preserved_segment: dict[str, str] | None = None) -> dict[str, Any]:
        """The compact_boundary record; it becomes the parent of the next message (the summary)."""
        meta: dict[str, Any] = {"trigger": trigger, "preTokens": int(pre_tokens)}
        if preserved_segment:
            meta["preservedSegment"] = {k: preserved_segment[k] for k in ("headUuid", "anchorUuid", "tailUuid")}
        rec = {"parentUuid": None, "logicalParentUuid": logical_parent_uuid, "isSidechain": False,
               "userType": "external", "cwd": self.cwd, "sessionId": self.session_id, "version": self.version,
               "type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
               "isMeta": False, "level": "info", "compactMetadata": meta, "uuid": new_uuid(),
               "timestamp": now_iso()}
        self._write(rec, sync=self.sync_boundaries)
        self.last_uuid = rec["uuid"]
        return rec

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> TranscriptWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- loading ----------------------------------------------------------------------------------------------


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


@dataclass
class _Rec:
    offset: int  # byte offset of the line
    data: dict[str, Any]

    @property
    def uuid(self) -> str:
        return self.data.get("uuid") or ""

    @property
    def type(self) -> str | None:
        return self.data.get("type")

    @property
    def is_message(self) -> bool:
        return self.data.get("type") in MESSAGE_TYPES and isinstance(self.data.get("message"), dict)

    @property
    def message_id(self) -> str | None:
        return self.data["message"].get("id") if self.type == "assistant" and self.is_message else None


def _is_boundary(rec: dict[str, Any]) -> bool:
    return rec.get("type") == "system" and rec.get("subtype") == "compact_boundary" and not rec.get("isSidechain")


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
        except ValueError:
            return None
        return rec if isinstance(rec, dict) else None

    def _last_boundary(self, end: int) -> tuple[int, dict[str, Any]] | None:
        while True:
            i = self.mm.rfind(BOUNDARY_NEEDLE, 0, end)
            if i < 0:
                return None
            start, stop = self._line_at(i)
            rec = self._parse_line(start, stop)
            if rec is not None and _is_boundary(rec):
                return start, rec
            end = start

    def _find_uuid(self, uuid: str, end: int) -> _Rec | None:
        """The record whose own uuid is ``uuid``, searching backwards from ``end``."""
        needle = f'"{uuid}"'.encode()
        while True:
            i = self.mm.rfind(needle, 0, end)
            if i < 0:
                return None
            start, stop = self._line_at(i)
            rec = self._parse_line(start, stop)
            if rec is not None and rec.get("uuid") == uuid:
                return _Rec(start, rec)
            end = start

    def _records(self, start: int) -> Iterator[_Rec]:
        pos = start
        while pos < self.size:
            end = self.mm.find(b"\n", pos)
            end = self.size if end < 0 else end
            if end > pos:
                rec = self._parse_line(pos, end)
                if rec is None:
                    self._warn_bad_line(pos, end)
                else:
                    yield _Rec(pos, rec)
            pos = end + 1

    def _warn_bad_line(self, start: int, end: int) -> None:
        if not self.mm[start:end].strip():
            return
        n = self._line_number(start)
        if end >= self.size and self.mm[self.size - 1:self.size] != b"\n":
            self.warnings.append(f"{self.path.name}: line {n} is incomplete (the session was interrupted "
                                 "while writing it); skipped")
        else:
            self.warnings.append(f"{self.path.name}: line {n} is not valid JSON; skipped")

    # -- the whole load ----------------------------------------------------------------------------------
    def load(self) -> LoadedSession:
        found = self._last_boundary(self.size)
        if found is not None:
            warnings_before = len(self.warnings)
            try:
                return self._load_from(found[0], found)
            except _NeedFullParse:
                del self.warnings[warnings_before:]
                self._unknown_types.clear()
        return self._load_from(0, None)

    def _load_from(self, start: int, found: tuple[int, dict[str, Any]] | None) -> LoadedSession:
        partial = found is not None
        records = list(self._records(start))
        for r in records:
            self._note_type(r.data)
        main = [r for r in records if not r.data.get("isSidechain")]
        messages = [r for r in main if r.is_message]
        session_id = next((r.data["sessionId"] for r in records if r.data.get("sessionId")), self.path.stem)
        if not messages:
            if partial:
                raise _NeedFullParse  # a boundary with nothing after it: an interrupted compaction
            if any(r.data.get("isSidechain") for r in records):
                self.warnings.append(f"{self.path.name} holds only sub-agent (sidechain) records; "
                                     "there is no main conversation to resume")
            return LoadedSession(self.path, session_id, [], ContextState(), None, None, self.warnings,
                                 size=self.size)
        leaf = messages[-1]
        if found is None:  # full parse: the boundary that matters is the last one before the leaf
            bounds = [r for r in main if _is_boundary(r.data) and r.offset < leaf.offset]
            found = (bounds[-1].offset, bounds[-1].data) if bounds else None
        boundary_offset, boundary = found if found else (0, None)

        index: dict[str, _Rec] = {}
        for r in main:
            if r.uuid and "parentUuid" in r.data:
                index[r.uuid] = r
        kept = self._kept_segment(boundary, boundary_offset, index)
        chain = self._walk(leaf, index, boundary, kept, partial)
        kept_uuids = {r.uuid for r in kept}
        groups = self._recover_siblings(chain, main)
        live = _clean([_merge(g) for g in groups], self.model)
        live = [m.replace(usage=None) if m.uuid in kept_uuids and m.usage is not None else m for m in live]

        state_from = self._kept_start(kept, boundary_offset)
        state = self._replay_state(records, state_from, boundary_offset, live)
        return LoadedSession(self.path, session_id, live, state, leaf.uuid, boundary, self.warnings,
                             boundary_offset=boundary_offset, size=self.size)

    def _note_type(self, rec: dict[str, Any]) -> None:
        kind = rec.get("type")
        if kind in MESSAGE_TYPES or kind in QUIET_TYPES:
            return
        name = str(kind)
        if name not in self._unknown_types:
            self._unknown_types.add(name)
            self.warnings.append(f"{self.path.name}: unknown record type {name!r}; skipped")

    # -- the chain ---------------------------------------------------------------------------------------
    def _kept_segment(self, boundary: dict[str, Any] | None, boundary_offset: int,
                      index: dict[str, _Rec]) -> list[_Rec]:
        """The records head..tail the boundary kept verbatim (chain order), found by uuid."""
        seg = ((boundary or {}).get("compactMetadata") or {}).get("preservedSegment")
        if not isinstance(seg, dict) or not seg.get("headUuid") or not seg.get("tailUuid"):
            return []
        head, tail = seg["headUuid"], seg["tailUuid"]
        out: list[_Rec] = []
        uuid: str | None = tail
        end = boundary_offset
        seen: set[str] = set()
        while uuid and uuid not in seen:
            seen.add(uuid)
            rec = index.get(uuid) or self._find_uuid(uuid, end)
            if rec is None:
                self.warnings.append(f"{self.path.name}: the kept segment of the last compaction is incomplete "
                                     f"(record {uuid} not found); resuming without the missing part")
                break
            if rec.offset < boundary_offset:
                end = rec.offset  # a parent is always written before its child
            if _is_boundary(rec.data):
                self.warnings.append(f"{self.path.name}: the kept segment of the last compaction crosses an "
                                     "earlier boundary; kept only the part after it")
                break
            out.append(rec)
            index.setdefault(uuid, rec)
            if uuid == head:
                break
            uuid = self._live_parent(rec, end, index)
        out.reverse()
        return out

    def _live_parent(self, rec: _Rec, end: int, index: dict[str, _Rec]) -> str | None:
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
        if found is None or not _is_boundary(found.data):
            return parent
        seg = (found.data.get("compactMetadata") or {}).get("preservedSegment") or {}
        if seg.get("anchorUuid") == parent and seg.get("tailUuid") and rec.uuid != seg.get("headUuid"):
            return seg["tailUuid"]
        return parent

    def _kept_start(self, kept: list[_Rec], boundary_offset: int) -> int:
        """Where the kept messages were first written: state records about them lie after that."""
        if not kept:
            return boundary_offset
        if kept[0].offset < boundary_offset:
            return kept[0].offset
        first = self._find_uuid(kept[0].uuid, boundary_offset)  # written again after the boundary
        return first.offset if first else boundary_offset

    def _walk(self, leaf: _Rec, index: dict[str, _Rec], boundary: dict[str, Any] | None, kept: list[_Rec],
              partial: bool) -> list[_Rec]:
        """Message records from the boundary (exclusive) to the leaf, kept segment re-linked."""
        relink: dict[str, str] = {}
        head = anchor = None
        if kept:
            seg = ((boundary or {}).get("compactMetadata") or {}).get("preservedSegment") or {}
            head, anchor, tail = kept[0].uuid, seg.get("anchorUuid"), kept[-1].uuid
            kept_set = {r.uuid for r in kept}
            # inside the segment, the order _kept_segment found (it may differ from the file's links)
            relink.update((later.uuid, earlier.uuid) for earlier, later in zip(kept, kept[1:]))
            if anchor:
                relink[head] = anchor
                for r in index.values():
                    if r.data.get("parentUuid") == anchor and r.uuid not in kept_set:
                        relink[r.uuid] = tail
        chain: list[_Rec] = []
        seen: set[str] = set()
        cur: _Rec | None = leaf
        while cur is not None and not _is_boundary(cur.data):
            if cur.uuid in seen:
                self.warnings.append(f"{self.path.name}: the parentUuid links loop at {cur.uuid}; stopped there")
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
                self.warnings.append(f"{self.path.name}: the record before {chain[-1].uuid} ({parent}) is "
                                     "missing; the history starts after it")
        chain.reverse()
        if kept and anchor in seen and head not in seen:  # nothing written after the kept tail yet
            at = next(i for i, r in enumerate(chain) if r.uuid == anchor) + 1
            chain[at:at] = kept
        return [r for r in chain if r.is_message]

    def _recover_siblings(self, chain: list[_Rec], main: list[_Rec]) -> list[list[_Rec]]:
        """Group the chain into responses; bring back blocks and tool results left on side branches.

        Claude Code chains the blocks of one streamed response one after the other, but the result of
        an early tool call in a parallel batch hangs off that call's record, not off the last block,
        so walking back from the leaf never passes it.
        """
        children: dict[str, list[_Rec]] = {}
        for r in main:
            p = r.data.get("parentUuid")
            if p:
                children.setdefault(p, []).append(r)
        on_chain = {r.uuid for r in chain}
        groups: list[list[_Rec]] = []
        for r in chain:
            if groups and r.message_id and groups[-1][-1].message_id == r.message_id:
                groups[-1].append(r)
            else:
                groups.append([r])
        out: list[list[_Rec]] = []
        for g in groups:
            if not g[0].message_id:
                out.append(g)
                continue
            extra_blocks, results = self._side_branches(g, children, on_chain)
            out.append(sorted(g + extra_blocks, key=lambda r: r.offset))
            out.extend([r] for r in results)
        answered: set[str] = set()
        final: list[list[_Rec]] = []
        for g in out:  # a recovered result must not duplicate one already on the chain
            ids = {b.get("tool_use_id") for r in g for b in _blocks(r) if b.get("type") == "tool_result"}
            if g[0].type == "user" and g[0].uuid not in on_chain and ids & answered:
                continue
            answered |= ids
            final.append(g)
        return final

    def _side_branches(self, group: list[_Rec], children: dict[str, list[_Rec]],
                       on_chain: set[str]) -> tuple[list[_Rec], list[_Rec]]:
        mid = group[0].message_id
        uses = {b.get("id") for r in group for b in _blocks(r) if b.get("type") == "tool_use"}
        todo = [r.uuid for r in group]
        reached = set(todo)
        blocks: list[_Rec] = []
        results: list[_Rec] = []
        while todo:
            for c in children.get(todo.pop(), []):
                if c.uuid in on_chain or c.uuid in reached:
                    continue
                if c.type == "assistant" and c.message_id == mid:
                    blocks.append(c)
                    uses |= {b.get("id") for b in _blocks(c) if b.get("type") == "tool_use"}
                elif c.type in ("progress", "system") and not _is_boundary(c.data):
                    pass
                else:
                    if c.type == "user" and _answers(c, uses):
                        results.append(c)
                    continue
                reached.add(c.uuid)
                todo.append(c.uuid)
        results = [r for r in results if _answers(r, uses)]
        return blocks, sorted(results, key=lambda r: r.offset)

    # -- our own records ---------------------------------------------------------------------------------
    def _replay_state(self, records: list[_Rec], state_from: int, boundary_offset: int,
                      live: list[Message]) -> ContextState:
        state_recs = self._state_lines(state_from, boundary_offset)
        state_recs += [r for r in records if r.type in STATE_TYPES and r.offset >= boundary_offset]
        live_uuids = {m.uuid for m in live}
        tool_ids = {b.get("id") for m in live for b in m.content if b.get("type") == "tool_use"}
        state = ContextState()
        for r in state_recs:
            rec, kind = r.data, r.type
            if kind == "content-replacement":
                for rep in rec.get("replacements") or []:
                    if isinstance(rep, dict) and rep.get("toolUseId") in tool_ids:
                        state.replacements[rep["toolUseId"]] = rep.get("content", "")
            elif kind == "snip":
                state.snipped |= set(rec.get("removedUuids") or []) & live_uuids
            elif kind == "microcompact":
                state.cleared |= set(rec.get("clearedToolUseIds") or []) & tool_ids
            elif kind == "collapse-commit" and r.offset >= boundary_offset:
                # a compaction resets the collapses (ContextState.reset_after_compaction)
                if set(rec.get("collapsedUuids") or []) & live_uuids:
                    state.collapses.append({k: rec.get(k) for k in ("collapsedUuids", "summary", "placeholderUuid")})
        state.last_summarized_uuid = self._last_summarized()
        return state

    def _state_lines(self, start: int, end: int) -> list[_Rec]:
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
                    out.append(_Rec(pos, rec))
            pos += len(line) + 1
        return out

    def _last_summarized(self) -> str | None:
        end = self.size
        needle = b'"type":"session-memory"'
        while (i := self.mm.rfind(needle, 0, end)) >= 0:
            start, stop = self._line_at(i)
            rec = self._parse_line(start, stop)
            if rec is not None and rec.get("type") == "session-memory":
                return rec.get("lastSummarizedUuid")
            end = start
        return None


def _blocks(r: _Rec) -> list[dict[str, Any]]:
    content = r.data.get("message", {}).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _answers(r: _Rec, uses: set[Any]) -> bool:
    ids = [b.get("tool_use_id") for b in _blocks(r) if b.get("type") == "tool_result"]
    return bool(ids) and all(i in uses for i in ids)


def _merge(group: list[_Rec]) -> Message | None:
    """One Message from the records of one streamed response (or from a single record)."""
    first = from_record(group[0].data)
    if len(group) == 1 or first is None:
        return first
    parts = [m for m in (from_record(r.data) for r in group) if m is not None]
    last = parts[-1]
    content = [b for m in parts for b in m.content]
    stop = next((m.stop_reason for m in reversed(parts) if m.stop_reason), None)
    usage = next((m.usage for m in reversed(parts) if m.usage), None)
    return first.replace(content=content, uuid=last.uuid, stop_reason=stop, usage=usage,
                         model=first.model or last.model)


def _clean(messages: list[Message | None], model: str | None) -> list[Message]:
    """Make the list sendable: no synthetic errors, foreign thinking, empty replies or lone tool calls."""
    out: list[Message] = []
    for m in messages:
        if m is None:
            continue
        if m.role == "assistant":
            if m.model == "<synthetic>" or m.extra.get("isApiErrorMessage"):
                continue  # an API error Claude Code displayed as a reply; the model never said it
            if model is not None and not same_model(m.model, model) and any(b.get("type") in THINKING_TYPES
                                                                           for b in m.content):
                m = m.replace(content=[b for b in m.content if b.get("type") not in THINKING_TYPES])
        out.append(m)
    # tool results need a tool_use before them; tool_uses need a result somewhere after them
    seen_uses: set[str] = set()
    answered: set[str] = set()
    paired: list[Message] = []
    for m in out:
        if m.role == "assistant":
            seen_uses |= {b.get("id") for b in m.tool_uses}
        elif m.tool_results:
            keep = [b for b in m.content if b.get("type") != "tool_result"
                    or (b.get("tool_use_id") in seen_uses and b.get("tool_use_id") not in answered)]
            answered |= {b.get("tool_use_id") for b in keep if b.get("type") == "tool_result"}
            if len(keep) != len(m.content):
                m = m.replace(content=keep)
        paired.append(m)
    final: list[Message] = []
    for m in paired:
        if m.role == "assistant":
            keep = [b for b in m.content if b.get("type") != "tool_use" or b.get("id") in answered]
            if len(keep) != len(m.content):
                m = m.replace(content=keep)
        if not _has_content(m):
            continue
        final.append(m)
    return final


_DATED = re.compile(r"-\d{8}$")


def same_model(produced: str | None, resumed: str) -> bool:
    """Whether a response of ``produced`` counts as the resumed model's own (its thinking signatures verify).

    A dated id and its alias name one model (``claude-opus-4-1-20250805`` and ``claude-opus-4-1``), and the
    ``[1m]`` window suffix is ours, not the model's.
    """
    if not produced:
        return False

    def base(name: str) -> str:
        return _DATED.sub("", name.replace("[1m]", "").strip())

    return base(produced) == base(resumed)


def _has_content(m: Message) -> bool:
    for b in m.content:
        if b.get("type") != "text" or str(b.get("text", "")).strip():
            return True
    return False


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


# --- listing ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionInfo:
    path: Path
    session_id: str
    mtime: datetime
    first_prompt: str
    message_count: int  # exact for small files, estimated from the first 64 KB for big ones


def _transcripts(project_dir: Path) -> list[tuple[float, Path]]:
    found = []
    try:
        entries = list(os.scandir(project_dir))
    except OSError:
        return []
    for e in entries:
        if e.name.endswith(".jsonl") and e.is_file():
            st = e.stat()
            if st.st_size > 0:
                found.append((st.st_mtime, Path(e.path)))
    found.sort(key=lambda t: t[0], reverse=True)
    return found


def latest_session(project_dir: Path) -> Path | None:
    """The most recently modified non-empty ``*.jsonl`` directly in ``project_dir``."""
    found = _transcripts(Path(project_dir))
    return found[0][1] if found else None


_HEAD_BYTES = 64 * 1024
_COMMAND = re.compile(r"<command-name>(.*?)</command-name>(?:.*?<command-args>(.*?)</command-args>)?", re.S)
_WRAPPER = re.compile(r"<(ide_[a-z_]+|system-reminder|local-command-[a-z]+)>.*?</\1>", re.S)


def _prompt_text(rec: dict[str, Any]) -> str:
    m = from_record(rec)
    if m is None or not m.is_typed_prompt or rec.get("isSidechain"):
        return ""
    text = m.text
    if cmd := _COMMAND.search(text):
        text = f"{cmd.group(1)} {cmd.group(2) or ''}"
    text = _WRAPPER.sub("", text)
    if text.lstrip().startswith("<") or text.startswith("Caveat:"):
        return ""
    return " ".join(text.split())


def list_sessions(project_dir: Path) -> list[SessionInfo]:
    """The sessions in ``project_dir``, newest first; reads at most about 64 KB of each file."""
    out = []
    for mtime, path in _transcripts(Path(project_dir)):
        try:
            info = _session_info(path, mtime)
        except OSError:
            continue
        out.append(info)
    return out


def _session_info(path: Path, mtime: float) -> SessionInfo:
    size = path.stat().st_size
    first = ""
    read = count = 0
    with open(path, "rb") as f:
        while read < _HEAD_BYTES:
            line = f.readline(4 * 1024 * 1024)
            if not line:
                break
            read += len(line)
            if b'"type":"user"' not in line and b'"type":"assistant"' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("type") in MESSAGE_TYPES and not rec.get("isSidechain"):
                count += 1
                first = first or _prompt_text(rec)
    if read < size and read:
        count = round(count * size / read)
    if len(first) > 80:
        first = first[:79] + "…"
    when = datetime.fromtimestamp(mtime, tz=timezone.utc)
    return SessionInfo(path, path.stem, when, first, count)
