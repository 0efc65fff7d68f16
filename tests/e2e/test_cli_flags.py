"""The Claude Code flags a script passes (--system-prompt, --settings, --session-id, --fallback-model),
`mcp add` with its options anywhere, stream-json's init listing the MCP servers: by the command line,
against the fake Messages API."""

from __future__ import annotations

import json
import sys
import uuid

from tests.helpers.mcp import SERVERS
from tests.helpers.transcripts import transcripts


def _system(body: dict) -> str:
    return "\n".join(b["text"] for b in body["system"])


def test_system_prompt_replaces_our_instructions_and_keeps_the_environment(fake_api, run_cli, project):
    fake_api.reply_text("Ahoy.")
    res = run_cli(fake_api, "-p", "--system-prompt", "You are a pirate. Answer briefly.", "hello")
    assert res.code == 0, res.stderr
    system = _system(fake_api.message_requests[0].body)
    assert system.startswith("You are a pirate. Answer briefly.")
    assert "You are Compact Agent" not in system and str(project) in system  # the environment stays


def test_settings_flag_takes_a_file_or_json_over_the_other_files(fake_api, run_cli, project, tmp_path):
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"model": "claude-haiku-4-5"}))
    flag = tmp_path / "flag.json"
    flag.write_text(json.dumps({"model": "claude-opus-4-6", "permissions": {"deny": ["Bash"]}}))
    fake_api.reply_tool("Bash", {"command": "echo hi"})
    fake_api.reply_text("done")
    res = run_cli(fake_api, "-p", "--settings", str(flag), "--output-format", "json", "run echo")
    assert res.code == 0, res.stderr
    assert fake_api.message_requests[0].body["model"] == "claude-opus-4-6"
    assert res.json()["permission_denials"][0]["tool_name"] == "Bash"
    fake_api.reply_text("ok")
    res = run_cli(fake_api, "-p", "--settings", '{"model": "claude-sonnet-4-6"}', "hi")
    assert res.code == 0 and fake_api.message_requests[-1].body["model"] == "claude-sonnet-4-6"
    bad = run_cli(fake_api, "-p", "--settings", '{"model": 3}', "hi")
    assert (
        bad.code == 2
        and bad.stderr == 'compact-agent: --settings: "model" must be a non-empty string (got 3)\n'
    )
    missing = run_cli(fake_api, "-p", "--settings", "nope.json", "hi")
    assert missing.code == 2 and "--settings: " in missing.stderr and "is not a file" in missing.stderr


def test_session_id_names_the_new_session_and_is_refused_when_taken(fake_api, run_cli, isolated_env):
    wanted = str(uuid.uuid4())
    fake_api.reply_text("first")
    res = run_cli(fake_api, "-p", "--session-id", wanted, "--output-format", "json", "hi")
    assert res.code == 0, res.stderr and res.json()["session_id"] == wanted
    assert [p.stem for p in transcripts(isolated_env)] == [wanted]
    again = run_cli(fake_api, "-p", "--session-id", wanted, "hi")
    assert again.code != 0 and f"--session-id {wanted} is in use already" in again.stderr
    bad = run_cli(fake_api, "-p", "--session-id", "not-a-uuid", "hi")
    assert bad.code == 2 and bad.stderr == 'compact-agent: --session-id must be a UUID (got "not-a-uuid")\n'
    both = run_cli(fake_api, "-p", "--session-id", wanted, "-c", "hi")
    assert both.code == 2 and "can't be used with --continue or --resume" in both.stderr


def test_fallback_model_takes_over_when_the_model_is_overloaded(fake_api, run_cli):
    fake_api.error(529)
    fake_api.reply_text("Answered by the fallback.")
    fake_api.reply_text("Still the fallback.")
    res = run_cli(
        fake_api,
        "-p",
        "--model",
        "claude-opus-4-6",
        "--fallback-model",
        "sonnet",
        "--output-format",
        "json",
        "hi",
    )
    assert res.code == 0, res.stderr
    assert res.json()["result"] == "Answered by the fallback."
    models = [r.body["model"] for r in fake_api.message_requests]
    assert models == ["claude-opus-4-6", "claude-sonnet-5-5"]
    assert "claude-opus-4-6 is overloaded: switched to claude-sonnet-5-5 (--fallback-model)" in res.stderr


def test_mcp_add_takes_its_options_anywhere(run_cli, isolated_env):
    local = isolated_env / ".compact-agent" / "mcp.json"
    res = run_cli(None, "mcp", "add", "basic", sys.executable, SERVERS, "basic", "-e", "K=V", "-s", "local")
    assert res.code == 0, res.stderr
    [entry] = [p["mcpServers"]["basic"] for p in json.loads(local.read_text())["projects"].values()]
    assert entry == {
        "type": "stdio",
        "command": sys.executable,
        "args": [SERVERS, "basic"],
        "env": {"K": "V"},
    }
    res = run_cli(None, "mcp", "add", "npx-like", "npx", "-y", "pkg", "--env=A=1", "--", "node", "-e", "x")
    assert res.code == 0, res.stderr
    [entry] = [p["mcpServers"]["npx-like"] for p in json.loads(local.read_text())["projects"].values()]
    assert entry["args"] == ["-y", "pkg", "node", "-e", "x"] and entry["env"] == {"A": "1"}


def test_stream_json_init_lists_the_mcp_servers(fake_api, run_cli, tmp_path):
    from tests.helpers.mcp import config_file

    cfg = config_file(tmp_path, {"basic": "basic"})
    fake_api.reply_text("ok")
    res = run_cli(
        fake_api, "-p", "hi", "--output-format", "stream-json", "--verbose", "--mcp-config", str(cfg)
    )
    assert res.code == 0, res.stderr
    init = json.loads(res.stdout.splitlines()[0])
    assert init["subtype"] == "init" and init["mcp_servers"] == [{"name": "basic", "status": "connected"}]
