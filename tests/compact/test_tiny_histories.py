"""Tiny histories (issue 38 item 13): a compaction is never larger by the server's count (the compacted
request was 1.03-1.10x the original while the screen said "4.8k -> 4.8k"), and facts that lived only in
tool output — the lines a Read or a Grep turned up that the next step used — reach the working state
(5 of 28 facts were lost with a poor summary)."""

from __future__ import annotations

import re
from pathlib import Path

from compact.compaction import compactor, ledger
from core.events import CompactFailed, CompactFinished
from core.messages import assistant, tool_result_block, tool_results, user_prompt
from core.scripted import ScriptedModel, reply_text
from core.tokens import estimate_text
from tests.helpers.bench import make_bench
from tests.helpers.compaction import conversation, of_type

POOR = "<summary>We worked on some code.</summary>"


def test_a_compaction_that_barely_shrinks_the_context_is_not_applied(tmp_path: Path) -> None:
    model = ScriptedModel()
    bench = make_bench(tmp_path, model_api=model)
    conversation(bench, ["a.py"])
    pre = bench.view().raw_tokens
    least = compactor.least_left(bench.conv, bench.ports, bench.view().messages)
    # a summary that leaves about 96% of the messages it replaces, as the estimate counts it: within the estimate's
    # error of the server's count, so it may well be larger there
    phrase = "Every detail of the parser work, kept at length. "
    fixed = bench.conv.calibration.scale(bench.conv.calibration.fixed_tokens())
    target = fixed + int((pre - fixed) * 1.035) - least
    assert target > 0
    model.steps.append(reply_text("<summary>" + phrase * (target // estimate_text(phrase)) + "</summary>"))
    messages = list(bench.messages)

    assert compactor.compact(bench.conv, bench.ports, "manual") is False

    [failed] = of_type(bench.events, CompactFailed)
    assert failed.reason.startswith(f"nothing to compact ({pre:,} tokens; a compaction would leave ")
    left = int(re.sub(r"\D", "", failed.reason.split("would leave ")[1]))
    assert fixed + (pre - fixed) * 0.9 < left < pre  # smaller by the estimate, within its margin of error
    assert bench.messages == messages and of_type(bench.events, CompactFinished) == []


def test_lines_of_tool_output_the_next_step_used_reach_the_working_state(tmp_path: Path) -> None:
    model = ScriptedModel()
    bench = make_bench(tmp_path, model_api=model)
    conversation(bench, ["a.py", "b.py"])  # earlier work, so there is something to compact
    bench.add(assistant([{"type": "text", "text": "The parser is fixed."}]))
    bench.add(
        user_prompt("The server listens on the wrong port. Fix it, and keep the retry limit as configured.")
    )
    read = {
        "type": "tool_use",
        "id": "toolu_read",
        "name": "Read",
        "input": {"file_path": str(bench.cwd / "settings.py")},
    }
    bench.add(assistant([read], stop_reason="tool_use"))
    body = "\n".join(
        [f"{i:>6}\t# an ordinary line of settings.py number {i}" for i in range(1, 40)]
        + ["    40\tDEFAULT_PORT = 8443", "    41\tRETRY_LIMIT = 7"]
        + [f"{i:>6}\tvalue_{i} = None" for i in range(42, 90)]
    )
    bench.add(tool_results([tool_result_block("toolu_read", body)]))
    grep = {
        "type": "tool_use",
        "id": "toolu_grep",
        "name": "Grep",
        "input": {"pattern": "listen\\(", "path": str(bench.cwd)},
    }
    bench.add(
        assistant(
            [
                {
                    "type": "text",
                    "text": "settings.py has DEFAULT_PORT = 8443 and RETRY_LIMIT = 7. Where is it used?",
                },
                grep,
            ],
            stop_reason="tool_use",
        )
    )
    bench.add(
        tool_results([tool_result_block("toolu_grep", "server/main.py:57:    app.listen(80)  # hard-coded")])
    )
    edit = {
        "type": "tool_use",
        "id": "toolu_edit",
        "name": "Edit",
        "input": {
            "file_path": str(bench.cwd / "server/main.py"),
            "old_string": "app.listen(80)",
            "new_string": "app.listen(DEFAULT_PORT)",
        },
    }
    bench.add(assistant([edit], stop_reason="tool_use"))
    bench.add(tool_results([tool_result_block("toolu_edit", "The file was updated.")]))
    bench.add(assistant([{"type": "text", "text": "Fixed."}]))
    model.steps.append(reply_text(POOR))

    assert compactor.compact(bench.conv, bench.ports, "manual") is True, of_type(bench.events, CompactFailed)

    text = "\n".join(m.text for m in bench.messages)
    assert "DEFAULT_PORT = 8443" in text and "RETRY_LIMIT = 7" in text  # the Read's lines the next step named
    assert "app.listen(80)" in text  # the Grep's line the Edit changed
    assert "value_50" not in text  # not the rest of the file


def test_a_fact_whose_result_left_at_a_compaction_is_kept_when_the_next_step_names_it(tmp_path: Path) -> None:
    """The compaction came between a Read and the step that used it: the result is gone by then, so the
    working state carries the results no reply has answered yet, and the step after it says which line."""
    model = ScriptedModel()
    bench = make_bench(tmp_path, model_api=model)
    conversation(bench, ["a.py", "b.py", "c.py"])
    read = {"type": "tool_use", "id": "toolu_conf", "name": "Read", "input": {"file_path": "/p/conf.py"}}
    bench.add(assistant([read], stop_reason="tool_use"))
    # a long file whose last line holds the fact (past what the working state carries of a result's middle)
    body = "\n".join([f"{i:>6}\tsetting_{i} = None" for i in range(1, 2000)] + ["  2000\tPOOL_SIZE = 12"])
    bench.add(tool_results([tool_result_block("toolu_conf", body)]))
    model.steps.append(reply_text(POOR))
    assert compactor.compact(bench.conv, bench.ports, "auto") is True
    assert not any("POOL_SIZE" in m.text for m in bench.messages if m.kind == "tool_results")

    edit = {
        "type": "tool_use",
        "id": "toolu_pool",
        "name": "Edit",
        "input": {"file_path": "/p/pool.py", "old_string": "size=4", "new_string": "size=POOL_SIZE"},
    }
    bench.add(assistant([edit], stop_reason="tool_use"))
    state = ledger.render(ledger.derive(bench.messages, str(bench.cwd)))
    assert "POOL_SIZE = 12" in state and "setting_5 " not in state
