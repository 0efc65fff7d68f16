"""Rewind: the user takes the conversation back to just before one of their earlier prompts.

``points(session)`` lists the prompts one can go back to: those of the live list (after a compaction,
the ones after its summary).
``rewind(session, prompt)`` cuts the live list just before that prompt and returns its text (the REPL
puts it back into the input line). The transcript keeps everything, append-only: a ``rewind`` record
names the new leaf, and the next message is written with that leaf as its parent, so a resume (which
walks the parent chain back from the leaf, agent/transcript/loader.py) rebuilds exactly the live list the session
had — whether or not anything was said after the rewind.

A rewind into the kept tail of a compaction (a turn-boundary one keeps just the new prompt) would cut the
working state attached after it: it is attached again, as the kept branch had it.

The session notes follow: notes an update wrote while the abandoned branch was live are replaced by
the version saved when they covered the newest message still live (compact.compaction.notes.restore_version),
so a rewound prompt does not come back through them.

``summarize_up_to(session, prompt)``, the menu's other choice: a compaction of only the messages before
that prompt, the prompt and everything after it kept verbatim (the compactor's kept tail, so the
transcript records it like any compaction that keeps a tail).
"""

from __future__ import annotations

import time
from pathlib import Path

from agent.runtime import checkpoints
from agent.runtime.session import Session
from agent.transcript.loader import REWIND  # the record type
from compact.compaction import compactor, ledger, notes, summary
from compact.stages.state import notes_record
from core.errors import Interrupted
from core.events import CompactFailed, CompactStarted, Notice
from core.messages import Message

MAX_POINTS = 20  # the menu lists this many of the latest prompts


def points(session: Session) -> list[Message]:
    """The prompts one can rewind to, oldest first (at most MAX_POINTS, the latest): those the last
    compaction replaced (read back from the transcript after a resume), then those of the live list.

    After a compaction the live ones are the prompts after its summary, kept ones included: the
    transcript finds a kept record by its uuid (agent.transcript.loader), so the rewound chain resumes
    the same."""
    found = [m for m in session.messages if _typed(m)]
    live = {m.uuid for m in session.messages}
    return ([m for m in _replaced(session) if _typed(m) and m.uuid not in live] + found)[-MAX_POINTS:]


def before_compaction(session: Session, prompt: Message) -> bool:
    """Whether ``prompt`` is one the last compaction replaced (not in the live list)."""
    return all(m.uuid != prompt.uuid for m in session.messages)


def _typed(m: Message) -> bool:
    return m.role == "user" and m.kind == "prompt" and bool(m.text.strip())


def _replaced(session: Session) -> list[Message]:
    last = session.conv.last_compaction
    if last is None:
        return []
    try:
        return list(last.replaced())
    except (OSError, ValueError, KeyError, TypeError):  # an unreadable transcript: the live prompts only
        return []


def restore_code(session: Session, prompt: Message) -> list[Path]:
    """The files the agent changed from ``prompt`` on, put back as they were just before it (the paths)."""
    later = [m.uuid for m in points(session)]
    at = later.index(prompt.uuid) if prompt.uuid in later else 0
    return checkpoints.restore(session.checkpoint_dir, later[at:])


def rewind(session: Session, prompt: Message) -> str:
    """Cut the live list just before ``prompt`` (a prompt the last compaction replaced: the conversation
    as it was before it, from there); the prompt's text."""
    conv = session.conv
    with conv.lock:
        at = next((i for i, m in enumerate(conv.messages) if m.uuid == prompt.uuid), None)
        if at is None:  # before the compaction: its history comes back, up to the prompt
            old = _replaced(session)
            at = next(i for i, m in enumerate(old) if m.uuid == prompt.uuid)
            conv.messages[:] = old
            conv.last_compaction = conv.compaction_seen = None
        keep = conv.messages[:at]
        removed = conv.messages[at:]
        leaf = keep[-1].uuid if keep else None
        del conv.messages[at:]
        session.writer.last_uuid = leaf  # conv.writer, seen by compact/ as a TranscriptSink
        conv.writer.append_record({"type": REWIND, "leafUuid": leaf, "rewoundPromptUuid": prompt.uuid})
        conv.begin_turn(next((m.uuid for m in reversed(keep) if m.kind == "prompt"), None))
        _rewind_notes(session, keep)
        _working_state_back(session, keep, removed)
        # what stays is a prefix of what was sent, so its thinking stays valid; the cache misses once
        conv.rebuild_point = True
    return prompt.text


def _working_state_back(session: Session, keep: list[Message], removed: list[Message]) -> None:
    """A rewind into a compaction's kept tail (a turn-boundary compaction keeps just the new prompt) cuts
    the working state attached after it: it is attached again, as the kept branch had it — the ledger
    of what the compaction replaced, which the summary carries (compact.compaction.ledger.BASE_KEY),
    without the rewound messages."""
    conv = session.conv
    if not any(ledger.SNAPSHOT_KEY in m.extra for m in removed):
        return
    if not any(ledger.BASE_KEY in m.extra for m in keep) or any(ledger.SNAPSHOT_KEY in m.extra for m in keep):
        return
    threshold = conv.window.thresholds().auto_compact
    state = ledger.attachment(keep, [], str(conv.tools.project_dir), threshold, conv.session_dir)
    conv.messages.append(state.message)
    conv.writer.append_message(state.message)


def _rewind_notes(session: Session, keep: list[Message]) -> None:
    """The session notes lose what the abandoned branch added: when they covered a message that is now
    gone, the notes as they were when they covered the newest message still live are put back (the
    template when there are none), and "summarized up to here" moves there, recorded for a resume."""
    conv = session.conv
    marker = conv.state.last_summarized_uuid
    live = [m.uuid for m in keep]
    if marker is None or marker in live or not conv.notes_path.exists():
        return  # the notes never saw the abandoned branch
    try:
        back = notes.restore_version(conv.notes_path, live, notes.template_for(session.ports))
    except OSError:
        back = None
    conv.state.last_summarized_uuid = back
    conv.writer.append_record(notes_record(back) if back else notes_record(""))


def summarize_up_to(session: Session, prompt: Message, instructions: str | None = None) -> bool:
    """Compact only what came before ``prompt``: a summary of it, then the rest kept verbatim (the
    user choosing what to compact). True when the conversation was replaced; like every compaction,
    a failure changes nothing (CompactFailed says why)."""
    conv, ports = session.conv, session.ports
    if ports.config.disable_compact:
        ports.emit(Notice(compactor.DISABLED, "warning"))
        return False
    started = time.monotonic()
    ports.emit(CompactStarted("manual"))
    conv.cancel.clear()
    conv.compacting = True
    try:
        view = conv.view()
        at = next((i for i, m in enumerate(view.tagged) if m.uuid == prompt.uuid), None)
        if not at:  # nothing before it, or the prompt is folded into a collapsed span
            ports.emit(CompactFailed("manual", compactor.NOTHING))
            return False
        made = summary.summarize(conv, ports, view.tagged[:at], instructions)
        made.kept = conv.messages[[m.uuid for m in conv.messages].index(prompt.uuid) :]
        return compactor.finish(conv, ports, made, "manual", view.tokens, started)
    except Interrupted:
        ports.emit(CompactFailed("manual", compactor.CANCELLED))
        return False
    except Exception as e:  # noqa: BLE001 - as in compact.compaction.compactor: the conversation stays as it was
        ports.emit(CompactFailed("manual", str(e) or type(e).__name__))
        return False
    finally:
        conv.compacting = False
