"""The Bash tool: run a shell command in the session's working directory and return its output.

Each call starts a fresh ``bash`` through tools.process.spawn, in its own process group (so a timeout or
Ctrl-C can stop everything the command started, and the watchdog kills what is left of it if the agent
dies), with stdin closed
and stderr merged into stdout. Output beyond 1 MB is not held in memory: all of it goes to a file in
the session's tool-results directory, which the result names (tools.process.spill). The directory the
command ends in is written to a temp file by an EXIT trap and becomes ``ctx.cwd``, which is how ``cd``
persists from one call to the next. The API key variables are removed from the child's environment so
that no command can print or send them.
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from core.declaration import Declaration
from tools.base import ToolContext, ToolError, ToolResult, object_schema
from tools.process import spawn
from tools.process.spill import SpillingOutput

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
KILL_GRACE_SECONDS = 0.5
DRAIN_SECONDS = 0.2
HIDDEN_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")

# $1 is the command, $2 the file that receives the final directory. The trap runs even when the
# command calls `exit`, so the directory is recorded on every normal way out.
_WRAPPER = (
    "__compact_cmd=$1; __compact_cwd_file=$2; shift 2; "
    "trap '__compact_rc=$?; pwd -P > \"$__compact_cwd_file\" 2>/dev/null; exit $__compact_rc' EXIT; "
    # kept on the first line so bash's "line N" in error messages matches the model's command
    'eval "$__compact_cmd"'
)

DESCRIPTION = """\
Run a bash command and return its combined stdout and stderr.

- The working directory persists between calls: after `cd some/dir`, later commands run there. \
Prefer absolute paths, and quote paths that contain spaces ("like this").
- Each call is a new shell: variables, aliases and functions do not carry over, only the directory.
- timeout is in milliseconds (default 120000, at most 600000). A command that runs longer is stopped, \
together with every process it started.
- stdin is closed, so interactive programs cannot prompt; pass flags such as `-y` or `--no-edit`, and \
avoid pagers and editors.
- A non-zero exit status is reported as "Exit code N" at the end of the output.
- To run independent commands in sequence use `&&` or `;`. To keep a long-running server going, start \
it in the background with `&` and redirect its output to a file.
- For searching and reading prefer the Grep, Glob and Read tools over grep, find, cat, head and tail: \
they are faster and their output is easier to work with.
- Output over about 30,000 characters is saved to a file and you see the start of it with the file's \
path: read the rest with Read (offset/limit), or narrow the command (`| tail -50`, a filter).
- Use it for what needs a shell: running tests, builds, linters, git, package managers. Ask the user \
before commands that delete data, rewrite git history, push, publish or reach other systems.
- description: a few words saying what the command does, shown to the user."""
# the description at small windows, where the tools' text is a large share of the context (compact.owner)
BRIEF = 'Run a bash command; stdout and stderr come back together, a failure ends with "Exit code N". The directory persists between calls, nothing else does; stdin is closed; timeout in ms (default 120000, max 600000). Prefer Grep, Glob and Read for searching and reading. Ask before deleting data, rewriting history, pushing or publishing.'


LIVE_OUTPUT = "bash_output"  # the ToolContext service that receives output as it comes (optional)


class BashTool:
    name = "Bash"
    declaration = Declaration(
        "runs", key_arg="command", clearable=True, result_limit=30_000, records="command"
    )
    description = DESCRIPTION
    brief = BRIEF
    input_schema = object_schema(
        {
            "command": {"type": "string", "description": "The bash command to run"},
            "timeout": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TIMEOUT_MS,
                "description": "Time limit in milliseconds (default 120000, at most 600000)",
            },
            "description": {
                "type": "string",
                "description": "What the command does, in 5-10 words, for the user",
            },
        },
        "command",
    )

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        timeout_ms = int(args.get("timeout", DEFAULT_TIMEOUT_MS))
        notes = _ensure_cwd(ctx)
        spill_dir = ctx.session_dir / "tool-results"
        outcome = run_shell(
            args["command"],
            ctx.cwd,
            timeout_ms / 1000,
            ctx.cancel,
            ctx.environ,
            spill_dir,
            on_output=ctx.services.get(LIVE_OUTPUT),
        )
        if outcome.final_cwd is not None and outcome.final_cwd.is_dir():
            ctx.cwd = outcome.final_cwd
        result = _to_result(outcome, timeout_ms, notes)
        code = outcome.exit_code if outcome.exit_code is not None else 0
        result.facts = {"exitCode": 128 - code if code < 0 else code, "cwd": str(ctx.cwd)}
        return result


@dataclass
class ShellOutcome:
    output: SpillingOutput
    exit_code: int | None = None
    stopped: str | None = None  # "timeout" or "cancelled" when we killed it
    final_cwd: Path | None = None


def run_shell(
    command: str,
    cwd: Path,
    timeout_s: float,
    cancel: threading.Event,
    environ: Any,
    spill_dir: Path,
    on_output: Callable[[bytes], None] | None = None,
) -> ShellOutcome:
    """Run ``command`` with bash in ``cwd``; stop its whole process group on timeout or cancel.

    ``environ`` is the session's environment (settings "env" maps included); None means the process's.
    Output too large to keep in memory is written whole to a file in ``spill_dir`` (see tools.process.spill);
    ``on_output`` gets each chunk as it arrives (the REPL's live lines)."""
    handle, cwd_file = tempfile.mkstemp(prefix="compact-agent-cwd-")
    os.close(handle)
    output = SpillingOutput(spill_dir, "bash")

    def sink(chunk: bytes) -> None:
        output.write(chunk)
        if on_output is not None:
            on_output(chunk)

    try:
        finished = spawn.run(
            _WRAPPER,
            [command, cwd_file],
            cwd=cwd,
            env=child_env(os.environ if environ is None else environ),
            stdout=sink,  # stderr merged in
            timeout=timeout_s,
            cancel=cancel.is_set,
            until="exit",  # a background job (`server &`) holding the pipe does not hold the call
            grace=KILL_GRACE_SECONDS,
            drain=DRAIN_SECONDS,
        )
        return ShellOutcome(output, finished.exit_code, finished.stopped, _read_cwd_file(cwd_file))
    finally:
        output.close()
        Path(cwd_file).unlink(missing_ok=True)


def child_env(environ: Any) -> dict[str, str]:
    """The environment for commands: the agent's own, minus the API credentials."""
    return {key: value for key, value in environ.items() if key not in HIDDEN_ENV_VARS}


def _read_cwd_file(cwd_file: str) -> Path | None:
    try:
        text = Path(cwd_file).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return Path(text) if text else None


def _ensure_cwd(ctx: ToolContext) -> str:
    # The directory may have been deleted since the last call; fall back rather than fail every call.
    if ctx.cwd.is_dir():
        return ""
    gone = ctx.cwd
    ctx.cwd = ctx.project_dir
    return f"(The working directory {gone} no longer exists; ran in {ctx.project_dir} instead.)\n"


def _to_result(outcome: ShellOutcome, timeout_ms: int, notes: str) -> ToolResult:
    output = outcome.output
    head = output.text()
    text = head.rstrip("\n")
    if output.spilled:
        # first, so that it survives when the budget stage shows only the start of a big result
        text = output.spill_note(head.count("\n")) + "\n" + text
    if outcome.stopped == "timeout":
        raise ToolError(_stopped_message(f"Command timed out after {timeout_ms} ms and was stopped.", text))
    if outcome.stopped == "cancelled":
        raise ToolError(_stopped_message("Command was interrupted by the user and stopped.", text))
    code = outcome.exit_code if outcome.exit_code is not None else 0
    if code < 0:
        code = 128 - code  # killed by a signal: report it the way a shell would
    if code != 0:
        body = f"{notes}{text}\nExit code {code}" if text else f"{notes}Exit code {code}"
        return ToolResult(content=body, is_error=True, summary=f"Exit code {code}")
    body = notes + text if text else notes + "(Bash completed with no output)"
    lines = output.total_lines if output.spilled else (text.count("\n") + 1 if text else 0)
    return ToolResult(content=body, summary=f"{lines} line{'' if lines == 1 else 's'} of output")


def _stopped_message(headline: str, partial: str) -> str:
    if not partial:
        return headline + " It printed nothing before that."
    return f"{headline} Output before it stopped:\n{partial}"
