"""End to end in a real terminal: the `compact-agent` REPL in tmux, against the fake Messages API.

Each test starts the real CLI in a private tmux server (its own socket), types with send-keys and reads
the screen with capture-pane, polling with a deadline. The fake runs in this process, so the test can
script replies and inspect every request the agent sent.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from tests.fakeapi import PROFILES, Reply, is_compaction, last_user_text
from tests.helpers.tmux import LONG_REPLY, TMUX
from tests.helpers.transcripts import session_records

pytestmark = pytest.mark.skipif(not Path(TMUX).exists(), reason="tmux is not installed")


def slow_streams(fake_api, monkeypatch, predicate, pause: float) -> tuple[threading.Event, threading.Event]:
    """Streams of requests matching predicate wait ``pause`` seconds before each text delta but the first
    (a thinking block before the text comes at once: paced too, it held the first text back).

    Returns (slowed, release): ``slowed`` is set once such a stream has sent its first text delta; setting
    ``release`` ends the pauses.
    """
    slowed, release = threading.Event(), threading.Event()
    render = fake_api._render

    def paced(events):
        deltas = 0
        for event in events:
            if event[0] == "content_block_delta" and event[1]["delta"]["type"] == "text_delta":
                deltas += 1
                if deltas > 1:
                    slowed.set()
                    release.wait(pause)
            yield event

    def rendered(request, step):
        answer = render(request, step)
        if answer.events is not None and predicate(request.body):
            answer.events = paced(answer.events)
        return answer

    monkeypatch.setattr(fake_api, "_render", rendered)
    return slowed, release


def test_reply_warning_compact_context_and_exit(agent_in_tmux, fake_api):
    # the LLM summary scripted below (on the 5.5 family a reply holding thinking is otherwise kept through
    # the server's summary, which the fake writes itself)
    pane = agent_in_tmux(CLAUDE_CODE_AUTO_COMPACT_WINDOW="60000", COMPACT_AGENT_SERVER_COMPACTION="0")
    fake_api.reply_text(LONG_REPLY)  # ~10K output tokens
    pane.type("hello, please write a lot")
    pane.wait_for("END-OF-LONG-REPLY")
    # window 60,000: T = 27,000 and the warning starts at 7,000 tokens; the bar sits under the prompt
    screen = pane.wait_for(r"Context left until auto-compact: \d+%", visible=True)
    assert "Reply line 559" in screen

    fake_api.reply_text(
        "<analysis>Reviewing.</analysis>\n<summary>The user said hello and got a long reply.</summary>"
    )
    pane.type("/compact keep the greeting")
    screen = pane.wait_for(r"Compacted · manual · \d+(\.\d)?k → \d+(\.\d)?k? tokens · \d+(\.\d)?s")
    compaction = [r.body for r in fake_api.message_requests if is_compaction(r.body)]
    assert len(compaction) == 1 and "keep the greeting" in last_user_text(compaction[0])
    pane.wait_prompt()
    assert "until auto-compact" not in pane.visible()  # back under the warning level

    pane.type("/context")
    screen = pane.wait_for("Autocompact buffer")
    for name in ("Context usage", "System prompt", "System tools", "Memory files", "Messages", "Free space"):
        assert name in screen
    pane.wait_prompt()
    pane.type("/exit")
    pane.wait_exit()
    assert fake_api.violations == []
    fake_api.check()


def test_ctrl_c_interrupts_a_reply_a_bash_call_and_a_compaction(agent_in_tmux, fake_api):
    # the compaction interrupted is the LLM summary, which the test holds up (see above)
    pane = agent_in_tmux("--dangerously-skip-permissions", COMPACT_AGENT_SERVER_COMPACTION="0")
    arrived, interrupted = threading.Event(), threading.Event()

    # each answers only once Ctrl-C has been seen (a fixed pause could end first on a loaded machine)
    def slow_reply(body: dict) -> Reply:
        arrived.set()
        interrupted.wait(30)
        return Reply.text(LONG_REPLY)

    def slow_summary(body: dict) -> Reply:
        arrived.set()
        interrupted.wait(30)
        return Reply.text("<summary>too late</summary>")

    # 1. while the model is answering
    fake_api.on(lambda b: "answer slowly" in last_user_text(b), slow_reply, once=True)
    # a long answer: /compact below has something to save (a conversation no larger than what a
    # compaction leaves is not compacted, be093eb)
    fake_api.reply_text("Still here after the first interruption.\n" + LONG_REPLY)
    pane.type("answer slowly")
    assert arrived.wait(30)
    started = time.monotonic()
    pane.keys("C-c")
    pane.wait_for("Interrupted by user")
    assert time.monotonic() - started < 5
    interrupted.set()
    pane.wait_prompt()
    pane.type("are you there?")
    pane.wait_for("Still here after the first interruption.")
    pane.wait_prompt()

    # 2. while Bash runs `sleep 30`
    fake_api.reply_tool("Bash", {"command": "sleep 30"})
    fake_api.reply_text("Still here after the second interruption.")
    pane.type("run the long command")
    pane.wait_for(r"Bash\(sleep 30\)")
    time.sleep(0.3)
    started = time.monotonic()
    pane.keys("C-c")
    pane.wait_for("Interrupted by user", count=2)
    assert time.monotonic() - started < 5
    pane.wait_prompt()
    pane.type("and now?")
    pane.wait_for("Still here after the second interruption.")
    pane.wait_prompt()

    # 3. while compacting (a long answer first: what the compaction takes away, else there is nothing to compact)
    fake_api.reply_text(LONG_REPLY)
    pane.type("tell me the long version")
    pane.wait_for("END-OF-LONG-REPLY")
    pane.wait_prompt()
    arrived.clear()
    interrupted.clear()
    fake_api.on(is_compaction, slow_summary, once=True)
    pane.type("/compact")
    assert arrived.wait(30)
    pane.wait_for("Compacting conversation")
    pane.keys("C-c")
    pane.wait_for("Compaction cancelled")
    interrupted.set()
    pane.wait_prompt()
    fake_api.reply_text("Still here after the third interruption.")
    pane.type("last one")
    pane.wait_for("Still here after the third interruption.")
    pane.wait_prompt()

    assert fake_api.violations == []
    last = fake_api.message_requests[-1].body
    texts = json.dumps(last["messages"])
    assert "run the long command" in texts and "answer slowly" in texts  # the compaction changed nothing
    assert texts.count("[Request interrupted by user]") == 2
    markers = [
        r
        for r in session_records(pane.home)
        if r.get("isMeta") and "interrupted by user" in json.dumps(r.get("message", {})).lower()
    ]
    assert len(markers) == 2
    pane.keys("C-d")
    pane.wait_exit()
    fake_api.check()


def test_second_ctrl_c_at_an_empty_prompt_exits(agent_in_tmux):
    pane = agent_in_tmux()
    pane.tmux("send-keys", "-t", "main", "-l", "some draft")
    pane.keys("C-c")  # clears the draft
    pane.keys("C-c")
    pane.wait_for("Press Ctrl-C again to exit")
    assert pane.alive()
    pane.keys("C-c")
    pane.wait_exit()


def test_esc_during_a_streamed_reply_returns_to_the_prompt(agent_in_tmux, fake_api, monkeypatch):
    # A pause, not a stall: the client notices the cancel when the next bytes arrive (closing the
    # stream from another thread does not wake a read that is blocked on the socket).
    slowed, release = slow_streams(fake_api, monkeypatch, lambda b: "stream slowly" in last_user_text(b), 2.0)
    pane = agent_in_tmux()
    # the fake streams a text in three pieces: the first holds the whole first paragraph
    fake_api.reply_text(
        "The first paragraph, in **bold** at once.\n\nThe second paragraph never ends " + "slowly " * 25
    )
    fake_api.reply_text("Back after Esc.")
    try:
        pane.type("stream slowly")
        assert slowed.wait(30)
        screen = pane.wait_for("The first paragraph, in bold at once.")
        assert "**" not in screen  # rendered as Markdown, not raw
        started = time.monotonic()
        pane.keys("Escape")
        screen = pane.wait_for("Interrupted by user")
        assert time.monotonic() - started < 5
        # the unfinished paragraph is shown once, before the interruption line
        assert screen.count("The second paragraph never ends") == 1
        assert screen.index("The second paragraph never ends") < screen.index("Interrupted by user")
        pane.wait_prompt()
    finally:
        release.set()
    pane.type("still there?")
    pane.wait_for("Back after Esc.")
    pane.wait_prompt()

    assert fake_api.violations == []
    last = fake_api.message_requests[-1].body
    assert "still there?" in last_user_text(last)
    assert json.dumps(last["messages"]).count("[Request interrupted by user]") == 1
    markers = [
        r
        for r in session_records(pane.home)
        if r.get("isMeta") and "interrupted by user" in json.dumps(r.get("message", {})).lower()
    ]
    assert len(markers) == 1
    pane.keys("C-d")
    pane.wait_exit()
    fake_api.check()


def test_a_spoofing_command_title_and_clipboard_sequences_are_shown_never_obeyed(
    agent_in_tmux, fake_api, project
):
    pane = agent_in_tmux()
    pane.tmux("set-option", "-g", "set-clipboard", "on")  # let OSC 52 reach tmux's buffers, as it could
    title = pane.tmux("display-message", "-p", "-t", "main", "#{pane_title}").stdout
    esc = "\x1b"
    # 1. the attack: the question would be redrawn as an innocent "echo hello"
    fake_api.reply_tool("Bash", {"command": f"touch PWNED #{esc}[2K{esc}[1G● Bash(echo hello"})
    pane.type("go")
    pane.wait_for("Allow\\?")
    screen = pane.screen()
    assert "Bash(touch PWNED #\\x1b[2K\\x1b[1G● Bash(echo hello)" in screen, screen
    pane.wait_answer()
    pane.type("n")
    pane.wait_for("→ No")
    pane.wait_prompt()
    # 2. model text and a command's output that set the title and write the clipboard
    fake_api.reply_text(f"Sure.{esc}]0;model-title\x07{esc}]52;c;bW9kZWw=\x07 Done")
    pane.type("talk")
    pane.wait_for("Done")
    pane.wait_prompt()
    fake_api.reply_tool(
        # (it writes a file, so it is asked about: a line that only looks would run without a question)
        "Bash",
        {
            "command": "printf '\\033]2;tool-title\\007\\033]52;c;dG9vbA==\\007' ; echo out > o.txt ; cat o.txt"
        },
    )
    fake_api.reply_text("Ran it.")
    pane.type("run")
    pane.wait_for("Allow\\?", count=2)
    pane.wait_answer()
    pane.type("y")
    pane.wait_for("Ran it.")
    pane.wait_prompt()
    screen = pane.screen()
    assert "\\x1b]0;model-title\\x07\\x1b]52;c;bW9kZWw=\\x07" in screen, screen
    assert "\\x1b]2;tool-title\\x07\\x1b]52;c;dG9vbA==\\x07out" in screen, screen
    assert pane.tmux("display-message", "-p", "-t", "main", "#{pane_title}").stdout == title
    assert pane.tmux("list-buffers").stdout == ""  # nothing reached the clipboard
    assert not (project / "PWNED").exists()
    pane.keys("C-d")
    pane.wait_exit()
    fake_api.check()


def test_ctrl_c_stops_a_hanging_pre_tool_use_hook(agent_in_tmux, fake_api, project, isolated_env):
    marker = project / "hook-pid"
    settings = isolated_env / ".compact-agent" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    hook = {"type": "command", "command": f"echo $$ > {marker}; exec sleep 300"}  # no timeout: 600 s
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [hook]}]}}))
    pane = agent_in_tmux("--dangerously-skip-permissions")
    fake_api.reply_tool("Bash", {"command": "touch ran"})
    pane.type("go")
    deadline = time.monotonic() + 30
    while not marker.exists() or not marker.read_text().strip():
        assert time.monotonic() < deadline, pane.screen()
        time.sleep(0.05)
    pid = int(marker.read_text())
    started = time.monotonic()
    pane.keys("C-c")
    pane.wait_for("Interrupted by user")
    assert time.monotonic() - started < 5
    deadline = time.monotonic() + 5
    while _alive(pid):  # the hook's whole group was killed
        assert time.monotonic() < deadline, "the hook survived Ctrl-C"
        time.sleep(0.05)
    pane.wait_prompt()
    assert not (project / "ran").exists()
    fake_api.reply_text("Still here after the hook.")
    pane.type("and now?")
    pane.wait_for("Still here after the hook.")
    pane.wait_prompt()  # a Ctrl-D typed while the turn ends is the next prompt's type-ahead: racy under load
    assert fake_api.violations == []
    pane.keys("C-d")
    pane.wait_exit()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_tab_on_an_empty_line_toggles_thinking_and_the_thinking_shows_folded(agent_in_tmux, fake_api):
    fake_api.profile = PROFILES["4.x"]  # thinking by budget: a 4.x model, as the 4.x API takes it
    thought = "First I look.\nThen I compare.\nThen I decide.\nHIDDEN-FOURTH-LINE"
    fake_api.add(
        Reply(
            [
                {"type": "thinking", "thinking": thought, "signature": "fake-signature"},
                {"type": "text", "text": "Thought it through."},
            ]
        )
    )
    pane = agent_in_tmux(ANTHROPIC_MODEL="claude-sonnet-4-5")
    pane.keys("Tab")
    pane.wait_for(r"✻ thinking on \(tab to turn off\)", visible=True)
    pane.type("hello")
    pane.wait_for("Thought it through.")
    screen = pane.wait_for(r"1 more line of thinking")
    assert "✻ Thinking…" in screen and "Then I decide." in screen and "HIDDEN-FOURTH-LINE" not in screen
    assert fake_api.message_requests[0].body["thinking"]["type"] == "enabled"
    pane.wait_prompt()
    pane.keys("Tab")
    deadline = time.monotonic() + 30
    while "thinking on" in pane.visible():
        assert time.monotonic() < deadline, pane.visible()
        time.sleep(0.05)
    fake_api.check()


def test_a_tool_chain_shows_the_models_progress_between_calls(agent_in_tmux, fake_api, project):
    """The 5.5 family writes its progress between tool calls inside thinking blocks: the REPL shows it as
    text, between the calls, as it showed a 4.x model's text; the toolbar shows thinking and effort."""
    (project / "a.txt").write_text("alpha\n")
    fake_api.add(
        Reply.tool("Read", {"file_path": str(project / "a.txt")}, text="PROGRESS-ONE: reading a.txt.")
    )
    fake_api.add(Reply.tool("Bash", {"command": "echo checked"}, text="PROGRESS-TWO: a quick check."))
    fake_api.add(Reply.text("ALL-DONE."))
    pane = agent_in_tmux("--dangerously-skip-permissions", CLAUDE_CODE_EFFORT_LEVEL="medium")
    pane.wait_for(r"✻ thinking on · effort medium \(tab to turn off\)", visible=True)
    pane.type("go")
    screen = pane.wait_for("ALL-DONE.")
    order = [screen.index(mark) for mark in ("PROGRESS-ONE", "Read(", "PROGRESS-TWO", "Bash(", "ALL-DONE.")]
    assert order == sorted(order), screen
    assert fake_api.message_requests[0].body["thinking"] == {"type": "adaptive", "display": "updates"}
    pane.wait_prompt()
    pane.type("/effort low")
    pane.wait_for(r"Effort: low")
    pane.keys("Tab")
    pane.wait_for(r"thinking off · effort low \(tab to turn on\)", visible=True)
    fake_api.check()
