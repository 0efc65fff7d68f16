"""The user's words by what they are (issue 38): prose is never a paste, a paste keeps its head and its
tail, the task and the current request stay whole up to a bound that scales with T, the user's words
outrank verbatim tool output, and the current-request label points at the request in progress."""

from __future__ import annotations

from typing import Any

from compact.compaction import ledger
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt
from core.tokens import estimate_text

T_50K = 17_000  # about the auto-compact threshold of a 50K window
# ~600 words on one line: a spec typed as one paragraph, with a rule in its middle
RULE = "Never touch anything under migrations/ because another team applies those files in production."
SPEC = " ".join(
    [
        "We are taking over the billing service from another team and the code has grown in odd ways, so "
        "please start by reading the modules under src/ one by one and tell me how invoices are computed."
    ]
    * 12
    + [RULE]
    + [
        "When you find something surprising note it in TODO.md with the file and the line and keep going, "
        "then run the narrowest test that covers what you changed before the whole suite."
    ]
    * 12
)
CORRECTION = "Thanks. Use a base delay of 250 ms for the backoff, not 1 s, and keep the jitter."


def used(name: str, args: dict[str, Any], out: str, n: int) -> list[Message]:
    use = {"type": "tool_use", "id": f"toolu_{n:04d}", "name": name, "input": args}
    return [assistant([use], stop_reason="tool_use"), tool_results([tool_result_block(use["id"], out)])]


def log(lines: int) -> str:
    return "\n".join(
        f"2026-11-27T05:{i % 60:02d}:00Z ERROR pool-{i}: connection {i} refused (retry=3, code=0x{i:04x})"
        for i in range(lines)
    )


def session(prompts: list[str], reads: int = 6, end_with_answer: bool = True) -> list[Message]:
    messages: list[Message] = []
    n = 0
    for k, prompt in enumerate(prompts):
        messages.append(user_prompt(prompt))
        for i in range(reads):
            n += 1
            messages += used("Read", {"file_path": f"/p/src/m{k}_{i}.py"}, "x = 1\n" * 200, n)
        if k < len(prompts) - 1 or end_with_answer:
            messages.append(assistant([{"type": "text", "text": f"Done with step {k}."}]))
    return messages


def test_a_one_line_prose_spec_is_the_task_not_a_paste() -> None:
    """A ~600-word first prompt on one line was cut to its head as "pasted text, 1 lines" (the rule in
    its middle lost) on both rule sets; prose is never a paste, and the task stays whole."""
    assert len(SPEC.split()) > 500 and "\n" not in SPEC and len(SPEC) > ledger.LONG_LINE_CHARS
    assert ledger.shape_of(SPEC) == "prose"
    prompts = [SPEC, *(f"Go on with part {k}: read it and fix step_{k}." for k in range(40)), "Now run it."]
    for room in (None, 600, 0):  # however tight the room the summary and the tail leave
        text = ledger.attachment(session(prompts, 1), [], "/p", T_50K, room=room).message.text
        assert SPEC in text and "pasted text" not in text
        assert "Now run it." in text


def test_the_task_past_its_bound_keeps_its_head_and_its_tail() -> None:
    huge = " ".join([SPEC] * 8)  # ~5,000 words: past the bound at this T
    assert estimate_text(huge) > ledger.whole_bound(T_50K)
    prompts = [huge, *(f"Go on with part {k}." for k in range(3)), "Now run it."]
    out = ledger.user_messages(prompts, [], 500, whole=ledger.whole_bound(T_50K))
    assert out[0][1] == "head" and out[0][0].startswith(huge[:200]) and huge[-200:] in out[0][0]


def test_a_paste_keeps_the_instruction_on_its_last_line() -> None:
    instruction = "Fix the first refused connection above, and do not restart the pool while you do it."
    paste = f"Here is the pool log from last night:\n{log(400)}\n{instruction}"
    assert ledger.shape_of(paste) == "paste"
    middle = [paste, "Look at the parser.", "And the lexer.", "Now the tests.", "Go on."]
    out = ledger.user_messages(["Fix the pool.", *middle], [], 300, whole=ledger.whole_bound(T_50K))
    [short] = [t for t, how in out if how == "head"]
    assert short.startswith("Here is the pool log") and instruction in short
    # also when the paste is the current request, past its bound
    out = ledger.user_messages(["Fix the pool.", paste], [], 300, whole=ledger.whole_bound(T_50K))
    assert out[-1][1] == "head current" and instruction in out[-1][0]
    text = ledger.render_user(out)
    assert 'shortened="true" current-request="true"' in text and instruction in text


def test_the_users_words_outrank_verbatim_tool_output() -> None:
    """At 74% of T the task statement and a correction were "left out here for room" though keeping them
    cost ~620 tokens: a tail of tool output that leaves no room must not take the user's floor."""
    prompts = [
        "Port the retry helper in src/net/retry.py to asyncio and keep its public names. " * 4,
        *(f"Go on with part {k}: read it and fix step_{k}." for k in range(12)),
        CORRECTION,
        "Now the tests.",
    ]
    messages = session(prompts)
    for room in (0, 100):
        text = ledger.attachment(messages, [], "/p", T_50K, room=room).message.text
        assert prompts[0] in text and CORRECTION in text and "left out here for room" not in text


def test_the_current_request_label_points_at_the_request_in_progress() -> None:
    prompts = ["Fix the parser.", "Now add a test for the empty input."]
    # mid-turn: the latest prompt is the current request
    text = ledger.attachment(session(prompts, end_with_answer=False), [], "/p", T_50K).message.text
    assert '<user-message current-request="true">\nNow add a test for the empty input.' in text
    # between turns (a compaction after the answer, /compact): the next prompt will be the current one
    text = ledger.attachment(session(prompts), [], "/p", T_50K).message.text
    assert '<user-message latest-request="true" answered="true">\nNow add a test' in text
    assert "<user-message current-request" not in text
    # kept in the tail, mid-turn: labelled where it sits
    messages = session(prompts, end_with_answer=False)
    kept = [m for m in messages if m.text == prompts[1]]
    text = ledger.attachment(messages, kept, "/p", T_50K).message.text
    assert '<user-message kept-above="true" current-request="true">\nNow add a test' in text
