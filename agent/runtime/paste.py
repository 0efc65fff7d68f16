"""A prompt too big for the context (a huge paste): the model gets its start and the path of the whole.

``fit(session, text)`` returns ``text`` unchanged while it takes at most half of the auto-compact
threshold, so an ordinary paste reaches the model whole, before any compaction can touch it (a
compaction keeps the current request word for word). A bigger one could only be sent after it had
itself been summarized away; instead it is saved whole to the session's ``pastes/`` directory (0600) and
the prompt keeps its head plus one sentence that says exactly how many of its characters are left out
and where the whole is, which the model can Read in parts or Grep.
"""

from __future__ import annotations

import uuid

from agent.runtime.session import Session
from core.private import redact, secrets_of, write_private
from core.tokens import estimate_text

SHARE = 0.5  # of the auto-compact threshold, at most, for one prompt sent as it is
HEAD_SHARE = 0.5  # of that budget kept at the start of a prompt that is saved to a file


def fit(session: Session, text: str) -> str:
    """``text``, or its head and a note naming the file that holds all of it (see the module docstring)."""
    budget = int(session.thresholds().auto_compact * SHARE)
    if estimate_text(text) <= budget:
        return text
    path = session.session_dir / "pastes" / f"{uuid.uuid4().hex[:12]}.txt"
    # (its directories made private too); the key never reaches disk, even pasted (issue 30)
    write_private(path, redact(text, secrets_of(session.settings.api_key, session.settings.auth_token)))
    keep = max(0, int(len(text) * budget * HEAD_SHARE / max(1, estimate_text(text))))
    head = text[:keep]
    return (
        f"{head}\n\n[This message is {len(text):,} characters long, too long for the context window: "
        f"the {len(text) - len(head):,} characters after the first {len(head):,} are not shown here. "
        f"The whole message is saved in {path}; read it with Read (offset and limit) or search it with "
        "Grep.]"
    )
