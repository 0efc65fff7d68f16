"""A repository's own git configuration, when it can make git run a program (issue 40).

``git status`` runs ``core.fsmonitor``; ``git diff`` runs ``diff.external`` and textconv drivers; almost any
command runs an alias, a pager, a filter, or the ``post-index-change`` hook; ``git commit`` its commit
hooks (``pre-commit``, ``commit-msg``..., the pre-commit framework's among them), ``git push`` ``pre-push``. A repository can set these in
its ``.git/config`` (a project unpacked from an archive, an embedded repository, a bare one) and git obeys
them with no question. ``doubt(words, dirs)`` finds the repository a git command works on (``-C`` options
followed, ``.git`` files and bare repositories as git finds them) and says why it may run a program the
repository names, or None when its configuration holds only keys known to be inert.

The check is an allow list, not a list of dangerous keys: a key not known to be inert (an alias, a pager,
an include, a driver, anything new) counts. The Git LFS filter with its standard commands is inert. Files
are read, never executed; a configuration that can't be read or parsed counts too (fail closed).
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

_MAX_CONFIG = 256 * 1024
# sections whose every key is a setting, never a program or a file of code
_INERT_SECTIONS = frozenset(
    """
    user extensions gc pack index feature fetch pull push init color advice status log commit rerere help
    i18n transfer maintenance http safe worktree blame tag versionsort rebase am apply checkout clone column
    grep notes repack reset stash splitindex mailmap url
    """.split()
)
_INERT_KEYS = {
    "core": frozenset(
        """
        repositoryformatversion filemode bare logallrefupdates ignorecase precomposeunicode symlinks autocrlf
        eol safecrlf quotepath sparsecheckout sparsecheckoutcone compression loosecompression untrackedcache
        commentchar commentstring abbrev excludesfile attributesfile worktree checkstat trustctime splitindex
        multipackindex preloadindex fscache longpaths whitespace warnambiguousrefs deltabasecachelimit
        bigfilethreshold packedgitlimit packedgitwindowsize filesreflocktimeout packedrefstimeout
        createobject notesref hidedotfiles sharedrepository fsync fsyncmethod fsmonitorhookversion
        """.split()
    ),
    "remote": frozenset(
        "url pushurl fetch push tagopt prune prunetags mirror promisor partialclonefilter skipdefaultupdate "
        "skipfetchall followremotehead".split()
    ),
    "branch": frozenset(
        "remote merge rebase pushremote description autosetupmerge autosetuprebase sort".split()
    ),
    "submodule": frozenset(
        "url active branch fetchrecursesubmodules ignore recurse fetchjobs propagatebranches".split()
    ),
    "diff": frozenset(
        "renames renamelimit algorithm mnemonicprefix noprefix srcprefix dstprefix relative submodule "
        "colormoved colormovedws context interhunkcontext indentheuristic ignoresubmodules statgraphwidth "
        "wserrorhighlight orderfile dirstat suppressblankempty autorefreshindex".split()
    ),
    "merge": frozenset(
        "ff conflictstyle renames renamelimit log stat autostash defaulttoupstream directoryrenames "
        "verifysignatures branchdesc verbosity".split()
    ),
    "lfs": frozenset("url pushurl repositoryformatversion locksverify access fetchrecentalways".split()),
    "protocol": frozenset({"version"}),
}
# the Git LFS filter as `git lfs install` writes it
_LFS_FILTER = {
    "clean": "git-lfs clean -- %f",
    "smudge": "git-lfs smudge -- %f",
    "process": "git-lfs filter-process",
    "required": "true",
}
_BOOLEAN = frozenset({"", "true", "false", "yes", "no", "on", "off", "1", "0"})
# hooks git runs for commands that only look too: writing the index (git status refreshes it) and refs
_ALWAYS_HOOKS = ("post-index-change", "reference-transaction")
# hooks git runs for the commands that make commits, move HEAD or talk to a remote (a repository's own code:
# .git/hooks/pre-commit, or the hook the pre-commit framework installs from .pre-commit-config.yaml)
_COMMIT_HOOKS = (
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "post-rewrite",
    "pre-auto-gc",
)
_MERGE_HOOKS = ("pre-merge-commit", "prepare-commit-msg", "commit-msg", "post-merge", "pre-auto-gc")
_SUBCOMMAND_HOOKS = {
    "commit": _COMMIT_HOOKS,
    "merge": _MERGE_HOOKS,
    "pull": (*_MERGE_HOOKS, "post-checkout", "post-rewrite", "pre-rebase"),
    "cherry-pick": _COMMIT_HOOKS,
    "revert": _COMMIT_HOOKS,
    "rebase": ("pre-rebase", "post-rewrite", "post-checkout", *_COMMIT_HOOKS),
    "am": ("applypatch-msg", "pre-applypatch", "post-applypatch", *_COMMIT_HOOKS),
    "push": ("pre-push",),
    "checkout": ("post-checkout",),
    "switch": ("post-checkout",),
    "worktree": ("post-checkout",),
    "fetch": ("pre-auto-gc",),
    "gc": ("pre-auto-gc",),
}
_SECTION = re.compile(r'\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\\n]|\\.)*)")?\s*\](.*)')
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9-]*)\s*(?:=(.*))?")


def doubt(words: Sequence[str | None], dirs: Sequence[Path] | None) -> str | None:
    """Why the git command ``words`` (``words[0]`` is git) may run a program its repository's own
    configuration names, run from any of ``dirs`` (None: the directory can't be told)."""
    if dirs is None:
        return "git runs in a directory that can't be told, so its repository's configuration can't be read"
    starts = list(dirs)
    hooks: tuple[str, ...] = _ALWAYS_HOOKS
    k = 1
    while k < len(words) and (word := words[k]) is not None and word.startswith("-"):
        if word == "-C":
            target = words[k + 1] if k + 1 < len(words) else None
            if target is None:
                return "git -C names a directory that can't be told, so its configuration can't be read"
            starts = [s / os.path.expanduser(target) if target else s for s in starts]
            k += 1
        elif word in ("-c", "--config-env", "--git-dir", "--work-tree", "--namespace", "--exec-path"):
            k += 1
        k += 1
    sub = words[k] if k < len(words) else None
    if sub is None and k < len(words):
        hooks = tuple(dict.fromkeys([*_ALWAYS_HOOKS, *(h for hs in _SUBCOMMAND_HOOKS.values() for h in hs)]))
    elif sub in _SUBCOMMAND_HOOKS:
        hooks = (*_ALWAYS_HOOKS, *_SUBCOMMAND_HOOKS[sub])
    for start in dict.fromkeys(starts):
        if why := _repository_doubt(start, hooks):
            return why
    return None


def _repository_doubt(start: Path, hooks: tuple[str, ...] = _ALWAYS_HOOKS) -> str | None:
    found = _find_git_dir(str(start))
    if found is None:
        return None
    git_dir, why = found
    if why:
        return why
    common = git_dir
    try:
        text = _small_text(os.path.join(git_dir, "commondir")).strip()
        common = os.path.normpath(os.path.join(git_dir, text)) if text else git_dir
    except FileNotFoundError:
        pass
    except OSError:
        return f"{git_dir}/commondir can't be read, so the repository's configuration can't be judged"
    for name in dict.fromkeys(
        [
            os.path.join(common, "config"),
            os.path.join(git_dir, "config"),
            os.path.join(common, "config.worktree"),
            os.path.join(git_dir, "config.worktree"),
        ]
    ):
        try:
            st = os.stat(name)
        except FileNotFoundError:
            continue
        except OSError as e:
            return f"{name} can't be read ({e.strerror}), so the repository's configuration can't be judged"
        if why := _config_doubt(name, st.st_mtime_ns, st.st_size, st.st_ino):
            return why
    for hook in dict.fromkeys(hooks):
        path = os.path.join(common, "hooks", hook)
        if os.access(path, os.X_OK) and os.path.isfile(path):
            return f"the repository has a {hook} hook ({path}), which git runs for this command too"
    return None


def _find_git_dir(start: str) -> tuple[str, str | None] | None:
    """The git directory git would use from ``start``: ``.git`` (a directory, or a file naming one) in it
    or a parent, or a bare repository itself; None when there is none."""
    d = os.path.normpath(start)
    while True:
        dot = os.path.join(d, ".git")
        try:
            mode = os.stat(dot).st_mode
        except FileNotFoundError:
            mode = None
        except OSError as e:
            return d, f"{dot} can't be read ({e.strerror}), so its git configuration can't be judged"
        if mode is not None and stat.S_ISDIR(mode):
            return dot, None
        if mode is not None:
            try:
                text = _small_text(dot)
            except OSError as e:
                return dot, f"{dot} can't be read ({e.strerror}), so its git configuration can't be judged"
            m = re.match(r"gitdir:\s*(.+?)\s*$", text, re.MULTILINE)
            if not m:
                return dot, f"{dot} doesn't name a git directory git could use, so it can't be judged"
            return os.path.normpath(os.path.join(d, m.group(1))), None
        if (
            os.path.isfile(os.path.join(d, "HEAD"))
            and os.path.isdir(os.path.join(d, "objects"))
            and os.path.isdir(os.path.join(d, "refs"))
        ):
            return d, None  # a bare repository: git uses it as it is
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _small_text(path: str) -> str:
    """The first 4 KB of a small text file (a ``.git`` file, ``commondir``), read again only when it
    changes."""
    st = os.stat(path)
    return _read_small(path, st.st_mtime_ns, st.st_size, st.st_ino)


@functools.lru_cache(maxsize=256)
def _read_small(path: str, mtime_ns: int, size: int, inode: int) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read(4096)


@functools.lru_cache(maxsize=256)  # keyed by the file's identity and change time: an edit is seen
def _config_doubt(path: str, mtime_ns: int, size: int, inode: int) -> str | None:
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_CONFIG + 1)
    except OSError as e:
        return f"{path} can't be read ({e.strerror}), so the repository's configuration can't be judged"
    if len(data) > _MAX_CONFIG:
        return f"{path} is too large to judge"
    text = data.decode("utf-8", errors="replace")
    for section, sub, key, value in _entries(text):
        if section is None:
            return f"{path} can't be parsed here (near {key!r}), so what it makes git run can't be told"
        if not _inert(section, sub, key, value):
            name = f"{section}.{sub}.{key}" if sub is not None else f"{section}.{key}"
            return (
                f"the repository's configuration ({path}) sets {name}, which is not known to be inert: it may "
                "make git run a program"
            )
    return None


def _inert(section: str, sub: str | None, key: str, value: str) -> bool:
    if section == "core" and key == "fsmonitor":
        return value.strip().lower() in _BOOLEAN
    if section == "filter" and sub == "lfs":
        return _LFS_FILTER.get(key) == " ".join(value.split())
    if section in _INERT_SECTIONS:
        return True
    if section == "diff" and sub is not None:
        return False  # diff.<driver>.command / textconv
    if section == "merge" and sub is not None:
        return False  # merge.<driver>.driver
    if section == "lfs" and sub is not None:
        return key in ("access", "locksverify")
    return key in _INERT_KEYS.get(section, frozenset())


def _entries(text: str) -> list[tuple[str | None, str | None, str, str]]:
    """(section, subsection, key, value) for every variable; (None, None, line, "") for a line that can't be
    parsed. Sections and keys are lower-cased, subsections kept (git compares them exactly)."""
    out: list[tuple[str | None, str | None, str, str]] = []
    section: str | None = ""
    sub: str | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            m = _SECTION.fullmatch(line)
            if not m:
                out.append((None, None, line[:40], ""))
                continue
            name, sub, line = m.group(1).lower(), m.group(2), m.group(3).strip()
            if sub is None and "." in name:  # the old [section.subsection] form
                name, sub = name.split(".", 1)
            section = name
            if not line or line[0] in "#;":
                continue
        while line.endswith("\\") and i < len(lines):  # a value continued on the next line
            line = line[:-1] + lines[i]
            i += 1
        m = _KEY.fullmatch(line)
        if not m or section == "":
            out.append((None, None, line[:40], ""))
            continue
        out.append((section, sub, m.group(1).lower(), (m.group(2) or "").strip().strip('"')))
    return out
