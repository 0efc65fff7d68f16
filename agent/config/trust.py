"""Project trust (docs/files.md): whether a project's own settings files may act for the user.

Whoever wrote a repository wrote its ``.claude/settings.json`` and ``.claude/settings.local.json``. Until
the user trusts the project (the REPL's dialog, or ``--trust-project``), ``restrict`` takes out of those
files everything that could act on the user's behalf: hooks (commands run as the user), ``env`` entries,
and permission settings that widen access (``allow`` rules, a ``defaultMode`` other than
``default``/``plan``, ``additionalDirectories``). ``deny`` and ``ask`` rules only narrow access, so they
always apply. Each item taken out becomes an ``Ignored``, for the dialog, ``/trust`` and print mode's
one stderr line. User-level settings (``H/settings.json``) are never restricted.

A project's ``model``, ``alwaysThinkingEnabled``, ``maxThinkingTokens`` and ``effortLevel`` (what the user
pays for) need trust too. ``ANTHROPIC_*`` entries of a
project's ``env`` (credentials, the base URL the API key is sent to, the model) need more than trust: each key must have been confirmed by name, with its value, in the REPL's
dialog; a repository that later changes the value is asked about again.

The record, ``H/trusted-projects.json`` (0600), is keyed by the project's resolved path::

    {"projects": {"/home/u/src/app": {"trusted_at": "2026-11-24T18:00:00+00:00",
                                      "confirmed_keys": ["ANTHROPIC_BASE_URL:3f9a…"], "declined_keys": []}}}

where each key is recorded as ``NAME:`` and a short SHA-256 of its value (``confirmation``), never the value.

An unreadable or malformed record counts as "nothing trusted": failing closed.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from core.private import locked, replace_private
from core.terminal import visible

TRUST_FILE = "trusted-projects.json"
NARROW_MODES = ("default", "plan")
# need trust: they decide the bill
COST_KEYS = ("model", "alwaysThinkingEnabled", "maxThinkingTokens", "effortLevel")
CREDENTIAL_PREFIX = "ANTHROPIC_"
MCP_KEYS = ("mcpServers", "enabledMcpjsonServers", "enableAllProjectMcpServers")
# where memory is written and read is the user's choice until the project is trusted (Claude Code's rule)
MEMORY_KEYS = ("autoMemoryDirectory",)
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)


@dataclass(frozen=True)
class Ignored:
    """One thing a project settings file asked for and did not get."""

    kind: str  # "hook" | "env" | "permission" | "model" | "credential" | "agent" | "mcp" | "memory"
    what: str  # shown to the user, e.g. 'SessionStart hook: touch /tmp/x'
    source: str  # the settings file
    key: str = ""  # the env key, for "env" and "credential"
    confirm: str = ""  # for "credential": what the trust record holds once the user confirms it


@dataclass(frozen=True)
class Trust:
    trusted: bool
    since: str = ""
    confirmed_keys: frozenset[str] = frozenset()  # confirmation() of each key with its value
    declined_keys: frozenset[str] = frozenset()
    # fingerprint() of the acting settings the user trusted ("" in a record older than issue 30), and
    # whether they changed since: then the project counts as untrusted until the user trusts it again
    approved: str = ""
    changed: bool = False

    def key_names(self) -> list[str]:
        return sorted({k.partition(":")[0] for k in self.confirmed_keys})


def confirmation(name: str, value: str) -> str:
    """How a confirmed (or declined) ANTHROPIC_* key is recorded: its name and a digest of its value."""
    return f"{name}:{hashlib.sha256(value.encode('utf-8')).hexdigest()[:16]}"


def trust_file(home: Path) -> Path:
    return Path(home) / TRUST_FILE


def _key(project: Path) -> str:
    return str(Path(project).resolve())


def _read(home: Path) -> dict[str, Any]:
    try:
        data = json.loads(trust_file(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    projects = data.get("projects") if isinstance(data, dict) else None
    return projects if isinstance(projects, dict) else {}


def load(home: Path, project: Path) -> Trust:
    entry = _read(home).get(_key(project))
    if not isinstance(entry, dict):
        return Trust(False)

    def keys(name: str) -> frozenset[str]:
        value = entry.get(name)
        return frozenset(k for k in value if isinstance(k, str)) if isinstance(value, list) else frozenset()

    approved = entry.get("approved")
    return Trust(
        True,
        str(entry.get("trusted_at", "")),
        keys("confirmed_keys"),
        keys("declined_keys"),
        approved if isinstance(approved, str) else "",
    )


def fingerprint(files: list[tuple[dict[str, Any], str]], mcp_json: str = "") -> str:
    """A digest of what a project's settings files would do on the user's behalf once trusted (hooks, env,
    widened permissions, model, MCP servers): trusting a project trusts these, not whatever they become.
    ``mcp_json``: the project's .mcp.json when its settings enable its servers (their commands count)."""
    acting: list[Any] = sorted(
        (i.kind, i.what, i.source)
        for raw, source in files
        for i in restrict(raw, source, Trust(False))[1]
        if i.kind != "credential"  # confirmed one by one, by value, already
    )
    if mcp_json:
        acting.append(("mcp.json", hashlib.sha256(mcp_json.encode("utf-8")).hexdigest()))
    return hashlib.sha256(json.dumps(acting).encode("utf-8")).hexdigest()[:32]


def grant(
    home: Path,
    project: Path,
    confirmed: tuple[str, ...] = (),
    declined: tuple[str, ...] = (),
    approved: str = "",
) -> None:
    """Record the project as trusted; ``confirmed``/``declined`` ANTHROPIC_* keys (``confirmation`` of
    each) replace earlier answers about the same names. Under the store's lock: runs at the same time
    each keep their record."""
    with locked(_lock_file(home)):
        _grant(home, project, confirmed, declined, approved)


def _grant(
    home: Path, project: Path, confirmed: tuple[str, ...], declined: tuple[str, ...], approved: str = ""
) -> None:
    projects = _read(home)
    entry = projects.get(_key(project))
    entry = dict(entry) if isinstance(entry, dict) else {"trusted_at": datetime.now(timezone.utc).isoformat()}
    answered = {k.partition(":")[0] for k in confirmed + declined}
    for name, keys in (("confirmed_keys", confirmed), ("declined_keys", declined)):
        old = [k for k in entry.get(name) or [] if isinstance(k, str) and k.partition(":")[0] not in answered]
        entry[name] = sorted(set(old) | set(keys))
    if approved:
        entry["approved"] = approved
    projects[_key(project)] = entry
    _write(home, projects)


def revoke(home: Path, project: Path) -> bool:
    """Forget the project's trust; False when it was not trusted."""
    with locked(_lock_file(home)):
        projects = _read(home)
        if projects.pop(_key(project), None) is None:
            return False
        _write(home, projects)
        return True


def _lock_file(home: Path) -> Path:
    return Path(home) / (TRUST_FILE + ".lock")


def _write(home: Path, projects: dict[str, Any]) -> None:
    # whole or not at all: a reader without the lock (a starting session) never sees half a file
    replace_private(trust_file(home), json.dumps({"projects": projects}, indent=2, sort_keys=True) + "\n")


# ---- what an untrusted project file may not set ----------------------------------------------------


def restrict(data: dict[str, Any], source: str, trust: Trust) -> tuple[dict[str, Any], list[Ignored]]:
    """A validated project settings file without what ``trust`` does not allow, and what was taken out."""
    out = dict(data)
    ignored = _restrict_env(out, source, trust)
    if trust.trusted and not trust.approved:
        # a record without the digest of what was trusted (older than issue 30, or written by hand) can't
        # say the repository's MCP servers were part of it: no digest, no trust for the servers it enables
        ignored += _take_mcp(out, source, " (trusted without a digest)")
    if trust.trusted:
        return out, ignored
    for key in COST_KEYS:  # what the user pays for is never chosen silently by a repository
        if key in out:
            ignored.append(Ignored("model", f"{key} {_one_line(str(out.pop(key)))}", source, key))
    ignored += _take_commands(out, source)
    perms = dict(out.get("permissions") or {})
    ignored += _take_widening(perms, source)
    ignored += _take_mcp(
        out, source, ""
    )  # a repository does not choose which programs start or where data goes
    for name in MEMORY_KEYS:
        if name in out:
            ignored.append(Ignored("memory", f"{name} {_one_line(str(out.pop(name)))}", source, name))
    for directory in perms.pop("additionalDirectories", []):
        ignored.append(Ignored("permission", f"additional directory {_one_line(str(directory))}", source))
    if "permissions" in out:
        out["permissions"] = perms
    return out, ignored


def _restrict_env(out: dict[str, Any], source: str, trust: Trust) -> list[Ignored]:
    """The ``env`` entries ``trust`` does not allow taken out: all of them until the project is trusted,
    credentials until each is confirmed."""
    ignored: list[Ignored] = []
    env = dict(out.get("env") or {})
    for name, value in list(env.items()):
        credential = name.startswith(CREDENTIAL_PREFIX)
        token = confirmation(name, value) if credential else ""
        if trust.trusted and (not credential or token in trust.confirmed_keys):
            continue
        del env[name]
        kind = "credential" if credential else "env"
        ignored.append(Ignored(kind, f"env {name}={_show_value(name, value)}", source, name, token))
    if "env" in out:
        out["env"] = env
    return ignored


def _take_mcp(out: dict[str, Any], source: str, why: str) -> list[Ignored]:
    """The keys that enable the repository's MCP servers, taken out."""
    ignored: list[Ignored] = []
    for name in MCP_KEYS:
        if name in out:
            value = out.pop(name)
            shown = ", ".join(value) if isinstance(value, (dict, list)) else str(value)
            ignored.append(Ignored("mcp", f"{name} {_one_line(shown)}{why}", source, name))
    return ignored


def _take_commands(out: dict[str, Any], source: str) -> list[Ignored]:
    """Hooks and the status line (commands run as the user), taken out."""
    ignored: list[Ignored] = []
    for event, groups in (out.pop("hooks", None) or {}).items():
        for hook in (hook for group in groups for hook in group.get("hooks") or []):
            command = hook.get("command") if hook.get("type") == "command" else hook.get("type")
            ignored.append(Ignored("hook", f"{event} hook: {_one_line(str(command))}", source))
    if "statusLine" in out:  # a command run as the user, like a hook
        line = out.pop("statusLine")
        ignored.append(Ignored("hook", f"status line command: {_one_line(str(line.get('command')))}", source))
    return ignored


def _take_widening(perms: dict[str, Any], source: str) -> list[Ignored]:
    """Allow rules and a mode wider than asking, taken out of a ``permissions`` object."""
    ignored = [
        Ignored("permission", f"allow rule {_one_line(str(rule))}", source) for rule in perms.pop("allow", [])
    ]
    if perms.get("defaultMode", "default") not in NARROW_MODES:
        ignored.append(
            Ignored("permission", f"defaultMode {_one_line(str(perms.pop('defaultMode')))}", source)
        )
    return ignored


def _show_value(name: str, value: str) -> str:
    if _SECRET_NAME.search(name):
        return "(hidden)"
    value = _one_line(value)
    return value if len(value) <= 80 else value[:79] + "…"


def _one_line(text: str) -> str:
    """Newlines and control characters escaped (core.terminal): what is shown is what would run, on one line."""
    return visible(text, one_line=True)


# ---- telling the user ------------------------------------------------------------------------------


def print_mode_line(ignored: list[Ignored], trusted: bool) -> str:
    """Print mode's one stderr line about what it ignored ("" when nothing was)."""
    if not ignored:
        return ""
    items = "; ".join(i.what for i in ignored)
    if trusted:
        return (
            f"compact-agent: project trusted, but these settings of its files were not applied because "
            f"each ANTHROPIC_* key needs confirming in the REPL's trust dialog (or set it in the "
            f"environment yourself): {items}"
        )
    return (
        f"compact-agent: this project is not trusted, so its settings files' hooks, env and widened "
        f"permissions and model, and its agents, were ignored: {items}. Pass --trust-project to trust it (recorded); "
        f"ANTHROPIC_* keys also need confirming in the REPL"
    )


def dialog_lines(ignored: list[Ignored]) -> list[str]:
    """What the REPL's trust dialog lists: what the project's settings would do, by kind."""
    titles = {
        "hook": "Run these commands (hooks):",
        "env": "Set these environment variables:",
        "permission": "Widen permissions:",
        "model": "Choose the model or thinking budget (what you pay for):",
        "agent": "Offer these subagents (their prompts act with your permissions):",
        "mcp": "Configure MCP servers (programs to start, places to connect to):",
        "memory": "Choose where the agent's memory is kept:",
    }
    lines = []
    for kind, title in titles.items():
        items = [i for i in ignored if i.kind == kind]
        if items:
            lines.append(f"  {title}")
            lines += [f"    - {i.what}  ({Path(i.source).name})" for i in items]
    return lines
