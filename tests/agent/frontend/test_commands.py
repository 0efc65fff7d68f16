"""Slash commands: each command's result (the text print mode prints, and the typed data the REPL uses)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from agent.config.settings import load_settings
from agent.frontend import commands
from compact.context.conversation import LastCompaction
from core.events import CompactFinished, Notice
from core.messages import assistant, user_prompt
from tests.fakeapi import last_user_text
from tests.helpers.compaction import TEST_RUN, run_round
from tests.helpers.frontend import chat, new_session


def test_help_lists_every_command(fake_api, project):
    result = commands.run(new_session(fake_api, project), "/help")
    assert result.ok
    assert result.text == (
        "Commands:\n"
        "  /help                    List the commands\n"
        "  /compact [instructions]  Summarize the conversation to free context, optionally focused by "
        "INSTRUCTIONS\n"
        "  /context                 Show how the context window is used\n"
        "  /clear                   Start a new session (the current one stays saved)\n"
        "  /resume [N | ID]         List this directory's sessions, or resume one by number or id\n"
        "  /rewind                  Go back to before an earlier prompt, or summarize up to it (Esc Esc)\n"
        "  /model [name | N]        Pick the model from a table (family, window, prices, effort), or switch to "
        "NAME or N\n"
        "  /effort [level]          Show how deeply the model thinks, or set it: low, medium, high, xhigh, max, auto\n"
        "  /cost                    Cost, tokens, time and code changes of this session\n"
        "  /summary                 Show the summary written by the last compaction\n"
        "  /state                   Show the working-state ledger a compaction would attach (files, commands, todos)\n"
        "  /history                 Show, in brief, the messages the last compaction replaced\n"
        "  /memory [on|off]         Show the project's memory (checked against the code) and this session's "
        "notes\n"
        "  /trust [revoke]          Show this project's trust and the permission rules, or revoke the trust "
        "(or /permissions)\n"
        "  /mcp [reconnect NAME]    MCP servers: state and tools; reconnect one\n"
        "  /add-dir DIR             Let the tools read and edit another directory, like the project\n"
        "  /status                  Version, session, model, API endpoint, permission mode, settings files and MCP at a glance\n"
        "  /config [key [value]]    The settings in effect and where each came from; change the model, "
        "auto-compact, thinking and more\n"
        "  /doctor                  Check the setup: settings problems, stale permission rules, MCP servers, credentials\n"
        "  /export [file]           Write the conversation as Markdown to FILE (default: a dated file here)\n"
        "  /init                    Write a starting CLAUDE.md for this project from what the repository shows\n"
        "  /exit                    Leave the agent (or /quit)\n"
        "\n"
        "Enter sends · Alt-Enter (or Esc then Enter) adds a line · Esc or Ctrl-C interrupts · Ctrl-D exits\n"
        "@path attaches a file · !command runs it in the shell · # note adds it to CLAUDE.md · Esc Esc rewinds"
    )


def test_unknown_commands_suggest_the_closest(fake_api, project):
    session = new_session(fake_api, project)
    assert commands.run(session, "/compcat now") == commands.Result(
        "Unknown command /compcat. Did you mean /compact?", ok=False
    )
    assert commands.run(session, "/xyzzy") == commands.Result(
        "Unknown command /xyzzy. Type /help for the list of commands.", ok=False
    )
    assert commands.is_command("/help") and commands.is_command("/compact keep the greeting")
    assert not commands.is_command("/etc/hosts: what is in it?") and not commands.is_command("hello /help")


def test_exit_and_quit(fake_api, project):
    session = new_session(fake_api, project)
    assert isinstance(commands.run(session, "/exit"), commands.Exit)
    assert isinstance(commands.run(session, "/QUIT"), commands.Exit)


def test_model_shows_the_table_and_switches(fake_api, project):
    session = new_session(fake_api, project, ANTHROPIC_MODEL="claude-sonnet-4-5")
    menu = commands.run(session, "/model")
    assert isinstance(menu, commands.ModelMenu)
    assert menu.choices == [
        "claude-sonnet-5-5",
        "claude-opus-5-5",
        "claude-haiku-5-5",
        "claude-fable-5-2",
        "claude-sonnet-4-5",
    ]
    assert menu.text.startswith("Model: claude-sonnet-4-5 (Claude 4)\n")
    assert "  5.          claude-sonnet-4-5  Claude 4    200K    3 / 15 / 0.30" in menu.text
    assert menu.text.splitlines()[7].endswith("by budget  ← current")
    # laid out for the terminal (issue 41 item 4): 80 columns fit, 160 put what each model is for beside it
    narrow, wide = menu.lines(80), menu.lines(160)
    assert max(map(len, narrow)) <= 80 and narrow[7].endswith("by budget ←")
    assert "claude-opus-5-5" in narrow[4] and "4 / 20 / 0.20" in narrow[4]
    assert max(map(len, wide)) <= 160 and "deeper work; thinking can't be turned off" in wide[4]
    assert wide[7].endswith("the model in use  ← current")
    assert commands.run(session, "/model claude-opus-4-1").text == (
        "Model set to claude-opus-4-1 · Claude 4, 200K window, $15 in / $75 out / $1.50 cached per Mtok, "
        "effort by budget"
    )
    assert session.model == "claude-opus-4-1"
    assert commands.run(session, "/model 4").text.startswith("Model set to claude-fable-5-2 · Fable 5.2, 1M")
    assert not commands.run(session, "/model 9").ok
    typo = commands.run(session, "/model claude-haiku-5-6")
    assert not typo.ok and typo.text.startswith(
        "The API has no model named claude-haiku-5-6. Did you mean claude-haiku-5-5? The models it offers: "
    )
    assert session.model == "claude-fable-5-2"


def test_cost(fake_api, project):
    session = new_session(fake_api, project)
    session.usage_total = {
        "input_tokens": 12_345,
        "output_tokens": 678,
        "cache_read_input_tokens": 90_000,
        "cache_creation_input_tokens": 4_000,
    }
    session.cost = 0.123456
    total, time_line, changes, usage = commands.run(session, "/cost").text.splitlines()
    assert total == "Total cost: $0.1235" and changes == "Code changes: 0 lines added, 0 lines removed"
    assert re.fullmatch(r"Time: [\d.]+s in this run, 0\.0s of it waiting for the model", time_line)
    assert usage == "Usage: 12,345 input · 678 output · 90,000 cache read · 4,000 cache write"


def test_summary_and_history_before_and_after_a_compaction(fake_api, project):
    session = new_session(fake_api, project)
    assert commands.run(session, "/summary").text == "No compaction in this session yet."
    assert commands.run(session, "/history").text == "No compaction in this session yet."
    old = [
        user_prompt("fix the login bug in auth.py please"),
        assistant(
            [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/p/auth.py"}},
            ]
        ),
        session_messages_tool_result(),
    ]
    session.conv.last_compaction = LastCompaction(
        summary="The user wants the login bug fixed.",
        trigger="manual",
        pre_tokens=154_000,
        post=18_000,
        method="summary",
        tail_uuid=None,
        replaced=lambda: old,
    )
    summary = commands.run(session, "/summary")
    assert summary.markdown
    assert summary.text == (
        "Summary from the last compaction (manual · local summary · 154k → 18k tokens):\n\n"
        "The user wants the login bug fixed."
    )
    assert commands.run(session, "/history").text == (
        "Before the last compaction (3 messages):\n"
        "   1. user: fix the login bug in auth.py please\n"
        "   2. assistant: Looking. · Read(/p/auth.py)\n"
        "   3. tool results: 1 (1 error)"
    )


def test_an_older_transcripts_summary_is_shown_without_the_paragraphs_for_the_model(tmp_path):
    """A transcript whose compact_result record predates the summary in it: /summary after a resume
    takes the summary message without the paragraphs around it, or the server's block's text."""
    from agent.runtime import lifecycle
    from compact.compaction.compactor import summary_text
    from compact.context.result import Compaction
    from core.messages import Message

    class Conv:
        transcript_path = tmp_path / "s.jsonl"

    said = "1. The parser was fixed.\n\n2. The tests pass."
    for trigger in ("auto", "manual"):
        text = summary_text(Conv(), Compaction("summary", said, kept=[user_prompt("x")]), trigger)  # type: ignore[arg-type]
        assert (
            lifecycle._summary_of(Message("user", [{"type": "text", "text": text}], kind="summary")) == said
        )
    block = {"type": "compaction", "content": "The server's words.", "encrypted_content": "e"}
    assert lifecycle._summary_of(assistant([block])) == "The server's words."
    assert lifecycle._summary_of(user_prompt("hello")) is None


def session_messages_tool_result():
    from core.messages import tool_result_block, tool_results

    return tool_results([tool_result_block("t1", "No such file", is_error=True)])


def test_memory_shows_the_notes_file(fake_api, project):
    session = new_session(fake_api, project)
    folder = session.settings.home / "projects" / session.settings.project_key / "memory"
    home = session.settings.user_home
    assert home is not None and folder.is_relative_to(home)  # shown as ~/…, as the rest of the screen
    none_yet = (
        f"\n\nProject memory (~/{(folder / 'MEMORY.md').relative_to(home)}): none yet. It is written from what the agent records at "
        'a compaction, at the end of a session, and when you say "remember ...".'
    )
    assert commands.run(session, "/memory").text == (
        "No session notes yet; they start once the conversation reaches about 10k tokens." + none_yet
    )
    session.notes_path.parent.mkdir(parents=True)
    session.notes_path.write_text("# Current State\nFixing the login bug.\n")
    assert commands.run(session, "/memory").text == (
        f"Session notes (~/{session.notes_path.relative_to(home)}):\n\n# Current State\nFixing the login bug.\n"
        + none_yet
    )
    off = new_session(fake_api, project, COMPACT_AGENT_SESSION_MEMORY="0")
    assert (
        commands.run(off, "/memory").text
        == "Session memory is off (COMPACT_AGENT_SESSION_MEMORY=0)." + none_yet
    )


def test_context_breakdown_adds_up_and_stays_out_of_the_conversation(fake_api, project):
    (project / "CLAUDE.md").write_text("Always run the tests before saying done.\n")
    session = new_session(fake_api, project, CLAUDE_CODE_AUTO_COMPACT_WINDOW="100000")
    chat(session, "hello", "Hi! What shall we do?", tokens=5_000)
    before = list(session.messages)
    result = commands.run(session, "/context")
    assert isinstance(result, commands.ContextUsage) and result.markdown
    assert session.messages == before  # never added to the conversation
    names = [c.name for c in result.categories]
    assert names == [
        "System prompt",
        "System tools",
        "Memory files",
        "Messages",
        "Free space",
        "Autocompact buffer",
    ]
    by = {c.key: c.tokens for c in result.categories}
    assert result.window == 100_000
    assert by["buffer"] == 100_000 - 67_000  # W − T with W capped at 100k: E 80,000, T 67,000
    assert by["system"] > 0 and by["tools"] > 0 and by["memory"] > 0
    assert result.used == 5_030  # the trigger's number: the last usage (5,000 in + 30 out), nothing after it
    assert sum(by.values()) == result.window
    assert sum(c.cells for c in result.categories) == 100
    k = commands.fmt_tokens
    rows = "\n".join(f"| {c.name} | {k(c.tokens)} | {c.share:.1f}% |" for c in result.categories)
    assert result.text == (
        f"## Context usage\n\nModel: {session.model}  \nTokens: {k(result.used)} / 100k (5%)\n\n"
        f"| Category | Tokens | Share |\n|---|---:|---:|\n{rows}\n\n"
        f"Memory files:\n- {project / 'CLAUDE.md'}: {k(by['memory'])} tokens\n\n"
        "Prepared compaction: none yet\n\n"
        "Next compaction: at 67,000 tokens; now 5,030"  # the one decision's next point (issue 38)
    )


def test_compact_with_instructions_reaches_the_summary_request(fake_api, project):
    events: list = []
    session = new_session(fake_api, project, events)
    chat(session, "hello, my name is Ada", "Hello Ada!", tokens=4_000)  # the system prompt, tools, prompt
    run_round(session, "python -m pytest -v", TEST_RUN)  # what the compaction takes away
    fake_api.reply_text("<analysis>thinking</analysis>\n<summary>The user is Ada and said hello.</summary>")
    result = commands.run(session, "/compact keep the greeting")
    assert isinstance(result, commands.Compacted) and result.ok
    assert re.fullmatch(r"Compacted · manual · [\d.]+k? → [\d.]+k? tokens", result.text), result.text
    [request] = fake_api.message_requests
    assert "keep the greeting" in last_user_text(request.body)
    assert any(isinstance(e, CompactFinished) and e.trigger == "manual" for e in events)
    assert session.last_compaction.summary == "The user is Ada and said hello."
    fake_api.check()


def test_compact_with_nothing_to_compact_says_so_plainly(fake_api, project):
    events: list = []
    session = new_session(fake_api, project, events)
    chat(session, "hello, my name is Ada", "Hello Ada!", tokens=4_000)  # less than a compaction leaves
    before = list(session.messages)
    result = commands.run(session, "/compact")
    assert isinstance(result, commands.Compacted) and result.ok
    assert re.fullmatch(r"Nothing to compact \([\d,]+ tokens; a compaction would leave [\d,]+\)", result.text)
    assert fake_api.message_requests == [] and session.messages == before


def test_compact_when_compaction_is_disabled(fake_api, project):
    events: list = []
    session = new_session(fake_api, project, events, DISABLE_COMPACT="1")
    chat(session, "hello", "hi")
    result = commands.run(session, "/compact")
    assert result == commands.Compacted("Compaction is disabled (DISABLE_COMPACT is set)", ok=False)
    assert not any(isinstance(e, Notice) for e in events)  # the result says it; said once
    assert fake_api.message_requests == []


def test_clear_and_resume(fake_api, project):
    first = new_session(fake_api, project)
    chat(first, "remember the number 42", "Noted: 42.")
    cleared = commands.run(first, "/clear")
    assert isinstance(cleared, commands.Switched) and cleared.text == "Started a new session."
    second = cleared.session
    assert second.session_id != first.session_id and second.messages == []
    chat(second, "a second session", "ok")

    listing = commands.run(second, "/resume")
    assert isinstance(listing, commands.SessionList) and len(listing.sessions) == 2
    lines = listing.text.splitlines()
    assert lines[0] == f"Sessions in {project}:"
    assert re.fullmatch(
        rf"  1\. \S+ \S+ · 2 messages · a second session · {second.session_id} \(current\)", lines[1]
    )
    assert re.fullmatch(
        rf"  2\. \S+ \S+ · 2 messages · remember the number 42 · {first.session_id}", lines[2]
    )
    assert lines[3] == "Resume one with /resume N or /resume ID."

    assert commands.run(second, "/resume 1") == commands.Result("That is the current session.", ok=False)
    assert commands.run(second, "/resume 7") == commands.Result(
        "No session number 7; /resume lists 2.", ok=False
    )
    resumed = commands.run(second, "/resume 2")
    assert isinstance(resumed, commands.Switched)
    assert resumed.text == f"Resumed session {first.session_id} (2 messages)."
    assert [m.text for m in resumed.session.messages] == ["remember the number 42", "Noted: 42."]
    by_id = commands.run(resumed.session, f"/resume {second.session_id}")
    assert isinstance(by_id, commands.Switched) and by_id.session.session_id == second.session_id
    missing = commands.run(second, "/resume no-such-session")
    assert not missing.ok and "no-such-session" in missing.text


def test_fmt_tokens():
    assert [commands.fmt_tokens(n) for n in (0, 999, 1000, 1530, 9_999, 10_000, 154_321, 1_000_000)] == [
        "0",
        "999",
        "1.0k",
        "1.5k",
        "10.0k",
        "10k",
        "154k",
        "1000k",
    ]


def test_config_changes_a_setting_in_the_users_file_and_in_the_session(fake_api, project):
    """Issue 41 item 8: /config changes what Claude Code's /config does, written to the user's settings
    file (0600, the rest of it kept) and applied to the session; a value the row refuses changes nothing."""
    import json
    import stat

    home = Path(os.environ["COMPACT_AGENT_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Bash(make:*)"]}}))
    session = new_session(fake_api, project)
    menu = commands.run(session, "/config")
    assert isinstance(menu, commands.ConfigMenu) and menu.choices[:2] == ["model", "autoCompactEnabled"]
    assert "  2. autoCompactEnabled       on                 on | off" in menu.text
    said = commands.run(session, "/config autoCompactEnabled off")
    assert said.ok and said.text == "autoCompactEnabled set to off (saved to ~/.compact-agent/settings.json)."
    assert not session.ports.config.auto_compact and not session.conv.window.config.auto_compact
    assert commands.run(session, "/config effortLevel max").ok and session.effort == "max"
    assert commands.run(session, "/config alwaysThinkingEnabled on").ok and session.thinking_on
    assert commands.run(session, "/config 5 plan").ok and session.permissions.mode == "plan"
    assert commands.run(session, "/config model opus").ok and session.model == "claude-opus-5-5"
    later = commands.run(session, "/config noColor on")
    assert later.ok and later.text.endswith("it applies from the next start.")
    for refused in ("/config noColor maybe", "/config effortLevel huge", "/config hooks {}", "/config 9 on"):
        assert not commands.run(session, refused).ok, refused
    path = home / "settings.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {
        "permissions": {"allow": ["Bash(make:*)"], "defaultMode": "plan"},
        "autoCompactEnabled": False,
        "effortLevel": "max",
        "alwaysThinkingEnabled": True,
        "model": "opus",
        "noColor": True,
    }
    # the next start reads every value back through the same rows, with no warning
    again = load_settings(cwd=project, environ={**os.environ, **fake_api.env()}, cli={})
    assert again.report.warnings == [] and not again.compaction.auto_compact and again.effort == "max"
    assert again.permission_mode == "plan" and again.no_color and again.always_thinking
    # a value the environment sets wins over the file: said so
    session = new_session(fake_api, project, CLAUDE_CODE_EFFORT_LEVEL="low")
    said = commands.run(session, "/config effortLevel high")
    assert said.ok and said.text.endswith("but env CLAUDE_CODE_EFFORT_LEVEL sets it too and wins."), said.text
