"""Session transcripts on disk: Claude Code's JSONL format (docs/files.md) and the append-only writer.

Every record is one whole line, written with a single ``os.write`` on an ``O_APPEND`` descriptor, so a
crash leaves at most a torn last line; nothing written is ever rewritten. The file and any directory
the writer creates are private (0600 / 0700). The API key never reaches the file: any credential in a
record is replaced by a marker before the line is written.

Reading the format back is agent.transcript.loader's job (Claude Code's own streamed records: agent.transcript.claude_code);
listing a directory's sessions is agent.transcript.listing'; our non-message records are compact.stages.state's.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from core.errors import SessionError
from core.messages import Message, new_uuid, now_iso, to_record
from core.private import open_private, redact, secrets_of

MESSAGE_TYPES = ("user", "assistant")
BOUNDARY_NEEDLE = b'"compact_boundary"'
# preserved thinking's escape hatch, once a session needed it: {"type": THINKING_BINDING, "behavior":
# "drop_block", "path": ...} (agent.runtime.wiring writes it, agent.transcript.loader finds it)
THINKING_BINDING = "thinking-binding"
BINDING_NEEDLE = b'"thinking-binding"'
# the system prompt a session fixed on its first request (preserved-thinking models): {"type":
# SYSTEM_PROMPT, "blocks": [...]} (agent.runtime.context_updates writes it, the loader finds the last one)
SYSTEM_PROMPT = "system-prompt"
SYSTEM_PROMPT_NEEDLE = b'"system-prompt"'
# what a session loaded from the project's memory at its start (agent.memory.service writes it; a resumed
# session sends the same memory again, found by the loader)
MEMORY_LOAD = "memory-load"
MEMORY_LOAD_NEEDLE = b'"memory-load"'


SIDE_USAGE = "side-usage"  # usage no message record carries (agent.runtime.session writes it, agent.transcript.listing reads it)


def is_boundary(rec: dict[str, Any]) -> bool:
    """A compact_boundary record of the main conversation."""
    return (
        rec.get("type") == "system"
        and rec.get("subtype") == "compact_boundary"
        and not rec.get("isSidechain")
    )


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

    def __init__(
        self,
        path: Path,
        session_id: str,
        cwd: str,
        version: str,
        *,
        last_uuid: str | None = None,
        secret: str | tuple[str | None, ...] | None = None,
        sync: bool = False,
        sync_boundaries: bool = True,
    ) -> None:
        self.path = Path(path)
        self.session_id = session_id
        self.cwd = cwd
        self.version = version
        self.last_uuid = last_uuid  # the parent of the next message record
        self.sync = sync
        self.sync_boundaries = sync_boundaries
        self._secrets = secrets_of(*(secret if isinstance(secret, tuple) else (secret,)))
        self._fd: int | None = None
        self._held = False  # this writer counts among the holders of the transcript's lock

    def _open(self) -> int:
        if self._fd is None:
            fd = open_private(self.path, os.O_WRONLY | os.O_APPEND)
            # one writing process a transcript: a second process appending would interleave two
            # conversations (lifecycle forks a session another process holds; this catches the race)
            try:
                _hold(self.path)
            except BlockingIOError:
                os.close(fd)
                raise SessionError(
                    f"Session {self.path.stem} was taken up by another process meanwhile; nothing of this "
                    "run was written to it. Run again to continue it in a new session."
                ) from None
            self._held = True
            if _ends_torn(self.path):  # end a line torn by a crash, so our first record stays whole
                os.write(fd, b"\n")
            self._fd = fd
        return self._fd

    def _write(self, rec: dict[str, Any], *, sync: bool) -> None:
        line = redact(_dumps(_without_secret_thinking(rec, self._secrets)), self._secrets)
        view = memoryview(line.encode("utf-8"))
        try:
            fd = self._open()
            while view:  # a regular file takes the whole line at once; loop only in case it does not
                view = view[os.write(fd, view) :]
            if sync or self.sync:
                os.fsync(fd)
        except SessionError:
            raise
        except OSError as exc:
            # a full disk (or a quota): part of the line may be there, so the next write opens the file
            # again and ends that torn line first; the caller gets one clear line, not a traceback
            self.close()
            raise SessionError(
                f"Can't write the session transcript {self.path}: {exc.strerror or exc}"
            ) from None

    def append_message(self, m: Message) -> dict[str, Any]:
        rec = to_record(
            m, parent_uuid=self.last_uuid, session_id=self.session_id, cwd=self.cwd, version=self.version
        )
        self._write(rec, sync=False)
        self.last_uuid = m.uuid
        return rec

    def append_record(self, rec: dict[str, Any]) -> dict[str, Any]:
        """One of our non-message records (compact.stages.state lists them); not part of the parent chain."""
        out = {"type": rec.get("type"), **rec}
        out.setdefault("uuid", new_uuid())
        out.setdefault("timestamp", now_iso())
        out.setdefault("sessionId", self.session_id)
        self._write(out, sync=False)
        return out

    def append_boundary(
        self,
        trigger: str,
        pre_tokens: int,
        logical_parent_uuid: str | None,
        preserved_segment: dict[str, str] | None = None,
        decision: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The compact_boundary record; it becomes the parent of the next message (the summary). ``decision``:
        what made the compaction and why (compact.decision.decide), kept as ``compactMetadata.decision``."""
        meta: dict[str, Any] = {"trigger": trigger, "preTokens": int(pre_tokens)}
        if decision:
            meta["decision"] = decision
        if preserved_segment:
            meta["preservedSegment"] = {
                k: preserved_segment[k] for k in ("headUuid", "anchorUuid", "tailUuid")
            }
        rec: dict[str, Any] = {
            "parentUuid": None,
            "logicalParentUuid": logical_parent_uuid,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.version,
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "isMeta": False,
            "level": "info",
            "compactMetadata": meta,
            "uuid": new_uuid(),
            "timestamp": now_iso(),
        }
        self._write(rec, sync=self.sync_boundaries)
        self.last_uuid = str(rec["uuid"])
        return rec

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._held:
            self._held = False
            _release(self.path)

    def __enter__(self) -> TranscriptWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# transcripts this process writes: path -> (the descriptor holding the flock, writers using it). The
# lock is the process's, shared by its writers (/resume of the session just left opens a second one).
_locks: dict[str, tuple[int, int]] = {}


def _hold(path: Path) -> None:
    key = str(path)
    if key in _locks:
        fd, count = _locks[key]
        _locks[key] = (fd, count + 1)
        return
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise
    _locks[key] = (fd, 1)


def _release(path: Path) -> None:
    fd, count = _locks.pop(str(path), (-1, 0))
    if count > 1:
        _locks[str(path)] = (fd, count - 1)
    elif fd >= 0:
        os.close(fd)


def in_use(path: Path) -> bool:
    """Whether another process is writing the transcript at ``path`` (its writer holds the lock)."""
    if str(path) in _locks:
        return False  # this process's own
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock this probe took
    return False


def agent_id_for(tool_use_id: str) -> str:
    """A subagent's id: seven characters like Claude Code's ("a2898e3"), derived from its Task call's id
    so that a session resumed after a crash can name the transcript of a call left without an answer."""
    return "a" + hashlib.sha256(tool_use_id.encode()).hexdigest()[:6]


def sidechain_path(transcript: Path, agent_id: str) -> Path:
    """Where a subagent's transcript lives: ``P/<session-id>/subagents/agent-<id>.jsonl``, as Claude Code
    lays them out, beside the session's own directory."""
    return transcript.with_suffix("") / "subagents" / f"agent-{agent_id}.jsonl"


class SidechainWriter(TranscriptWriter):
    """A subagent's transcript: the same records, each marked ``isSidechain: true`` with the ``agentId``;
    ``sessionId`` is the parent session's."""

    def __init__(self, path: Path, session_id: str, cwd: str, version: str, *, agent_id: str, **kw: Any):
        super().__init__(path, session_id, cwd, version, **kw)
        self.agent_id = agent_id

    def _write(self, rec: dict[str, Any], *, sync: bool) -> None:
        super()._write({**rec, "isSidechain": True, "agentId": self.agent_id}, sync=sync)


# set on a record whose thinking held a secret and was left out whole (agent.transcript.claude_code.clean
# then leaves out the thinking of every earlier message too: oldest first, as docs/preserved-thinking.md allows)
THINKING_DROPPED = "thinkingDropped"


def _without_secret_thinking(rec: dict[str, Any], secrets: tuple[str, ...]) -> dict[str, Any]:
    """A signed thinking block is valid only as the model wrote it: redacting the API key inside it would
    leave a block every later request is refused for (docs/preserved-thinking.md). Such a block is left out of the record
    whole instead, and the record says so."""
    message = rec.get("message")
    if not secrets or not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return rec
    content = message["content"]
    kept = [
        b
        for b in content
        if not (
            isinstance(b, dict)
            and b.get("type") == "thinking"
            and any(secret in json.dumps(b, ensure_ascii=False) for secret in secrets)
        )
    ]
    if len(kept) == len(content):
        return rec
    return {**rec, "message": {**message, "content": kept}, THINKING_DROPPED: True}
