"""A ready ``Conversation``: its view's context and its background workers, built once for given Ports.

``conversation(...)`` is the only way the agent and the tests build one (through compact/owner.py, for
agent/runtime/session.py and tests/helpers/bench.py): the live list and the replayed state, the view's settings from ``ports.config``, the
notes worker, and — when context collapse is on — the collapser as the worker of the view's "collapse"
stage (compact.stages.view.STAGES).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Callable

from compact.compaction.notes_updater import NotesWorker
from compact.context.conversation import Conversation, Ports, TranscriptSink
from compact.decision.window import Window
from compact.request_cycle import overhead_tokens
from compact.stages.state import ContextState
from compact.stages.view import ViewContext
from compact.workers.collapse_worker import Collapser
from core.messages import Message
from tools.base import ToolContext


def conversation(
    writer: TranscriptSink,
    session_dir: Path,
    tools: ToolContext,
    ports: Ports,
    *,
    messages: list[Message] | None = None,
    state: ContextState | None = None,
    clock: Callable[[], datetime] | None = None,
) -> Conversation:
    """A conversation ready for ``before_request``: view context, workers, calibration source."""
    conv = Conversation(
        writer=writer,
        session_dir=session_dir,
        tools=tools,
        messages=list(messages or []),
        state=state or ContextState(),
        window=Window(ports.config, ports.model_window, ports.max_output),
    )
    c = ports.config
    conv.view_ctx = ViewContext(
        state=conv.state,
        results_dir=conv.results_dir,
        config=c,
        microcompact_enabled=c.microcompact and not c.disable_compact,
        gap_minutes=c.gap_minutes,
        keep_recent=c.keep_recent,
        record=conv.record,
        calibration=conv.calibration,
    )
    if clock is not None:
        conv.view_ctx.now = clock
    conv.workers["notes"] = NotesWorker()
    if c.context_collapse and not c.disable_compact:
        collapser = Collapser(conv, ports)
        conv.workers["collapse"] = collapser
        conv.view_ctx.workers["collapse"] = collapser
    # counted on first need, not here: the tokenizer takes ~0.2 s to load, and start-up must not wait
    conv.calibration.overhead_source = lambda: overhead_tokens(ports.request([]))
    return conv
