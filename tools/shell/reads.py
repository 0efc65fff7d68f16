"""What a Bash line reads: the paths, trees and repository contents its commands can read, for the Read
deny rules and the read-only fast path (``tools.permissions.engine``).

The words of a line don't say what it reads: ``grep -r x .`` reads every file below ``.``, ``git show
HEAD:.env`` reads a file from the repository's objects, ``env -C .. cat f`` reads ``../f``, ``sort
--files0-from=list`` reads the files the list names, and ``cat .[^x]nv`` reads ``.env``. ``line_reads``
turns the reader's commands (``tools.shell.reader``) into

- ``paths``: files read when they exist (every word naming one, in every directory the command may run
  in; a glob's matches computed with bash's own rules: a leading dot matched only by a literal dot,
  ``[!x]``/``[^x]``, classes such as ``[[:alpha:]]``);
- ``history``: paths read from a git repository's objects or index, whether or not they exist now;
- ``trees``: directories read recursively (``grep -r``, ``rg``, ``cp -r``, ``tar -c``, ``zip -r``,
  ``diff -r``; with or without hidden names and followed links; implicit ``.`` included);
- ``shapes``: what a word may name when its expansion can't be computed exactly (``$VAR``, ``~+``, a
  brace, a glob under ``shopt``/``GLOBIGNORE``, a relative word after a ``cd`` that can't be followed,
  a file list, the input of ``xargs``, the ``{}`` of ``find -exec``, a repository's whole history): a
  pattern over absolute paths (``SHAPE_ANY`` stands for any text) that covers every path it may name.

What a program reads through its own code (a script, ``python -c``, ``awk``'s ``getline``, a test runner)
is not followed. Pure but for looking at the file system (glob matches, directories, the ``.git`` above).
"""

from __future__ import annotations

import dataclasses
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.shell.reader import Analysis, Command, Word

# shape characters: any text (slashes included), any text within one name, one character of a name
SHAPE_ANY, SHAPE_NAME, SHAPE_ONE = "\x01", "\x02", "\x03"
GLOB_ENTRIES = 20_000  # directory entries a glob may look at before it counts as not computed

# programs that never read a file named by their arguments (names aren't contents): a word of theirs
# whose expansion isn't known is not a read
_NOT_READERS = frozenset(
    "echo printf true false : basename dirname sleep seq expr mkdir rmdir touch rm unlink kill exit return "
    "shift export local declare typeset readonly unset cd pushd popd set wait test [ which type command "
    "builtin hash umask ulimit trap shopt alias unalias read mapfile readarray let dirs jobs disown "
    "chmod chown chgrp mktemp".split()
)
# programs that read the files below a directory they are given
_GREPS = frozenset({"grep", "egrep", "fgrep", "zgrep", "rgrep"})
_COMPRESSORS = frozenset({"gzip", "bzip2", "xz", "zstd", "lz4", "pigz", "lzma", "brotli"})
# options of a recursive reader that narrow which files it reads: a denied file found below asks (the
# filter may or may not leave it out) instead of being refused
_FILTERS = re.compile(
    r"--(?:include|exclude|exclude-dir|exclude-from|glob|iglob|type|type-not|type-add|filter|ignore-file)"
    r"(?:=.*)?|-[gtTxX].*"
)
# short options naming a list of files to read (tar -T list, file -f list), or taking it from the input
_SHORT_LISTS = {"tar": "T", "bsdtar": "T", "file": "f", "zip": "@", "cpio": "o"}
# another process's view of the file system: its directory and root are known only when it runs
_PROC_VIEW = re.compile(r"/proc/[^/]+/(?:task/[^/]+/)?(?:cwd|root|fd|map_files)(?:/|$)")
# options naming a file that lists the files to read
_FILE_LISTS = re.compile(
    r"--(?:files0-from|files-from|from-file|to-file|arg-file|pathspec-from-file|file-list|filelist)(?:=.*)?"
)
_GIT_CONTENT = frozenset(
    "show diff grep cat-file blame annotate format-patch archive diff-tree diff-index diff-files range-diff "
    "fast-export bundle stash difftool unpack-file checkout-index show-index merge-file".split()
)
_GIT_HISTORY = frozenset({"log", "reflog", "whatchanged", "rev-list", "shortlog"})
_GIT_PATCH = re.compile(
    r"-p|-u|-U\d*|--patch.*|--unified.*|-L.*|-S.*|-G.*|--cc|-c|--word-diff.*|--color-words.*|--binary"
    r"|--full-diff|--pickaxe.*|--find-object.*|--diff-merges.*|-m|--remerge-diff|--textconv|--ext-diff"
)


@dataclass(frozen=True)
class Tree:
    root: Path
    hidden: bool = True  # names starting with a dot are read
    follow: bool = False  # symbolic links found below are followed
    filtered: bool = False  # include/exclude options: which files are read can't be told exactly
    # grep's --include/--exclude/--exclude-dir globs (base names, fnmatch), applied exactly
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    exclude_dir: tuple[str, ...] = ()


@dataclass(frozen=True)
class Shape:
    """Every path a word may name: literal characters and the SHAPE_* wildcards, absolute."""

    pattern: str
    why: str
    fold: bool = False  # letters may match in either case (a glob under shopt nocaseglob)


@dataclass
class Reads:
    paths: list[tuple[Path, str]] = field(default_factory=list)
    # words of programs that don't read what they name (echo, rm, mkdir): judged as files, not directories
    names: list[tuple[Path, str]] = field(default_factory=list)
    history: list[tuple[Path, str]] = field(default_factory=list)
    # paths it reads and may show (git diff shows an indexed file only when it changed): a denied one asks
    maybe: list[tuple[Path, str]] = field(default_factory=list)
    trees: list[tuple[Tree, str]] = field(default_factory=list)
    shapes: list[Shape] = field(default_factory=list)
    # what a short option's attached value may name (-f.env: grep's -f with .env): judged against the Read
    # deny rules only, since "-d/" is as likely a delimiter as a path
    attached: list[tuple[Path, str]] = field(default_factory=list)
    # the values the line gives its variables (Analysis.values) and the user's home: $NAME computed
    values: dict[str, tuple[str | None, ...]] = field(default_factory=dict, repr=False)
    home: Path | None = field(default=None, repr=False)


def line_reads(a: Analysis, home: Path | None) -> Reads:
    """What the analysed line reads (see the module's docstring)."""
    out = Reads(values=a.values, home=home)
    options = bool(a.shell_options) or bool(os.environ.keys() & {"GLOBIGNORE", "BASHOPTS", "SHELLOPTS"})
    for w, dirs in a.reads:
        text = w.value if w.value is not None else w.text
        _word_reads(out, text, w, dirs, home, options, f"< {w.text}", a.loops)
    for c in (*a.commands, *a.opaque):
        _command_reads(out, c, home, options, a.loops)
    if a.error:
        out.shapes.append(
            Shape(SHAPE_ANY, f"the line can't be read ({a.error}), so neither can what it reads")
        )
    return out


def _command_reads(
    out: Reads, c: Command, home: Path | None, options: bool, loops: dict[str, tuple[Word, ...]]
) -> None:
    program = c.program.rsplit("/", 1)[-1]
    dirs = c.dirs
    reader = program not in _NOT_READERS
    for w in c.words[1:]:
        text = w.value if w.value is not None else w.text
        # an option's value (--file=.env) is a word too
        if w.value is not None and w.value.startswith("-") and "=" in w.value:
            option, _, value = w.value.partition("=")
            if _FILTERS.fullmatch(w.value):
                continue  # --exclude=.env names a pattern, not a file to read
            if _FILE_LISTS.fullmatch(option + "=") and program != "diff":
                out.shapes.append(Shape(SHAPE_ANY, f"{program} {option} reads the files a list names"))
            _word_reads(out, value, None, dirs, home, options, text)
            continue
        if w.value is not None and w.value.startswith("-") and not w.value.startswith("--"):
            _attached(out, w.value, dirs, home)
        if w.value is not None and _FILE_LISTS.fullmatch(w.value) and program != "diff":
            out.shapes.append(Shape(SHAPE_ANY, f"{program} {w.value} reads the files a list names"))
        if not reader:
            # no read, but a word naming a denied file is kept out of the line as before (echo .env)
            if w.value is not None or (w.glob is not None and not options):
                names = Reads()
                _word_reads(names, text, w, dirs, home, options, text, loops)
                out.names.extend(names.paths)
            continue
        _word_reads(out, text, w, dirs, home, options, text, loops)
    values = [w.value for w in c.words]
    if (letter := _SHORT_LISTS.get(program)) and any(
        v and v.startswith("-") and not v.startswith("--") and letter in v[1:] for v in values[1:]
    ):
        out.shapes.append(Shape(SHAPE_ANY, f"{program} -{letter} reads the files a list or its input names"))
    if program in ("env", "sudo") and c.wrapper is False and _moves(program, values):
        # an option that moves the command the wrapper can't be read for (env --ch=..): anywhere
        for w in c.words[1:]:
            if w.value is not None and not w.value.startswith(("-", "/")):
                out.shapes.append(
                    Shape(SHAPE_ANY + "/" + w.value, f"{shown_of(c)} runs in a directory unknown here")
                )
    if program in _GREPS or program in ("rg", "ag", "ack", "ripgrep"):
        _search_trees(out, c, program, values, home)
    elif program in ("cp", "rsync", "scp", "zip", "diff", "tar", "bsdtar", "cpio", "7z", *_COMPRESSORS):
        _copy_trees(out, c, program, values)
    elif program in ("ls", "find", "du", "tree", "fd", "fdfind", "dir", "vdir"):
        # they list names, not contents; with no directory named they look at "." (a denied directory
        # is as denied to them as to Glob)
        if not any(v and not v.startswith("-") and _is_dir(v, dirs) for v in values[1:]):
            if dirs is None:
                out.shapes.append(Shape(SHAPE_ANY, f"{program} lists a directory unknown here"))
            out.paths.extend((d, f"{program} (in {d})") for d in dirs or ())
    if program == "diff":
        _diff_pairs(out, c, values)
    if program == "git" and c.subcommand is not None:
        _git_reads(out, c, values)


def _attached(out: Reads, value: str, dirs: tuple[Path, ...] | None, home: Path | None) -> None:
    """``-f.env``, ``-rf.env``: after any option letter the rest of the word may be that option's value,
    and so a file it reads (a ``~`` there is not expanded: bash expands it only at a word's start)."""
    for i in range(2, len(value)):
        out.attached.extend((base, value) for base in _bases(value[i:], dirs))


def _moves(program: str, values: list[str | None]) -> bool:
    from tools.shell.programs import chdir_option  # start-up speed: the program tables load with a line

    return chdir_option(program, values[1:])[0]


def shown_of(c: Command) -> str:
    line = " ".join(c.line().split())
    return line if len(line) <= 60 else line[:57] + "..."


_LOOP_USE = re.compile(r'("?)\$\{?([A-Za-z_]\w*)\}?\1')


def _word_reads(
    out: Reads,
    text: str,
    w: Word | None,
    dirs: tuple[Path, ...] | None,
    home: Path | None,
    options: bool,
    shown: str,
    loops: dict[str, tuple[Word, ...]] | None = None,
) -> None:
    """One word's reads: the path it names in each directory, a glob's matches, or its shape."""
    if not text or "\x00" in text:
        return
    if w is not None and w.runtime:
        if w.found_below is not None and dirs is not None and None not in w.found_below[0]:
            roots, follow = w.found_below  # find ROOT ... -exec cmd {}: a path below ROOT
            for root in roots:
                for base in _bases(root or ".", dirs):
                    out.trees.append((Tree(base, follow=follow), f"find {root} -exec ... {{}}"))
            return
        out.shapes.append(Shape(SHAPE_ANY, f"{shown} is filled in when the command runs"))
        return
    if w is not None and loops and (m := _LOOP_USE.fullmatch(w.text)) and m.group(2) in loops:
        walked = Reads()  # $f of "for f in a b *.py": each word the loop walks
        for lw in loops[m.group(2)]:
            _word_reads(walked, lw.value or lw.text, lw, dirs, home, options, shown, loops=None)
        split = not m.group(1) and any(re.search(r"\s", p.name) for p, _ in walked.paths)
        if not split:  # unquoted, a name with a space would be split into other words
            out.paths += walked.paths
            out.shapes += walked.shapes
            out.trees += walked.trees
            return
    literal = w is None or w.value is not None
    if literal and text.startswith("-"):
        return
    if literal and _PROC_VIEW.match(text):
        out.shapes.append(Shape(SHAPE_ANY, f"{shown} is another process's view of the file system"))
        return
    if literal and not text.startswith("~"):
        for base in _bases(text, dirs):
            out.paths.append((base, shown))
        if dirs is None and not text.startswith("/"):
            out.shapes.append(
                Shape(SHAPE_ANY + "/" + text, f"{shown} is relative to a directory unknown here")
            )
        return
    if (text == "~" or text.startswith("~/")) and home is not None and not options:
        rest = text[2:]
        if literal or not re.search(r"[$`*?\[{]", rest):  # ~/'.ssh' is ~/.ssh
            out.paths.append((home / re.sub(r"""\\(.)|['"]""", r"\1", rest), shown))
            return
    if w is not None and w.glob is not None and not options and dirs is not None:
        found = _glob(w.glob[0], w.glob[1], dirs)
        if found is not None:
            out.paths.extend((p, shown) for p in found)
            return
    if w is not None and not options and (computed := _computed(w.text, out, dirs)) is not None:
        for value in computed:  # $f of "f=.env; cat $f", $HOME/.ssh/id_rsa: what bash would make of it
            _word_reads(out, value, None, dirs, home, options, shown)
        return
    fold = options and w is not None and w.glob is not None
    for pattern in _shapes(text if w is None else w.text, dirs, home if not options else None):
        out.shapes.append(Shape(pattern, f"what {shown} names is known only when it runs", fold))


_SIMPLE_WORD = re.compile(r'"?(?:[\w./@%+,:=-]|\$[A-Za-z_]\w*|\$\{[A-Za-z_]\w*\})*"?')
_PARAMETER_USE = re.compile(r"\$(?:([A-Za-z_]\w*)|\{([A-Za-z_]\w*)\})")
_MAX_COMPUTED = 16  # values of one word computed before it counts as unknown
# variables the shell takes from the agent's own environment unchanged: computed from it
_ENVIRONMENT_NAMES = frozenset({"USER", "LOGNAME", "TMPDIR"})


def _computed(text: str, out: Reads, dirs: tuple[Path, ...] | None) -> list[str] | None:
    """What a word made of plain characters and ``$NAME``/``${NAME}`` may expand to: each variable by the
    values the line gives it (and the environment's value, which it has until the line sets it), ``HOME``
    and ``PWD`` as the shell has them and ``USER``, ``LOGNAME``, ``TMPDIR`` as the agent's environment has
    them, when the line doesn't set them; None when one can't be told (a
    variable neither the line nor that list sets, a value known only when it runs) or the result would be
    split or globbed."""
    if not _SIMPLE_WORD.fullmatch(text) or "$" not in text:
        return None
    quoted = text.startswith('"') and text.endswith('"') and len(text) >= 2
    if text.count('"') not in (0, 2) or ('"' in text and not quoted):
        return None
    body = text[1:-1] if quoted else text
    results = [""]
    at = 0
    for m in _PARAMETER_USE.finditer(body):
        options = _possible(m.group(1) or m.group(2), out, dirs)
        if options is None:
            return None
        results = [r + body[at : m.start()] + o for r in results for o in options]
        if len(results) > _MAX_COMPUTED:
            return None
        at = m.end()
    results = [r + body[at:] for r in results]
    if not quoted and any(re.search(r"[\s*?\[]", r) for r in results):
        return None  # split into words or matched as a glob: not one path
    return [r for r in results if r]


def _possible(name: str, out: Reads, dirs: tuple[Path, ...] | None) -> list[str] | None:
    assigned = out.values.get(name)
    if assigned is not None:
        if any(v is None for v in assigned):
            return None
        found = [v for v in assigned if v is not None]
        inherited = os.environ.get(name)
        return list(dict.fromkeys([*found, *([inherited] if inherited is not None else [])]))
    if name == "HOME" and out.home is not None:
        return [str(out.home)]
    if name == "PWD" and dirs:
        return [str(d) for d in dirs]
    if name in _ENVIRONMENT_NAMES and (inherited := os.environ.get(name)):
        return [inherited]  # what the agent's commands inherit
    return None


def _bases(text: str, dirs: tuple[Path, ...] | None) -> list[Path]:
    if text.startswith("/"):
        return [Path(text)]
    return [d / text for d in dirs or ()]


def _is_dir(text: str, dirs: tuple[Path, ...] | None) -> bool:
    try:
        return any(p.is_dir() for p in _bases(text, dirs))
    except (OSError, ValueError):
        return False


def _implicit_root(out: Reads, c: Command, tree: Tree, program: str) -> None:
    if c.dirs is None:
        out.shapes.append(Shape(SHAPE_ANY, f"{program} reads a directory unknown here"))
        return
    for d in c.dirs:
        out.trees.append((dataclasses.replace(tree, root=d), f"{program} (in {d})"))


def _operands(values: list[str | None]) -> list[str]:
    return [v for v in values[1:] if v is not None and not v.startswith("-")]


def _search_trees(out: Reads, c: Command, program: str, values: list[str | None], home: Path | None) -> None:
    """grep -r/-R, rg, ag, ack: every directory operand is read below, ``.`` when none is given."""
    words = [_option_text(w) for w in c.words[1:]]
    options = [v for v in words if v is not None and v.startswith("-") and v != "-"]
    globs: dict[str, list[str]] = {"--include": [], "--exclude": [], "--exclude-dir": []}
    unknown_filter = False
    if program in _GREPS:
        for k, v in enumerate(words):
            name, eq, value = (v or "").partition("=")
            if name in globs:
                glob = value if eq else (words[k + 1] if k + 1 < len(words) else None)
                if glob is None or re.search(r"\[\^|\[\[|\\", glob):
                    unknown_filter = True  # a glob fnmatch here may not read as grep does
                else:
                    globs[name].append(glob)
            elif name.startswith("--exclude-from") or name.startswith("--include-from"):
                unknown_filter = True
    if program in _GREPS and program != "rgrep":
        recursive = follow = False
        for option in options:
            if option.startswith("--"):
                name = option.split("=", 1)[0]
                follow = follow or "--dereference-recursive".startswith(name) and len(name) > 3
                recursive = recursive or follow or ("--recursive".startswith(name) and len(name) > 3)
                recursive = (
                    recursive
                    or option in ("--directories=recurse", "--directories=read")
                    and "recurse" in option
                )
                continue
            for k, letter in enumerate(option[1:], 1):
                if letter in "efmABCdD":  # the rest of the word is the option's value
                    if letter == "d" and (option[k + 1 :] or "") == "recurse":
                        recursive = True
                    break
                recursive = recursive or letter in "rR"
                follow = follow or letter == "R"
        if any(v == "recurse" for v in values) and any(v in ("-d", "--directories") for v in values):
            recursive = True
        if not recursive:
            return
        hidden = True
    else:
        follow = (
            any(o in ("-L", "--follow", "-f") for o in options)
            if program != "rg"
            else any(o in ("-L", "--follow") or (not o.startswith("--") and "L" in o[1:]) for o in options)
        )
        if program == "rg":
            unrestricted = sum(o[1:].count("u") for o in options if not o.startswith("--"))
            hidden = (
                unrestricted >= 2
                or any(o in ("--hidden", "-.") for o in options)
                or any(not o.startswith("--") and "." in o[1:] for o in options)
            )
        else:
            hidden = True
    if program in _GREPS:
        filtered = unknown_filter
    else:
        filtered = any(_FILTERS.fullmatch(o) for o in options)
    tree = Tree(
        Path("."),
        hidden,
        follow,
        filtered,
        tuple(globs["--include"]),
        tuple(globs["--exclude"]),
        tuple(globs["--exclude-dir"]),
    )
    _operand_trees(out, c, values, tree, program)
    if len(_operands(values)) < 2:  # the pattern and no path: the working directory
        _implicit_root(out, c, tree, program)


def _option_text(w: Word) -> str | None:
    """A word after quote removal, globs left in (``--include=*.py``); None for an expansion."""
    if w.value is not None:
        return w.value
    return w.glob[0] if w.glob is not None else None


def _operand_trees(out: Reads, c: Command, values: list[str | None], tree: Tree, program: str) -> None:
    for v in values[1:]:
        if v is None:
            continue  # its shape was noted with the words
        text = v.split("=", 1)[1] if v.startswith("-") and "=" in v else v
        if text.startswith("-") or not text:
            continue
        for base in _bases(text, c.dirs):
            try:
                if base.is_dir():
                    out.trees.append((dataclasses.replace(tree, root=base), f"{program} {text}"))
            except (OSError, ValueError):
                continue


def _copy_trees(out: Reads, c: Command, program: str, values: list[str | None]) -> None:
    """cp -r, rsync -r/-a, scp -r, tar -c, zip -r, diff -r, gzip -r: directory operands read below."""
    options = [v for v in values[1:] if v is not None and v.startswith("-")]
    shorts = "".join(o[1:] for o in options if not o.startswith("--"))
    longs = {o.split("=", 1)[0] for o in options if o.startswith("--")}
    if program in ("tar", "bsdtar"):
        first = next((v for v in values[1:2] if v is not None and not v.startswith("-")), "")
        if not ("c" in first or "r" in first or "u" in first or "c" in shorts or "--create" in longs):
            return
        recursive, follow = True, "h" in first or "h" in shorts or "--dereference" in longs
    elif program in ("zip", "diff", "scp", "cpio", "7z"):
        recursive, follow = program in ("zip", "7z", "cpio") or "r" in shorts or "--recursive" in longs, True
    else:
        recursive = bool({"r", "R", "a"} & set(shorts)) or bool({"--recursive", "--archive"} & longs)
        follow = "L" in shorts or bool({"--dereference", "--copy-links"} & longs)
    if not recursive:
        return
    filtered = any(_FILTERS.fullmatch(o) for o in options)
    _operand_trees(out, c, values, Tree(Path("."), True, follow, filtered), program)
    if program in ("tar", "bsdtar") and any(v == "-C" or (v or "").startswith("--directory") for v in values):
        out.shapes.append(Shape(SHAPE_ANY, "tar -C reads its names from another directory"))


def _diff_pairs(out: Reads, c: Command, values: list[str | None]) -> None:
    """diff DIR FILE reads DIR/FILE; --from-file/--to-file=X compare X with each operand."""
    operands = _operands(values)
    given = [v.split("=", 1)[1] for v in values[1:] if v and v.startswith(("--from-file=", "--to-file="))]
    for k, v in enumerate(values[1:-1], 1):
        if v in ("--from-file", "--to-file") and values[k + 1] is not None:
            given.append(values[k + 1] or "")
    sides = operands + given
    for side in sides:
        for other in sides:
            if side != other:
                for base in _bases(side, c.dirs):
                    out.paths.append((base / other, f"diff {side} {other}"))
                    out.paths.append((base / Path(other).name, f"diff {side} {other}"))


def _git_reads(out: Reads, c: Command, values: list[str | None]) -> None:
    """Repository contents git prints: blobs named ``REV:path``/``:path``, the patches of ``log -p``, ``show``,
    ``diff``, ``grep``, ``cat-file --batch``... A path in the objects is read whether or not it exists now;
    a command that reads more than named paths reads the whole repository (its shape)."""
    sub = c.words[c.subcommand].value if c.subcommand is not None else None
    rest = values[(c.subcommand or 0) + 1 :]
    if sub is None:
        return
    if sub in _GIT_HISTORY and not any(v is not None and _GIT_PATCH.fullmatch(v) for v in rest):
        return
    if sub not in _GIT_CONTENT and sub not in _GIT_HISTORY:
        return
    tops = _git_tops(c, values)
    blobs, pathspecs, objects, batch, dashdash = [], [], [], False, False
    for v in rest:
        if v is None:
            objects.append("")
        elif v == "--":
            dashdash = True
        elif v.startswith("-") and not dashdash:
            batch = batch or (sub == "cat-file" and v.startswith("--batch"))
        elif not dashdash and ":" in v and not v.startswith(":("):
            blobs.append(v.split(":", 2)[-1] if re.match(r":\d:", v) else v.split(":", 1)[1])
        elif dashdash or (sub != "cat-file" and any(os.path.lexists(p) for p in _bases(v, c.dirs))):
            pathspecs.append(v)
        elif not (sub == "cat-file" and v in ("blob", "tree", "commit", "tag")):
            objects.append(v)  # a revision, a pattern, an object name: more than a named path
    for blob in blobs:
        for top, here in tops:
            if top is not None:
                path = here / blob if blob.startswith(("./", "../")) else top / blob
                out.history.append((Path(os.path.normpath(path)), f"git {sub} {blob}"))
    worktree = (
        sub == "diff"
        and not objects
        and not blobs
        and not any(v is not None and v.split("=", 1)[0] in _GIT_DIFF_OTHER for v in rest)
    )
    if worktree:  # git diff: the work tree against the index, so only paths the index holds
        for top, here in tops:
            names = _index_paths(top) if top is not None else None
            if top is None or names is None:
                break
            wanted = [Path(os.path.normpath(here / p)) for p in pathspecs]
            for name in names:
                path = top / name
                if not wanted or any(path == w or path.is_relative_to(w) for w in wanted):
                    out.maybe.append((path, f"git diff {name}"))
        else:
            return
    if sub == "cat-file":
        reads_more, pathspecs = batch or bool(objects), []
    elif sub == "show":
        reads_more = bool(objects) or not blobs
    else:
        reads_more = True
    if not reads_more:
        if any(top is None for top, _ in tops):
            out.shapes.append(Shape(SHAPE_ANY, f"git {sub} reads a repository unknown here"))
        return
    for top, here in tops:
        if top is None:
            out.shapes.append(Shape(SHAPE_ANY, f"git {sub} reads a repository unknown here"))
        elif pathspecs and all(not re.search(r"[*?\[:]", p) for p in pathspecs):
            for p in pathspecs:
                path = Path(os.path.normpath(here / p))
                out.history.append((path, f"git {sub} {p}"))
                if path.is_file() and not path.is_symlink():
                    continue  # a file now: what its history holds is this path's contents
                below = _escape(path.as_posix().rstrip("/")) + "/" + SHAPE_ANY
                out.shapes.append(Shape(below, f"git {sub} reads {p} and what was ever below it"))
        else:
            whole = _escape(top.as_posix().rstrip("/")) + "/" + SHAPE_ANY
            out.shapes.append(Shape(whole, f"git {sub} reads the repository's files and their history"))


# git diff options that bring in more than the work tree and the index
_GIT_DIFF_OTHER = frozenset(
    {"--cached", "--staged", "--no-index", "--merge-base", "--base", "--ours", "--theirs"}
)


def _index_paths(top: Path) -> list[str] | None:
    """The paths in the repository's index (.git/index, versions 2 and 3), or None when it can't be read
    that way (a .git file, version 4, a damaged or huge index): then the whole repository counts."""
    try:
        with open(top / ".git" / "index", "rb") as f:
            data = f.read(64 * 1024 * 1024 + 1)
    except FileNotFoundError:
        return []  # nothing staged yet: git diff shows nothing
    except OSError:
        return None
    if len(data) > 64 * 1024 * 1024 or data[:4] != b"DIRC" or len(data) < 12:
        return None
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3):
        return None
    names, at = [], 12
    for _ in range(count):
        if at + 62 > len(data):
            return None
        flags = struct.unpack(">H", data[at + 60 : at + 62])[0]
        start = at + 62 + (2 if version == 3 and flags & 0x4000 else 0)
        end = data.find(b"\0", start)
        if end < 0:
            return None
        names.append(data[start:end].decode("utf-8", "surrogateescape"))
        at += (end - at + 8) & ~7
    return names


def _git_tops(c: Command, values: list[str | None]) -> list[tuple[Path | None, Path]]:
    """(the repository's top directory, the directory git runs in) for each directory the command may run
    in; top None when it can't be told (--git-dir, --work-tree, an expansion in -C)."""
    if c.dirs is None:
        return [(None, Path("/"))]
    out: list[tuple[Path | None, Path]] = []
    for d in c.dirs:
        here: Path | None = d
        for k, v in enumerate(values[1 : c.subcommand or 1], 1):
            if v is None or v.startswith(("--git-dir", "--work-tree", "--namespace")):
                here = None
            elif v == "-C":
                nxt = values[k + 1] if k + 1 < len(values) else None
                here = None if nxt is None or here is None else Path(os.path.normpath(here / nxt))
        out.append((_git_top(here) if here is not None else None, here or d))
    return out


def _git_top(here: Path) -> Path | None:
    """The work tree's top (where ``.git`` is); a bare repository or one that can't be looked at is the
    whole file system (its history may hold anything); no repository at all: ``here`` (git fails)."""
    for d in (here, *here.parents):
        try:
            if (d / ".git").exists():
                return d
            if (d / "HEAD").is_file() and (d / "objects").is_dir() and (d / "refs").is_dir():
                return Path("/")
        except OSError:
            return None
    return here


def _escape(text: str) -> str:
    return text.replace(SHAPE_ANY, "").replace(SHAPE_NAME, "").replace(SHAPE_ONE, "")


# ---- globs by bash's rules -----------------------------------------------------------------------


def _glob(value: str, mask: str, dirs: tuple[Path, ...]) -> list[Path] | None:
    """The paths a glob word names in each directory, by bash's default rules (no dotglob, nocaseglob,
    extglob or globstar): a name starting with a dot is matched only by a literal dot, ``.`` and ``..`` by
    none; an unmatched glob stays as written. None when it would look at too many entries."""
    budget = [GLOB_ENTRIES]
    found: list[Path] = []
    parts = _split(value, mask)
    for d in dirs:
        start = [Path("/")] if value.startswith("/") else [d]
        matched = _match_parts(start, parts, budget)
        if matched is None:
            return None
        found.extend(matched or [start[0] / value])  # nothing matched: bash passes the word as it is
    return found


def _split(value: str, mask: str) -> list[tuple[str, str]]:
    out, start = [], 0
    for i, ch in enumerate(value):
        if ch == "/":
            out.append((value[start:i], mask[start:i]))
            start = i + 1
    out.append((value[start:], mask[start:]))
    return [p for p in out if p[0]]


def _match_parts(starts: list[Path], parts: list[tuple[str, str]], budget: list[int]) -> list[Path] | None:
    current = starts
    for k, (value, mask) in enumerate(parts):
        last = k == len(parts) - 1
        if not any(mask[i] in "*?[" for i in range(len(mask))):
            current = [p / value for p in current]
            if not last:
                current = [p for p in current if p.is_dir()]
            continue
        regex = _component_regex(value, mask)
        nxt = []
        for base in current:
            try:
                with os.scandir(base) as entries:
                    for entry in entries:
                        budget[0] -= 1
                        if budget[0] < 0:
                            return None
                        if regex.fullmatch(entry.name) and (last or entry.is_dir()):
                            nxt.append(base / entry.name)
            except (OSError, ValueError):
                continue
        current = nxt
    return [p for p in current if os.path.lexists(p)]


def _component_regex(value: str, mask: str) -> re.Pattern[str]:
    out, i, n = [], 0, len(value)
    if value[0] != ".":
        out.append(r"(?!\.)")  # a leading dot is matched only by a literal one
    while i < n:
        ch, active = value[i], mask[i] != "\x00"
        if active and ch == "*":
            out.append("[^/]*")
        elif active and ch == "?":
            out.append("[^/]")
        elif active and ch == "[" and (end := _bracket_end(value, mask, i)) is not None:
            out.append(_bracket(value[i + 1 : end]))
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _bracket_end(value: str, mask: str, start: int) -> int | None:
    i = start + 1
    if i < len(value) and value[i] in "!^":
        i += 1
    if i < len(value) and value[i] == "]":
        i += 1
    while i < len(value):
        if value.startswith("[:", i) or value.startswith("[=", i) or value.startswith("[.", i):
            close = value.find(value[i + 1] + "]", i + 2)
            if close < 0:
                return None
            i = close + 2
            continue
        if value[i] == "]":
            return i
        i += 1
    return None


def _bracket(inner: str) -> str:
    """A bash bracket expression as a regex class; classes ([:alpha:]...) are widened to any character
    but a slash, which covers what they match in any locale."""
    negate = inner[:1] in ("!", "^")
    body = inner[1:] if negate else inner
    if "[:" in body or "[=" in body or "[." in body:
        return "[^/]"  # wider than the class, negated or not: a superset is safe
    escaped = "".join("\\" + ch if ch in "\\^[]" else ch for ch in body)
    return f"[^/{escaped}]" if negate else f"[{escaped}]"


# ---- shapes --------------------------------------------------------------------------------------


def _shapes(text: str, dirs: tuple[Path, ...] | None, home: Path | None) -> list[str]:
    """The shapes of a word as written: expansions, globs and braces as wildcards, relative to each
    directory (or to any one when they can't be told)."""
    body = _shape_of(text, home)
    if body.startswith("/") or body.startswith(SHAPE_ANY):
        shapes = [body]
    elif dirs is None:
        shapes = [SHAPE_ANY + "/" + body]
    else:
        shapes = [_escape(d.as_posix().rstrip("/")) + "/" + body for d in dirs]
    return [_normalise(s) for s in shapes]


def _shape_of(text: str, home: Path | None) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    if text.startswith("~"):
        end = text.find("/")
        end = n if end < 0 else end
        if end == 1 and home is not None:
            out.append(_escape(home.as_posix().rstrip("/")))
        else:
            out.append(SHAPE_ANY)  # ~+, ~-, ~user, ~N: a directory known only when it runs
        i = end
    quote = ""
    while i < n:
        ch = text[i]
        if quote == "'":
            if ch == "'":
                quote = ""
            else:
                out.append(ch)
            i += 1
            continue
        if ch == "\\" and i + 1 < n and quote != "'":
            out.append(text[i + 1])
            i += 2
            continue
        if ch in "\"'" and (quote == "" or quote == ch):
            if ch == "'" and quote == "":
                quote = "'"
            else:
                quote = "" if quote == ch else ch
            i += 1
            continue
        if ch == "$" or ch == "`" or (quote == "" and ch in "<>" and text[i + 1 : i + 2] == "("):
            if (
                text.startswith("$((", i)
                or text.startswith("$(", i)
                or ch in "`<>"
                or text.startswith("$'", i)
            ):
                out.append(SHAPE_ANY)  # the rest can't be followed without a full parse
                break
            if text.startswith("${", i):
                close = text.find("}", i)
                if close < 0:
                    out.append(SHAPE_ANY)
                    break
                out.append(SHAPE_ANY)
                i = close + 1
                continue
            m = re.match(r"\$(?:[A-Za-z_]\w*|[0-9#?$!@*-])", text[i:])
            if m:
                out.append(SHAPE_ANY)
                i += m.end()
                continue
            out.append(ch)
            i += 1
            continue
        if quote == "":
            if ch == "*":
                # globstar's ** crosses slashes, one * stays in a name
                out.append(SHAPE_ANY if text.startswith("**", i) else SHAPE_NAME)
                i += 1 if text.startswith("**", i) else 0
            elif ch == "?":
                out.append(SHAPE_ONE)
            elif ch == "[" and "]" in text[i + 2 :]:
                out.append(SHAPE_ONE)
                i = text.index("]", i + 2)
            elif ch == "{" and "}" in text[i:]:
                out.append(SHAPE_ANY)
                i = text.index("}", i)
            elif ch in "@!+" and text[i + 1 : i + 2] == "(":
                out.append(SHAPE_ANY)  # an extglob group
                close = text.find(")", i)
                i = n if close < 0 else close
            else:
                out.append(ch)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _normalise(shape: str) -> str:
    """Resolve ``.`` and ``..`` in the literal part; past a wildcard, a ``..`` may lead anywhere."""
    parts = shape.split("/")
    out: list[str] = []
    for k, part in enumerate(parts):
        if part == "." and k:
            continue
        if part == "..":
            if any(ch in p for p in out for ch in (SHAPE_ANY, SHAPE_NAME, SHAPE_ONE)):
                return SHAPE_ANY + "/" + "/".join(parts[k + 1 :])
            if len(out) > 1:
                out.pop()
            continue
        out.append(part)
    return "/".join(out) or "/"


def overlap(shape: str, rule: str, fold: bool = False) -> bool:
    """Whether some path fits both ``shape`` and ``rule`` (both strings of literal characters and the
    SHAPE_* wildcards): a product of the two little automata, searched breadth first."""
    seen = {(0, 0)}
    stack = [(0, 0)]
    n, m = len(shape), len(rule)
    while stack:
        i, j = stack.pop()
        if i == n and j == m:
            return True
        moves = []
        if i < n and shape[i] in (SHAPE_ANY, SHAPE_NAME):
            moves.append((i + 1, j))
        if j < m and rule[j] in (SHAPE_ANY, SHAPE_NAME):
            moves.append((i, j + 1))
        if i < n and j < m and _meet(shape[i], rule[j], fold):
            moves.append(
                (
                    i if shape[i] in (SHAPE_ANY, SHAPE_NAME) else i + 1,
                    j if rule[j] in (SHAPE_ANY, SHAPE_NAME) else j + 1,
                )
            )
        for state in moves:
            if state not in seen:
                seen.add(state)
                stack.append(state)
    return False


def _meet(a: str, b: str, fold: bool) -> bool:
    """Whether one character fits both tokens."""
    wild = (SHAPE_ANY, SHAPE_NAME, SHAPE_ONE)
    if a in wild and b in wild:
        return True
    if a in wild:
        a, b = b, a
    # a is a literal character now
    if b == SHAPE_ANY:
        return True
    if b in (SHAPE_NAME, SHAPE_ONE):
        return a != "/"
    return a == b or (fold and a.lower() == b.lower())
