"""Which MCP servers a session has: Claude Code's configuration files, read as they are.

Sources, lowest to highest precedence when two define the same name (the later one wins)::

    user      ~/.claude.json "mcpServers"                     (read only: never written)
    settings  "mcpServers" in our settings files (H/settings.json; a project's only once trusted)
    project   .mcp.json at the project root                   (starts only when trusted AND approved)
    local     ~/.claude.json "projects"[root]."mcpServers", and H/mcp.json's entry for this project
    flag      --mcp-config FILE… (the user's explicit choice); with --strict-mcp-config the only source

A ``.mcp.json`` server is approved by ``enabledMcpjsonServers`` / ``enableAllProjectMcpServers`` (settings,
~/.claude.json's project entry, or H/mcp.json, where the REPL's prompt records the answer) and refused by
``disabledMcpjsonServers``; until the project is trusted none of them starts, whatever the lists say.

Each server is ``{"command", "args", "env", "cwd"}`` (stdio, the default) or ``{"type": "http"|"sse",
"url", "headers"}``. ``${VAR}`` and ``${VAR:-default}`` are expanded in every string of it from the
environment the settings were built with. The agent's own credentials (``ANTHROPIC_*`` keys and tokens)
are never expanded anywhere, and a project's ``.mcp.json`` (a file the repository supplies) never
expands a credential-like variable (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``) into a remote
server's URL or headers: such a server gets a ``problem`` instead and does not start.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.config.project import SETTINGS_CAP, FileProblem, read_small
from core import mcp_names
from core.private import locked, replace_private

MCP_JSON = ".mcp.json"
CLAUDE_JSON = ".claude.json"
LOCAL_FILE = "mcp.json"  # in COMPACT_AGENT_HOME: local-scope servers and .mcp.json approvals, per project
REMOTE = ("http", "sse")
TRANSPORTS = ("stdio", *REMOTE)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_CREDENTIAL_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


@dataclass(frozen=True)
class ServerConfig:
    """One configured server. ``problem``: why it can't start (shown as its state, one line)."""

    name: str
    scope: str  # user | settings | project | local | flag
    source: str  # the file it came from
    transport: str = "stdio"
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    always_load: bool = False
    problem: str = ""
    digest: str = ""  # of the entry as written: what an approval of a project's server is bound to

    @property
    def remote(self) -> bool:
        return self.transport in REMOTE

    def describe(self) -> str:
        """What it runs or where it connects, for /mcp and the approval prompt."""
        if self.remote:
            return f"{self.transport} {self.url}"
        return " ".join([self.command, *self.args])


@dataclass
class McpSetup:
    """Every server found, and the project's servers that wait for trust or approval."""

    servers: list[ServerConfig] = field(default_factory=list)
    unapproved: list[ServerConfig] = field(default_factory=list)  # .mcp.json servers nobody approved yet
    untrusted: list[ServerConfig] = field(default_factory=list)  # .mcp.json servers of an untrusted project
    problems: list[str] = field(default_factory=list)  # unreadable files, one line each


def server_name(name: str) -> str:
    """A name as it appears in tool names (``mcp__<server>__<tool>``): letters, digits, ``_`` and ``-``."""
    return mcp_names.server_name(name)


def credential_like(var: str) -> bool:
    upper = var.upper()
    return any(word in upper for word in _CREDENTIAL_WORDS)


def agent_credential(var: str) -> bool:
    return var.upper().startswith("ANTHROPIC_") and credential_like(var)


def expand(text: str, environ: Mapping[str, str], *, refuse_credentials: bool) -> tuple[str, list[str]]:
    """``text`` with ``${VAR}`` / ``${VAR:-default}`` expanded; the variables that could not be (missing
    without a default, or refused) are returned so the server can say why it does not start."""
    missing: list[str] = []

    def one(m: re.Match[str]) -> str:
        var, default = m.group(1), m.group(2)
        if agent_credential(var) or (refuse_credentials and credential_like(var)):
            missing.append(f"{var} (a credential, not expanded toward this server)")
            return ""
        if var in environ:
            return environ[var]
        if default is not None:
            return default
        missing.append(f"{var} (not set)")
        return ""

    return _VAR.sub(one, text), missing


def parse_server(name: str, raw: Any, scope: str, source: str, environ: Mapping[str, str]) -> ServerConfig:
    """One server entry, expanded; a malformed one comes back with its ``problem``."""
    base = ServerConfig(name=name, scope=scope, source=source, digest=entry_digest(raw))
    if why := mcp_names.name_problem(name):
        return _with(base, problem=f"{source}: {why}")
    if not isinstance(raw, dict):
        return _with(base, problem=f'{source}: server "{name}" must be an object')
    transport = str(raw.get("type") or ("http" if raw.get("url") and not raw.get("command") else "stdio"))
    if transport == "streamable-http":
        transport = "http"
    if transport not in TRANSPORTS:
        return _with(base, problem=f'{source}: server "{name}" has an unknown type "{transport}"')
    values = _Expander(environ, refuse_credentials=scope == "project" and transport in REMOTE)
    try:
        config = _remote(base, raw, transport, values) if transport in REMOTE else _stdio(base, raw, values)
    except ValueError as e:
        return _with(base, problem=f'{source}: server "{name}": {e}')
    config = _with(config, always_load=raw.get("alwaysLoad") is True)
    if values.missing:
        return _with(config, problem=f"variables not expanded: {', '.join(dict.fromkeys(values.missing))}")
    return config


class _Expander:
    """An entry's strings with their variables expanded; the variables that were not set, collected."""

    def __init__(self, environ: Mapping[str, str], *, refuse_credentials: bool) -> None:
        self.environ, self.refuse = environ, refuse_credentials
        self.missing: list[str] = []

    def text(self, value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise ValueError(f'"{key}" must be a string')
        out, gone = expand(value, self.environ, refuse_credentials=self.refuse)
        self.missing.extend(gone)
        return out

    def table(self, value: Any, key: str) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError(f'"{key}" must be an object of strings')
        return {str(k): self.text(v, f"{key}.{k}") for k, v in value.items()}


def _remote(base: ServerConfig, raw: dict[str, Any], transport: str, values: _Expander) -> ServerConfig:
    if not raw.get("url"):
        raise ValueError('a remote server needs a "url"')
    return _with(
        base,
        transport=transport,
        url=values.text(raw["url"], "url"),
        headers=values.table(raw.get("headers"), "headers"),
    )


def _stdio(base: ServerConfig, raw: dict[str, Any], values: _Expander) -> ServerConfig:
    if not raw.get("command"):
        raise ValueError('a stdio server needs a "command"')
    args = raw.get("args") or []
    if not isinstance(args, list):
        raise ValueError('"args" must be an array of strings')
    return _with(
        base,
        command=values.text(raw["command"], "command"),
        args=tuple(values.text(a, "args") for a in args),
        env=values.table(raw.get("env"), "env"),
        cwd=values.text(raw["cwd"], "cwd") if raw.get("cwd") else None,
    )


def entry_digest(raw: Any) -> str:
    """A digest of a server's entry as written (command, arguments, environment, URL, headers)."""
    try:
        text = json.dumps(raw, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(raw)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _with(config: ServerConfig, **changes: Any) -> ServerConfig:
    return replace(config, **changes)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file (None when absent); FileProblem when it can't be used."""
    text = read_small(path, SETTINGS_CAP)
    if text is None or not text.strip():
        return None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise FileProblem(f"invalid JSON ({e})") from None
    if not isinstance(data, dict):
        raise FileProblem("it must hold a JSON object")
    return data


def servers_of(data: dict[str, Any] | None) -> dict[str, Any]:
    found = (data or {}).get("mcpServers")
    return found if isinstance(found, dict) else {}


@dataclass(frozen=True)
class Sources:
    """Where to look: the places and the choices the settings made."""

    root: Path  # the project root
    home: Path  # COMPACT_AGENT_HOME
    user_home: Path | None
    environ: Mapping[str, str]
    trusted: bool
    settings_servers: Mapping[str, Any] = field(default_factory=dict)  # "mcpServers" of our settings
    enabled: tuple[str, ...] = ()  # enabledMcpjsonServers
    disabled: tuple[str, ...] = ()  # disabledMcpjsonServers
    enable_all: bool = False  # enableAllProjectMcpServers
    flag_files: tuple[str, ...] = ()  # --mcp-config (paths, or JSON text)
    strict: bool = False  # --strict-mcp-config


def load(src: Sources) -> McpSetup:
    """Every server the sources configure (later scopes override earlier ones of the same name)."""
    setup = McpSetup()
    found: dict[str, ServerConfig] = {}

    def add(entries: dict[str, Any], scope: str, source: str) -> None:
        for name, raw in entries.items():
            found[str(name)] = parse_server(str(name), raw, scope, source, src.environ)

    flag_entries = [(entries, source) for entries, source in _flag_sources(src, setup)]
    if not src.strict:
        claude = _claude_json(src, setup)
        project_entry = _project_entry(claude, src.root)
        add(servers_of(claude), "user", _claude_path(src))
        add(dict(src.settings_servers), "settings", "settings")
        mcp_json = _read(src.root / MCP_JSON, setup)
        local = local_entry(src.home, src.root)
        project_servers = servers_of(mcp_json)
        enabled = {*src.enabled, *_strings(project_entry, "enabledMcpjsonServers")}
        # the REPL's answers are bound to the entry approved: a repository that changes a server's command
        # or arguments is asked about again, and an answer recorded without a digest counts for nothing
        approvals = local.get("approved")
        approvals = approvals if isinstance(approvals, dict) else {}
        disabled = {
            *src.disabled,
            *_strings(project_entry, "disabledMcpjsonServers"),
            *local.get("disabled", []),
        }
        enable_all = src.enable_all or project_entry.get("enableAllProjectMcpServers") is True
        for name, raw in project_servers.items():
            config = parse_server(str(name), raw, "project", str(src.root / MCP_JSON), src.environ)
            if name in disabled:
                continue
            if not src.trusted:
                setup.untrusted.append(config)
            elif name in enabled or enable_all or approvals.get(name) == config.digest:
                found[str(name)] = config
            else:
                setup.unapproved.append(config)
        add(servers_of(project_entry), "local", _claude_path(src))
        add(servers_of(local), "local", str(src.home / LOCAL_FILE))
    for entries, source in flag_entries:
        add(entries, "flag", source)
    setup.servers = _apart(list(found.values()))
    return setup


def _apart(servers: list[ServerConfig]) -> list[ServerConfig]:
    """Two servers whose names read the same in tool names ("my.srv" and "my-srv"... "my_srv") would share
    their tools' names and their rules: neither starts."""
    shown: dict[str, list[str]] = {}
    for config in servers:
        shown.setdefault(server_name(config.name), []).append(config.name)
    out = []
    for config in servers:
        same = [n for n in shown[server_name(config.name)] if n != config.name]
        if same and not config.problem:
            config = _with(
                config,
                problem=f'its tools would have the same names as server "{same[0]}"\'s (both read as '
                f'"{server_name(config.name)}"); rename one of them',
            )
        out.append(config)
    return out


def _strings(data: dict[str, Any], key: str) -> list[str]:
    value = data.get(key)
    return [str(v) for v in value] if isinstance(value, list) else []


def _read(path: Path, setup: McpSetup) -> dict[str, Any] | None:
    try:
        return read_json(path)
    except FileProblem as e:
        setup.problems.append(f"{path}: {e}; its MCP servers are not used")
        return None


def _claude_path(src: Sources) -> str:
    return str((src.user_home or Path.home()) / CLAUDE_JSON)


def _claude_json(src: Sources, setup: McpSetup) -> dict[str, Any] | None:
    if src.user_home is None:
        return None
    return _read(src.user_home / CLAUDE_JSON, setup)


def _project_entry(claude: dict[str, Any] | None, root: Path) -> dict[str, Any]:
    projects = (claude or {}).get("projects")
    entry = projects.get(str(root)) if isinstance(projects, dict) else None
    return entry if isinstance(entry, dict) else {}


def _flag_sources(src: Sources, setup: McpSetup) -> list[tuple[dict[str, Any], str]]:
    out = []
    for item in src.flag_files:
        text = item.strip()
        if text.startswith("{"):  # Claude Code accepts the JSON itself too
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                setup.problems.append(f"--mcp-config: invalid JSON ({e})")
                continue
            out.append((servers_of(data if isinstance(data, dict) else {}), "--mcp-config"))
            continue
        path = Path(text).expanduser()
        if not path.exists():
            setup.problems.append(f"--mcp-config: {path} does not exist")
            continue
        data = _read(path, setup)
        out.append((servers_of(data), str(path)))
    return out


# --- H/mcp.json: our own local scope and the approvals ----------------------------------------------


def _local_file(home: Path) -> dict[str, Any]:
    try:
        return read_json(home / LOCAL_FILE) or {}
    except FileProblem:
        return {}


def local_entry(home: Path, root: Path) -> dict[str, Any]:
    """This project's entry in H/mcp.json: ``mcpServers``, ``enabled``, ``disabled``."""
    projects = _local_file(home).get("projects")
    entry = projects.get(str(root)) if isinstance(projects, dict) else None
    return entry if isinstance(entry, dict) else {}


def config_lock(home: Path) -> Path:
    """The lock every change of an MCP configuration file is made under (``mcp add/remove`` run at the same
    time each keep their change)."""
    return Path(home) / (LOCAL_FILE + ".lock")


def update_local(home: Path, root: Path, change: Any) -> None:
    """Change this project's entry of H/mcp.json (0600) with ``change(entry)``, under the lock."""
    with locked(config_lock(home)):
        data = _local_file(home)
        projects = data.setdefault("projects", {})
        entry = projects.setdefault(str(root), {})
        change(entry)
        replace_private(home / LOCAL_FILE, json.dumps(data, indent=2) + "\n")


def record_approval(home: Path, root: Path, configs: list[ServerConfig], approved: bool) -> None:
    """The user's answer to the .mcp.json prompt, remembered for this project: an approval names each
    server with the digest of its entry as it was shown; a refusal names it."""
    names = [c.name for c in configs]

    def change(entry: dict[str, Any]) -> None:
        approvals = entry.get("approved")
        approvals = approvals if isinstance(approvals, dict) else {}
        if approved:
            approvals.update({c.name: c.digest for c in configs})
            entry["disabled"] = [n for n in entry.get("disabled", []) if n not in names]
        else:
            entry["disabled"] = sorted({*entry.get("disabled", []), *names})
            for name in names:
                approvals.pop(name, None)
        entry["approved"] = approvals
        entry.pop("enabled", None)  # names without a digest (an older record): no longer an approval

    update_local(home, root, change)
