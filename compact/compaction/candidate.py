"""A compaction candidate and its deterministic checks (docs/compaction.md): what may replace part of the history.

A candidate is prepared in the background (compact.workers.preparer) before the threshold: a summary of the
messages it saw, or the session notes as an update left them. Before it replaces anything it must pass
``validate``, which looks only at the candidate and the messages it would replace — no model call, no
clock — and answers with the reason it is refused, or None:

    empty                     nothing but whitespace
    truncated                 the reply stopped at max_tokens, a <summary> was opened and never closed,
                              a code fence is left open, or the text ends mid-sentence (",", "and" …)
    missing sections          a required section heading is absent (the summary's request and current
                              work, the notes' ten)
    invented user words       text presented as the user's (a quotation, a line of the user-messages
                              section, a sentence saying "the user said / approved / asked …") that no
                              message the user typed holds (``invented_user_words``)
    not smaller               it is at least as large as what it replaces

The same check runs on every text a compaction applies, prepared or foreground, summary or notes
(``scrub``, from compact.compaction.compactor): what it finds is taken out and said to have been taken out, and
``contradictions`` lists what the text says against the ledger's exact records (a failing command said
to pass, an edited file said untouched), which the working state shows next to those records.
The user's words are the transcript's typed prompts (compact.compaction.ledger's, across compactions), never an
earlier summary.

``still_covered`` answers the other question asked at the threshold: of what the candidate saw, which
leading messages are still there unchanged (snip, microcompact or a collapse may have changed some).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from compact.compaction.notes_template import TEMPLATE
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
SPEC_SECTION = "Task specification"  # the notes' section of what the user asked for, in their terms
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
    template: str = "",
) -> str | None:
    """The reason the candidate must not be used, or None when it may replace what it covers
    (``template``: the user's own notes template, whose guide lines are not the user's words either)."""
    text = candidate.summary.strip()
    if not text:
        return "empty"
    truncated = _truncation(candidate, text)
    if truncated:
        return f"truncated ({truncated})"
    missing = [s for s in required if not _has_section(text, s)]
    if missing:
        return f"missing sections: {', '.join(missing)}"
    invented = invented_user_words(text, user_texts, template)
    if invented:
        return f"presents as the user's words what the user did not write: “{_short(invented[0])}”"
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


def _is_heading(line: str) -> bool:
    n = _norm(line)
    return any(n.startswith(_norm(s)) for s in SUMMARY_SECTIONS) and len(n) <= 60


def _squash(s: str) -> str:
    return " ".join(s.split()).lower()


def _short(s: str, limit: int = 60) -> str:
    return s if len(s) <= limit else s[: limit - 1] + "…"


# --- text presented as the user's ---------------------------------------------------------------------

# a sentence that attributes something to the user: "the user said / asked / approved …", "User: …"
_ATTRIBUTED = re.compile(
    r"(?i)\b(?:the\s+)?user(?:'s)?\s*(?::|\b(?:said|says|wrote|writes|asked|asks|approved|approves|"
    r"allowed|allows|agreed|agrees|confirmed|confirms|wants|wanted|requested|requests|told|instructed|"
    r"permitted|authori[sz]ed|decided|insisted|prefers|preferred|rules?|messages?|request|instructions?|"
    r"corrections?|words)\b)"
)
_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?=[^\s.!?]))+(?:[.!?]+|$)")  # "a.py" does not end one
_WORD = re.compile(r"[\w/.-]{4,}")
_COMMON = frozenset(
    "that this with from have will would should could them they their there then than what when which "
    "about into also only just some more most very such each been were being your ours user user's "
    "said says asked asks wants wanted told approved allowed agreed confirmed requested request "
    "instructed permitted decided insisted prefers preferred rules rule message messages words".split()
)


def _stem(w: str) -> str:
    return w if len(w) < 6 or not w.isalpha() else w[:5]


_COMMON_STEMS = frozenset(_stem(w) for w in _COMMON)
MIN_OWN = 0.5  # an attributed passage with less of its content words in the user's messages is invented
REMOVED = (
    "[the agent removed a statement here that gave as the user's words what no message of the user says]"
)


def invented_user_words(text: str, user_texts: Iterable[str], template: str = "") -> list[str]:
    """The passages of ``text`` that present as the user's words what none of the user's messages says.

    Presented as the user's: a quotation in a user-messages section or in a sentence that attributes
    it to the user; every line of a user-messages section, quoted or not; any sentence that attributes
    something to the user ("the user approved deleting …"); a permission claimed in the notes' "Task
    specification" section (the user's terms) whoever it names. A quotation must appear in one message
    word for word (spacing and case aside); unquoted text must have most of its content words in the
    user's messages (MIN_OWN), so a paraphrase stands and an invention does not; and a permission ("the
    user approved / allowed …") must not turn around what the user said: when every sentence of the
    user's that holds most of its words is a refusal ("Don't delete tests/legacy/ yet"), it is invented.
    The notes template's guide lines (ours, and ``template``, the user's own) stand in every notes file
    and are nobody's words: "_What the user asked for, in their terms…_" is not the user asking for
    anything."""
    said = [_squash(t) for t in user_texts]
    vocabulary = {w for s in said for w in _words(s)}
    sentences = [
        (set(_words(sentence)), bool(_NEGATION.search(sentence)))
        for s in said
        for sentence in _SENTENCE.findall(s)
        if sentence.strip()
    ]
    out: list[str] = []
    for passage, in_user_section in _attributed(text, _guide_lines(template)):
        quotes = _QUOTE.findall(passage)
        if quotes:
            bad = any((q := _squash(x).rstrip(".…")) and not any(q in s for s in said) for x in quotes)
        else:
            words = [w for w in _words(_squash(_ATTRIBUTED.sub(" ", passage))) if w not in _COMMON_STEMS]
            bad = bool(words) and sum(w in vocabulary for w in words) < MIN_OWN * len(words)
            bad = bad and (in_user_section or len(words) >= 2)
            bad = bad or _turned_around(passage, words, sentences)
        if bad:
            out.append(passage.strip())
    return out


def _turned_around(passage: str, words: list[str], sentences: list[tuple[set[str], bool]]) -> bool:
    """True when ``passage`` claims a permission (not negated) and every sentence of the user's that
    holds the most of its content words (at least two, or all of them) says no."""
    if not _PERMISSION.search(passage) or _NEGATION.search(passage) or not words:
        return False
    wanted = set(words)
    best, refusals = 0, []
    for held, negated in sentences:
        n = len(wanted & held)
        if n > best:
            best, refusals = n, [negated]
        elif n == best and n:
            refusals.append(negated)
    return best >= min(2, len(wanted)) and all(refusals)


# a permission claimed for the user: what the user refused must not come back as approved
_PERMISSION = re.compile(
    r"(?i)\b(?:approv\w*|allow\w*|permit\w*|authori[sz]\w*|agreed|ok(?:'?d|ayed)|sign(?:ed)?\s+off|"
    r"go(?:es)?\s+ahead|fine\s+to|may|can)\b"
)
_NEGATION = re.compile(
    r"(?i)\b(?:not|never|no|nothing|don'?t|doesn'?t|mustn'?t|shouldn'?t|can'?t|cannot|won'?t|"
    r"hold\s+off)\b"
)


def _words(s: str) -> list[str]:
    """Content words, cut to a stem of five letters ("deleting" and "delete" are one word here)."""
    return [_stem(w.strip(".-/").lower()) for w in _WORD.findall(s) if w.strip(".-/")]


# the guide lines of our notes template (under each "# Section" header)
_GUIDES = frozenset(
    line.strip() for line in TEMPLATE.splitlines() if line.strip() and not line.startswith("#")
)


def _guide_lines(template: str) -> frozenset[str]:
    own = {line.strip() for line in template.splitlines() if line.strip() and not line.startswith("#")}
    return _GUIDES | own if own else _GUIDES


def _attributed(text: str, guides: frozenset[str] = _GUIDES) -> list[tuple[str, bool]]:
    """(passage, in a user-messages section) for every passage that speaks for the user; a template's
    guide line (``guides``, exactly as the template has it) speaks for no one."""
    out: list[tuple[str, bool]] = []
    section = ""
    spec = False  # in the notes' "Task specification": the user's terms
    for line in text.splitlines():
        if line.strip() in guides:
            continue
        if line.lstrip().startswith("#") and not _is_heading(line):
            spec = _norm(line).startswith(_norm(SPEC_SECTION))
            section = ""
            continue
        if _is_heading(line):
            section = next((s for s in USER_SECTIONS if _norm(line).startswith(_norm(s))), "")
            spec = False
            continue
        body = line.strip().lstrip("-*•>0123456789.) ").strip()
        if not body:
            continue
        if section == USER_SECTIONS[0]:  # every line of "All user messages" speaks for the user
            out.append((body, True))
            continue
        for sentence in _SENTENCE.findall(body):
            # the next step's section quotes the latest request: its quotations are the user's
            if (
                _ATTRIBUTED.search(sentence)
                or (section and _QUOTE.search(sentence))
                or (spec and _PERMISSION.search(sentence))
            ):
                out.append((sentence, False))
    return out


def scrub(text: str, user_texts: Iterable[str], template: str = "") -> tuple[str, list[str]]:
    """``text`` without the passages that invent the user's words (each replaced by REMOVED)."""
    found = invented_user_words(text, list(user_texts), template)
    for passage in found:
        text = text.replace(passage, REMOVED, 1)
    return text, found


# --- what the text says against the records ---------------------------------------------------------------

_PASSING = re.compile(
    r"(?i)\b(?:(?:all|the|every)\s+)?(?:tests?|checks?|suite|build|ci)\b[^.\n]{0,40}?\b(?:pass(?:es|ed|ing)?|"
    r"green|succeed(?:s|ed)?|all good|clean)\b"
)
_NOT_DONE = re.compile(
    r"(?i)\b(?:untouched|unchanged|not\s+(?:yet\s+)?(?:been\s+)?(?:edited|modified|changed|touched|started|done)|"
    r"still\s+to\s+(?:do|edit|change)|to\s+do\b|nothing\s+is\s+(?:finished|done)|left\s+as\s+it\s+was)"
)


def contradictions(text: str, failing: Sequence[str], modified: Sequence[str]) -> list[str]:
    """What ``text`` (a summary or the notes) says against the ledger's exact records, one line each:
    tests said to pass while commands' latest runs failed; a file this session edited said untouched
    or still to do. Shown to the model beside the records (compact.compaction.ledger)."""
    out: list[str] = []
    sentences = [s.strip() for line in text.splitlines() for s in _SENTENCE.findall(line) if s.strip()]
    if failing:
        claim = next((s for s in sentences if _PASSING.search(s) and not re.search(r"(?i)\bfail", s)), None)
        if claim:
            names = "; ".join(f"$ {_short(c, 80)}" for c in failing[:5])
            more = f" and {len(failing) - 5} more" if len(failing) > 5 else ""
            out.append(f"it says “{_short(claim, 100)}”, but the latest run of these failed: {names}{more}")
    untouched = [s for s in sentences if _NOT_DONE.search(s)]
    if untouched:
        said_not_done = [
            p for p in modified if any(p in s or (p.rsplit("/", 1)[-1] in s and "/" in p) for s in untouched)
        ]
        if said_not_done:
            names = ", ".join(said_not_done[:5]) + (
                f" and {len(said_not_done) - 5} more" if len(said_not_done) > 5 else ""
            )
            out.append(f"it says these are untouched or still to do, but this session edited them: {names}")
    return out


# --- how large a summary may be --------------------------------------------------------------------------

# a summary (or the notes) is at most this share of T: beside the system prompt, the tools and the working
# state, a longer one would leave the context over half of T after the compaction
SUMMARY_SHARE = 0.15
# a user message at least this long is a paste: the working state carries the user's words (its head and a
# pointer into the transcript when it is large), so a summary's copy of its lines is cut
PASTE_CHARS = 1_000
COPIED_RUN = 3  # this many copied lines in a row make a copy (a line or two is a quotation)
COPY_NOTE = (
    "[{n} lines copied from a message the user pasted are left out here: the user's words below hold it]"
)
CUT_NOTE = (
    "[the summary ran past {limit} tokens, the most a compaction keeps of it; its middle is left out. The "
    "working state below is exact, and the transcript holds every message]"
)


def bounded(text: str, user_texts: Iterable[str], limit: int) -> tuple[str, list[str]]:
    """``text`` within ``limit`` tokens, and what was done to it (one line each; none when it fit): first
    the runs of lines it copied from a long message the user typed (a paste, kept with the user's words
    anyway), then, if still over, its middle — its head says what the work is and its end where it stands."""
    done: list[str] = []
    pastes = [t for t in user_texts if len(t) >= PASTE_CHARS]
    if pastes:
        text, copied = _without_copies(text, pastes)
        if copied:
            done.append(f"{copied} lines copied from the user's pastes left out")
    size = estimate_text(text)
    if size > limit > 0:
        keep = max(0, len(text) * limit // size - len(CUT_NOTE) - 40)
        head, tail = text[: keep * 3 // 5], text[len(text) - keep * 2 // 5 :] if keep else ""
        head = head[: head.rfind("\n") + 1] if "\n" in head else head
        tail = tail[tail.find("\n") + 1 :] if "\n" in tail else tail
        text = "\n".join(p for p in (head.rstrip("\n"), CUT_NOTE.format(limit=limit), tail) if p)
        done.append(f"cut from {size} to {estimate_text(text)} tokens")
    return text, done


def _without_copies(text: str, pastes: list[str]) -> tuple[str, int]:
    lines = text.split("\n")
    copied = [len(s) >= 20 and any(s in p for p in pastes) for s in (line.strip() for line in lines)]
    out: list[str] = []
    total = i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and copied[j]:
            j += 1
        if j - i >= COPIED_RUN:
            out.append(COPY_NOTE.format(n=j - i))
            total += j - i
            i = j
        else:
            out.extend(lines[i : max(j, i + 1)])
            i = max(j, i + 1)
    return "\n".join(out), total
