"""A memory and its evidence, as the store keeps them (``memories.json``) and the topic files show them.

A memory says one thing a next session needs (how to test, a rule of the user's, a failed approach, where
something is) and carries what it rests on: the command and its exit code, the file and the lines with the
content it relies on, or the user's own message and its time. ``check`` says what to look at in the working
tree before it is served (agent.memory.verify); ``state`` is what the last look found.

``slot`` is what a memory is about ("command:test", "config:pytest", "file:src/calc.py", "rule:<words>"):
two memories of one slot are one memory, and the newer evidence decides what it says.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

# states: current (checked and true), refreshed (its evidence showed a new value, which it now says),
# stale (not true any more, or can't be checked; never served as current), forgotten (the user took its
# line out of MEMORY.md), expired (unused for longer than the expiry period)
CURRENT, REFRESHED, STALE, FORGOTTEN, EXPIRED = "current", "refreshed", "stale", "forgotten", "expired"
SERVED = (CURRENT, REFRESHED)
# topics: one topic file each (Claude Code's frontmatter type in brackets)
TOPICS = {
    "commands": ("Build, test, lint and run", "project", "How this project is built, tested, linted and run"),
    "rules": (
        "The user's rules and corrections",
        "feedback",
        "Standing rules and corrections, in the user's words",
    ),
    "notes": ("Things to remember", "project", "What the user asked to be remembered"),
    "decisions": (
        "Decisions and failed approaches",
        "project",
        "What was decided, and what was tried and failed",
    ),
    "places": ("Where things are", "reference", "Files and the lines that matter, with what they said"),
}
MAX_EVIDENCE = 4


def utc(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime | None:
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


@dataclass
class Evidence:
    kind: str  # "command" | "file" | "user"
    time: str = ""  # when it was observed (ISO, UTC)
    command: str = ""
    exit_code: int | None = None
    outcome: str = ""  # the command's last line of output
    path: str = ""  # relative to the project root
    lines: str = ""  # "3-4"
    content: str = ""  # what the cited lines said
    message: str = ""  # the user's words
    session: str = ""

    def key(self) -> tuple[Any, ...]:
        return (
            self.kind,
            self.command,
            self.exit_code,
            self.path,
            self.lines,
            self.content,
            self.message,
            self.time,
        )

    def describe(self) -> str:
        when = f" ({self.time.replace('T', ' ').rstrip('Z')} UTC)" if self.time else ""
        if self.kind == "command":
            code = "did not finish" if self.exit_code is None else f"exit {self.exit_code}"
            outcome = f": {self.outcome}" if self.outcome and self.exit_code else ""
            return f"`$ {self.command}` → {code}{outcome}{when}"
        if self.kind == "file":
            shown = " / ".join(line.strip() for line in self.content.splitlines()[:3])
            return f"{self.path}:{self.lines} `{shown}`{when}"
        return f'the user said "{self.message}"{when}'


@dataclass
class Memory:
    slot: str
    topic: str
    title: str
    text: str
    evidence: list[Evidence] = field(default_factory=list)
    check: dict[str, Any] = field(default_factory=dict)
    state: str = CURRENT
    reason: str = ""  # why it is stale or what refreshed it
    written: str = ""
    verified: str = ""
    used: str = ""  # the last time it was served (checked and current) or observed again
    origin: str = "agent"  # agent (from its records) | user (their words) | model (a line of the model's own)

    @property
    def id(self) -> str:
        return hashlib.sha1(self.slot.encode()).hexdigest()[:8]

    @property
    def newest(self) -> str:
        return max((e.time for e in self.evidence), default=self.written)

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "evidence": [dict(vars(e)) for e in self.evidence], "check": dict(self.check)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Memory:
        evidence = [
            Evidence(**{k: v for k, v in e.items() if k in Evidence.__dataclass_fields__})
            for e in d.get("evidence") or []
        ]
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k != "evidence"}
        return cls(**known, evidence=evidence)

    def merge(self, newer: Memory) -> None:
        """Take in what another sighting of the same slot says: the newest evidence decides the text."""
        if newer.newest >= self.newest:
            self.title, self.text, self.check, self.topic = newer.title, newer.text, newer.check, newer.topic
            self.state, self.reason = newer.state, newer.reason
            self.origin = newer.origin
        seen: dict[tuple[Any, ...], Evidence] = {e.key(): e for e in [*self.evidence, *newer.evidence]}
        self.evidence = sorted(seen.values(), key=lambda e: e.time, reverse=True)[:MAX_EVIDENCE]
        self.used = max(self.used, newer.used)
        self.written = max(self.written, newer.written)
