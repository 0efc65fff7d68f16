"""Every context stage, and the whole view, over generated and hand-written histories.

For every case of histories.stage_cases(), derived from the one registry compact.stages.view.STAGES (each
stage as the view runs it on a fresh state, driven into its decisions where it has a driver, and the view's
own steps around them): the output is valid for the API, the
input is not mutated, the output is no larger than the input (a few tokens of slack per empty result,
which gets a "(Tool completed with no output)" placeholder), and applying the stage twice equals
applying it once. A stage added to the registry joins these tests without a line here; the last tests
add a tiny one the way compact/README.md says.
"""

from __future__ import annotations

import functools
import itertools
import os
import pickle
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compact.decision.tokens import count_tokens
from compact.stages import view
from compact.stages.micro import CLEARED
from compact.stages.snip import snip_id
from compact.stages.state import ContextState
from compact.stages.view import Stage, Step, ViewContext, build_view
from core import tokens
from core.messages import Message, to_api, tool_pairs_ok
from tests.helpers.histories import (
    DRIVERS,
    EXAMPLES,
    HAND_WRITTEN,
    NOW,
    StageCase,
    histories,
    old_bash_history,
    seq_history,
    stage_cases,
)

EMPTY_RESULT_SLACK = 12  # tokens a "(Tool completed with no output)" placeholder may add

_scratch_root: Path | None = None
_scratch_n = itertools.count()


@pytest.fixture(autouse=True, scope="module")
def fast_examples() -> Iterator[None]:
    """Keep thousands of examples affordable, without changing any answer.

    The generated histories reuse a few big tool outputs, and re-tokenizing them for every example
    was most of this file's run time: ``estimate_text`` is pure, so it is memoised here. Each example
    gets a fresh scratch directory that only exists once a stage writes to it (most never do), on
    /dev/shm where there is one (341 of a run's 4,055 examples write to theirs, made and removed).
    """
    global _scratch_root
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # memory: 1/6 of a disk's mkdir/rmtree
    _scratch_root = Path(tempfile.mkdtemp(prefix="invariants-", dir=shm))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tokens, "estimate_text", functools.lru_cache(maxsize=4096)(tokens.estimate_text))
        yield
    shutil.rmtree(_scratch_root, ignore_errors=True)


def scratch_dir() -> Path:
    """A path not created yet (stages create what they write); removed by ``fast_examples``."""
    assert _scratch_root is not None
    return _scratch_root / str(next(_scratch_n))


def snapshot(messages: list[Message]) -> list[Message]:
    """A deep copy of plain data (messages of dicts, lists and strings) to compare with later: through
    pickle, equal to ``copy.deepcopy``'s and 3 times as fast (deepcopy was 15% of this file's CPU)."""
    return pickle.loads(pickle.dumps(messages, pickle.HIGHEST_PROTOCOL))


def drop(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)


def size(messages: list[Message]) -> int:
    return sum(m.tokens for m in messages)


def empty_results(messages: list[Message]) -> int:
    return sum(
        1
        for m in messages
        for b in m.content
        if b.get("type") == "tool_result" and b.get("content") in ("", [])
    )


def api_problems(messages: list[Message]) -> list[str]:
    problems = []
    if not tool_pairs_ok(messages):
        problems.append("tool_use / tool_result pairs broken")
    api = to_api(messages)
    if api and api[0]["role"] != "user":
        problems.append("first message is not the user's")
    for a, b in zip(api, api[1:], strict=False):
        if a["role"] == b["role"]:
            problems.append("two messages of one role in a row")
    for msg in api:
        if not msg["content"]:
            problems.append("empty message")
        for block in msg["content"]:
            if block.get("type") == "text" and not block["text"].strip():
                problems.append("empty text block")
    return problems


def check_stage(case: StageCase, messages: list[Message]) -> None:
    tmp = scratch_dir()
    try:
        stage = case.make(tmp)
        before = snapshot(messages)
        once = stage(messages)
        assert messages == before, f"{case.name} mutated its input"
        assert api_problems(once) == [], case.name
        if not case.grows:
            assert size(once) <= size(messages) + EMPTY_RESULT_SLACK * empty_results(messages), case.name
        frozen = snapshot(once)
        twice = stage(once)
        assert once == frozen, f"{case.name} mutated its own output"
        assert twice == once, f"{case.name} is not idempotent"
    finally:
        drop(tmp)


@pytest.mark.parametrize("case", stage_cases(), ids=lambda c: c.name)
@pytest.mark.parametrize("history", sorted(HAND_WRITTEN))
def test_stage_on_hand_written_histories(case: StageCase, history: str) -> None:
    messages = HAND_WRITTEN[history]()
    assert api_problems(messages) == []
    check_stage(case, messages)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(messages=histories())
def test_every_stage_on_generated_histories(messages: list[Message]) -> None:
    """Each generated history is valid for the API and goes through every case of ``stage_cases()``.
    One history serves them all (generating it is most
    of the cost: a property per stage generated the same kind of history a dozen times over)."""
    assert api_problems(messages) == []
    for case in stage_cases():
        check_stage(case, messages)  # its assertions name the stage


# --- the view as a whole ----------------------------------------------------------------------------


def run_session(
    messages: list[Message], cuts: list[int], tmp: Path, incremental: bool
) -> tuple[list, list[dict]]:
    """build_view() on growing prefixes of ``messages``, as a live session calls it."""
    records: list[dict] = []
    ctx = ViewContext(
        ContextState(),
        tmp,
        now=lambda: NOW,
        keep_recent=2,
        record=records.append,
        incremental=incremental,
    )
    outs = []
    for cut in [*cuts, len(messages)]:
        p = build_view(messages[:cut], ctx)
        outs.append((p.messages, p.tagged, p.tokens, p.api))
    return outs, records


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(messages=histories(), data=st.data())
def test_reusing_the_previous_call_changes_nothing(messages: list[Message], data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(messages)), max_size=4)))
    tmp = scratch_dir()
    try:
        assert run_session(messages, cuts, tmp, True) == run_session(messages, cuts, tmp, False)
    finally:
        drop(tmp)


def test_the_view_records_its_decisions_and_tags_only_the_api_copy(tmp_path: Path) -> None:
    messages = old_bash_history(8) + seq_history()
    records: list[dict] = []
    ctx = ViewContext(ContextState(), tmp_path, now=lambda: NOW, record=records.append)
    p = build_view(messages, ctx)
    assert [r["type"] for r in records] == ["content-replacement", "microcompact"]
    (replacement,) = records[0]["replacements"]
    assert replacement["content"] == ctx.state.replacements[replacement["toolUseId"]]
    assert records[1]["clearedToolUseIds"] == [b["id"] for m in messages for b in m.tool_uses][:4]
    assert all("[id:" not in m.text for m in p.messages)
    assert [m["content"][0]["text"][-11:] for m in p.api if m["content"][0].get("type") == "text"][:1] == [
        f"[id:{snip_id(messages[0].uuid)}]"
    ]
    assert p.tokens == count_tokens(p.messages)
    again = build_view(messages, ctx)  # a minute later nothing new is decided, the same bytes go out
    assert len(records) == 2 and again.api == p.api


def test_whole_stages_run_in_order_after_microcompact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def first(ms: list[Message], ctx: ViewContext, step: Step) -> list[Message]:
        seen.append("first")
        assert ms[2].tool_results[0]["content"] == CLEARED  # microcompact already ran
        return ms[:1] + ms[3:]  # drop the first call and its result

    def second(ms: list[Message], ctx: ViewContext, step: Step) -> list[Message]:
        seen.append("second")
        return ms

    whole = [Stage("first", first, whole=True), Stage("second", second, whole=True)]
    monkeypatch.setattr(view, "STAGES", [*view.STAGES, *whole])
    messages = old_bash_history(8)
    p = build_view(messages, ViewContext(ContextState(), tmp_path, now=lambda: NOW))
    assert seen == ["first", "second"]
    assert [m.uuid for m in p.messages] == [m.uuid for m in messages[:1] + messages[3:]]
    assert p.tagged[0].text.endswith(f"[id:{snip_id(messages[0].uuid)}]")
    assert p.tokens == count_tokens(p.messages) and tool_pairs_ok(p.messages)


def test_each_driver_drives_a_registered_stage() -> None:
    """The stage cases hang off compact.stages.view.STAGES: a driver is found by its stage's name, so a
    driver whose stage was renamed or removed would drive nothing."""
    names = [s.name for s in view.STAGES]
    assert set(DRIVERS) <= set(names)
    assert [c.name for c in stage_cases() if c.name.startswith("registered:")] == [
        f"registered:{n}" for n in names
    ]


def test_the_registry_is_the_order_the_diagram_draws() -> None:
    """compact/stages/view.py draws the one diagram of the order; its first part names the registered stages."""
    drawn = re.findall(r"^    ([\w-]+)\s+\(compact\.", view.__doc__ or "", re.M)
    assert drawn[: len(view.STAGES)] == [s.name for s in view.STAGES]


# --- adding a stage: the registry and the stage's own module, nothing else -------------------------------
# A tiny stage, as compact/README.md's checklist says: its module (here, these few lines) holds the
# decisions and the function; registering it is one entry in compact.stages.view.STAGES.

HIDDEN: set[str] = set()  # the tiny stage's sticky decisions: tool_use ids whose results are hidden


def hide_results(messages: list[Message], ctx: ViewContext, step: Step) -> list[Message]:
    """Replace the hidden results with a one-word stand-in (never mutating the input)."""
    out = []
    for m in messages:
        if any(b.get("tool_use_id") in HIDDEN for b in m.tool_results):
            blocks = [
                {**b, "content": "(hidden)"} if b.get("tool_use_id") in HIDDEN else b for b in m.content
            ]
            m = m.replace(content=blocks)
        out.append(m)
    return out


def hidden_fingerprint(ctx: ViewContext) -> tuple:
    return (len(HIDDEN),)


TINY = Stage("hide", hide_results, hidden_fingerprint)


@pytest.fixture
def tiny_registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stage]:
    """Registration: one entry in the list, after microcompact."""
    monkeypatch.setattr(view, "STAGES", [*view.STAGES[:3], TINY, *view.STAGES[3:]])
    HIDDEN.clear()
    yield TINY
    HIDDEN.clear()


@pytest.mark.parametrize("history", sorted(HAND_WRITTEN))
def test_a_registered_stage_joins_the_invariants(tiny_registered: Stage, history: str) -> None:
    messages = HAND_WRITTEN[history]()
    HIDDEN.update(b["id"] for m in messages[::3] for b in m.tool_uses)
    cases = stage_cases()  # what the tests above run, on the registry as it is now
    assert "registered:hide" in [c.name for c in cases]
    for case in cases:
        check_stage(case, messages)


def test_a_registered_stage_runs_in_the_view_and_its_fingerprint_keeps_reuse_honest(
    tiny_registered: Stage, tmp_path: Path
) -> None:
    messages = old_bash_history(8)
    ctx = ViewContext(ContextState(), tmp_path, now=lambda: NOW, microcompact_enabled=False)
    first = build_view(messages, ctx)
    assert "(hidden)" not in str(first.api)
    call = messages[1].tool_uses[0]["id"]
    HIDDEN.add(call)  # a new decision: the reused view would be stale without the stage's fingerprint
    grown = build_view([*messages, *seq_history()], ctx)
    (result,) = [b for m in grown.messages for b in m.tool_results if b["tool_use_id"] == call]
    assert result["content"] == "(hidden)"
    fresh = ViewContext(
        ContextState(), tmp_path, now=lambda: NOW, microcompact_enabled=False, incremental=False
    )
    assert grown.messages == build_view([*messages, *seq_history()], fresh).messages


def test_without_its_fingerprint_part_a_stage_would_be_reused_stale(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Why a stage contributes to the fingerprint: the same stage without it shows the old view."""
    monkeypatch.setattr(view, "STAGES", [*view.STAGES, Stage("hide", hide_results)])
    HIDDEN.clear()
    messages = old_bash_history(8)
    ctx = ViewContext(ContextState(), tmp_path, now=lambda: NOW, microcompact_enabled=False)
    build_view(messages, ctx)
    HIDDEN.add(messages[1].tool_uses[0]["id"])
    try:
        assert "(hidden)" not in str(build_view([*messages, *seq_history()], ctx).api)
    finally:
        HIDDEN.clear()


# --- between compaction points: each request extends the previous one (preserved thinking) --------------


def unbound_thinking(before: list[Message], now: list[Message]) -> list[str]:
    """Thinking sent in ``now`` whose prefix is not what ``before`` sent (checked here on roles and
    contents, independently of compact.stages.binding): the 5.5 family refuses such a request."""
    old = [(m.role, m.content) for m in before]
    problems = []
    for i, m in enumerate(now):
        if not any(b.get("type") in ("thinking", "redacted_thinking") for b in m.content):
            continue
        k = min(i, len(old))
        if [(x.role, x.content) for x in now[:k]] != old[:k] or (
            i < len(old) and (m.role, m.content) != old[i]
        ):
            problems.append(f"message {i} ({m.uuid}) sends thinking after a changed prefix")
    return problems


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(messages=histories(), data=st.data())
def test_between_compaction_points_no_request_sends_thinking_after_a_changed_prefix(
    messages: list[Message], data: st.DataObject
) -> None:
    """Requests at every user message, the stages deciding as they go (budget, microcompact with the
    clock of the history) and, at a drawn point, the model snipping an earlier turn."""
    cuts = [i + 1 for i, m in enumerate(messages) if m.role == "user"]
    prompts = [i for i, m in enumerate(messages) if m.is_typed_prompt]
    snip_at = data.draw(st.sampled_from(cuts)) if cuts else None
    tmp = scratch_dir()
    records: list[dict] = []
    ctx = ViewContext(ContextState(), tmp, now=lambda: NOW, keep_recent=2, record=records.append)
    before: list[Message] | None = None
    try:
        for cut in cuts:
            earlier = [i for i in prompts if i < cut and any(j > i and j < cut for j in prompts)]
            if cut == snip_at and earlier:
                ctx.state.snipped.add(messages[data.draw(st.sampled_from(earlier))].uuid)
            sent = build_view(messages[:cut], ctx)
            if before is not None:
                assert unbound_thinking(before, sent.messages) == []
            assert api_problems(sent.messages) == []
            ctx.sent, ctx.sent_tagged, before = list(sent.messages), list(sent.tagged), list(sent.messages)
        dropped = [u for r in records if r["type"] == "thinking-drop" for u in r["droppedThinkingUuids"]]
        assert len(dropped) == len(set(dropped)) == ctx.thinking.dropped_between  # each counted once
    finally:
        drop(tmp)
