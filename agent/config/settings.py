"""Settings, built once at the CLI boundary and passed down; nothing below reads ``os.environ``.

Precedence, lowest to highest: defaults < ~/.claude/settings.json < $COMPACT_AGENT_HOME/settings.json <
.claude/settings.json < .claude/settings.local.json < environment (the process's, overlaid on the files'
"env" maps) < command line. The two user files are the user's own: trusted, and a malformed one stops the
agent. The two project files are those of the project root (agent.config.project: found upwards from the working
directory); a malformed one is skipped with a warning (``Settings.warnings``), and both pass through
``agent.config.trust.restrict`` first: until the project is trusted their hooks, env entries, widening permission
settings and model are left out and listed in ``Settings.ignored``. Every file is read only if it is a
regular file of reasonable size (agent.config.project.read_small).

``load_settings`` is the one place that merges them. Across files, permission lists and
``additionalDirectories`` are concatenated (duplicates dropped), hook groups are concatenated per event,
and every other key is replaced by the later file. Unknown keys are ignored so newer files still load;
a known key with a wrong type is a ``SettingsError`` whose message names the file and the key.

Settings-file keys beyond Claude Code's (each mirrors an environment variable of CONTRACT §3)::

    autoCompactEnabled  bool                       (DISABLE_AUTO_COMPACT)
    disableCompact      bool                       (DISABLE_COMPACT)
    compaction          {autoCompactPct, contextWindow, blockingLimit, model, maxOutputTokens}
    sessionMemory       bool                       (COMPACT_AGENT_SESSION_MEMORY)
    prepareCompaction   bool                       (COMPACT_AGENT_PREPARE_COMPACTION)
    microcompact        bool | {enabled, gapMinutes, keepRecent}   (COMPACT_AGENT_MICROCOMPACT)
    contextCollapse     bool                       (CLAUDE_CONTEXT_COLLAPSE)
    contextEditing      bool | {enabled, keepToolUses, triggerTokens, clearAtLeastTokens, clearThinking}
    noColor             bool                       (NO_COLOR)
    alwaysThinkingEnabled bool                     (Claude Code's key: extended thinking on every turn)
    maxThinkingTokens   int >= 1024                (MAX_THINKING_TOKENS)
    retry               {maxSeconds}               (COMPACT_AGENT_RETRY_SECONDS)
"""

from __future__ import annotations

import json
import math
import os
import pwd
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent.config import trust as trust_store
from agent.config.agent_types import withheld_agents
from agent.config.project import SETTINGS_CAP, FileProblem, project_root, read_small
from agent.config.trust import Ignored, Trust
from compact.config import CompactConfig
from compact.thresholds import smallest_window
from core.errors import SettingsError
from core.private import make_private_dirs

DEFAULT_MODEL = "claude-sonnet-4-5"
MIN_THINKING = 1024  # the API's smallest thinking budget
PERMISSION_MODES = ("default", "acceptEdits", "bypassPermissions", "plan")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_RULE = re.compile(r"^[A-Za-z_][\w.-]*(\(.*\))?$", re.DOTALL)


@dataclass
class Settings:
    cwd: Path
    home: Path  # COMPACT_AGENT_HOME
    model: str = DEFAULT_MODEL
    model_explicit: bool = False  # chosen by flag/env/settings rather than the default
    permission_mode: str = "default"  # default | acceptEdits | bypassPermissions | plan
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    hooks: dict[str, Any] = field(default_factory=dict)
    # API access (never written anywhere, never shown)
    api_key: str | None = field(default=None, repr=False)
    auth_token: str | None = field(default=None, repr=False)
    base_url: str | None = None
    # compaction: compact.config declares the fields and their defaults; parsed into one CompactConfig
    compaction: CompactConfig = field(default_factory=CompactConfig)
    no_color: bool = False
    # extended thinking: MAX_THINKING_TOKENS / maxThinkingTokens (a budget, on every turn), or
    # alwaysThinkingEnabled (the default budget on every turn); else only when a prompt asks ("think hard")
    max_thinking_tokens: int | None = None
    always_thinking: bool = False
    # how long to keep retrying an overloaded / failing / unreachable API before giving up
    retry_seconds: float = 120.0
    # where each value came from, for /config-like displays and error messages
    sources: dict[str, str] = field(default_factory=dict)
    # the user's home directory (for "~/" in permission rules); from $HOME
    user_home: Path | None = None
    # permissions.additionalDirectories, resolved to absolute paths: treated like the project for reads/edits
    additional_dirs: list[Path] = field(default_factory=list)
    # the real environment overlaid on the files' "env" maps; what subprocesses (Bash, hooks) should get
    environ: dict[str, str] = field(default_factory=dict, repr=False)
    # project trust (agent/config/trust.py): the record, and what the project files asked for and did not get
    trust: Trust = field(default_factory=lambda: Trust(False))
    ignored: list[Ignored] = field(default_factory=list)
    # the project's root (agent.config.project): where its .claude/ and the top CLAUDE.md are; trust is keyed on it
    project_root: Path | None = None
    # problems with project settings files that were skipped, shown once (print mode: stderr)
    warnings: list[str] = field(default_factory=list)
    # the command-line values these settings were built from, so they can be rebuilt (reload_settings)
    cli: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def root(self) -> Path:
        """The project root (the working directory when there is no marker above it)."""
        return self.project_root or self.cwd

    @property
    def project_key(self) -> str:
        return "".join(c if c.isalnum() else "-" for c in str(self.cwd))

    @property
    def project_dir(self) -> Path:
        """P in CONTRACT §4: where this directory's sessions live."""
        return self.home / "projects" / self.project_key


def truthy(value: object) -> bool:
    """True for 1/true/yes/on (any case, surrounding blanks ignored) and for ``True``; False otherwise."""
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.strip().lower() in _TRUE


def falsy(value: object) -> bool:
    """True for 0/false/no/off/"" (any case) and for ``False``."""
    if isinstance(value, bool):
        return not value
    return isinstance(value, str) and value.strip().lower() in _FALSE


def load_settings(*, cwd: Path, environ: Mapping[str, str], cli: dict[str, Any]) -> Settings:
    """Merge defaults, the three settings files, the environment and the command line into one Settings."""
    cwd = Path(cwd) if Path(cwd).is_absolute() else Path(cwd).absolute()
    user_home = Path(environ["HOME"]) if environ.get("HOME") else Path(pwd.getpwuid(os.getuid()).pw_dir)
    home = _agent_home(environ, cwd, user_home)
    s = Settings(cwd=cwd, home=home, user_home=user_home)
    s.sources["home"] = "env COMPACT_AGENT_HOME" if environ.get("COMPACT_AGENT_HOME") else "default"

    root = s.project_root = project_root(cwd, user_home)
    if cli.get("trust_project"):
        _make_home(home)  # the trust record lives there: a home that can't be made says so first
        trust_store.grant(home, root)
    s.trust, s.cli = trust_store.load(home, root), dict(cli)

    layer: dict[str, Any] = {}
    user_files = _dedupe_paths([user_home / ".claude" / "settings.json", home / "settings.json"])
    for path in user_files:  # the user's own: trusted, and a broken one stops the agent
        _merge_layer(layer, _read_file(path), str(path))
    for path in (root / ".claude" / "settings.json", root / ".claude" / "settings.local.json"):
        if path in user_files:  # started in the home directory: ~/.claude is the user's, read above
            continue
        try:
            raw = _read_file(path)
        except SettingsError as e:  # a project's file is not the user's to fix: warn and go on
            s.warnings.append(f"{e}; going on without this file")
            continue
        data, ignored = trust_store.restrict(raw, str(path), s.trust)
        s.ignored += ignored
        _merge_layer(layer, data, str(path))
    if not s.trust.trusted and root not in (user_home, home):  # its agents act with the user's permissions
        s.ignored += withheld_agents(root)

    env: dict[str, str] = dict(layer.get("env", {}))
    env_sources = {name: f'{layer["sources"]["env." + name]} "env"' for name in env}
    env.update(environ)
    env_sources.update({name: "environment" for name in environ})
    s.environ = env

    _apply_files(s, layer)
    _apply_env(s, env, env_sources)
    _apply_cli(s, cli)
    _apply_retry(s, layer, env, env_sources)
    check_limits(s)
    return s


def reload_settings(s: Settings, environ: Mapping[str, str]) -> Settings:
    """The same settings built again (after the project's trust changed)."""
    return load_settings(cwd=s.cwd, environ=environ, cli={**s.cli, "trust_project": False})


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


def _read_file(path: Path) -> dict[str, Any]:
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
    return _validate(data, _Where(str(path)))


class _Where:
    """Builds error messages that name the file and the dotted key."""

    def __init__(self, file: str) -> None:
        self.file = file

    def error(self, key: str, expected: str, value: Any) -> SettingsError:
        return SettingsError(f'{self.file}: "{key}" must be {expected} (got {_show(value)})')


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check(where: _Where, key: str, value: Any, ok: Callable[[Any], bool], expected: str) -> Any:
    if not ok(value):
        raise where.error(key, expected, value)
    return value


def _bool(where: _Where, key: str, value: Any) -> bool:
    return _check(where, key, value, lambda v: isinstance(v, bool), "true or false")


def _pos_int(where: _Where, key: str, value: Any) -> int:
    return _check(where, key, value, lambda v: _is_int(v) and v > 0, "a positive integer")


def _nonneg_int(where: _Where, key: str, value: Any) -> int:
    return _check(where, key, value, lambda v: _is_int(v) and v >= 0, "an integer >= 0")


def _string(where: _Where, key: str, value: Any) -> str:
    return _check(where, key, value, lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string")


def _object(where: _Where, key: str, value: Any) -> dict[str, Any]:
    return _check(where, key, value, lambda v: isinstance(v, dict), "an object")


def _rules(where: _Where, key: str, value: Any) -> list[str]:
    _check(where, key, value, lambda v: isinstance(v, list), "an array of rule strings")
    for i, rule in enumerate(value):
        _check(
            where,
            f"{key}[{i}]",
            rule,
            lambda v: isinstance(v, str) and bool(_RULE.match(v.strip())),
            'a rule like "Read", "Bash(git status:*)" or "Edit(src/**)"',
        )
    return [rule.strip() for rule in value]


def _validate(data: dict[str, Any], where: _Where) -> dict[str, Any]:
    """Check the types of every known key; return only the known keys, in a normalised shape."""
    out: dict[str, Any] = {}
    if "permissions" in data:
        perms = _object(where, "permissions", data["permissions"])
        checked: dict[str, Any] = {}
        for name in ("allow", "deny", "ask"):
            if name in perms:
                checked[name] = _rules(where, f"permissions.{name}", perms[name])
        if "defaultMode" in perms:
            checked["defaultMode"] = _check(
                where,
                "permissions.defaultMode",
                perms["defaultMode"],
                lambda v: v in PERMISSION_MODES,
                "one of " + ", ".join(PERMISSION_MODES),
            )
        if "additionalDirectories" in perms:
            dirs = perms["additionalDirectories"]
            _check(
                where,
                "permissions.additionalDirectories",
                dirs,
                lambda v: isinstance(v, list) and all(isinstance(d, str) and d for d in v),
                "an array of directory paths",
            )
            checked["additionalDirectories"] = list(dirs)
        out["permissions"] = checked
    if "hooks" in data:
        out["hooks"] = _validate_hooks(where, data["hooks"])
    if "model" in data:
        out["model"] = _string(where, "model", data["model"])
    if "env" in data:
        env = _object(where, "env", data["env"])
        for name, value in env.items():
            _check(where, f"env.{name}", value, lambda v: isinstance(v, str) or _is_number(v), "a string")
        out["env"] = {name: value if isinstance(value, str) else str(value) for name, value in env.items()}
    if "maxThinkingTokens" in data:
        out["maxThinkingTokens"] = _check(
            where,
            "maxThinkingTokens",
            data["maxThinkingTokens"],
            lambda v: _is_int(v) and v >= MIN_THINKING,
            f"an integer >= {MIN_THINKING}",
        )
    for name in (
        "autoCompactEnabled",
        "disableCompact",
        "sessionMemory",
        "prepareCompaction",
        "contextCollapse",
        "noColor",
        "alwaysThinkingEnabled",
    ):
        if name in data:
            out[name] = _bool(where, name, data[name])
    if "compaction" in data:
        out["compaction"] = _validate_compaction(where, _object(where, "compaction", data["compaction"]))
    if "microcompact" in data:
        out["microcompact"] = _validate_microcompact(where, data["microcompact"])
    if "contextEditing" in data:
        out["contextEditing"] = _validate_context_editing(where, data["contextEditing"])
    if "retry" in data:
        out["retry"] = _validate_retry(where, data["retry"])
    return out


def _validate_hooks(where: _Where, hooks: Any) -> dict[str, list[dict[str, Any]]]:
    _object(where, "hooks", hooks)
    out: dict[str, list[dict[str, Any]]] = {}
    for event, groups in hooks.items():
        key = f"hooks.{event}"
        _check(where, key, groups, lambda v: isinstance(v, list), "an array of matcher groups")
        for i, group in enumerate(groups):
            gkey = f"{key}[{i}]"
            _object(where, gkey, group)
            if "matcher" in group:
                _check(where, f"{gkey}.matcher", group["matcher"], lambda v: isinstance(v, str), "a string")
            entries = group.get("hooks", [])
            _check(where, f"{gkey}.hooks", entries, lambda v: isinstance(v, list), "an array of hooks")
            for j, hook in enumerate(entries):
                hkey = f"{gkey}.hooks[{j}]"
                _object(where, hkey, hook)
                kind = _string(where, f"{hkey}.type", hook.get("type"))
                if kind == "command":
                    _string(where, f"{hkey}.command", hook.get("command"))
                if "timeout" in hook:
                    _check(
                        where,
                        f"{hkey}.timeout",
                        hook["timeout"],
                        lambda v: _is_number(v) and v > 0,
                        "a positive number of seconds",
                    )
        out[event] = list(groups)
    return out


def _validate_compaction(where: _Where, comp: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "autoCompactPct" in comp:
        out["autoCompactPct"] = float(
            _check(
                where,
                "compaction.autoCompactPct",
                comp["autoCompactPct"],
                lambda v: _is_number(v) and 0 < v <= 100,
                "a number in (0, 100]",
            )
        )
    for name in ("contextWindow", "blockingLimit", "maxOutputTokens"):
        if name in comp:
            out[name] = _pos_int(where, f"compaction.{name}", comp[name])
    if "model" in comp:
        out["model"] = _string(where, "compaction.model", comp["model"])
    return out


def _validate_microcompact(where: _Where, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"enabled": value}
    _check(where, "microcompact", value, lambda v: isinstance(v, dict), "true, false or an object")
    out: dict[str, Any] = {}
    if "enabled" in value:
        out["enabled"] = _bool(where, "microcompact.enabled", value["enabled"])
    if "gapMinutes" in value:
        out["gapMinutes"] = float(
            _check(
                where,
                "microcompact.gapMinutes",
                value["gapMinutes"],
                lambda v: _is_number(v) and v > 0,
                "a positive number of minutes",
            )
        )
    if "keepRecent" in value:
        out["keepRecent"] = _nonneg_int(where, "microcompact.keepRecent", value["keepRecent"])
    return out


def _validate_context_editing(where: _Where, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"enabled": value}
    _check(where, "contextEditing", value, lambda v: isinstance(v, dict), "true, false or an object")
    out: dict[str, Any] = {}
    for name in ("enabled", "clearThinking"):
        if name in value:
            out[name] = _bool(where, f"contextEditing.{name}", value[name])
    if "keepToolUses" in value:
        out["keepToolUses"] = _nonneg_int(where, "contextEditing.keepToolUses", value["keepToolUses"])
    if "clearAtLeastTokens" in value:
        out["clearAtLeastTokens"] = _nonneg_int(
            where, "contextEditing.clearAtLeastTokens", value["clearAtLeastTokens"]
        )
    if "triggerTokens" in value:
        out["triggerTokens"] = _pos_int(where, "contextEditing.triggerTokens", value["triggerTokens"])
    return out


def _merge_layer(layer: dict[str, Any], data: dict[str, Any], source: str) -> None:
    """Fold one validated file into the running merge; ``layer["sources"]`` records who set what."""
    sources = layer.setdefault("sources", {})
    for key, value in data.items():
        if key == "permissions":
            perms = layer.setdefault("permissions", {})
            for name, item in value.items():
                if isinstance(item, list):
                    perms[name] = _dedupe(perms.get(name, []) + item)
                else:
                    perms[name] = item
                sources[f"permissions.{name}"] = source
        elif key == "hooks":
            hooks = layer.setdefault("hooks", {})
            for event, groups in value.items():
                hooks[event] = hooks.get(event, []) + groups
        elif key in ("env", "compaction", "microcompact", "contextEditing"):
            # object-valued keys merge one level deep: a later file changes only the sub-keys it names
            merged = layer.setdefault(key, {})
            for name, item in value.items():
                merged[name] = item
                sources[f"{key}.{name}"] = source
        else:
            layer[key] = value
            sources[key] = source


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _apply_files(s: Settings, layer: dict[str, Any]) -> None:
    src = layer.get("sources", {})
    perms = layer.get("permissions", {})
    s.allow, s.deny, s.ask = perms.get("allow", []), perms.get("deny", []), perms.get("ask", [])
    if "defaultMode" in perms:
        s.permission_mode = perms["defaultMode"]
        s.sources["permission_mode"] = src["permissions.defaultMode"]
    s.additional_dirs = [_expand_dir(d, s) for d in perms.get("additionalDirectories", [])]
    s.hooks = layer.get("hooks", {})
    if "model" in layer:
        s.model, s.model_explicit, s.sources["model"] = layer["model"], True, src["model"]

    simple = {
        "noColor": "no_color",
        "alwaysThinkingEnabled": "always_thinking",
        "maxThinkingTokens": "max_thinking_tokens",
    }
    for key, attr in simple.items():
        if key in layer:
            setattr(s, attr, layer[key])
            s.sources[attr] = src[key]
    compaction = {
        "autoCompactEnabled": "auto_compact",
        "disableCompact": "disable_compact",
        "sessionMemory": "session_memory",
        "prepareCompaction": "prepare_compaction",
        "contextCollapse": "context_collapse",
    }
    for key, attr in compaction.items():
        if key in layer:
            _compact(s, attr, layer[key], src[key])

    comp_fields = {
        "autoCompactPct": "autocompact_pct",
        "contextWindow": "context_window",
        "blockingLimit": "blocking_limit",
        "maxOutputTokens": "max_output_tokens",
        "model": "compaction_model",
    }
    for key, attr in comp_fields.items():
        if key in layer.get("compaction", {}):
            _compact(s, attr, layer["compaction"][key], src[f"compaction.{key}"])

    micro, c = layer.get("microcompact", {}), s.compaction
    s.compaction = replace(
        c,
        microcompact=micro.get("enabled", c.microcompact),
        gap_minutes=micro.get("gapMinutes", c.gap_minutes),
        keep_recent=micro.get("keepRecent", c.keep_recent),
    )

    editing = layer.get("contextEditing", {})
    if editing.get("enabled", bool(editing)):  # an object turns it on unless it says "enabled": false
        params = {
            "triggerTokens": editing.get("triggerTokens"),
            "keepToolUses": editing.get("keepToolUses"),
            "clearAtLeastTokens": editing.get("clearAtLeastTokens"),
            "clearThinking": editing.get("clearThinking"),  # None: the default (on, when thinking)
        }
        _compact(s, "context_editing", params, src.get("contextEditing.enabled", "settings"))


def _compact(s: Settings, attr: str, value: Any, source: str) -> None:
    """Set one compaction setting and say where it came from (the config is frozen: a changed copy)."""
    s.compaction = replace(s.compaction, **{attr: value})
    s.sources[attr] = source


def _expand_dir(raw: str, s: Settings) -> Path:
    if (raw == "~" or raw.startswith("~/")) and s.user_home is not None:
        return s.user_home / raw[2:]
    path = Path(raw)
    return path if path.is_absolute() else s.cwd / path


def _validate_retry(where: _Where, value: Any) -> dict[str, Any]:
    _object(where, "retry", value)
    if "maxSeconds" not in value:
        return {}
    return {
        "maxSeconds": float(
            _check(
                where,
                "retry.maxSeconds",
                value["maxSeconds"],
                lambda v: _is_number(v) and v >= 0,
                "a number of seconds >= 0",
            )
        )
    }


# ---- environment -------------------------------------------------------------------------------


def _apply_env(s: Settings, env: Mapping[str, str], origin: Mapping[str, str]) -> None:
    def get(name: str) -> str | None:
        value = env.get(name)
        return value if value not in (None, "") else None

    def bad(name: str, expected: str) -> SettingsError:
        where = "" if origin.get(name) == "environment" else f" (set in {origin[name]})"
        return SettingsError(f"{name}: expected {expected}, got {_show(env[name])}{where}")

    def positive_int(name: str) -> int | None:
        raw = get(name)
        if raw is None:
            return None
        try:
            value = int(raw.strip())
        except ValueError:
            raise bad(name, "a positive integer") from None
        if value <= 0:
            raise bad(name, "a positive integer")
        return value

    def mark(attr: str, name: str) -> None:
        s.sources[attr] = f"env {name}"

    s.api_key, s.auth_token, s.base_url = (
        get("ANTHROPIC_API_KEY"),
        get("ANTHROPIC_AUTH_TOKEN"),
        get("ANTHROPIC_BASE_URL"),
    )
    if (model := get("ANTHROPIC_MODEL")) is not None:
        s.model, s.model_explicit = model.strip(), True
        mark("model", "ANTHROPIC_MODEL")
    if truthy(env.get("DISABLE_COMPACT")):
        _compact(s, "disable_compact", True, "env DISABLE_COMPACT")
    if truthy(env.get("DISABLE_AUTO_COMPACT")):
        _compact(s, "auto_compact", False, "env DISABLE_AUTO_COMPACT")

    if (raw := get("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE")) is not None:
        try:
            pct = float(raw.strip())
        except ValueError:
            pct = math.nan
        if not (math.isfinite(pct) and 0 < pct <= 100):
            raise bad("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "a number in (0, 100]")
        _compact(s, "autocompact_pct", pct, "env CLAUDE_AUTOCOMPACT_PCT_OVERRIDE")
    for name, attr in (
        ("CLAUDE_CODE_AUTO_COMPACT_WINDOW", "context_window"),
        ("CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE", "blocking_limit"),
        ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "max_output_tokens"),
    ):
        if (value := positive_int(name)) is not None:
            _compact(s, attr, value, f"env {name}")

    # "0" (or another falsy word) turns these off, a truthy word turns them back on over a settings file
    for name, attr in (
        ("COMPACT_AGENT_SESSION_MEMORY", "session_memory"),
        ("COMPACT_AGENT_PREPARE_COMPACTION", "prepare_compaction"),
        ("COMPACT_AGENT_MICROCOMPACT", "microcompact"),
        ("CLAUDE_CONTEXT_COLLAPSE", "context_collapse"),
    ):
        raw = get(name)
        if raw is not None and (truthy(raw) or falsy(raw)):
            _compact(s, attr, truthy(raw), f"env {name}")
    if (raw := get("MAX_THINKING_TOKENS")) is not None:
        try:
            budget = int(raw.strip())
        except ValueError:
            raise bad("MAX_THINKING_TOKENS", f"an integer >= {MIN_THINKING}, or 0 for no thinking") from None
        if budget != 0 and budget < MIN_THINKING:
            raise bad("MAX_THINKING_TOKENS", f"an integer >= {MIN_THINKING}, or 0 for no thinking")
        s.max_thinking_tokens = budget or None
        if budget == 0:
            s.always_thinking = False
        mark("max_thinking_tokens", "MAX_THINKING_TOKENS")
    if get("NO_COLOR") is not None:
        s.no_color = True
        mark("no_color", "NO_COLOR")


def _apply_retry(
    s: Settings, layer: Mapping[str, Any], env: Mapping[str, str], origin: Mapping[str, str]
) -> None:
    """retry.maxSeconds, overridden by COMPACT_AGENT_RETRY_SECONDS (0 = no retries)."""
    if "maxSeconds" in layer.get("retry", {}):
        s.retry_seconds, s.sources["retry_seconds"] = layer["retry"]["maxSeconds"], layer["sources"]["retry"]
    raw = (env.get("COMPACT_AGENT_RETRY_SECONDS") or "").strip()
    if not raw:
        return
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        where = (
            ""
            if origin.get("COMPACT_AGENT_RETRY_SECONDS") == "environment"
            else f" (set in {origin.get('COMPACT_AGENT_RETRY_SECONDS')})"
        )
        raise SettingsError(
            f"COMPACT_AGENT_RETRY_SECONDS: expected a number of seconds >= 0, got {_show(raw)}{where}"
        )
    s.retry_seconds, s.sources["retry_seconds"] = seconds, "env COMPACT_AGENT_RETRY_SECONDS"


def check_limits(s: Settings) -> None:
    """Refuse values that parse but can't work: a window cap that leaves no room, a base URL that is no URL."""
    smallest, cap = smallest_window(), s.compaction.context_window
    if cap is not None and cap < smallest:
        source = s.sources.get("context_window", "settings")
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
        s.model, s.model_explicit, s.sources["model"] = str(cli["model"]).strip(), True, "--model"
    mode = cli.get("permission_mode")
    if mode:
        if mode not in PERMISSION_MODES:
            raise SettingsError(
                f'--permission-mode must be one of {", ".join(PERMISSION_MODES)} (got "{mode}")'
            )
        s.permission_mode, s.sources["permission_mode"] = mode, "--permission-mode"
    if cli.get("dangerously_skip_permissions"):
        s.permission_mode, s.sources["permission_mode"] = (
            "bypassPermissions",
            "--dangerously-skip-permissions",
        )
    for key, flag, attr in (
        ("allowed_tools", "--allowedTools", "allow"),
        ("disallowed_tools", "--disallowedTools", "deny"),
    ):
        rules = [rule for item in cli.get(key) or [] for rule in split_rules(item)]
        for rule in rules:
            if not _RULE.match(rule):
                raise SettingsError(
                    f'{flag}: "{rule}" is not a rule like "Read", "Bash(git status:*)" or "Edit(src/**)"'
                )
        if rules:
            setattr(s, attr, _dedupe(getattr(s, attr) + rules))


def split_rules(text: str) -> list[str]:
    """Split a flag value like ``"Bash(git log:*) Edit,Read"`` into rules (commas/blanks inside () kept)."""
    rules: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        if depth == 0 and (ch == "," or ch.isspace()):
            if current:
                rules.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        rules.append("".join(current))
    return rules
