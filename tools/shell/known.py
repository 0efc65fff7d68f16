"""Which programs are known not to run other commands: the open-world half of the Bash check.

The tables in ``tools.shell.programs`` and ``tools.shell.effects`` list programs, options and variables that
make a program run another command. A finite list can't be complete: a program nobody listed (``setarch
x86_64 rm f``, ``capsh -- -c 'rm f'``) passes it. So the question is turned around: a program is trusted not
to run another command only when we know it doesn't —

- it is on the inert list below: programs that never execute their arguments, whatever the options (their
  options that do run something are modelled in ``effects``: ``sort --compress-program``, ``split
  --filter``, ``gcc -wrapper``);
- or ``programs``/``effects`` model it (wrappers, shells, interpreters, git, make, tar, sed, npm, cargo...),
  so what it runs is reported by them;
- or it has no arguments at all (nothing of the line can steer it).

``untold(values)`` says why a simple command is not known that way, as a clause, or None.
``variable_untold(name, program)`` does the same for a ``NAME=value`` in front of a command (or passed by
``env``): a variable is inert only when the program is known and the variable is not one it reads a command
or its options from. The permission engine asks about what is untold when a deny rule is in force or an
allow rule would spare the question, naming the rule. Pure: words in, clauses out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

Values = Sequence[str | None]

# programs that never run a command named in their arguments or environment (POSIX utilities, coreutils,
# util-linux, findutils' siblings, the shell's own builtins, everyday developer tools). Options that do
# run something (sort --compress-program, split --filter, diff3 --diff-program) are in ``effects``.
INERT = frozenset(
    """
    ls dir vdir cat tac head tail wc cut tr uniq sort paste join comm fold fmt nl od hexdump xxd base64
    base32 basenc basename dirname realpath readlink pwd date cal sleep true false yes seq tee mkdir
    rmdir rm cp mv ln touch chmod chown chgrp stat du df id whoami groups uname hostname nproc printenv
    tty sum cksum md5sum sha1sum sha224sum sha256sum sha384sum sha512sum b2sum shuf rev expand unexpand
    column truncate mktemp mkfifo mknod sync link unlink shred csplit split pr ptx tsort numfmt factor
    pathchk logname users who w uptime free ps pgrep pkill kill killall pidof lsof test [ expr echo
    printf grep egrep fgrep zgrep rg ag file which whereis type jq yq tree find fd fdfind xargs gzip
    gunzip zcat bzip2 bunzip2 bzcat xz unxz xzcat lzma zstd unzstd zstdcat lz4 tar gtar bsdtar zip
    unzip 7z cmp diff diff3 sdiff strings nm objdump readelf size ldd iconv locale less more most
    curl wget sed gsed awk gawk mawk nawk dd install rsync sqlite3 lsblk lscpu clear reset tput
    stty getconf dirs popd pushd cd exit return shift set unset export declare typeset local readonly
    read mapfile readarray wait : jobs fg bg disown umask ulimit times getopts caller help history
    break continue hash shopt suspend logout compgen complete compopt bind
    pytest py.test ruff mypy black isort flake8 pyflakes pycodestyle pydocstyle bandit tox
    nox eslint prettier tsc tslint stylelint rustfmt gofmt goimports golint staticcheck shellcheck
    shfmt hadolint yamllint markdownlint clang-format clang-tidy cargo go npm pnpm yarn pip pip3 make
    gmake git gcc cc c++ g++ clang clang++ cmake rustc docker podman kubectl oc helm terraform tofu
    poetry uv aws systemctl apt apt-get ssh scp sftp nc ncat netcat socat
    """.split()
)

# programs that run the repository's own code whatever their arguments (bare included): hook managers
REPOSITORY_CODE = frozenset({"pre-commit", "prek", "lefthook", "husky", "overcommit"})

# variables a program reads a command, a program path or its own options from: never inert for it.
# "*" means every variable is one (make imports the environment as make variables: CC, SHELL, MAKEFILES).
_PROGRAM_VARIABLES: dict[str, tuple[str, ...]] = {
    "make": ("*",),
    "gmake": ("*",),
    "tar": ("TAR_OPTIONS", "TAPE", "RSH"),
    "gtar": ("TAR_OPTIONS", "TAPE", "RSH"),
    "grep": ("GREP_OPTIONS",),
    "gzip": ("GZIP",),
    "xz": ("XZ_OPT", "XZ_DEFAULTS"),
    "zstd": ("ZSTD_CLEVEL",),
    "less": ("LESS", "LESSOPEN", "LESSCLOSE", "LESSKEY", "LESSEDIT", "VISUAL", "EDITOR"),
    "more": ("MORE", "PAGER", "EDITOR"),
    "curl": ("CURL_HOME", "CURLOPT", "SSL_CERT"),
    "wget": ("WGETRC", "SYSTEM_WGETRC"),
    "rsync": ("RSYNC_RSH", "RSYNC_CONNECT_PROG", "RSYNC_PROXY"),
    "ssh": ("SSH_", "DISPLAY"),
    "scp": ("SSH_",),
    "sftp": ("SSH_",),
    "gcc": ("COMPILER_PATH", "GCC_EXEC_PREFIX", "GCC_", "DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES"),
    "cc": ("COMPILER_PATH", "GCC_EXEC_PREFIX", "GCC_", "DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES"),
    "g++": ("COMPILER_PATH", "GCC_EXEC_PREFIX", "GCC_"),
    "c++": ("COMPILER_PATH", "GCC_EXEC_PREFIX", "GCC_"),
    "clang": ("COMPILER_PATH", "CCC_", "CLANG_"),
    "clang++": ("COMPILER_PATH", "CCC_", "CLANG_"),
    "cmake": ("CMAKE_", "CC", "CXX", "FC", "ASM", "CUDACXX", "HIPCXX", "OBJC", "SWIFTC", "CTEST_"),
    "rustc": ("RUSTC", "RUSTFLAGS", "CARGO_"),
    "cargo": ("CARGO_", "RUSTC", "RUSTDOC", "RUSTFLAGS", "CC", "CXX", "AR", "LD", "CFLAGS", "TARGET_"),
    "go": ("CC", "CXX", "FC", "AR", "CGO_", "GOTOOLCHAIN", "GOENV", "GOROOT", "GOTOOLDIR", "PKG_CONFIG"),
    "npm": ("npm_", "NPM_", "NODE_OPTIONS"),
    "pnpm": ("npm_", "NPM_", "PNPM_", "NODE_OPTIONS"),
    "yarn": ("npm_", "NPM_", "YARN_", "NODE_OPTIONS"),
    "pip": ("PIP_",),
    "pip3": ("PIP_",),
    "pytest": ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"),
    "py.test": ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"),
    "tox": ("TOX_",),
    "coverage": ("COVERAGE_",),
    "git": ("GIT_", "EDITOR", "VISUAL", "PAGER", "LESS"),
    "docker": ("DOCKER_",),
    "podman": ("CONTAINERS_", "PODMAN_"),
    "kubectl": ("KUBECONFIG", "KUBECTL_"),
    "helm": ("HELM_", "KUBECONFIG"),
    "terraform": ("TF_",),
    "tofu": ("TF_", "TOFU_"),
    "poetry": ("POETRY_",),
    "uv": ("UV_",),
    "aws": ("AWS_",),
    "systemctl": ("SYSTEMD_",),
    "apt": ("APT_",),
    "apt-get": ("APT_",),
    "hg": ("HG", "EDITOR", "VISUAL", "PAGER"),
    "svn": ("SVN_", "EDITOR", "VISUAL"),
    "gh": ("GH_", "GITHUB_", "BROWSER", "EDITOR", "VISUAL", "PAGER"),
    "brew": ("HOMEBREW_",),
    "eslint": ("ESLINT_",),
    "sqlite3": ("SQLITE_",),
    "dd": (),
}
# variables no program reads a command from: locale, terminal, colour and CI switches, log levels
_INERT_VARIABLES = frozenset(
    """
    CI DEBUG VERBOSE NODE_ENV RAILS_ENV RACK_ENV APP_ENV ENV_NAME ENVIRONMENT LANG LANGUAGE TZ TERM
    COLUMNS LINES NO_COLOR FORCE_COLOR CLICOLOR CLICOLOR_FORCE COLORTERM PYTHONUNBUFFERED
    PYTHONDONTWRITEBYTECODE PYTHONHASHSEED PYTHONWARNINGS PYTHONIOENCODING PYTHONUTF8 RUST_LOG
    RUST_BACKTRACE RUST_MIN_STACK LOG_LEVEL LOGLEVEL GOMAXPROCS GOGC GODEBUG CGO_ENABLED GOOS GOARCH
    GO111MODULE NODE_NO_WARNINGS TMPDIR TEMP TMP SOURCE_DATE_EPOCH USER LOGNAME HOSTNAME
    """.split()
)
_LOCALE = re.compile(r"LC_[A-Z]+")


def base(values: Values) -> str:
    return (values[0] or "").rsplit("/", 1)[-1]


def untold(values: Values, modelled: bool) -> str | None:
    """Why whether the simple command ``values`` runs another command can't be told (None: it is known
    not to, or what it runs is reported elsewhere). ``modelled``: ``programs``/``effects`` know it."""
    name = base(values)
    if name in REPOSITORY_CODE:
        return (
            f"{name} runs the hooks the repository configures (.pre-commit-config.yaml and the like), code no "
            "one has read here"
        )
    if modelled or name in INERT or len(values) < 2:
        return None
    if "/" in (values[0] or ""):
        return (
            f"{values[0]} is a program file not known here, so whether it runs a command from its "
            "arguments can't be told"
        )
    return (
        f"{name} is not a program known here, so whether it runs a command from its arguments can't be told"
    )


def variable_untold(variable: str, program: str, modelled: bool) -> str | None:
    """Why ``variable=...`` set for ``program`` may change what it runs (None: known to be inert)."""
    if variable in _INERT_VARIABLES or _LOCALE.fullmatch(variable):
        return None
    reads = _PROGRAM_VARIABLES.get(program)
    if reads is None and not (modelled or program in INERT):
        return (
            f"{variable}=... is set for {program}, a program not known here, which may read a command from it"
        )
    for prefix in reads or ():
        if prefix == "*" or variable == prefix or (prefix.endswith("_") and variable.startswith(prefix)):
            return f"{program} reads {variable} from its environment, which can change what it runs"
    return None
