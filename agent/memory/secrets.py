"""Nothing secret enters memory: API keys, tokens, passwords and the values of the project's ``.env``
files are replaced before a memory is written (``redact``), and every memory is checked again when it is
loaded (``has_secret``), since a hand edit or an older version could have let one in.

Two sources: the shapes of known credentials (provider key prefixes, bearer headers, private key blocks,
``name=value`` assignments whose name says secret), and the literal values the project keeps in its
``.env`` files and the agent's own credentials (``extra``), whatever they look like.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

MARK = "[redacted]"
MIN_VALUE_CHARS = 6  # a shorter .env value ("1", "true", "dev") would redact ordinary words
ENV_FILES = (".env", ".env.local", ".env.development", ".env.production", ".env.test")
_NAME = r"[A-Za-z0-9_.-]*(?:api[_-]?key|secret|token|passw(?:or)?d|pwd|credential|private[_-]?key|auth[_-]?token)[A-Za-z0-9_.-]*"
SHAPES = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S),
    re.compile(r"\bsk-ant-[A-Za-z0-9_-]{8,}"),
    re.compile(r"\bsk-(?:live|test|proj)?-?[A-Za-z0-9_-]{16,}"),
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{16,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)\bauthorization:\s*(?:bearer\s+|basic\s+|token\s+)?[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\b[Bb]earer\s+[A-Za-z0-9._~+/=-]{12,}"),
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),  # user:password@ in a URL
]
# NAME=value, NAME: value, "token": "value", --password=value
_ASSIGNED = re.compile(
    rf"(?i)(?P<name>\b{_NAME}\b[\"']?\s*[=:]\s*)(?P<quote>[\"']?)(?P<value>[^\s\"',;)]{{4,}})"
)


_HINT = re.compile(r"(?i)key|secret|token|passw|pwd|credential")  # no match: no secret-named assignment


def env_values(root: Path) -> set[str]:
    """The values the project's ``.env`` files set (long enough to be told from ordinary words)."""
    found: set[str] = set()
    for name in ENV_FILES:
        try:
            text = (root / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            value = line.split("=", 1)[1].strip().strip("\"'")
            if len(value) >= MIN_VALUE_CHARS:
                found.add(value)
    return found


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every secret it holds replaced by ``[redacted]``."""
    for value in sorted((v for v in extra if v and len(v) >= MIN_VALUE_CHARS), key=len, reverse=True):
        text = text.replace(value, MARK)
    for shape in SHAPES:
        text = shape.sub(MARK, text)
    if not _HINT.search(text):
        return text
    return _ASSIGNED.sub(lambda m: f"{m.group('name')}{m.group('quote')}{MARK}", text)


def has_secret(text: str, extra: Iterable[str] = ()) -> bool:
    """Whether ``redact`` would change ``text`` (searched, not rewritten: this runs at every start)."""
    if any(v and len(v) >= MIN_VALUE_CHARS and v in text for v in extra):
        return True
    if any(shape.search(text) for shape in SHAPES):
        return True
    return bool(_HINT.search(text)) and any(m.group("value") != MARK for m in _ASSIGNED.finditer(text))


def is_secret_file(path: str) -> bool:
    """A file whose lines are never cited as evidence (.env and friends, keys)."""
    name = Path(path).name.lower()
    return (
        name.startswith(".env")
        or name.endswith((".pem", ".key"))
        or name in ("id_rsa", "id_ed25519", ".netrc")
    )
