"""What a session keeps across /exit and --continue, in a real terminal: the hint on leaving, the
compaction still readable (/summary, /history), the note when earlier thinking is dropped, /rewind to
prompts before the compaction restoring code, /cost's subagent line. The real REPL in tmux against the
fake Messages API, a real transcript on disk."""

from __future__ import annotations

import json
import re

import pytest

from tests.fakeapi import Reply, is_compaction, is_server_compaction, last_user_text
from tests.helpers.cli import wait_for
from tests.helpers.mcp import config_file
from tests.helpers.tmux import LONG_REPLY, Pane
from tests.helpers.transcripts import transcripts


def test_leaving_the_repl_says_how_to_resume(fake_api, project, isolated_env):
    fake_api.reply_text("Hello there.")
    fake_api.reply_text("Back again.")
    env = {**fake_api.env(), "COMPACT_AGENT_SESSION_MEMORY": "0"}
    pane = Pane(isolated_env, project, env, [])
    try:
        pane.tmux("set-option", "-t", "main", "remain-on-exit", "on")  # the screen outlives the agent
        pane.wait_prompt()
        pane.type("hi")
        pane.wait_for("Hello there.")
        pane.wait_prompt()
        pane.type("/exit")
        screen = pane.wait_for("--resume")
        wait_for(lambda: pane.tmux("display", "-p", "-t", "main", "#{pane_dead}").stdout.strip() == "1")
    finally:
        pane.close()
    [path] = transcripts(isolated_env)
    assert f"compact-agent --resume {path.stem}" in screen
    pane = Pane(isolated_env, project, env, ["--resume", path.stem])
    try:
        pane.wait_prompt()
        pane.type("still there?")
        pane.wait_for("Back again.")
    finally:
        pane.close()
    body = fake_api.message_requests[-1].body
    assert last_user_text(body).startswith("still there?") and "hi" in json.dumps(body["messages"][0])


LOCAL_SUMMARY = "LOCAL-SUMMARY-7c1: a reply of 560 numbered lines was written."


@pytest.mark.parametrize("writer", ["server", "local"])
def test_the_compaction_stays_readable_after_exit_and_continue(
    agent_in_tmux,  # noqa: F811 - the fixture imported above
    fake_api,
    writer,
):
    env = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "60000"}
    if writer == "local":
        env["COMPACT_AGENT_SERVER_COMPACTION"] = "0"
        fake_api.on(is_compaction, Reply.text(f"<summary>{LOCAL_SUMMARY}</summary>"))
    pane = agent_in_tmux(**env)
    fake_api.reply_text(LONG_REPLY, thinking="Writing the long version.")
    pane.type("hello, please write a lot")
    pane.wait_for("END-OF-LONG-REPLY")
    pane.wait_prompt()
    # the server's summary replaces what the last request sent and keeps its reply: a short one, so the
    # long one is what it takes away
    fake_api.reply_text("SHORT-REPLY.", thinking="A short one now.")
    pane.type("and now briefly")
    pane.wait_for("SHORT-REPLY.")
    pane.wait_prompt()
    pane.type("/compact")
    pane.wait_for(r"Compacted · manual", timeout=60)
    pane.wait_prompt()
    # the summary itself, as shown live: the one scripted above, or the one the fake's server wrote
    said = LOCAL_SUMMARY if writer == "local" else "Summary of the conversation so far"
    pane.type("/summary")
    pane.wait_for(r"Summary from the last compaction \(manual · [^)]*\):")
    # its body is printed after its heading line (a heading under the echoed "> /summary" looks like a
    # prompt over its toolbar to wait_prompt: wait for the body itself)
    live = pane.wait_for(re.escape(said))
    pane.wait_prompt()
    # three exchanges after it: the recap's walk back no longer reaches the summary itself
    for n in range(3):
        fake_api.reply_text(f"ANSWER-{n} after the compaction.")
        pane.type(f"question {n}")
        pane.wait_for(f"ANSWER-{n} after")
        pane.wait_prompt()
    pane.type("/exit")
    pane.wait_exit()
    server = [r for r in fake_api.message_requests if is_server_compaction(r.body)]
    assert len(server) == (1 if writer == "server" else 0)

    pane = agent_in_tmux("--continue", **env)
    screen = pane.wait_for(r"Resumed session")
    assert "(earlier messages were compacted · /summary shows the summary" in screen
    assert screen.index("earlier messages were compacted") < screen.index("question 0") or (
        "question 0" not in screen  # the recap shows the last three exchanges
    )
    pane.type("/summary")
    pane.wait_for(r"Summary from the last compaction \(manual · ")
    pane.wait_prompt()
    screen = pane.screen()
    written = "server's summary" if writer == "server" else "local summary"
    assert f"(manual · {written} · " in screen
    assert "No compaction in this session yet" not in screen
    assert "This session continues an earlier conversation" not in screen  # the model's wrapper
    assert live.count(said) == 1 and screen.count(said) == 1
    pane.type("/history")
    screen = pane.wait_for(r"Before the last compaction \(\d+ messages\):")
    assert "user: hello, please write a lot" in screen
    assert fake_api.violations == []


def test_the_line_after_a_resume_that_drops_earlier_thinking_says_what_to_do(
    agent_in_tmux,  # noqa: F811
    fake_api,
    tmp_path,
):
    fake_api.expect_refusals()  # the resume below changes the tools under the thinking: one refusal
    pane = agent_in_tmux()
    fake_api.reply_text("First answer.", thinking="Thinking about the first question.")
    pane.type("first question")
    pane.wait_for("First answer.")
    pane.wait_prompt()
    pane.type("/exit")
    pane.wait_exit()

    cfg = config_file(tmp_path, {"basic": "basic"})  # an MCP server now: the tools differ (ToolSearch)
    pane = agent_in_tmux("--continue", "--mcp-config", str(cfg))
    fake_api.reply_text("Second answer.")
    pane.type("second question")
    screen = pane.wait_for("Second answer.")
    words = " ".join(screen.split())
    assert "Note: the model's earlier thinking in this conversation no longer matches" in words
    assert "Your messages, the replies and the tool results are all kept, and there is nothing to do" in words
    assert "refused" not in words
    assert len(fake_api.binding.fallbacks) == 1
    fake_api.binding.fallbacks.clear()


def test_rewind_reaches_prompts_before_the_compaction_and_restores_code_after_continue(
    agent_in_tmux,  # noqa: F811
    fake_api,
    project,
):
    fake_api.on(is_compaction, Reply.text("<summary>The user had two files written.</summary>"))
    env = {"COMPACT_AGENT_SERVER_COMPACTION": "0"}
    pane = agent_in_tmux("--dangerously-skip-permissions", **env)
    fake_api.reply_tool("Write", {"file_path": str(project / "new.txt"), "content": "one\n"})
    fake_api.reply_tool("Write", {"file_path": str(project / "keep.txt"), "content": "original\n"})
    fake_api.reply_text(LONG_REPLY + "\nFIRST done.")
    pane.type("first: write new.txt and keep.txt")
    pane.wait_for("FIRST done.")
    pane.wait_prompt()
    fake_api.reply_tool("Write", {"file_path": str(project / "keep.txt"), "content": "changed\nagain\n"})
    fake_api.reply_text("SECOND done.")
    pane.type("second: change keep.txt")
    pane.wait_for("SECOND done.")
    pane.wait_prompt()
    pane.type("/compact")
    pane.wait_for(r"Compacted · manual")
    pane.wait_prompt()
    pane.type("/exit")
    pane.wait_exit()
    assert (project / "keep.txt").read_text() == "changed\nagain\n"

    pane = agent_in_tmux("--continue", "--dangerously-skip-permissions", **env)
    pane.type("/rewind")
    screen = pane.wait_for(r"Rewind to which prompt\?")
    pane.wait_answer()
    assert re.search(
        r"1\. first: write new\.txt and keep\.txt  \(before the compaction; 2 files changed since\)", screen
    )
    assert re.search(r"2\. second: change keep\.txt  \(before the compaction; 1 file changed since\)", screen)
    pane.type("c2")
    pane.wait_for(r"Code restored: keep\.txt")
    assert (project / "keep.txt").read_text() == "original\n" and (project / "new.txt").exists()
    pane.wait_prompt()
    pane.keys("C-u")
    pane.type("/rewind")
    pane.wait_for(r"Rewind to which prompt\?", count=2)
    pane.wait_answer()
    pane.type("c1")
    screen = pane.wait_for(r"Code restored: \S", count=2)
    assert not (project / "new.txt").exists() and not (project / "keep.txt").exists()
    assert re.search(r"Code restored: (new\.txt, keep\.txt|keep\.txt, new\.txt)", screen)
    fake_api.reply_text("THIRD done.")
    pane.wait_prompt()
    pane.keys("C-u")
    pane.type("a fresh start")
    pane.wait_for("THIRD done.")
    sent = json.dumps(fake_api.message_requests[-1].body["messages"])
    assert "first: write" not in sent and "two files written" not in sent


def test_cost_keeps_the_subagent_line_after_continue_and_shows_time_and_changes(
    agent_in_tmux,  # noqa: F811
    fake_api,
    project,
):
    fake_api.conversation("SUBTASK-7", lambda body: Reply.text("The subagent looked."))
    fake_api.reply_tool(
        "Task", {"description": "Look around", "prompt": "SUBTASK-7", "subagent_type": "Explore"}
    )
    fake_api.reply_tool("Write", {"file_path": str(project / "b.py"), "content": "a\nb\nc\n"})
    fake_api.reply_text("All done.")
    pane = agent_in_tmux("--dangerously-skip-permissions")
    pane.type("look, then write b.py")
    pane.wait_for("All done.")
    pane.wait_prompt()
    pane.type("/cost")
    live = pane.wait_for(r"of which subagents \(1 task\)")
    assert re.search(r"Time: [\d.]+s in this run, [\d.]+s of it waiting for the model", live)
    assert "Code changes: 3 lines added, 0 lines removed" in live
    pane.wait_prompt()
    pane.type("/exit")
    pane.wait_exit()
    pane = agent_in_tmux("--continue")
    pane.type("/cost")
    screen = pane.wait_for(r"of which subagents \(1 task\)")
    assert "Code changes: 3 lines added, 0 lines removed" in screen
    assert re.search(
        r"of which subagents \(1 task\): \$0\.\d{4}\n  usage: .* [1-9][\d,]* cache write", screen
    )
