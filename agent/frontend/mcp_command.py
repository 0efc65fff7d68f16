"""``compact-agent mcp add|add-json|list|get|remove``: MCP servers configured from the shell, as ``claude mcp``.

Scopes (where ``add`` writes; ``remove`` looks in the one given, else in each): ``local`` (the default:
this project, for you only; kept in COMPACT_AGENT_HOME/mcp.json), ``project`` (the project's ``.mcp.json``,
shared through the repository) and ``user`` (every project; COMPACT_AGENT_HOME/settings.json). Claude
Code's own ``~/.claude.json`` is read, never written. ``list`` connects to each server and says whether it
answers. Errors are one line on stderr and exit status 1 (2 for bad usage).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from agent.config import mcp_servers
from agent.config.mcp_servers import MCP_JSON, read_json, update_local
from agent.config.project import FileProblem
from agent.config.settings import Settings, ensure_home, load_settings
from agent.mcp import setup as mcp_setup
from core.errors import SettingsError
from core.private import locked, replace_private
from core.terminal import visible

SCOPES = ("local", "project", "user")


def main(argv: list[str], cwd: Path | None = None, environ: dict[str, str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(options_first(argv))
    except SystemExit as e:  # argparse has printed its usage line
        return int(e.code or 0)
    try:
        s = load_settings(cwd=(cwd or Path.cwd()).resolve(), environ=environ or dict(os.environ), cli={})
        ensure_home(s)
        return int(args.run(s, args))
    except (SettingsError, FileProblem, ValueError) as e:
        _say(f"compact-agent mcp: {e}", sys.stderr)
        return 1


ADD_OPTIONS = {"-s", "--scope", "-t", "--transport", "-e", "--env", "-H", "--header"}  # each takes a value


def options_first(argv: list[str]) -> list[str]:
    """``add``'s own options wherever they stand (``add NAME CMD ARGS -e K=V``, as ``claude mcp add`` takes
    them), moved before its words; the server's arguments keep their order, and everything after ``--``
    is the server's, options or not (``add NAME -- node -e "code"``)."""
    if argv[:1] != ["add"]:
        return argv
    options: list[str] = []
    words: list[str] = []
    rest = argv[1:]
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--":
            return ["add", *options, *words[:2], "--", *words[2:], *rest[i + 1 :]]
        name = arg.split("=", 1)[0]
        if name in ADD_OPTIONS and (arg.startswith("--") and "=" in arg):
            options.append(arg)
        elif arg in ADD_OPTIONS and i + 1 < len(rest):
            options += [arg, rest[i + 1]]
            i += 1
        else:
            words.append(arg)
        i += 1
    return ["add", *options, *words[:2], *(["--", *words[2:]] if len(words) > 2 else [])]


def _say(line: str, stream: Any = None) -> None:
    """One line of output: what a repository's .mcp.json (a name, a command, an error) puts in it is shown
    through the terminal-safe printer, never as escape sequences the terminal would obey."""
    (stream or sys.stdout).write(visible(line, one_line=True) + "\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compact-agent mcp", description="Configure MCP servers.")
    sub = parser.add_subparsers(required=True, metavar="add|add-json|list|get|remove")
    add = sub.add_parser("add", help="add a server: NAME COMMAND [ARGS...] or NAME URL with -t http")
    add.add_argument("-s", "--scope", choices=SCOPES, default="local")
    add.add_argument("-t", "--transport", choices=mcp_servers.TRANSPORTS, default="stdio")
    add.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE")
    add.add_argument("-H", "--header", action="append", default=[], metavar="'Name: value'")
    add.add_argument("name")
    add.add_argument("target", metavar="command-or-url")
    add.add_argument("args", nargs=argparse.REMAINDER)
    add.set_defaults(run=_add)
    add_json = sub.add_parser("add-json", help="add a server from its JSON: NAME JSON")
    add_json.add_argument("-s", "--scope", choices=SCOPES, default="local")
    add_json.add_argument("name")
    add_json.add_argument("json")
    add_json.set_defaults(run=_add_json)
    listing = sub.add_parser("list", help="every server and whether it answers")
    listing.set_defaults(run=_list)
    get = sub.add_parser("get", help="one server's configuration")
    get.add_argument("name")
    get.set_defaults(run=_get)
    remove = sub.add_parser("remove", help="remove a server")
    remove.add_argument("-s", "--scope", choices=SCOPES)
    remove.add_argument("name")
    remove.set_defaults(run=_remove)
    return parser


def _add(s: Settings, args: argparse.Namespace) -> int:
    entry: dict[str, Any]
    if args.transport == "stdio":
        rest = [a for a in args.args if a != "--"] if args.args[:1] == ["--"] else list(args.args)
        entry = {"type": "stdio", "command": args.target, "args": rest}
        env = dict(_pair(item, "=", "--env") for item in args.env)
        if env:
            entry["env"] = env
    else:
        entry = {"type": args.transport, "url": args.target}
        headers = dict(_pair(item, ":", "--header") for item in args.header)
        if headers:
            entry["headers"] = headers
    return _write(s, args.scope, args.name, entry)


def _add_json(s: Settings, args: argparse.Namespace) -> int:
    try:
        entry = json.loads(args.json)
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid JSON ({e})") from None
    if not isinstance(entry, dict):
        raise ValueError("the server's JSON must be an object")
    return _write(s, args.scope, args.name, entry)


def _pair(item: str, sep: str, flag: str) -> tuple[str, str]:
    key, found, value = item.partition(sep)
    if not found or not key.strip():
        raise ValueError(f'{flag} "{item}": expected KEY{sep}VALUE')
    return key.strip(), value.strip()


def _write(s: Settings, scope: str, name: str, entry: dict[str, Any]) -> int:
    problem = mcp_servers.parse_server(name, entry, scope, "command line", {}).problem
    if problem and "not expanded" not in problem:  # ${VAR} is expanded when the server starts
        raise ValueError(problem)
    if scope == "local":
        update_local(s.home, s.root, lambda e: e.setdefault("mcpServers", {}).__setitem__(name, entry))
        where = f"{s.home / mcp_servers.LOCAL_FILE} (this project only)"
    else:
        path = _scope_file(s, scope)
        with locked(mcp_servers.config_lock(s.home)):
            data = read_json(path) or {}
            data.setdefault("mcpServers", {})[name] = entry
            _save(path, data, private=scope == "user")
        where = str(path)
    _say(f'Added MCP server "{name}" ({scope} scope) to {where}')
    return 0


def _scope_file(s: Settings, scope: str) -> Path:
    if scope != "project":
        return s.home / "settings.json"
    path = s.root / MCP_JSON
    # a repository's .mcp.json linked to a file elsewhere (~/.bashrc, another project's settings) is never
    # written through: only a file inside the project is the project's
    if path.is_symlink() and not path.resolve().is_relative_to(s.root.resolve()):
        raise ValueError(f"{path} is a link to {path.resolve()}, outside the project; not written through it")
    return path


def _save(path: Path, data: dict[str, Any], *, private: bool) -> None:
    text = json.dumps(data, indent=2) + "\n"
    if private:
        replace_private(path, text)
        return
    # a project's .mcp.json is shared through the repository: the usual mode for a tracked file, written
    # whole (a temporary file renamed over it: a link in its place is replaced, not followed)
    target = path.resolve() if path.is_symlink() else path
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _remove(s: Settings, args: argparse.Namespace) -> int:
    for scope in [args.scope] if args.scope else list(SCOPES):
        if scope == "local":
            entry = mcp_servers.local_entry(s.home, s.root)
            if args.name in (entry.get("mcpServers") or {}):
                update_local(s.home, s.root, lambda e: e.get("mcpServers", {}).pop(args.name, None))
                _say(f'Removed MCP server "{args.name}" (local scope)')
                return 0
            continue
        path = _scope_file(s, scope)
        with locked(mcp_servers.config_lock(s.home)):
            data = read_json(path) or {}
            found = args.name in (data.get("mcpServers") or {})
            if found:
                del data["mcpServers"][args.name]
                _save(path, data, private=scope == "user")
        if found:
            _say(f'Removed MCP server "{args.name}" ({scope} scope) from {path}')
            return 0
    where = f"the {args.scope} scope" if args.scope else "any scope this command writes"
    _say(f'compact-agent mcp: no MCP server "{args.name}" in {where}', sys.stderr)
    return 1


def _list(s: Settings, args: argparse.Namespace) -> int:
    setup = mcp_setup.setup_of(s)
    for problem in setup.problems:
        _say(f"warning: {problem}")
    if not (setup.servers or setup.unapproved or setup.untrusted):
        _say("No MCP servers configured. Add one with `compact-agent mcp add NAME COMMAND [ARGS...]`.")
        return 0
    hub = mcp_setup.hub_for(s, setup)
    hub.start()
    hub.wait(s.mcp_timeout + 1)
    try:
        for state in hub.states.values():
            if state.status == "connected":
                status = f"connected ({len(state.tools)} tools)"
            else:
                status = f"{state.status}: {state.error}" if state.error else state.status
            _say(f"{state.name} [{state.config.scope}]: {state.config.describe()} - {status}")
        for config in setup.unapproved:
            _say(f"{config.name} [project]: {config.describe()} - waiting for approval (start the REPL)")
        for config in setup.untrusted:
            _say(f"{config.name} [project]: {config.describe()} - not started: the project is not trusted")
    finally:
        hub.close()
    return 0


def _get(s: Settings, args: argparse.Namespace) -> int:
    setup = mcp_setup.setup_of(s)
    for config in [*setup.servers, *setup.unapproved, *setup.untrusted]:
        if config.name == args.name:
            _say(f"{config.name}")
            _say(f"  scope: {config.scope} ({config.source})")
            _say(f"  type: {config.transport}")
            _say(f"  {'url' if config.remote else 'command'}: {config.describe()}")
            if config.problem:
                _say(f"  problem: {config.problem}")
            return 0
    _say(f'compact-agent mcp: no MCP server "{args.name}"', sys.stderr)
    return 1
