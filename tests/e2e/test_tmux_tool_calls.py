"""Tool calls on screen in a real terminal: a batch shown in order and each once with paths as elsewhere
(and /context's MCP lines at 80 columns), ToolSearch naming the tools it found. The real REPL in tmux
against the fake Messages API."""

from __future__ import annotations

import itertools
import re
import time

from tests.helpers.mcp import config_file


def test_tool_search_shows_the_tools_it_found(agent_in_tmux, fake_api, tmp_path):  # noqa: F811
    cfg = config_file(tmp_path, {"basic": "basic"})
    fake_api.reply_tool("ToolSearch", {"query": "weather of a city"})
    fake_api.reply_text("Found the weather tool.")
    pane = agent_in_tmux("--mcp-config", str(cfg), ENABLE_TOOL_SEARCH="client")
    deadline = time.monotonic() + 60  # the server connects in the background; its tools are searchable
    for n in itertools.count(1):  # once it has
        pane.type("/mcp")
        if "connected, " in pane.wait_for(r"basic \[", count=n):
            break
        assert time.monotonic() < deadline, pane.screen()
        pane.wait_prompt()
        time.sleep(0.1)
    pane.wait_prompt()
    pane.type("weather in Oslo?")
    screen = pane.wait_for("Found the weather tool.")
    assert "Found 1 tool: mcp__basic__weather" in screen or re.search(
        r"Found \d tools: [^\n]*mcp__basic__weather", screen
    )
    assert "[tool_reference]" not in screen


def test_a_batch_of_calls_is_shown_in_order_each_once_with_paths_as_elsewhere(
    agent_in_tmux,  # noqa: F811 - the fixture imported above
    fake_api,
    project,
    isolated_env,
    tmp_path,
):
    for name in "abc":
        (project / f"{name}.txt").write_text(f"{name}\n")
    (isolated_env / "outside.txt").write_text("from home\n")
    cfg = config_file(tmp_path, {"basic": "basic"})
    pane = agent_in_tmux("--mcp-config", str(cfg), "--disallowedTools", "'Bash(rm:*)'", width=80)
    deadline = time.monotonic() + 60  # the server connects once the prompt is up
    while "connected, " not in pane.screen():
        assert time.monotonic() < deadline, pane.screen()
        pane.type("/mcp")
        pane.wait_prompt()
        time.sleep(0.1)
    fake_api.reply_tools(
        [
            *((("Read", {"file_path": str(project / f"{n}.txt")}, f"t_{n}") for n in "abc")),
            ("Write", {"file_path": str(project / "d.txt"), "content": "x\n"}, "t_write"),
            ("Read", {"file_path": str(isolated_env / "outside.txt")}, "t_home"),
            ("mcp__basic__echo", {"text": "first line\nsecond line"}, "t_echo"),
            ("Bash", {"command": "echo a\nrm -rf build"}, "t_rm"),
        ]
    )
    fake_api.reply_text("All done.")
    pane.type("do the batch")
    for n in range(3):  # the Write, the Read outside the project, the MCP call
        pane.wait_for(r"Allow\? \[y\]es", count=n + 1)
        pane.wait_answer()
        pane.type("y")
    screen = pane.wait_for("All done.")
    pane.wait_prompt()
    turn = screen[screen.index("> do the batch") :]
    # each header at the start of its line: no spinner frame left in front of it (test_spinner.py)
    headers = [line for line in turn.splitlines() if "● " in line and "All done" not in line]
    assert headers == [
        "● Read(a.txt)",
        "● Read(b.txt)",
        "● Read(c.txt)",
        "● Write(d.txt)",
        "● Read(~/outside.txt)",
        "● mcp__basic__echo(first line",
        "● Bash(echo a …)",
    ], turn
    # each call's result under its own header, before the next call
    blocks = re.split(r"\n(?=● )", turn)
    assert "Wrote 1 line to d.txt" in next(b for b in blocks if b.startswith("● Write(d.txt)"))
    assert "Read 1 line" in next(b for b in blocks if b.startswith("● Read(~/outside.txt)"))
    echo = next(b for b in blocks if b.startswith("● mcp__basic__echo"))
    assert "text: first line" in echo and "  second line" in echo and "echo: first line" in echo
    assert "Not run: Bash is denied" in " ".join(next(b for b in blocks if b.startswith("● Bash")).split())
    assert "\\n" not in turn  # real line breaks, never an escaped one
    assert str(project) not in turn and str(isolated_env) not in turn  # relative, or under ~
    assert "(new file, 1 line)" in turn
    assert all(len(line) <= 80 for line in turn.splitlines())
    # /context's MCP lines laid out for 80 columns by us, not by the terminal's wrapping (item 7)
    pane.type("/context")
    screen = pane.wait_for(r"- deferred \(not in the context until a search finds\s+them\): ")
    pane.wait_prompt()
    tail = screen[screen.rindex("MCP tools: 5 from 1 server; search: ToolSearch") :]
    assert all(len(line) <= 80 for line in tail.splitlines()), tail
    assert fake_api.violations == []
