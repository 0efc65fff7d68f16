"""A compaction candidate and its deterministic checks (SPEC §15): what may replace part of the history.

A candidate is prepared in the background (compact.preparer) before the threshold: a summary of the
messages it saw, or the session notes as an update left them. Before it replaces anything it must pass
``validate``, which looks only at the candidate and the messages it would replace — no model call, no
clock — and answers with the reason it is refused, or None:

    empty                     nothing but whitespace
    truncated                 the reply stopped at max_tokens, a <summary> was opened and never closed,
                              a code fence is left open, or the text ends mid-sentence (",", "and" …)
    missing sections          a required section heading is absent (the summary's request and current
                              work, the notes' ten)
    misquoted user            a quotation given as the user's words is not in any of the user's messages
    not smaller               it is at least as large as what it replaces

``still_covered`` answers the other question asked at the threshold: of what the candidate saw, which
leading messages are still there unchanged (snip, microcompact or a collapse may have changed some).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from core.messages import Message
from core.tokens import estimate_text

SUMMARY_SECTIONS = (
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and fixes",
    "Problem Solving",
    "All user messages",
    "Pending Tasks",
    "Current Work",
    "Optional Next Step",
)
# the sections a summary cannot go without: what the user wants, and where the work stands (the others
# may be empty or merged by a terse model; the ledger carries files, commands and the user's words anyway)
REQUIRED_SUMMARY_SECTIONS = ("Primary Request and Intent", "Current Work")
# the sections in which a quotation stands for what the user said
USER_SECTIONS = ("All user messages", "Optional Next Step")
MIN_QUOTE = 12  # shorter quotations (a word or two in quotes) are names, not the user's words
_QUOTE = re.compile(r"[\"“]([^\"”\n]{%d,})[\"”]" % MIN_QUOTE)
_DANGLING = re.compile(r"(?:[,;(\-–]|\b(?:and|or|the|a|an|to|of|with|for|in|that|which|but))$", re.I)


@dataclass
class Candidate:
    """A compaction prepared ahead of the threshold.

    ``seen`` holds, in order, the uuid and a fingerprint of every message the candidate's request
    included (as the model saw it); ``covers`` is how many of them it may replace (a tool run still
    waiting for results is seen but not covered)."""

    method: str  # "summary" | "session-memory"
    summary: str
    seen: tuple[tuple[str, str], ...]
    covers: int
    replaced_tokens: int  # tokens of the covered messages when it was made
    stop_reason: str | None = None
    raw: str = ""  # the reply as it came (a summary's <analysis> included)
    seconds: float = 0.0  # how long it took to prepare
    rejected: str | None = None
    usage: dict[str, int] = field(default_factory=dict)

    @property
    def covered_uuids(self) -> list[str]:
        return [u for u, _ in self.seen[: self.covers]]


def fingerprint(m: Message) -> str:
    """What the model saw of a message, in a few bytes: changes when snip, microcompact or a collapse
    changes its content."""
    return hashlib.sha1(json.dumps([m.role, m.content], sort_keys=True).encode()).hexdigest()[:16]


def still_covered(
    candidate: Candidate, current: Sequence[Message], stands_in: frozenset[str] = frozenset()
) -> int:
    """How many leading messages of ``current`` (the model's view now) the candidate may replace.

    Walks the view in order: a message the candidate covered and that is unchanged counts; one it saw
    that is gone from the view (snipped, collapsed) is simply skipped; the first message it did not
    see, or that changed since, ends the run — text the candidate never saw is never replaced. The one
    exception, ``stands_in``: messages a compaction put in place of messages the candidate saw every
    one of (that compaction's summary and attachments) — the candidate holds what they stood for."""
    covered = dict(candidate.seen[: candidate.covers])
    n = 0
    for m in current:
        if m.uuid not in stands_in and covered.get(m.uuid) != fingerprint(m):
            break
        n += 1
    return n


def validate(
    candidate: Candidate,
    *,
    required: Iterable[str] = (),
    user_texts: Iterable[str] = (),
    replaced_tokens: int | None = None,
) -> str | None:
    """The reason the candidate must not be used, or None when it may replace what it covers."""
    text = candidate.summary.strip()
    if not text:
        return "empty"
    truncated = _truncation(candidate, text)
    if truncated:
        return f"truncated ({truncated})"
    missing = [s for s in required if not _has_section(text, s)]
    if missing:
        return f"missing sections: {', '.join(missing)}"
    misquoted = misquoted_user(text, user_texts) if candidate.method == "summary" else None
    if misquoted:
        return f"quotes the user with words the user did not write: “{_short(misquoted)}”"
    size = estimate_text(text)
    limit = candidate.replaced_tokens if replaced_tokens is None else replaced_tokens
    if size >= limit:
        return f"not smaller than what it replaces ({size:,} ≥ {limit:,} tokens)"
    return None


def _truncation(candidate: Candidate, text: str) -> str | None:
    if candidate.stop_reason == "max_tokens":
        return "the reply reached max_tokens"
    raw = candidate.raw or ""
    if "<summary>" in raw and "</summary>" not in raw:
        return "the <summary> was never closed"
    if text.count("```") % 2:
        return "a code block was left open"
    if _DANGLING.search(text.rstrip("*_ ")):
        return "it ends mid-sentence"
    return None


def _has_section(text: str, name: str) -> bool:
    """A heading line naming the section (numbered, markdown or bold), case and punctuation aside."""
    want = _norm(name)
    return any(_norm(line).startswith(want) for line in text.splitlines() if line.strip())


def _norm(s: str) -> str:
    return re.sub(r"[^a-z&]+", " ", re.sub(r"^[\s#*\d.)\-]+", "", s.lower())).strip()


def misquoted_user(text: str, user_texts: Iterable[str]) -> str | None:
    """The first quotation in a section that gives the user's words which no user message holds."""
    said = [_squash(t) for t in user_texts]
    for quote in _quotes_in_user_sections(text):
        q = _squash(quote).rstrip(".…")
        if q and not any(q in s for s in said):
            return quote
    return None


def _quotes_in_user_sections(text: str) -> list[str]:
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if _is_heading(line):
            inside = any(_norm(line).startswith(_norm(s)) for s in USER_SECTIONS)
            continue
        if inside:
            out.extend(_QUOTE.findall(line))
    return out


def _is_heading(line: str) -> bool:
    n = _norm(line)
    return any(n.startswith(_norm(s)) for s in SUMMARY_SECTIONS) and len(n) <= 60


def _squash(s: str) -> str:
    return " ".join(s.split()).lower()


def _short(s: str, limit: int = 60) -> str:
    return s if len(s) <= limit else s[: limit - 1] + "…"
