"""The read-only rules for Bash: which command lines only look (an Explore subagent runs nothing else).

Read-only is proven from what a command does, by an allow list of read-only forms, never by looking for
the spellings of options that write (issue 30: ``sort --outp=``, an abbreviation, slipped past such a
list). A line is read-only when

- it parses, every program in it is known (nothing unresolved or untold in ``tools.shell.reader``'s sense)
  and it sets no variable or configuration that changes what runs (``git -c core.fsmonitor=...``);
- it writes nowhere but /dev/null or a descriptor: redirections and the files programs write through their
  arguments (``uniq IN OUT``, ``file -C``, ``sed w``, ``tree -o``) are all in the reader's ``writes``;
- every program is on the looking list, and each of its options is one of that program's read-only
  options (an option not on its list refuses the line, abbreviations included), and git runs only a
  looking subcommand (``git reflog`` shows, ``git reflog expire`` is refused).

Everything else is refused with a sentence saying why; the user's permission rules still apply on top.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.shell.reader import Analysis, Command


def _o(text: str) -> frozenset[str]:
    return frozenset(text.split())


Check = Callable[[str, list[str]], "str | None"]


def _any(program: str, words: list[str]) -> str | None:
    """Programs with no option that writes a file or runs a program (cat, head, grep, wc...)."""
    return None


def _only(
    short: str = "",
    long: str = "",
    short_valued: str = "",
    long_valued: str = "",
    operands: int | None = None,
    numbers: bool = False,
) -> Check:
    """A program whose read-only options are exactly these: any other option refuses the line. Long options
    must be spelled out (``--outp`` is not ``--output`` here, whatever getopt_long would do)."""
    return _Options(short, _o(long), short_valued, _o(long_valued), operands, numbers)


@dataclass(frozen=True)
class _Options:
    """The check ``_only`` makes: ``(program, words)`` -> why the line is not read-only, or None."""

    short: str
    long: frozenset[str]
    short_valued: str
    long_valued: frozenset[str]
    operands: int | None
    numbers: bool

    def __call__(self, program: str, words: list[str]) -> str | None:
        count, i, rest = 0, 0, False
        while i < len(words):
            word = words[i]
            i += 1
            if rest or not word.startswith(("-", "+")) or word in ("-", "+"):
                count += 1
                if self.operands is not None and count > self.operands:
                    return f"{program} with more than {self.operands} file operand(s) writes the last one"
                continue
            if word == "--":
                rest = True
                continue
            why, takes_next = self._option(program, word)
            if why is not None:
                return why
            i += takes_next
        return None

    def _option(self, program: str, word: str) -> tuple[str | None, int]:
        """Why option ``word`` is not read-only (None: it is), and whether it takes the next word (0 or 1)."""
        if word.startswith("+"):  # date +FORMAT
            return (None if program == "date" else f"{program} {word} is not one of its read-only options"), 0
        if word.startswith("--"):
            name, eq, _ = word.partition("=")
            if name in self.long_valued:
                return None, 0 if eq else 1
            if name not in self.long or eq:
                return f"{program} {name} is not one of its read-only options", 0
            return None, 0
        if self.numbers and word[1:].isdigit():
            return None, 0
        for j, letter in enumerate(word[1:], 1):
            if letter in self.short_valued:
                return None, 0 if j < len(word) - 1 else 1
            if letter not in self.short:
                return f"{program} -{letter} is not one of its read-only options", 0
        return None, 0


def _tree(program: str, words: list[str]) -> str | None:
    for word in words:
        if word in ("-o", "-R") or word.startswith(("-o", "--fromfile")):
            return f"tree {word} writes files"
    return None


_LOOKING: dict[str, Check] = {
    **dict.fromkeys(
        "ls cat head tail wc grep egrep fgrep rg find du df pwd echo printf which type cut diff cmp "
        "basename dirname realpath readlink nl od hexdump md5sum sha256sum sha1sum sha512sum true false "
        "test [ column tac rev fold expand jq stat".split(),
        _any,
    ),
    # GNU sort: every option but -o/--output and --compress-program (which runs a program)
    "sort": _only(
        "bcdfghiMmnrRsuVzC",
        "--ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort "
        "--ignore-nonprinting --month-sort --human-numeric-sort --numeric-sort --random-sort --reverse "
        "--version-sort --check --merge --stable --unique --zero-terminated --debug --help --version",
        short_valued="ktST",
        long_valued="--key --field-separator --buffer-size --temporary-directory --sort --random-source "
        "--parallel --batch-size --files0-from",
    ),
    # uniq [INPUT [OUTPUT]]: the second operand is written, so only one is read-only
    "uniq": _only(
        "cdDiuz",
        "--count --repeated --ignore-case --unique --zero-terminated --help --version",
        short_valued="fsw",
        long_valued="--skip-fields --skip-chars --check-chars --all-repeated --group",
        operands=1,
        numbers=True,
    ),
    # file(1): -C/--compile writes a magic file, -m names the magic to read
    "file": _only(
        "0bcdEhiIkLlNnprsSvzZ",
        "--brief --checking-printout --debug --extension --dereference --no-dereference --mime "
        "--mime-type --mime-encoding --keep-going --list --no-pad --no-buffer --preserve-date --raw "
        "--special-files --uncompress --uncompress-noreport --print0 --help --version",
        short_valued="efFmP",
        long_valued="--exclude --exclude-quiet --files-from --separator --magic-file --parameter",
    ),
    "date": _only(
        "uIRr",
        "--utc --universal --rfc-email --iso-8601 --help --version",
        "dfr",
        "--date --file --reference --rfc-3339",
    ),
    "tree": _tree,
}
# sed: every option but -i/--in-place (its script's w and e commands are judged by the reader)
_SED = _only(
    "nEruszl",
    "--quiet --silent --regexp-extended --separate --unbuffered --null-data --zero-terminated --posix "
    "--debug --sandbox --help --version",
    short_valued="el",
    long_valued="--expression --line-length",
)
GIT_LOOKING = frozenset(
    "log status diff show blame ls-files ls-tree rev-parse grep describe shortlog cat-file "
    "rev-list reflog".split()
)
# git options that run a configured program (external diff, textconv filters, a pager on the files)
_GIT_RUNS = ("--ext-diff", "--textconv", "-O", "--open-files-in-pager", "--output")
# git reflog's subcommands: show and exists look; expire and delete change the reflog
_REFLOG_LOOKING = frozenset({"show", "exists"})
_WRAPPERS = frozenset({"xargs", "timeout", "nice", "env", "command"})


def refusal(command: str, cwd: Path, analysis: Analysis | None = None) -> str | None:
    """None when the line only reads; otherwise why it is not allowed under the read-only rules (``analysis``:
    the line already read, to spare a second parse)."""
    from tools.shell.reader import analyze  # start-up speed: the Bash reader loads with the first line judged

    a = analysis if analysis is not None else analyze(command, cwd)
    if a.error:
        return f"the line could not be read ({a.error})"
    if a.unresolved:
        return f"its program can't be determined statically ({a.unresolved[0]})"
    if a.untold:
        return f"what it runs can't be told ({a.untold[0]})"
    if a.variables:
        return f"it {a.variables[0]}, which can change what runs"
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
        return _git_refusal(c, words)
    if program == "sed":
        return _SED(program, words)
    check = _LOOKING.get(program)
    if check is None:
        return f"{program} is not on the read-only list (ls, cat, grep, find, git log/diff/show, ...)"
    return check(program, words)


def _git_refusal(c: Command, words: list[str]) -> str | None:
    if c.subcommand is None:
        return "git without a looking subcommand is not read-only"
    sub = c.words[c.subcommand].value or ""
    if sub not in GIT_LOOKING:
        return f"git {sub} is not a read-only git command"
    rest = words[c.subcommand :]
    for word in rest:
        if any(
            word == o or word.startswith(o + "=") or (o == "-O" and word.startswith("-O")) for o in _GIT_RUNS
        ):
            return f"git {sub} {word} runs a configured program or writes a file"
        if word.startswith("--") and any(
            o.startswith(word.split("=", 1)[0]) for o in _GIT_RUNS if len(word) > 4
        ):
            return f"git {sub} {word} may abbreviate an option that runs a program or writes a file"
    if sub == "reflog":
        action = next((w for w in rest if not w.startswith("-")), "show")
        if action not in _REFLOG_LOOKING and action in ("expire", "delete", "drop", "write"):
            return f"git reflog {action} changes the reflog"
    return None
