"""Run the user's hooks with Claude Code's protocol (CONTRACT §5); a failing hook never raises.

Configuration (already merged from the settings files)::

    {"PreCompact": [{"matcher": "auto", "hooks": [{"type": "command", "command": "...", "timeout": 30}]}]}

A group's ``matcher`` is compared with the event's match value — the trigger for PreCompact/PostCompact,
the source for SessionStart, the tool name for PreToolUse/PostToolUse — as an exact string or, failing
that, a regex that must match the whole value; a missing, empty or ``*`` matcher matches everything, and
events without a match value (UserPromptSubmit, Stop) run every group.

Each command runs under ``bash -c`` in the project directory, in a process group of its own, with the JSON
payload on stdin and ``CLAUDE_PROJECT_DIR`` in its environment. On timeout, or when the caller's
``cancel`` event is set (Ctrl-C / Esc in the REPL, SIGINT in print mode), the whole group is killed; the
group is registered with tools/process/watchdog.py, so a hook dies with the agent even after ``kill -9``, as Bash
commands do. A ``timeout`` that is not a number of seconds from 0 to ``MAX_TIMEOUT`` is replaced by the
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
import os
import re
import selectors
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from core.private import REDACTED, open_private, redact, secrets_of
from tools.process import watchdog

DEFAULT_TIMEOUT = 600.0
MAX_TIMEOUT = 86_400.0  # a day: past it, a hook's timeout is a typo (or 1e300) more likely than a plan
# after a kill, how long to wait for the pipes to close before giving up on the output
_DRAIN_SECONDS = 2.0
_POLL_SECONDS = 0.05
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
        out = _Capture(self.spill_dir, f"{event}-stdout", self.secrets)
        err = _Capture(self.spill_dir, f"{event}-stderr", self.secrets)

        def outcome(code: int | None, timed_out: bool = False, interrupted: bool = False) -> HookOutcome:
            return HookOutcome(
                event,
                command,
                code,
                out.text("stdout"),
                err.text("stderr"),
                timed_out,
                time.monotonic() - started,
                timeout,
                interrupted,
            )

        gate = watchdog.Gate()
        try:
            proc = subprocess.Popen(
                ["bash", "-c", gate.prefix + command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.project_dir,
                env={**self.environ, "CLAUDE_PROJECT_DIR": str(self.project_dir)},
                start_new_session=True,
                pass_fds=gate.fds,
            )
        except BaseException as exc:
            gate.failed()
            if not isinstance(exc, (OSError, ValueError)):
                raise
            err.add_note(f"could not start the hook: {getattr(exc, 'strerror', None) or exc}")
            return outcome(127)
        try:
            # it runs once the watchdog knows it: killed with the agent, however the agent ends
            gate.opened(proc.pid)
            stopped = _collect(proc, stdin, (out, err), started + timeout, cancel)
            code = proc.wait()
            if stopped == "cancelled":
                return outcome(None, interrupted=True)
            if stopped == "timeout":
                return outcome(None, timed_out=True)
            return outcome(code)
        except Exception as exc:  # noqa: BLE001 - a hook never breaks its caller
            err.add_note(f"the hook could not be run: {type(exc).__name__}: {exc}")
            return outcome(127)
        finally:
            if proc.poll() is None:  # anything that left early (KeyboardInterrupt too) takes the hook along
                _kill_group(proc.pid)
                proc.wait()
            watchdog.done(proc.pid)
            out.close()
            err.close()

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


def _collect(
    proc: subprocess.Popen[bytes],
    stdin: bytes,
    captures: tuple[_Capture, _Capture],
    deadline: float,
    cancel: threading.Event | None,
) -> str | None:
    """Feed stdin and read stdout/stderr until the hook is done; "timeout" or "cancelled" if we stopped it.

    A shell that exited while a child it left behind holds the pipes open has finished: its output so
    far is taken and only the leftovers are killed, at the deadline."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True)
    feeder.start()
    selector = selectors.DefaultSelector()
    for pipe, capture in zip((proc.stdout, proc.stderr), captures):
        os.set_blocking(pipe.fileno(), False)
        selector.register(pipe.fileno(), selectors.EVENT_READ, capture)
    try:
        while selector.get_map():
            if cancel is not None and cancel.is_set():
                _kill_group(proc.pid)
                return "cancelled"
            if time.monotonic() >= deadline:
                finished = proc.poll() is not None
                _kill_group(proc.pid)
                _drain(selector)
                return None if finished else "timeout"
            for key, _ in selector.select(_POLL_SECONDS):
                if not _read(key.fd, key.data):
                    selector.unregister(key.fd)
        while proc.poll() is None:  # pipes closed, the shell still running
            if cancel is not None and cancel.is_set():
                _kill_group(proc.pid)
                return "cancelled"
            if time.monotonic() >= deadline:
                _kill_group(proc.pid)
                return "timeout"
            time.sleep(_POLL_SECONDS)
        return None
    finally:
        selector.close()
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()


def _feed(pipe: IO[bytes], data: bytes) -> None:
    """The payload on the hook's stdin; a hook that does not read it (or has gone) is no error."""
    try:
        pipe.write(data)
    except OSError:
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _read(fd: int, capture: _Capture) -> bool:
    """Take what the pipe holds now; False at end of file."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        capture.write(chunk)


def _drain(selector: selectors.BaseSelector) -> None:
    stop_at = time.monotonic() + _DRAIN_SECONDS
    while selector.get_map() and time.monotonic() < stop_at:
        for key, _ in selector.select(_POLL_SECONDS):
            if not _read(key.fd, key.data):
                selector.unregister(key.fd)


class _Capture:
    """One output stream of a hook: its head in memory; past that, all of it (redacted) in a private file.

    The key is redacted from the file as it is written: the last ``longest secret - 1`` bytes are held
    back from each write, so a key split across two reads is still found."""

    def __init__(self, spill_dir: Path | None, prefix: str, secrets: tuple[str, ...]) -> None:
        self.spill_dir, self.prefix = spill_dir, prefix
        self.secrets = tuple(s.encode() for s in secrets)
        self.keep = max((len(s) for s in self.secrets), default=1) - 1
        self.head = bytearray()
        self.total = 0
        self.path: Path | None = None
        self.problem = ""  # why the whole output could not be saved
        self._file: IO[bytes] | None = None
        self._pending = b""  # bytes not yet written to the file (a key may continue in the next read)
        self._notes: list[str] = []

    def write(self, data: bytes) -> None:
        room = _HEAD_BYTES - len(self.head)
        self.total += len(data)
        if room > 0:
            self.head += data[:room]
        if self._file is not None:
            self._spill(data)
        elif self.total > OUTPUT_LIMIT and self.path is None and not self.problem:
            self._open()
            if self._file is not None:  # everything so far: the head, then what did not fit in it
                self._spill(bytes(self.head) + data[max(room, 0) :])

    def add_note(self, text: str) -> None:
        self._notes.append(text)

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.write(self._redacted(self._pending))
                self._file.close()
            except OSError as exc:
                self.problem = exc.strerror or str(exc)
            self._file, self._pending = None, b""

    def text(self, stream: str) -> str:
        """What the model is shown: all of it, or past OUTPUT_LIMIT a note naming the saved file, then its head."""
        self.close()
        text = redact(bytes(self.head).decode("utf-8", "replace"), tuple(s.decode() for s in self.secrets))
        text = "\n".join([*self._notes, text] if text else self._notes)
        if self.total <= _HEAD_BYTES and len(text) <= OUTPUT_LIMIT:
            return text
        if self.path is not None and not self.problem:
            where = f"all of it is saved in {self.path} - Read that file with offset and limit"
        elif self.problem:
            where = f"it could not be saved ({self.problem})"
        else:
            where = "it was not saved"
        return (
            f"(Hook {stream} too large to show in full: {self.total:,} bytes; the first "
            f"{OUTPUT_LIMIT:,} characters are shown, {where}.)\n{text[:OUTPUT_LIMIT]}"
        )

    def _open(self) -> None:
        if self.spill_dir is None:
            return
        path = self.spill_dir / f"{self.prefix}-{uuid.uuid4().hex[:12]}.txt"
        try:
            self._file = os.fdopen(open_private(path, os.O_WRONLY | os.O_EXCL), "wb")
            self.path = path
        except OSError as exc:
            self.problem = exc.strerror or str(exc)

    def _spill(self, data: bytes) -> None:
        assert self._file is not None
        # a key is at most keep + 1 bytes: one that is still incomplete lies wholly in the last keep
        data = self._redacted(self._pending + data)
        cut = len(data) - self.keep
        done, self._pending = data[:cut], data[cut:]
        try:
            self._file.write(done)
        except OSError as exc:
            self.problem = exc.strerror or str(exc)
            self._file.close()
            self._file = None

    def _redacted(self, data: bytes) -> bytes:
        for secret in self.secrets:
            data = data.replace(secret, REDACTED.encode())
        return data


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
