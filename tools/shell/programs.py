"""What a program does with its arguments, when it runs other programs: the knowledge ``tools.shell.reader`` needs.

``unwrap(values)`` takes one simple command's words (``None`` for a word with an expansion) and says what
else the command runs: a wrapped command (``timeout 5 rm x`` runs ``rm x``), a shell script (``bash -c
'...'``, ``eval``, ``watch``), or something that can't be told from the words (``source x.sh``, ``python -c``,
a shell reading stdin). It is pure and knows nothing of tree-sitter, rules or paths.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tools.shell import subcommands

Values = Sequence[str | None]


@dataclass(frozen=True)
class Run:
    """A command run by another: ``words[start:stop]``, plus the input ``xargs`` appends to it."""

    start: int
    stop: int
    appends_input: bool = False
    # words holding this are filled in when it runs (xargs -I{}, find -exec {}): their value is data
    placeholder: str | None = None


@dataclass(frozen=True)
class Unwrapped:
    runs: tuple[Run, ...] = ()
    scripts: tuple[str, ...] = ()  # shell scripts the command runs, to be parsed as bash
    unresolved: str | None = None  # why what it runs can't be told, as a clause ("sources a script file")
    # allow rules judge only what it runs: the wrapper changes how, not what (timeout, nice, env, xargs)
    transparent: bool = False
    variables: tuple[str, ...] = ()  # NAME=VALUE words it passes on (env, sudo): risky ones must ask
    settings: tuple[str, ...] = ()  # other ways it changes what a program runs, as a clause
    untold: str | None = None  # whether it runs another command can't be told (an unknown option)
    script_file: str | None = None  # a shell script file it runs (bash x.sh): read and judged when it can be
    # a script file of another language it runs (python3 x.py): not judged as bash; under a Read deny rule its
    # text is looked through for the names the rules deny (tools.permissions.engine)
    code_file: str | None = None


NOTHING = Unwrapped()


@dataclass(frozen=True)
class _Wrapper:
    """Options of a program that runs the command after them."""

    valued: frozenset[str] = frozenset()  # options followed by a value ("-n 5", "--signal KILL")
    flags: frozenset[str] = frozenset()  # options without a value
    # options whose value is optional: only attached ("-i{}", "--replace=X"), never the next word
    optional: frozenset[str] = frozenset()
    positional: int = 0  # words between the options and the command (timeout's duration)
    transparent: bool = True
    assignments: bool = False  # NAME=VALUE words may come before the command
    numeric_flags: bool = False  # "-5" is an option (nice)


def _opts(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WRAPPERS: dict[str, _Wrapper] = {
    # each table follows the program's --help on a GNU/Linux system (coreutils, util-linux, findutils);
    # an option not listed, an abbreviated long option included, makes the wrapped command unknown
    "timeout": _Wrapper(
        _opts("-s -k --signal --kill-after"),
        _opts("-v --verbose --foreground --preserve-status"),
        positional=1,
    ),
    "nice": _Wrapper(_opts("-n --adjustment"), numeric_flags=True),
    "nohup": _Wrapper(),
    "stdbuf": _Wrapper(_opts("-i -o -e --input --output --error")),
    "setsid": _Wrapper(flags=_opts("-c -f -w --ctty --fork --wait")),
    "time": _Wrapper(flags=_opts("-p -a -v -q --portability --verbose --quiet")),
    "command": _Wrapper(flags=_opts("-p")),
    "builtin": _Wrapper(),
    "env": _Wrapper(
        _opts("-u -C --unset --chdir"),
        _opts("- -i -0 -v --null --ignore-environment --debug --list-signal-handling"),
        optional=_opts("--block-signal --default-signal --ignore-signal"),
        assignments=True,
    ),
    "ionice": _Wrapper(_opts("-c -n --class --classdata"), _opts("-t --ignore")),
    "xargs": _Wrapper(
        _opts(
            "-I -n -P -L -s -d -E -a --max-args --max-procs --max-chars --delimiter --arg-file "
            "--process-slot-var"
        ),
        _opts("-0 -r -t -p -x -o --null --no-run-if-empty --verbose --interactive --exit --open-tty"),
        optional=_opts("-i -e -l --replace --eof --max-lines"),
    ),
    "busybox": _Wrapper(),
    "sudo": _Wrapper(
        _opts(
            "-u -g -h -p -C -D -r -t -U -T -R --user --group --host --prompt --close-from "
            "--chdir --role --type --other-user --command-timeout --chroot"
        ),
        _opts(
            "-A -b -E -H -k -K -l -n -P -S -s -i -v -V -B -N --preserve-env --login --shell "
            "--non-interactive --stdin --askpass --background --set-home --reset-timestamp "
            "--preserve-groups --bell --no-update"
        ),
        transparent=False,
        assignments=True,
    ),
    "doas": _Wrapper(_opts("-u -C"), _opts("-n -s"), transparent=False),
    "chroot": _Wrapper(_opts("--userspec --groups"), _opts("--skip-chdir"), positional=1, transparent=False),
    # flock FILE -c 'script' is handled in _flock; "-c" before the file is an error there
    "flock": _Wrapper(
        _opts("-w -E --timeout --wait --conflict-exit-code"),
        _opts(
            "-s -x -u -n -o -e -F --shared --exclusive --unlock --nonblock --nb --close --no-fork --verbose"
        ),
        positional=1,
    ),
    # the dynamic loader runs the program file it is given, like executing it
    "ld.so": _Wrapper(
        _opts(
            "--library-path --inhibit-rpath --audit --preload --argv0 --glibc-hwcaps-prepend "
            "--glibc-hwcaps-mask"
        ),
        _opts("--list --verify --inhibit-cache"),
    ),
    "prlimit": _Wrapper(
        _opts("-o -p --output --pid"),
        _opts("--noheadings --raw --verbose"),
        optional=_opts(
            "-c -d -e -f -i -l -m -n -q -r -s -t -u -v -x -y --core --data --nice --fsize --sigpending "
            "--memlock --rss --nofile --msgqueue --rtprio --stack --cpu --nproc --as --locks --rttime"
        ),
    ),
    "setpriv": _Wrapper(
        _opts(
            "--ambient-caps --inh-caps --bounding-set --ruid --euid --rgid --egid --reuid --regid "
            "--groups --securebits --pdeathsig --selinux-label --apparmor-profile --landlock-access "
            "--landlock-rule --seccomp-filter"
        ),
        _opts("-d --dump --nnp --no-new-privs --clear-groups --keep-groups --init-groups --reset-env"),
        transparent=False,
    ),
}
# the dynamic loader's file names (glibc, musl)
_LOADER = re.compile(r"ld-linux[\w.-]*\.so[.\d]*|ld(64)?\.so[.\d]*|ld-musl-[\w.-]+\.so[.\d]*")
_HELP = frozenset({"--help", "--version"})

# runs a shell script given in its arguments; the script is parsed as bash
_BASH_LIKE = frozenset({"bash", "sh", "dash", "ash", "ksh", "mksh", "yash", "posh", "rbash"})
# shells whose language is not bash: their scripts can't be judged with a bash parser
_OTHER_SHELLS = frozenset(
    {"zsh", "fish", "csh", "tcsh", "nu", "xonsh", "pwsh", "elvish", "osh", "ysh", "rc", "es"}
)
_SHELL_LONG_FLAGS = _opts(
    "--norc --noprofile --posix --login --noediting --restricted --verbose --debugger --protected"
)

# programs that run a command taken from their arguments in ways not worth modelling
_RUNNERS = frozenset(
    {
        "su",
        "runuser",
        "script",
        "tmux",
        "screen",
        "expect",
        "unshare",
        "nsenter",
        "firejail",
        "strace",
        "ltrace",
        "valgrind",
        "gdb",
        "systemd-run",
        "dbus-run-session",
        "ssh-agent",
        "chrt",
        "taskset",
        "unbuffer",
        "caffeinate",
        "proot",
        "fakeroot",
        "fakechroot",
        "torsocks",
        "proxychains",
        "proxychains4",
        "sg",
        "newgrp",
        "pkexec",
        "sudoedit",
        "run-parts",
        "entr",
        "start-stop-daemon",  # --exec/--startas name the program, -- separates its arguments
        "at",  # at, batch and crontab schedule commands read from input or a file
        "batch",
        "crontab",
        "bwrap",
        "dbus-launch",
        "xvfb-run",
        "chronic",
        "ifne",
        "sem",
        "rlwrap",
        "run0",
        "nix-shell",
        # issue 30: programs that run the command after their own arguments, found by trying them
        "setarch",
        "linux32",
        "linux64",
        "uname26",
        "i386",
        "x86_64",
        "logsave",
        "capsh",
        "hyperfine",
        "numactl",
        "cgexec",
        "chpst",
        "envdir",
        "softlimit",
        "setuidgid",
        "daemonize",
        "perf",
        "catchsegv",
        "trickle",
        "cpulimit",
        "watchexec",
        "nodemon",
        "tini",
        "dumb-init",
        "direnv",
        "with-contenv",
        "s6-setuidgid",
    }
)
# builtins that run code they read or define, or change how later names are found
_CODE_BUILTINS = {
    "source": "runs the commands of a script file",
    ".": "runs the commands of a script file",
    "alias": "defines an alias",
    "enable": "loads or enables shell builtins",
    "fc": "re-runs commands from the history",
    "let": "evaluates arithmetic, and bash runs command substitutions found in array subscripts",
}


@dataclass(frozen=True)
class _Interpreter:
    code_short: str = ""  # option letters whose value is code ("c" for python)
    code_long: frozenset[str] = frozenset()
    valued_short: str = ""  # option letters taking the next word as a value when nothing follows them
    attached_short: str = ""  # option letters that take the rest of their word ("-i.bak")
    stop_short: str = ""  # after this option the rest belongs to a module ("python -m pytest ...")
    interactive_short: str = ""  # options that read code from standard input after the script ("-i")
    subcommand: frozenset[str] = frozenset()  # subcommands taking code ("deno eval")
    module_short: str = ""  # options naming a module to load: code when more than a name ("-M'X;system'")


_INTERPRETERS: list[tuple[re.Pattern[str], _Interpreter]] = [
    (
        re.compile(r"(python|pypy)[0-9.]*"),
        _Interpreter("c", valued_short="WXQ", stop_short="m", interactive_short="i"),
    ),
    (re.compile(r"perl[0-9.]*"), _Interpreter("eE", attached_short="IMmxilC0dDF", module_short="Mm")),
    (re.compile(r"ruby[0-9.]*|jruby"), _Interpreter("e", valued_short="rIC", attached_short="iExTWK")),
    (
        re.compile(r"node(js)?|bun"),
        _Interpreter("ep", _opts("--eval --print"), valued_short="r", attached_short=""),
    ),
    (re.compile(r"deno"), _Interpreter(subcommand=_opts("eval repl"))),
    (re.compile(r"php[0-9.]*"), _Interpreter("rBRFE", valued_short="cdz")),
    (re.compile(r"lua(jit)?[0-9.]*"), _Interpreter("e", valued_short="l")),
    (re.compile(r"Rscript|R|julia|osascript"), _Interpreter("e")),
    (re.compile(r"i?python3?"), _Interpreter("c")),
    (re.compile(r"tclsh|wish|irb|jshell|ghci|scala|groovy"), _Interpreter()),
]
_VERSION = _opts("-V --version -h --help")


# run whatever program, package or code they are given: never widened to "prog:*" by an "always" answer
_LAUNCHERS = frozenset({"npx", "pnpx", "bunx", "uvx", "pipx", "java", "dotnet", "ssh"})


@functools.cache  # a handful of regular expressions per program name, asked per command
def models(name: str) -> bool:
    """True for a program whose way of running other commands is modelled here."""
    return bool(
        name in _WRAPPERS
        or name in _RUNNERS
        or name in _CODE_BUILTINS
        or name in _SPECIAL
        or name in _LAUNCHERS
        or name in _BASH_LIKE
        or name in _OTHER_SHELLS
        or _LOADER.fullmatch(name)
        or any(pattern.fullmatch(name) for pattern, _ in _INTERPRETERS)
    )


def runs_anything(name: str) -> str | None:
    """How an "always" rule for ``name`` must stay narrow: "script" for an interpreter, shell or launcher
    (keep the module or script it runs), "exact" for a wrapper or runner (only the exact line), None for
    other programs."""
    if name in _WRAPPERS or name in _RUNNERS or name in _CODE_BUILTINS or _LOADER.fullmatch(name):
        return "exact"
    if name in ("exec", "coproc", "eval", "trap", "watch", "parallel"):
        return "exact"
    if name in _LAUNCHERS or name in _BASH_LIKE or name in _OTHER_SHELLS:
        return "script"
    return "script" if any(pattern.fullmatch(name) for pattern, _ in _INTERPRETERS) else None


def unwrap(values: Values) -> Unwrapped:
    """What the simple command ``values`` runs besides itself (``values[0]`` is its program, a literal)."""
    name = (values[0] or "").rsplit("/", 1)[-1]
    if name in _CODE_BUILTINS:
        sourced = values[1] if name in ("source", ".") and len(values) > 1 else None
        return Unwrapped(unresolved=f"{name} {_CODE_BUILTINS[name]}", script_file=sourced)
    if name in _RUNNERS:
        return Unwrapped(unresolved=f"{name} runs a program given in its arguments")
    special = _SPECIAL.get(name)
    if special is not None:
        return special(values)
    if name in _WRAPPERS:
        return _wrapper(name, values)
    if _LOADER.fullmatch(name):
        return _wrapper("ld.so", values)
    if name in _BASH_LIKE or name in _OTHER_SHELLS:
        return _shell(name, values)
    for pattern, interpreter in _INTERPRETERS:
        if pattern.fullmatch(name):
            return _interpreter(name, interpreter, values)
    return NOTHING


# ---- wrappers ----------------------------------------------------------------------------------


def _options(spec: _Wrapper, values: Values, i: int) -> tuple[int, list[str]] | str:
    """Skip the wrapper's options from ``values[i]``: (index of the command, NAME=VALUE names) or why not."""
    names: list[str] = []
    while i < len(values):
        word = values[i]
        if word is None:
            return "its arguments contain an expansion, so the program it runs can't be told"
        if word == "--":
            return i + 1, names
        if word in _HELP:
            return len(values), names  # prints help or version, runs nothing
        if spec.assignments and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_%]*=.*", word, re.DOTALL):
            names.append(word.split("=", 1)[0])
        elif word.startswith("--"):
            option = word.split("=", 1)[0]
            if option in spec.valued:
                i += 0 if "=" in word else 1
            elif option not in spec.flags and option not in spec.optional:
                return f"it has the option {word}, unknown here, so the program it runs can't be told"
        elif word.startswith("-") and word != "-":
            if spec.numeric_flags and word[1:].isdigit():
                i += 1
                continue
            for j, letter in enumerate(word[1:], 1):
                if f"-{letter}" in spec.valued:
                    i += 0 if j < len(word) - 1 else 1
                    break
                if f"-{letter}" in spec.optional:
                    break  # the rest of the word, if any, is its value
                if f"-{letter}" not in spec.flags:
                    return f"it has the option {word}, unknown here, so the program it runs can't be told"
        elif word == "-" and "-" in spec.flags:
            pass
        else:
            return i, names
        i += 1
    return i, names


def _wrapper(name: str, values: Values) -> Unwrapped:
    spec = _WRAPPERS[name]
    if name == "command" and any(v in ("-v", "-V") for v in values[1:2]):
        return NOTHING  # "command -v x" only looks x up
    found = _options(spec, values, 1)
    if isinstance(found, str):
        return Unwrapped(unresolved=f"{name}: {found}", transparent=spec.transparent)
    start, names = found
    if start >= len(values):
        return NOTHING
    start += spec.positional
    if name == "flock" and start < len(values) and values[start] in ("-c", "--command"):
        script = values[start + 1] if start + 1 < len(values) else None
        if script is None or start + 2 != len(values):
            return Unwrapped(unresolved="flock -c runs a shell command that can't be told")
        return Unwrapped(scripts=(script,), transparent=True)
    settings = tuple(
        f"loads code into the program with {v}"
        for v in values[1:start]
        if name == "ld.so"
        and v is not None
        and v.split("=", 1)[0] in ("--preload", "--audit", "--library-path")
    )
    if name in ("sudo", "doas") and start >= len(values):
        if any(v in ("-s", "-i", "--shell", "--login") for v in values[1:]):
            return Unwrapped(unresolved=f"{name} starts a shell that reads commands from its input")
        return NOTHING
    if start >= len(values):
        return NOTHING  # "env" prints the environment, "xargs" alone runs echo, "nohup" alone fails
    placeholder = _xargs_placeholder(values[1:start]) if name == "xargs" else None
    return Unwrapped(
        runs=(
            Run(
                start, len(values), appends_input=name == "xargs" and not placeholder, placeholder=placeholder
            ),
        ),
        transparent=spec.transparent,
        variables=tuple(names),
        settings=settings,
    )


def _xargs_placeholder(options: Values) -> str | None:
    """The replace string of xargs -I R / -iR / -i / --replace[=R] (``{}`` by default), or None."""
    for k, word in enumerate(options):
        if word == "-I":
            return options[k + 1] if k + 1 < len(options) else None
        if word is not None and word.startswith(("-I", "-i", "--replace")):
            value = word.partition("=")[2] if word.startswith("--") else word[2:]
            return value or "{}"
    return None


def _exec(values: Values) -> Unwrapped:
    found = _options(_Wrapper(_opts("-a"), _opts("-c -l")), values, 1)
    if isinstance(found, str):
        return Unwrapped(unresolved=f"exec: {found}")
    start, _ = found
    if start >= len(values):
        return NOTHING  # "exec 3>file" only redirects
    return Unwrapped(
        runs=(Run(start, len(values)),), unresolved="exec replaces the shell with the program it runs"
    )


def _coproc(values: Values) -> Unwrapped:
    runs = (Run(1, len(values)),) if len(values) > 1 else ()
    return Unwrapped(runs=runs, unresolved="coproc runs a command in the background as a co-process")


def _eval(values: Values) -> Unwrapped:
    literal = all(v is not None for v in values[1:])
    scripts = (" ".join(v for v in values[1:] if v is not None),) if literal else ()
    return Unwrapped(scripts=scripts, unresolved="eval runs its arguments as shell code")


def _trap(values: Values) -> Unwrapped:
    args = [v for v in values[1:] if v != "--"]
    if len(args) < 2 or args[0] in ("-p", "-l"):
        return NOTHING
    scripts = (args[0],) if args[0] is not None else ()
    return Unwrapped(scripts=scripts, unresolved="trap runs its argument as shell code when a signal comes")


def _watch(values: Values) -> Unwrapped:
    spec = _Wrapper(  # procps watch --help
        _opts("-n -q --interval --equexit"),
        _opts(
            "-b -c -C -e -g -p -t -x -w -r --beep --color --no-color --errexit "
            "--chgexit --precise --no-title --exec --no-wrap --no-rerun"
        ),
        optional=_opts("-d --differences"),
    )
    found = _options(spec, values, 1)
    if isinstance(found, str):
        return Unwrapped(unresolved=f"watch: {found}")
    start, _ = found
    if start >= len(values):
        return NOTHING
    if any(v in ("-x", "--exec") for v in values[1:start]):
        return Unwrapped(runs=(Run(start, len(values)),), transparent=True)
    rest = values[start:]
    if any(v is None for v in rest):
        return Unwrapped(unresolved="watch runs its arguments as shell code, and they contain an expansion")
    return Unwrapped(scripts=(" ".join(v for v in rest if v is not None),), transparent=True)


def _parallel(values: Values) -> Unwrapped:
    """GNU parallel runs its command template through a shell, once per input."""
    words = list(values[1:])
    stop = next((j for j, v in enumerate(words) if v in (":::", "::::", ":::+", "::::+")), len(words))
    template = words[:stop]
    if not template:
        return Unwrapped(unresolved="parallel reads the commands it runs from its input")
    if any(v is None or v.startswith("-") for v in template):
        return Unwrapped(unresolved="parallel: its options or an expansion hide the command it runs")
    if any(v is not None and "{" in v for v in template):
        return Unwrapped(
            unresolved="parallel fills its command template ({}) with input, so it can't be told"
        )
    return Unwrapped(scripts=(" ".join(v for v in template if v is not None),), transparent=True)


def _find(values: Values) -> Unwrapped:
    """``find`` runs the commands of -exec/-execdir/-ok/-okdir; -delete and -fprint* change files."""
    runs, i = [], 1
    while i < len(values):
        word = values[i]
        if word in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((j for j in range(i + 1, len(values)) if values[j] in (";", "+")), None)
            if end is None or end == i + 1:
                return Unwrapped(unresolved=f"find {word} has no command ending in ';' or '+'")
            runs.append(Run(i + 1, end, placeholder="{}"))
            i = end
        elif word in ("-delete", "-fprint", "-fprint0", "-fprintf", "-fls"):
            return Unwrapped(runs=tuple(runs), unresolved=f"find {word} changes files itself")
        i += 1
    return Unwrapped(runs=tuple(runs))


def _fd(values: Values) -> Unwrapped:
    """``fd -x cmd`` / ``-X cmd`` run cmd on the files found; ``{}``, ``{/}``, ``{.}``... are file names."""
    for k, word in enumerate(values[1:], 1):
        if word in ("-x", "--exec", "-X", "--exec-batch"):
            if k + 1 >= len(values):
                return Unwrapped(unresolved=f"fd {word} has no command")
            return Unwrapped(runs=(Run(k + 1, len(values), placeholder="{"),))
    return NOTHING


def _read_builtin(values: Values) -> Unwrapped:
    """``read``/``mapfile`` name variables; a name can't be told when it is an expansion."""
    if any(v is None for v in values[1:]):
        return Unwrapped(unresolved=f"{values[0]} sets a variable whose name comes from an expansion")
    if values[0] in ("mapfile", "readarray") and any(
        v is not None and v.startswith("-C") for v in values[1:]
    ):
        return Unwrapped(unresolved=f"{values[0]} -C runs a callback command")
    return Unwrapped(variables=tuple(v for v in values[1:] if v is not None and not v.startswith("-")))


def _named_by_option(option: str, builtin: str) -> Callable[[Values], Unwrapped]:
    """Builtins setting the variable named after ``option`` (``wait -p NAME``, ``compgen -V NAME``)."""

    def reader(values: Values) -> Unwrapped:
        for j, v in enumerate(values[1:], 1):
            if v is not None and v.startswith(option):
                target = v[len(option) :] or (values[j + 1] if j + 1 < len(values) else "")
                if target is None:
                    return Unwrapped(
                        unresolved=f"{builtin} {option} sets a variable whose name comes from an expansion"
                    )
                return Unwrapped(variables=(target,))
        return NOTHING

    return reader


def _getopts(values: Values) -> Unwrapped:
    """``getopts OPTSTRING NAME [ARGS]``: NAME is set for every option found."""
    if len(values) < 3:
        return NOTHING
    if values[2] is None:
        return Unwrapped(unresolved="getopts sets a variable whose name comes from an expansion")
    return Unwrapped(variables=(values[2],))


def _printf(values: Values) -> Unwrapped:
    for j, v in enumerate(values[1:-1], 1):
        if v == "-v":
            target = values[j + 1]
            if target is None:
                return Unwrapped(unresolved="printf -v sets a variable whose name comes from an expansion")
            return Unwrapped(variables=(target,))
    return NOTHING


def _hash(values: Values) -> Unwrapped:
    if any(v is None or (v.startswith("-") and "p" in v) for v in values[1:]):
        return Unwrapped(unresolved="hash -p sets which file a command name runs")
    return NOTHING


def _git(values: Values) -> Unwrapped:
    """``git -c name=value``, ``--config-env``, ``--exec-path=`` and ``--git-dir`` change which programs
    git itself runs (pager, editor, hooks, fsmonitor)."""
    settings, j = [], 1
    while j < len(values) and (word := values[j]) is not None and word.startswith("-"):
        if word in ("-c", "--config-env", "--git-dir"):
            settings.append(f"sets git configuration with {word}")
            j += 1
        elif word.startswith(("-c", "--config-env=", "--exec-path=", "--git-dir=")):
            settings.append(f"sets git configuration with {word.split('=', 1)[0]}")
        elif word in ("-C", "--work-tree", "--namespace"):
            j += 1
        j += 1
    return Unwrapped(settings=tuple(settings))


# package runners: the command after their options is a program (npx prettier), or a script with -c
_PACKAGE_RUNNERS = {
    "npx": _Wrapper(_opts("-p --package -w --workspace"), _opts("-y --yes --no -q --quiet --no-install")),
    "pnpx": _Wrapper(_opts("-p --package"), _opts("-y --yes")),
    "bunx": _Wrapper(_opts("-p --package"), _opts("--bun")),
    "uvx": _Wrapper(_opts("--from --with --python -p --index"), _opts("-q --quiet --isolated --offline")),
    "pipx run": _Wrapper(_opts("--spec --python --pip-args --index-url"), _opts("--no-cache --verbose -q")),
    "npm exec": _Wrapper(
        _opts("-p --package -w --workspace"), _opts("-y --yes --no -q --quiet --workspaces")
    ),
    "npm x": _Wrapper(_opts("-p --package -w --workspace"), _opts("-y --yes --no -q --quiet --workspaces")),
    "pnpm exec": _Wrapper(_opts("--filter -F"), _opts("-r --recursive --parallel --no-bail")),
    "pnpm dlx": _Wrapper(_opts("-p --package"), _opts("-s --silent")),
    "yarn dlx": _Wrapper(_opts("-p --package"), _opts("-q --quiet")),
    "yarn exec": _Wrapper(),
    "uv run": _Wrapper(
        _opts(
            "--with --with-requirements --with-editable --python -p --package --extra --group --env-file "
            "--index --directory --project"
        ),
        _opts("-q --quiet --frozen --locked --no-sync --isolated --all-extras --no-dev --active --offline"),
    ),
    "uv tool": _Wrapper(),
    "poetry run": _Wrapper(),
    "pdm run": _Wrapper(),
    "hatch run": _Wrapper(),
    "bundle exec": _Wrapper(),
    "dotnet tool": _Wrapper(),
}


def _package_runner(values: Values) -> Unwrapped:
    """``npx pkg args``, ``npm exec -- pkg``, ``uv run pytest``: the package's program runs with the rest
    (it is judged as a program in turn); ``-c``/``--call``/``--shell-mode`` run a shell script."""
    name = (values[0] or "").rsplit("/", 1)[-1]
    start = 1
    if name not in _PACKAGE_RUNNERS:
        sub = subcommands.find(values)
        index = (
            sub.index
            if sub is not None
            else next((k for k, v in enumerate(values[1:], 1) if v is None or not v.startswith("-")), None)
        )
        if index is None or values[index] is None:
            if sub is not None and sub.unknown is not None:
                return Unwrapped(untold=f"{name}: {sub.unknown}, so what it runs can't be told")
            return NOTHING
        name = f"{name} {values[index]}"
        if name not in _PACKAGE_RUNNERS:
            return NOTHING
        start = index + 1
        if name in ("uv tool", "dotnet tool"):
            if values[start : start + 1] != ["run"]:
                return NOTHING
            start += 1
    for k, word in enumerate(values[start:], start):
        if word in ("-c", "--call", "--shell-mode") or (word or "").startswith("--call="):
            script = (
                (word or "").partition("=")[2]
                if "=" in (word or "")
                else (values[k + 1] if k + 1 < len(values) else None)
            )
            if script is None:
                return Unwrapped(unresolved=f"{name} {word} runs a shell command that can't be told")
            return Unwrapped(scripts=(script,), transparent=True)
        if word == "--" or (word is not None and not word.startswith("-")):
            break
    found = _options(_PACKAGE_RUNNERS[name], values, start)
    if isinstance(found, str):
        return Unwrapped(unresolved=f"{name}: {found}")
    first, _ = found
    if first >= len(values):
        return NOTHING
    return Unwrapped(runs=(Run(first, len(values)),), transparent=True)


def _java(values: Values) -> Unwrapped:
    for word in values[1:]:
        if word is None or re.search(r"OnError|OnOutOfMemoryError|agentpath|agentlib|javaagent|@", word):
            return Unwrapped(
                unresolved="java: its options run a command or load an agent of the caller's choosing"
            )
        if not word.startswith("-"):
            break
    return NOTHING


_SPECIAL = {
    "exec": _exec,
    "coproc": _coproc,
    "eval": _eval,
    "trap": _trap,
    "watch": _watch,
    "parallel": _parallel,
    "find": _find,
    "fd": _fd,
    "fdfind": _fd,
    "read": _read_builtin,
    "mapfile": _read_builtin,
    "readarray": _read_builtin,
    "printf": _printf,
    "git": _git,
    "hash": _hash,
    "java": _java,
    "wait": _named_by_option("-p", "wait"),
    "compgen": _named_by_option("-V", "compgen"),
    "getopts": _getopts,
    **dict.fromkeys(
        (
            "npx",
            "pnpx",
            "bunx",
            "uvx",
            "npm",
            "pnpm",
            "yarn",
            "uv",
            "poetry",
            "pdm",
            "hatch",
            "bundle",
            "pipx",
        ),
        _package_runner,
    ),
    "dotnet": _package_runner,
}


# ---- shells and interpreters -------------------------------------------------------------------


def _shell(name: str, values: Values) -> Unwrapped:
    command_flag, i = False, 1
    while i < len(values):
        word = values[i]
        if word is None:
            return Unwrapped(
                unresolved=f"{name} has an argument with an expansion, so what it runs can't be told"
            )
        if word in ("--version", "--help"):
            return NOTHING
        if word in ("--", "-"):
            i += 1
            break
        if word.startswith("--"):
            if word not in _SHELL_LONG_FLAGS:
                return Unwrapped(unresolved=f"{name} {word} reads start-up code or options unknown here")
        elif word[:1] in "-+" and len(word) > 1:
            letters = word[1:]
            if "s" in letters or "i" in letters:
                return Unwrapped(unresolved=f"{name} {word} reads its script from standard input")
            command_flag = command_flag or "c" in letters
            i += letters.count("o") + letters.count("O")  # "-o pipefail", "-O extglob"
        else:
            break
        i += 1
    if not command_flag:
        if i < len(values):
            script_file = values[i] if name in _BASH_LIKE else None
            return Unwrapped(unresolved=f"{name} runs the script file {values[i]}", script_file=script_file)
        return Unwrapped(unresolved=f"{name} reads its script from standard input")
    if i >= len(values):
        return Unwrapped(unresolved=f"{name} -c has no script")
    script = values[i]
    if script is None:
        return Unwrapped(unresolved=f"the script of {name} -c comes from an expansion")
    if name in _OTHER_SHELLS:
        return Unwrapped(unresolved=f"{name} -c runs a {name} script, which a bash parser can't judge")
    return Unwrapped(scripts=(script,), transparent=True)


def _interpreter(name: str, spec: _Interpreter, values: Values) -> Unwrapped:
    code = Unwrapped(unresolved=f"{name} runs code given on the command line, which can run any program")
    stdin = Unwrapped(unresolved=f"{name} reads code from standard input, which can run any program")
    if len(values) > 1 and values[1] in spec.subcommand:
        return code
    i, interactive = 1, False
    while i < len(values):
        word = values[i]
        if word is None:
            return Unwrapped(unresolved=f"{name} has an option that comes from an expansion")
        if word in _VERSION and i == 1 and len(values) == 2:
            return NOTHING
        if word == "-":
            return stdin
        if word == "--":
            return NOTHING if i + 1 < len(values) and not interactive else stdin
        if word.startswith("--"):
            if word.split("=", 1)[0] in spec.code_long:
                return code
        elif word.startswith("-") and len(word) > 1:
            for j, letter in enumerate(word[1:], 1):
                if letter in spec.code_short:
                    return code
                if letter in spec.interactive_short:
                    interactive = True
                if letter in spec.stop_short:
                    module = word[j + 1 :] or (values[i + 1] if i + 1 < len(values) else "")
                    start = i + 1 if word[j + 1 :] else i + 2
                    return _python_module(name, module, values[start:], interactive)
                if letter in spec.module_short and not re.fullmatch(r"-?[\w:]*(=[\w,:.-]*)?", word[j + 1 :]):
                    return code
                if letter in spec.attached_short:
                    break
                if letter in spec.valued_short:
                    i += 1 if j == len(word) - 1 else 0
                    break
        else:
            # a script file: what it does is the allow rule's business, unless -i reads more code after it
            return stdin if interactive else Unwrapped(code_file=word)
        i += 1
    return stdin


# python -m MODULE: modules that run code, commands or a debugger's input taken from their arguments or
# standard input (the standard library's and common third-party REPLs and debuggers)
_CODE_MODULES = frozenset(
    """
    timeit code asyncio pdb cProfile profile trace doctest runpy idlelib idlelib.idle idlelib.pyshell
    sqlite3 tkinter turtledemo turtle pstats IPython ipykernel ipykernel_launcher jupyter jupyter_console
    ptpython bpython ipdb pudb xonsh hy pyperf line_profiler kernprof memory_profiler scalene pyinstrument
    py_spy viztracer debugpy
    """.split()
)
# standard library modules whose command line takes no code and runs no other program
_INERT_STDLIB_MODULES = frozenset(
    """
    json.tool http.server venv py_compile compileall unittest ensurepip zipfile tarfile gzip base64 calendar
    platform sysconfig site tabnanny tokenize ast dis uuid mimetypes filecmp pickletools quopri zipapp
    this random string encodings.rot_13 pyclbr sysconfig lib2to3 unittest.mock
    """.split()
)


# installed tools run as modules whose command lines take no code (what a project's tests or build do is the
# allow rule's business, as for the same tools run by name)
_INERT_TOOL_MODULES = frozenset(
    """
    pytest pip mypy black ruff flake8 pylint isort build twine tox nox setuptools wheel pyright bandit
    pycodestyle pyflakes pydocstyle coverage.html mkdocs sphinx poetry pipx uv hatch maturin pre_commit
    """.split()
)


def _python_module(name: str, module: str | None, rest: Values, interactive: bool) -> Unwrapped:
    """``python -m MODULE ARGS``: a module known to run code from its arguments or input is code; a module
    known to take no code (the inert standard modules, installed tools such as pytest and mypy) runs as
    that tool does; any other (a module of the project, a package not known here) runs code no one has
    read, so what it does can't be told (issue 40)."""
    if module is None:
        return Unwrapped(unresolved=f"{name} -m runs a module named by an expansion")
    if not module:
        return NOTHING  # python prints an error
    if interactive:
        return Unwrapped(unresolved=f"{name} -i reads code from standard input, which can run any program")
    top = module.split(".", 1)[0]
    if module in _CODE_MODULES or top in _CODE_MODULES:
        return Unwrapped(
            unresolved=f"{name} -m {module} runs code or commands given in its arguments or input, which can "
            "run any program"
        )
    if module == "coverage":
        return _coverage(["coverage", *rest])
    if module == "pip" and any(v is None or _abbreviates_long(v, "--python") for v in rest):
        return Unwrapped(unresolved=f"{name} -m pip --python runs the interpreter it names")
    if module in _INERT_STDLIB_MODULES or top in _INERT_TOOL_MODULES:
        return NOTHING
    if top in _stdlib_modules():
        return Unwrapped(
            untold=f"{name} -m {module} is a standard module not known here, so whether it runs code from "
            "its arguments or input can't be told"
        )
    return Unwrapped(
        untold=f"{name} -m {module} runs a module not known here (the project's own, or a package's), whose "
        "code can run any program"
    )


@functools.cache
def _stdlib_modules() -> frozenset[str]:
    import sys

    return frozenset(getattr(sys, "stdlib_module_names", ())) | {"idlelib", "turtledemo", "__hello__"}


def _abbreviates_long(word: str, option: str) -> bool:
    """``word`` names the long ``option`` or a prefix of it (getopt_long and argparse take unique prefixes;
    an ambiguous one is counted too: fail closed)."""
    name = word.split("=", 1)[0]
    return name.startswith("--") and len(name) > 2 and option.startswith(name)


# coverage run [OPTIONS] (-m MODULE | SCRIPT) ARGS: runs a module or a script as python would
_COVERAGE_VALUED = frozenset(
    "--concurrency --context --data-file --include --omit --rcfile --source --debug".split()
)


def _coverage(values: Values) -> Unwrapped:
    sub = next((k for k, v in enumerate(values[1:], 1) if v is None or not v.startswith("-")), None)
    if sub is None:
        return NOTHING
    if values[sub] is None:
        return Unwrapped(unresolved="coverage has a command named by an expansion")
    if values[sub] != "run":
        return NOTHING  # report, html, combine, erase...: read data and write reports
    i = sub + 1
    while i < len(values):
        word = values[i]
        if word is None:
            return Unwrapped(unresolved="coverage run has an argument with an expansion")
        if word in ("-m", "--module") or (word.startswith("--") and _abbreviates_long(word, "--module")):
            module = values[i + 1] if i + 1 < len(values) else ""
            return _python_module("coverage run", module, values[i + 2 :], False)
        if word == "--" or not word.startswith("-"):
            return NOTHING  # a script file, as python runs it
        if word.split("=", 1)[0] in _COVERAGE_VALUED and "=" not in word:
            i += 1
        i += 1
    return NOTHING


_SPECIAL["coverage"] = _coverage


# wrappers whose option moves the wrapped command to another directory
_CHDIR_OPTIONS = {"env": ("-C", "--chdir"), "sudo": ("-D", "--chdir")}


def chdir_option(name: str, options: list[str | None]) -> tuple[bool, str | None]:
    """Whether ``env -C DIR``/``sudo -D DIR`` runs its command elsewhere, and in which directory (None
    when it can't be told)."""
    short, long = _CHDIR_OPTIONS.get(name, ("", ""))
    found, where = False, None
    for k, word in enumerate(options if short else ()):
        if word is None:
            continue
        option, eq, value = word.partition("=")
        if word == short or (option.startswith("--") and len(option) > 3 and long.startswith(option)):
            found = True
            where = value if eq else (options[k + 1] if k + 1 < len(options) else None)
        elif word.startswith(short) and len(word) > 2 and not word.startswith("--"):
            found, where = True, word[2:]
    return found, where
