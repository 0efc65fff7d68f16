"""The read-only rules for Bash: which command lines only look (an Explore subagent runs nothing else).

A line is read-only when it parses, every program it runs is known and on the looking list below (with
the options that would make one of them write or run something else ruled out), and it redirects output
nowhere but /dev/null or a descriptor. Everything else is refused with a sentence saying why; the user's
permission rules still apply on top (deny wins).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.shell.reader import Command

LOOKING = frozenset(
    "ls cat head tail wc grep egrep fgrep rg find file stat du df tree pwd echo printf which type "
    "sort uniq cut diff cmp basename dirname realpath readlink date nl od hexdump md5sum sha256sum "
    "sha1sum true false test [ column tac rev fold expand jq".split()
)
# options that make a looking program change files or run other programs
FORBIDDEN_OPTIONS = {
    "find": ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"),
    "sort": ("-o", "--output"),
    "rg": ("--pre",),
}
GIT_LOOKING = frozenset(
    "log status diff show blame ls-files ls-tree rev-parse grep describe shortlog cat-file "
    "rev-list reflog".split()
)
_WRAPPERS = frozenset({"xargs", "timeout", "nice", "env", "command"})


def refusal(command: str, cwd: Path) -> str | None:
    """None when the line only reads; otherwise why it is not allowed under the read-only rules."""
    from tools.shell.reader import analyze  # start-up speed: the Bash reader loads with the first line judged

    a = analyze(command, cwd)
    if a.error:
        return f"the line could not be read ({a.error})"
    if a.unresolved:
        return f"its program can't be determined statically ({a.unresolved[0]})"
    for write in a.writes:
        if not write.paths or any(
            str(p) != "/dev/null" and not str(p).startswith("/dev/fd/") for p in write.paths
        ):
            return f"it writes to {write.target}"
    for c in a.commands:
        if why := _program_refusal(c):
            return why
    return None


def _program_refusal(c: Command) -> str | None:
    program = Path(c.program).name
    words = [w.value if w.value is not None else w.text for w in c.words[1:]]
    if c.wrapper and program in _WRAPPERS:
        return None  # what it runs is listed as a command of its own
    if program == "git":
        sub = next((w for w in words if not w.startswith("-")), "")
        return None if sub in GIT_LOOKING else f"git {sub} is not a read-only git command"
    if program == "sed":
        return "sed -i changes files" if any(w.startswith("-i") or w == "--in-place" for w in words) else None
    if program not in LOOKING:
        return f"{program} is not on the read-only list (ls, cat, grep, find, git log/diff/show, ...)"
    bad = FORBIDDEN_OPTIONS.get(program, ())
    hit = next((w for w in words if w in bad or any(w.startswith(b + "=") for b in bad)), None)
    return f"{program} {hit} changes files or runs other programs" if hit else None
