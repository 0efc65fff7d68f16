"""Shell command lines read with a real parser (tree-sitter-bash): the programs a line runs, the files its
redirections write, and whatever keeps it from being judged by program name. Parsing only; the rules that
use it live in ``tools.permissions.engine``.

``analyze(command, cwd)`` walks the whole syntax tree — lists, pipelines, subshells, command and process
substitutions, conditionals, loops, case, functions, heredocs, redirections — and reports:

- ``commands``: every simple command whose program is a literal word after quote removal (``git``,
  ``'git'``, ``\\rm``, ``/bin/rm``), with wrapped ones peeled out of their wrappers (``timeout 5 rm x`` lists
  ``timeout 5 rm x`` and ``rm x``) and the scripts of ``bash -c '...'``/``eval`` parsed in turn;
- ``unresolved``: why some program can't be told statically — a name from an expansion, glob, brace or
  ``$'..'``; a function, alias, ``source``, ``exec``, ``trap``, ``coproc``; a shell reading a file or stdin;
  ``python -c``; arithmetic that bash could turn into a command substitution;
- ``variables``: what the line does that changes which program runs, as clauses: "sets PATH" (also
  ``LD_PRELOAD``, ``BASH_ENV``…), "sets git configuration with -c";
- ``writes``: files redirections write, made absolute against every directory the line may ``cd`` to;
- ``error``: set when the line doesn't parse (the tree has ERROR or MISSING nodes).

The grammar is loaded on the first call, never at import, so start-up doesn't pay for it.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.shell import effects as effects_module
from tools.shell import known, programs, subcommands
from tools.shell.effects import effects
from tools.shell.evaluation import ARITHMETIC_VALUE, Evaluations
from tools.shell.programs import Unwrapped, chdir_option, unwrap

_MAX_DEPTH = 8  # nested scripts and wrappers (bash -c "eval 'sudo env ...'")
_MAX_LEVELS = 120  # syntax-tree nesting followed before the line is refused as too deep ($( $( ... )))
# nesting the words show (brackets, substitutions, if/case/loops) past which a line is refused as too deep
# before it is parsed: deep input then costs a scan, never a parse and a walk (benchmarks/permission_parse.py)
_MAX_NESTING = 60
# what opens and closes a level, outside single quotes (a quoted span is one token, skipped)
_NESTING = re.compile(
    r"'[^']*'|\\.|\$\(|\$\{|[({]|[)}]|(?<![\w-])(?:if|case|while|until|for|select|fi|esac|done)(?![\w-])"
)
_CLOSERS = frozenset({")", "}", "fi", "esac", "done"})
_MAX_DIRS = 32  # directories a line may cd to before we stop counting
_MAX_SCRIPT = 256 * 1024  # a script file read to judge its commands (bash x.sh, ./x.sh)
_SHELL_LINE = re.compile(r"^#!\s*\S*/(?:env\s+)?(?:ba|da|k|mk|a)?sh(?:\s|$)")
_PLACEHOLDER = "\x00"  # stands for a quoted or escaped character when looking for globs and braces

# variables that change which program runs or what it runs on start-up
_RISKY = frozenset(
    {
        "PATH",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "IFS",
        "CDPATH",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "HOME",
        "SHELL",
        "XDG_CONFIG_HOME",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONUSERBASE",
        "PYTHONINSPECT",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "PERL5DB",
        "RUBYOPT",
        "RUBYLIB",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_EXEC_PATH",
        "GIT_DIR",
        "GIT_PAGER",
        "GIT_EDITOR",
        "GIT_ASKPASS",
        "GIT_EXTERNAL_DIFF",
        "GIT_TEMPLATE_DIR",
        "GIT_PROXY_COMMAND",
        "GIT_SEQUENCE_EDITOR",
        "LESS",  # less runs "+!cmd" from it
        "MORE",
        "MANOPT",
        "SYSTEMD_PAGER",
        "SYSTEMD_LESS",
        "PAGER",
        "EDITOR",
        "VISUAL",
        "MANPAGER",
        "LESSOPEN",
        "LESSCLOSE",
        "SSH_ASKPASS",
        "BROWSER",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "CLASSPATH",
        "GCONV_PATH",
        "MAKEFLAGS",
        "MFLAGS",
        "GOFLAGS",
        "RUSTC_WRAPPER",
        "CARGO_BUILD_RUSTC_WRAPPER",
    }
)
_RISKY_PREFIXES = ("LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_", "NPM_CONFIG_", "npm_config_")
_RESERVED = frozenset(
    {
        "{",
        "}",
        "(",
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "while",
        "until",
        "for",
        "do",
        "done",
        "case",
        "esac",
        "select",
        "function",
        "coproc",
        "time",
        "[[",
        "((",
        "!",
    }
)
_READERS = frozenset({"read", "mapfile", "readarray"})
_WRITE_OPERATORS = frozenset({">", ">>", "&>", "&>>", ">|", "<>"})
_ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_GLOB = re.compile(r"[*?]|\[[^\]]*\]")
_BRACE = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
_SUBSCRIPT_SUBSTITUTION = re.compile(r"\[.*(?:\$\(|`)", re.DOTALL)
_CHANGES_DIRECTORY = re.compile(r"\b(?:cd|pushd|popd)\b")
# variables that change where cd goes, or what the directory stack holds
_DIRECTORY_VARIABLES = frozenset({"CDPATH", "DIRSTACK", "OLDPWD", "PWD", "HOME"})
# variables that change what a glob matches (GLOBIGNORE turns dotglob on) or set shell options
_GLOB_VARIABLES = frozenset({"GLOBIGNORE", "BASHOPTS", "SHELLOPTS", "GLOBSORT"})


@dataclass(frozen=True)
class Word:
    """One word as written and, when it has no expansion, glob or brace, its value after quote removal."""

    text: str
    value: str | None
    # a word whose only expansion is a glob: its value after quote removal and the same with every quoted
    # character masked (so a quoted "*" is not a glob), for computing what it matches
    glob: tuple[str, str] | None = field(default=None, compare=False)
    # filled in when it runs (xargs input, the {} of find -exec): nothing about it is known
    runtime: bool = field(default=False, compare=False)
    # the {} of find -exec: a path below these roots (None: can't be told), and whether find follows links
    found_below: tuple[tuple[str | None, ...], bool] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Command:
    """A simple command run by a literal program name; assignments and redirections left out."""

    words: tuple[Word, ...]
    # a wrapper whose wrapped command is listed too (timeout, nice, env, xargs, bash -c): allow rules
    # judge what it runs, deny and ask rules judge both
    wrapper: bool = False
    # for CLIs with global options (git -C . push): where the subcommand is, why it can't be told, and
    # whether the options skipped only change output (then allow rules see past them too)
    subcommand: int | None = None
    subcommand_unknown: str | None = None
    quiet_globals: bool = False
    # run by a script file the line runs (bash x.sh, ./x.sh): deny and ask rules judge it; an allow rule for
    # the script covers it, as it did before the file was read
    from_file: bool = False
    # the directories it may run in (relative words are resolved against each); None: can't be told (a cd
    # to an expansion, a cd in a loop, shell options that change what cd does)
    dirs: tuple[Path, ...] | None = field(default=None, compare=False)

    @property
    def program(self) -> str:
        return self.words[0].value or ""

    def line(self) -> str:
        """The words joined by spaces: values where known, text as written where not (made once: every
        rule asks for it)."""
        made = self.__dict__.get("_line")
        if made is None:
            made = " ".join(w.value if w.value is not None else w.text for w in self.words)
            object.__setattr__(self, "_line", made)
        return made

    def without_globals(self) -> str | None:
        """The line with the global options before the subcommand left out (``git push`` for ``git -C .
        push``), or None when there are none."""
        if self.subcommand is None or self.subcommand <= 1:
            return None
        rest = self.words[self.subcommand :]
        return " ".join([self.program, *(w.value if w.value is not None else w.text for w in rest)])

    def known_head(self) -> str | None:
        """The words before the first one with an expansion, joined; None when every word is known."""
        for i, w in enumerate(self.words):
            if w.value is None:
                return " ".join(x.value or "" for x in self.words[:i])
        return None


@dataclass(frozen=True)
class Write:
    """A file a redirection writes: the target as written and where it may land (empty: can't be told)."""

    target: str
    paths: tuple[Path, ...]
    tree: bool = False  # a directory the command fills with names that can't be told (tar -x, cp -r)
    unpacked: bool = False  # ... from an archive: names that no rule about the sources can vouch for


@dataclass(frozen=True)
class Analysis:
    commands: tuple[Command, ...] = ()
    unresolved: tuple[str, ...] = ()
    variables: tuple[str, ...] = ()
    writes: tuple[Write, ...] = ()
    error: str | None = None
    # programs not known to run no other command (an unknown program with arguments, an unknown option of
    # a known one, a variable set for it that isn't known to be inert): asked about under a deny rule
    untold: tuple[str, ...] = ()
    # files input redirections read (``< file``), with the directories they may be relative to
    reads: tuple[tuple[Word, tuple[Path, ...] | None], ...] = ()
    # why the line's globs can't be computed with bash's default options (shopt, GLOBIGNORE, bash -O)
    shell_options: tuple[str, ...] = ()
    # commands whose program can't be told ($'cat' f, $X f): kept for what their words may read
    opaque: tuple[Command, ...] = ()
    # a for loop's variable set by nothing else in the line: the words it walks (for f in src/*.py)
    loops: dict[str, tuple[Word, ...]] = field(default_factory=dict)
    # every value the line gives each variable it sets (None: one not known statically, an append, an array
    # element, a value read when it runs), for computing $NAME where it is read (tools.shell.reads)
    values: dict[str, tuple[str | None, ...]] = field(default_factory=dict)
    # script files of other languages the line runs (python3 x.py), with the directories they may be in
    code_files: tuple[tuple[str, tuple[Path, ...] | None], ...] = ()


def analyze(command: str, cwd: Path) -> Analysis:
    """Everything the permission check needs to know about one Bash command line run in ``cwd``."""
    reader = _Reader(Path(os.path.normpath(cwd)))
    if _nesting(command) > _MAX_NESTING:
        return Analysis(error=f"it is nested more than {_MAX_NESTING} levels deep, too deep to judge")
    try:
        reader.script(command, 0)
    except RecursionError:  # the walk is bounded (_MAX_LEVELS); this only guards a caller already deep
        return Analysis(error="it is nested too deeply to judge")
    return reader.result()


def _nesting(command: str) -> int:
    """How deep the line's brackets, substitutions and compound commands nest, as the words show them (a
    quoted bracket counts too: the count can only be over, never under, the parse's). Linear and cheap."""
    depth = deepest = 0
    for m in _NESTING.finditer(command):
        token = m.group()
        if token[0] in "'\\":
            continue
        if token in _CLOSERS:
            depth = max(0, depth - 1)
        else:
            depth += 1
            deepest = max(deepest, depth)
            if deepest > _MAX_NESTING:
                break  # deep enough to refuse: the rest need not be read
    return deepest


def _script_text(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_SCRIPT + 1)
    except (OSError, ValueError):
        return None
    if len(data) > _MAX_SCRIPT or b"\0" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    first = text.split("\n", 1)[0]
    if first.startswith("#!") and not _SHELL_LINE.search(first):
        return None  # python, node...: its code can't be judged as bash
    return text


def risky_variable(name: str) -> bool:
    """True for a variable whose value changes which program runs, or what runs at start-up."""
    return name in _RISKY or name.startswith(_RISKY_PREFIXES)


@functools.cache
def _language() -> Any:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Language(tree_sitter_bash.language())


def _parse(text: str) -> Any:
    import tree_sitter

    return tree_sitter.Parser(_language()).parse(text.encode("utf-8")).root_node


# ---- the walk ----------------------------------------------------------------------------------


@dataclass
class _Reader:
    cwd: Path
    commands: list[Command] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    untold: list[str] = field(default_factory=list)
    exported: list[str] = field(default_factory=list)  # names the line exports to the programs after it
    reads: list[tuple[Word, tuple[Path, ...] | None]] = field(default_factory=list)
    shell_options: list[str] = field(default_factory=list)
    chdir: tuple[Path, ...] | None = None  # env -C DIR cmd: where the wrapped command runs
    chdir_set: bool = False
    cd_options: bool = False
    # commands whose program can't be told: their words, and where they run (what they may read)
    opaque: list[Command] = field(default_factory=list)
    in_file: int = 0  # inside a script file the line runs
    variables: list[str] = field(default_factory=list)
    # (target, where it lands or None while relative, a tree): redirections and files programs write
    writes: list[tuple[str, tuple[Path, ...] | None, bool, bool]] = field(default_factory=list)
    links_from: int | None = None  # writes from this index on may go through a symlink the line made
    error: str | None = None
    dirs: list[Path] = field(default_factory=list)  # every directory the line may have cd'ed to so far
    dirs_known: bool = True
    loops: int = 0
    levels: int = 0  # how deep the walk is in the syntax tree, scripts inside scripts included
    evals: Evaluations = field(default_factory=Evaluations)  # what bash evaluates as code
    assignments: dict[str, int] = field(default_factory=dict)  # how many times the line sets each name
    loop_words: dict[str, tuple[tuple[Word, ...], int]] = field(default_factory=dict)
    values: dict[str, list[str | None]] = field(default_factory=dict)  # Analysis.values
    code_files: list[tuple[str, tuple[Path, ...] | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.dirs = [self.cwd]

    def result(self) -> Analysis:
        self.unresolved.extend(self.evals.problems())
        writes = []
        for i, (target, paths, tree, unpacked) in enumerate(self.writes):
            if self.links_from is not None and i >= self.links_from:
                paths = ()  # "ln -s .. up && echo x > up/P": up doesn't exist yet, so it can't be resolved
            elif paths is None:  # not normalised: "link/../x" lands next to the link's target, not here
                paths = tuple(d / target for d in self.dirs) if self.dirs_known else ()
            writes.append(Write(target, paths, tree, unpacked))
        return Analysis(
            tuple(self.commands),
            tuple(dict.fromkeys(self.unresolved)),
            tuple(dict.fromkeys(self.variables)),
            tuple(writes),
            self.error,
            tuple(dict.fromkeys(self.untold)),
            tuple(dict.fromkeys(self.reads)),
            tuple(dict.fromkeys(self.shell_options)),
            tuple(self.opaque),
            {n: w for n, (w, count) in self.loop_words.items() if self.assignments.get(n) == count},
            {n: tuple(v) for n, v in self.values.items()},
            tuple(self.code_files),
        )

    def here(self) -> tuple[Path, ...] | None:
        """The directories the command being read may run in, None when they can't be told."""
        if self.chdir_set:
            return self.chdir
        return tuple(self.dirs) if self.dirs_known else None

    def script(self, text: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            self.unresolved.append("scripts are nested too deeply to follow")
            return
        root = _parse(text)
        if root.has_error:
            bad = _first_error(root)
            self.error = self.error or f"bash can't parse it (near {bad!r})"
        if _joined_by_continuation(root, text):
            self.error = self.error or "a backslash-newline joins two words that the parser sees apart"
        self.visit(root, depth)

    def visit(self, node: Any, depth: int) -> None:
        if self.levels >= _MAX_LEVELS:
            self.error = self.error or f"it is nested more than {_MAX_LEVELS} levels deep, too deep to judge"
            return
        self.levels += 1
        try:
            self.visit_node(node, depth)
        finally:
            self.levels -= 1

    def visit_node(self, node: Any, depth: int) -> None:
        kind = node.type
        handler = _HANDLERS.get(kind)
        if handler is not None:
            if handler(self, node, depth):
                return
        if kind in ("for_statement", "while_statement", "c_style_for_statement"):
            if _CHANGES_DIRECTORY.search(_text(node)):
                self.dirs_known = False  # a later pass of the body runs where an earlier one moved to
            self.loops += 1
            for child in node.children:
                self.visit(child, depth)
            self.loops -= 1
            return
        for child in node.children:
            self.visit(child, depth)

    # -- simple commands

    def command(self, node: Any, depth: int) -> bool:
        name = node.child_by_field_name("name")
        words = [_word(name), *(_word(a) for a in node.children_by_field_name("argument"))] if name else []
        prefix = []
        for child in node.children:  # prefix assignments, redirections, substitutions inside words
            if words and words[0].text in _READERS and _assigns(child, "IFS"):
                continue  # "IFS= read -r line" only changes how read splits its input
            if child.type == "variable_assignment" and (target := child.child_by_field_name("name")):
                prefix.append(_text(target).split("[", 1)[0])
            self.visit(child, depth)
        if not words:
            return True
        for word in words[1:]:
            if word.text.startswith("{"):
                self.redirect_variable(word)
        self.program(words, _text(node), depth, tuple(prefix))
        return True

    def program(self, words: list[Word], text: str, depth: int, environment: tuple[str, ...] = ()) -> None:
        if depth > _MAX_DEPTH:
            self.unresolved.append(f"{_short(text)}: wrappers are nested too deeply to follow")
            return
        if words[0].value is None:
            self.unresolved.append(f"{_short(text)}: {_why_not_literal(words[0])}")
            self.opaque.append(Command(tuple(words), dirs=self.here()))
            return
        if words[0].text == "time":
            self.time_keyword(words, depth)
            return
        values = [w.value for w in words]
        name = words[0].value.rsplit("/", 1)[-1]
        if name in ("cd", "pushd", "popd"):
            self.change_directory(name, values)
        elif name == "shopt" or (name in _SHELLS and any(v in ("-O", "+O") for v in values[1:])):
            # nocaseglob, dotglob, extglob, globstar change what a glob matches; cdable_vars where cd goes
            self.shell_options.append(f"{_short(text)}: sets shell options")
            self.cd_options = True  # cdable_vars: a later cd may go where a variable says
        how: Unwrapped = unwrap(values)
        modelled = programs.models(name) or effects_module.models(name)
        file_script = None
        if how.script_file is not None:  # bash x.sh: the script's own commands are judged when it can be read
            file_script = self.script_file(how.script_file)
        elif (
            "/" in words[0].value and not modelled
        ):  # ./x.sh: likewise; a program file otherwise can't be told
            file_script = self.script_file(words[0].value)
            if file_script is None:
                self.untold.append(
                    f"{_short(text)}: {words[0].value} is a program file whose commands can't be read here"
                )
        if how.code_file is not None:
            self.code_files.append((how.code_file, self.here()))
        untold = known.untold(values, modelled) if file_script is None else None
        for why in (untold, how.untold):
            if why:
                self.untold.append(f"{_short(text)}: {why}")
        for variable in dict.fromkeys([*environment, *self.exported]):
            if why := known.variable_untold(variable, name, modelled):
                self.untold.append(f"{_short(text)}: {why}")
        wraps = bool(how.runs or how.scripts)
        sub = subcommands.find(values)
        self.commands.append(
            Command(
                tuple(words),
                wrapper=how.transparent and wraps,
                subcommand=sub.index if sub else None,
                subcommand_unknown=sub.unknown if sub else None,
                quiet_globals=sub.quiet if sub else False,
                from_file=self.in_file > 0,
                dirs=self.here(),
            )
        )
        if how.unresolved and not (how.script_file is not None and file_script is not None):
            self.unresolved.append(f"{_short(text)}: {how.unresolved}")
        if file_script is not None:
            self.in_file += 1
            try:
                self.script(file_script, depth + 1)
            finally:
                self.in_file -= 1
        self.variables.extend(how.settings)
        for variable in how.variables:
            self.assigned(variable, None if name in ("read", "mapfile", "readarray", "printf") else "")
        for run in how.runs:
            inner = words[run.start : run.stop]
            if run.placeholder:  # "xargs -I{} sh -c 'echo {}'": the script is data from the input
                below = _find_roots(values[1 : run.start]) if name == "find" else None
                inner = [
                    Word(w.text, None, runtime=True, found_below=below if w.text == "{}" else None)
                    if run.placeholder in w.text
                    else w
                    for w in inner
                ]
            if run.appends_input:
                inner.append(Word("<input>", None, runtime=True))
            passed = how.variables if name in ("env", "sudo") else ()  # env NAME=v prog: set for prog
            saved = self.chdir, self.chdir_set
            moves, moved = chdir_option(name, values[1 : run.start])
            if moves:
                here = self.here()
                self.chdir_set = True
                self.chdir = (
                    None
                    if moved is None or here is None
                    else tuple(Path(os.path.normpath(d / moved)) for d in here)
                )
            try:
                self.program(inner, " ".join(w.text for w in inner), depth + 1, passed)
            finally:
                self.chdir, self.chdir_set = saved
        for script in how.scripts:
            self.script(script, depth + 1)
        self.effects(values, text, depth)
        if name in _DECLARATIONS:  # reached through "builtin export ..." or "command declare ..."
            self.declared(values, text)
        if name in ("test", "[") and any(v in ("-v", "-R") for v in values):
            self.unresolved.append(f"{_short(text)}: -v names a variable whose subscript bash may evaluate")

    def script_file(self, name: str) -> str | None:
        """The text of a shell script file the line runs, when it can be judged: a readable text file of at
        most _MAX_SCRIPT bytes, with a sh/bash #! line or none, in each directory the command may run in
        (``cd scripts && bash x.sh`` reads scripts/x.sh; where it may be in two, both are judged)."""
        here = self.here()
        if not here or name.startswith("~"):
            return None
        texts = []
        for path in dict.fromkeys(Path(name) if name.startswith("/") else d / name for d in here):
            if not os.path.lexists(path) and len(here) > 1:
                continue  # not there: bash would not run it from that directory
            text = _script_text(path)
            if text is None:
                return None
            texts.append(text)
        return "\n".join(texts) if texts else None

    def effects(self, values: list[str | None], text: str, depth: int) -> None:
        """Commands a program runs and files it writes through its arguments (sed, tar, git, cp...)."""
        found = effects(values)
        if found.unresolved:
            self.unresolved.append(f"{_short(text)}: {found.unresolved}")
        for script in found.scripts:
            self.script(script, depth + 1)
        for target in found.writes:
            self.write(target, target if target is not None else "an expansion", tree=False)
        for source in found.reads:  # sed's r FILE: a file read, as a < redirection is
            self.reads.append((Word(source, source), self.here()))
        for target in found.trees:
            self.write(target, target, tree=True)
        for target in found.unpacks:
            self.write(target, target, tree=True, unpacked=True)
        if found.links and self.links_from is None:
            self.links_from = len(self.writes)

    def write(self, value: str | None, shown: str, *, tree: bool, unpacked: bool = False) -> None:
        if value is None:
            self.writes.append((shown, (), tree, unpacked))
        elif value.startswith("/"):
            self.writes.append((value, (Path(value),), tree, unpacked))
        else:
            self.writes.append((value, None, tree, unpacked))

    def time_keyword(self, words: list[Word], depth: int) -> None:
        """Unquoted ``time`` is bash's keyword timing a whole pipeline (``time ! rm x``, ``time { rm x; }``);
        the grammar reads it as a command, and splits a following group at its ``;``."""
        self.commands.append(Command(tuple(words), wrapper=len(words) > 1, dirs=self.here()))
        rest = words[1:]
        while rest and rest[0].text in ("-p", "--", "!"):
            rest = rest[1:]
        if rest and rest[0].text in _RESERVED:
            self.unresolved.append(
                f"{_short(' '.join(w.text for w in words))}: time runs a compound command "
                "that the parser splits apart"
            )
        elif rest:
            self.program(rest, " ".join(w.text for w in rest), depth + 1)

    def change_directory(self, name: str, values: list[str | None]) -> None:
        """Follow ``cd``/``pushd`` so redirections are judged in every directory the line may be in."""
        args = [v for v in values[1:] if v not in ("-L", "-P", "-e", "-@", "--")]
        if name == "popd" or (name == "pushd" and not args):
            return  # back to a directory already counted
        target = args[0] if len(args) == 1 else None
        if self.loops or target is None or target.startswith(("-", "+")) or self.cd_options:
            self.dirs_known = False  # "cd", "cd -", "cd $X", or a cd repeated by a loop
            return
        # plain cd takes ".." textually, cd -P through symlinks: keep both (the check resolves the second)
        moved = [form for d in self.dirs for form in (Path(os.path.normpath(d / target)), d / target)]
        self.dirs = list(dict.fromkeys([*self.dirs, *moved]))
        if len(self.dirs) > _MAX_DIRS:
            self.dirs_known = False

    # -- variables

    def assignment(self, node: Any, depth: int) -> bool:
        name_node = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        name = _text(name_node) if name_node is not None and name_node.type == "variable_name" else None
        if value is None:
            literal: str | None = ""
        elif value.type == "arithmetic_expansion":
            literal = ARITHMETIC_VALUE
        else:
            literal = _literal(value)[0]
        written = _text(value) if value is not None else ""
        if name is not None and _text(node)[len(_text(name_node)) :].startswith("+="):
            literal = None  # an append: the value is what was there plus this
        if name_node is not None:  # a[...]=x too: the subscript is arithmetic
            self.assigned(name or _text(name_node), literal, written)
        return False  # the value may hold substitutions: visit it

    def assigned(self, name: str, value: str | None, written: str = "") -> None:
        """Note a variable set to ``value`` (None: not known statically; ``written``: as in the line)."""
        if risky_variable(name):
            self.variables.append(f"sets {name}")
        base = name.split("[", 1)[0]
        self.assignments[base] = self.assignments.get(base, 0) + 1
        self.values.setdefault(base, []).append(None if base != name or self.loops else value)
        if base in _DIRECTORY_VARIABLES:
            self.dirs_known = False
        if base in _GLOB_VARIABLES or base == "HOME":
            self.shell_options.append(f"sets {base}")
        self.evals.assigned(name, value, written)

    def declaration(self, node: Any, depth: int) -> bool:
        """export/declare/local/readonly/typeset/unset: assignments are visited; other words must be literal."""
        words = [c for c in node.named_children if c.type not in ("variable_assignment", "variable_name")]
        values = [node.children[0].type, *(_literal(w)[0] for w in words)]
        if values[0] == "export" or any(v and v.startswith("-") and "x" in v for v in values[1:]):
            for child in node.named_children:  # exported: every later program of the line sees it
                target = child.child_by_field_name("name") if child.type == "variable_assignment" else child
                if child.type in ("variable_assignment", "variable_name") and target is not None:
                    self.exported.append(_text(target).split("[", 1)[0])
        self.declared(values, _text(node))
        return False

    def declared(self, values: list[str | None], text: str) -> None:
        for value in values[1:]:
            if value is None:
                self.unresolved.append(f"{_short(text)}: a variable name comes from an expansion")
            elif value.startswith("-"):
                if "n" in value[1:]:  # declare -n r=PATH: assigning r assigns PATH
                    self.variables.append(f"makes a variable a reference to another ({values[0]} {value})")
                if "i" in value[1:]:  # declare -i: every assignment is arithmetic
                    self.evals.integer = True
            else:
                name, _, assigned = value.partition("=")
                self.assigned(name, assigned)

    def for_loop(self, node: Any, depth: int) -> bool:
        variable = node.child_by_field_name("variable")
        if variable is not None:
            values = node.children_by_field_name("value")
            for v in values or [None]:  # "for x; do" walks the positional parameters
                self.assigned(_text(variable), None if v is None else _literal(v)[0])
            name = _text(variable)
            if values and name not in self.loop_words and self.assignments.get(name) == len(values):
                self.loop_words[name] = (tuple(_word(v) for v in values), self.assignments.get(name, 0))
            else:
                self.loop_words[name] = ((), -1)  # walked twice, or over the positional parameters
        return False

    def array(self, node: Any, depth: int) -> bool:
        """``a=([k]=v ...)``, ``declare -a a=(...)``, ``a+=(...)``: each ``[k]`` is a subscript bash
        evaluates as arithmetic after quote removal, so ``['$(cmd)']`` runs cmd, and ``[b]`` runs what
        ``b`` holds (issue 30)."""
        for element in node.named_children:
            text = _text(element)
            if not text.startswith("["):
                continue
            value = _pieces(element)[0]
            written = value if value is not None else text
            end = _subscript_end(written)
            if end is None:
                self.evals.arithmetic(written, f"the subscript of the array element {_short(text)}")
            else:
                self.evals.arithmetic(written[1:end], f"the subscript of the array element {_short(text)}")
        return False

    def redirect_variable(self, word: Word) -> None:
        """``{a[k]}>file`` assigns the descriptor to ``a[k]``: the subscript is arithmetic."""
        m = re.fullmatch(r"\{[A-Za-z_]\w*\[(.*)\]\}", word.text, re.DOTALL)
        if m:
            self.evals.arithmetic(
                m.group(1).replace("'", "").replace('"', ""), f"the subscript of {word.text}"
            )

    # -- arithmetic, tests

    def arithmetic(self, node: Any, depth: int) -> bool:
        """``$((...))``, ``$[...]``, ``((...))`` and a ``for ((...))`` header: bash evaluates the text."""
        parts, inside = [], False
        for child in node.children:
            if child.type in ("))", "]"):
                break
            if inside:
                parts.append(_text(child))
            inside = inside or child.type in ("((", "$((", "$[")
        self.evals.arithmetic(" ".join(parts), _short(_text(node).split("\n", 1)[0]))
        return False

    def compound(self, node: Any, depth: int) -> bool:
        if node.children and node.children[0].type == "((":
            self.arithmetic(node, depth)
        return False

    def expansion(self, node: Any, depth: int) -> bool:
        self.evals.expansion(_text(node))
        return False

    def test(self, node: Any, depth: int) -> bool:
        if _text(node).startswith("[["):  # the test builtin ([, test) compares integers without evaluating
            for n in _descendants(node):
                operator = n.child_by_field_name("operator")
                if n.type == "binary_expression" and operator is not None:
                    if _text(operator) in _ARITHMETIC_TESTS:
                        for side in ("left", "right"):
                            if (operand := n.child_by_field_name(side)) is not None:
                                self.evals.arithmetic(_text(operand), f"{_short(_text(n))} in [[ ]]")
        operators = {_text(n) for n in _descendants(node) if n.type == "test_operator"}
        if operators & {"-v", "-R"}:
            for n in _descendants(node):
                if n.type in (
                    "word",
                    "string",
                    "raw_string",
                    "concatenation",
                    "simple_expansion",
                    "expansion",
                ):
                    literal = _literal(n)[0]
                    if literal is None or _SUBSCRIPT_SUBSTITUTION.search(literal):
                        self.unresolved.append(f"{_text(node)}: -v names a variable bash may evaluate")
                        break
        return False

    # -- functions, substitutions, redirections

    def function(self, node: Any, depth: int) -> bool:
        self.unresolved.append(
            f"{_short(_text(node).split('{', 1)[0])}: defines a shell function, so a later "
            "word may run it instead of a program"
        )
        return False

    def substitution(self, node: Any, depth: int) -> bool:
        """Backquotes unescape \\`, \\$ and \\\\ before their inside is parsed: parse that text instead."""
        text = _text(node)
        if not text.startswith("`"):
            return False
        inner = text[1:-1] if text.endswith("`") and len(text) > 1 else text[1:]
        unescaped = re.sub(r"\\([\\`$])", r"\1", inner)
        if unescaped == inner:
            return False
        self.script(unescaped, depth + 1)
        return True

    def redirect(self, node: Any, depth: int) -> bool:
        operator = next((c.type for c in node.children if not c.is_named), "")
        destination = node.child_by_field_name("destination")
        if destination is None or destination.type == "process_substitution":
            return False
        value = _literal(destination)[0]
        if operator in ("<", "<>"):
            self.reads.append((_word(destination), self.here()))
        writes = operator in _WRITE_OPERATORS or (
            operator == ">&" and not (value or "").isdigit() and value != "-"
        )
        if writes:
            self.write(value, _text(destination), tree=False)
        return False


_DECLARATIONS = frozenset({"export", "declare", "typeset", "local", "readonly", "unset"})
_HANDLERS = {
    "command": _Reader.command,
    "variable_assignment": _Reader.assignment,
    "declaration_command": _Reader.declaration,
    "unset_command": _Reader.declaration,
    "for_statement": _Reader.for_loop,
    "arithmetic_expansion": _Reader.arithmetic,
    "expansion": _Reader.expansion,
    "c_style_for_statement": _Reader.arithmetic,
    "compound_statement": _Reader.compound,
    "test_command": _Reader.test,
    "function_definition": _Reader.function,
    "command_substitution": _Reader.substitution,
    "file_redirect": _Reader.redirect,
    "array": _Reader.array,
}


_SHELLS = frozenset({"bash", "sh", "rbash"})


def _find_roots(words: list[str | None]) -> tuple[tuple[str | None, ...], bool]:
    """The directories ``find`` walks (``.`` when none is named), and whether it follows links (-L)."""
    k, follow = 0, False
    while (
        k < len(words)
        and words[k] in ("-H", "-L", "-P", "-D")
        or (k < len(words) and (words[k] or "").startswith("-O"))
    ):
        follow = follow or words[k] == "-L"
        k += 2 if words[k] == "-D" else 1
    roots: list[str | None] = []
    for word in words[k:]:
        if word is not None and (word.startswith("-") or word in ("(", "!", ",")):
            break
        roots.append(word)
    return tuple(roots) or (".",), follow


def _subscript_end(text: str) -> int | None:
    """The index of the ``]`` closing the subscript that opens ``text``, or None."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if depth == 0:
            return i
    return None


def _assigns(node: Any, name: str) -> bool:
    """``node`` is ``name=<literal>``."""
    if node.type != "variable_assignment":
        return False
    target, value = node.child_by_field_name("name"), node.child_by_field_name("value")
    return target is not None and _text(target) == name and (value is None or _literal(value)[0] is not None)


# ---- words -------------------------------------------------------------------------------------


def _word(node: Any) -> Word:
    if node.type == "command_name" and node.named_child_count == 1:
        node = node.named_children[0]
    value, mask = _literal(node)
    if value is None and mask and node.type in ("word", "concatenation"):
        whole = _pieces(node)[0]  # a glob and nothing else: kept for computing its matches
        if whole is not None and not _BRACE.search(mask) and not mask.startswith("~"):
            return Word(_text(node), None, glob=(whole, mask))
    return Word(_text(node), value)


def _literal(node: Any) -> tuple[str | None, str]:
    """(value after quote removal or None, the value with quoted characters masked) for one word node.
    None when the word has an expansion, a glob, a brace expansion or a leading ``~``."""
    value, mask = _pieces(node)
    if value is None:
        return None, ""
    if node.type in ("word", "concatenation") and (
        _GLOB.search(mask) or _BRACE.search(mask) or mask.startswith("~")
    ):
        return None, mask
    return value, mask


def _pieces(node: Any) -> tuple[str | None, str]:
    kind, text = node.type, _text(node)
    if kind == "word":
        return _unescape(text)
    if kind == "number":
        return text, text
    if kind == "raw_string":
        return text[1:-1], _PLACEHOLDER * (len(text) - 2)
    if kind == "string":
        parts = [c for c in node.children if c.type not in ('"',)]
        if any(c.type != "string_content" for c in parts):
            return None, ""
        value = "".join(re.sub(r'\\([\\$`"])|\\\n', lambda m: m.group(1) or "", _text(c)) for c in parts)
        return value, _PLACEHOLDER * len(value)
    if kind == "concatenation":
        values, masks = zip(*(_pieces(c) for c in node.children), strict=True) if node.children else ((), ())
        if any(v is None for v in values):
            return None, ""
        return "".join(v for v in values if v is not None), "".join(masks)
    return None, ""


def _unescape(text: str) -> tuple[str, str]:
    """Quote removal in an unquoted word: ``\\x`` is x (masked), backslash-newline disappears."""
    if "\\" not in text:
        return text, text
    value, mask, i = [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            if text[i + 1] != "\n":
                value.append(text[i + 1])
                mask.append(_PLACEHOLDER)
            i += 2
            continue
        value.append(text[i])
        mask.append(text[i])
        i += 1
    return "".join(value), "".join(mask)


def _why_not_literal(word: Word) -> str:
    text = word.text
    if text.startswith("$'"):
        return "the program name uses $'...' quoting"
    if "$(" in text or "`" in text or "<(" in text:
        return "the program name comes from a command substitution"
    if "$" in text:
        return "the program name comes from a variable expansion"
    if text.startswith("~"):
        return "the program name starts with ~"
    if _BRACE.search(text):
        return "the program name is a brace expansion"
    return "the program name is a glob pattern"


# ---- tree helpers ------------------------------------------------------------------------------


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 60 else line[:57] + "..."


def _text(node: Any) -> str:
    return node.text.decode("utf-8", errors="replace")


def _descendants(node: Any) -> list[Any]:
    out, stack = [], list(node.children)
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n.children)
    return out


def _first_error(root: Any) -> str:
    for n in [root, *_descendants(root)]:
        if n.is_error or n.is_missing:
            return _text(n)[:40] or n.type
    return ""


def _joined_by_continuation(root: Any, text: str) -> bool:
    """bash joins ``r\\<newline>m`` into one word ``rm``; the grammar sees two. True when that happens
    outside quotes, heredocs and comments."""
    data = text.encode("utf-8")
    for m in re.finditer(rb"(?<=\S)\\\n(?=\S)", data):
        inside = root.descendant_for_byte_range(m.start(), m.end())
        kinds = set()
        while inside is not None:
            kinds.add(inside.type)
            inside = inside.parent
        if not kinds & {"raw_string", "string", "heredoc_body", "comment", "ansi_c_string"}:
            return True
    return False
