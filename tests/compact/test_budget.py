from __future__ import annotations

import copy
import os
import stat
from pathlib import Path

from compact.stages.budget import (
    PREVIEW_CHARS,
    ROUND_BUDGET,
    apply_budget,
    persisted_block,
    preview,
    result_text,
    tool_names_of,
)
from compact.stages.state import ContextState, replacement_record, replay
from core.messages import Message, tool_pairs_ok
from tests.helpers.histories import Builder, image_block, output, parallel_history, seq_history


def results_of(messages: list[Message]) -> dict[str, object]:
    return {b["tool_use_id"]: b["content"] for m in messages for b in m.tool_results}


def test_a_huge_bash_output_goes_to_disk_with_a_preview(tmp_path: Path) -> None:
    messages = seq_history()
    full = "".join(f"{i}\n" for i in range(1, 100_001))
    state = ContextState()
    out = apply_budget(messages, state, None, tmp_path / "tool-results")
    ((tid, sent),) = results_of(out.messages).items()
    path = tmp_path / "tool-results" / f"{tid}.txt"
    assert path.read_text() == full
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(sent) < 3_000
    assert sent.startswith("<persisted-output>\n") and sent.endswith("\n...\n</persisted-output>")
    assert f"Output too large ({len(full)} characters)" in sent
    assert f"Full output saved to: {path}\n" in sent
    assert preview(full)[0] in sent
    assert out.new_replacements == {tid: sent} and state.replacements == {tid: sent}
    assert state.inline == set()
    assert tool_pairs_ok(out.messages)


def test_missing_parent_directories_are_created_private_whatever_the_umask(tmp_path: Path) -> None:
    results_dir = tmp_path / "session" / "tool-results"
    tmp_mode = stat.S_IMODE(tmp_path.stat().st_mode)
    old = os.umask(0o022)
    try:
        apply_budget(seq_history(), ContextState(), None, results_dir)
    finally:
        os.umask(old)
    assert stat.S_IMODE(results_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(results_dir.parent.stat().st_mode) == 0o700  # the session directory too
    assert stat.S_IMODE(tmp_path.stat().st_mode) == tmp_mode  # an existing parent is left alone


def test_parallel_results_are_held_to_the_round_budget(tmp_path: Path) -> None:
    messages = parallel_history(8, 28_000)  # each under Bash's 30,000, together 224,000
    out = apply_budget(messages, ContextState(), None, tmp_path)
    sent = results_of(out.messages)
    assert sum(len(c) for c in sent.values()) < ROUND_BUDGET
    moved = [tid for tid, c in sent.items() if c.startswith("<persisted-output>")]
    assert len(moved) == 1  # one is enough to fit
    assert (tmp_path / f"{moved[0]}.txt").read_text() == output(28_000)


def test_the_round_budget_moves_the_largest_first(tmp_path: Path) -> None:
    # a 29,000 Bash and four ~49,000 Globs: 225,000 together, each under its own threshold
    b = Builder(9)
    call, ids = b.calls("Bash", "Glob", "Glob", "Glob", "Glob")
    messages = [
        b.prompt("go"),
        call,
        b.results([(ids[0], output(29_000))] + [(tid, output(49_000 + n)) for n, tid in enumerate(ids[1:])]),
    ]
    sent = results_of(apply_budget(messages, ContextState(), None, tmp_path).messages)
    assert [tid for tid, c in sent.items() if c.startswith("<persisted")] == [ids[4]]


def test_results_over_their_threshold_count_as_moved_in_the_round(tmp_path: Path) -> None:
    b = Builder(7)
    call, ids = b.calls("Bash", "Glob", "TodoWrite")
    sizes = [29_000, 49_000, 130_000]  # 208,000 together, but the last goes to disk on its own
    messages = [b.prompt("go"), call, b.results(list(zip(ids, map(output, sizes), strict=True)))]
    sent = results_of(apply_budget(messages, ContextState(), None, tmp_path).messages)
    assert [c.startswith("<persisted") for c in sent.values()] == [False, False, True]


def test_thresholds_per_tool(tmp_path: Path) -> None:
    b = Builder(5)
    tools = ["Grep", "Grep", "Bash", "Bash", "Glob", "Glob", "Read"]
    sizes = [20_000, 20_001, 30_000, 30_001, 50_000, 50_001, 60_000]
    messages = [b.prompt("go")]
    for tool, n in zip(tools, sizes, strict=True):
        messages += b.round(tool, output(n))
    state = ContextState()
    out = apply_budget(messages, state, None, tmp_path)
    replaced = [c.startswith("<persisted-output>") for c in results_of(out.messages).values()]
    assert replaced == [False, True, False, True, False, True, False]
    assert len(state.inline) == 4 and len(state.replacements) == 3


def test_read_and_image_results_are_never_moved(tmp_path: Path) -> None:
    b = Builder(6)
    picture = [{"type": "text", "text": output(60_000)}, image_block()]
    messages = [
        b.prompt("look"),
        *b.round("Read", output(60_000)),
        *b.round("Bash", picture),
        *b.round(
            "WebFetch", [{"type": "text", "text": output(40_000)}, {"type": "text", "text": "x" * 20_000}]
        ),
    ]
    out = apply_budget(messages, ContextState(), None, tmp_path)
    sent = list(results_of(out.messages).values())
    assert sent[0] == output(60_000)
    assert sent[1] == picture
    assert sent[2].startswith("<persisted-output>")  # text blocks are joined and measured together
    saved = next(tmp_path.glob("*.txt")).read_text()
    assert saved == output(40_000) + "\n" + "x" * 20_000


def test_empty_results_say_so(tmp_path: Path) -> None:
    b = Builder(10)
    call, ids = b.calls("Bash", "Edit")
    messages = [b.prompt("go"), call, b.results([(ids[0], ""), (ids[1], [])])]
    sent = results_of(apply_budget(messages, ContextState(), None, tmp_path).messages)
    assert sent == {ids[0]: "(Bash completed with no output)", ids[1]: "(Edit completed with no output)"}


def test_decisions_are_sticky_and_replay_byte_identical(tmp_path: Path) -> None:
    messages = seq_history() + parallel_history(8, 28_000)
    before = copy.deepcopy(messages)
    state = ContextState()
    first = apply_budget(messages, state, None, tmp_path)
    assert messages == before
    records = [replacement_record(first.new_replacements)]
    for f in tmp_path.iterdir():
        f.unlink()
    resumed = replay(records, messages)
    second = apply_budget(messages, resumed, tool_names_of(messages), tmp_path)
    assert second.messages == first.messages
    assert second.new_replacements == {}
    assert list(tmp_path.iterdir()) == []  # nothing written again
    # the live state goes on sending the same bytes too, and leaves inline results alone
    again = apply_budget(messages, state, None, tmp_path)
    assert again.messages == first.messages and again.new_replacements == {}


def test_a_result_kept_inline_stays_inline(tmp_path: Path) -> None:
    b = Builder(11)
    call, (tid,) = b.calls("Bash")
    messages = [b.prompt("go"), call, b.results([(tid, output(40_000))])]
    state = ContextState(inline={tid})
    out = apply_budget(messages, state, None, tmp_path)
    assert out.messages == messages and out.new_replacements == {}


def test_the_cache_returns_the_same_objects(tmp_path: Path) -> None:
    messages = seq_history()
    state, cache = ContextState(), {}
    first = apply_budget(messages, state, None, tmp_path, cache=cache)
    second = apply_budget(messages, state, None, tmp_path, cache=cache)
    assert all(a is b for a, b in zip(first.messages, second.messages, strict=True))


def test_preview_cuts_at_a_late_newline_only() -> None:
    late = "a" * 1_500 + "\n" + "b" * 3_000
    assert preview(late) == ("a" * 1_500, True)
    early = "a" * 500 + "\n" + "b" * 3_000
    assert preview(early) == (early[:PREVIEW_CHARS], True)
    short = "line\n" * 10
    assert preview(short) == (short, False)
    block = persisted_block(short, Path("/x/y.txt"))
    assert "\n...\n" not in block and block.endswith(short + "\n</persisted-output>")


def test_result_text() -> None:
    assert result_text("abc") == "abc"
    assert result_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "a\nb"
    assert result_text([image_block()]) is None
