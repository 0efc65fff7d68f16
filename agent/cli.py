"""The command line (docs/usage.md): the only place that turns errors into a line on stderr and an exit code.

``--version`` is answered before the command line is parsed (typer itself is imported with this module;
typer is pinned below 0.29 so that costs little); the SDK is imported lazily (print mode) or in the
background while the REPL draws its prompt.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional, cast

import typer

from agent import RESUME_PICK, __version__
from agent.help_text import COMMAND_LIST, ENVIRONMENT
from core.terminal import visible

if TYPE_CHECKING:
    from agent.config.settings import Settings

HELP = (
    """Compact Agent: a terminal coding agent that keeps working when the conversation outgrows the \
model's context window.

Start the REPL in the current directory, optionally with a first PROMPT; with -p, run the agent loop once
and print the result. No API key yet? `compact-agent --demo` shows the whole product against a scripted
model.

\b
REPL commands (docs/usage.md has the rest):
"""
    + COMMAND_LIST
    + """
  Tab on an empty line      thinking on or off ("think hard", "ultrathink" raise it once; /effort: docs/models.md)

\b
Environment (docs/settings.md has the settings files' keys too):
"""
    + ENVIRONMENT
    + """

\b
MCP servers (docs/mcp.md): `compact-agent mcp add|add-json|list|get|remove`, as `claude mcp`."""
)
NO_KEY = (
    "No API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) in the environment, "
    "or try `compact-agent --demo`, which needs none"
)


class OutputFormat(str, Enum):
    text = "text"
    json = "json"
    stream_json = "stream-json"


app = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


@app.command(help=HELP)
def run(
    prompt: Annotated[
        Optional[str], typer.Argument(help="First message (or, with -p, the whole task).")
    ] = None,
    print_mode: Annotated[
        bool, typer.Option("--print", "-p", help="Non-interactive: run to the end, print the result, exit.")
    ] = False,
    output_format: Annotated[
        OutputFormat, typer.Option("--output-format", help="Print-mode output: text, json or stream-json.")
    ] = OutputFormat.text,
    continue_: Annotated[
        bool, typer.Option("--continue", "-c", help="Continue the most recent session of this directory.")
    ] = False,
    resume: Annotated[
        Optional[str],
        typer.Option("--resume", "-r", help="Resume a session by id, or from a transcript file path."),
    ] = None,
    model: Annotated[
        Optional[str],
        typer.Option(
            "--model", help="Model id (default: settings, then ANTHROPIC_MODEL, then a current Sonnet)."
        ),
    ] = None,
    effort: Annotated[
        Optional[str],
        typer.Option("--effort", help="How deeply the model thinks: low, medium, high, xhigh, max or auto."),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", help="Accepted for Claude Code's scripts (-p --output-format stream-json passes it)."
        ),
    ] = False,
    # a plain str: a bad value gets load_settings' one line naming the valid ones, not click's enum error
    permission_mode: Annotated[
        Optional[str],
        typer.Option("--permission-mode", help="default, acceptEdits, bypassPermissions or plan."),
    ] = None,
    skip_permissions: Annotated[
        bool,
        typer.Option("--dangerously-skip-permissions", help="Same as --permission-mode bypassPermissions."),
    ] = False,
    max_turns: Annotated[
        Optional[int], typer.Option("--max-turns", min=1, help="Stop after N model calls (print mode).")
    ] = None,
    allowed_tools: Annotated[
        Optional[list[str]],
        typer.Option(
            "--allowedTools", "--allowed-tools", help='Allow rules, e.g. "Bash(git status:*) Edit".'
        ),
    ] = None,
    disallowed_tools: Annotated[
        Optional[list[str]],
        typer.Option("--disallowedTools", "--disallowed-tools", help='Deny rules, e.g. "Bash(rm:*)".'),
    ] = None,
    trust_project: Annotated[
        bool,
        typer.Option(
            "--trust-project",
            help="Trust this project (recorded): its settings files' hooks, env and widened permissions apply.",
        ),
    ] = False,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help="No key needed: the real REPL against a scripted model, in a throwaway sample project.",
        ),
    ] = False,
    auto: Annotated[
        bool,
        typer.Option(
            "--auto",
            help="With --demo: play the demo by itself to the end, then exit "
            "(COMPACT_AGENT_DEMO_PACE=0: without its pauses).",
        ),
    ] = False,
    mcp_config: Annotated[
        Optional[list[str]],
        typer.Option(
            "--mcp-config",
            help="MCP servers from these JSON files (or JSON text), Claude Code's format; several may follow.",
        ),
    ] = None,
    strict_mcp_config: Annotated[
        bool, typer.Option("--strict-mcp-config", help="Only the --mcp-config servers, none from elsewhere.")
    ] = False,
    append_system_prompt: Annotated[
        Optional[str],
        typer.Option("--append-system-prompt", help="Text added to the end of the system prompt."),
    ] = None,
    system_prompt: Annotated[
        Optional[str],
        typer.Option(
            "--system-prompt",
            help="Instructions in place of the built-in ones (the environment and CLAUDE.md files still follow).",
        ),
    ] = None,
    settings_flag: Annotated[
        Optional[str],
        typer.Option(
            "--settings", help="More settings: a settings file, or its JSON; over every other file."
        ),
    ] = None,
    session_id: Annotated[
        Optional[str], typer.Option("--session-id", help="The new session's id (a UUID not in use yet).")
    ] = None,
    fallback_model: Annotated[
        Optional[str],
        typer.Option("--fallback-model", help="Switch to this model when the model is overloaded (529)."),
    ] = None,
    add_dir: Annotated[
        Optional[list[str]],
        typer.Option("--add-dir", help="More directories the tools may read and edit, like the project."),
    ] = None,
    version: Annotated[bool, typer.Option("--version", "-v", help="Print the version and exit.")] = False,
) -> None:
    if version:
        typer.echo(f"{__version__} (Compact Agent)")
        raise typer.Exit(0)
    if auto and not demo:
        _fail("--auto only goes with --demo", 2)
    if demo:
        others = (prompt, print_mode, continue_, resume, model, effort, permission_mode, skip_permissions,
                  max_turns, allowed_tools, disallowed_tools, trust_project, mcp_config, strict_mcp_config,
                  append_system_prompt, system_prompt, settings_flag, session_id, fallback_model, add_dir)  # fmt: skip
        if any(others):
            _fail("--demo takes no other options (only --auto)", 2)
        raise typer.Exit(_demo(auto))
    environ = dict(os.environ)
    settings = _settings(
        environ,
        {
            "model": model,
            "effort": effort,
            "permission_mode": permission_mode,
            "allowed_tools": allowed_tools or [],
            "disallowed_tools": disallowed_tools or [],
            "dangerously_skip_permissions": skip_permissions,
            "trust_project": trust_project,
            "mcp_config": mcp_config or [],
            "strict_mcp_config": strict_mcp_config,
            "append_system_prompt": append_system_prompt,
            "system_prompt": system_prompt,
            "settings": settings_flag,
            "session_id": session_id,
            "fallback_model": fallback_model,
            "add_dir": add_dir or [],
        },
    )
    _check_session_flags(continue_, resume, session_id, print_mode)
    if not (settings.api_key or settings.auth_token):
        _fail(NO_KEY, 2)
    raise typer.Exit(
        _start(
            settings,
            prompt,
            environ,
            print_mode=print_mode,
            output_format=output_format.value,
            resume=resume,
            continue_=continue_,
            max_turns=max_turns,
        )
    )


def _settings(environ: dict[str, str], cli: dict[str, Any]) -> Settings:
    """The settings for this run, or one line and exit code 2."""
    # imported here, not at the top: --version and --help must not pay for them (start-up speed)
    from agent.config.credentials import hide_credentials
    from agent.config.settings import ensure_home, load_settings
    from core.errors import SettingsError

    hide_credentials()  # the settings have their copy; no child process can read it from ours
    try:
        settings = load_settings(cwd=Path.cwd().resolve(), environ=environ, cli=cli)
        ensure_home(settings)
    except SettingsError as e:
        _fail(str(e), 2)
    return settings


def _check_session_flags(
    continue_: bool, resume: str | None, session_id: str | None, print_mode: bool
) -> None:
    """Which session to open: flags that contradict each other end the run with one line."""
    if continue_ and resume:
        _fail("--continue and --resume can't be used together", 2)
    if session_id and (continue_ or resume):
        _fail("--session-id names a new session: it can't be used with --continue or --resume", 2)
    if print_mode and resume == RESUME_PICK:
        _fail("--resume needs a session id (or a unique start of one) with -p (see --help)", 2)


def _start(
    settings: Settings,
    prompt: str | None,
    environ: dict[str, str],
    *,
    print_mode: bool,
    output_format: str,
    resume: str | None,
    continue_: bool,
    max_turns: int | None,
) -> int:
    """Run print mode or the REPL; their errors become one line and an exit code."""
    from core.errors import AgentError

    try:
        if not print_mode:
            from agent.frontend.repl import run_repl  # start-up speed: only the mode in use is imported

            return run_repl(settings, prompt, resume=resume, continue_last=continue_, environ=environ)
        from agent.frontend.printmode import run_print  # start-up speed: only the mode in use is imported

        text = prompt if prompt is not None else _stdin_prompt()
        if not text:
            _fail("No prompt: give one as an argument or on stdin with -p", 2)
        return run_print(
            settings,
            text,
            output_format,
            resume=resume,
            continue_last=continue_,
            max_turns=max_turns,
            environ=environ,
        )
    except AgentError as e:
        _fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        _fail("Interrupted", 130)


def _demo(auto: bool) -> int:
    from agent.demo.run import run_demo  # start-up speed: only --demo loads the demo
    from core.errors import AgentError

    try:
        return run_demo(auto=auto, environ=dict(os.environ))
    except AgentError as e:
        message, code = str(e), e.exit_code
    except KeyboardInterrupt:
        message, code = "Interrupted", 130
    _fail(message, code)


def _stdin_prompt() -> str:
    if sys.stdin is None or sys.stdin.isatty():
        return ""
    return sys.stdin.read().strip()


def _fail(message: str, code: int) -> NoReturn:
    sys.stderr.write(f"compact-agent: {visible(message)}\n")  # it may quote a file name or a value
    raise typer.Exit(code)


def resume_pick(args: list[str]) -> list[str]:
    """``--resume`` (or ``-r``) with no id after it, as in Claude Code, opens the session picker: the
    flag gets the picker's mark as its value, so the option parser sees one."""
    out = list(args)
    for i, arg in enumerate(args):
        if arg in ("--resume", "-r") and (i + 1 == len(args) or args[i + 1].startswith("-")):
            out.insert(i + 1 + (len(out) - len(args)), RESUME_PICK)
    return out


def spread(args: list[str]) -> list[str]:
    """``--mcp-config a.json b.json`` and ``--add-dir x y``, as Claude Code takes them: the values after
    the flag, up to the next option, each get the flag (a word that is not an existing .json file or JSON
    text, or not an existing directory, is left for the prompt)."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        out.append(arg)
        i += 1
        if arg not in ("--mcp-config", "--add-dir") or i >= len(args):
            continue
        out.append(args[i])  # the first value belongs to the flag whatever it is
        i += 1
        while i < len(args) and not args[i].startswith("-") and _flag_value(arg, args[i]):
            out += [arg, args[i]]
            i += 1
    return out


def _flag_value(flag: str, value: str) -> bool:
    path = Path(value).expanduser()
    if flag == "--add-dir":
        return path.is_dir()
    return value.lstrip().startswith("{") or (path.suffix == ".json" and path.is_file())


def leave_objects_to_the_os() -> None:
    """At exit, what the run made is left to the operating system: the interpreter's last collection went
    over every object (the SDK's thousands of classes and schemas) after the last line was printed, ~0.4 s
    of CPU before the terminal came back (`python -c "import anthropic, …"`: 1.30 s user, 0.91 s with
    this). The exit handlers all run as before; only that collection is skipped (an object in a reference
    cycle is not finalized at exit, which Python never promised). Not while another thread still runs (a
    daemon such as model-info, still waiting on an API it can't reach): frozen under it, the interpreter's
    shutdown crashed with SIGSEGV in ~3% of such runs (8 parallel `-p /trust` runs with no API: 10 of 384
    processes; 0 of 384 without the freeze, 0 of 768 with this check)."""
    if threading.active_count() > 1:
        return
    gc.freeze()


def main() -> None:
    atexit.unregister(leave_objects_to_the_os)  # once, however often main runs in one process (the tests)
    atexit.register(leave_objects_to_the_os)
    if sys.argv[1:] in (["--version"], ["-v"]):  # the fast path: no parsing, no SDK
        sys.stdout.write(f"{__version__} (Compact Agent)\n")
        return
    if sys.argv[1:2] == ["mcp"]:  # `compact-agent mcp add|list|remove`, as `claude mcp`
        from agent.frontend.mcp_command import main as mcp_main

        sys.exit(mcp_main(sys.argv[2:]))
    # typer answers a bad flag with a usage block; the contract wants one line, so its errors come here
    click_error = cast(
        type[Exception], next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    )
    try:
        code = app(args=spread(resume_pick(sys.argv[1:])), standalone_mode=False, prog_name="compact-agent")
    except click_error as e:
        message = " ".join(e.format_message().split())  # type: ignore[attr-defined]
        sys.stderr.write(f"compact-agent: {visible(message)} (see --help)\n")
        sys.exit(e.exit_code)  # type: ignore[attr-defined]
    except typer.Abort:
        sys.stderr.write("compact-agent: Interrupted\n")
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
