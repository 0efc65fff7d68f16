"""``@path`` in a prompt: the user puts a file (or a directory's listing) into the context on purpose.

``attachments(session, text)`` finds each ``@path`` word in a prompt and returns one context message
per path that exists: a file's numbered lines as the Read tool shows them (and the file counts as read,
so an Edit needs no Read first), a directory's entries. A path is read by the Read tool's rules: one the
user's Read deny rules cover is refused, one outside the project asks first (refused where nobody can
answer), and either is reported in one line instead; one that does not exist is left alone. A path an
untrusted project's custom command wrote (``session.foreign_mentions``) is attached only from inside the
project, in every mode. ``complete(cwd, word)`` lists the candidates for
the REPL's completion of a partly typed ``@pa``.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent.runtime.session import Session
from core.messages import Message, meta
from tools.base import ToolError
from tools.read import ReadTool

MENTION = re.compile(r"(?<![\w@])@((?:\\ |[^\s@])+)")  # "@src/x.py", "@my\ file.md"; not a@b.c
TRAILING = ".,;:!?)]}'\""  # punctuation after a mention ends the sentence, not the path
MAX_ENTRIES = 200  # a directory listing attached in full up to this many entries
MAX_COMPLETIONS = 50


def mentioned(text: str) -> list[str]:
    """The ``@`` paths a prompt names, in order, each once."""
    found: list[str] = []
    for match in MENTION.finditer(text):
        raw = match.group(1).replace("\\ ", " ").rstrip(TRAILING)
        if raw and raw not in found:
            found.append(raw)
    return found


# the record field naming the ``@`` path a context message answers (what the REPL's line under the prompt
# says: ``shown``), and, for a file or a directory, how many lines or entries went in
MENTIONED = "mention"
SIZE = "mentionSize"


def attachments(session: Session, text: str) -> list[Message]:
    """The context messages for the prompt's ``@`` paths (see the module docstring)."""
    out: list[Message] = []
    foreign, session.foreign_mentions = session.foreign_mentions, frozenset()  # for this prompt only
    for raw in mentioned(text):
        path = session.tool_ctx.resolve(raw)
        if not path.exists():
            continue  # "@someone" in prose: not a path, nothing to say
        if raw in foreign and (why := _foreign_refused(session, path)):
            message = meta(f"@{raw} was not attached: {why}.")
        elif why := _refused(session, path):
            message = meta(f"@{raw} was not attached: {why}.")
        elif path.is_dir():
            message = _listing(raw, path)
        else:
            message = _file(session, raw, path)
        out.append(message.replace(extra={**message.extra, MENTIONED: raw}))
    return out


def shown(message: Message) -> tuple[str, bool] | None:
    """The line the REPL shows for an ``@`` attachment, and whether it went in (None: no attachment)."""
    raw = message.extra.get(MENTIONED) if message.kind == "meta" else None
    if not isinstance(raw, str):
        return None
    if "attachedPath" not in message.extra:  # refused, or it could not be read: the message says why
        return message.text.strip(), False
    size = message.extra.get(SIZE)
    if message.text.startswith("The user attached the directory"):
        return f"Attached @{raw} ({size} entr{'y' if size == 1 else 'ies'})", True
    if isinstance(size, int):
        return f"Attached @{raw} ({size} line{'' if size == 1 else 's'})", True
    return f"Attached @{raw}", True


def _refused(session: Session, path: Path) -> str | None:
    """Why ``path`` may not be attached, by the rules the Read tool follows (issue 30): a Read deny rule
    refuses it; a file outside the project asks the user first (a custom command's body, which the user
    didn't write, could name ``@~/.ssh/id_rsa``), and nobody can answer in print mode."""
    decision = session.permissions.check("Read", {"file_path": str(path)}, cwd=session.tool_ctx.cwd)
    if decision.behavior == "allow":
        return None
    if decision.behavior == "deny":
        return "the user's permission rules deny reading it"
    if session.ask is None or session.cancel.is_set():
        return f"reading it needs the user's approval ({decision.reason}) and nobody can give it here"
    args = {"file_path": str(path)}
    answer = session.ask("Read", args, session.permissions.describe("Read", args))
    if answer == "always":
        session.permissions.allow_for_session(session.permissions.suggest_rule("Read", args))
    elif answer != "yes":
        return "the user said no"
    return None


def _foreign_refused(session: Session, path: Path) -> str | None:
    """An ``@`` path written by an untrusted project's custom command, not by the user: attached only when
    it is a file of the project itself (links followed), whatever the mode, bypassPermissions included
    (issue 40: ``@~/.ssh/id_rsa`` or ``@../file`` in a repository's command body)."""
    try:
        resolved = path.resolve()
        root = Path(session.settings.root).resolve()
    except (OSError, RuntimeError):
        return "it can't be resolved"
    if resolved == root or root in resolved.parents:
        return None
    return (
        "it comes from a custom command of a project you haven't trusted, and it names a file outside the "
        "project"
    )


def _file(session: Session, raw: str, path: Path) -> Message:
    try:
        result = ReadTool().run({"file_path": str(path)}, session.tool_ctx)  # records the read
    except (ToolError, OSError) as e:
        return meta(f"@{raw} could not be attached: {e}")
    if not isinstance(result.content, str):  # an image: its blocks, as Read returns them
        return Message(
            "user",
            [{"type": "text", "text": f"The user attached {path}:"}, *result.content],
            kind="meta",
            extra={"attachedPath": str(path)},
        )
    lines = len(result.content.rstrip("\n").splitlines())
    return meta(
        f"The user attached {path} (@{raw}); its contents, as the Read tool shows them:\n{result.content}",
        attachedPath=str(path),
        **{SIZE: lines},
    )


def _listing(raw: str, path: Path) -> Message:
    try:
        entries = sorted(path.iterdir(), key=lambda p: p.name)
    except OSError as e:
        return meta(f"@{raw} could not be listed: {e}")
    names = [p.name + ("/" if p.is_dir() else "") for p in entries[:MAX_ENTRIES]]
    more = len(entries) - len(names)
    tail = [f"… and {more} more entries"] if more > 0 else []
    text = "\n".join([f"The user attached the directory {path} (@{raw}); its entries:", *names, *tail])
    return meta(text, attachedPath=str(path), **{SIZE: len(entries)})


def complete(cwd: Path, word: str) -> list[str]:
    """Paths (relative as typed) that complete ``word``, the text after ``@``; directories end in /."""
    typed = Path(word).expanduser()
    base = typed if word.endswith("/") else typed.parent
    folder = base if base.is_absolute() else cwd / base
    prefix = "" if word.endswith("/") else typed.name
    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError:
        return []
    head = word[: len(word) - len(prefix)]
    out = []
    for p in entries:
        if p.name.startswith(prefix) and (prefix.startswith(".") or not p.name.startswith(".")):
            out.append(head + p.name + ("/" if p.is_dir() else ""))
        if len(out) >= MAX_COMPLETIONS:
            break
    return out
