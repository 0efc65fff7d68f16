"""The session notes document: a Markdown file of ten sections kept beside the transcript (docs/compaction.md).

``<session dir>/session-memory/summary.md`` is created from the template (compact.compaction.notes_template, or
the user's own ``$COMPACT_AGENT_HOME/session-memory-template.md``), private to the user (file 0600,
dirs 0700). This module only reads, creates and measures it; compact.compaction.notes_updater keeps it current
in the background and compact.compaction.notes_compaction puts it in place of old history. No model calls.
"""

from __future__ import annotations

import os
from pathlib import Path

from compact.compaction.notes_template import SECTION_TOKENS, TEMPLATE
from compact.context.conversation import Conversation, Ports
from core.private import open_private, replace_private, write_private
from core.tokens import estimate_text

VERSIONS = "versions"  # beside the notes: the notes as they were when they covered a given message
MAX_VERSIONS = 50


def template_for(ports: Ports) -> str:
    """The user's template (``$COMPACT_AGENT_HOME/session-memory-template.md``) if any, else ours."""
    override = ports.config.notes_template
    if override is None:
        return TEMPLATE
    try:
        text = override.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return TEMPLATE
    return text if text.strip() else TEMPLATE


def ensure_notes(conv: Conversation, ports: Ports) -> Path:
    """The notes file, created from the template (private: file 0600, directories 0700) if missing."""
    path = conv.notes_path
    try:
        fd = open_private(path, os.O_WRONLY | os.O_EXCL)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(template_for(ports))
    return path


def notes_text(path: Path) -> str | None:
    """The notes as they are on disk (for ``/memory``); None when there are none yet."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def is_template(text: str, template: str = TEMPLATE) -> bool:
    """True when the notes hold nothing beyond the template's headers and guidance lines."""
    known = {line.strip() for line in f"{template}\n{TEMPLATE}".splitlines()}
    return all(not line.strip() or line.strip() in known for line in text.splitlines())


def headers(template: str) -> list[str]:
    return [line.rstrip() for line in template.splitlines() if line.startswith("# ")]


def split_sections(text: str, header_lines: list[str]) -> list[tuple[str, str]]:
    """(header line, body) pairs in order; text before the first header comes with header "".

    Only the template's header lines start a section, so a "# comment" inside a code block doesn't.
    """
    known = {h.strip() for h in header_lines}
    parts: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines(keepends=True):
        if line.strip() in known and line.startswith("# "):
            parts.append((line, []))
        else:
            parts[-1][1].append(line)
    return [(h, "".join(body)) for h, body in parts if h or body]


def section_name(header_line: str) -> str:
    return header_line.strip().removeprefix("# ").strip()


def trim_sections(text: str, header_lines: list[str], path: Path, tokens: int = SECTION_TOKENS) -> str:
    """The notes with each section within about ``tokens`` (the size the update instruction promised,
    notes_template.section_tokens): a longer one keeps its guide line and its newest lines — the
    latest corrections and steps — and says where the older ones are."""
    out = []
    for header, body in split_sections(text, header_lines):
        if header and estimate_text(body) > tokens:
            body = _newest(body, tokens, path)
        out.append(header + body)
    return "".join(out)


def _newest(body: str, tokens: int, path: Path) -> str:
    lines = body.splitlines()
    guide = lines[:1] if lines and lines[0].strip().startswith("_") else []
    rest = lines[len(guide) :]
    kept: list[str] = []
    used = estimate_text("\n".join(guide)) + 30  # the note below
    for line in reversed(rest):
        cost = estimate_text(line) + 1
        if used + cost > tokens:
            break
        kept.insert(0, line)
        used += cost
    if not kept and rest:  # one huge line: its end
        kept = [rest[-1][-tokens * 3 :]]
    left = len(rest) - len(kept)
    note = f"[… {left} older lines of this section are left out here; the whole section is in {path}]"
    return "\n".join([*guide, note, *kept]) + "\n\n"


def oversized_sections(text: str, header_lines: list[str], tokens: int = SECTION_TOKENS) -> list[str]:
    return [
        section_name(h)
        for h, body in split_sections(text, header_lines)
        if h and estimate_text(body) > tokens
    ]


# --- versions: what the notes said when they covered a message (for /rewind) -------------------------------


def save_version(path: Path, marker: str) -> None:
    """Keep the notes as they are now, named by ``marker`` (the last message they cover), so a rewind
    to before a later prompt can put back the notes that never saw what followed. Private; the oldest
    go past MAX_VERSIONS. Best effort: a full disk loses a version, never the notes."""
    text = notes_text(path)
    if text is None:
        return
    folder = path.parent / VERSIONS
    try:
        write_private(folder / f"{marker}.md", text)
        saved = sorted(folder.glob("*.md"), key=lambda p: p.stat().st_mtime)
        for old in saved[:-MAX_VERSIONS]:
            old.unlink(missing_ok=True)
    except OSError:
        return


def restore_version(path: Path, live_uuids: list[str], template: str) -> str | None:
    """Put back the newest saved notes whose marker is still in ``live_uuids`` (oldest first); the
    template when none is. Returns the marker now covered (None: the notes cover nothing)."""
    folder = path.parent / VERSIONS
    for uuid in reversed(live_uuids):
        saved = folder / f"{uuid}.md"
        if saved.is_file():
            replace_private(path, saved.read_text(encoding="utf-8"))
            return uuid
    replace_private(path, template)
    return None
