"""Settings, built once at the CLI boundary and passed down; nothing below reads ``os.environ``.

Each setting is one row, declared on the field that holds it: ``Settings``'s fields here and
``CompactConfig``'s (``Settings.compaction``) in compact/decision/config.py, each with its default, settings-file
key, environment variable, kind and one line of doc (core.setting). ``TABLE`` lists them; validation of the
files, the merge across files, the environment, where each value came from (``LoadReport.sources``), the table
in docs/settings.md and ``--help``'s list of variables all come from it (``scripts/gen_docs`` regenerates
the last two; tests/agent/config/test_settings_rows.py fails when they are stale). Adding a setting is adding a field.

Precedence, lowest to highest: defaults < ~/.claude/settings.json < $COMPACT_AGENT_HOME/settings.json <
.claude/settings.json < .claude/settings.local.json < environment (the process's, overlaid on the files'
"env" maps) < command line. The two user files are the user's own: trusted, and a malformed one stops the
agent. The two project files are those of the project root (agent.config.project: found upwards from the
working directory); a malformed one is skipped with a warning (``LoadReport.warnings``), and both pass through
``agent.config.trust.restrict`` first: until the project is trusted their hooks, env entries, widening
permission settings and model are left out and listed in ``LoadReport.ignored``. Every file is read only if it
is a regular file of reasonable size (agent.config.project.read_small).

``load_settings`` is the one place that merges them. Across files each row's ``merge`` applies: permission
lists and ``additionalDirectories`` are concatenated (duplicates dropped), hook groups are concatenated per
event, objects (``env``, ``contextEditing``, and the keys inside ``compaction``, ``microcompact``, ``retry``)
merge one level deep, and every other key is replaced by the later file. Unknown keys are ignored so newer
files still load; a known key with a wrong type is a ``SettingsError`` whose message names the file and the
key. Rows marked ``manual`` are applied by hand below: ``home`` (before the files: they live there), ``env``
(the environment overlaid on them) and ``permissions.additionalDirectories`` (paths resolved).
"""

from __future__ import annotations

import json
import os
import pwd
import uuid
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent.config import trust as trust_store
from agent.config.agent_types import withheld_agents
from agent.config.project import SETTINGS_CAP, FileProblem, project_root, read_small
from agent.config.trust import Ignored, Trust
from compact.decision.config import CompactConfig
from compact.decision.thresholds import smallest_window
from core import mcp_names
from core.errors import SettingsError
from core.models import EFFORT_NAMES, effort_name, resolve
from core.private import make_private_dirs
from core.rules import RULE_EXAMPLE, is_rule, split_rules
from core.setting import (
    BOOL,
    POSITIVE_INT,
    RAW,
    SKIP,
    TEXT,
    Bad,
    Kind,
    Row,
    checked,
    concat_value,
    falsy,
    is_int,
    is_number,
    number,
    one_of,
    present,
    rows,
    setting,
    truthy,
    update_value,
    when_set,
)
from core.terminal import visible

__all__ = [
    "DEFAULT_MODEL",
    "LoadReport",
    "MIN_THINKING",
    "PERMISSION_MODES",
    "TABLE",
    "Settings",
    "SettingsError",
    "check_limits",
    "ensure_home",
    "falsy",
    "load_settings",
    "reload_settings",
    "split_rules",
    "table_of",
    "truthy",
]

# what a session uses when nothing names a model: the newest Sonnet (agent.runtime.client.default_model reads
# the SDK's list; tests/test_docs.py checks the two agree, and the docs' table with them)
DEFAULT_MODEL = resolve("sonnet")
MIN_THINKING = 1024  # the API's smallest thinking budget
PERMISSION_MODES = ("default", "acceptEdits", "bypassPermissions", "plan")


# ---- the kinds of this floor's settings (compact/decision/config.py and core.setting hold the rest) -------------


def _check_rules(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise Bad("an array of rule strings", value)
    for i, rule in enumerate(value):
        if not (isinstance(rule, str) and is_rule(rule)):
            raise Bad(RULE_EXAMPLE, rule, f"[{i}]")
    return [rule.strip() for rule in value]


def _check_effort(value: Any) -> str:
    try:
        return effort_name(value if isinstance(value, str) else "")
    except ValueError:
        raise Bad(EFFORT.expected, value) from None


def _check_dirs(value: Any) -> list[str]:
    if not (isinstance(value, list) and all(isinstance(d, str) and d for d in value)):
        raise Bad("an array of directory paths", value)
    return list(value)


def _check_env(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise Bad("an object", value)
    for name, item in value.items():
        if not (isinstance(item, str) or is_number(item)):
            raise Bad("a string", item, f".{name}")
    return {name: item if isinstance(item, str) else str(item) for name, item in value.items()}


def _check_hooks(hooks: Any) -> dict[str, list[dict[str, Any]]]:
    def need(ok: bool, expected: str, value: Any, at: str) -> None:
        if not ok:
            raise Bad(expected, value, at)

    need(isinstance(hooks, dict), "an object", hooks, "")
    for event, groups in hooks.items():
        key = f".{event}"
        need(isinstance(groups, list), "an array of matcher groups", groups, key)
        for i, group in enumerate(groups):
            gkey = f"{key}[{i}]"
            need(isinstance(group, dict), "an object", group, gkey)
            if "matcher" in group:
                need(isinstance(group["matcher"], str), "a string", group["matcher"], f"{gkey}.matcher")
            entries = group.get("hooks", [])
            need(isinstance(entries, list), "an array of hooks", entries, f"{gkey}.hooks")
            for j, hook in enumerate(entries):
                hkey = f"{gkey}.hooks[{j}]"
                need(isinstance(hook, dict), "an object", hook, hkey)
                kind = hook.get("type")
                need(isinstance(kind, str) and kind.strip() != "", "a non-empty string", kind, f"{hkey}.type")
                if kind == "command":
                    command = hook.get("command")
                    need(
                        isinstance(command, str) and command.strip() != "",
                        "a non-empty string",
                        command,
                        f"{hkey}.command",
                    )
                if "timeout" in hook:
                    timeout = hook["timeout"]
                    need(
                        is_number(timeout) and timeout > 0,
                        "a positive number of seconds",
                        timeout,
                        f"{hkey}.timeout",
                    )
    return {event: list(groups) for event, groups in hooks.items()}


def _check_status_line(value: Any) -> dict[str, Any]:
    """``statusLine``: ``{"type": "command", "command": "...", "padding": 0}``, as Claude Code reads it."""
    expected = 'an object like {"type": "command", "command": "..."}'
    if not isinstance(value, dict):
        raise Bad(expected, value)
    if value.get("type", "command") != "command":
        raise Bad('"command"', value.get("type"), ".type")
    command = value.get("command")
    if not (isinstance(command, str) and command.strip()):
        raise Bad("a non-empty string", command, ".command")
    padding = value.get("padding", 0)
    if not (is_int(padding) and 0 <= padding <= 20):
        raise Bad("an integer from 0 to 20", padding, ".padding")
    return {"type": "command", "command": command, "padding": padding}


def _merge_hooks(old: Any, new: Any) -> dict[str, Any]:
    """Hook groups concatenated per event across files."""
    out = dict(old or {})
    for event, groups in new.items():
        out[event] = out.get(event, []) + groups
    return out


def _read_thinking(raw: str) -> int | None:
    budget = int(raw.strip())
    if budget != 0 and budget < MIN_THINKING:
        raise ValueError(raw)
    return budget or None  # 0: no thinking (and alwaysThinkingEnabled off too, see _apply_env)


def _check_servers(value: Any) -> dict[str, Any]:
    """``mcpServers``: an object of server objects (each one's fields are read by agent/config/mcp_servers.py)."""
    if not isinstance(value, dict):
        raise Bad("an object of MCP servers", value)
    for name, server in value.items():
        if not isinstance(server, dict):
            raise Bad("an object", server, f".{name}")
    return dict(value)


def _check_names(value: Any) -> list[str]:
    if not (isinstance(value, list) and all(isinstance(n, str) for n in value)):
        raise Bad("an array of server names", value)
    return list(value)


def _read_tool_search(raw: str) -> str:
    word = raw.strip().lower()
    if truthy(word) or word == "auto":
        return "auto"
    if falsy(word):
        return "off"
    if word not in ("api", "client"):
        raise ValueError(raw)
    return word


def _read_millis(raw: str) -> float:
    value = int(raw.strip())
    if value <= 0:
        raise ValueError(raw)
    return value / 1000


SERVER_NAMES = Kind("an array of server names", _check_names)
MILLIS = Kind("a number of seconds > 0", checked("a number of seconds > 0", lambda v: is_number(v) and v > 0, float),
              _read_millis, env_expected="a positive number of milliseconds")  # fmt: skip
TOOL_SEARCH = Kind(
    "one of auto, api, client, off",
    checked("one of auto, api, client, off", lambda v: v in ("auto", "api", "client", "off")),
    _read_tool_search,
    env_expected="auto, true, false, api or client",
)
THINKING = Kind(
    f"an integer >= {MIN_THINKING}",
    checked(f"an integer >= {MIN_THINKING}", lambda v: is_int(v) and v >= MIN_THINKING),
    _read_thinking,
    env_expected=f"an integer >= {MIN_THINKING}, or 0 for no thinking",
)
RULES = Kind("an array of rule strings", _check_rules)
EFFORT = Kind("one of " + ", ".join(EFFORT_NAMES), lambda v: _check_effort(v), effort_name)


@dataclass
class LoadReport:
    """What ``load_settings`` found beside the values: where each came from, the project's trust and what
    its files asked for and did not get, the files it skipped, and the flags to load them again with."""

    # where each value came from, for /config-like displays and error messages
    sources: dict[str, str] = field(default_factory=dict)
    # project trust (agent/config/trust.py): the record, and what the project files asked for and did not get
    trust: Trust = field(default_factory=lambda: Trust(False))
    trust_fingerprint: str = ""  # of the project's acting settings now (agent.config.trust.fingerprint)
    ignored: list[Ignored] = field(default_factory=list)
    # problems with project settings files that were skipped, shown once (print mode: stderr)
    warnings: list[str] = field(default_factory=list)
    # the command-line values these settings were built from, so they can be rebuilt (reload_settings)
    cli: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Settings:
    """The settings' values, one row each (the module's docstring); ``report`` says how they were loaded."""

    cwd: Path
    home: Path = setting(
        env="COMPACT_AGENT_HOME",
        kind=RAW,
        manual=True,
        shown_default="~/.compact-agent",
        doc="where the agent keeps its state (never ~/.claude)",
    )
    model: str = setting(
        DEFAULT_MODEL,
        key="model",
        env="ANTHROPIC_MODEL",
        kind=Kind(TEXT.expected, TEXT.check, lambda raw: raw.strip()),
        doc="default model (--model overrides it); without one, the newest Sonnet",
    )
    model_explicit: bool = False  # chosen by flag/env/settings rather than the default
    permission_mode: str = setting(
        "default",
        key="permissions.defaultMode",
        kind=one_of(*PERMISSION_MODES),
        doc="how tool calls are approved (--permission-mode overrides it)",
    )
    allow: list[str] = setting(
        [], key="permissions.allow", kind=RULES, merge=concat_value, doc="tool calls allowed without asking"
    )
    deny: list[str] = setting(
        [], key="permissions.deny", kind=RULES, merge=concat_value, doc="tool calls always refused"
    )
    ask: list[str] = setting(
        [], key="permissions.ask", kind=RULES, merge=concat_value, doc="tool calls always asked about"
    )
    hooks: dict[str, Any] = setting(
        {},
        key="hooks",
        kind=Kind("an object of events", _check_hooks),
        merge=_merge_hooks,
        doc="commands run at events (PreToolUse, PostToolUse, PreCompact, ...)",
    )
    status_line: dict[str, Any] | None = setting(
        None,
        key="statusLine",
        kind=Kind('an object like {"type": "command", "command": "..."}', _check_status_line),
        doc="a command whose first line of output is shown under the input (the session's JSON on its stdin)",
    )
    # API access (never written anywhere, never shown)
    api_key: str | None = setting(
        None,
        env="ANTHROPIC_API_KEY",
        kind=RAW,
        repr=False,
        doc="credentials, passed to the SDK (required, except with --demo)",
    )
    auth_token: str | None = setting(
        None, env="ANTHROPIC_AUTH_TOKEN", kind=RAW, repr=False, doc="a bearer token instead of the API key"
    )
    base_url: str | None = setting(
        None,
        env="ANTHROPIC_BASE_URL",
        kind=RAW,
        doc="any Messages-API-compatible server (proxy, gateway, local model server)",
    )
    # compaction: compact.decision.config declares its rows; parsed into one CompactConfig
    compaction: CompactConfig = field(default_factory=CompactConfig)
    no_color: bool = setting(False, key="noColor", env="NO_COLOR", kind=present(True), doc="no colours")
    # extended thinking: MAX_THINKING_TOKENS / maxThinkingTokens (a budget, on every turn), or
    # alwaysThinkingEnabled (the default budget on every turn); else only when a prompt asks ("think hard")
    max_thinking_tokens: int | None = setting(
        None,
        key="maxThinkingTokens",
        env="MAX_THINKING_TOKENS",
        kind=THINKING,
        doc="extended thinking on every turn with this budget (0 in the variable: off)",
    )
    always_thinking: bool = setting(
        False,
        key="alwaysThinkingEnabled",
        kind=BOOL,
        doc="extended thinking on every turn (budget 31,999); Tab toggles it in the REPL",
    )
    # how deeply a model that thinks by effort thinks (agent/runtime/thinking.py maps every thinking
    # control; docs/models.md); None after loading means "auto", the model's default
    effort: str | None = setting(
        None,
        key="effortLevel",
        env="CLAUDE_CODE_EFFORT_LEVEL",
        kind=EFFORT,
        doc="how deeply an effort model thinks (auto: the model's default); /effort and --effort too",
    )
    thinking_off: bool = False  # MAX_THINKING_TOKENS=0: off, also on the models that think by default
    retry_seconds: float = setting(
        120.0,
        key="retry.maxSeconds",
        env="COMPACT_AGENT_RETRY_SECONDS",
        kind=number("a number of seconds >= 0", lambda v: v >= 0),
        doc="seconds to keep retrying 408/409/429/5xx/529, a broken stream or no connection (0: no retries)",
    )
    # the user's home directory (for "~/" in permission rules); from $HOME
    user_home: Path | None = None
    # permissions.additionalDirectories, resolved to absolute paths: treated like the project for reads/edits
    additional_dirs: list[Path] = setting(
        [],
        key="permissions.additionalDirectories",
        kind=Kind("an array of directory paths", _check_dirs),
        merge=concat_value,
        manual=True,
        doc="more directories treated like the project",
    )
    # the real environment overlaid on the files' "env" maps; what subprocesses (Bash, hooks) should get
    environ: dict[str, str] = setting(
        {},
        key="env",
        kind=Kind("an object", _check_env),
        merge=update_value,
        manual=True,
        repr=False,
        doc="environment variables for the agent, its commands and hooks",
    )
    # the project's root (agent.config.project): where its .claude/ and the top CLAUDE.md are; trust is keyed on it
    project_root: Path | None = None
    # MCP (agent/config/mcp_servers.py reads the servers; docs/mcp.md): a project's settings files set the
    # first three only once the project is trusted (agent.config.trust.restrict)
    mcp_servers: dict[str, Any] = setting(
        {},
        key="mcpServers",
        kind=Kind("an object of MCP servers", _check_servers),
        merge=update_value,
        doc="MCP servers, in Claude Code's format (docs/mcp.md)",
    )
    enabled_mcpjson: list[str] = setting(
        [],
        key="enabledMcpjsonServers",
        kind=SERVER_NAMES,
        merge=concat_value,
        doc="servers of the project's .mcp.json that may start (once the project is trusted)",
    )
    disabled_mcpjson: list[str] = setting(
        [],
        key="disabledMcpjsonServers",
        kind=SERVER_NAMES,
        merge=concat_value,
        doc="servers of .mcp.json that never start",
    )
    enable_all_project_mcp: bool = setting(
        False,
        key="enableAllProjectMcpServers",
        kind=BOOL,
        doc="every server of the project's .mcp.json may start",
    )
    tool_search: str = setting(
        "auto",
        env="ENABLE_TOOL_SEARCH",
        kind=TOOL_SEARCH,
        doc="MCP tools behind a tool search: auto (the API's own on api.anthropic.com, ours elsewhere), "
        "api, client, or false (every MCP tool loaded)",
    )
    mcp_timeout: float = setting(
        30.0, env="MCP_TIMEOUT", kind=MILLIS, doc="how long an MCP server may take to start (milliseconds)"
    )
    mcp_tool_timeout: float = setting(
        600.0, env="MCP_TOOL_TIMEOUT", kind=MILLIS, doc="how long one MCP tool call may take (milliseconds)"
    )
    max_mcp_output_tokens: int = setting(
        25_000,
        env="MAX_MCP_OUTPUT_TOKENS",
        kind=POSITIVE_INT,
        doc="an MCP result larger than this goes to a file, the model gets a preview",
    )
    # memory across sessions (agent/memory, docs/memory.md): Claude Code's names
    auto_memory: bool = setting(
        True,
        key="autoMemoryEnabled",
        env="CLAUDE_CODE_DISABLE_AUTO_MEMORY",
        kind=when_set(False),
        doc="memory across sessions, checked against the working tree before use "
        "(CLAUDE_CODE_DISABLE_AUTO_MEMORY=1 turns it off; docs/memory.md)",
    )
    auto_memory_directory: str | None = setting(
        None,
        key="autoMemoryDirectory",
        kind=TEXT,
        shown_default="$COMPACT_AGENT_HOME/projects/(the repository)/memory",
        doc="where the project's memory is kept (from a project's settings only once it is trusted)",
    )
    mcp_config: list[str] = field(default_factory=list)  # --mcp-config FILE…
    strict_mcp_config: bool = False  # --strict-mcp-config: only the --mcp-config servers
    append_system_prompt: str = ""  # --append-system-prompt
    system_prompt: str = ""  # --system-prompt: in place of our own instructions
    session_id: str | None = None  # --session-id: the new session's id
    fallback_model: str | None = None  # --fallback-model: used once the model is overloaded
    # not a setting: what loading found (where each value came from, trust, what was left out, warnings)
    report: LoadReport = field(default_factory=lambda: LoadReport())

    @property
    def root(self) -> Path:
        """The project root (the working directory when there is no marker above it)."""
        return self.project_root or self.cwd

    @property
    def project_key(self) -> str:
        return "".join(c if c.isalnum() else "-" for c in str(self.cwd))

    @property
    def project_dir(self) -> Path:
        """P in docs/files.md: where this directory's sessions live."""
        return self.home / "projects" / self.project_key


def table_of(cls: type[Settings]) -> list[Row]:
    """Every row of a settings class in field order, the rows of a nested dataclass (``compaction``) where
    its field is."""
    own = {row.name: row for row in rows(cls)}
    out: list[Row] = []
    for f in fields(cls):
        if f.name in own:
            out.append(own[f.name])
        elif f.default_factory is not MISSING and is_dataclass(inner := f.default_factory()):
            out += rows(type(inner), owner=f.name)
    return out


TABLE = table_of(Settings)


def load_settings(
    *, cwd: Path, environ: Mapping[str, str], cli: dict[str, Any], kind: type[Settings] = Settings
) -> Settings:
    """Merge defaults, the settings files, the environment and the command line into one Settings.

    ``kind`` is the settings class whose rows are read: ``Settings``, or in a test one with a row more."""
    table = TABLE if kind is Settings else table_of(kind)
    cwd = Path(cwd) if Path(cwd).is_absolute() else Path(cwd).absolute()
    user_home = Path(environ["HOME"]) if environ.get("HOME") else Path(pwd.getpwuid(os.getuid()).pw_dir)
    home = _agent_home(environ, cwd, user_home)
    s = kind(cwd=cwd, home=home, user_home=user_home)
    s.report.sources["home"] = "env COMPACT_AGENT_HOME" if environ.get("COMPACT_AGENT_HOME") else "default"

    root = s.project_root = project_root(cwd, user_home)
    user_files = _dedupe_paths([user_home / ".claude" / "settings.json", home / "settings.json"])
    project_files = _project_files(root, user_files, table)
    _take_trust(s, project_files, cli)

    layer: dict[str, Any] = {}
    sources: dict[str, str] = {}  # the file that set each key (and each env.NAME)
    for path in user_files:  # the user's own: trusted, and a broken one stops the agent
        _merge_layer(layer, sources, _read_file(path, table), str(path), table)
    for path, raw in project_files:
        if isinstance(raw, SettingsError):  # a project's file is not the user's to fix: warn and go on
            s.report.warnings.append(f"{raw}; going on without this file")
            continue
        data, ignored = trust_store.restrict(raw, str(path), s.report.trust)
        s.report.ignored += ignored
        _merge_layer(layer, sources, data, str(path), table)
    if not s.report.trust.trusted and root not in (
        user_home,
        home,
    ):  # its agents act with the user's permissions
        s.report.ignored += withheld_agents(root)

    if cli.get("settings"):  # --settings FILE or JSON: the user's own, over every file
        _merge_layer(layer, sources, _flag_settings(str(cli["settings"]), cwd, table), "--settings", table)

    env: dict[str, str] = dict(layer.get("env", {}))
    env_sources = {name: f'{sources["env." + name]} "env"' for name in env}
    env.update(environ)
    env_sources.update({name: "environment" for name in environ})
    s.report.sources.update({f"env.{n}": where for n, where in env_sources.items() if where != "environment"})
    s.environ = env

    _apply_files(s, layer, sources, table)
    _apply_env(s, env, env_sources, table)
    _apply_cli(s, cli)
    s.model = resolve(s.model)  # a Claude Code alias (sonnet, opus, haiku, ...) names the newest of its kind
    s.effort = None if s.effort == "auto" else s.effort
    s.model_explicit = "model" in s.report.sources  # chosen by a file, the environment or --model
    check_limits(s)
    s.report.warnings += rule_warnings(s)
    return s


def _project_files(
    root: Path, user_files: list[Path], table: list[Row]
) -> list[tuple[Path, dict[str, Any] | SettingsError]]:
    """The project's two settings files, each validated or the error that skips it."""
    project_files: list[tuple[Path, dict[str, Any] | SettingsError]] = []
    for path in (root / ".claude" / "settings.json", root / ".claude" / "settings.local.json"):
        if path in user_files:  # started in the home directory: ~/.claude is the user's, read below
            continue
        try:
            project_files.append((path, _read_file(path, table)))
        except SettingsError as e:
            project_files.append((path, e))
    return project_files


def _take_trust(
    s: Settings, project_files: list[tuple[Path, dict[str, Any] | SettingsError]], cli: dict[str, Any]
) -> None:
    """The project's trust into the report: granted now by --trust-project, else as recorded, and not
    trusted when its acting settings changed since the user trusted it."""
    root, home = s.root, s.home
    readable = [(raw, str(path)) for path, raw in project_files if not isinstance(raw, SettingsError)]
    # a project whose own settings enable its .mcp.json servers is trusted with those servers as they are:
    # a changed command or argument is a change of what it does for the user (issue 40)
    enables = any(key in raw for raw, _ in readable for key in trust_store.MCP_KEYS)
    s.report.trust_fingerprint = trust_store.fingerprint(readable, _mcp_json_text(root) if enables else "")
    if cli.get("trust_project"):
        _make_home(home)  # the trust record lives there: a home that can't be made says so first
        trust_store.grant(home, root, approved=s.report.trust_fingerprint)
    s.report.trust, s.report.cli = trust_store.load(home, root), dict(cli)
    if (
        s.report.trust.trusted
        and s.report.trust.approved
        and s.report.trust.approved != s.report.trust_fingerprint
    ):
        s.report.trust = trust_store.Trust(
            False, changed=True
        )  # its settings changed since the user trusted it


def _mcp_json_text(root: Path) -> str:
    try:
        return read_small(root / ".mcp.json", SETTINGS_CAP) or ""
    except FileProblem as e:
        return f"unreadable: {e}"


def rule_warnings(s: Settings) -> list[str]:
    """Permission rules on MCP tools that can never match anything (issue 40): said at start, not kept quiet."""
    out = []
    for kind, rules in (("allow", s.allow), ("deny", s.deny), ("ask", s.ask)):
        for rule in rules:
            text = rule.strip()
            if not text.startswith(mcp_names.PREFIX):
                continue
            tool, paren, _ = text.partition("(")
            why = (
                "an MCP rule takes no (...): name the server and the tool"
                if paren
                else mcp_names.rule_problem(tool)
            )
            if why:
                out.append(f'the {kind} rule "{visible(text, one_line=True)}" can never match a tool: {why}')
    return out


def reload_settings(s: Settings, environ: Mapping[str, str]) -> Settings:
    """The same settings built again (after the project's trust changed)."""
    return load_settings(
        cwd=s.cwd, environ=environ, cli={**s.report.cli, "trust_project": False}, kind=type(s)
    )


# ---- files -------------------------------------------------------------------------------------


def _agent_home(environ: Mapping[str, str], cwd: Path, user_home: Path) -> Path:
    raw = environ.get("COMPACT_AGENT_HOME")
    if not raw:
        return user_home / ".compact-agent"
    if raw == "~" or raw.startswith("~/"):
        return user_home / raw[2:]
    path = Path(raw)
    return path if path.is_absolute() else cwd / path


def _dedupe_paths(paths: list[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))


def _read_file(path: Path, table: list[Row]) -> dict[str, Any]:
    """The validated contents of one settings file ({} when it does not exist)."""
    try:
        text = read_small(path, SETTINGS_CAP)
    except FileProblem as exc:
        raise SettingsError(f"{path}: cannot read settings file: {exc}") from None
    if text is None:  # (a home under a regular file: ensure_home says so)
        return {}
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(
            f"{path}: invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg})"
        ) from None
    except RecursionError:
        raise SettingsError(f"{path}: invalid JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: a settings file must hold a JSON object (got {_type_name(data)})")
    return validate(data, str(path), table)


def _flag_settings(value: str, cwd: Path, table: list[Row]) -> dict[str, Any]:
    """--settings: a settings file's path, or its JSON given as the value."""
    if value.lstrip().startswith("{"):
        try:
            data = json.loads(value)
        except json.JSONDecodeError as exc:
            raise SettingsError(f"--settings: invalid JSON at column {exc.colno} ({exc.msg})") from None
        if not isinstance(data, dict):
            raise SettingsError("--settings: the JSON must be an object")
        return validate(data, "--settings", table)
    path = Path(value).expanduser()
    path = path if path.is_absolute() else cwd / path
    if not path.is_file():
        raise SettingsError(f"--settings: {path} is not a file (give a settings file or its JSON)")
    return _read_file(path, table)


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _wrong(file: str, key: str, expected: str, value: Any) -> SettingsError:
    return SettingsError(f'{file}: "{key}" must be {expected} (got {_show(value)})')


def validate(data: dict[str, Any], file: str, table: list[Row] = TABLE) -> dict[str, Any]:
    """Check every known key of one file against its row; return only the known keys, normalised, in the
    file's shape (a dotted key inside its object: what agent.config.trust.restrict reads)."""
    out: dict[str, Any] = {}
    for row in table:
        if not row.key:
            continue
        if not row.section:
            if row.key in data:
                out[row.key] = _checked(row, data[row.key], file)
            continue
        if row.section not in data:
            continue
        inner = out.setdefault(row.section, {})
        given = _object_of(data[row.section], row.section, file, table)
        if row.leaf in given:
            inner[row.leaf] = _checked(row, given[row.leaf], file)
    return out


def _checked(row: Row, value: Any, file: str) -> Any:
    try:
        return row.kind.check(value)
    except Bad as bad:
        raise _wrong(file, row.key + bad.at, bad.expected, bad.value) from None


def _object_of(value: Any, section: str, file: str, table: list[Row]) -> dict[str, Any]:
    """An object key's value; a row marked ``shorthand`` lets the key hold that row's value alone."""
    if isinstance(value, dict):
        return value
    short = next((r for r in table if r.section == section and r.shorthand), None)
    if short is None:
        raise _wrong(file, section, "an object", value)
    expected = short.kind.expected
    expected = "true, false or an object" if expected == BOOL.expected else f"{expected} or an object"
    try:
        short.kind.check(value)
    except Bad:
        raise _wrong(file, section, expected, value) from None
    return {short.leaf: value}


def _merge_layer(
    layer: dict[str, Any], sources: dict[str, str], data: dict[str, Any], source: str, table: list[Row]
) -> None:
    """Fold one validated file into the running merge, by each row's ``merge``; ``sources`` records who set
    what (per variable for ``env``)."""
    for row in table:
        if not row.key:
            continue
        holder = data.get(row.section, {}) if row.section else data
        if not isinstance(holder, dict) or row.leaf not in holder:
            continue
        value = holder[row.leaf]
        layer[row.key] = row.merge(layer.get(row.key), value)
        sources[row.key] = source
        if row.key == "env":
            sources.update({f"env.{name}": source for name in value})


def _apply_files(s: Settings, layer: dict[str, Any], sources: dict[str, str], table: list[Row]) -> None:
    for row in table:
        if row.key in layer and not row.manual:
            _set(s, row, row.finish(layer[row.key]), sources[row.key])
    s.additional_dirs = [_expand_dir(d, s) for d in layer.get("permissions.additionalDirectories", [])]


def _set(s: Settings, row: Row, value: Any, source: str) -> None:
    """Set one setting and say where it came from (a nested config is frozen: a changed copy)."""
    if row.owner:
        setattr(s, row.owner, replace(getattr(s, row.owner), **{row.name: value}))
    else:
        setattr(s, row.name, value)
    s.report.sources[row.name] = source


def _expand_dir(raw: str, s: Settings) -> Path:
    if (raw == "~" or raw.startswith("~/")) and s.user_home is not None:
        return s.user_home / raw[2:]
    path = Path(raw)
    return path if path.is_absolute() else s.cwd / path


# ---- environment -------------------------------------------------------------------------------


def _apply_env(s: Settings, env: Mapping[str, str], origin: Mapping[str, str], table: list[Row]) -> None:
    for row in table:
        raw = env.get(row.env) if row.env and not row.manual else None
        if raw in (None, ""):
            continue
        assert raw is not None
        try:
            value = row.kind.read(raw)
        except ValueError:
            where = "" if origin.get(row.env) == "environment" else f" (set in {origin.get(row.env)})"
            expected = row.kind.env_expected or row.kind.expected
            raise SettingsError(f"{row.env}: expected {expected}, got {_show(raw)}{where}") from None
        if value is not SKIP:
            _set(s, row, value, f"env {row.env}")
    if (
        s.report.sources.get("max_thinking_tokens") == "env MAX_THINKING_TOKENS"
        and s.max_thinking_tokens is None
    ):
        s.always_thinking = False  # MAX_THINKING_TOKENS=0: no thinking, whatever a file said
        s.thinking_off = True


def check_limits(s: Settings) -> None:
    """Refuse values that parse but can't work: a window cap that leaves no room, a base URL that is no URL."""
    smallest, cap = smallest_window(), s.compaction.context_window
    if cap is not None and cap < smallest:
        source = s.report.sources.get("context_window", "settings")
        name = (
            f"{source[4:]}={cap}"
            if source.startswith("env ")
            else f'"compaction.contextWindow": {cap} in {source}'
        )
        raise SettingsError(
            f"{name} leaves no room for the conversation (after the output reserve and the "
            f"auto-compact buffer); the smallest usable window is {smallest}"
        )
    if s.base_url is not None:
        parsed = urlsplit(s.base_url.strip())
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise SettingsError(
                f"ANTHROPIC_BASE_URL must be an http:// or https:// URL (got {_show(s.base_url)})"
            )


def ensure_home(s: Settings) -> None:
    """Create COMPACT_AGENT_HOME (0700) now, so a path that can't be one fails at start with one line."""
    _make_home(s.home)


def _make_home(home: Path) -> None:
    try:
        make_private_dirs(home)
        if not home.is_dir():
            raise NotADirectoryError(20, "Not a directory")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SettingsError(f"COMPACT_AGENT_HOME {home}: cannot create the directory ({reason})") from None


# ---- command line ------------------------------------------------------------------------------


def _apply_cli(s: Settings, cli: Mapping[str, Any]) -> None:
    if cli.get("model"):
        s.model, s.model_explicit, s.report.sources["model"] = str(cli["model"]).strip(), True, "--model"
    if cli.get("effort"):
        try:
            level = effort_name(str(cli["effort"]))
        except ValueError:
            raise SettingsError(f"--effort must be {EFFORT.expected} (got {_show(cli['effort'])})") from None
        s.effort, s.report.sources["effort"] = level, "--effort"
    _apply_mode_flags(s, cli)
    for key, flag, attr in (
        ("allowed_tools", "--allowedTools", "allow"),
        ("disallowed_tools", "--disallowedTools", "deny"),
    ):
        rules = _flag_rules(flag, cli.get(key) or [])
        if rules:
            setattr(s, attr, concat_value(getattr(s, attr), rules))
    s.mcp_config = [str(item) for item in cli.get("mcp_config") or []]
    s.strict_mcp_config = bool(cli.get("strict_mcp_config"))
    s.append_system_prompt = str(cli.get("append_system_prompt") or "")
    s.system_prompt = str(cli.get("system_prompt") or "")
    if cli.get("session_id"):
        raw = str(cli["session_id"]).strip()
        try:
            s.session_id = str(uuid.UUID(raw))
        except ValueError:
            raise SettingsError(f"--session-id must be a UUID (got {_show(raw)})") from None
    if cli.get("fallback_model"):
        s.fallback_model = resolve(str(cli["fallback_model"]))
    _apply_add_dirs(s, cli.get("add_dir") or [])


def _apply_mode_flags(s: Settings, cli: Mapping[str, Any]) -> None:
    """--permission-mode, then --dangerously-skip-permissions over it."""
    mode = cli.get("permission_mode")
    if mode:
        if mode not in PERMISSION_MODES:
            raise SettingsError(
                f'--permission-mode must be one of {", ".join(PERMISSION_MODES)} (got "{mode}")'
            )
        s.permission_mode, s.report.sources["permission_mode"] = mode, "--permission-mode"
    if cli.get("dangerously_skip_permissions"):
        s.permission_mode, s.report.sources["permission_mode"] = (
            "bypassPermissions",
            "--dangerously-skip-permissions",
        )


def _flag_rules(flag: str, values: list[str]) -> list[str]:
    """The rules of a rule flag's values (each may hold several); one that is not a rule stops the start."""
    rules = [rule for item in values for rule in split_rules(item)]
    for rule in rules:
        if not is_rule(rule):
            raise SettingsError(f'{flag}: "{rule}" is not {RULE_EXAMPLE}')
    return rules


def _apply_add_dirs(s: Settings, values: list[str]) -> None:
    for raw in values:
        directory = _expand_dir(str(raw), s)
        if not directory.is_dir():
            raise SettingsError(f"--add-dir: {directory} is not a directory")
        if directory not in s.additional_dirs:
            s.additional_dirs.append(directory)
