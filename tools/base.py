"""What every tool is: a name, a description, a JSON input schema and a ``run`` that returns a result.

Tool failures are raised as ``ToolError("a sentence saying what to do")``; the runner (tools.runner)
turns them, and any unexpected exception, into an ``is_error`` tool_result in one place.
Tools are synchronous; agent/runtime/tool_exec.py runs consecutive calls whose declaration says ``parallel``
concurrently in threads, and
a tool doing long work polls ``ctx.cancelled`` so Ctrl-C stops it. A tool may also define ``check(args, ctx)``, raising the
``ToolError`` its ``run`` would raise without changing anything (tools.runner.precheck calls it before
a permission prompt).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from core.declaration import Declaration


class ToolError(Exception):
    """A tool failed in a way the model can act on; the message is shown to it as is."""


@dataclass
class ToolResult:
    content: str | list[dict[str, Any]]
    is_error: bool = False
    # a short human line for the UI ("Read 120 lines"), never sent to the model
    summary: str = ""
    # facts for the working-state ledger (compact.compaction.ledger): exit code, lines changed... never sent to the model
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolContext:
    """What tools may touch. One per session; Bash's working directory lives here and persists.

    ``session_dir`` is also where tools put whole outputs too large for a result (``tool-results/``)."""

    project_dir: Path
    session_dir: Path
    cwd: Path
    # absolute path -> mtime when the model last read it (Read / Write / Edit keep it)
    read_files: dict[str, float] = field(default_factory=dict)
    cancel: threading.Event = field(default_factory=threading.Event)
    # the environment for commands (the process's overlaid with settings "env" maps); None = os.environ
    environ: dict[str, str] | None = None
    # set by the loop: callables the Snip tool needs (kept generic so tools/ never imports the loop)
    services: dict[str, Any] = field(default_factory=dict)
    # files the model may not see (the user's Read deny rules): Grep and Glob leave out every file this
    # returns True for. Called with absolute paths as found (not resolved); None hides nothing.
    hidden: Callable[[Path], bool] | None = None

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()

    def resolve(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.cwd / p)


def object_schema(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    """A tool's input schema: an object of these properties, the ``required`` ones named, nothing else
    accepted (the key order is the bytes the API and the prompt cache see)."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


class Tool(Protocol):
    name: str
    description: str
    input_schema: dict[str, Any]
    # what it touches, its path argument, how it is shown, what compaction may do with its results
    # (core.declaration); the registry makes it known by the tool's name
    declaration: Declaration

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...
