"""Whether a tool call may run: allow, ask the user, or deny — Claude Code's rules and modes (CONTRACT §6).

Order of evaluation for one call::

    deny rule matches            -> deny   (in every mode, bypassPermissions included)
    plan mode, mutating tool     -> deny   (Bash, Write, Edit: plan mode only looks)
    ask rule matches             -> ask    (allow in bypassPermissions)
    bypassPermissions            -> allow
    allow rule matches           -> allow  (rules given at startup or "always" answers this session)
    Read/Grep/Glob               -> allow inside the project, the session's store or an additional
                                    directory; ask elsewhere
    acceptEdits, Write/Edit      -> allow inside the project or an additional directory
    Bash/Write/Edit              -> ask
    any other tool               -> allow  (e.g. Snip: it only touches the agent's own context)

Rules: ``Tool`` matches every call of the tool; ``Bash(npm test:*)`` matches commands starting with the
words ``npm test``, ``Bash(make)`` only that exact command, and ``*`` elsewhere in a Bash rule is a
wildcard. A compound command (``&&``, ``||``, ``;``, ``|``, ``&``, newlines, ``$(...)``) is allowed by
rules only when every part is, and denied when any part is. Deny and ask rules also see through the ways a
part can hide the program it runs: ``(rm x)``, ``{ rm x; }``, ``then rm x``, ``! rm x``, ``\\rm``,
``r"m"``, ``/bin/rm``, wrappers such as ``sudo``, ``env``, ``timeout 5``, ``nice -n 5``, ``xargs``, and the
script of ``bash -c "..."`` or ``eval "..."``. Allow rules never do: a wrapped command asks. Path rules (``Edit(src/**)``) are
gitignore-like globs: relative to the project directory, ``/x`` from the project root, ``//x`` from the
filesystem root, ``~/x`` from the home directory; a pattern without a slash matches a name at any depth.
``Edit`` rules cover every editing tool (Edit, Write) and ``Read`` rules every reading tool (Read, Grep,
Glob), as in Claude Code.

Asking is the caller's job (print mode turns "ask" into a denial); this module only decides.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

READ_ONLY_TOOLS = frozenset({"Read", "Grep", "Glob"})
EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
MUTATING_TOOLS = EDIT_TOOLS | {"Bash"}
# a rule naming the key covers these tools too
_RULE_FAMILY = {"Edit": EDIT_TOOLS, "Read": READ_ONLY_TOOLS}
_PREVIEW_LINES = 40

Behavior = Literal["allow", "deny", "ask"]


class PermissionSettings(Protocol):
    """What Permissions reads from the settings; ``agent.settings.Settings`` has all of it."""

    @property
    def permission_mode(self) -> str: ...
    @property
    def allow(self) -> list[str]: ...
    @property
    def deny(self) -> list[str]: ...
    @property
    def ask(self) -> list[str]: ...
    @property
    def cwd(self) -> Path: ...  # the project directory
    @property
    def project_dir(self) -> Path: ...  # the agent's store for this project
    @property
    def additional_dirs(self) -> list[Path]: ...
    @property
    def user_home(self) -> Path | None: ...


@dataclass(frozen=True)
class Decision:
    behavior: Behavior
    reason: str
    rule: str | None = None


@dataclass(frozen=True)
class Rule:
    """One parsed permission rule: ``tool`` and the optional text inside the parentheses."""

    text: str
    tool: str
    content: str | None

    @classmethod
    def parse(cls, text: str) -> Rule:
        text = text.strip()
        m = re.fullmatch(r"([^()\s]+)\((.*)\)", text, re.DOTALL)
        if not m:
            return cls(text, text, None)
        content = m.group(2).strip()
        # "Bash()" and "Bash(*)" mean the whole tool, as a bare "Bash" does
        return cls(text, m.group(1), None if content in ("", "*") else content)

    def covers(self, tool_name: str) -> bool:
        return tool_name == self.tool or tool_name in _RULE_FAMILY.get(self.tool, ())


class Permissions:
    """Decides tool calls for one session. Paths are made absolute before anything is compared."""

    def __init__(self, settings: PermissionSettings, session_dir: Path | None = None) -> None:
        self.mode = settings.permission_mode
        self.allow, self.deny, self.ask = list(settings.allow), list(settings.deny), list(settings.ask)
        self.project_dir = Path(settings.cwd)
        self.session_dir = session_dir
        # the agent's own store for this project (P of CONTRACT §4): saved tool results, notes
        self.store_dir: Path | None = settings.project_dir
        self.additional_dirs = list(settings.additional_dirs)
        self.user_home = settings.user_home
        # rules added by "always" answers; they live as long as this object
        self.session_allow: list[str] = []

    # ---- the decision --------------------------------------------------------------------------

    def check(self, tool_name: str, args: dict[str, Any]) -> Decision:
        if rule := self._first_match(self.deny, tool_name, args, every=False):
            return Decision("deny", f'{tool_name} is denied by the rule "{rule}" in the settings', rule)
        if self.mode == "plan" and tool_name in MUTATING_TOOLS:
            return Decision("deny", f"{tool_name} is not available in plan mode: only Read, Grep and Glob may run; "
                            "finish the plan and present it to the user instead")
        if rule := self._first_match(self.ask, tool_name, args, every=False):
            if self.mode == "bypassPermissions":
                return Decision("allow", "bypassPermissions mode", rule)
            return Decision("ask", f'the rule "{rule}" asks before running {tool_name}', rule)
        if self.mode == "bypassPermissions":
            return Decision("allow", "bypassPermissions mode")
        if rule := self._first_match(self.allow + self.session_allow, tool_name, args, every=True):
            return Decision("allow", f'allowed by the rule "{rule}"', rule)
        if tool_name in READ_ONLY_TOOLS:
            target = self._target(tool_name, args)
            if self._inside(target, self._readable_dirs()):
                return Decision("allow", "reading inside the project")
            return Decision("ask", f"{tool_name} of {target} is outside the project")
        if tool_name in EDIT_TOOLS:
            target = self._target(tool_name, args)
            if self.mode == "acceptEdits" and self._inside(target, self._editable_dirs()):
                return Decision("allow", "acceptEdits mode: edits inside the project are allowed")
            where = "" if self._inside(target, self._editable_dirs()) else " (outside the project)"
            return Decision("ask", f"{tool_name} of {target}{where} needs approval")
        if tool_name == "Bash":
            return Decision("ask", "shell commands need approval")
        return Decision("allow", f"{tool_name} only changes the conversation")

    def allow_for_session(self, rule: str) -> None:
        """Remember an "always" answer until the session ends."""
        if rule not in self.session_allow:
            self.session_allow.append(rule)

    def suggest_rule(self, tool_name: str, args: dict[str, Any]) -> str:
        """The rule an "always" answer should add: narrow for Bash and outside reads, broad for edits."""
        if tool_name == "Bash":
            return _suggest_bash(str(args.get("command", "")))
        if tool_name in EDIT_TOOLS:
            return "Edit"
        if tool_name in READ_ONLY_TOOLS:
            target = self._target(tool_name, args)
            if not self._inside(target, self._readable_dirs()):
                folder = target if tool_name != "Read" else target.parent
                return f"Read(/{folder.as_posix().rstrip('/')}/**)"
            return "Read"
        return tool_name

    def describe(self, tool_name: str, args: dict[str, Any]) -> str:
        """Exactly what will run or change, for the permission prompt."""
        if tool_name == "Bash":
            command = str(args.get("command", ""))
            note = args.get("description")
            return f"{command}\n# {note}" if note else command
        if tool_name in ("Write", "Edit"):
            target = self._target(tool_name, args)
            return f"{tool_name} {target}\n{_edit_preview(tool_name, target, args)}".rstrip("\n")
        if tool_name == "Read":
            return f"Read {self._target(tool_name, args)}"
        if tool_name in ("Grep", "Glob"):
            return f'{tool_name} "{args.get("pattern", "")}" in {self._target(tool_name, args)}'
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        return f"{tool_name}({shown})"

    # ---- matching ------------------------------------------------------------------------------

    def _first_match(self, rules: list[str], tool_name: str, args: dict[str, Any], *, every: bool) -> str | None:
        """The first rule matching the call. ``every``: for allow rules a compound command or a
        symlinked path must be covered in all its parts; for deny/ask rules any part is enough."""
        parsed = [r for r in map(Rule.parse, rules) if r.covers(tool_name)]
        if not parsed:
            return None
        if tool_name == "Bash":
            return self._match_bash(parsed, str(args.get("command", "")), every=every)
        candidates = _path_forms(self._target(tool_name, args))
        if not every and tool_name in ("Grep", "Glob"):
            # a search reads what is inside its root, so "dir/**" must stop a search of dir itself
            candidates += [c / "\x00" for c in candidates]
        for rule in parsed:
            if rule.content is None:
                return rule.text
            if tool_name not in READ_ONLY_TOOLS | EDIT_TOOLS:
                continue  # a specifier on a tool without a path: nothing here can interpret it
            patterns = self._path_patterns(rule.content)
            hits = [any(p.fullmatch(c.as_posix()) for p in patterns) for c in candidates]
            if all(hits) if every else any(hits):
                return rule.text
        return None

    def _match_bash(self, rules: list[Rule], command: str, *, every: bool) -> str | None:
        whole = command.strip()
        parts = split_command(whole)
        for rule in rules:
            if rule.content is None:
                return rule.text
            # a prefix or wildcard rule may only judge the whole line when the line is one simple command
            # ("Bash(echo:*)" must not allow "echo hi && rm x"); an exact rule may name a compound line
            exact = not rule.content.endswith(":*") and "*" not in rule.content
            if (exact or parts == [whole]) and _command_matches(rule.content, whole):
                return rule.text
        if every:
            # allowed only when each part is allowed by some rule; report the first rule used
            used = []
            for part in parts:
                hit = next((r.text for r in rules if _command_matches(r.content or "", part)), None)
                if hit is None:
                    return None
                used.append(hit)
            return used[0] if used else None
        for part in parts:
            for form in run_forms(part):
                for rule in rules:
                    if _command_matches(rule.content or "", form):
                        return rule.text
        return None

    def _path_patterns(self, pattern: str) -> list[re.Pattern[str]]:
        """Absolute-path regexes for one gitignore-like pattern (one per spelling of its base dir)."""
        if pattern.startswith("//"):
            bases, rest = [Path("/")], pattern[2:]
        elif pattern == "~" or pattern.startswith("~/"):
            if self.user_home is None:
                return []  # no home directory known: "~/" rules cannot match anything
            bases, rest = _path_forms(self.user_home), pattern[2:]
        elif pattern.startswith("/"):
            bases, rest = _path_forms(self.project_dir), pattern[1:]
        else:
            bases, rest = _path_forms(self.project_dir), pattern.removeprefix("./")
        rest = rest.rstrip("/")
        if "/" not in rest and not pattern.startswith(("/", "~")):
            rest = "**/" + rest  # like .gitignore: a bare name matches at any depth
        body = _glob_regex(rest) if rest else ""
        out = []
        for base in bases:
            prefix = re.escape(base.as_posix().rstrip("/"))
            # the pattern matches the path itself or any directory above it (a denied folder covers its files)
            out.append(re.compile(f"{prefix}/{body}(?:/.*)?" if body else f"{prefix}(?:/.*)?"))
        return out

    def _target(self, tool_name: str, args: dict[str, Any]) -> Path:
        """The absolute path a file tool touches (the search root for Grep/Glob)."""
        raw = args.get("file_path") if tool_name not in ("Grep", "Glob") else args.get("path")
        if tool_name == "Glob" and not raw:
            pattern = str(args.get("pattern", ""))
            if pattern.startswith(("/", "~")):
                raw = _static_prefix(pattern)
        if not isinstance(raw, str) or not raw:
            return self.project_dir
        if (raw == "~" or raw.startswith("~/")) and self.user_home is not None:
            return Path(os.path.normpath(self.user_home / raw[2:]))
        path = Path(raw)
        return Path(os.path.normpath(path if path.is_absolute() else self.project_dir / path))

    def _readable_dirs(self) -> list[Path]:
        dirs = [self.project_dir, *self.additional_dirs]
        return dirs + [d for d in (self.session_dir, self.store_dir) if d is not None]

    def _editable_dirs(self) -> list[Path]:
        return [self.project_dir, *self.additional_dirs]

    @staticmethod
    def _inside(target: Path, dirs: list[Path]) -> bool:
        """Inside one of ``dirs`` once symlinks are resolved, so a link cannot lead out of the project."""
        real = Path(os.path.realpath(target))
        return any(real.is_relative_to(os.path.realpath(d)) for d in dirs)


def _path_forms(path: Path) -> list[Path]:
    """The path as written and with symlinks resolved (one entry when they agree)."""
    plain = Path(os.path.normpath(path))
    real = Path(os.path.realpath(plain))
    return [plain] if real == plain else [plain, real]


def _static_prefix(pattern: str) -> str:
    parts = []
    for part in pattern.split("/"):
        if any(ch in part for ch in "*?[{"):
            break
        parts.append(part)
    return "/".join(parts) or "/"


def _glob_regex(pattern: str) -> str:
    """Translate a gitignore-style glob (``**``, ``*``, ``?``, ``[...]``) to a regex over posix paths."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            inner = pattern[i + 1 : end]
            if inner.startswith("!"):
                inner = "^" + inner[1:]
            out.append("[" + inner.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


# ---- shell commands ----------------------------------------------------------------------------

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*\s+")


def split_command(command: str) -> list[str]:
    """The simple commands inside a shell command line: split at ``&& || ; | &`` and newlines outside
    quotes, with the contents of ``$(...)``, backticks and ``<(...)`` added as commands of their own."""
    parts: list[str] = []
    current: list[str] = []
    i, n = 0, len(command)
    quote: str | None = None

    def flush() -> None:
        text = "".join(current).strip()
        if text:
            parts.append(text)
        current.clear()

    while i < n:
        ch = command[i]
        if quote == "'":
            current.append(ch)
            quote = None if ch == "'" else quote
            i += 1
            continue
        if ch == "\\" and i + 1 < n:
            current.append(command[i : i + 2])
            i += 2
            continue
        if (ch in "$<>" and command.startswith("(", i + 1)) or ch == "`":
            # command substitution: its inside runs too, so it is checked as its own command
            end = _closing(command, i + 1) if ch != "`" else command.find("`", i + 1)
            end = n if end == -1 else end
            inner_start = i + 2 if ch != "`" else i + 1
            parts.extend(split_command(command[inner_start:end]))
            current.append(command[i : end + 1])
            i = end + 1
            continue
        if quote == '"':
            current.append(ch)
            quote = None if ch == '"' else quote
            i += 1
            continue
        if ch in "'\"":
            quote = ch
            current.append(ch)
            i += 1
            continue
        redirect = command.startswith(">", i + 1) or (i > 0 and command[i - 1] in "<>")  # 2>&1, &>file
        if ch in ";\n" or (ch == "&" and not redirect):
            flush()
            i += 2 if command.startswith("&&", i) else 1
            continue
        if ch == "|":
            flush()
            i += 2 if command.startswith(("||", "|&"), i) else 1
            continue
        current.append(ch)
        i += 1
    flush()
    return parts


def _closing(command: str, open_at: int) -> int:
    """Index of the ``)`` closing the ``(`` at ``open_at`` (quotes respected), or -1."""
    depth, quote = 0, None
    for j in range(open_at, len(command)):
        ch = command[j]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _command_matches(pattern: str, command: str) -> bool:
    """``pattern`` is ``prefix:*`` (whole words), a glob with ``*``, or an exact command."""
    forms = {command.strip(), _strip_assignments(command.strip())}
    if pattern.endswith(":*"):
        prefix = pattern[:-2].strip()
        return any(f == prefix or f.startswith(prefix + " ") or f.startswith(prefix + "\t") for f in forms)
    if "*" in pattern:
        regex = ".*".join(re.escape(piece) for piece in pattern.split("*"))
        return any(re.fullmatch(regex, f, re.DOTALL) for f in forms)
    return pattern.strip() in forms


# commands that run the command that follows them, with the options of each that take a separate value
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"}), "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "--unset", "--chdir"}), "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p"}), "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}), "xargs": frozenset({"-I", "-n", "-P", "-L", "-s", "-d", "-E", "-a"}),
    "nohup": frozenset(), "setsid": frozenset(), "time": frozenset({"-f", "-o"}), "exec": frozenset({"-a"}),
    "command": frozenset(), "builtin": frozenset(), "then": frozenset(), "else": frozenset(), "elif": frozenset(),
    "do": frozenset(), "if": frozenset(), "while": frozenset(), "until": frozenset(), "!": frozenset(),
}
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
_DURATION = re.compile(r"\d+(?:\.\d+)?[smhd]?")
_MAX_NESTING = 4


def run_forms(part: str, depth: int = 0) -> list[str]:
    """The simple command ``part`` as written plus each form naming the program it really runs (see the
    module docstring); deny and ask rules are matched against all of them."""
    forms = [part]
    text = part.strip().lstrip("({! \t").rstrip(")} \t").strip()
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote: bash would refuse it too, but judge the plain words anyway
        words = text.split()
    i = 0
    while i < len(words):
        if _ASSIGNMENT_WORD.fullmatch(words[i]):
            i += 1
            continue
        name, rest = words[i].rsplit("/", 1)[-1], words[i + 1 :]
        forms.append(" ".join([name, *rest]))
        if depth < _MAX_NESTING and (script := _shell_script(name, rest)) is not None:
            forms += [f for sub in split_command(script) for f in run_forms(sub, depth + 1)]
            break
        if name not in _WRAPPERS:
            break
        i += 1 + _wrapper_options(name, rest)
    return list(dict.fromkeys(forms))


def _shell_script(name: str, rest: list[str]) -> str | None:
    """The script ``bash -c SCRIPT`` or ``eval WORDS...`` runs, or None for any other command."""
    if name == "eval":
        return " ".join(rest)
    if name not in _SHELLS:
        return None
    for j, word in enumerate(rest):
        if not word.startswith("-") or word == "--":
            return None
        if not word.startswith("--") and "c" in word[1:]:
            return rest[j + 1] if j + 1 < len(rest) else None
    return None


def _wrapper_options(name: str, rest: list[str]) -> int:
    """How many words after the wrapper ``name`` are its own options (and a timeout's duration)."""
    j = 0
    while j < len(rest) and (rest[j].startswith("-") or _ASSIGNMENT_WORD.fullmatch(rest[j])):
        j += 2 if rest[j] in _WRAPPERS[name] else 1
    if name == "timeout" and j < len(rest) and _DURATION.fullmatch(rest[j]):
        j += 1
    return min(j, len(rest))


def _strip_assignments(command: str) -> str:
    """``FOO=1 BAR=2 rm x`` -> ``rm x``, so leading variables cannot dodge a rule."""
    while m := _ASSIGNMENT.match(command):
        command = command[m.end() :]
    return command


def _suggest_bash(command: str) -> str:
    command = command.strip()
    parts = split_command(command)
    if len(parts) != 1 or parts[0] != command or "\n" in command:
        return f"Bash({command})"
    words = _strip_assignments(command).split()
    if not words:
        return "Bash"
    prefix = words[:1]
    if len(words) > 1 and re.fullmatch(r"[A-Za-z][\w:-]*", words[1]):
        prefix.append(words[1])  # a subcommand: "git commit", "npm test"
    return f"Bash({' '.join(prefix)}:*)"


# ---- previews ----------------------------------------------------------------------------------


def _edit_preview(tool_name: str, target: Path, args: dict[str, Any]) -> str:
    if tool_name == "Edit":
        old, new = str(args.get("old_string", "")), str(args.get("new_string", ""))
        label = " (every occurrence)" if args.get("replace_all") else ""
        return _diff(old, new, f"{target.name} before{label}", f"{target.name} after")
    content = str(args.get("content", ""))
    try:
        existing = target.read_text(encoding="utf-8", errors="replace") if target.is_file() else None
    except OSError:
        existing = None
    if existing is None:
        lines = content.splitlines()
        shown = "\n".join("+" + line for line in lines[:_PREVIEW_LINES])
        more = f"\n... ({len(lines) - _PREVIEW_LINES} more lines)" if len(lines) > _PREVIEW_LINES else ""
        return f"(new file, {len(lines)} lines)\n{shown}{more}"
    return _diff(existing, content, f"{target.name} now", f"{target.name} after")


def _diff(old: str, new: str, old_label: str, new_label: str) -> str:
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_label, new_label, lineterm=""))
    if not lines:
        return "(no change)"
    more = f"\n... ({len(lines) - _PREVIEW_LINES} more diff lines)" if len(lines) > _PREVIEW_LINES else ""
    return "\n".join(lines[:_PREVIEW_LINES]) + more
