"""Whether a tool call may run: allow, ask the user, or deny — Claude Code's rules and modes (docs/permissions.md).

Order of evaluation for one call::

    deny rule matches            -> deny   (every mode, bypassPermissions included); for Bash, a deny rule
                                            on the command or an Edit deny rule on a file it redirects to
    plan mode, mutating tool     -> deny   (Bash, Write, Edit: plan mode only looks)
    Bash, a deny rule could match-> deny   (every mode, fail closed): a program that can't be told
                                            statically (an expansion bash evaluates as code, a program
                                            running a command from its arguments, an unknown option before
                                            a subcommand), a line that doesn't parse or is nested too deep, a
                                            PATH-like variable, or a word with an expansion where the rule
                                            looks
    ask rule matches (or could)  -> ask    (allow in bypassPermissions)
    bypassPermissions            -> allow
    a file that steers the agent -> ask    (Write/Edit targets and Bash redirections: hooks, settings, CLAUDE.md
                                            outside the project, git hooks/config, shell start-up files, the
                                            agent's home; and files with several hard links)
    Bash, anything unjudgeable   -> ask    (PATH-like variable, write outside the project or to a path that
                                            can't be told, unresolved program, parse error)
    Bash, read-only and inside   -> allow  (default/acceptEdits: a line tools.shell.readonly proves only
                                            looks, every path it names inside the readable directories
                                            and no Read deny rule on one; anything else goes on below)
    allow rule matches           -> allow  (rules given at startup or "always" answers this session)
    Read/Grep/Glob               -> allow inside the project, the session's store or an additional
                                    directory; ask elsewhere
    acceptEdits, Write/Edit      -> allow inside the project or an additional directory
    Bash/Write/Edit              -> ask
    any other tool               -> allow  (e.g. Snip: it only touches the agent's own context)

MCP tools (``mcp__<server>__<tool>``) have their own short order, the same in spirit: a deny rule
(``mcp__*``, ``mcp__server``, ``mcp__server__*`` or the exact name) denies in every mode; plan mode refuses
what no allow rule allows; an ask rule asks (bypassPermissions allows); bypassPermissions allows; an
allow rule allows; anything else asks. What a server says about its tool (``readOnlyHint`` and the other
annotations) never allows anything.

Bash lines are read by ``tools.shell.reader`` (a real parser) and rules are matched per simple command by
``tools.permissions.bash_rules``: a line is allowed only when every program it runs is allowed by some rule, and denied
when any is denied. A bare ``Bash`` allow rule allows every command, unresolved ones included; it does not
skip the asks for steering files, PATH-like variables and writes outside the project.

Path rules (``Edit(src/**)``) are gitignore-like globs (``tools.permissions.path_rules``): relative to the project
directory, ``/x`` from the project root, ``//x`` from the filesystem root, ``~/x`` from the home directory; a
pattern without a slash matches a name at any depth. ``Edit`` and ``Write`` rules cover every editing tool
(and the files Bash redirects to), ``Read`` rules every reading tool (Read, Grep, Glob), as in Claude Code.
A path is compared as written (normalised) and with symlinks resolved; a Glob is judged by its path plus
the pattern's literal leading directories, so ``../.ssh/*`` is outside the project. The files that always
ask are listed in ``tools.permissions.protected``.

Asking is the caller's job (print mode turns "ask" into a denial); this module only decides.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from core import mcp_names
from core.declaration import declaration_of
from tools.permissions import bash_rules, git_config
from tools.permissions.bash_rules import BashPattern
from tools.permissions.links import denied_names, twin_denied
from tools.permissions.path_rules import (
    inside,
    normal,
    path_forms,
    pattern_regexes,
    pattern_root,
    pattern_shapes,
)
from tools.permissions.protected import Places, tree_steers_agent, why_protected
from tools.shell.reads import SHAPE_ANY, SHAPE_NAME, SHAPE_ONE, Reads, Shape, Tree, line_reads, overlap

if TYPE_CHECKING:
    from tools.shell.reader import Analysis

MCP_PREFIX = "mcp__"


def reads_files(tool_name: str) -> bool:
    """A tool that reads the file (or tree) its path argument names: Read rules cover it (core.declaration)."""
    d = declaration_of(tool_name)
    return d is not None and d.reads_files


def writes_files(tool_name: str) -> bool:
    """A tool that changes the file its path argument names: Edit and Write rules cover it."""
    d = declaration_of(tool_name)
    return d is not None and d.writes_files


def _covers(rule_tool: str, tool_name: str) -> bool:
    """A rule naming ``rule_tool`` covers ``tool_name``: the same tool, a Read rule every file reader, an
    Edit or Write rule every file writer."""
    if rule_tool == tool_name:
        return True
    if rule_tool == "Read":
        return reads_files(tool_name)
    return writes_files(rule_tool) and writes_files(tool_name)


_PREVIEW_LINES = 40
_HARMLESS_WRITES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})

Behavior = Literal["allow", "deny", "ask"]


class PermissionSettings(Protocol):
    """What Permissions reads from the settings; ``agent.config.settings.Settings`` has all of it."""

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
    @property
    def home(self) -> Path: ...  # the agent's home (COMPACT_AGENT_HOME)


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
        return _covers(self.tool, tool_name)


class Permissions:
    """Decides tool calls for one session. Paths are made absolute before anything is compared."""

    def __init__(self, settings: PermissionSettings, session_dir: Path | None = None) -> None:
        self.mode = settings.permission_mode
        self.allow, self.deny, self.ask = list(settings.allow), list(settings.deny), list(settings.ask)
        self.project_dir = Path(settings.cwd)
        self.session_dir = session_dir
        # the agent's own store for this project (P of docs/files.md): saved tool results, notes
        self.store_dir: Path | None = settings.project_dir
        self.places = Places(self.project_dir, Path(settings.home), session_dir, settings.user_home)
        self.additional_dirs = list(settings.additional_dirs)
        self.user_home = settings.user_home
        # rules added by "always" answers; they live as long as this object
        self.session_allow: list[str] = []
        self._read_rules_cache: tuple[tuple[str, ...], list[Rule]] | None = None
        self._shapes_cache: tuple[tuple[str, ...], list[tuple[str, list[str]]]] | None = None

    # ---- the decision --------------------------------------------------------------------------

    def check(self, tool_name: str, args: dict[str, Any], cwd: Path | None = None) -> Decision:
        """The decision for one call. ``cwd`` is where the call acts (Bash's working directory, which
        relative paths and redirections are resolved against); the project directory by default."""
        here = Path(cwd) if cwd is not None else self.project_dir
        if tool_name.startswith(MCP_PREFIX):
            return self._check_mcp(tool_name)
        if tool_name == "Bash":
            return self._check_bash(str(args.get("command", "")), here)
        return self._check_declared(tool_name, args, here)

    def read_denied(self, path: Path) -> bool:
        """True when a Read deny rule matches the absolute ``path`` (to keep it out of search results)."""
        return self._path_rule(self.deny, "Read", Path(path), every=False) is not None

    def note_refusal(self, path: Path, links_within: list[Path] | None) -> str | None:
        """Why the agent may not append to ``path`` on the user's behalf (a ``# note`` to CLAUDE.md), by the
        rules a Write follows: an Edit/Write deny rule, a link out of ``links_within`` (a repository's
        CLAUDE.md linked to a file outside it), or a target that steers something else (``~/.bashrc``, git
        config, a hard-linked file). None: it may be written. The user asked for this write, so the
        question a Write would ask is not asked again."""
        try:
            resolved = Path(path).resolve()
        except (OSError, RuntimeError) as e:
            return f"{path} can't be resolved ({e})"
        for form in (Path(path), resolved):
            if rule := self._path_rule(self.deny, "Write", form, every=False):
                return f'the rule "{rule}" in the settings denies changing {normal(form)}'
        if links_within is not None and not inside(resolved, [d.resolve() for d in links_within]):
            return f"{path} is a link to {resolved}, outside {', '.join(map(str, links_within))}"
        why = why_protected(resolved, self.places)
        if why and resolved.name in ("CLAUDE.md", "CLAUDE.local.md") and "instructions" in why:
            why = None  # the user's own CLAUDE.md: that is what a note is for
        return f"{normal(resolved)}: {why}" if why else None

    def allow_for_session(self, rule: str) -> None:
        """Remember an "always" answer until the session ends."""
        if rule not in self.session_allow:
            self.session_allow.append(rule)

    def suggest_rule(self, tool_name: str, args: dict[str, Any]) -> str:
        """The rule an "always" answer should add: narrow for Bash and outside reads, broad for edits."""
        if tool_name == "Bash":
            command = str(args.get("command", ""))
            a = _analyze(command, self.project_dir)
            if a.unresolved or a.error or a.variables or a.untold:
                return bash_rules.suggest(command, None)
            allow = _bash_patterns(self.allow + self.session_allow)
            pending = [
                c
                for c in a.commands
                if not c.wrapper
                and not c.from_file
                and not any(p is not None and bash_rules.matches(p, c, by_base_name=False) for _, p in allow)
            ]
            return bash_rules.suggest(command, pending[0] if pending else None)
        if writes_files(tool_name):
            return "Edit"
        if reads_files(tool_name):
            target = self._target(tool_name, args, self.project_dir)
            if not inside(target, self._readable_dirs()):
                folder = normal(target if tool_name != "Read" else target.parent)
                home = normal(self.user_home) if self.user_home is not None else None
                if home is not None and home != Path("/") and folder.is_relative_to(home):
                    # under the home directory: as the screen shows it, and the same rule
                    below = folder.relative_to(home).as_posix()
                    return f"Read(~/{'' if below == '.' else below + '/'}**)"
                return f"Read(/{folder.as_posix().rstrip('/')}/**)"
            return "Read"
        return tool_name

    def describe(self, tool_name: str, args: dict[str, Any]) -> str:
        """Exactly what will run or change, for the permission prompt."""
        if tool_name == "Bash":
            command = str(args.get("command", ""))
            note = args.get("description")
            return f"{command}\n# {note}" if note else command
        target = normal(self._target(tool_name, args, self.project_dir))
        if tool_name in ("Write", "Edit"):
            return f"{tool_name} {target}\n{_edit_preview(tool_name, target, args)}".rstrip("\n")
        if tool_name == "Read":
            return f"Read {target}"
        if tool_name in ("Grep", "Glob"):
            return f'{tool_name} "{args.get("pattern", "")}" in {target}'
        return "\n".join([tool_name, *_argument_lines(args)])

    # ---- MCP tools -----------------------------------------------------------------------------

    def _check_mcp(self, name: str) -> Decision:
        if rule := _mcp_rule(self.deny, name):
            return Decision("deny", f'{name} is denied by the rule "{rule}" in the settings', rule)
        allowed = _mcp_rule(self.allow + self.session_allow, name)
        if self.mode == "plan" and not allowed:
            return Decision(
                "deny",
                f"{name} is not available in plan mode (an MCP tool may change things, and no allow rule "
                "allows it); finish the plan and present it to the user instead",
            )
        if rule := _mcp_rule(self.ask, name):
            if self.mode == "bypassPermissions":
                return Decision("allow", "bypassPermissions mode", rule)
            return Decision("ask", f'the rule "{rule}" asks before running {name}', rule)
        if self.mode == "bypassPermissions":
            return Decision("allow", "bypassPermissions mode")
        if allowed:
            return Decision("allow", f'allowed by the rule "{allowed}"', allowed)
        return Decision("ask", f"{name} is a tool of an MCP server, which needs approval")

    # ---- file tools ----------------------------------------------------------------------------

    def _check_declared(self, tool_name: str, args: dict[str, Any], here: Path) -> Decision:
        """A tool by its declaration: file readers and writers by their path, a tool that touches only the
        conversation allowed, anything else (another program runner, a tool nobody declared) asks, after
        the deny and ask rules that name it."""
        d = declaration_of(tool_name)
        if d is not None and d.path_arg is not None and d.touches in ("reads", "writes"):
            return self._check_file_tool(tool_name, args, here)
        if rule := self._path_rule(self.deny, tool_name, here, every=False):
            return Decision("deny", f'{tool_name} is denied by the rule "{rule}" in the settings', rule)
        if d is not None and d.touches == "nothing":
            return Decision("allow", f"{tool_name} only changes the conversation")
        if self.mode == "plan":
            return _plan_denial(tool_name)
        if rule := self._path_rule(self.ask, tool_name, here, every=False):
            if self.mode == "bypassPermissions":
                return Decision("allow", "bypassPermissions mode", rule)
            return Decision("ask", f'the rule "{rule}" asks before running {tool_name}', rule)
        if self.mode == "bypassPermissions":
            return Decision("allow", "bypassPermissions mode")
        if rule := self._path_rule(self.allow + self.session_allow, tool_name, here, every=True):
            return Decision("allow", f'allowed by the rule "{rule}"', rule)
        if d is None:
            return Decision(
                "ask", f"{tool_name} is a tool the agent knows nothing about, which needs approval"
            )
        return Decision("ask", f"{tool_name} may change things, which needs approval")

    def _check_file_tool(self, tool_name: str, args: dict[str, Any], here: Path) -> Decision:
        target = self._target(tool_name, args, here)
        shown = normal(target)
        if rule := self._path_rule(self.deny, tool_name, target, every=False):
            return Decision("deny", f'{tool_name} is denied by the rule "{rule}" in the settings', rule)
        if self.mode == "plan" and writes_files(tool_name):
            return _plan_denial(tool_name)
        if rule := self._path_rule(self.ask, tool_name, target, every=False):
            if self.mode == "bypassPermissions":
                return Decision("allow", "bypassPermissions mode", rule)
            return Decision("ask", f'the rule "{rule}" asks before running {tool_name}', rule)
        if self.mode == "bypassPermissions":
            return Decision("allow", "bypassPermissions mode")
        if writes_files(tool_name) and (why := why_protected(target, self.places)):
            return Decision("ask", f"{tool_name} of {shown}: {why}")
        if rule := self._path_rule(self.allow + self.session_allow, tool_name, target, every=True):
            return Decision("allow", f'allowed by the rule "{rule}"', rule)
        if reads_files(tool_name):
            if inside(target, self._readable_dirs()):
                return Decision("allow", "reading inside the project")
            return Decision("ask", f"{tool_name} of {shown} is outside the project")
        ours = inside(target, self._editable_dirs())
        if self.mode == "acceptEdits" and ours:
            return Decision("allow", "acceptEdits mode: edits inside the project are allowed")
        return Decision(
            "ask", f"{tool_name} of {shown}{'' if ours else ' (outside the project)'} needs approval"
        )

    # ---- Bash ----------------------------------------------------------------------------------

    def _check_bash(self, command: str, here: Path) -> Decision:
        a = _with_repository_config(_analyze(command, here), here)
        reads = self._line_reads(a) if self._read_rules() else None
        verdict = self._read_verdict(reads) if reads is not None else None
        if verdict is not None and verdict.behavior == "deny":
            if denial := self._bash_denial(command, a, here):
                return denial if denial.rule and "denies reading" not in denial.reason else verdict
            return verdict
        if denial := self._bash_denial(command, a, here):
            return denial
        if self.mode == "plan":
            return _plan_denial("Bash")
        if doubt := self._deny_doubt(a):
            return Decision("deny", doubt)
        if question := self._untold_question(a):
            return Decision("ask", question)
        if verdict is not None:  # a read that may be denied: asked in every mode, refused in print mode
            return verdict
        if reads is not None and (code := self._code_read_question(a)):
            return Decision("ask", code[0], code[1])
        if rule := self._bash_ask_rule(command, a):
            if self.mode == "bypassPermissions":
                return Decision("allow", "bypassPermissions mode", rule)
            return Decision("ask", f'the rule "{rule}" asks before running Bash', rule)
        if self.mode == "bypassPermissions":
            return Decision("allow", "bypassPermissions mode")
        if why := self._bash_needs_approval(a):
            return Decision("ask", why)
        decision = self._bash_allowed(command, a)
        if (
            decision.behavior == "ask"
            and self.mode in ("default", "acceptEdits")
            and self._only_looks(command, a, here, reads)
        ):
            return Decision("allow", "a read-only command inside the project")
        return decision

    def _only_looks(self, command: str, a: Analysis, here: Path, reads: Reads | None) -> bool:
        """Whether the line only reads, and only inside the readable directories: the read-only reader
        (tools.shell.readonly) must prove it, the working directory must be inside, and everything it
        reads (tools.shell.reads: the files its words name, trees it reads below, repository contents)
        must be inside, known before it runs and not covered by a Read deny rule (those were judged
        before this: a denied read never gets here)."""
        from tools.shell.readonly import refusal  # start-up speed, as _analyze

        readable = self._readable_dirs()
        if a.untold or not inside(here, readable) or refusal(command, here, a) is not None:
            return False
        for c in a.commands:
            for word in c.words[1:]:
                if word.value is None:
                    return False  # known only when it runs
                value = word.value
                if value.startswith("-"):
                    if "=" not in value:
                        continue
                    value = value.split("=", 1)[1]  # --from-file=.. names a directory too
                if not value:
                    continue
                path = self._absolute(value, here)
                if "/" not in value and not value.startswith("~") and not os.path.lexists(path):
                    continue  # a pattern or a word, not a file
                if not inside(path, readable):
                    return False
        reads = reads if reads is not None else self._line_reads(a)
        if any(tree.follow for tree, _ in reads.trees):
            return False  # a link followed below may lead anywhere
        for shape in reads.shapes:  # a word, a list or a directory known only when it runs: anywhere
            known = shape.pattern.split(SHAPE_ANY, 1)[0].split(SHAPE_NAME, 1)[0].split(SHAPE_ONE, 1)[0]
            if not known.startswith("/") or not inside(Path(known.rsplit("/", 1)[0] or "/"), readable):
                return False  # ... but a repository's contents stay in its directory
        paths = [p for p, _ in (*reads.paths, *reads.names, *reads.history, *reads.maybe) if p.is_absolute()]
        paths += [tree.root for tree, _ in reads.trees]
        return all(inside(p, readable) for p in paths if os.path.lexists(p) or p in _history(reads))

    def _bash_denial(self, command: str, a: Analysis, here: Path) -> Decision | None:
        """A deny rule on a program the line runs, or an Edit/Write deny rule on a file it writes."""
        if rule := _bash_hit(_bash_patterns(self.deny), command, a, by_base_name=True):
            return Decision("deny", f'Bash is denied by the rule "{rule}" in the settings', rule)
        for path in _written(a):
            if rule := self._path_rule(self.deny, "Write", path, every=False):
                return Decision(
                    "deny",
                    f'the command writes {normal(path)}, and the rule "{rule}" in the '
                    "settings denies changing it",
                    rule,
                )
        return None

    # ---- what a Bash line reads, against the Read deny rules -------------------------------------

    def _read_rules(self) -> list[Rule]:
        key = tuple(self.deny)  # asked on every Bash check: parsed once per set of rules
        if self._read_rules_cache is None or self._read_rules_cache[0] != key:
            self._read_rules_cache = (key, [r for r in map(Rule.parse, self.deny) if r.covers("Read")])
        return self._read_rules_cache[1]

    def _line_reads(self, a: Analysis) -> Reads:
        return line_reads(a, self.user_home)

    def _read_verdict(self, reads: Reads) -> Decision | None:
        """The Read deny rules against what the line reads (tools.shell.reads): a file it reads that a rule
        covers is refused like a Read of it (``cat .env``, ``git show HEAD:.env``, ``grep -r x .`` with a
        ``.env`` below); a read that can't be told exactly and may be covered (``cat $HOME/.ssh/id_rsa``, a
        glob under ``shopt``, a file list, a repository's history) asks, in every mode: print mode refuses."""
        doubts: list[Decision] = []  # asked about once nothing is refused outright
        for path, _ in (*reads.paths, *reads.names, *reads.attached):
            if not os.path.lexists(path):
                continue
            if rule := self._path_rule(self.deny, "Read", path, every=False):
                return _read_denied(path, rule)
            if twin := self._denied_twin(path):
                doubts.append(twin)
        for path, _ in reads.paths:
            if os.path.isdir(path) and (rule := self._path_rule(self.deny, "Grep", path, every=False)):
                return _read_denied(path, rule, listed=True)
        for path, shown in reads.history:
            if rule := self._path_rule(self.deny, "Read", path, every=False):
                return Decision(
                    "deny",
                    f'"{shown}" reads {normal(path)} from the repository, and the rule "{rule}" in the '
                    "settings denies reading it",
                    rule,
                )
        for path, shown in reads.maybe:
            if rule := self._path_rule(self.deny, "Read", path, every=False):
                doubts.append(
                    Decision(
                        "ask",
                        f'"{shown}" shows {normal(path)} when it changed, and the rule "{rule}" denies reading '
                        "it; it needs the user's approval (a deny rule holds in every mode)",
                        rule,
                    )
                )
        for tree, shown in reads.trees:
            if verdict := self._tree_verdict(tree, shown):
                if verdict.behavior == "deny":
                    return verdict
                doubts.append(verdict)
        if doubts:
            return doubts[0]
        for shape in reads.shapes:
            if rule := self._shape_rule(shape):
                return Decision(
                    "ask",
                    f'{shape.why}, and it may be a file the rule "{rule}" denies reading, so it needs the '
                    "user's approval (a deny rule holds in every mode)",
                    rule,
                )
        return None

    def _denied_twin(self, path: Path) -> Decision | None:
        """A file with more than one name, another of which a Read deny rule covers (a hard link to .env):
        refused, as the Read tool refuses it (tools.permissions.links); one stat for the usual file."""
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return None
        if st.st_nlink <= 1 or not os.path.isfile(path):
            return None
        if denied := self._denied_names().get((st.st_dev, st.st_ino)):
            rule = self._path_rule(self.deny, "Read", denied, every=False)
            return Decision(
                "deny",
                f"the command reads {normal(path)}, another name (a hard link) of {normal(denied)}, and the rule "
                f'"{rule}" in the settings denies reading it',
                rule,
            )
        if twin_denied(Path(path), (st.st_dev, st.st_ino), st.st_nlink, self.read_denied, [self.project_dir]):
            return Decision(
                "ask",
                f"the command reads {normal(path)}, a file with {st.st_nlink} names, one of which a Read deny "
                "rule covers or can't be found in the project to be judged; it needs the user's approval",
            )
        return None

    def _denied_names(self) -> dict[tuple[int, int], Path]:
        """The multiply linked files the Read deny rules cover, by (device, inode), found below each
        rule's literal directory (``~/.ssh`` for ``Read(~/.ssh/**)``): looked for only when a line reads
        a file with more than one name, and anew each time (a link may be made between two checks)."""
        roots: list[Path] = []
        for rule in self._read_rules():
            if rule.content is None:
                continue
            root = pattern_root(rule.content, self.project_dir, self.user_home)
            if root is not None and root not in roots:
                roots.append(root)
        return denied_names(roots, self.read_denied)

    def _shape_rule(self, shape: Shape) -> str | None:
        for rule, patterns in self._rule_shapes():
            if any(overlap(shape.pattern, p, shape.fold) for p in patterns):
                return rule
        return None

    def _rule_shapes(self) -> list[tuple[str, list[str]]]:
        key = tuple(self.deny)
        cached = self._shapes_cache
        if cached is None or cached[0] != key:
            shapes = [
                (
                    r.text,
                    [SHAPE_ANY]
                    if r.content is None
                    else pattern_shapes(r.content, self.project_dir, self.user_home),
                )
                for r in self._read_rules()
            ]
            cached = self._shapes_cache = (key, shapes)
        return cached[1]

    def _tree_verdict(self, tree: Tree, shown: str) -> Decision | None:
        """A directory read below (grep -r, rg, cp -r, tar -c): refused when a file a Read deny rule covers
        is there now and every file is read, asked about when one may be read (a filter, links followed
        out, too many files to look at)."""
        forms = path_forms(tree.root)
        could = [self._shape_rule(Shape(f"{f.as_posix().rstrip('/')}/{SHAPE_ANY}", "")) for f in forms]
        rule = next((r for r in could if r), None)
        if rule is None and not tree.follow:
            return None
        found = self._denied_below(tree)
        if found is None:
            return Decision(
                "ask",
                f'"{shown}" reads every file below {normal(tree.root)}'
                f"{', following links,' if tree.follow else ''} and there are too many to look at, so one "
                f'may be a file the rule "{rule or self._read_rules()[0].text}" denies reading; it needs the '
                "user's approval",
                rule,
            )
        if not found:
            return None
        path, hit = found
        if tree.filtered:
            return Decision(
                "ask",
                f'"{shown}" reads the files below {normal(tree.root)}, which hold {normal(path)}, and the '
                f'rule "{hit}" denies reading it; whether its filter leaves it out can\'t be told here, so '
                "it needs the user's approval",
                hit,
            )
        return Decision(
            "deny",
            f'"{shown}" reads every file below {normal(tree.root)}, {normal(path)} among them, and the rule '
            f'"{hit}" in the settings denies reading it; leave it out (an --exclude, a narrower path) or '
            "use the Grep tool, which skips denied files",
            hit,
        )

    def _denied_below(self, tree: Tree) -> tuple[Path, str] | None | Literal[False]:
        """The first file below the tree's root a Read deny rule covers: (path, rule); False when there is
        none; None when there are too many entries to look at."""
        regexes = [
            (r.text, pattern_regexes(r.content, self.project_dir, self.user_home) if r.content else None)
            for r in self._read_rules()
        ]

        def hit(path: str) -> str | None:
            for text, patterns in regexes:
                if patterns is None or any(p.fullmatch(path) for p in patterns):
                    return text
            return None

        budget = _TREE_LIMIT
        seen: set[str] = set()
        for folder, dirs, files in os.walk(tree.root, followlinks=tree.follow):
            if tree.follow:
                real = os.path.realpath(folder)
                if real in seen:
                    dirs[:] = []
                    continue
                seen.add(real)
            if not tree.hidden:
                dirs[:] = [d for d in dirs if not d.startswith(".")]
            if tree.exclude_dir:
                dirs[:] = [d for d in dirs if not any(fnmatchcase(d, g) for g in tree.exclude_dir)]
            if tree.include or tree.exclude:
                files = [
                    f
                    for f in files
                    if (not tree.include or any(fnmatchcase(f, g) for g in tree.include))
                    and not any(fnmatchcase(f, g) for g in tree.exclude)
                ]
            for name in [*dirs, *files]:
                budget -= 1
                if budget < 0:
                    return None
                if not tree.hidden and name.startswith("."):
                    continue
                path = os.path.join(folder, name)
                if not tree.follow and os.path.islink(path):
                    continue  # grep -r, rg: a link found below is not followed
                for form in {os.path.normpath(path), os.path.realpath(path)} if tree.follow else {path}:
                    if rule := hit(os.path.normpath(form)):
                        return Path(path), rule
        return False

    def _bash_ask_rule(self, command: str, a: Analysis) -> str | None:
        """An ask rule that matches, or could once expansions are known, or covers a file the line writes."""
        ask = _bash_patterns(self.ask)
        if rule := _bash_hit(ask, command, a, by_base_name=True) or _bash_could(ask, a):
            return rule
        return next(
            (r for p in _written(a) if (r := self._path_rule(self.ask, "Write", p, every=False))), None
        )

    def _bash_allowed(self, command: str, a: Analysis) -> Decision:
        """Allowed when a bare Bash rule is given, the line is exactly an allow rule, or every program it
        runs (wrappers that only change how aside) is allowed by some rule; otherwise ask."""
        allow = _bash_patterns(self.allow + self.session_allow)
        if rule := next((text for text, pattern in allow if pattern is None), None):
            return Decision("allow", f'allowed by the rule "{rule}"', rule)
        if a.unresolved:
            return Decision(
                "ask",
                f"the command's program can't be determined statically ({a.unresolved[0]}), "
                "so no allow rule covers it and it needs the user's approval",
            )
        if a.error:
            return Decision("ask", f"{a.error}, so it needs the user's approval")
        if rule := next((text for text, p in allow if p and p.exact == command.strip()), None):
            return Decision("allow", f'allowed by the rule "{rule}"', rule)
        if a.untold:
            return Decision(
                "ask",
                f"{a.untold[0]}; an allow rule covers a program only when it is known not to run another "
                "command, so it needs the user's approval",
            )
        needed = [c for c in a.commands if not c.wrapper and not c.from_file]
        used = [
            next((t for t, p in allow if p and bash_rules.matches(p, c, by_base_name=False)), None)
            for c in needed
        ]
        if needed and all(used):
            return Decision("allow", f'allowed by the rule "{used[0]}"', used[0])
        missing = next((c.line() for c, u in zip(needed, used) if u is None), None)
        if missing and allow:
            return Decision("ask", f'no allow rule covers "{missing}", so the command needs approval')
        return Decision("ask", "shell commands need approval")

    def _deny_doubt(self, a: Analysis) -> str | None:
        """With a deny rule in force, why the line might be what it denies: then it is refused (fail
        closed), in every mode, since what it runs can't be judged statically."""
        deny = _bash_patterns(self.deny)
        tail = "a deny rule is in force and might cover it, so it is refused (fail closed)"
        if any(not w.paths for w in a.writes) and any(Rule.parse(r).covers("Write") for r in self.deny):
            target = next(w.target for w in a.writes if not w.paths)
            return f"the command writes to {target}, a path known only when it runs; {tail}"
        for write in (w for w in a.writes if w.unpacked):
            for path in write.paths:
                if rule := self._tree_write_rule(path):
                    return (
                        f'the command fills {normal(path)} with files it names itself, and the rule "{rule}" '
                        f"may cover one of them; {tail}"
                    )
        if not deny:
            return None
        if a.error:
            return f"{a.error}; {tail}"
        if a.unresolved:
            return f"the command's program can't be determined statically ({a.unresolved[0]}); {tail}"
        if a.variables:
            return f"the command {a.variables[0]}, which can change which program actually runs; {tail}"
        for text, pattern in deny:
            for c in a.commands:
                if pattern is not None and bash_rules.could_match(pattern, c):
                    why = c.subcommand_unknown or "it has a word known only when it runs"
                    return (
                        f'in "{c.line()}" {why}, so the deny rule "{text}" might match it; it is refused '
                        "(fail closed)"
                    )
        return None

    def _untold_question(self, a: Analysis) -> str | None:
        """With a Bash deny rule in force, a program not known to run no other command (an unknown program
        with arguments, an unknown option or variable) is asked about in every mode, bypassPermissions
        included: print mode refuses it. The question names the rule it might break."""
        if not a.untold:
            return None
        rules = [text for text, pattern in _bash_patterns(self.deny) if pattern is not None]
        if not rules:
            return None
        named = ", ".join(f'"{r}"' for r in rules[:3]) + (" ..." if len(rules) > 3 else "")
        rule_word = "rule" if len(rules) == 1 else "rules"
        return (
            f"{a.untold[0]}; it might run a command the deny {rule_word} {named} forbids, so it needs the "
            "user's approval"
        )

    def _code_read_question(self, a: Analysis) -> tuple[str, str] | None:
        """With a Read deny rule in force, code the line runs and that can't be read here (``python -c``, a
        script file that isn't bash, an unknown program, a repository's hook) may read what the rule
        denies: asked about in every mode (print mode refuses). A script file of another language
        (``python3 x.py``) is looked through instead: it asks when its text names what a rule denies
        (``.env``, ``.ssh``, ``id_rsa``), or can't be read. (The question, the rule.)"""
        rules = [r for r in self._read_rules() if r.content is not None] or self._read_rules()
        if not rules:
            return None
        first = rules[0].text
        tail = f'it may read a file the rule "{first}" denies, so it needs the user\'s approval (a deny rule holds in every mode)'
        if a.unresolved:
            return f"{a.unresolved[0]}: what that code reads can't be told; {tail}", first
        if a.untold:
            return f"{a.untold[0]}; what it reads can't be told either: {tail}", first
        names = self._denied_literals()
        for name, dirs in a.code_files:
            if not dirs or name.startswith("~"):
                return f"{name} is run from a directory unknown here; {tail}", first
            for d in dirs:
                path = Path(name) if name.startswith("/") else d / name
                try:
                    with open(path, "rb") as f:
                        data = f.read(_MAX_CODE_FILE + 1)
                except FileNotFoundError:
                    continue  # nothing to run
                except OSError:
                    return f"{normal(path)} can't be read to see what it reads; {tail}", first
                if len(data) > _MAX_CODE_FILE:
                    return f"{normal(path)} is too big to look through for what it reads; {tail}", first
                text = data.decode("utf-8", errors="replace")
                if hit := next(((n, r) for n, r in names if n in text), None):
                    return (
                        f'{normal(path)} runs code that names "{hit[0]}", which the rule "{hit[1]}" denies '
                        "reading; it needs the user's approval (a deny rule holds in every mode)",
                        hit[1],
                    )
        return None

    def _denied_literals(self) -> list[tuple[str, str]]:
        """(a name a Read deny rule spells out, the rule): each literal path component of its pattern
        (``.ssh`` and ``id_rsa`` of ``~/.ssh/id_rsa``; ``.env`` of ``.env``), for looking through code."""
        out: list[tuple[str, str]] = []
        for rule in self._read_rules():
            for part in (rule.content or "").split("/"):
                part = part.strip()
                if part and part not in ("~", ".", "..") and not re.search(r"[*?\[]", part):
                    out.append((part, rule.text))
                elif part and (literal := re.split(r"[*?\[]", part)[0]) and len(literal) >= 3:
                    out.append((literal, rule.text))  # the literal head of ".env*"
        return out

    def _tree_write_rule(self, directory: Path) -> str | None:
        """A Write deny rule that may match a file a command puts below ``directory`` (tar -x, cp -r):
        tried with the rule's own last name there (``Edit(.env)`` covers ``dir/.env``)."""
        for rule in (r for r in map(Rule.parse, self.deny) if r.covers("Write")):
            last = (rule.content or "x").rstrip("/*").rsplit("/", 1)[-1].replace("*", "x") or "x"
            if self._path_rule([rule.text], "Write", directory / last, every=False):
                return rule.text
        return None

    def _bash_needs_approval(self, a: Analysis) -> str | None:
        """Why a line asks whatever the allow rules say: it writes a file that steers the agent, outside
        the project or somewhere unknown, or sets a variable that changes which program runs."""
        for write in a.writes:
            if not write.paths:
                return (
                    f"the command writes to {write.target}, a path that can't be determined statically (an "
                    "expansion, a cd that can't be followed, or a symlink the command itself creates), so it "
                    "needs the user's approval"
                )
            for path in write.paths:
                if _harmless_write(path):
                    continue
                if write.tree and (what := tree_steers_agent(path, self.places)):
                    return (
                        f"the command fills {normal(path)} with files it names itself, which may include "
                        f"ones that control the agent's own behaviour ({what}); that needs the user's approval"
                    )
                if why := why_protected(path, self.places):
                    return f"the command writes {normal(path)}: {why}"
                if not inside(path, self._editable_dirs()) and not self._path_rule(
                    self.allow + self.session_allow, "Write", path, every=True
                ):
                    return (
                        f"the command writes {normal(path)}, outside the project; like a Write there, that "
                        "needs the user's approval"
                    )
        if a.variables:
            return (
                f"the command {a.variables[0]}, which can change which program actually runs or what it "
                "loads; that always needs the user's approval"
            )
        return None

    # ---- paths ---------------------------------------------------------------------------------

    def _path_rule(self, rules: list[str], tool_name: str, target: Path, *, every: bool) -> str | None:
        """The first rule covering ``tool_name`` that matches ``target``. ``every``: for allow rules a
        symlinked path must match as written and resolved; for deny/ask rules either is enough."""
        parsed = [r for r in map(Rule.parse, rules) if r.covers(tool_name)]
        if not parsed:
            return None
        candidates = path_forms(target)
        if not every and _searches(tool_name):
            # a search reads what is inside its root, so "dir/**" must stop a search of dir itself
            candidates += [c / "\x00" for c in candidates]
        for rule in parsed:
            if rule.content is None:
                return rule.text
            if not (reads_files(tool_name) or writes_files(tool_name)):
                continue  # a specifier on a tool without a path: nothing here can interpret it
            patterns = pattern_regexes(rule.content, self.project_dir, self.user_home)
            hits = [any(p.fullmatch(c.as_posix()) for p in patterns) for c in candidates]
            if all(hits) if every else any(hits):
                return rule.text
        return None

    def _target(self, tool_name: str, args: dict[str, Any], here: Path) -> Path:
        """The absolute path a file tool touches (the search root for Grep, path plus the pattern's literal
        leading directories for Glob). Not normalised: ``link/..`` must be resolved through the link."""
        d = declaration_of(tool_name)
        raw = args.get(d.path_arg) if d is not None and d.path_arg else None
        base = self._absolute(raw, here) if isinstance(raw, str) and raw else here
        if tool_name != "Glob":
            return base
        pattern = str(args.get("pattern", ""))
        if pattern.startswith("/"):
            base = Path("/")
        for part in pattern.split("/"):
            if any(ch in part for ch in "*?[{\\"):
                break
            if part:
                base = base / part
        return base

    def _absolute(self, raw: str, here: Path) -> Path:
        if (raw == "~" or raw.startswith("~/")) and self.user_home is not None:
            return self.user_home / raw[2:]
        path = Path(raw)
        return path if path.is_absolute() else here / path

    def _readable_dirs(self) -> list[Path]:
        dirs = [self.project_dir, *self.additional_dirs]
        return dirs + [d for d in (self.session_dir, self.store_dir) if d is not None]

    def _editable_dirs(self) -> list[Path]:
        return [self.project_dir, *self.additional_dirs]


def _searches(tool_name: str) -> bool:
    """A reader of a whole tree (its path argument is a root): "dir/**" must stop a search of dir itself."""
    d = declaration_of(tool_name)
    return d is not None and d.reads_files and d.records == "search"


def _mcp_rule(rules: list[str], name: str) -> str | None:
    """The first rule naming this MCP tool: ``mcp__*``, ``mcp__server``, ``mcp__server__*`` or the tool
    exactly (``core.mcp_names``: a server's name never holds ``__``, so the split is the server's own). A
    rule in a form that can never match (``mcp__my__srv__*``, a glob in a name, parentheses) matches
    nothing here and is reported when the settings load."""
    for text in rules:
        rule = Rule.parse(text)
        if rule.content is None and "(" not in text and mcp_names.rule_matches(rule.tool, name):
            return text
    return None


def _plan_denial(tool_name: str) -> Decision:
    return Decision(
        "deny",
        f"{tool_name} is not available in plan mode: only Read, Grep and Glob may run; "
        "finish the plan and present it to the user instead",
    )


def _analyze(command: str, cwd: Path) -> Analysis:
    # start-up speed: the Bash grammar's reader and its program tables (~25 ms of imports) load with the
    # first command judged, not on the way to the REPL's first prompt
    from tools.shell.reader import analyze

    return analyze(command, cwd)


_MAX_CODE_FILE = 1024 * 1024  # a script file of another language looked through for denied names


def _with_repository_config(a: Analysis, here: Path) -> Analysis:
    """``a`` with what a git command's own repository may make it run (``core.fsmonitor``, ``diff.external``,
    an alias, a hook: ``tools.permissions.git_config``) added to what can't be told: the repository's
    configuration is part of the command."""
    if not any(c.program.rsplit("/", 1)[-1] == "git" for c in a.commands):
        return a
    found: list[str] = []
    for c in a.commands:
        # where the command runs: the reader follows cd/pushd, env -C and loops (Command.dirs), the one
        # place that knows the directories of a line, shared with tools.shell.reads
        if c.program.rsplit("/", 1)[-1] == "git" and (
            why := git_config.doubt([w.value for w in c.words], c.dirs)
        ):
            found.append(f"{c.line()[:80]}: {why}")
    if not found:
        return a
    return dataclasses.replace(a, untold=(*a.untold, *dict.fromkeys(found)))


def _bash_patterns(rules: list[str]) -> list[tuple[str, BashPattern | None]]:
    """The rules covering Bash, each with its compiled pattern (None: the whole tool)."""
    out = []
    for rule in map(Rule.parse, rules):
        if rule.covers("Bash"):
            out.append((rule.text, None if rule.content is None else BashPattern.parse(rule.content)))
    return out


def _bash_hit(
    patterns: list[tuple[str, BashPattern | None]], command: str, a: Analysis, *, by_base_name: bool
) -> str | None:
    """The first rule matching the whole line exactly or any simple command in it."""
    for text, pattern in patterns:
        if pattern is None or pattern.exact == command.strip():
            return text
        if any(bash_rules.matches(pattern, c, by_base_name=by_base_name) for c in a.commands):
            return text
    return None


def _bash_could(patterns: list[tuple[str, BashPattern | None]], a: Analysis) -> str | None:
    return next(
        (text for text, p in patterns for c in a.commands if p and bash_rules.could_match(p, c)), None
    )


_TREE_LIMIT = 50_000  # entries a directory read below is looked through for Read-denied files


def _read_denied(path: Path, rule: str, *, listed: bool = False) -> Decision:
    what = "lists or reads what is in" if listed else "reads"
    return Decision(
        "deny",
        f'the command {what} {normal(path)}, and the rule "{rule}" in the settings denies reading it',
        rule,
    )


def _history(reads: Reads) -> set[Path]:
    return {p for p, _ in (*reads.history, *reads.maybe)}


def _written(a: Analysis) -> list[Path]:
    """Every place the line's redirections may write (targets that can't be told are left out)."""
    return [path for write in a.writes for path in write.paths]


def _harmless_write(path: Path) -> bool:
    text = os.path.normpath(path)
    return text in _HARMLESS_WRITES or re.fullmatch(r"/dev/fd/\d+", text) is not None


# ---- previews ----------------------------------------------------------------------------------


def _edit_preview(tool_name: str, target: Path, args: dict[str, Any]) -> str:
    if tool_name == "Edit":
        old, new = str(args.get("old_string", "")), str(args.get("new_string", ""))
        label = " (every occurrence)" if args.get("replace_all") else ""
        text = _text_of(target)
        if text is not None and old and old in text:  # the whole file: the hunks carry its line numbers
            after = text.replace(old, new, -1 if args.get("replace_all") else 1)
            return _diff(text, after, f"{target.name} before{label}", f"{target.name} after")
        return _diff(old, new, f"{target.name} before{label}", f"{target.name} after")
    content = str(args.get("content", ""))
    try:
        existing = target.read_text(encoding="utf-8", errors="replace") if target.is_file() else None
    except OSError:
        existing = None
    if existing is None:
        lines = content.splitlines()
        shown = "\n".join("+" + line for line in lines[:_PREVIEW_LINES])
        extra = len(lines) - _PREVIEW_LINES
        more = f"\n... ({extra} more line{'' if extra == 1 else 's'})" if extra > 0 else ""
        return f"(new file, {len(lines)} line{'' if len(lines) == 1 else 's'})\n{shown}{more}"
    return _diff(existing, content, f"{target.name} now", f"{target.name} after")


def _text_of(target: Path) -> str | None:
    try:
        return (
            target.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
            if target.is_file()
            else None
        )
    except OSError:
        return None


def _diff(old: str, new: str, old_label: str, new_label: str) -> str:
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_label, new_label, lineterm=""))
    if not lines:
        return "(no change)"
    more = f"\n... ({len(lines) - _PREVIEW_LINES} more diff lines)" if len(lines) > _PREVIEW_LINES else ""
    return "\n".join(lines[:_PREVIEW_LINES]) + more


def _argument_lines(args: dict[str, Any]) -> list[str]:
    """A call's arguments as a person reads them, one ``name: value`` each: a text's lines broken where
    it breaks (continued under two spaces), anything else as JSON (never an escaped newline)."""
    out: list[str] = []
    for key, value in args.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        first, *rest = text.split("\n")
        out += [f"{key}: {first}", *(f"  {line}" for line in rest)]
    return out
