"""compact.context.coverage: no message leaves the context unless a notes update or a summary request that included
it completed before (docs/compaction.md). A pure model of a session over the shared tricky histories (hand-written
and generated), then the real compactor and notes updater on the scripted model."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compact.compaction import compactor, notes_compaction
from compact.compaction.ledger import SNAPSHOT_KEY
from compact.compaction.notes_updater import SPAN_LEAD, safe_marker
from compact.context import coverage
from core.messages import (
    Message,
    assistant,
    meta,
    new_uuid,
    to_api,
    tool_result_block,
    tool_results,
    user_prompt,
)
from core.model import Request
from tests.helpers.bench import Bench
from tests.helpers.compaction import transcript_records
from tests.helpers.histories import EXAMPLES, HAND_WRITTEN, histories
from tests.helpers.notes import answer, notes_requests, notes_session, read_round
from tests.helpers.scripted import RoutedModel, api_error, is_notes_update, request_text

# --- a pure model of a session: updates, notes compactions, summary compactions -------------------------


@dataclass
class Model:
    """The live list and what every completed update or summary request included (``seen``)."""

    live: list[Message]
    marker: str | None = None
    seen: set[str] = field(default_factory=set)
    rebuilt: set[str] = field(default_factory=set)  # compaction attachments, rebuilt at every compaction
    dropped: list[Message] = field(default_factory=list)

    def update(self, upto: int | None = None) -> None:
        """A notes update over the first ``upto`` messages (all by default) completes."""
        view = self.live if upto is None else self.live[:upto]
        self.seen |= {m.uuid for m in view}
        new = safe_marker(view)
        if new and coverage.covered_count(self.live, new) > coverage.covered_count(self.live, self.marker):
            self.marker = new

    def notes_compaction(self, scale: float) -> None:
        start = notes_compaction.tail_start(self.live, self.marker, scale)
        if start is None:  # an uncovered earlier summary: the real compaction folds the span in
            self.update()
            start = notes_compaction.tail_start(self.live, self.marker, scale)
        assert start is not None
        summary = Message("user", [{"type": "text", "text": "notes"}], kind="summary")
        self._swap(start, summary, notes_path=True)
        self.seen.add(summary.uuid)  # the summary message is the notes themselves

    def summary_compaction(self) -> None:
        self.seen |= {m.uuid for m in self.live}  # the summary request included every message
        self._swap(
            len(self.live), Message("user", [{"type": "text", "text": "summary"}], kind="summary"), False
        )

    def _swap(self, start: int, summary: Message, notes_path: bool) -> None:
        kept, ledger = self.live[start:], meta("working state")
        self.dropped += self.live[:start]
        self.marker = coverage.covered_after(summary, kept, [ledger], self.marker, notes_path)
        self.rebuilt.add(ledger.uuid)
        self.live = [summary, *kept, ledger]

    def lost(self) -> list[Message]:
        return [m for m in self.dropped if m.uuid not in self.seen | self.rebuilt]


def fresh(messages: list[Message]) -> list[Message]:
    """A chunk to append: no compaction summary of its own (only a compaction writes one), new uuids
    (generated chunks may share a seed)."""
    return [m.replace(uuid=new_uuid()) for m in messages if m.kind != "summary"]


def test_invariant_on_the_hand_written_histories() -> None:
    for name, make in HAND_WRITTEN.items():
        for scale in (0.05, 0.3, 1.0):
            s = Model(fresh(make()))
            s.update(len(s.live) // 2)  # the notes saw the first half
            s.notes_compaction(scale)
            s.live += fresh(make())  # a whole new stretch, no update in between
            s.notes_compaction(scale)  # the compaction the bug lost messages in
            s.summary_compaction()
            s.live += fresh(make())
            s.notes_compaction(scale)  # the earlier LLM summary must be folded in, not dropped
            assert s.lost() == [], f"{name} at scale {scale}: {[m.uuid for m in s.lost()]}"


OPS = st.lists(st.sampled_from(["append", "update", "partial", "notes", "summary"]), min_size=1, max_size=12)


@settings(max_examples=max(25, EXAMPLES // 4), deadline=None)
@given(
    histories(),
    st.lists(histories(max_turns=2), min_size=1, max_size=4),
    OPS,
    st.sampled_from([0.02, 0.2, 1.0]),
)
def test_no_message_leaves_unless_an_update_or_summary_included_it(
    first: list[Message], more: list[list[Message]], ops: list[str], scale: float
) -> None:
    s = Model(list(first))
    chunks = iter(more)
    for op in ops:
        if op == "append":
            s.live += fresh(next(chunks, []))
        elif op == "update":
            s.update()
        elif op == "partial":
            s.update(len(s.live) // 2)
        elif op == "notes":
            s.notes_compaction(scale)
        else:
            s.summary_compaction()
        assert s.lost() == [], op


def test_the_coverage_check() -> None:
    ms = [meta(f"m{i}") for i in range(6)]
    assert coverage.covered_count(ms, None) == 0
    assert coverage.covered_count(ms, "gone") == 0  # a marker no longer live covers nothing
    assert coverage.covered_count(ms, ms[2].uuid) == 3
    assert coverage.uncovered_before(ms, 5, ms[2].uuid) == ms[3:5]
    assert coverage.uncovered_before(ms, 2, ms[2].uuid) == []
    assert coverage.uncovered_before(ms, 4, None) == ms[:4]


# --- the real compaction --------------------------------------------------------------------------------


@pytest.fixture
def model() -> RoutedModel:
    """The bench's model: the notes updates and summaries a test routes, its requests read back."""
    return RoutedModel()


def summary_reply(req: Request) -> bool:
    return "<analysis>" in json.dumps(req.messages) and not is_notes_update(req)


def lexer_round(bench: Bench, i: int) -> None:
    use = {
        "type": "tool_use",
        "id": f"toolu_lexer{i}",
        "name": "Read",
        "input": {"file_path": f"/src/lex{i}.py"},
    }
    # each reply reports the usage of its whole request (much more than the span a fold sends)
    usage = {"input_tokens": 60_000 + 1_500 * i, "output_tokens": 20}
    reply = assistant(
        [{"type": "text", "text": "Reading a lexer file."}, use], stop_reason="tool_use", usage=usage
    )
    bench.add(reply)
    bench.add(tool_results([tool_result_block(use["id"], "beta " * 1_500)]))


def compacted_then_grown(tmp_path, model: RoutedModel, **settings: object) -> tuple[Bench, list[Message]]:
    """A notes compaction, then a long new stretch with no update in between; the live list before the
    next compaction and the messages the notes never saw."""
    bench = notes_session(tmp_path, model, **settings)
    assert compactor.compact(bench.conv, bench.ports, "auto")
    marker = bench.state.last_summarized_uuid
    assert marker in {m.uuid for m in bench.messages}  # the covered point moved onto the new list
    records = [r for r in transcript_records(bench) if r.get("type") == "session-memory"]
    assert records[-1]["lastSummarizedUuid"] == marker  # so a resume finds it
    bench.add(Message("user", [{"type": "text", "text": "Next: port the lexer."}]))
    for i in range(30):
        lexer_round(bench, i)
    answer(bench, "The lexer is ported.")
    return bench, bench.messages[coverage.covered_count(bench.messages, marker) :]


def test_what_the_notes_never_saw_stays_verbatim_when_it_fits(tmp_path, model: RoutedModel) -> None:
    bench, uncovered = compacted_then_grown(tmp_path, model)
    result = notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto")
    assert result is not None and notes_requests(model) == []  # no update needed
    assert [m.uuid for m in result.kept[-len(uncovered) :]] == [m.uuid for m in uncovered]


def test_what_does_not_fit_is_folded_in_by_one_update_of_just_that_span(tmp_path, model: RoutedModel) -> None:
    bench, uncovered = compacted_then_grown(tmp_path, model, context_window=120_000)
    model.on(is_notes_update, "Noted.")
    before = list(bench.messages)
    result = notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto")
    [fold] = notes_requests(model)
    text = request_text(fold)
    assert "The lexer is ported." in text and "Next: port the lexer." in text
    assert SPAN_LEAD in text and before[0].text[:200] not in text  # the covered part is not re-sent
    assert result is not None
    dropped = before[: len(before) - len(result.kept)]
    assert {m.uuid for m in uncovered} & {m.uuid for m in dropped}  # the fold let the tail shrink
    assert coverage.uncovered_before(before, len(dropped), bench.state.last_summarized_uuid) == []


def test_after_a_summary_the_notes_cover_nothing_until_an_update_reads_it(
    tmp_path, model: RoutedModel
) -> None:
    bench = notes_session(tmp_path, model)
    model.on(summary_reply, "<summary>The user wants the parser fixed. ZEBRA-42.</summary>")
    assert compactor.compact(bench.conv, bench.ports, "manual", instructions="keep it short")
    assert bench.state.last_summarized_uuid is None
    bench.add(Message("user", [{"type": "text", "text": "Carry on."}]))
    read_round(bench, 400)
    answer(bench, "Carried on.")
    model.on(is_notes_update, "Noted.")
    result = notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto")
    [fold] = notes_requests(model)
    assert "ZEBRA-42" in request_text(fold)  # the LLM summary was folded in before it could go
    assert result is not None and bench.messages[0].uuid not in {m.uuid for m in result.kept}


def test_when_the_fold_fails_the_compaction_falls_back_to_the_summary(tmp_path, model: RoutedModel) -> None:
    bench = notes_session(tmp_path, model)
    bench.state.last_summarized_uuid = None  # a resumed session: no record of what the notes saw
    model.on(is_notes_update, api_error(400, "no"))
    before = [m.uuid for m in bench.messages]
    assert notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto") is None
    assert [m.uuid for m in bench.messages] == before and bench.state.last_summarized_uuid is None


def test_no_fold_when_even_current_notes_would_not_fit(tmp_path, model: RoutedModel) -> None:
    # window capped at 40K: T = 7K, and the system prompt, the notes and the smallest tail are more
    bench = notes_session(tmp_path, model, context_window=40_000)
    bench.state.last_summarized_uuid = None
    assert not notes_compaction.could_serve(bench.conv, bench.ports)
    assert notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto") is None
    assert model.requests == []  # straight to the summary: no update paid for and thrown away


def test_a_fold_leaves_out_the_prompt_typed_after_the_last_reply(tmp_path, model: RoutedModel) -> None:
    """Issue 38 item 12: a fold that sent the new prompt wrote it into the notes, which became the
    summary: a /rewind to that prompt (kept verbatim in the tail) left it in the summary. The fold covers
    up to the last reply; the prompt stays verbatim and uncovered."""
    bench, _ = compacted_then_grown(tmp_path, model, context_window=120_000)
    model.on(is_notes_update, "Noted.")
    bench.add(user_prompt("Rename the module lexer to scanner everywhere."))
    prompt = bench.messages[-1]
    result = notes_compaction.compact_with_notes(bench.conv, bench.ports, "auto")
    [fold] = notes_requests(model)
    text = request_text(fold)
    assert "The lexer is ported." in text and "Rename the module lexer" not in text
    assert result is not None and result.kept[-1].uuid == prompt.uuid
    assert bench.state.last_summarized_uuid == bench.messages[-2].uuid  # the reply, not the prompt


def test_a_kept_tail_never_keeps_an_earlier_compactions_working_state(tmp_path, model: RoutedModel) -> None:
    """Issue 38 item 12: a notes compaction's tail reached back over the previous compaction's working
    state, whose user messages still marked the prompt of that time current-request: the request after
    it had two current requests, the older first (and a /rewind into the tail found that stale state
    instead of attaching the kept branch's own). The tail starts after it."""
    bench = notes_session(tmp_path, model)
    assert compactor.compact(bench.conv, bench.ports, "auto")
    assert any(SNAPSHOT_KEY in m.extra for m in bench.messages)
    bench.state.last_summarized_uuid = bench.messages[-1].uuid  # an update covered it all
    bench.add(user_prompt("Next: port the lexer."))
    for _ in range(5):  # less than the tail's 10,000 tokens: it reaches back past the working state
        read_round(bench, 1_500)
    answer(bench, "The lexer is ported.")
    bench.state.last_summarized_uuid = bench.messages[-1].uuid
    bench.add(user_prompt("Now the scanner."))
    assert compactor.compact(bench.conv, bench.ports, "auto")
    assert bench.conv.last_compaction is not None and bench.conv.last_compaction.method == "session-memory"
    assert [m for m in bench.messages if SNAPSHOT_KEY in m.extra] == [bench.messages[-1]]  # the new one only
    text = request_text(bench.ports.request(to_api(bench.conv.view().tagged)))
    labels = re.findall(r'<user-message[^>]*current-request="true"[^>]*>\n(.*)', text)
    assert labels == ["Now the scanner."]
