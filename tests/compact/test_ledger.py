"""compact.compaction.ledger from real tool runs; TodoWrite; the user's messages under a budget; the post-compaction
guard; a Read of a restored, unchanged file answered short."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compact import autocompact
from compact.compaction import compactor, ledger
from compact.compaction.ledger import Command, FileChange, Ledger
from compact.request_cycle import overhead_tokens
from core.events import CompactFailed, CompactFinished, Notice
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt
from core.scripted import ScriptedModel, reply_text
from core.tokens import estimate_text
from tests.helpers.bench import make_bench
from tests.helpers.compaction import SUMMARY_REPLY, TODOS, conversation, of_type
from tests.helpers.tools import make_ctx
from tools.runner import run_tool
from tools.todo import TodoWriteTool


def bash_round(n: int, command: str, code: int) -> list[Message]:
    use = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": command}}
    body = f"out {n}" + (f"\nExit code {code}" if code else "")
    return [
        assistant([use], stop_reason="tool_use"),
        tool_results([tool_result_block(f"toolu_{n}", body, code != 0)]),
    ]


def test_commands_keep_failures_since_their_last_success_and_the_last_ten() -> None:
    messages = [*bash_round(0, "make lint", 1), *bash_round(1, "pytest", 1), *bash_round(2, "pytest", 0)]
    for n in range(3, 15):
        messages += bash_round(n, f"ls {n}", 0)
    state = ledger.derive(messages, "/p")  # no facts: exit codes read back from the result text
    assert [(c.command, c.exit_code) for c in state.commands] == (
        [("make lint", 1)] + [(f"ls {n}", 0) for n in range(5, 15)]
    )  # pytest failed, then passed: gone


def test_todowrite_checks_its_input_and_says_the_list_was_updated(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    result = run_tool(TodoWriteTool(), {"todos": TODOS}, ctx)
    assert not result.is_error and result.facts == {"todos": TODOS}
    assert result.content.startswith(
        "The todo list has been updated (2 tasks: 1 completed, 1 in progress, 0 pending)."
    )
    missing = run_tool(TodoWriteTool(), {"todos": [{"content": "x", "status": "pending"}]}, ctx)
    assert missing.is_error and "activeForm" in missing.content
    wrong = run_tool(
        TodoWriteTool(), {"todos": [{"content": "x", "status": "doing", "activeForm": "X"}]}, ctx
    )
    assert wrong.is_error and "'in_progress'" in wrong.content
    assert TodoWriteTool.input_schema["properties"]["todos"]["items"]["required"] == [
        "content",
        "status",
        "activeForm",
    ]


def _log(lines: int, word: str = "") -> str:
    return "\n".join(
        f"2026-11-27T05:{i % 60:02d}:00Z ERROR pool-{i}: connection {i} refused {word} (retry=3, code=0x{i:04x})"
        for i in range(lines)
    )


def test_user_messages_are_shortened_by_shape_and_age_never_by_their_words() -> None:
    correction = "Thanks, that reads much better.\nUse a base delay of 250 ms for the backoff."
    revision = "Hmm, that is slow in practice.\nUse a base delay of 100 ms for the backoff."
    paste = "Here is what the CI printed:\n" + _log(200, "must not")  # rule words inside a paste
    old_prose = "We are taking over the billing service. " * 30
    prompts = [old_prose, correction, paste, revision, "Look at the parser.", "And the lexer.", "Now run it."]
    out = ledger.user_messages(prompts, [], budget=100_000)  # within budget: every one whole, in order
    assert [how for _, how in out] == ["whole"] * 6 + ["current"]
    budget = sum(estimate_text(p) for p in prompts) // 3
    out = ledger.user_messages(prompts, [], budget)
    hows = dict(zip([p[:20] for p in prompts], [how for _, how in out], strict=True))
    # the paste goes to its head although it holds rule words; the corrections without any stay whole
    assert hows[paste[:20]] == "head" and hows[correction[:20]] == "whole" and hows[revision[:20]] == "whole"
    text = ledger.render_user(out)
    assert "Here is what the CI printed:" in text and "201 lines" in text and "transcript" in text
    assert text.index("250 ms") < text.index("100 ms")  # the revision stands after what it revises
    assert sum(estimate_text(t) for t, _ in out) <= budget
    # tighter still: the oldest go to their head, then are only counted; the newest three and the current stay
    out = ledger.user_messages(prompts, [], 60)
    assert out[0][1] == "older" and "left out" in out[0][0]
    assert [t for t, _ in out[-4:]] == [revision, "Look at the parser.", "And the lexer.", "Now run it."]
    # the current request kept in the tail is still labelled as the current one, where it sits
    now = ledger.user_messages(
        ["Never push to main.", "Now add a test."], [user_prompt("Now add a test.")], 0
    )
    assert now == [("Never push to main.", "whole"), ("Now add a test.", "kept current")]
    assert 'kept-above="true" current-request="true">\nNow add a test.' in ledger.render_user(now)
    assert ledger.user_budget(167_000) == 10_020 and ledger.user_budget(10_000) == 1_000


def test_sixty_one_line_prompts_and_five_pastes_stay_within_the_user_budget() -> None:
    budget = ledger.user_budget(10_000)  # the 43K window's T
    lines = [f"Go on with part {k}: read it, fix step_{k} and run its tests." for k in range(60)]
    out = ledger.user_messages(lines, [], budget)
    assert sum(estimate_text(t) for t, _ in out) <= budget and out[-1] == (lines[-1], "current")
    pastes = [f"Paste {k}:\n" + _log(400) for k in range(5)] + ["What failed first?"]
    out = ledger.user_messages(pastes, [], budget)
    assert sum(estimate_text(t) for t, _ in out) <= budget
    assert all(f"Paste {k}:" in ledger.render_user(out) for k in range(5))  # each by its head


def test_a_paste_past_what_a_snapshot_carries_keeps_its_closing_instruction() -> None:
    """Issue 38 item 10 at 1M: a pasted log of ~1.5M characters was carried by its first 200,000 only,
    so the instruction on its last line was gone from the working state (blind.py's pastes shape at 1M,
    the current request). The head and the last lines are carried, the lines between counted."""
    instruction = "Fix the first timeout above, and leave the retry settings alone."
    paste = "Here is the deploy log:\n" + _log(30_000) + "\n" + instruction
    assert len(paste) > ledger.PROMPT_CHARS
    carried = ledger.derive([user_prompt(paste)], "/p").prompts[0]
    assert len(carried) <= ledger.PROMPT_CHARS + 100
    assert carried.startswith("Here is the deploy log:\n") and carried.endswith("\n" + instruction)
    assert "lines left out here" in carried
    text = ledger.render_user(ledger.user_messages([carried], [], 500, whole=500))
    assert "Here is the deploy log:" in text and instruction in text
    line = "x" * (ledger.PROMPT_CHARS + 10) + " and stop there."
    assert ledger.carried(line).endswith("and stop there.") and "characters left out" in ledger.carried(line)


# --- the post-compaction guard ----------------------------------------------------------------------------------


def test_a_compaction_that_frees_too_little_is_a_failure_said_once(tmp_path: Path) -> None:
    model = ScriptedModel([reply_text(SUMMARY_REPLY), reply_text(SUMMARY_REPLY)])
    bench = make_bench(tmp_path, model_api=model)
    events = bench.events
    # a memory file of ~150K tokens: whatever the summary, the context stays above the warning level
    claude = bench.cwd / "CLAUDE.md"
    claude.write_text("# Notes\n" + "remember this word " * 49_000)
    bench.system = [*bench.system, {"type": "text", "text": claude.read_text()}]  # sent as a session sends it
    bench.instruction_files = lambda: [claude]
    bench.conv.calibration.overhead = compactor_overhead(bench)
    conversation(bench, ["a.py"])
    bench.add(
        assistant([{"type": "text", "text": "ok"}], usage={"input_tokens": 168_000, "output_tokens": 5})
    )
    th = bench.thresholds()

    assert autocompact.maybe_autocompact(bench.conv, bench.ports, 168_000) is True
    [done] = of_type(events, CompactFinished)
    assert th.warning <= done.post_tokens < th.auto_compact  # kept, but it did not help
    assert bench.conv.breaker.failures == 1 and of_type(events, CompactFailed) == []
    [warning] = [e for e in of_type(events, Notice) if "did not free enough room" in e.text]
    assert warning.level == "warning" and "memory files 1" in warning.text and "/context" in warning.text
    parts = dict(
        line.rsplit(" ", 1) for line in warning.text.split("(tokens): ")[1].split(". Run")[0].split(", ")
    )
    assert int(parts["memory files"].replace(",", "")) > 140_000  # the biggest, named first
    assert list(parts)[0] == "memory files"
    # the same content is not compacted again on the next request
    requests = len(model.requests)
    assert autocompact.maybe_autocompact(bench.conv, bench.ports, 168_000) is False
    assert len(model.requests) == requests
    # new content, another weak compaction: counted again, but not said again
    bench.add(user_prompt("go on"))
    bench.add(
        assistant([{"type": "text", "text": "ok"}], usage={"input_tokens": 168_000, "output_tokens": 5})
    )
    assert autocompact.maybe_autocompact(bench.conv, bench.ports, 168_000) is True
    assert bench.conv.breaker.failures == 2 and model.left == 0
    assert len([e for e in of_type(events, Notice) if "did not free enough room" in e.text]) == 1


def compactor_overhead(bench: Any) -> int:
    return overhead_tokens(bench.ports.request([]))  # what before_request sets before each request


def test_a_compaction_from_a_small_context_is_not_judged(tmp_path: Path) -> None:
    bench = make_bench(tmp_path, model_api=ScriptedModel([reply_text(SUMMARY_REPLY)]))
    events = bench.events
    conversation(bench, ["a.py"])
    assert compactor.compact(bench.conv, bench.ports, "auto")
    assert bench.conv.breaker.failures == 0 and not [e for e in of_type(events, Notice) if "room" in e.text]


# --- a Read of a restored file --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "edit src/app.py and README.md, not docs/ (a bare folder name is not taken for a path)",
            ["src/app.py", "README.md"],
        ),
        ("nothing here. e.g. this", []),
    ],
)
def test_files_the_user_named_are_those_that_exist(tmp_path: Path, text: str, expected: list[str]) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("")
    (tmp_path / "README.md").write_text("")
    (tmp_path / "docs").mkdir()
    state = ledger.derive([user_prompt(text)], str(tmp_path))
    assert state.named == [str(tmp_path / p) for p in expected]


# --- the budgets, searches, answers and command status (issue 19 §2-§4) ---------------------------------------

_n = iter(range(1_000_000))


def used(name: str, args: dict[str, Any], result: str, is_error: bool = False) -> list[Message]:
    use = {"type": "tool_use", "id": f"toolu_b{next(_n)}", "name": name, "input": args}
    block = tool_result_block(use["id"], result, is_error=is_error)
    return [assistant([use], stop_reason="tool_use"), tool_results([block])]


def test_over_its_budget_the_state_groups_paths_and_writes_the_full_list_privately(tmp_path: Path) -> None:
    messages = [user_prompt("Apply the codemod to every handler.")]
    paths = [f"/p/src/pkg{i % 6}/handler_{i}.py" for i in range(300)]
    for path in paths:
        messages += used("Write", {"file_path": path, "content": "x = 1\n"}, "File written")
    threshold = 17_000  # a 50K window
    state = ledger.attachment(messages, [], "/p", threshold, tmp_path)
    text = state.message.text
    assert estimate_text(text) < threshold * 0.1  # was ~45 tokens a path: over 13,000
    assert "- /p/src/pkg5/: 50 files (most recent: handler_299.py, handler_293.py, handler_287.py" in text
    [full] = (tmp_path / ledger.FULL_LIST_DIR).iterdir()
    assert str(full) in text and oct(full.stat().st_mode & 0o777) == "0o600"
    assert all(p in full.read_text() for p in paths)
    assert oct(full.parent.stat().st_mode & 0o777) == "0o700"
    small = ledger.attachment(messages[:7], [], "/p", threshold, tmp_path / "other")
    assert not (tmp_path / "other").exists() and paths[2] in small.message.text  # under budget: listed


def test_searches_final_answers_and_the_latest_result_of_each_command() -> None:
    messages = [user_prompt("Is jobs/legacy_sync.py used anywhere?")]
    messages += used("Grep", {"pattern": "legacy_sync", "path": "/p"}, "Found 2 files\n/p/a.py\n/p/b.py")
    messages += used("Glob", {"pattern": "jobs/**/*.py"}, "/p/jobs/x.py\n/p/jobs/legacy_sync.py")
    messages.append(assistant([{"type": "text", "text": "jobs/legacy_sync.py is never imported."}]))
    messages.append(user_prompt("Fix the pricing tests."))
    messages += used(
        "Bash", {"command": "./dev.sh test tests/test_pricing.py"}, "1 failed\nExit code 1", True
    )
    messages += used("Bash", {"command": "./dev.sh test tests/test_pricing.py -k bulk"}, "3 passed")
    messages += used("Bash", {"command": "./dev.sh test"}, "412 passed")
    text = ledger.attachment(messages, [], "/p", 167_000).message.text
    assert "- Grep 'legacy_sync' in /p: 2 files: /p/a.py | /p/b.py" in text  # the files a search found
    assert "- Glob 'jobs/**/*.py': 2 lines: /p/jobs/x.py | /p/jobs/legacy_sync.py" in text
    assert "<final-answer>\njobs/legacy_sync.py is never imported.\n</final-answer>" in text
    assert (
        "$ ./dev.sh test tests/test_pricing.py\n    → 1 failed\n"
        "    (old news: a later, wider run passed: $ ./dev.sh test)" in text
    )
    assert "-k bulk\n    → 3 passed\n" in text  # a narrower pass does not clear the failure by itself


def test_what_the_next_step_depends_on_outlives_a_poor_summary(tmp_path: Path) -> None:
    plan = tmp_path / "PLAN.md"
    plan.write_text("# Plan\n- [x] read the parser\n- [ ] split tokenize() out of parse()\n")
    messages = [user_prompt("Plan the parser split, then start.")]
    messages += used("Write", {"file_path": str(plan), "content": plan.read_text()}, "File written")
    messages += used(
        "Edit", {"file_path": "/p/a.py", "old_string": "x", "new_string": "y"}, "old_string not found", True
    )
    messages += used("WebFetch", {"url": "https://example.org/spec"}, "The spec says tokens are UTF-8.")
    task = used("Task", {"description": "find callers", "prompt": "who calls parse()?"}, "")
    task[1] = tool_results(
        [
            tool_result_block(
                task[0].tool_uses[0]["id"],
                "FINDING: parse() is called from cli.py:40 only.\nagentId: a1 (transcript: /s/agent-a1.jsonl)",
            )
        ]
    ).replace(
        extra={
            ledger.FACTS_KEY: {
                task[0].tool_uses[0]["id"]: {
                    "agentId": "a1",
                    "status": "completed",
                    "description": "find callers",
                    "subagentType": "general-purpose",
                    "sidechain": "/s/agent-a1.jsonl",
                }
            }
        }
    )
    messages += task
    messages += used("Bash", {"command": "./dev.sh test"}, "2 failed\nExit code 1", True)
    for k in range(8):  # eight turns: the oldest answers leave the last five, their first lines stay
        messages += [
            user_prompt(f"Step {k}."),
            assistant([{"type": "text", "text": f"MILESTONE-{k} reached.\nDetails."}]),
        ]
    summary = "All tests pass. Nothing is finished yet: /p/a.py is untouched."
    text = ledger.attachment(messages, [], "/p", 167_000, summary=summary).message.text
    assert "- [x] read the parser\n- [ ] split tokenize() out of parse()" in text  # the plan, written once
    assert "FINDING: parse() is called from cli.py:40 only." in text and "/s/agent-a1.jsonl" in text
    assert "agentId: a1" not in text.split("What the subagents answered")[1]  # the usage block is left out
    assert "- Edit /p/a.py: old_string not found" in text  # a failed edit
    assert (
        "- WebFetch https://example.org/spec: The spec says tokens are UTF-8." in text
    )  # a tool it has no section for
    assert all(
        f"MILESTONE-{k} reached." in text for k in range(8)
    )  # older ones as milestones, newer as answers
    flags = text.split(ledger.FLAGS_HEADER)[1].split("Working directory")[0]
    assert "All tests pass" in flags and "./dev.sh test" in flags  # said next to the facts it contradicts


def test_a_huge_todo_list_is_shown_by_its_head_and_counted():
    """Issue 30: 50,000 todos listed in full made every summary request too long."""
    from compact.compaction.ledger import MAX_TODOS_SHOWN, Ledger, render

    todos = [{"content": f"task {i}", "activeForm": f"doing {i}", "status": "pending"} for i in range(50_000)]
    text = render(Ledger(todos=todos))
    assert "- [ ] task 0" in text and f"- [ ] task {MAX_TODOS_SHOWN - 1}\n" in text
    assert f"task {MAX_TODOS_SHOWN}\n" not in text
    assert f"… and {50_000 - MAX_TODOS_SHOWN:,} more tasks" in text
    assert len(text) < 20_000


def test_the_attachments_share_one_room_the_users_words_first() -> None:
    messages: list[Message] = []
    for k in range(40):
        messages.append(user_prompt(f"Go on with part {k}: read it, fix step_{k} and run its tests."))
        messages += used(
            "Edit", {"file_path": f"/p/src/part_{k}.py", "old_string": "a", "new_string": "b"}, "ok"
        )
        messages += used(
            "Bash", {"command": f"python3 tools/check_{k}.py"}, "FAILED\nExit code 2", k % 4 == 0
        )
        messages.append(assistant([{"type": "text", "text": f"CONCLUSION-{k}: part {k} fixed."}]))
    roomy = ledger.attachment(messages, [], "/p", 10_000).message.text  # the 43K window's T, no bound
    tight = ledger.attachment(messages, [], "/p", 10_000, room=900).message.text
    assert estimate_text(tight) < estimate_text(roomy)
    # the user's words keep their own budget however tight the room (issue 38: they outrank tool output);
    # the working state, the answers and the findings share what is left, down to their shortest forms
    words = tight[tight.index("The user's own messages") :]
    assert ledger.user_budget(10_000) * 0.9 <= estimate_text(words) <= ledger.user_budget(10_000)
    assert estimate_text(tight[: tight.index("The user's own messages")]) <= 900 * 0.75
    # what the next step needs is still there: every failing command, the newest prompts, the current one
    assert all(f"python3 tools/check_{k}.py" in tight for k in range(0, 40, 4))
    assert all(f"python3 tools/check_{k}.py" in tight for k in range(30, 40))  # the last ten, every form
    assert all(f"Go on with part {k}:" in tight for k in range(36, 40))
    # the turn ended with its answer: the latest request is labelled answered, not current
    assert 'latest-request="true" answered="true">\nGo on with part 39' in tight
    assert "<user-message current-request" not in tight


@pytest.mark.parametrize("budget", [None, 700, 1, 0])  # whole, grouped, the shortest form (twice)
def test_the_last_ten_commands_and_the_todo_list_are_named_in_every_form(budget: int | None) -> None:
    """Issue 33's shared bound pushed the state to its shortest form at a 50K window, which named only
    the last command and the item in progress (fidelity 95%): both are small, so every form lists them."""
    state = Ledger(
        cwd="/p",
        modified={f"/p/src/pkg{i % 6}/handler_{i}.py": FileChange(edits=1) for i in range(300)},
        commands=[
            Command(f"python3 -m pytest tests/test_{k}.py -q", 0 if k % 5 else 1, "ok") for k in range(15)
        ],
        todos=[
            {"content": f"Step {k} of the plan", "status": "pending", "activeForm": "x"} for k in range(6)
        ],
    )
    text = ledger.render(state, budget, Path("/s/working-state/full.md"))
    assert all(f"python3 -m pytest tests/test_{k}.py -q" in text for k in range(5, 15))
    assert all(f"Step {k} of the plan" in text for k in range(6))
    if budget is not None and budget <= 1:
        assert text.startswith(ledger.HEADER) and "Only the essentials fit here" in text
        assert estimate_text(text) < 600  # still the short form: counts, not the 300 paths
        assert "[exit 1] $ python3 -m pytest tests/test_10.py -q" in text  # failing: said once, with its code
        assert text.count("tests/test_10.py") == 1


def test_the_shortest_form_names_every_modified_file_of_a_short_list() -> None:
    """27-fidelity (2026 rules): the shortest form named the three newest of four modified files, so the
    first edit (lib/part01.py) left the context after a compaction. A few names cost a few words: up to
    MINIMAL_MODIFIED are all named, past it the newest."""
    few = Ledger(cwd="/w", modified={f"/w/lib/part{i:02d}.py": FileChange(edits=1) for i in (1, 4, 7, 10)})
    text = ledger.render(few, 0, Path("/s/working-state/full.md"))
    assert "Only the essentials fit here" in text
    assert "Files modified: 4 (oldest first: part01.py, part04.py, part07.py, part10.py)" in text
    many = Ledger(cwd="/w", modified={f"/w/lib/m{i}.py": FileChange(edits=1) for i in range(40)})
    text = ledger.render(many, 0, Path("/s/working-state/full.md"))
    named = [f"m{i}.py" for i in range(40) if f" m{i}.py" in text or f"m{i}.py," in text]
    assert named == [f"m{i}.py" for i in range(40 - ledger.MINIMAL_MODIFIED, 40)]
    assert "Files modified: 40 (the most recent, oldest first: " in text


def test_deriving_the_ledger_parses_only_result_lines_that_hold_a_name_the_next_step_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ledger is derived again at every decision near T: each line of every result was parsed for
    names each time (a tool chain of 20K-character reads spent seconds of its turn on it, the stall of
    33-stall). Only a line that holds a name the next step used as text is parsed now; the facts are the same."""
    parsed: list[str] = []
    real = ledger._names

    def counting(text: str) -> set[str]:
        parsed.append(text)
        return real(text)

    messages: list[Message] = [user_prompt("read the modules")]
    for i in range(12):
        body = "\n".join(f"{n:>6}\tvalue_{i}_{n} = compute(x_{n})" for n in range(1, 300))
        if i == 5:
            body += "\n   300\tPOOL_LIMIT = 64"
        read = {
            "type": "tool_use",
            "id": f"toolu_r{i}",
            "name": "Read",
            "input": {"file_path": f"/p/mod{i}.py"},
        }
        said = "POOL_LIMIT is the bound." if i == 6 else ""
        messages.append(assistant([{"type": "text", "text": said}, read], stop_reason="tool_use"))
        messages.append(tool_results([tool_result_block(f"toolu_r{i}", body)]))
    messages.append(assistant([{"type": "text", "text": "Done."}]))
    before = ledger.derive(messages, "/p")
    monkeypatch.setattr(ledger, "_names", counting)
    derived = ledger.derive(messages, "/p")
    assert derived.facts == before.facts
    assert [f["lines"] for f in derived.facts] == ["300\tPOOL_LIMIT = 64"]
    result_lines = [t for t in parsed if "compute(" in t or "POOL_LIMIT = 64" in t]
    assert len(result_lines) == 1  # the one line naming POOL_LIMIT (3,290 of the 3,589 were parsed)


def test_when_the_working_state_passes_its_share_the_older_milestones_give_way() -> None:
    """blind.py, prose at 43K with the pending summary: after ten compactions the working state's
    shortest form (a contradiction flag, every failing command, the last ten) passed its share of a tight
    room by ~500 tokens; the answers gave back 50 (down to their floor), the milestones kept theirs, and
    the context was left at 50.6% of T. Past the answers, the older milestones give the rest back."""
    task = " ".join(["Read the modules under src/ one by one and tell me how invoices are computed."] * 40)
    messages: list[Message] = [user_prompt(task)]
    for k in range(30):
        messages.append(user_prompt(f"Go on with part {k}: read it, fix step_{k} and run its tests."))
        messages += used(
            "Edit", {"file_path": f"/p/src/part_{k}.py", "old_string": "a", "new_string": "b"}, "ok"
        )
        messages += used("Bash", {"command": f"python3 tools/check_{k}.py --strict"}, "Exit code 2", True)
        messages.append(assistant([{"type": "text", "text": f"CONCLUSION-{k}: step_{k} fixed."}]))
    summary = "Nothing is finished yet. All tests pass."
    roomy = ledger.attachment(messages, [], "/p", 10_000, summary=summary).message.text
    tight = ledger.attachment(messages, [], "/p", 10_000, summary=summary, room=1_700).message.text
    assert "- CONCLUSION-5: step_5 fixed." in roomy  # a milestone, where there is room
    state = tight[: tight.index("Your final answers")]
    assert estimate_text(state) > 1_700 * 0.35  # the shortest form, past its share
    assert all(f"python3 tools/check_{k}.py --strict" in state for k in range(30))  # every failing one
    assert "Milestones of earlier turns" not in tight  # they gave way (they took ~250 tokens before)
    assert "CONCLUSION-29: step_29 fixed." in tight and task in tight  # the newest answer, the task whole


def test_a_long_paste_is_shaped_and_searched_for_paths_once_over_many_compactions(monkeypatch: Any) -> None:
    """blind.py, pastes at 1M (a pasted log of ~1.4M characters): every compaction derived the ledger
    and shaped the user's words again, each time going through the paste character by character and
    word by word: ~6 of the ~9 s a compaction took there. What a long text is and the words in it that
    look like paths are remembered by its length and hash."""
    paste = "\n".join(f"2026-11-01T03:{i % 60:02d}:00Z WARN worker-{i}: job {i} slow" for i in range(30_000))
    messages = [user_prompt("Fix the parser."), assistant([{"type": "text", "text": "Done."}])]
    messages += [user_prompt(f"Here is the log of the nightly run:\n{paste}")]
    shaped: list[int] = []
    share = ledger._prose_share
    monkeypatch.setattr(ledger, "_prose_share", lambda t: shaped.append(len(t)) or share(t))

    class Counting:
        words = 0

        def match(self, word: str) -> Any:
            Counting.words += 1
            return pattern.match(word)

    pattern = ledger._PATHISH
    monkeypatch.setattr(ledger, "_PATHISH", Counting())
    texts = [ledger.attachment(messages, [], "/p", 167_000, room=5_000).message.text for _ in range(3)]
    assert texts[0] == texts[1] == texts[2] and "Here is the log of the nightly run:" in texts[0]
    assert len([n for n in shaped if n > 20_000]) == 1, shaped  # was 6: twice a compaction
    assert Counting.words < 1.1 * len(paste.split())  # was 3x: once a compaction
