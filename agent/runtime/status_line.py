"""``statusLine`` from the settings, run as Claude Code runs it: the command gets the session's JSON on stdin
(session id, transcript path, model, directories, version, cost and durations, lines changed) and its first
line of output is shown under the input.

It runs in the background (``refresh``: at start and after each turn; one at a time, a refresh asked for
while one runs is run once it ends), under ``TIMEOUT`` seconds in its own process group behind the
watchdog, with the agent's environment minus the API credentials. What it printed last stays on screen;
a command that fails or times out shows why, once, in its place.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable

from agent.runtime import checkpoints
from tools.bash import child_env
from tools.process import spawn

TIMEOUT = 5.0  # seconds one run may take
OUTPUT_CAP = 4_096  # bytes of its output read


class StatusLine:
    def __init__(
        self, config: dict[str, Any], payload: Callable[[], dict[str, Any]], cwd: Any, environ: Any
    ) -> None:
        self.command = str(config.get("command") or "")
        self.padding = int(config.get("padding") or 0)
        self.payload, self.cwd, self.environ = payload, cwd, environ
        self.text = ""  # what is shown
        self.on_change: Callable[[], None] = lambda: None
        self._lock = threading.Lock()
        self._running = False
        self._again = False

    def refresh(self) -> None:
        """Run the command in the background (again once the current run ends, if one is running)."""
        with self._lock:
            if self._running:
                self._again = True
                return
            self._running = True
        threading.Thread(target=self._loop, name="status-line", daemon=True).start()

    def run_now(self) -> str:
        """One run, in this thread; what it shows."""
        out = bytearray()

        def keep(chunk: bytes) -> None:
            if len(out) < OUTPUT_CAP:
                out.extend(chunk[: OUTPUT_CAP - len(out)])

        try:
            data = json.dumps(self.payload(), ensure_ascii=False).encode("utf-8")
            finished = spawn.run(
                self.command,
                cwd=self.cwd,
                env=child_env(self.environ),
                stdout=keep,
                stderr=lambda chunk: None,
                stdin=data,
                timeout=TIMEOUT,
                until="exit",
            )
        except OSError as e:
            return f"status line: could not run it ({e.strerror or e})"
        if finished.stopped == "timeout":
            return f"status line: no answer within {TIMEOUT:g} s"
        first = next((line for line in out.decode("utf-8", "replace").splitlines() if line.strip()), "")
        if finished.exit_code not in (0, None) and not first:
            return f"status line: exit code {finished.exit_code}"
        return " " * self.padding + first.rstrip()

    def _loop(self) -> None:
        while True:
            text = self.run_now()
            changed = text != self.text
            self.text = text
            if changed:
                self.on_change()
            with self._lock:
                if not self._again:
                    self._running = False
                    return
                self._again = False


def payload_of(session: Any, version: str) -> dict[str, Any]:
    """The JSON a status line command reads (Claude Code's fields, with this agent's values)."""
    s = session.settings
    cost = session.cost + (session.subagents.cost if session.subagents is not None else 0.0)
    added, removed = checkpoints.totals(session.checkpoint_dir)
    return {
        "hook_event_name": "Status",
        "session_id": session.session_id,
        "transcript_path": str(session.transcript_path),
        "cwd": str(s.cwd),
        "model": {"id": session.model, "display_name": session.model},
        "workspace": {"current_dir": str(s.cwd), "project_dir": str(s.root)},
        "version": version,
        "output_style": {"name": "default"},
        "cost": {
            "total_cost_usd": round(cost, 6),
            "total_duration_ms": int((time.monotonic() - session.started) * 1000),
            "total_api_duration_ms": int(session.api_seconds * 1000),
            "total_lines_added": added,
            "total_lines_removed": removed,
        },
    }
