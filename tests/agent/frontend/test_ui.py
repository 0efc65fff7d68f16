"""The Renderer over a StringIO console: whole rendered strings for events, compaction and warnings."""

from __future__ import annotations

from pathlib import Path

from agent.frontend import commands
from agent.frontend.ui import Renderer, complete_blocks, context_grid, numbered_diff, warning_of
from agent.runtime.tool_exec import INTERRUPTED, NOBODY_TO_ASK, USER_SAID_NO
from compact.decision import thresholds
from core.events import (
    CallsInParallel,
    CompactFailed,
    CompactFinished,
    CompactStarted,
    MessageRecorded,
    Notice,
    PermissionDenied,
    Retrying,
    SubagentEvent,
    SubagentStarted,
    TextDelta,
    TodosChanged,
    TokenState,
    ToolFinished,
    ToolOutput,
    ToolStarted,
    TurnFinished,
)
from core.messages import assistant
from tests.helpers.frontend import console, render


def test_a_short_session_renders_text_tools_diffs_errors_and_retries():
    out = render(
        TextDelta("Let me look"),
        TextDelta(" at it."),
        MessageRecorded(assistant([{"type": "text", "text": "Let me look at it."}])),
        ToolStarted("t1", "Read", {"file_path": "/p/app.py"}),
        ToolFinished("t1", "Read", "     1\tx = 1\n", False, "Read 1 line"),
        ToolStarted("t2", "Bash", {"command": "ls -la\necho second line"}),
        ToolFinished("t2", "Bash", "a\nb\nc\nd\ne", False),
        ToolStarted("t3", "Edit", {"file_path": "/p/app.py", "old_string": "x = 1", "new_string": "x = 2"}),
        ToolFinished("t3", "Edit", "The file was edited.", False, "Updated /p/app.py"),
        ToolStarted("t4", "Write", {"file_path": "/p/new.txt", "content": "one\ntwo\n"}),
        ToolFinished("t4", "Write", "Wrote it.", False, "Wrote 2 lines to /p/new.txt"),
        ToolStarted("t5", "Grep", {"pattern": "TODO", "path": "src"}),
        ToolFinished("t5", "Grep", "No such directory: src", True),
        Retrying(1, "overloaded", 1.0),
        TextDelta("Done."),
        MessageRecorded(assistant([{"type": "text", "text": "Done."}])),
        TurnFinished("Done.", "end_turn"),
    )
    assert out == (
        "● Let me look at it.\n"
        "● Read(/p/app.py)\n"
        "  ⎿  Read 1 line\n"
        "● Bash(ls -la …)\n"
        "  ⎿  a\n"
        "     b\n"
        "     c\n"
        "     … +2 lines\n"
        "● Edit(/p/app.py)\n"
        "  ⎿  Updated /p/app.py\n"
        "     -x = 1\n"
        "     +x = 2\n"
        "● Write(/p/new.txt)\n"
        "  ⎿  Wrote 2 lines to /p/new.txt\n"
        "     +one\n"
        "     +two\n"
        "● Grep(TODO in src)\n"
        "  ⎿  No such directory: src\n"
        "Retrying in 1s… (attempt 2) · overloaded\n"
        "● Done.\n"
    )


def test_turn_endings_and_notices():
    out = render(
        TextDelta("Working on"),
        TurnFinished("Working on", "interrupted", "Interrupted by user"),
        Notice("PreCompact hook said hello"),
        Notice("Auto-compact failed 3 times in a row; it is off for this session.", "warning"),
        TurnFinished("", "error", "API error 500: Internal server error"),
        TurnFinished("", "context_limit", "Context limit reached · /compact or /clear to continue"),
    )
    assert out == (
        "● Working on\n"
        "  ⎿  Interrupted by user\n"
        "PreCompact hook said hello\n"
        "Auto-compact failed 3 times in a row; it is off for this session.\n"
        "API error 500: Internal server error\n"
        "Context limit reached · /compact or /clear to continue\n"
    )


def test_compaction_line_manual_and_auto_with_hook_messages_and_failure():
    out = render(
        CompactStarted("manual"),
        CompactFinished(
            "manual",
            154_321,
            18_042,
            21.4,
            "summary",
            "S",
            ("PreCompact hook output added to the summary instructions",),
        ),
        CompactStarted("reactive"),
        CompactFinished("reactive", 9_500, 850, 3.0, "session-memory"),
        CompactStarted("auto"),
        CompactFailed("auto", "the summary came back empty"),
        CompactStarted("manual"),
        CompactFailed("manual", "cancelled"),
        CompactStarted("manual"),
        CompactFailed("manual", "nothing to compact (4,100 tokens; a compaction would leave 4,300)"),
    )
    assert out == (
        "Compacted · manual · 154k → 18k tokens · 21.4s\n"
        "  ⎿  PreCompact hook output added to the summary instructions\n"
        "  ⎿  /summary (or ctrl+o) shows the summary\n"
        "Compacted · auto · 9.5k → 850 tokens · 3.0s\n"
        "  ⎿  /summary (or ctrl+o) shows the summary\n"
        "Compaction failed: the summary came back empty\n"
        "Compaction cancelled · the conversation is unchanged\n"
        "Nothing to compact (4,100 tokens; a compaction would leave 4,300)\n"
    )


def test_compaction_line_says_how_much_state_was_attached_and_todos_render_as_a_checklist():
    todos = (
        {"content": "Fix the parser", "status": "completed", "activeForm": "Fixing the parser"},
        {"content": "Run the tests", "status": "in_progress", "activeForm": "Running the tests"},
        {"content": "Update the docs", "status": "pending", "activeForm": "Updating the docs"},
    )
    out = render(
        TodosChanged(todos),
        CompactStarted("auto"),
        CompactFinished(
            "auto",
            170_000,
            20_000,
            2.0,
            "summary",
            "S",
            (),
            "state: 3 modified files, 5 read, 8 commands, 3 todos, 2 user messages",
        ),
        width=160,
    )
    assert out == (
        "  ⎿  ☒ Fix the parser\n"
        "     ☐ Running the tests\n"
        "     ☐ Update the docs\n"
        "Compacted · auto · 170k → 20k tokens · 2.0s · state: 3 modified files, 5 read, 8 commands, 3 todos, "
        "2 user messages\n"
        "  ⎿  /summary (or ctrl+o) shows the summary\n"
    )


def state_at(tokens: int, *, auto: bool = True) -> TokenState:
    return thresholds.token_state(tokens, thresholds.compute(200_000, 64_000, auto_enabled=auto))


def test_warning_states_at_the_three_thresholds():
    # 200K model: T 167,000; warning from 147,000; error from 157,000; blocking at 177,000
    assert warning_of(None) is None
    assert warning_of(state_at(146_999)) is None
    assert warning_of(state_at(147_000)) == ("warning", "Context left until auto-compact: 12%")
    assert warning_of(state_at(157_000)) == ("error", "Context left until auto-compact: 6%")
    assert warning_of(state_at(177_000)) == (
        "blocking",
        "Context limit reached · /compact or /clear to continue",
    )


def test_warning_text_when_auto_compact_is_off():
    # off: E (180,000) takes T's place, so the warning starts at 160,000
    assert warning_of(state_at(159_999, auto=False)) is None
    assert warning_of(state_at(165_000, auto=False)) == (
        "warning",
        "Context low (8% remaining) · Run /compact to compact & continue",
    )


def test_colours_and_no_color():
    events = (Notice("bad", "error"), Notice("careful", "warning"))
    coloured = render(*events, force_terminal=True, color_system="standard")
    assert "\x1b[31mbad" in coloured and "\x1b[33mcareful" in coloured
    plain = render(*events, force_terminal=True, color_system="standard", no_color=True)
    assert "\x1b[31m" not in plain and "\x1b[33m" not in plain
    assert "bad" in plain and "careful" in plain


def test_context_grid_and_legend():
    cats = [
        commands.Category("System prompt", "system", 3_000, 1.5, 2),
        commands.Category("System tools", "tools", 9_000, 4.5, 5),
        commands.Category("Memory files", "memory", 0, 0.0, 0),
        commands.Category("Messages", "messages", 20_000, 10.0, 10),
        commands.Category("Free space", "free", 135_000, 67.5, 66),
        commands.Category("Autocompact buffer", "buffer", 33_000, 16.5, 17),
    ]
    usage = commands.ContextUsage(
        "",
        model="claude-sonnet-4-5",
        used=32_000,
        window=200_000,
        percent=16.0,
        categories=cats,
        memory_files=[],
    )
    con, buf = console(width=100)
    con.print(context_grid(usage))
    assert buf.getvalue() == (
        "Context usage\n"
        "■ ■ ■ ■ ■ ■ ■ ■ ■ ■   claude-sonnet-4-5 · 32k/200k tokens (16%)\n"
        "■ ■ ■ ■ ■ ■ ■ □ □ □\n"
        "□ □ □ □ □ □ □ □ □ □   ■ System prompt: 3.0k tokens (1.5%)\n"
        "□ □ □ □ □ □ □ □ □ □   ■ System tools: 9.0k tokens (4.5%)\n"
        "□ □ □ □ □ □ □ □ □ □   ■ Memory files: 0 tokens (0.0%)\n"
        "□ □ □ □ □ □ □ □ □ □   ■ Messages: 20k tokens (10.0%)\n"
        "□ □ □ □ □ □ □ □ □ □   □ Free space: 135k tokens (67.5%)\n"
        "□ □ □ □ □ □ □ □ □ □   ▨ Autocompact buffer: 33k tokens (16.5%)\n"
        "□ □ □ ▨ ▨ ▨ ▨ ▨ ▨ ▨\n"
        "▨ ▨ ▨ ▨ ▨ ▨ ▨ ▨ ▨ ▨\n"
    )


def test_permission_question_shows_exactly_what_will_run_and_the_call_does_not_repeat_it():
    con, buf = console()
    r = Renderer(con)
    edit = {"file_path": "/p/app.py", "old_string": "x = 1", "new_string": "x = 2"}
    r.permission(
        "Edit", edit, "Edit /p/app.py\n--- app.py before\n+++ app.py after\n@@ -1 +1 @@\n-x = 1\n+x = 2"
    )
    r.answered("Edit", edit, "Yes")
    r(ToolStarted("t1", "Edit", edit))
    r(ToolFinished("t1", "Edit", "The file was edited.", False, "Updated /p/app.py"))
    bash = {"command": "rm -rf build", "description": "clean the build"}
    r.permission("Bash", bash, "rm -rf build\n# clean the build")
    r.answered("Bash", bash, "No")
    r.permission("Bash", {"command": "ls"}, "ls")
    r.answered("Bash", {"command": "ls"}, "Yes")
    r(Notice("PreToolUse hook said hi"))
    r(ToolStarted("t2", "Bash", {"command": "ls"}))
    assert buf.getvalue() == (
        "● Edit(/p/app.py)\n"
        "  ╭─────────────╮\n"
        "  │    1 -x = 1 │\n"
        "  │    1 +x = 2 │\n"
        "  ╰─────────────╯\n"
        "  Allow? [y]es / [n]o / [a]lways for this session · Enter: no\n"
        "  → Yes\n"
        "  ⎿  Updated /p/app.py\n"
        "● Bash(rm -rf build)\n"
        "  ╭───────────────────╮\n"
        "  │ rm -rf build      │\n"
        "  │ # clean the build │\n"
        "  ╰───────────────────╯\n"
        "  Allow? [y]es / [n]o / [a]lways for this session · Enter: no\n"
        "  → No\n"
        "● Bash(ls)\n"
        "  Allow? [y]es / [n]o / [a]lways for this session · Enter: no\n"
        "  → Yes\n"
        "PreToolUse hook said hi\n"
        "● Bash(ls)\n"  # something came in between: the header again
    )


def test_long_result_lines_wrap_under_their_indent():
    out = render(
        ToolStarted("t1", "Bash", {"command": "cat notes"}),
        ToolFinished("t1", "Bash", "word " * 20, False),
        width=40,
    )
    assert out == (
        "● Bash(cat notes)\n"
        "  ⎿  word word word word word word word\n"
        "     word word word word word word word\n"
        "     word word word word word word\n"
    )


def test_status_text_counts_seconds_and_streamed_tokens():
    now = [100.0]
    con, _ = console()
    r = Renderer(con, clock=lambda: now[0])
    r.begin_turn()
    now[0] = 112.0
    r(TextDelta("x" * 4800))
    r(MessageRecorded(assistant([{"type": "text", "text": "x"}])))
    assert r.status_text() == "Working… 12s · ↓ 1.2k tokens · esc to interrupt"
    r(CompactStarted("auto"))
    now[0] = 121.0
    assert r.status_text() == "Compacting conversation… 9s · esc to interrupt"


def test_a_permission_questions_wait_is_not_counted_by_the_spinner():
    now = [100.0]
    con, _ = console()
    r = Renderer(con, clock=lambda: now[0])
    r.begin_turn()
    now[0] = 103.0
    r.pause()  # the question is asked ...
    now[0] = 190.0  # ... and answered 87 s later
    r.resume()
    now[0] = 192.0
    assert r.status_text() == "Working… 5s · esc to interrupt"


def test_a_call_refused_by_a_rule_says_what_and_why_and_a_no_is_not_repeated():
    reason = 'Bash is denied by the rule "Bash(rm:*)" in the settings'
    out = render(
        PermissionDenied("t1", "Bash", {"command": "rm -rf build"}, reason),
        PermissionDenied("t2", "Bash", {"command": "ls"}, USER_SAID_NO),
        PermissionDenied("t3", "Edit", {"file_path": "/p/a"}, f"needs approval (x) {NOBODY_TO_ASK}"),
    )
    assert out == f"● Bash(rm -rf build)\n  ⎿  Not run: {reason}\n"


def test_calls_run_side_by_side_show_in_the_messages_order_each_once():
    """Issue 41 item 6: readers run in parallel finish in any order; each call is shown whole (its header,
    then its result), once, in the order of the message."""
    read = {n: {"file_path": f"/p/{n}.txt"} for n in "abc"}
    out = render(
        CallsInParallel(("t1", "t2", "t3")),
        ToolStarted("t3", "Read", read["c"]),
        ToolStarted("t1", "Read", read["a"]),
        ToolFinished("t3", "Read", "c", False, "Read 3 lines"),
        ToolStarted("t2", "Read", read["b"]),
        ToolFinished("t2", "Read", "b", False, "Read 2 lines"),
        ToolFinished("t1", "Read", "a", False, "Read 1 line"),
        ToolStarted("t4", "Bash", {"command": "ls"}),
        ToolFinished("t4", "Bash", "x", False),
    )
    assert out == (
        "● Read(/p/a.txt)\n  ⎿  Read 1 line\n● Read(/p/b.txt)\n  ⎿  Read 2 lines\n"
        "● Read(/p/c.txt)\n  ⎿  Read 3 lines\n● Bash(ls)\n  ⎿  x\n"
    )
    # an interruption: what had started is shown when the turn ends, in order
    out = render(
        CallsInParallel(("t1", "t2")),
        ToolStarted("t2", "Read", read["b"]),
        TurnFinished("", "interrupted"),
    )
    assert out.index("● Read(/p/b.txt)") < out.index("Interrupted by user")


def test_a_subagents_refused_call_says_which_subagent_what_and_why():
    reason = 'Bash is denied by the rule "Bash(rm:*)" in the settings'
    out = render(
        SubagentStarted("a1", "t1", "Clean the build", "general-purpose"),
        SubagentEvent("a1", "t1", PermissionDenied("s1", "Bash", {"command": "rm -rf build"}, reason)),
        SubagentEvent("a1", "t1", PermissionDenied("s2", "Bash", {"command": "ls"}, USER_SAID_NO)),
        SubagentEvent("a1", "t1", ToolStarted("s3", "Bash", {"command": "ls"})),
    )
    assert " ".join(out.split()) == f"⎿ Clean the build: Bash(rm -rf build) not run: {reason}"


def test_a_refusal_whose_reason_has_several_lines_shows_them_as_lines():
    out = render(
        PermissionDenied("t1", "Bash", {"command": "make"}, "a PreToolUse hook blocked it:\nnot now")
    )
    assert "\\n" not in out and out.endswith("  ⎿  Not run: a PreToolUse hook blocked it:\n     not now\n")


def test_an_attached_file_shows_a_line_and_a_refused_one_why():
    from agent.runtime.mentions import MENTIONED, SIZE
    from core.messages import meta

    out = render(
        MessageRecorded(
            meta("The user attached /p/a.py ...", attachedPath="/p/a.py", **{MENTIONED: "a.py", SIZE: 12})
        ),
        MessageRecorded(
            meta(
                "The user attached the directory /p/src ...",
                attachedPath="/p/src",
                **{MENTIONED: "src", SIZE: 1},
            )
        ),
        MessageRecorded(
            meta(
                "@.env was not attached: the user's permission rules deny reading it.", **{MENTIONED: ".env"}
            )
        ),
        MessageRecorded(meta("SessionStart hook output")),
    )
    assert out == (
        "  ⎿  Attached @a.py (12 lines)\n"
        "  ⎿  Attached @src (1 entry)\n"
        "  ⎿  @.env was not attached: the user's permission rules deny reading it.\n"
    )


def test_a_stopped_commands_last_lines_stay_on_screen():
    out = render(
        ToolStarted("t1", "Bash", {"command": "make"}),
        ToolOutput("".join(f"step {i}\n" for i in range(1, 9))),
        ToolFinished("t1", "Bash", f"{INTERRUPTED}\n\nCommand was interrupted", True),
        TurnFinished(text="", stop_reason="interrupted", error="Interrupted by user", usage={}),
    )
    assert out == (
        "● Bash(make)\n"
        + "".join(f"{'  ⎿  ' if i == 4 else '     '}step {i}\n" for i in range(4, 9))
        + "  ⎿  Interrupted by user\n"
    )


REPLY = (
    "Here is the **plan**: read `app.py`, then fix it.\n"
    "\n"
    "- first *item*\n"
    "- second item\n"
    "  continues here\n"
    "\n"
    "```python\n"
    "def add(a, b):\n"
    "    return a + b\n"
    "```\n"
    "That is all."
)
REPLY_RENDERED = (
    "● Here is the plan: read app.py, then fix it.\n"
    "\n"
    "   • first item\n"
    "   • second item\n"
    "     continues here\n"
    "\n"
    "    def add(a, b):\n"
    "        return a + b\n"
    "\n"
    "  That is all.\n"
)


def test_markdown_is_rendered_block_by_block_while_it_streams():
    # cuts inside "**", inside the fence line "```python" and inside the closing fence
    cuts = [
        "Here is the *",
        "*pla",
        "n**: read `app",
        ".py`, then fix it.\n",
        "\n- first *it",
        "em*\n- sec",
        "ond item\n  continues here\n\n`",
        "``pyt",
        "hon\ndef add(a, b):\n    return a + b\n`",
        "``",
        "\nThat is",
        " all.",
    ]
    assert "".join(cuts) == REPLY
    con, buf = console()
    r = Renderer(con)
    seen = []
    for cut in cuts:
        r(TextDelta(cut))
        seen.append(buf.getvalue())
    r(MessageRecorded(assistant([{"type": "text", "text": REPLY}])))
    paragraph = "● Here is the plan: read app.py, then fix it.\n"
    first_item = paragraph + "\n   • first item\n"
    the_list = first_item + "   • second item\n     continues here\n"
    # the paragraph's line once it ends; an item once the next one's line is whole; the list's end once
    # the fence line after it is whole; the code once its closing fence line is whole; the last line
    # when the message is recorded
    assert seen == [
        "",
        "",
        "",
        paragraph,
        paragraph,
        paragraph,
        first_item,
        first_item,
        the_list,
        the_list,
        REPLY_RENDERED[: -len("\n  That is all.\n")],
        REPLY_RENDERED[: -len("\n  That is all.\n")],
    ]
    assert buf.getvalue() == REPLY_RENDERED


def test_a_paragraph_streams_line_by_line_and_keeps_its_single_newlines():
    con, buf = console()
    r = Renderer(con)
    seen = []
    for cut in [
        "First **line**",
        " ends here.\nSecond li",
        "ne.\n",
        "\nA new paragraph.\n",
        "- item\n",
        "\nEnd.\n",
    ]:
        r(TextDelta(cut))
        seen.append(buf.getvalue())
    r(TurnFinished("", "end_turn"))
    first = "● First line ends here.\n"
    two = first + "  Second line.\n"
    three = two + "\n  A new paragraph.\n"
    # a list item waits for its list to end
    assert seen == ["", first, two, three, three, three + "   • item\n\n  End.\n"]
    assert buf.getvalue() == seen[-1]


def test_list_items_stream_one_by_one_and_a_fence_inside_an_item_holds_them():
    con, buf = console()
    r = Renderer(con)
    seen = []
    for cut in [
        "1. one\n",
        "2. two\n   more\n",
        "3. three\n   ```sh\n",
        "   4. inside the fence\n",
        "   ```\n",
        "4. four\n",
        "\nDone.\n",
    ]:
        r(TextDelta(cut))
        seen.append(buf.getvalue())
    one = "●  1 one\n"
    two = one + "   2 two\n     more\n"
    three = two + "   3 three\n       4. inside the fence\n"
    assert seen == ["", one, two, two, two, three, three + "   4 four\n\n  Done.\n"]


def test_markdown_in_one_delta_renders_the_same_and_each_reply_gets_its_bullet():
    out = render(
        TextDelta(REPLY),
        ToolStarted("t1", "Read", {"file_path": "/p/app.py"}),
        ToolFinished("t1", "Read", "x", False, "Read 1 line"),
        TextDelta("# Result\n\nAll **good**; see <b>app.py</b>."),
        TurnFinished("", "end_turn"),
    )
    assert out == REPLY_RENDERED + (
        "● Read(/p/app.py)\n  ⎿  Read 1 line\n● Result\n\n  All good; see <b>app.py</b>.\n"
    )


def test_an_interrupted_reply_keeps_its_unfinished_text():
    out = render(TextDelta("Half a **sentence"), TurnFinished("", "interrupted", "Interrupted by user"))
    assert out == "● Half a **sentence\n  ⎿  Interrupted by user\n"


def test_a_retried_stream_drops_its_partial_text_and_says_so():
    out = render(
        TextDelta("First paragraph.\n\nSecond, cut"),
        Retrying(1, "the connection broke", 0.5),
        TextDelta("First paragraph.\n\nSecond, whole."),
        MessageRecorded(assistant([{"type": "text", "text": "First paragraph.\n\nSecond, whole."}])),
    )
    assert out == (
        "● First paragraph.\n"
        "Retrying in 0.5s… (attempt 2) · the connection broke · the reply starts again\n"
        "● First paragraph.\n"
        "\n"
        "  Second, whole.\n"
    )


def test_code_blocks_are_highlighted_unless_no_color():
    events = (TextDelta("```python\ndef f():\n    return 1\n```\n"), TurnFinished("", "end_turn"))
    coloured = render(*events, force_terminal=True, color_system="standard")
    assert "\x1b[94;49mdef\x1b[0m" in coloured  # keywords in bright blue, on the terminal's background
    plain = render(*events, force_terminal=True, color_system="standard", no_color=True)
    assert "\x1b[9" not in plain and "def" in plain and "return 1" in plain


def test_complete_blocks_waits_for_whole_lines_and_for_lists_to_end():
    assert complete_blocks("One.\n\nTwo") == (["One.\n"], "Two")
    assert complete_blocks("```py\nx = 1\n``") == ([], "```py\nx = 1\n``")
    assert complete_blocks("```py\n\nx = 1\n```\nafter") == (["```py\n\nx = 1\n```\n"], "after")
    assert complete_blocks("Intro:\n~~~\ncode\n~~~~\n") == (["Intro:\n", "~~~\ncode\n~~~~\n"], "")
    # a list may go on after a blank line: another item, or an indented line (here a nested fence)
    loose = "1. one\n\n2. two\n\n   ```sh\n   ls\n\n   ```\n\n"
    assert complete_blocks(loose) == ([], loose)
    assert complete_blocks(loose + "Done") == ([], loose + "Done")
    assert complete_blocks(loose + "Done\n") == ([loose[:-1]], "Done\n")


def test_a_permission_diff_shows_the_files_own_line_numbers():
    diff = [
        "@@ -12,3 +12,4 @@",
        " def add(a, b):",
        "-    return a - b",
        "+    # fixed",
        "+    return a + b",
        " ",
        "@@ -40 +41 @@",
        "-x",
        "+y",
        "... (3 more diff lines)",
    ]
    assert [line for _, line in numbered_diff(diff)] == [
        "  12  def add(a, b):",
        "  13 -    return a - b",
        "  13 +    # fixed",
        "  14 +    return a + b",
        "  15  ",
        "   ⋮",
        "  40 -x",
        "  41 +y",
        "... (3 more diff lines)",
    ]
    assert [style for style, _ in numbered_diff(diff)][:3] == ["", "red", "green"]


def test_an_interrupted_tool_prints_one_line():
    from agent.runtime.tool_exec import INTERRUPTED

    out = render(
        ToolStarted("t1", "Bash", {"command": "sleep 30"}),
        ToolFinished("t1", "Bash", f"{INTERRUPTED}\n\nPartial output:\nstarting", True),
        TurnFinished("", "interrupted", "Interrupted by user"),
    )
    assert out == "● Bash(sleep 30)\n  ⎿  Interrupted by user\n"


def test_memory_notes_render_as_markdown_and_their_path_is_never_cut():
    path = (
        "/home/someone/.compact-agent/projects/-home-someone-work-project/0b6f0c2e/session-memory/summary.md"
    )
    con, buf = console(width=60)
    Renderer(con).result(
        commands.Result(
            f"Session notes ({path}):\n\n# Current State\nFixing `ui.py`\nthen the tests", markdown=True
        )
    )
    # the heading broken between words: the path whole on a line of its own (longer than the 60 columns)
    assert buf.getvalue() == f"Session notes\n({path}):\n\nCurrent State\n\nFixing ui.py\nthen the tests\n"


def test_a_resumed_recap_shows_the_progress_written_between_tool_calls_as_it_was_shown():
    """On the 5.5 family the text between tool calls came back in thinking blocks (display "updates": the
    reasoning's text empty) and was shown as the model's words; the transcript keeps the blocks as sent,
    and a resumed session's recap shows that text again. Without ``progress`` (a model whose thinking is
    its reasoning) thinking stays out of the recap."""
    from core.messages import tool_result_block, tool_results, user_prompt

    signed = {"type": "thinking", "thinking": "", "signature": "sig_a"}
    history = [
        user_prompt("what is in a.txt?"),
        assistant(
            [
                signed,
                {"type": "thinking", "thinking": "First I will read a.txt.", "signature": "sig_b"},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.txt"}},
            ]
        ),
        tool_results([tool_result_block("toolu_1", "alpha")]),
        assistant([signed, {"type": "text", "text": "It says alpha."}]),
    ]
    con, buf = console()
    Renderer(con).recap(history, progress=True)
    out = buf.getvalue()
    assert (
        out.index("what is in a.txt?") < out.index("First I will read a.txt.") < out.index("It says alpha.")
    )
    con, buf = console()
    Renderer(con).recap(history, progress=False)
    assert "First I will read" not in buf.getvalue() and "It says alpha." in buf.getvalue()


def test_text_with_line_breaks_on_a_line_of_its_own_never_shows_an_escaped_newline():
    """Issue 41 item 3: a todo, a rule an "always" would add, text typed meanwhile, a subagent's task:
    one line each, with spaces where the text broke (real line breaks where there is room for them)."""
    con, buf = console()
    r = Renderer(con, spinner=False)
    r(TodosChanged(({"content": "fix the bug\nthen test", "status": "pending"},)))
    r.permission("Bash", {"command": "echo a\necho b"}, "echo a\necho b", always="Bash(echo a\necho b)")
    r(SubagentStarted("a1", "t1", "Look\nat it", "Explore"))
    r.queued = "first line\nsecond"
    r.begin_turn()
    status = r.status_text()
    out = buf.getvalue() + status
    assert "\\n" not in out, out
    words = " ".join(out.split())
    assert "fix the bug then test" in words and "(adds a rule for exactly this command)" in words
    assert "● Bash(echo a\n  echo b)" in out  # the whole command asked about, its lines under the header
    assert "queued: first line second" in status and "Look at it · 0 tool uses" in status


def test_the_banner_never_breaks_the_directory_mid_word(monkeypatch, tmp_path) -> None:
    """Issue 41 item 6: at 80 columns a long project path wrapped mid-word on the first screen. Beside the
    model when it fits; on its own line when not (``~/…`` under home), its middle left out past the width."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    short = home / "work" / "app"
    deep = home / "src" / ("a-rather-long-directory-name-" * 3) / "the-project"
    for cwd, width in ((short, 80), (deep, 80), (deep, 160), (Path("/srv/" + "x" * 150 + "/end"), 80)):
        con, buf = console(width=width)
        Renderer(con).banner("0.1.0", "claude-sonnet-5-5", str(cwd))
        lines = buf.getvalue().splitlines()
        assert all(len(line) <= width for line in lines), lines
        assert lines[-1] == "/help for commands"
        shown = "\n".join(lines[:-1])
        assert shown.endswith("/app" if cwd == short else "/the-project" if cwd == deep else "/end")
        if cwd == short:
            assert lines[0] == "✻ Compact Agent v0.1.0 · claude-sonnet-5-5 · ~/work/app"
        if cwd == deep and width == 160:
            assert len(lines) == 2 and lines[0].endswith(
                "~/src/" + "a-rather-long-directory-name-" * 3 + "/the-project"
            )


def test_a_long_line_under_a_compaction_goes_on_under_its_text():
    """The demo at 80 columns: "Compacted early: …" went on at the margin, under the ⎿, not its text."""
    said = (
        "Compacted early: the session notes, prepared in the background, pays for itself from 9,524 tokens "
        "(now 20,943 of 27,000): ~14 more requests × 16,181 fewer tokens each"
    )
    out = render(
        CompactStarted("auto"), CompactFinished("auto", 21_000, 4_300, 0.1, "session-memory", "S", (said,))
    )
    lines = out.splitlines()
    assert lines[1].startswith("  ⎿  Compacted early: ") and all(len(line) <= 80 for line in lines), out
    assert lines[2].startswith("     ") and lines[2].strip() and lines[3].startswith("     "), out
    assert " ".join(line.strip().removeprefix("⎿").strip() for line in lines[1:4]) == said, out


def test_a_tool_header_fits_the_terminal():
    """The demo at 80 columns: a Grep's header with a long path ran to 88 characters and wrapped."""
    path = "/tmp/day/compact-agent-demo-bvt7nwjs/home/projects/-tmp-day-tinyshop/tool-results/toolu_1.txt"
    for width in (60, 80, 160):
        out = render(ToolStarted("t1", "Grep", {"pattern": "^TOTAL", "path": path}), width=width)
        [header] = out.splitlines()
        assert header.startswith("● Grep(^TOTAL in /tmp/day/") and header.endswith(")"), out
        assert len(header) <= min(width, 88) and "…" in header, out  # the argument: 80 characters at most
