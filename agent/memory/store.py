"""The memory folder of a project, in Claude Code's layout, and how it is written safely.

    <home>/projects/<project>/memory/
        MEMORY.md         the index: the agent's section between two marker lines, the user's text around it
        commands.md ...   topic files (frontmatter name / description / type), one section per memory,
                          with its state and evidence
        memories.json     the records the topic files and the index are written from
        .lock             held while the folder is read and written (two sessions at once)

``<project>`` comes from the git repository (the main worktree's root), so worktrees and subdirectories share
one store, as in Claude Code; without git it is the project root. Every file is written whole (a private
temp file renamed over it) and is 0600, the folder 0700.

MEMORY.md is the user's as much as the agent's. What is outside the markers is theirs and is kept as it
is. Inside, each line names its memory (``#m-<id>`` in the link): a line the user took out forgets that
memory; a line they added or changed is moved outside the markers, as their own text. A file that can't be
read as the agent wrote it (not UTF-8, a marker missing) is copied aside whole before anything is written,
and the user is told where: nothing they wrote is lost.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from agent.memory.entries import EXPIRED, FORGOTTEN, REFRESHED, SERVED, STALE, TOPICS, Memory
from core.private import locked, make_private_dirs, replace_private

INDEX = "MEMORY.md"
RECORDS = "memories.json"
LOCK = ".lock"
START = (
    "<!-- compact-agent memory: written from the agent's records; your own lines go outside these markers -->"
)
END = "<!-- end of compact-agent memory -->"
VERSION = 1
_LINK_ID = re.compile(r"\]\([\w.-]+\.md#m-([0-9a-f]{8})\)")


def git_root(path: Path) -> Path | None:
    """The main worktree's root of the repository ``path`` is in (None outside git)."""
    for d in [path, *path.parents]:
        dot = d / ".git"
        if dot.is_dir():
            return d
        if dot.is_file():
            try:
                line = dot.read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                return d
            if not line.startswith("gitdir:"):
                return d
            gitdir = Path(line.split(":", 1)[1].strip())
            gitdir = gitdir if gitdir.is_absolute() else (d / gitdir)
            try:
                common = (gitdir / "commondir").read_text().strip()
            except OSError:
                return d
            common_dir = Path(common) if Path(common).is_absolute() else gitdir / common
            return common_dir.resolve().parent
    return None


def project_key(root: Path) -> str:
    return "".join(c if c.isalnum() else "-" for c in str(root))


def folder_for(home: Path, root: Path) -> Path:
    return home / "projects" / project_key(git_root(root) or root) / "memory"


@dataclass
class Index:
    before: str = ""  # the user's text above the agent's section
    after: str = ""  # and below it
    inside: list[str] | None = None  # the lines of the agent's section (None: there is none)
    edited: bool = False  # they are not what the agent last wrote
    foreign: list[str] = field(
        default_factory=list
    )  # lines inside it the agent did not write (kept as theirs)
    damaged: str = ""  # why the file could not be read as written (it was copied aside)


class Store:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.problems: list[str] = []  # what the user should be told (a damaged file, a hand edit)

    @property
    def index_path(self) -> Path:
        return self.folder / INDEX

    @contextmanager
    def locked(self) -> Iterator[None]:
        make_private_dirs(self.folder)
        with locked(self.folder / LOCK):
            yield

    # --- reading ------------------------------------------------------------------------------------------
    def read(self) -> tuple[list[Memory], dict[str, str]]:
        """The records and the hashes of what was last written (file name -> sha256)."""
        path = self.folder / RECORDS
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return [], {}
        except OSError as e:
            self.problems.append(f"{path} can't be read ({e.strerror}); memory starts empty this time")
            return [], {}
        try:
            data = json.loads(raw.decode("utf-8"))
            memories = [Memory.from_dict(d) for d in data["memories"]]
            written = {str(k): str(v) for k, v in (data.get("written") or {}).items()}
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            kept = self._set_aside(path, raw)
            self.problems.append(
                f"{path} is damaged ({type(e).__name__}); a copy is kept at {kept} and memory starts again from "
                "this session's records"
            )
            return [], {}
        return memories, written

    def read_index(self, written_hash: str | None) -> Index:
        path = self.index_path
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return Index()
        except OSError as e:
            self.problems.append(f"{path} can't be read ({e.strerror})")
            return Index(damaged="unreadable")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            kept = self._set_aside(path, raw)
            self.problems.append(
                f"{path} is not valid UTF-8 (byte {e.start}); the file as it was is kept at {kept}, and its "
                "readable text stays in MEMORY.md as your own"
            )
            return Index(before=_without_markers(raw.decode("utf-8", "replace")), damaged="encoding")
        lines = text.splitlines()
        starts = [i for i, line in enumerate(lines) if line.strip() == START]
        ends = [i for i, line in enumerate(lines) if line.strip() == END]
        if not starts and not ends:
            return Index(before=text)  # all the user's (or Claude Code's): kept, the agent's section added
        if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
            kept = self._set_aside(path, raw)
            self.problems.append(
                f"{path}: the markers around the agent's section are damaged ({len(starts)} start, {len(ends)} "
                f"end); the file as it was is kept at {kept}, its text stays in MEMORY.md as your own, and the "
                "agent's section is written again"
            )
            return Index(before=_without_markers(text), damaged="markers")
        first, last = starts[0], ends[0]
        inside = lines[first + 1 : last]
        edited = written_hash is not None and _hash("\n".join(inside)) != written_hash
        return Index(
            before="\n".join(lines[:first]), after="\n".join(lines[last + 1 :]), inside=inside, edited=edited
        )

    def _set_aside(self, path: Path, raw: bytes) -> Path:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        kept = path.with_name(f"{path.name}.damaged-{stamp}-{os.getpid()}")
        make_private_dirs(kept.parent)
        fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        return kept

    # --- writing ------------------------------------------------------------------------------------------
    def write(self, memories: list[Memory], index: Index, written: dict[str, str]) -> dict[str, str]:
        """Write the records, the topic files and MEMORY.md; returns the hashes of what was written."""
        make_private_dirs(self.folder)
        out: dict[str, str] = {}
        for topic in TOPICS:
            mine = [m for m in memories if m.topic == topic]
            path = self.folder / f"{topic}.md"
            if not mine and not path.exists():
                continue
            text = topic_file(topic, mine)
            self._keep_hand_edit(path, written.get(path.name))
            replace_private(path, text)
            out[path.name] = _hash(text)
        block = index_block(memories)
        out[INDEX] = _hash(block)
        user_before = index.before.rstrip("\n")
        if index.foreign:
            user_before = "\n".join(
                [
                    *([user_before] if user_before else []),
                    "",
                    "Kept from your edit of the agent's section:",
                    *index.foreign,
                ]
            )
        parts = [user_before] if user_before else ["# Memory", ""]
        parts += [START, block, END]
        if index.after.strip():
            parts.append(index.after.rstrip("\n"))
        replace_private(self.index_path, "\n".join(parts) + "\n")
        records = {"version": VERSION, "memories": [m.to_dict() for m in memories], "written": out}
        replace_private(self.folder / RECORDS, json.dumps(records, indent=1, ensure_ascii=False) + "\n")
        return out

    def _keep_hand_edit(self, path: Path, written_hash: str | None) -> None:
        """A topic file the user edited by hand is copied aside before it is written again (and they are told)."""
        try:
            raw = path.read_bytes()
        except OSError:
            return
        if written_hash is None or _hash(raw.decode("utf-8", "replace")) == written_hash:
            return
        kept = self._set_aside(path, raw)
        self.problems.append(
            f"{path} was edited by hand; it is rewritten from the records (your version is kept at {kept}; "
            "write your own memories outside the markers of MEMORY.md, or in a file of your own here)"
        )


def ids_in(lines: list[str]) -> list[str]:
    return [m.group(1) for line in lines for m in [_LINK_ID.search(line)] if m]


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _without_markers(text: str) -> str:
    """A damaged file's text without what the agent writes again from its records (the markers, its index
    lines and headings): the rest is the user's. (The file as it was is kept aside whole.)"""
    ours = {START, END, *(f"## {heading}" for _, heading in SECTIONS), STALE_HEADING}
    return "\n".join(
        line for line in text.splitlines() if line.strip() not in ours and not _LINK_ID.search(line)
    )


# --- what the files say --------------------------------------------------------------------------------------

SECTIONS = [
    ("commands", "Build, test, lint and run"),
    ("rules", "The user's rules and corrections"),
    ("notes", "Asked to remember"),
    ("decisions", "Decisions and failed approaches"),
    ("places", "Where things are"),
]


STALE_HEADING = "## Stale: no longer true (kept until they expire; do not rely on them)"


def _when(ts: str) -> str:
    return ts[:16].replace("T", " ") + " UTC" if ts else ""


def index_line(m: Memory) -> str:
    link = f"[{m.title}]({m.topic}.md#m-{m.id})"
    if m.state == STALE:
        return f"- {link} — STALE, not current: {m.text} — {m.reason}"
    said = f" (the user, {_when(m.newest)})" if m.origin == "user" else ""
    text = f'"{m.text}"' if m.origin == "user" else m.text
    note = f" (refreshed at load: {m.reason})" if m.state == REFRESHED else ""
    return f"- {link} — {text}{said}{note}"


def index_block(memories: list[Memory]) -> str:
    lines: list[str] = []
    for topic, heading in SECTIONS:
        mine = [m for m in memories if m.topic == topic and m.state in SERVED]
        if mine:
            lines += [f"## {heading}", *(index_line(m) for m in mine), ""]
    stale = [m for m in memories if m.state == STALE]
    if stale:
        lines += [STALE_HEADING, *(index_line(m) for m in stale), ""]
    return "\n".join(lines).rstrip("\n")


def topic_file(topic: str, memories: list[Memory]) -> str:
    name, kind, description = TOPICS[topic]
    lines = [
        "---",
        f"name: {name}",
        f"description: {description}",
        f"type: {kind}",
        "---",
        "",
        f"# {name}",
        "",
    ]
    for m in memories:
        state = m.state + (f" ({m.reason})" if m.reason else "")
        lines += [f'<a id="m-{m.id}"></a>', f"## {m.title}", "", m.text, "", f"- state: {state}"]
        if m.verified:
            lines.append(f"- checked: {_when(m.verified)}")
        lines.append(
            f"- from: {'the user' if m.origin == 'user' else 'the agent' + chr(39) + 's records' if m.origin == 'agent' else 'the model'}"
        )
        lines += [f"- evidence: {e.describe()}" for e in m.evidence]
        lines.append("")
    return "\n".join(lines)


def live(memories: list[Memory]) -> list[Memory]:
    return [m for m in memories if m.state not in (FORGOTTEN, EXPIRED)]
