"""Session notes on the bench: a bench with notes on, rounds of a given size, the model's answers and edits of the notes, the notes updates asked for (on the scripted model, tests/helpers/scripted.py; the benches also take the fake API, for tests/agent/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compact.compaction import notes as notes_doc
from compact.compaction.notes_template import SECTIONS, TEMPLATE
from core.events import Notice
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt
from core.model import Request
from core.scripted import ScriptedModel
from tests.helpers.bench import Bench, make_bench
from tests.helpers.scripted import is_notes_update


def notes_bench(tmp_path: Path, api: Any, **settings: Any) -> Bench:
    """A bench with session notes on (this file's preset of make_bench), on ``api``: a scripted model or
    the fake API."""
    settings = {"session_memory": True, "session_id": "sid", **settings}
    return make_bench(tmp_path, api, **settings)


def filler(tokens: int) -> str:
    return "alpha " * tokens  # one token a word


def read_round(bench: Bench, tokens: int, text: str | None = "Reading the next file.") -> None:
    """An assistant Read call and its result of about ``tokens`` tokens."""
    use_id = f"toolu_{len(bench.messages):04d}"
    content = [{"type": "text", "text": text}] if text else []
    bench.add(
        assistant(
            [
                *content,
                {"type": "tool_use", "id": use_id, "name": "Read", "input": {"file_path": "/src/f.py"}},
            ],
            stop_reason="tool_use",
        )
    )
    bench.add(tool_results([tool_result_block(use_id, filler(tokens))]))


def answer(bench: Bench, text: str = "Done for now.") -> Message:
    reply = assistant([{"type": "text", "text": text}])
    bench.add(reply)
    return reply


def notes_requests(model: ScriptedModel) -> list[Request]:
    """The notes updates the model was asked for."""
    return [r for r in model.requests if is_notes_update(r)]


def guide(name: str) -> str:
    return f"_{dict(SECTIONS)[name]}_"


def tokens(ms: list[Message]) -> int:
    return sum(m.tokens for m in ms)


def notes_session(tmp_path: Path, api: Any, n_rounds: int = 30, **settings: Any) -> Bench:
    bench = notes_bench(tmp_path, api, **settings)
    bench.add(user_prompt("Please fix the parser."))
    for _ in range(n_rounds):
        read_round(bench, 1_500)
    reply = answer(bench, "The parser is fixed.")
    notes_doc.ensure_notes(bench.conv, bench.ports).write_text(
        TEMPLATE.replace(guide("Current State"), guide("Current State") + "\nParser fixed; tests pass.")
    )
    bench.state.last_summarized_uuid = reply.uuid
    bench.add(user_prompt("Now add a test."))
    read_round(bench, 800)
    return bench


def warnings(events: list[Any]) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice) and e.level == "warning"]
