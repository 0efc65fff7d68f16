"""Run the user's hooks with Claude Code's protocol (docs/files.md); a failing hook never raises.

Configuration (already merged from the settings files)::

    {"PreCompact": [{"matcher": "auto", "hooks": [{"type": "command", "command": "...", "timeout": 30}]}]}

A group's ``matcher`` is compared with the event's match value — the trigger for PreCompact/PostCompact,
the source for SessionStart, the tool name for PreToolUse/PostToolUse — as an exact string or, failing
that, a regex that must match the whole value; a missing, empty or ``*`` matcher matches everything, and
events without a match value (UserPromptSubmit, Stop) run every group.

Each command runs under ``bash -c`` in the project directory (tools/process/spawn.py, as Bash commands
do), in a process group of its own, with the JSON payload on stdin and ``CLAUDE_PROJECT_DIR`` in its
environment. On timeout, or when the caller's ``cancel`` event is set (Ctrl-C / Esc in the REPL, SIGINT
in print mode), the whole group is killed; the watchdog knows the group, so a hook dies with the agent
even after ``kill -9``. A ``timeout`` that is not a number of seconds from 0 to ``MAX_TIMEOUT`` is replaced by the
default, and ``problems()`` says so where the settings are loaded.

The API key is redacted from what a hook prints (its output becomes context and is recorded), and what
reaches the model is capped: past ``OUTPUT_LIMIT`` characters, the whole output is saved to a private
file in ``spill_dir`` and the outcome keeps the head after a note naming that file, as large tool output
is (tools/process/spill.py), so a hook printing megabytes can't make every later request too long. The output
is read as it streams and only its head is kept in memory: a hook printing gigabytes costs disk, not RAM.
Hooks of one event run one after another, in the order the settings list them. Running a hook never
raises: whatever goes wrong becomes a failed outcome.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.private import redact, secrets_of
from tools.process import spawn
from tools.process.spill import SpillingOutput

DEFAULT_TIMEOUT = 600.0
MAX_TIMEOUT = 86_400.0  # a day: past it, a hook's timeout is a typo (or 1e300) more likely than a plan
# after a kill, how long to wait for the pipes to close before giving up on the output
_DRAIN_SECONDS = 2.0
OUTPUT_LIMIT = 10_000  # characters of a hook's stdout (and of its stderr) kept for the model
_HEAD_BYTES = 4 * OUTPUT_LIMIT  # bytes kept in memory: OUTPUT_LIMIT characters even of 4-byte UTF-8


@dataclass(frozen=True)
class HookOutcome:
    event: str
    command: str
    exit_code: int | None  # None when the hook timed out and was killed
    stdout: str
    stderr: str
    timed_out: bool
    duration: float  # seconds
    timeout: float
    interrupted: bool = False  # killed because the user interrupted (Ctrl-C, Esc, SIGINT)

    @property
    def ok(self) -> bool:
        return not self.timed_out and not self.interrupted and self.exit_code == 0


def base_payload(session_id: str, transcript_path: str | Path, cwd: str | Path, event: str) -> dict[str, Any]:
    """The fields every hook input carries; callers add the event's own (trigger, source, tool_name...)."""
    return {
        "session_id": session_id,
        "transcript_path": str(transcript_path),
        "cwd": str(cwd),
        "hook_event_name": event,
    }


class HookRunner:
    def __init__(
        self,
        hooks_config: Mapping[str, Any],
        project_dir: Path,
        environ: Mapping[str, str],
        spill_dir: Path | None = None,
    ) -> None:
        self.config = hooks_config or {}
        self.spill_dir = spill_dir  # where output over OUTPUT_LIMIT is saved (None: cut without saving)
        self.project_dir = Path(project_dir)
        self.environ = dict(environ)
        # hooks get the environment as it is (a hook may call the API), but what they print is context
        # for the model and the transcript, so the credentials are redacted from it
        self.secrets = secrets_of(
            self.environ.get("ANTHROPIC_API_KEY"), self.environ.get("ANTHROPIC_AUTH_TOKEN")
        )

    def has_hooks(self, event: str, match_value: str | None = None) -> bool:
        """Whether ``run`` would start anything, so callers can skip building a payload."""
        return bool(self._commands(event, match_value))

    def run(
        self,
        event: str,
        payload: Mapping[str, Any],
        match_value: str | None = None,
        cancel: threading.Event | None = None,
    ) -> list[HookOutcome]:
        """Run the event's matching hooks in order; ``cancel`` set stops the one running (and the rest)."""
        stdin = json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")
        outcomes = []
        for command, timeout in self._commands(event, match_value):
            if cancel is not None and cancel.is_set():
                break
            outcomes.append(self._run_one(event, command, timeout, stdin, cancel))
        return outcomes

    def problems(self) -> list[str]:
        """One line per configured hook whose settings can't be used as written (said once, at start)."""
        lines = []
        for event, groups in self.config.items():
            for group in groups if isinstance(groups, list) else []:
                for hook in (group.get("hooks") or []) if isinstance(group, Mapping) else []:
                    if not isinstance(hook, Mapping) or hook.get("type") != "command":
                        continue
                    raw = hook.get("timeout")
                    if _timeout_of(raw) is None:
                        lines.append(
                            f'{event} hook "{_shorten(str(hook.get("command")))}": timeout {raw!r} is not a '
                            f"number of seconds from 0 to {MAX_TIMEOUT:g}; {DEFAULT_TIMEOUT:g}s is used"
                        )
        return lines

    def _commands(self, event: str, match_value: str | None) -> list[tuple[str, float]]:
        out = []
        for group in self.config.get(event) or []:
            if not isinstance(group, Mapping) or not matches(group.get("matcher"), match_value):
                continue
            for hook in group.get("hooks") or []:
                # other hook types (Claude Code's "prompt" hooks) are not ours to run
                if isinstance(hook, Mapping) and hook.get("type") == "command" and hook.get("command"):
                    out.append((str(hook["command"]), _timeout_of(hook.get("timeout")) or DEFAULT_TIMEOUT))
        return out

    def _run_one(
        self, event: str, command: str, timeout: float, stdin: bytes, cancel: threading.Event | None
    ) -> HookOutcome:
        started = time.monotonic()
        out, err = self._capture(f"{event}-stdout"), self._capture(f"{event}-stderr")
        notes: list[str] = []
        code: int | None = 127
        stopped = None
        try:
            # it runs once the watchdog knows it: killed with the agent, however the agent ends
            finished = spawn.run(
                command,
                cwd=self.project_dir,
                env={**self.environ, "CLAUDE_PROJECT_DIR": str(self.project_dir)},
                stdout=out.write,
                stderr=err.write,
                stdin=stdin,
                timeout=timeout,
                cancel=cancel.is_set if cancel is not None else lambda: False,
                until="eof",
                drain=_DRAIN_SECONDS,
            )
            code, stopped = finished.exit_code, finished.stopped
        except (OSError, ValueError) as exc:
            notes.append(f"could not start the hook: {getattr(exc, 'strerror', None) or exc}")
        except Exception as exc:  # noqa: BLE001 - a hook never breaks its caller
            notes.append(f"the hook could not be run: {type(exc).__name__}: {exc}")
        finally:
            out.close()
            err.close()
        return HookOutcome(
            event,
            command,
            None if stopped else code,
            _shown(out, "stdout", self.secrets),
            _shown(err, "stderr", self.secrets, notes),
            stopped == "timeout",
            time.monotonic() - started,
            timeout,
            stopped == "cancelled",
        )

    def _capture(self, prefix: str) -> SpillingOutput:
        # the head holds OUTPUT_LIMIT characters even of 4-byte UTF-8; past OUTPUT_LIMIT bytes all of it
        # goes to a file, with the key redacted as it is written
        return SpillingOutput(
            self.spill_dir,
            prefix,
            _HEAD_BYTES,
            spill_after=OUTPUT_LIMIT,
            secrets=self.secrets,
            strict=False,
        )

    # ---- reading the outcomes ------------------------------------------------------------------

    @staticmethod
    def context_text(outcomes: list[HookOutcome]) -> str:
        """What successful hooks printed, joined: extra summary instructions or context for the model.
        A hook printing a JSON object contributes its ``hookSpecificOutput.additionalContext`` only."""
        texts = []
        for o in outcomes:
            if not o.ok:
                continue
            data = _json_object(o.stdout)
            text = o.stdout.strip() if data is None else str(_additional_context(data)).strip()
            if text:
                texts.append(text)
        return "\n\n".join(texts)

    @staticmethod
    def report_lines(outcomes: list[HookOutcome]) -> list[str]:
        """One line per hook that failed or timed out, for the user."""
        lines = []
        for o in outcomes:
            name = f'{o.event} hook "{_shorten(o.command)}"'
            if o.interrupted:
                continue  # the turn's end says it was interrupted
            if o.timed_out:
                lines.append(f"{name} timed out after {o.timeout:g}s")
            elif o.exit_code != 0:
                first = next((line.strip() for line in o.stderr.splitlines() if line.strip()), "")
                lines.append(f"{name} failed (exit {o.exit_code})" + (f": {first}" if first else ""))
        return lines

    @staticmethod
    def stop_reason(outcomes: list[HookOutcome]) -> str | None:
        """A hook's ``{"continue": false}``: why the turn ends here (its ``stopReason``, for the user)."""
        for o in outcomes:
            data = _json_object(o.stdout) if o.ok else None
            if data is not None and data.get("continue") is False:
                return str(data.get("stopReason") or f'the {o.event} hook "{_shorten(o.command)}" stopped it')
        return None

    @staticmethod
    def blocked(outcomes: list[HookOutcome]) -> str | None:
        """Why a PreToolUse hook blocks the call (exit code 2, or a JSON deny/block decision), else None."""
        for o in outcomes:
            if o.exit_code == 2 and not o.timed_out:
                return o.stderr.strip() or f'blocked by the {o.event} hook "{_shorten(o.command)}"'
            data = _json_object(o.stdout) if o.ok else None
            if data is None:
                continue
            specific = data.get("hookSpecificOutput")
            if isinstance(specific, dict) and specific.get("permissionDecision") == "deny":
                return str(specific.get("permissionDecisionReason") or f"denied by the {o.event} hook")
            if data.get("decision") == "block":
                return str(data.get("reason") or f"blocked by the {o.event} hook")
        return None


def matches(matcher: object, value: str | None) -> bool:
    """Claude Code's matcher rule: empty/``*``/missing matches all; else exact text, else a full regex match."""
    if matcher in (None, "", "*") or value is None:
        return True
    if not isinstance(matcher, str):
        return False
    if matcher == value:
        return True
    try:
        return re.fullmatch(matcher, value) is not None
    except re.error:
        return False


def _timeout_of(raw: object) -> float | None:
    """A hook's ``timeout`` in seconds; None when missing, or not a usable number (then the default)."""
    if isinstance(raw, bool):
        return None
    if raw in (None, "", 0):
        return DEFAULT_TIMEOUT
    try:
        seconds = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return seconds if math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT else None


def _shown(
    capture: SpillingOutput, stream: str, secrets: tuple[str, ...], notes: list[str] | None = None
) -> str:
    """What the model is shown of one stream: all of it, or past OUTPUT_LIMIT a note naming the saved
    file, then its head (the key redacted either way)."""
    text = redact(bytes(capture.head).decode("utf-8", "replace"), secrets)
    text = "\n".join([*(notes or []), text] if text else notes or [])
    if capture.total_bytes <= _HEAD_BYTES and len(text) <= OUTPUT_LIMIT:
        return text
    if capture.path is not None and not capture.problem:
        where = f"all of it is saved in {capture.path} - Read that file with offset and limit"
    elif capture.problem:
        where = f"it could not be saved ({capture.problem})"
    else:
        where = "it was not saved"
    return (
        f"(Hook {stream} too large to show in full: {capture.total_bytes:,} bytes; the first "
        f"{OUTPUT_LIMIT:,} characters are shown, {where}.)\n{text[:OUTPUT_LIMIT]}"
    )


def _json_object(text: str) -> dict[str, Any] | None:
    text = text.strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _additional_context(data: dict[str, Any]) -> str:
    specific = data.get("hookSpecificOutput")
    if isinstance(specific, dict) and isinstance(specific.get("additionalContext"), str):
        return specific["additionalContext"]
    return ""


def _shorten(command: str, limit: int = 60) -> str:
    command = " ".join(command.split())
    return command if len(command) <= limit else command[: limit - 1] + "…"
