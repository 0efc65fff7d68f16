"""What programs do through their arguments besides being themselves: commands they run and files they write.

``effects(values)`` reads one simple command's words (``None`` for a word with an expansion) and reports:

- ``scripts``: shell commands it runs whose text is known (``sed '1e rm f'``, ``git rebase --exec 'make'``,
  ``git submodule foreach ...``), to be parsed as bash in turn;
- ``unresolved``: why it runs something that can't be told (``s///e``, ``tar --to-command``, ``ssh -o
  ProxyCommand=``, ``vim -c '!...'``, ``awk 'BEGIN{system(...)}'``, a git alias, ``make CC=...``);
- ``writes``: files named in its arguments that it writes (``cp``/``mv``/``install``/``ln``/``rsync``
  destinations, ``tee``, ``dd of=``, ``sed -i``/``w FILE``, ``git log --output``, ``curl -o``...), and
  ``trees``: directories it fills with names that can't be told (``cp -r``, ``rsync``), ``unpacks``: the
  same from an archive (``tar -x``, ``unzip``), whose names come from outside;
- ``links``: it may create symbolic links, so later writes on the same line may go through them.

An allow rule for such a program covers it only when none of this is present: ``tools.permissions.engine`` asks
(and refuses under a deny rule) for what is unresolved, and judges writes as it judges redirections. Pure.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tools.shell import subcommands

Values = Sequence[str | None]


@dataclass(frozen=True)
class Effects:
    scripts: tuple[str, ...] = ()
    unresolved: str | None = None
    writes: tuple[str | None, ...] = ()  # None: a file named by an expansion
    trees: tuple[str, ...] = ()
    unpacks: tuple[str, ...] = ()  # trees filled from an archive: not even the names' sources are known
    links: bool = False
    reads: tuple[str, ...] = ()  # files it reads that its words don't show as such (sed's r FILE)


NONE = Effects()


@functools.cache  # a handful of regular expressions per program name, asked per command
def models(name: str) -> bool:
    """True for a program whose command-running arguments are modelled here."""
    return name in _PROGRAMS or any(pattern.fullmatch(name) for pattern, _ in _PATTERNS)


def effects(values: Values) -> Effects:
    name = (values[0] or "").rsplit("/", 1)[-1]
    reader = _PROGRAMS.get(name)
    if reader is None:
        for pattern, handler in _PATTERNS:
            if pattern.fullmatch(name):
                return handler(values)
        return NONE
    return reader(values)


def _o(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _why(values: Values, clause: str) -> Effects:
    return Effects(unresolved=f"{(values[0] or '').rsplit('/', 1)[-1]} {clause}")


def _literal(values: Values) -> list[str] | None:
    return None if any(v is None for v in values) else [v for v in values if v is not None]


def _operands(
    values: Values, valued: frozenset[str], short_valued: str = ""
) -> tuple[list[str | None], dict[str, Any]]:
    """Operands and option values (``{"-t": "dir"}``) of a GNU-style command line; options may follow
    operands (GNU permutes them) until ``--``."""
    operands: list[str | None] = []
    options: dict[str, str | None] = {}
    i, rest = 1, False
    while i < len(values):
        word = values[i]
        if rest or word is None or not word.startswith("-") or word == "-":
            operands.append(word)
        elif word == "--":
            rest = True
        elif word.startswith("--"):
            option, eq, value = word.partition("=")
            if option in valued and not eq:
                value, i = values[i + 1] if i + 1 < len(values) else "", i + 1  # type: ignore[assignment]
            options[option] = value
        else:
            for j, letter in enumerate(word[1:], 1):
                if letter in short_valued:
                    value = word[j + 1 :]
                    if not value:
                        value, i = values[i + 1] if i + 1 < len(values) else "", i + 1  # type: ignore[assignment]
                    options["-" + letter] = value
                    break
                options["-" + letter] = ""
        i += 1
    return operands, options


# ---- files written -----------------------------------------------------------------------------


def _copy(values: Values) -> Effects:
    """cp, mv, install, ln, rsync: the destination, and each source's name inside it (a directory)."""
    name = (values[0] or "").rsplit("/", 1)[-1]
    valued = _o("--target-directory --suffix --sparse --no-preserve --mode --owner --group --strip-program")
    short = {"cp": "St", "mv": "St", "install": "mogSt", "ln": "St", "rsync": "efBTM"}[name]
    if name == "rsync":
        valued |= _o(
            "--rsh --rsync-path --filter --exclude --include --exclude-from --include-from --files-from "
            "--backup-dir --temp-dir --compare-dest --copy-dest --link-dest --chmod --chown --log-file "
            "--password-file --partial-dir --remote-option"
        )
    operands, options = _operands(values, valued, short)
    if name == "install" and any(_gnu_long(o, "--strip-program", _INSTALL_LONG) for o in options):
        return _why(values, "--strip-program runs a program given in its arguments")
    if name == "rsync" and (
        "-e" in options
        or any(_gnu_long(o, r, _RSYNC_LONG) for o in options for r in ("--rsh", "--rsync-path"))
    ):
        return _why(values, "-e/--rsh/--rsync-path runs a command given in its arguments")
    if any(v is None for v in operands):
        return Effects(writes=(None,))
    target = options.get("-t") or options.get("--target-directory")
    sources = [v for v in operands if v is not None]
    if target is None:
        if name == "install" and "-d" in options:
            return Effects(writes=tuple(sources))
        if len(sources) < (1 if name == "ln" else 2):
            return NONE
        target = sources.pop() if len(sources) > 1 else "."
    names = [s.rstrip("/").rsplit("/", 1)[-1] for s in sources]
    writes = [target, *(f"{target.rstrip('/')}/{n}" for n in names if n not in ("", ".", ".."))]
    recursive = name in ("mv", "rsync") or bool(
        {"-r", "-R", "-a", "--recursive", "--archive"} & options.keys()
    )
    links = (name == "ln" and bool({"-s", "--symbolic"} & options.keys())) or (
        name in ("cp", "mv", "rsync")
        and bool({"-s", "--symbolic-link", "-a", "-d", "-P", "-l", "--archive", "--links"} & options.keys())
    )
    if recursive:
        return Effects(trees=tuple(writes), links=links or name == "mv")
    return Effects(writes=tuple(writes), links=links)


def _tee(values: Values) -> Effects:
    operands, _ = _operands(values, _o("--output-error"))
    return Effects(writes=tuple(v if v is not None else None for v in operands))


def _touch(values: Values) -> Effects:
    operands, _ = _operands(values, _o("--reference --date --size"), "rdts")
    return Effects(writes=tuple(v if v is not None else None for v in operands))


def _dd(values: Values) -> Effects:
    outs = [v[3:] if v is not None else None for v in values[1:] if v is None or v.startswith("of=")]
    return Effects(writes=tuple(outs))


def _sort(values: Values) -> Effects:
    _, options = _operands(
        values, _o("--output --compress-program -k --key -t -S -T --temporary-directory"), "oktST"
    )
    if any(_gnu_long(o, "--compress-program", _SORT_LONG) for o in options):
        return _why(values, "--compress-program runs a program given in its arguments")
    out = options.get("-o") or options.get("--output")
    return Effects(writes=(out,)) if out else NONE


def _download(values: Values) -> Effects:
    """curl -o/--output-dir, wget -O/-P: where the download lands."""
    curl = (values[0] or "").endswith("curl")
    if not curl and any(
        v is None
        or v == "-e"
        or (v.startswith("-e") and not v.startswith("--"))
        or any(_abbreviates(v, o) for o in ("--execute", "--use-askpass", "--config"))
        for v in values[1:]
    ):
        return _why(values, "-e/--execute, --use-askpass or --config can name a program it runs")
    valued = _o("--output --output-dir --output-document --directory-prefix")
    _, options = _operands(values, valued, "oHdXuAerTFx" if curl else "OPeU")
    keys = (
        ("-o", "--output", "--output-dir")
        if curl
        else ("-O", "--output-document", "-P", "--directory-prefix")
    )
    return Effects(writes=tuple(v or None for k, v in options.items() if k in keys and v != "-"))


# ---- sed ---------------------------------------------------------------------------------------


_SED_PLAIN = set("=dDgGhHlnNpPxzFqQLv}{")
_SED_LONG = _o(
    "--expression --file --in-place --line-length --null-data --zero-terminated --quiet --silent "
    "--regexp-extended --separate --sandbox --unbuffered --posix --debug --binary --follow-symlinks "
    "--help --version"
)


# the long options of GNU install, sort and rsync that are not prefixes of the program-naming ones, taken
# exactly ("--strip" is install -s, not an abbreviation of --strip-program)
_INSTALL_LONG = _o(
    "--strip --suffix --backup --compare --directory --group --mode --owner --preserve-timestamps"
)
_SORT_LONG = _o("--check --compress-program --debug")
_RSYNC_LONG = _o("--rsh --rsync-path")


def _gnu_long(word: str, option: str, exact: frozenset[str]) -> bool:
    """``word`` (an option as written, maybe with ``=value``) names the GNU long ``option``: itself, or a
    prefix of it that isn't exactly another option in ``exact`` (getopt_long takes any unambiguous prefix;
    an ambiguous one is counted too, failing closed)."""
    name = word.split("=", 1)[0]
    if name == option:
        return True
    return name.startswith("--") and len(name) > 2 and name not in exact and option.startswith(name)


def _long_option(option: str, known: frozenset[str]) -> str | None:
    """The long option ``option`` stands for: itself, or the one it uniquely abbreviates (getopt_long
    accepts ``--expr`` for ``--expression``); None when unknown or ambiguous."""
    if option in known:
        return option
    matches = [k for k in known if k.startswith(option)]
    return matches[0] if len(matches) == 1 else None


def _is_option(word: str, option: str) -> bool:
    """``word`` is ``option`` (``-x``, ``--exec``), with an attached value, or an abbreviation of it
    (git and getopt_long take ``--exe`` for ``--exec``)."""
    name = word.split("=", 1)[0]
    if option.startswith("--"):
        return name == option or (len(name) >= 4 and option.startswith(name))
    return word.startswith(option)


def _sed(values: Values) -> Effects:
    operands, scripts, i, in_place, sandbox = [], [], 1, False, False
    while i < len(values):
        word = values[i]
        if word is None:
            return _why(values, "has an argument with an expansion, so its script can't be read")
        nxt = values[i + 1] if i + 1 < len(values) else None
        if word.startswith("--") and word != "--":
            option, eq, value = word.partition("=")
            option = _long_option(option, _SED_LONG) or ""
            if not option:
                return _why(values, f"has the option {word}, unknown here, so its script can't be told")
            if option in ("--expression", "--file"):
                if option == "--file":
                    return _why(values, "reads its script from a file, which may run commands (e, s///e)")
                scripts.append(value if eq else nxt)
                i += 0 if eq else 1
            elif option == "--in-place":
                in_place = True
            elif option == "--sandbox":
                sandbox = True
            elif option in ("--line-length",):
                i += 0 if eq else 1
        elif word.startswith("-") and word != "-":
            for j, letter in enumerate(word[1:], 1):
                if letter in "ef":
                    if letter == "f":
                        return _why(values, "reads its script from a file, which may run commands (e, s///e)")
                    attached = word[j + 1 :]
                    scripts.append(attached or nxt)
                    i += 0 if attached else 1
                    break
                if letter == "l":
                    i += 0 if word[j + 1 :] else 1
                    break
                if letter == "i":
                    in_place = True
                    break  # -i[SUFFIX]
        else:
            operands.append(word)
        i += 1
    if not scripts:
        if not operands:
            return NONE
        scripts.append(operands.pop(0))
    runs: list[str] = []
    writes: list[str | None] = []
    reads: list[str] = []
    for script in scripts:
        if script is None:
            return _why(values, "has a script that can't be read")
        found = _sed_script(script)
        if isinstance(found, str):
            return _why(values, found)
        runs.extend(found[0])
        writes.extend(found[1])
        reads.extend(found[2])
    if sandbox and (runs or writes or reads):
        return NONE  # --sandbox makes sed refuse e, w and r
    if in_place:
        writes.extend(operands)
    return Effects(scripts=tuple(runs), writes=tuple(writes), reads=tuple(reads))


def _sed_script(script: str) -> tuple[list[str], list[str], list[str]] | str:
    """The shell commands (``e command``) and files (``w file``, ``s///w file``) of a sed script, or why
    it can't be told."""
    runs: list[str] = []
    writes: list[str] = []
    reads: list[str] = []
    i, n = 0, len(script)

    def to_eol(k: int) -> tuple[str, int]:
        end = script.find("\n", k)
        end = n if end < 0 else end
        return script[k:end].strip(), end

    def delimited(k: int, delimiter: str) -> int:
        """The index after the next unescaped ``delimiter`` from k (n when there is none)."""
        while k < n and script[k] != delimiter:
            k += 2 if script[k] == "\\" else 1
        return k + 1

    while i < n:
        ch = script[i]
        if ch in " \t\n;!" or ch.isdigit() or ch in "$,~+":
            i += 1
            continue
        if ch == "#":
            i = to_eol(i)[1]
            continue
        if ch in "/\\":  # an address /re/ or \cREc
            delimiter = script[i + 1] if ch == "\\" and i + 1 < n else "/"
            i = delimited(i + (2 if ch == "\\" else 1), delimiter)
            while i < n and script[i] in "IM":
                i += 1
            continue
        if ch in _SED_PLAIN:
            i += 1
            continue
        if ch in "btT:":  # labels end at ; or newline
            while i < n and script[i] not in ";\n":
                i += 1
            continue
        if ch in "aic":  # text to the end of the line, continued by a trailing backslash
            while i < n:
                text, i = to_eol(i)
                if not text.endswith("\\"):
                    break
                i += 1
            continue
        if ch in "rR":
            source, i = to_eol(i + 1)
            reads.append(source)
            continue
        if ch in "wW":
            target, i = to_eol(i + 1)
            writes.append(target)
            continue
        if ch == "e":
            command, i = to_eol(i + 1)
            if not command:
                return "has an e command, which runs the pattern space as a shell command"
            runs.append(command)
            continue
        if ch in "sy":
            if i + 1 >= n:
                return "has a script that can't be read"
            delimiter = script[i + 1]
            i = delimited(delimited(i + 2, delimiter), delimiter)
            if ch == "s":
                while i < n and script[i] not in ";\n}#":
                    if script[i] == "e":
                        return "has s///e, which runs the result of the substitution as a shell command"
                    if script[i] in "wW":
                        target, i = to_eol(i + 1)
                        writes.append(target)
                        break
                    i += 1
            continue
        return f"has a script that can't be read here (near {script[i : i + 12]!r})"
    return runs, writes, reads


# ---- archives ----------------------------------------------------------------------------------


_TAR_RUNS = (
    "--checkpoint-action",
    "--to-command",
    "--use-compress-program",
    "--info-script",
    "--new-volume-script",
    "--rsh-command",
    "--rmt-command",
)


def _tar(values: Values) -> Effects:
    words = [v for v in values[1:] if v is not None]
    if len(words) != len(values) - 1:
        return _why(values, "has an argument with an expansion, so what it runs can't be told")
    extract, directory = False, "."
    for k, word in enumerate(words):
        nxt = words[k + 1] if k + 1 < len(words) else ""
        if word.startswith("--"):
            option = word.split("=", 1)[0]
            if len(option) >= 4 and any(r.startswith(option) for r in _TAR_RUNS):
                return _why(values, f"{option} runs a command given in its arguments")
            extract = extract or option in ("--extract", "--get")
            if option == "--directory":
                directory = word.partition("=")[2] or nxt
        elif (word.startswith("-") or k == 0) and word != "-":
            why, extracts, into = _tar_letters(word.lstrip("-"), word.startswith("-"), nxt)
            if why is not None:
                return _why(values, why)
            extract = extract or extracts
            directory = into if into is not None else directory
    if not extract:
        return NONE
    return Effects(unpacks=(directory,), links=True)


def _tar_letters(letters: str, dashed: bool, nxt: str) -> tuple[str | None, bool, str | None]:
    """A bundle of tar's short options (``-xzf``, or ``xzf`` first): why it runs a program (None: it
    doesn't), whether it extracts, and the directory -C names (None: none)."""
    extract, directory = False, None
    for j, letter in enumerate(letters):
        if letter in "IF":
            return f"-{letter} runs a program given in its arguments", extract, directory
        extract = extract or letter == "x"
        if letter == "C":
            directory = letters[j + 1 :] or nxt
        if letter in "fbCgHKLNTVX" and dashed:
            break
    return None, extract, directory


def _unzip(values: Values) -> Effects:
    _, options = _operands(values, frozenset(), "dxP")
    if "-l" in options or "-v" in options or "-t" in options or "-p" in options or "-Z" in options:
        return NONE  # lists, tests or prints: writes nothing
    directory = options.get("-d") or "."
    return Effects(unpacks=(directory,), links=True)


def _zip(values: Values) -> Effects:
    """zip -TT CMD / --unzip-command CMD (any prefix of it: zip takes abbreviated long options) tests the
    archive by running CMD."""
    for v in values[1:]:
        if v is None:
            return _why(values, "has an argument with an expansion, so what it runs can't be told")
        if v == "--":
            break
        if (v.startswith("-") and not v.startswith("--") and "TT" in v) or _abbreviates(v, "--unzip-command"):
            return _why(
                values, f"{v.split('=', 1)[0]} runs a command given in its arguments to test the archive"
            )
    return NONE


# ---- programs that run commands from their arguments -------------------------------------------


def _always(clause: str) -> Callable[[Values], Effects]:
    def reader(values: Values) -> Effects:
        if len(values) == 2 and values[1] in ("--version", "--help", "-h", "-V", "-v"):
            return NONE
        return _why(values, clause)

    return reader


# option letters that take a value, per ssh(1), scp(1), sftp(1)
_SSH_VALUED = {"ssh": "BbcDEeFIiJLlmOopQRSWw", "scp": "cDFiJloPSX", "sftp": "BbcDFiJloPRSsX"}


def _ssh(values: Values) -> Effects:
    """ssh/scp/sftp: -o ProxyCommand/LocalCommand/KnownHostsCommand run local commands, -F names a
    configuration that may, scp/sftp -S name the ssh program and -D the sftp server they run; sftp reads
    commands (where ``!`` runs a local shell command) from -b's batch file or, without one, its input."""
    name = (values[0] or "").rsplit("/", 1)[-1]
    valued = _SSH_VALUED[name]
    operands: list[str] = []
    k = 1
    while k < len(values):
        word = values[k]
        if word is None:
            return _why(values, "has an argument with an expansion, so what it runs can't be told")
        if word == "--" or not word.startswith("-") or word == "-":
            operands.extend(v or "" for v in values[k + (word == "--") :])
            break
        for j, letter in enumerate(word[1:], 1):
            if letter not in valued:
                continue
            value = (
                word[j + 1 :].lstrip("=")
                if word[j + 1 :]
                else (values[k + 1] or "" if k + 1 < len(values) else "")
            )
            k += 0 if word[j + 1 :] else 1
            why = _ssh_option(name, letter, value)
            if why is not None:
                return _why(values, why)
            break
        k += 1
    if name == "sftp" and not any(":" in v for v in operands):
        return _why(values, "reads commands from its input, where ! runs a local shell command")
    return NONE


def _ssh_option(name: str, letter: str, value: str) -> str | None:
    """Why ssh/scp/sftp's option ``-LETTER VALUE`` runs a local command (None: it doesn't)."""
    if letter == "o" and re.search(
        r"(?i)(proxy|local|knownhosts)command|permitlocalcommand|match|include|securitykeyprovider"
        r"|pkcs11provider|askpass",
        value,
    ):
        return f"-o {value} runs a local command"
    if letter == "F":
        return f"-F {value} makes it read a configuration, which can run commands"
    if letter in "SD" and name != "ssh":
        return f"-{letter} {value} names a program it runs"
    if letter == "b" and name == "sftp":
        return "-b reads commands from a batch file, where ! runs a local shell command"
    return None


def _awk(values: Values) -> Effects:
    programs, i = [], 1
    while i < len(values):
        word = values[i]
        if word is None:
            return _why(values, "has an argument with an expansion, so its program can't be read")
        if word == "--":
            i += 1
            break
        if word.startswith(("-f", "--f", "-E", "--ex", "-i", "--inc", "-l", "--lo")):
            return _why(values, "runs a program file, which may run commands")
        if word in ("-e", "--source"):
            programs.append(values[i + 1] if i + 1 < len(values) else None)
            i += 2
            continue
        if word.startswith("--source="):
            programs.append(word.split("=", 1)[1])
        elif word in ("-F", "-v", "--assign", "--field-separator"):
            i += 2
            continue
        elif not word.startswith("-") or word == "-":
            break
        i += 1
    if not programs:
        programs.append(values[i] if i < len(values) else None)
    return _awk_programs(values, programs)


def _awk_programs(values: Values, programs: list[str | None]) -> Effects:
    """awk's program texts: one that can't be read, or that can run commands or write files, is said."""
    for program in programs:
        if program is None:
            return _why(values, "has a program that can't be read")
        if _AWK_RUNS.search(program):
            return _why(values, "has a program that can run commands or write files (system, |, print >)")
    return NONE


# system(), a pipe to or from a command (not ||), print/printf redirected to a file
_AWK_RUNS = re.compile(
    r"\bsystem\s*\(|(?<!\|)\|(?!\|)|\bprintf?\b[^;{}\n]*>|@\s*(?:load|include|namespace)\b|@\s*\w+\s*\(|\bextension\s*\("
)


_MAKE_SWITCH = re.compile(r"[A-Za-z_][\w]*=(\d*|yes|no|true|false|on|off)", re.IGNORECASE)


def _make(values: Values) -> Effects:
    for word in values[1:]:
        if word is None:
            return _why(values, "has an argument with an expansion, so what it runs can't be told")
        if _MAKE_SWITCH.fullmatch(word):
            continue  # VERBOSE=1, DEBUG=no: a number or a switch names no program
        if re.fullmatch(r"[A-Za-z_.][\w.]*\s*[:+?!]?=.*", word, re.DOTALL) or word.startswith(("--ev", "-E")):
            return _why(values, f"{word.split('=', 1)[0]}=... can replace a command its recipes run")
    for k, word in enumerate(values[1:], 1):
        makefile = None
        if word in ("-f", "--file", "--makefile"):
            makefile = values[k + 1] if k + 1 < len(values) else None
        elif word is not None and word.startswith(("--file=", "--makefile=")):
            makefile = word.split("=", 1)[1]
        elif word is not None and word.startswith("-f"):
            makefile = word[2:]
        if makefile in ("-", "/dev/stdin") or (makefile or "").startswith("/dev/fd/"):
            return _why(values, "reads its makefile from standard input")
    return NONE


def _find_tools(values: Values) -> Effects:
    """rg --pre: a preprocessor command run on every file (fd -x is a wrapper in tools.shell.programs)."""
    for word in values[1:]:
        if word is None:
            return _why(values, "has an argument with an expansion, so what it runs can't be told")
        if word.startswith(("--pre=", "--pre")) and not word.startswith("--pre-glob"):
            return _why(values, "--pre runs a preprocessor command on every file")
    return NONE


# dot-commands of the sqlite3 shell that only show or set how output looks: any other one (.shell,
# .system, .import '|cmd', .read '|cmd', .output, .load, .open, .excel, .edit...) may run a program or
# touch a file
_SQLITE_INERT_DOTS = _o(
    ".tables .table .schema .indexes .indices .headers .header .mode .show .databases .dbinfo .help .width "
    ".nullvalue .separator .timer .stats .eqp .explain .print .echo .bail .changes .fullschema .version "
    ".quit .exit .limit .timeout .dbconfig .sha3sum .vfsinfo .vfslist .vfsname .lint .selftest"
)
# SQL functions of the sqlite3 shell that run a program (edit), load code or touch files
_SQLITE_SQL_RUNS = re.compile(
    r"(?i)\b(edit|load_extension|writefile|readfile|fts3_tokenizer|lsdir|sqlar_uncompress)\s*\(|\battach\b"
    r"|\bvacuum\s+into\b"
)
_SQLITE_VALUED = _o(
    "-cmd -init -separator -newline -nullvalue -vfs -maxsize -mmap -lookaside -pagecache -nonce -heap"
)


def _sqlite(values: Values) -> Effects:
    """sqlite3 [OPTIONS] DB [SQL...]: each SQL argument (and -cmd's) is a dot-command when it starts with
    a dot, SQL otherwise; without one it reads its input, where any dot-command may come."""
    texts: list[str] = []
    operands: list[str] = []
    k, safe = 1, False
    while k < len(values):
        word = values[k]
        if word is None:
            return _why(values, "has an argument with an expansion, so its commands can't be read")
        option = "-" + word.lstrip("-") if word.startswith("-") and word != "-" else None
        if option is None:  # options count wherever they stand, as the shell reads them
            operands.append(word)
        elif option in ("-init", "-A", "-archive"):
            return _why(values, f"{option} runs commands from a file or an archive command")
        elif option == "-safe":
            safe = True
        elif option in _SQLITE_VALUED:
            nxt = values[k + 1] if k + 1 < len(values) else ""
            if nxt is None:
                return _why(values, "has an argument with an expansion, so its commands can't be read")
            if option == "-cmd":
                texts.append(nxt)
            k += 1
        k += 1
    texts.extend(operands[1:])
    if len(operands) < 2 and not safe:
        return _why(values, "reads commands from its input, where dot-commands can run programs")
    return NONE if safe else _sqlite_texts(values, texts)


def _sqlite_texts(values: Values, texts: list[str]) -> Effects:
    """sqlite3's dot-commands and SQL (outside -safe): one that can run a program or touch files is said."""
    for text in texts:
        stripped = text.lstrip()
        if stripped.startswith("."):
            command = stripped.split(None, 1)[0]
            if command not in _SQLITE_INERT_DOTS:
                return _why(values, f"runs the dot-command {command}, which can run a program or touch files")
        elif _SQLITE_SQL_RUNS.search(text):
            return _why(values, "runs SQL that can run a program, load code or touch files (edit(), attach)")
    return NONE


def _socat(values: Values) -> Effects:
    if any(v is None or re.search(r"(?i)(^|[,!])(exec|system):", v) for v in values[1:]):
        return _why(values, "has an EXEC or SYSTEM address, which runs a command")
    return NONE


def _netcat(values: Values) -> Effects:
    if any(
        v is None or v in ("-e", "-c") or v.startswith(("--exec", "--sh-exec", "--lua-exec"))
        for v in values[1:]
    ):
        return _why(values, "-e/-c runs a command for the connection")
    return NONE


def _completion(values: Values) -> Effects:
    if any(v is None or v.startswith("-") and ("C" in v or "F" in v) for v in values[1:]):
        return _why(values, "-C/-F runs a command or function to produce completions")
    return NONE


def _pager(values: Values) -> Effects:
    if any(v is None or v.startswith("+") for v in values[1:]):
        return _why(values, "+commands can run shell commands (!)")
    return NONE


def _man(values: Values) -> Effects:
    if any(v is None or v.startswith(("-P", "--pager", "-H", "--html")) for v in values[1:]):
        return _why(values, "-P/-H names a program it runs")
    return NONE


def _abbreviates(word: str, option: str) -> bool:
    """``word`` (``--fil=x``) names the long ``option`` (``--filter``) or a prefix of it: getopt_long takes
    unique prefixes, and an ambiguous one is counted too (fail closed)."""
    name = word.split("=", 1)[0]
    return len(name) > 2 and option.startswith(name)


def _runs_by_option(
    clause: str, long: tuple[str, ...] = (), short: tuple[str, ...] = ()
) -> Callable[..., Any]:
    """A program that runs a command named by one of its options (``--filter``, ``-wrapper``)."""

    def reader(values: Values) -> Effects:
        for word in values[1:]:
            if word is None:
                return _why(values, "has an argument with an expansion, so what it runs can't be told")
            if word == "--":
                break
            if word.startswith("--") and any(_abbreviates(word, o) for o in long):
                return _why(values, f"{word.split('=', 1)[0]} {clause}")
            if any(word == o or (len(o) == 2 and word.startswith(o)) for o in short):
                return _why(values, f"{word} {clause}")
        return NONE

    return reader


def _uniq(values: Values) -> Effects:
    """uniq [INPUT [OUTPUT]]: the second operand is written."""
    operands, _ = _operands(
        values, _o("--skip-fields --skip-chars --check-chars --group --all-repeated"), "fsw"
    )
    return Effects(writes=(operands[1],)) if len(operands) > 1 else NONE


def _file(values: Values) -> Effects:
    """file -C/--compile writes a compiled magic file (magic.mgc) into the current directory."""
    if any(
        v is None or v in ("-C", "--compile") or (v.startswith("-") and not v.startswith("--") and "C" in v)
        for v in values[1:]
    ):
        return Effects(writes=("magic.mgc",))
    return NONE


def _tree(values: Values) -> Effects:
    _, options = _operands(values, _o("--filelimit --timefmt --charset -o -P -I -L"), "oPIL")
    out = options.get("-o")
    return Effects(writes=(out,)) if out else NONE


# gcc(1)/clang(1): options that run a program of the caller's choosing or load code into the compiler
_COMPILER_RUNS = re.compile(
    r"-wrapper|-B.*|-{1,2}specs.*|-fplugin.*|-fpass-plugin.*|-load|-Xclang|-fuse-ld=.*/.*|--ld-path.*"
    r"|-Wl,.*plugin.*|-Xlinker|-ccc-.*|--gcc-toolchain.*|-no-integrated-as|-fintegrated-as.*|@.*"
)


def _compiler(values: Values) -> Effects:
    writes: list[str | None] = []
    for k, word in enumerate(values[1:], 1):
        if word is None:
            return _why(values, "has an argument with an expansion, so what it runs can't be told")
        if _COMPILER_RUNS.fullmatch(word):
            return _why(values, f"{word} makes it run a program or load code of the caller's choosing")
        if word == "-o":
            writes.append(values[k + 1] if k + 1 < len(values) else None)
        elif word.startswith("-o") and len(word) > 2:
            writes.append(word[2:])
    return Effects(writes=tuple(writes))


# variables naming programs cmake runs (compilers, launchers, linkers, tools) or code it includes
_CMAKE_RISKY = re.compile(
    r"(?i).*(COMPILER|LAUNCHER|LINKER|EXECUTABLE|PROGRAM|COMMAND|TOOLCHAIN|INCLUDE|_AR|_RANLIB|_NM"
    r"|_OBJCOPY|_OBJDUMP|_STRIP|_MT|_RC|MODULE_PATH|PREFIX_PATH|EMULATOR|CMAKE_PROJECT).*"
)


def _cmake(values: Values) -> Effects:
    for k, word in enumerate(values[1:], 1):
        if word is None:
            return _why(values, "has an argument with an expansion, so what it runs can't be told")
        if word in ("-E", "-P", "-C", "--toolchain", "--graphviz", "--system-information") or word.startswith(
            ("-C", "--toolchain", "--graphviz", "-P")
        ):
            return _why(values, f"{word} runs commands or CMake code given in its arguments")
        if word.startswith("-D"):
            setting = word[2:] or (values[k + 1] or "" if k + 1 < len(values) else "")
            if _CMAKE_RISKY.fullmatch(setting.split("=", 1)[0].split(":", 1)[0]):
                return _why(values, f"-D{setting.split('=', 1)[0]} names a program or code it runs")
    return NONE


def _rustc(values: Values) -> Effects:
    for k, word in enumerate(values[1:], 1):
        if word is None:
            return _why(values, "has an argument with an expansion, so what it runs can't be told")
        setting = word
        if word in ("-C", "--codegen", "-Z"):
            setting = word + (values[k + 1] or "" if k + 1 < len(values) else "")
        if re.match(
            r"(-C|--codegen=?|-Z)\s*(linker|link-arg|link-args|pre-link-arg|codegen-backend)", setting
        ):
            return _why(values, f"{setting} runs a linker or loads code of the caller's choosing")
        if word.startswith("@"):
            return _why(values, f"{word} reads more options from a file")
    return NONE


_CARGO_COMMANDS = _o(
    "build b check c clean doc d new init add remove rm run r test t bench update search publish install "
    "uninstall fmt clippy tree metadata fetch fix generate-lockfile locate-project login logout owner package "
    "pkgid report rustc rustdoc vendor verify-project version yank help info"
)


def _cargo(values: Values) -> Effects:
    sub = subcommands.find(values)
    for word in values[1:]:
        if word is None:
            return _why(values, "has an argument with an expansion, so what it runs can't be told")
        if word == "--":
            break
        if word.startswith(("--config", "-Z")) or (word.startswith("--") and _abbreviates(word, "--config")):
            return _why(values, f"{word.split('=', 1)[0]} sets configuration that can name programs it runs")
    if sub is None or sub.index is None:
        return NONE
    command = values[sub.index]
    if command not in _CARGO_COMMANDS:
        return _why(
            values, f"{command} is not a cargo command, so it is an alias or an external cargo-{command}"
        )
    if command == "rustc":
        rest = list(values[sub.index + 1 :])
        if "--" in rest:
            return _rustc(["rustc", *rest[rest.index("--") + 1 :]])
    return NONE


_GO_TOOLS = _o(
    "addr2line asm buildid cgo compile covdata cover dist doc fix link nm objdump pack pprof test2json trace vet"
)


def _go(values: Values) -> Effects:
    sub = subcommands.find(values)
    if sub is None or sub.index is None:
        return NONE
    command, rest = values[sub.index], list(values[sub.index + 1 :])
    for k, word in enumerate(rest):
        if word is None:
            return _why(values, "has an argument with an expansion, so what it runs can't be told")
        if word == "--":
            break
        flag = word.lstrip("-").split("=", 1)[0]
        if word.startswith("-") and flag in ("exec", "toolexec", "vettool", "overlay", "modfile", "pgo"):
            return _why(values, f"-{flag} names a program or files it runs or builds with")
        if word.startswith("-") and flag == "ldflags":
            value = word.split("=", 1)[1] if "=" in word else (rest[k + 1] or "" if k + 1 < len(rest) else "")
            if "extld" in value or "linkmode" in value:
                return _why(values, "-ldflags -extld names the external linker it runs")
    if command == "env" and any(w in ("-w", "-u") for w in rest):
        return _why(values, "env -w changes go's configuration (GOFLAGS, CC, GOTOOLCHAIN) for later runs")
    if command == "tool" and rest and rest[0] not in _GO_TOOLS:
        return _why(values, f"tool {rest[0]} runs a program found by name")
    return NONE


_NPM_CONFIG_RUNS = (
    "--script-shell",
    "--node-options",
    "--shell",
    "--call",
    "--userconfig",
    "--globalconfig",
    "--editor",
    "--browser",
    "--viewer",
    "--git",
)
# npm commands that run a program named by its configuration (editor, browser, viewer), which a project's
# own .npmrc can set; npm takes any unambiguous prefix of a command ("npm edi" is "npm edit")
_NPM_RUNS_CONFIGURED = _o("edit docs home bugs issues repo help")
# npm's commands and aliases taken exactly, so "npm i" (install) is not read as a prefix of "init"
_NPM_COMMANDS = _o(
    "access adduser audit bugs cache ci completion config dedupe deprecate diff dist-tag docs doctor edit "
    "exec explain explore find-dupes fund get help help-search init install install-ci-test install-test "
    "link ll login logout ls org outdated owner pack ping pkg prefix profile prune publish query rebuild "
    "repo restart root run run-script sbom search set shrinkwrap star stars start stop team test token "
    "undeprecate uninstall unpublish unstar update version view whoami i in ins inst insta instal isnt "
    "isnta isntal isntall add list la r rm un unlink remove t tst up upgrade udpate c s se find x issues "
    "home v info show rb rum urn cit sit ic innit create why ln dist-tags author"
)


def _npm(values: Values) -> Effects:
    """npm/pnpm/yarn: run package.json scripts (the project's own); exec/dlx/npx are wrappers in
    ``programs``; these options and subcommands make them run something else."""
    for word in values[1:]:
        if word is None:
            return _why(values, "has an argument with an expansion, so what it runs can't be told")
        if word == "--":
            break
        if word.startswith("--") and any(_abbreviates(word, o) for o in _NPM_CONFIG_RUNS):
            return _why(
                values, f"{word.split('=', 1)[0]} names a shell, options or configuration it runs with"
            )
    sub = subcommands.find(values)
    if sub is None or sub.index is None:
        return NONE
    command = values[sub.index]
    rest = [w for w in values[sub.index + 1 :] if w is not None]
    if (values[0] or "").rsplit("/", 1)[-1] == "npm" and command is not None:
        risky = [c for c in _NPM_RUNS_CONFIGURED if c == command or c.startswith(command)]
        if risky and (command in _NPM_RUNS_CONFIGURED or command not in _NPM_COMMANDS):
            return _why(
                values,
                f"{command} runs the {risky[0]} command's editor, browser or viewer, which npm's "
                "configuration (a project's .npmrc too) names",
            )
    if command in ("config", "set", "c") and rest[:1] != ["get"] and rest[:1] != ["list"]:
        return _why(
            values, f"{command} changes configuration (script-shell, node-options) used by later runs"
        )
    if command in ("explore", "create", "init", "innit") and any(not w.startswith("-") for w in rest):
        return _why(values, f"{command} runs a package or a command given in its arguments")
    return NONE


def _pip(values: Values) -> Effects:
    for word in values[1:]:
        if word is None:
            return _why(values, "has an argument with an expansion, so what it runs can't be told")
        if word.startswith("--") and _abbreviates(word, "--python"):
            return _why(values, f"{word} runs the interpreter it names")
    return NONE


def _aws(values: Values) -> Effects:
    """aws configure set/import/sso... writes the configuration, where credential_process names a program
    every later aws command runs; get/list only read it."""
    for word in values[1:]:
        if word is None:
            return _why(values, "has an argument with an expansion, so what it changes can't be told")
    words = [v for v in values[1:] if v is not None and not v.startswith("-")]
    if words[:1] == ["configure"] and words[1:2] not in ([], ["get"], ["list"], ["list-profiles"]):
        if words[1:2] != ["export-credentials"]:
            return _why(
                values,
                "configure changes the AWS configuration, where credential_process names a program "
                "later aws commands run",
            )
    return NONE


def _apt(values: Values) -> Effects:
    """apt/apt-get -o NAME=VALUE and -c FILE set APT's configuration, which names programs it runs
    (APT::Update::Pre-Invoke, DPkg::Pre-Install-Pkgs, Dir::Bin::*)."""
    for word in values[1:]:
        if word is None:
            return _why(values, "has an argument with an expansion, so what it runs can't be told")
        if word == "--":
            break
        if (
            word.startswith(("-o", "-c"))
            or (word.startswith("-") and not word.startswith("--") and ("o" in word or "c" in word))
            or _abbreviates(word, "--option")
            or _abbreviates(word, "--config-file")
        ):
            return _why(
                values, f"{word.split('=', 1)[0]} sets APT configuration, which can name programs it runs"
            )
    return NONE


# ---- git ---------------------------------------------------------------------------------------


_GIT_COMMANDS = _o(
    "add am annotate apply archive bisect blame branch bugreport bundle cat-file check-attr check-ignore "
    "check-mailmap check-ref-format checkout checkout-index cherry cherry-pick citool clean clone column "
    "commit commit-graph commit-tree config count-objects credential describe diff diff-files diff-index "
    "diff-tree difftool fast-export fast-import fetch fetch-pack filter-branch fmt-merge-msg for-each-ref "
    "format-patch fsck gc get-tar-commit-id grep gui hash-object help hook index-pack init instaweb "
    "interpret-trailers log ls-files ls-remote ls-tree mailinfo mailsplit maintenance merge merge-base "
    "merge-file merge-tree mergetool mktag mktree multi-pack-index mv name-rev notes pack-objects pack-refs "
    "patch-id prune pull push range-diff read-tree rebase reflog remote repack replace request-pull rerere "
    "reset restore rev-list rev-parse revert rm send-email shortlog show show-branch show-ref sparse-checkout "
    "stash status stripspace submodule switch symbolic-ref tag update-index update-ref verify-commit "
    "verify-pack verify-tag version whatchanged worktree write-tree lfs"
)
_GIT_RUN_OPTIONS = {
    "grep": ("-O", "--open-files-in-pager"),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "clone": ("-u", "--upload-pack", "--template", "-c", "--config"),
    "ls-remote": ("--upload-pack", "--exec"),
    "push": ("--receive-pack", "--exec"),
    "archive": ("--exec",),
    "difftool": ("-t", "--tool", "-x", "--extcmd"),
    "mergetool": ("-t", "--tool"),
    "help": ("-w", "--web", "-m", "--man", "-i", "--info"),
    "remote": ("--upload-pack",),
}
_GIT_OUTPUT = ("--output", "-o", "--output-directory")
_GIT_READS_CONFIG = _o(
    "--get --get-all --get-regexp --get-urlmatch --list -l --show-origin --show-scope get list"
)


def _git(values: Values) -> Effects:
    sub = subcommands.find(values)
    if sub is None or sub.index is None:
        return NONE
    command = values[sub.index]
    rest = list(values[sub.index + 1 :])
    if command is None:
        return NONE
    if command not in _GIT_COMMANDS:
        return _why(
            values, f"{command} is not a git command, so it may be an alias, which can run a shell command"
        )
    if command in ("filter-branch", "send-email", "instaweb"):
        return _why(values, f"{command} runs commands given in its arguments or configuration")
    return _git_command(values, command, rest)


def _git_command(values: Values, command: str, rest: list[str | None]) -> Effects:
    """A known git command with its arguments: what it runs or writes."""
    if any(v is None for v in rest) and command in (
        "rebase",
        "bisect",
        "submodule",
        "config",
        *_GIT_RUN_OPTIONS,
    ):
        return _why(values, f"{command} has an argument with an expansion, so what it runs can't be told")
    words = [v for v in rest if v is not None]
    if command == "rebase":
        return _git_rebase(values, words)
    if command == "bisect" and words[:1] == ["run"]:
        return Effects(scripts=(shlex.join(words[1:]),)) if len(words) > 1 else NONE
    if command == "submodule" and "foreach" in words:
        script = " ".join(w for w in words[words.index("foreach") + 1 :] if not w.startswith("--recursive"))
        return Effects(scripts=(script,))
    if (
        command == "config"
        and not (set(words) & _GIT_READS_CONFIG)
        and len([w for w in words if not w.startswith("-")]) != 1
    ):
        return _why(values, "config changes git configuration (aliases, pager, editor, hooks path)")
    for option in _GIT_RUN_OPTIONS.get(command, ()):
        if any(_is_option(w, option) for w in words if w.startswith("-")):
            return _why(values, f"{command} {option} runs a program given in its arguments or configuration")
    return Effects(writes=tuple(w for w in _git_writes(command, words) if w and w != "-"))


def _git_writes(command: str, words: list[str]) -> list[str]:
    """The files a git command writes: --output (and format-patch's and archive's -o), a bundle created."""
    writes = []
    for k, w in enumerate(words):
        option, eq, value = w.partition("=")
        option = "--output" if option.startswith("--o") and _is_option(option, "--output") else option
        if option in _GIT_OUTPUT and (command in ("format-patch", "archive") or option != "-o"):
            writes.append(value if eq else (words[k + 1] if k + 1 < len(words) else ""))
    if command == "bundle" and words[:1] == ["create"] and len(words) > 1:
        writes.append(words[1])
    return writes


def _git_rebase(values: Values, words: list[str]) -> Effects:
    scripts = []
    for k, w in enumerate(words):
        long = w.startswith("--")
        if w == "-x" or (long and "=" not in w and _is_option(w, "--exec")):
            scripts.append(words[k + 1] if k + 1 < len(words) else "")
        elif long and _is_option(w, "--exec"):
            scripts.append(w.split("=", 1)[1])
        elif w.startswith("-x") and not long:
            scripts.append(w[2:])
        elif (long and _is_option(w, "--interactive")) or (w.startswith("-") and not long and "i" in w):
            return _why(values, f"{w} runs the sequence editor, which can run commands")
    return Effects(scripts=tuple(scripts))


_PROGRAMS: dict[str, Callable[[Values], Effects]] = {
    "cp": _copy,
    "mv": _copy,
    "install": _copy,
    "ln": _copy,
    "rsync": _copy,
    "tee": _tee,
    "touch": _touch,
    "truncate": _touch,
    "dd": _dd,
    "sort": _sort,
    "split": _runs_by_option("runs a shell command for every piece", long=("--filter",)),
    "diff3": _runs_by_option("names the diff program it runs", long=("--diff-program",)),
    "sdiff": _runs_by_option("names the diff program it runs", long=("--diff-program",)),
    "wget": _download,
    "uniq": _uniq,
    "file": _file,
    "tree": _tree,
    "gcc": _compiler,
    "cc": _compiler,
    "g++": _compiler,
    "c++": _compiler,
    "clang": _compiler,
    "clang++": _compiler,
    "cmake": _cmake,
    "rustc": _rustc,
    "cargo": _cargo,
    "go": _go,
    "npm": _npm,
    "pnpm": _npm,
    "yarn": _npm,
    "pip": _pip,
    "pip3": _pip,
    "curl": _download,
    "sed": _sed,
    "gsed": _sed,
    "tar": _tar,
    "gtar": _tar,
    "bsdtar": _tar,
    "unzip": _unzip,
    "zip": _zip,
    "ssh": _ssh,
    "scp": _ssh,
    "sftp": _ssh,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "nawk": _awk,
    "make": _make,
    "gmake": _make,
    "rg": _find_tools,
    "sqlite3": _sqlite,
    "socat": _socat,
    "nc": _netcat,
    "ncat": _netcat,
    "netcat": _netcat,
    "compgen": _completion,
    "complete": _completion,
    "less": _pager,
    "more": _pager,
    "most": _pager,
    "man": _man,
    "git": _git,
    "aws": _aws,
    "apt": _apt,
    "apt-get": _apt,
    "apt-cache": _apt,
    "apt-mark": _apt,
    "apt-config": _apt,
    "ed": _always("reads editor commands, and ! runs shell commands"),
    "red": _always("reads editor commands, and ! runs shell commands"),
    "dc": _always("runs ! shell commands from its program"),
    "m4": _always("runs shell commands with syscmd/esyscmd"),
    "emacs": _always("runs Lisp from its arguments, files or keystrokes, which can run commands"),
}
# the vi family reads keystrokes from a pipe, and -c/+/--cmd/-S run ex commands such as :!cmd
_PATTERNS = [
    (re.compile(r"([\w.]+-)*(gcc|g\+\+|cc|c\+\+|clang|clang\+\+)(-[\d.]+)?"), _compiler),
    (
        re.compile(r"(n|g|r|e)?vim?(diff)?|r?view|ex|vimx|emacsclient"),
        _always("runs editor commands from its arguments or input, and :! runs shell commands"),
    ),
]
