"""MCP at a bounded context cost: six real servers (~400 tools), the fake Messages API, the real CLI.

    .venv/bin/python benchmarks/mcp.py [--runs N] [--profile 2026|4.x]

Runs 1-4 on claude-sonnet-5-5 against the 2026 profile by default (benchmarks/thinking.py: the model
thinking, the prefix check enforced), their refusals and thinking dropped printed.

Servers (tests/mcp_servers.py, the SDK's own MCPServer, stdio): github 80 tools, jira 70, slack 60,
postgres 60, browser 70, and docs 60 that takes 8 s to start (the slow one). Figures printed:

1. tokens of every MCP tool definition sent in full, against the MCP part of the first request as the
   API counts it (deferred tools are not counted until found): the goal is <= 5%;
2. scripted tasks (worded from what the user wants, not from the descriptions) looked up with ToolSearch:
   the first query is the task's words, the second a shorter rewording; the goal is every target
   within 2 searches;
3. each tool found, called again after 3 compactions and after --continue: the goal is every call
   answered by its server (and the tool sent in full once its search result is gone);
4. a 1 MB result: the largest tool_result any request carries, against the 25,000-token cap;
5. the REPL's first prompt with the six configured, against the same run with none (the startup
   benchmark, benchmarks/startup_repl.py, bounds the latter at 0.3x `import anthropic`).

The ground truth (which tool a task needs) is the servers' own tool list; the ranker never sees it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.startup_repl import time_sdk_import, time_to_prompt  # noqa: E402
from core.tokens import estimate_text  # noqa: E402
from tests.fakeapi import FakeAPI  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import thinking  # noqa: E402

PROFILE = thinking.DEFAULT  # the family the fake plays and the CLI runs on (--profile)

SERVERS = {"github": 80, "jira": 70, "slack": 60, "postgres": 60, "browser": 70, "docs": 60}
SLOW = "docs"
SLOW_DELAY = 8.0
# (task words, a shorter rewording, the tool it needs): written as a user would ask
TASKS = [
    (
        "close out the sprint: which sprints does the jira project have",
        "jira sprints list",
        "mcp__jira__list_sprints",
    ),
    (
        "grab a picture of what the browser is showing right now",
        "browser screenshot get",
        "mcp__browser__get_screenshots",
    ),
    ("make a new release on github for v2.0", "create github release", "mcp__github__create_releases"),
    (
        "how many rows are in each table of the database",
        "count postgres tables",
        "mcp__postgres__count_tables",
    ),
    ("post a message to the team channel in slack", "create slack message", "mcp__slack__create_messages"),
    ("tidy up: archive the old milestones", "archive milestones", "mcp__github__archive_milestones"),
    ("find the jira epic about billing", "search jira epics", "mcp__jira__search_epics"),
    ("drop the index we no longer need", "delete postgres index", "mcp__postgres__delete_indexes"),
    ("remind me in slack tomorrow about the demo", "create slack reminder", "mcp__slack__create_reminders"),
    ("export the design document as a file", "export documents", "mcp__docs__export_documents"),
    ("clear the cookies of the browser session", "delete browser cookies", "mcp__browser__delete_cookies"),
    (
        "which github workflows failed, sync their state",
        "sync github workflows",
        "mcp__github__sync_workflows",
    ),
]
CAP = 25_000


def server_config(tmp: Path) -> Path:
    servers = {}
    for name, count in SERVERS.items():
        args = [str(ROOT / "tests" / "mcp_servers.py"), "many", "--name", name, "--tools", str(count)]
        if name == SLOW:
            args += ["--delay", str(SLOW_DELAY)]
        servers[name] = {"command": sys.executable, "args": args}
    servers["big"] = {"command": sys.executable, "args": [str(ROOT / "tests" / "mcp_servers.py"), "big"]}
    path = tmp / "servers.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def env_for(tmp: Path, api: FakeAPI | None = None) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "COMPACT_AGENT_"))
    }
    env.update(
        {
            "HOME": str(tmp / "home"),
            "COMPACT_AGENT_HOME": str(tmp / "home" / ".compact-agent"),
            "ANTHROPIC_API_KEY": "test-key",
            "PYTHONPATH": str(ROOT),
            "MCP_TIMEOUT": "30000",
        }
    )
    if api is not None:
        env["ANTHROPIC_BASE_URL"] = api.url
        env["ANTHROPIC_MODEL"] = thinking.model(PROFILE)
    return env


def cli(api: FakeAPI, tmp: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        cwd=project,
        env=env_for(tmp, api),
        capture_output=True,
        text=True,
        timeout=300,
    )


def tool_tokens(tools: list[dict]) -> int:
    return sum(estimate_text(json.dumps(t, ensure_ascii=False)) for t in tools)


def referenced(body: dict) -> list[str]:
    return [
        ref["tool_name"]
        for block in body["messages"][-1]["content"]
        if block.get("type") == "tool_result" and isinstance(block.get("content"), list)
        for ref in block["content"]
        if ref.get("type") == "tool_reference"
    ]


def result_of(body: dict) -> dict:
    return next(b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="REPL start-up runs each way")
    thinking.add_argument(parser)
    args = parser.parse_args()
    global PROFILE
    PROFILE = args.profile
    with tempfile.TemporaryDirectory() as raw, FakeAPI(**thinking.fake(PROFILE)) as api:
        tmp = Path(raw)
        project = tmp / "project"
        project.mkdir()
        cfg = server_config(tmp)
        flags = ["--mcp-config", str(cfg), "--allowedTools", "mcp__*"]

        # 1 and 2: the searches, then a call of each tool found
        found: list[str] = []
        searches: list[int] = []
        for words, reworded, _target in TASKS:  # one turn: every task's two searches, then an answer
            api.reply_tool("ToolSearch", {"query": words})
            api.reply_tool("ToolSearch", {"query": reworded})
        api.reply_text("found")
        started = time.monotonic()
        res = cli(api, tmp, project, "-p", "find the tools for the tasks", *flags)
        assert res.returncode == 0, res.stderr
        bodies = [r.body for r in api.message_requests]
        first = bodies[0]
        every = [t for t in first["tools"] if t.get("name", "").startswith("mcp__")]
        full = tool_tokens([{k: v for k, v in t.items() if k != "defer_loading"} for t in every])
        builtin = [t for t in first["tools"] if not t.get("name", "").startswith("mcp__")]
        base = tool_tokens([t for t in builtin if t.get("name") != "ToolSearch"])
        counted = tool_tokens([{k: v for k, v in t.items() if k != "cache_control"} for t in builtin])
        mcp_part = counted - base
        print(f"MCP servers: {len(SERVERS)} + 1 (the 1 MB one), tools listed: {len(every)}")
        print(f"1. definitions in full: {full:,} tokens; MCP part of the first request: {mcp_part:,} tokens "
              f"({mcp_part / full * 100:.2f}%; goal <= 5%)")  # fmt: skip
        for i, (_, _, target) in enumerate(TASKS):
            one, two = referenced(bodies[2 * i + 1]), referenced(bodies[2 * i + 2])
            if target in one:
                searches.append(1)
            elif target in two:
                searches.append(2)
            else:
                searches.append(0)
            if target in one + two:
                found.append(target)
        within = sum(1 for n in searches if n)
        print(f"2. tasks whose tool was found within 2 searches: {within}/{len(TASKS)} "
              f"(first search: {searches.count(1)}, second: {searches.count(2)}, missed: {searches.count(0)})")  # fmt: skip

        # 3: call every tool found, compact 3 times, call again; then --continue and call again
        def call_all(label: str) -> tuple[int, int]:
            before = len(api.message_requests)
            for name in found:
                api.reply_tool(name, {"target": "acme/web"})
            api.reply_text("called")
            res = cli(api, tmp, project, "-p", f"call them {label}", "--continue", *flags)
            assert res.returncode == 0, res.stderr
            bodies = [r.body for r in api.message_requests[before:]]
            ok = sum(
                1
                for body, name in zip(bodies[1:], found)
                if not result_of(body).get("is_error")
                and f":{name.split('__')[2]} " in json.dumps(result_of(body))
            )
            loaded = {t["name"] for t in bodies[0]["tools"] if not t.get("defer_loading")}
            return ok, len(loaded & set(found))

        ok0, _ = call_all("now")
        for n in range(3):
            api.reply_text(
                f"<analysis>a</analysis><summary>compaction {n + 1}: tools were found and called</summary>"
            )
            res = cli(api, tmp, project, "-p", "/compact", "--continue", *flags)
            assert res.returncode == 0, res.stderr
            api.script.clear()  # the server's summary (kept turns holding thinking) asks for no local one
        ok3, loaded3 = call_all("after 3 compactions")
        print(f"3. tools found: {len(found)}; callable after --continue (a new process): {ok0}; after 3 "
              f"compactions (each run its own --continue): {ok3}, of them sent in full: {loaded3}")  # fmt: skip

        # 4: a 1 MB result
        before = len(api.message_requests)
        api.reply_tool("ToolSearch", {"query": "select:mcp__big__dump"})
        api.reply_tool("mcp__big__dump", {})
        api.reply_text("done")
        res = cli(api, tmp, project, "-p", "dump", "--continue", *flags)
        assert res.returncode == 0, res.stderr
        largest = max(
            estimate_text(json.dumps(b.get("content"), ensure_ascii=False))
            for r in api.message_requests[before:]
            for m in r.body["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        )
        print(
            f"4. largest tool_result in any request after a 1 MB MCP result: {largest:,} tokens (cap {CAP:,})"
        )
        print(f"   (runs 1-4 took {time.monotonic() - started:.0f} s)")
        tally = thinking.Tally(PROFILE)
        tally.api(api)
        tally.transcripts(tmp / "home")
        print(tally.report("runs 1-4"))

    # 5: the REPL's first prompt, with the six servers configured in the user's settings, and with none
    with tempfile.TemporaryDirectory() as raw:
        tmp = Path(raw)
        project = tmp / "project"
        project.mkdir()
        env = env_for(tmp)
        env.update({"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "TERM": "xterm-256color"})
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        home = tmp / "home" / ".compact-agent"
        home.mkdir(parents=True)
        settings = home / "settings.json"
        servers = json.loads(server_config(tmp).read_text())["mcpServers"]
        servers.pop("big")
        time_to_prompt(env, project)
        time_sdk_import(env)
        bare, with_mcp, sdk = [], [], []
        for _ in range(args.runs):
            settings.write_text("{}")
            bare.append(time_to_prompt(env, project))
            settings.write_text(json.dumps({"mcpServers": servers}))
            with_mcp.append(time_to_prompt(env, project))
            sdk.append(time_sdk_import(env))
        b, m, s = (statistics.median(x) * 1000 for x in (bare, with_mcp, sdk))
        print(f"5. REPL first prompt: {m:.0f} ms with the six servers (one slow), {b:.0f} ms with none; "
              f"import anthropic {s:.0f} ms: {m / s:.2f}x (the startup bound: 0.3x)")  # fmt: skip


if __name__ == "__main__":
    main()
