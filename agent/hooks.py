"""Run the user's hooks with Claude Code's protocol (CONTRACT §5); a failing hook never raises.

Configuration (already merged from the settings files)::

    {"PreCompact": [{"matcher": "auto", "hooks": [{"type": "command", "command": "...", "timeout": 30}]}]}

A group's ``matcher`` is compared with the event's match value — the trigger for PreCompact/PostCompact,
the source for SessionStart, the tool name for PreToolUse/PostToolUse — as an exact string or, failing
that, a regex that must match the whole value; a missing, empty or ``*`` matcher matches everything, and
events without a match value (UserPromptSubmit, Stop) run every group.

Each command runs under ``bash -c`` in the project directory, in a process group of its own, with the JSON
payload on stdin and ``CLAUDE_PROJECT_DIR`` in its environment. On timeout the whole group is killed.
The API key is redacted from what a hook prints (its output becomes context and is recorded), and what
reaches the model is capped: past ``OUTPUT_LIMIT`` characters, the whole output is saved to a private
file in ``spill_dir`` and the outcome keeps the head after a note naming that file, as large tool output
is (tools/output.py), so a hook printing megabytes can't make every later request too long.
Hooks of one event run one after another, in the order the settings list them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.private import redact, secrets_of, write_private

DEFAULT_TIMEOUT = 600.0
# after a kill, how long to wait for the pipes to close before giving up on the output
_DRAIN_SECONDS = 2.0
OUTPUT_LIMIT = 10_000  # characters of a hook's stdout (and of its stderr) kept for the model


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

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.exit_code == 0


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
        self, event: str, payload: Mapping[str, Any], match_value: str | None = None
    ) -> list[HookOutcome]:
        stdin = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        return [
            self._run_one(event, command, timeout, stdin)
            for command, timeout in self._commands(event, match_value)
        ]

    def _commands(self, event: str, match_value: str | None) -> list[tuple[str, float]]:
        out = []
        for group in self.config.get(event) or []:
            if not isinstance(group, Mapping) or not matches(group.get("matcher"), match_value):
                continue
            for hook in group.get("hooks") or []:
                # other hook types (Claude Code's "prompt" hooks) are not ours to run
                if isinstance(hook, Mapping) and hook.get("type") == "command" and hook.get("command"):
                    out.append((str(hook["command"]), float(hook.get("timeout") or DEFAULT_TIMEOUT)))
        return out

    def _run_one(self, event: str, command: str, timeout: float, stdin: bytes) -> HookOutcome:
        env = {**self.environ, "CLAUDE_PROJECT_DIR": str(self.project_dir)}
        started = time.monotonic()

        def outcome(code: int | None, out: bytes, err: bytes | str, timed_out: bool = False) -> HookOutcome:
            err_text = err if isinstance(err, str) else err.decode("utf-8", "replace")
            stdout = self._capped(event, "stdout", redact(out.decode("utf-8", "replace"), self.secrets))
            stderr = self._capped(event, "stderr", redact(err_text, self.secrets))
            return HookOutcome(
                event, command, code, stdout, stderr, timed_out, time.monotonic() - started, timeout
            )

        try:
            proc = subprocess.Popen(
                ["bash", "-c", command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.project_dir,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            return outcome(127, b"", f"could not start the hook: {exc.strerror or exc}")
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
            return outcome(proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            # the shell may have exited while a child it left behind holds the pipes open: then the hook
            # itself finished, and only the leftovers are killed
            finished = proc.poll() is not None
            _kill_group(proc.pid)
            try:
                out, err = proc.communicate(timeout=_DRAIN_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                for pipe in (proc.stdout, proc.stderr):
                    if pipe:
                        pipe.close()
                proc.wait()
                out, err = b"", b""
            if finished:
                return outcome(proc.returncode, out, err)
            return outcome(None, out, err, timed_out=True)

    def _capped(self, event: str, stream: str, text: str) -> str:
        """``text``, or past OUTPUT_LIMIT a note naming the file that holds all of it, then its head."""
        if len(text) <= OUTPUT_LIMIT:
            return text
        where = "it was not saved"
        if self.spill_dir is not None:
            path = self.spill_dir / f"{event}-{stream}-{uuid.uuid4().hex[:12]}.txt"
            try:
                where = f"all of it is saved in {write_private(path, text)} - Read that file with offset and limit"
            except OSError as exc:
                where = f"it could not be saved ({exc.strerror or exc})"
        return (
            f"(Hook {stream} too large to show in full: {len(text):,} characters; the first "
            f"{OUTPUT_LIMIT:,} are shown, {where}.)\n{text[:OUTPUT_LIMIT]}"
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
            if o.timed_out:
                lines.append(f"{name} timed out after {o.timeout:g}s")
            elif o.exit_code != 0:
                first = next((line.strip() for line in o.stderr.splitlines() if line.strip()), "")
                lines.append(f"{name} failed (exit {o.exit_code})" + (f": {first}" if first else ""))
        return lines

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


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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
