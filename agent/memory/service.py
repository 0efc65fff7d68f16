"""Memory across sessions: loaded (checked) at a session's start, written at its natural points.

``load``: under the folder's lock, read the records and MEMORY.md (a hand edit is taken in: a line taken out
forgets its memory, a line added is the user's), check every memory against the working tree
(agent.memory.verify), redact anything secret, expire what went unused for ``EXPIRY_DAYS``, write the files
again, and serve the first ``MAX_LINES`` lines / ``MAX_BYTES`` of MEMORY.md: what the session's first
request carries, in the fixed part of the system prompt.

``remember``: at a compaction, at the end of a session and when the user asks, the memories the agent's
own records hold (agent.memory.harvest) are merged in: one memory per slot, the newest evidence deciding.
No model call is made for either.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.memory import harvest as harvesting
from agent.memory.entries import (
    CURRENT,
    EXPIRED,
    FORGOTTEN,
    REFRESHED,
    SERVED,
    STALE,
    Evidence,
    Memory,
    parse_time,
    utc,
)
from agent.memory.secrets import env_values, has_secret, redact
from agent.memory.store import INDEX, Index, Store, folder_for, ids_in, index_block, live
from agent.memory.verify import Tree, check
from core.messages import Message

if TYPE_CHECKING:
    from agent.config.settings import Settings

MAX_LINES = 200  # of MEMORY.md served at a session's start, as in Claude Code
MAX_BYTES = 25_000
EXPIRY_DAYS = 30  # a memory not served (checked and true) or seen again for this long expires
RENEW_AFTER = timedelta(days=1)
HEADER = (
    "Memory from earlier sessions in this project, kept by the agent from its own records (the commands it "
    "ran and their exit codes, the files it changed, the user's own words). Every memory below was checked "
    "against the working tree at the start of this session; lines marked STALE are no longer true and must "
    "not be relied on. The evidence of each is in the topic files beside {index}."
)
RECORD = "memory-load"  # the transcript record of what was loaded


def folder(settings: Settings) -> Path:
    chosen = getattr(settings, "auto_memory_directory", None)
    return Path(chosen).expanduser() if chosen else folder_for(settings.home, settings.root)


def enabled(settings: Settings) -> bool:
    return bool(getattr(settings, "auto_memory", True))


def secrets_of(settings: Settings) -> set[str]:
    found = env_values(settings.root)
    if settings.cwd != settings.root:
        found |= env_values(settings.cwd)
    found |= {v for v in (settings.api_key, settings.auth_token) if v}
    return found


@dataclass
class Loaded:
    folder: Path
    memories: list[Memory] = field(default_factory=list)  # every live one, with its state
    text: str = ""  # the block served ("" when there is nothing)
    tokens: int = 0
    problems: list[str] = field(default_factory=list)
    redacted: int = 0
    expired: int = 0
    user_lines: int = 0  # lines of the user's own in MEMORY.md (served as theirs, unchecked)

    @property
    def served(self) -> int:
        return sum(1 for m in self.memories if m.state in SERVED)

    @property
    def stale(self) -> int:
        return sum(1 for m in self.memories if m.state == STALE)

    @property
    def refreshed(self) -> int:
        return sum(1 for m in self.memories if m.state == REFRESHED)

    def summary(self) -> str:
        """The first screen's line."""
        if not self.memories and not self.user_lines:
            return ""
        parts = [f"{self.served} memor{'y' if self.served == 1 else 'ies'} loaded"]
        parts.append(f"{self.stale} stale")
        if self.refreshed:
            parts.append(f"{self.refreshed} refreshed")
        if self.expired:
            parts.append(f"{self.expired} expired")
        return "Memory: " + ", ".join(parts) + " (checked against the working tree; /memory lists them)"

    def record(self) -> dict[str, Any]:
        return {
            "type": RECORD,
            "folder": str(self.folder),
            "loaded": self.served,
            "stale": self.stale,
            "refreshed": self.refreshed,
            "expired": self.expired,
            "tokens": self.tokens,
            "memories": [
                {"id": m.id, "slot": m.slot, "state": m.state, "reason": m.reason, "text": m.text}
                for m in self.memories
            ],
            "problems": list(self.problems),
            "text": self.text,
        }


def _take_in_edits(store: Store, memories: list[Memory], index: Index, now: datetime) -> None:
    """What the user did to the agent's section of MEMORY.md: lines taken out forget their memories, lines
    added or changed are theirs (moved outside the markers when the file is written again)."""
    if index.inside is None or not index.edited:
        return
    expected = index_block(live(memories)).splitlines()
    expected_set = set(expected)
    present = set(ids_in(index.inside))
    index.foreign = [
        line
        for line in index.inside
        if line.strip() and line not in expected_set and not line.startswith("## ")
    ]
    gone = [i for i in ids_in(expected) if i not in present]
    for m in memories:
        if m.id in gone:
            m.state, m.reason, m.verified = FORGOTTEN, "its line was taken out of MEMORY.md", utc(now)
    if gone or index.foreign:
        store.problems.append(
            f"MEMORY.md was edited by hand: {len(gone)} memor{'y' if len(gone) == 1 else 'ies'} forgotten (line "
            f"taken out), {len(index.foreign)} line{'' if len(index.foreign) == 1 else 's'} of yours kept outside "
            "the agent's section"
        )


def _scrub(m: Memory, secrets: Iterable[str]) -> bool:
    """Redact a memory that holds something secret; whether it did."""
    fields = [m.text, m.title, m.reason, *(e.command + e.message + e.content + e.outcome for e in m.evidence)]
    if not has_secret("\n".join(fields), secrets):
        return False
    m.text, m.title, m.reason = redact(m.text, secrets), redact(m.title, secrets), redact(m.reason, secrets)
    for e in m.evidence:
        e.command, e.message = redact(e.command, secrets), redact(e.message, secrets)
        e.content, e.outcome = redact(e.content, secrets), redact(e.outcome, secrets)
    return True


def _verify(m: Memory, tree: Tree, now: datetime) -> None:
    stamp = utc(now)
    m.verified = stamp
    if m.origin != "agent" or not m.check:
        m.state, m.reason = CURRENT, ""
        return
    verdict = check(m.check, tree)
    if verdict.state == "current":
        m.state, m.reason = CURRENT, ""
        return
    if verdict.state == "stale":
        m.state, m.reason = STALE, verdict.reason
        return
    m.state, m.reason = REFRESHED, verdict.reason
    if verdict.check is not None:
        m.check = verdict.check
    if verdict.text:
        m.text = verdict.text
    elif verdict.cited is not None and m.check.get("kind") == "lines":
        path, lines, _ = verdict.cited
        m.text = re.sub(r"^\S+ was edited", lambda _: f"{path}:{lines} was edited", m.text)
    if verdict.cited is not None:
        path, lines, content = verdict.cited
        m.evidence.insert(0, Evidence("file", stamp, path=path, lines=lines, content=content))
        del m.evidence[4:]


def load(settings: Settings, now: datetime, *, verify: bool = True) -> Loaded:
    """Check the project's memories and give what a session starts with (the files are rewritten)."""
    store = Store(folder(settings))
    loaded = Loaded(store.folder)
    if not store.folder.exists():
        return loaded
    secrets = secrets_of(settings)
    with store.locked():
        memories, written = store.read()
        index = store.read_index(written.get(INDEX))
        _take_in_edits(store, memories, index, now)
        tree = Tree(settings.root)
        changed = False
        for m in live(memories):
            changed |= _check_one(m, loaded, tree, now, secrets, verify=verify)
        changed |= loaded.expired > 0 or loaded.redacted > 0 or index.edited or bool(index.damaged)
        changed |= bool(memories) and index.inside is None  # the agent's section is missing: written again
        if changed:
            store.write(memories, index, written)
        loaded.memories = live(memories)
        try:
            raw = store.index_path.read_bytes()[:MAX_BYTES]
        except OSError:
            raw = b""
    _take_text(loaded, store, index, raw, secrets)
    return loaded


def _check_one(
    m: Memory, loaded: Loaded, tree: Tree, now: datetime, secrets: set[str], *, verify: bool
) -> bool:
    """One memory at load: secrets redacted, expired when unused for long, checked against the tree,
    renewed when served; True when it changed."""
    cutoff = now - timedelta(days=EXPIRY_DAYS)
    if _scrub(m, secrets):
        loaded.redacted += 1
    used = parse_time(m.used or m.written)
    if used is not None and used < cutoff:
        m.state, m.reason = EXPIRED, f"unused since {m.used[:10]}"
        loaded.expired += 1
        return False
    before = (m.state, m.reason, m.text)
    if verify:
        try:
            _verify(m, tree, now)
        except (KeyError, TypeError, ValueError, AttributeError) as e:  # a check edited by hand
            m.state, m.reason = STALE, f"its check can't be made ({type(e).__name__}: {e})"
    if m.state in SERVED and (parse_time(m.used) or cutoff) < now - RENEW_AFTER:
        m.used = utc(now)  # renewed (a day's precision: no write at every start)
        return True
    return before != (m.state, m.reason, m.text)


def _take_text(loaded: Loaded, store: Store, index: Index, raw: bytes, secrets: set[str]) -> None:
    """What the session's system prompt takes from MEMORY.md (its first lines, nothing secret-looking)."""
    excerpt = "\n".join(raw.decode("utf-8", "replace").splitlines()[:MAX_LINES])
    user_text = index.before + "\n" + index.after + "\n" + "\n".join(index.foreign)
    loaded.user_lines = sum(
        1 for line in user_text.splitlines() if line.strip() and not line.startswith("# Memory")
    )
    if has_secret(excerpt, secrets):
        excerpt = redact(excerpt, secrets)
        store.problems.append("MEMORY.md holds something that looks secret: it is left out of what is loaded")
    if loaded.redacted:
        store.problems.append(f"{loaded.redacted} memories held something secret-looking; it was redacted")
    loaded.problems = store.problems
    if loaded.memories or loaded.user_lines:
        loaded.text = (
            HEADER.format(index=store.index_path) + "\n\nContents of MEMORY.md:\n\n" + excerpt.strip()
        )
        loaded.tokens = (len(loaded.text) + 3) // 4  # a rough count: the tokenizer's load costs start-up time


def remember(
    settings: Settings, messages: list[Message], now: datetime, *, session: str = ""
) -> tuple[int, list[str]]:
    """Merge what this conversation's records hold into the project's memory; (memories written, problems)."""
    secrets = secrets_of(settings)
    found = harvesting.harvest(messages, settings.root, settings.cwd, session=session, secrets=secrets)
    stamp = utc(now)
    for m in found:
        m.written = m.written or stamp
        m.used = m.used or stamp
        m.verified = stamp
        for e in m.evidence:
            e.time = e.time or stamp
    store = Store(folder(settings))
    if not found and not store.folder.exists():
        return 0, []
    with store.locked():
        memories, written = store.read()
        index = store.read_index(written.get(INDEX))
        _take_in_edits(store, memories, index, now)
        by_slot = {m.slot: m for m in memories}
        changed = 0
        for m in found:
            old = by_slot.get(m.slot)
            if old is None:
                memories.append(m)
                by_slot[m.slot] = m
                changed += 1
                continue
            if old.state == FORGOTTEN and m.newest <= old.verified:
                continue  # the user took it out after this was seen
            before = (old.text, old.state, [e.key() for e in old.evidence])
            if old.state in (FORGOTTEN, EXPIRED, STALE) and m.newest > old.newest:
                old.state, old.reason = CURRENT, ""
            old.merge(m)
            changed += before != (old.text, old.state, [e.key() for e in old.evidence])
        if changed or index.edited or index.damaged:
            store.write(memories, index, written)
    return changed, store.problems


def listing(memories: list[Memory], *, evidence: bool = True) -> list[str]:
    """``/memory``'s lines: each memory with its state, why, and its evidence."""
    lines: list[str] = []
    order = {CURRENT: 0, REFRESHED: 1, STALE: 2, EXPIRED: 3, FORGOTTEN: 4}
    for n, m in enumerate(sorted(memories, key=lambda m: (order.get(m.state, 9), m.topic)), 1):
        why = f" — {m.reason}" if m.reason else ""
        lines.append(f"{n}. [{m.state}] {m.title}: {m.text}{why}")
        if evidence:
            lines += [f"     evidence: {e.describe()}" for e in m.evidence]
    return lines


def read_all(settings: Settings) -> list[Memory]:
    """Every memory on record, without checking or writing anything (for /memory)."""
    store = Store(folder(settings))
    memories, _ = store.read()
    return memories
