import json
from pathlib import Path

import pytest

from agent.config import trust
from agent.config.settings import DEFAULT_MODEL, SettingsError, falsy, load_settings, split_rules, truthy
from compact.decision.config import CompactConfig


@pytest.fixture
def dirs(tmp_path):
    home, agent_home, project = tmp_path / "home", tmp_path / "agent-home", tmp_path / "project"
    for d in (home, agent_home, project / ".claude"):
        d.mkdir(parents=True)
    # these tests are about merging, so the project is trusted (tests/agent/config/test_trust.py is about trust)
    trust.grant(agent_home, project, confirmed=(trust.confirmation("ANTHROPIC_BASE_URL", "http://project"),))
    return home, agent_home, project


def env_for(dirs, **extra):
    home, agent_home, _ = dirs
    return {"HOME": str(home), "COMPACT_AGENT_HOME": str(agent_home), **extra}


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def load(dirs, cli=None, **env):
    return load_settings(cwd=dirs[2], environ=env_for(dirs, **env), cli=cli or {})


def test_defaults_with_no_files(dirs):
    s = load(dirs)
    assert (s.model, s.model_explicit, s.permission_mode) == (DEFAULT_MODEL, False, "default")
    assert (s.allow, s.deny, s.ask, s.hooks) == ([], [], [], {})
    assert (
        s.compaction.disable_compact,
        s.compaction.auto_compact,
        s.compaction.session_memory,
        s.compaction.microcompact,
        s.compaction.context_collapse,
    ) == (
        False,
        True,
        True,
        True,
        False,
    )
    assert (
        s.compaction.autocompact_pct,
        s.compaction.context_window,
        s.compaction.blocking_limit,
        s.compaction.max_output_tokens,
    ) == (
        None,
        None,
        None,
        None,
    )
    assert s.compaction.context_editing is None and s.no_color is False
    assert s.home == dirs[1] and s.cwd == dirs[2] and s.user_home == dirs[0]
    assert s.project_dir == dirs[1] / "projects" / s.project_key


def test_home_defaults_to_dot_compact_agent_under_home(dirs):
    s = load_settings(cwd=dirs[2], environ={"HOME": str(dirs[0])}, cli={})
    assert s.home == dirs[0] / ".compact-agent"


def test_user_settings_are_read_from_compact_agent_home(dirs):
    _, agent_home, _ = dirs
    write(agent_home / "settings.json", {"model": "from-user-file"})
    s = load(dirs)
    assert (s.model, s.model_explicit, s.report.sources["model"]) == (
        "from-user-file",
        True,
        str(agent_home / "settings.json"),
    )


def test_precedence_across_every_layer(dirs):
    _, agent_home, project = dirs
    write(
        agent_home / "settings.json",
        {
            "model": "user",
            "permissions": {"defaultMode": "plan"},
            "compaction": {"contextWindow": 100_000, "blockingLimit": 90_000},
        },
    )
    write(
        project / ".claude" / "settings.json", {"model": "project", "compaction": {"contextWindow": 120_000}}
    )
    write(
        project / ".claude" / "settings.local.json",
        {"model": "local", "permissions": {"defaultMode": "acceptEdits"}},
    )
    s = load(dirs)
    assert (s.model, s.permission_mode, s.compaction.context_window, s.compaction.blocking_limit) == (
        "local",
        "acceptEdits",
        120_000,
        90_000,
    )
    s = load(dirs, ANTHROPIC_MODEL="env-model", CLAUDE_CODE_AUTO_COMPACT_WINDOW="50000")
    assert (s.model, s.compaction.context_window, s.report.sources["context_window"]) == (
        "env-model",
        50_000,
        "env CLAUDE_CODE_AUTO_COMPACT_WINDOW",
    )
    s = load(dirs, {"model": "cli-model", "permission_mode": "default"}, ANTHROPIC_MODEL="env-model")
    assert (s.model, s.report.sources["model"], s.permission_mode) == ("cli-model", "--model", "default")


def test_file_env_map_sits_under_the_real_environment(dirs):
    _, agent_home, project = dirs
    write(
        agent_home / "settings.json",
        {
            "env": {
                "ANTHROPIC_MODEL": "user-env",
                "DISABLE_AUTO_COMPACT": "1",
                "ANTHROPIC_BASE_URL": "http://user",
            }
        },
    )
    write(
        project / ".claude" / "settings.json",
        {"env": {"ANTHROPIC_BASE_URL": "http://project"}, "model": "file"},
    )
    s = load(dirs)
    # a file's "env" counts as environment, so it beats the files' "model" key
    assert (s.model, s.compaction.auto_compact, s.base_url) == ("user-env", False, "http://project")
    assert s.environ["ANTHROPIC_BASE_URL"] == "http://project"
    s = load(dirs, ANTHROPIC_BASE_URL="http://real", ANTHROPIC_MODEL="real-model")
    assert (s.base_url, s.model, s.environ["ANTHROPIC_BASE_URL"]) == (
        "http://real",
        "real-model",
        "http://real",
    )


def test_permission_lists_merge_and_dedupe_across_files_and_flags(dirs):
    _, agent_home, project = dirs
    write(
        agent_home / "settings.json",
        {"permissions": {"allow": ["Read", "Bash(git status:*)"], "deny": ["Bash(rm:*)"]}},
    )
    write(
        project / ".claude" / "settings.json",
        {"permissions": {"allow": ["Bash(git status:*)", "Edit(src/**)"], "ask": ["Bash(git push:*)"]}},
    )
    write(project / ".claude" / "settings.local.json", {"permissions": {"deny": ["Read(.env)"]}})
    s = load(dirs, {"allowed_tools": ["Bash(npm test:*) Glob", "Read"], "disallowed_tools": ["Write"]})
    assert s.allow == ["Read", "Bash(git status:*)", "Edit(src/**)", "Bash(npm test:*)", "Glob"]
    assert s.deny == ["Bash(rm:*)", "Read(.env)", "Write"]
    assert s.ask == ["Bash(git push:*)"]


def test_hooks_concatenate_per_event(dirs):
    _, agent_home, project = dirs
    user_group = {"matcher": "auto", "hooks": [{"type": "command", "command": "echo user"}]}
    project_group = {"hooks": [{"type": "command", "command": "echo project", "timeout": 5}]}
    start_group = {"matcher": "compact", "hooks": [{"type": "command", "command": "echo start"}]}
    write(agent_home / "settings.json", {"hooks": {"PreCompact": [user_group]}})
    write(
        project / ".claude" / "settings.json",
        {"hooks": {"PreCompact": [project_group], "SessionStart": [start_group]}},
    )
    s = load(dirs)
    assert s.hooks == {"PreCompact": [user_group, project_group], "SessionStart": [start_group]}


def test_our_compaction_keys(dirs):
    write(
        dirs[2] / ".claude" / "settings.json",
        {
            "autoCompactEnabled": False,
            "compaction": {
                "autoCompactPct": 70,
                "contextWindow": 150000,
                "blockingLimit": 140000,
                "model": "claude-haiku-4-5",
                "maxOutputTokens": 8000,
            },
            "sessionMemory": False,
            "microcompact": {"enabled": True, "gapMinutes": 30, "keepRecent": 3},
            "contextCollapse": True,
            "contextEditing": {
                "enabled": True,
                "keepToolUses": 4,
                "triggerTokens": 100000,
                "clearAtLeastTokens": 5000,
                "clearThinking": True,
            },
            "someFutureKey": {"anything": 1},
        },
    )
    s = load(dirs)
    assert (
        s.compaction.auto_compact,
        s.compaction.autocompact_pct,
        s.compaction.context_window,
        s.compaction.blocking_limit,
        s.compaction.compaction_model,
        s.compaction.max_output_tokens,
    ) == (False, 70.0, 150000, 140000, "claude-haiku-4-5", 8000)
    assert (
        s.compaction.session_memory,
        s.compaction.microcompact,
        s.compaction.gap_minutes,
        s.compaction.keep_recent,
        s.compaction.context_collapse,
    ) == (False, True, 30.0, 3, True)
    assert s.compaction.context_editing == {
        "keepToolUses": 4,
        "triggerTokens": 100000,
        "clearAtLeastTokens": 5000,
        "clearThinking": True,
    }


def test_microcompact_and_context_editing_accept_booleans(dirs):
    write(dirs[1] / "settings.json", {"microcompact": {"gapMinutes": 15}, "contextEditing": True})
    write(dirs[2] / ".claude" / "settings.json", {"microcompact": False})
    s = load(dirs)
    assert (s.compaction.microcompact, s.compaction.gap_minutes) == (False, 15.0)
    assert s.compaction.context_editing == {
        "keepToolUses": None,
        "triggerTokens": None,
        "clearAtLeastTokens": None,
        "clearThinking": None,
    }


def test_additional_directories_resolve(dirs):
    home, _, project = dirs
    write(
        project / ".claude" / "settings.json",
        {"permissions": {"additionalDirectories": ["../shared", "~/notes", "/opt/x"]}},
    )
    s = load(dirs)
    assert s.additional_dirs == [project / "../shared", home / "notes", Path("/opt/x")]


@pytest.mark.parametrize(
    ("env", "field", "value"),
    [
        ({"ANTHROPIC_API_KEY": "sk-1"}, "api_key", "sk-1"),
        ({"ANTHROPIC_AUTH_TOKEN": "tok"}, "auth_token", "tok"),
        ({"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, "base_url", "http://127.0.0.1:9"),
        ({"ANTHROPIC_MODEL": "claude-x"}, "model", "claude-x"),
        ({"DISABLE_COMPACT": "TRUE"}, "disable_compact", True),
        ({"DISABLE_COMPACT": "0"}, "disable_compact", False),
        ({"DISABLE_AUTO_COMPACT": "yes"}, "auto_compact", False),
        ({"DISABLE_AUTO_COMPACT": "off"}, "auto_compact", True),
        ({"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}, "autocompact_pct", 50.0),
        ({"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "100"}, "autocompact_pct", 100.0),
        ({"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "0.5"}, "autocompact_pct", 0.5),
        ({"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000"}, "context_window", 100_000),
        ({"CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE": "90000"}, "blocking_limit", 90_000),
        ({"CLAUDE_CODE_MAX_OUTPUT_TOKENS": " 4096 "}, "max_output_tokens", 4096),
        ({"COMPACT_AGENT_SESSION_MEMORY": "0"}, "session_memory", False),
        ({"COMPACT_AGENT_SESSION_MEMORY": "1"}, "session_memory", True),
        ({"COMPACT_AGENT_MICROCOMPACT": "0"}, "microcompact", False),
        ({"COMPACT_AGENT_PREPARE_COMPACTION": "0"}, "prepare_compaction", False),
        ({"CLAUDE_CONTEXT_COLLAPSE": "1"}, "context_collapse", True),
        ({"CLAUDE_CONTEXT_COLLAPSE": "0"}, "context_collapse", False),
        ({"NO_COLOR": "1"}, "no_color", True),
        ({"NO_COLOR": ""}, "no_color", False),
        ({"CLAUDE_CODE_AUTO_COMPACT_WINDOW": ""}, "context_window", None),  # empty = unset
    ],
)
def test_each_environment_variable(dirs, env, field, value):
    s = load(dirs, **env)
    holder = s.compaction if field in CompactConfig.__dataclass_fields__ else s
    assert getattr(holder, field) == value


def test_prepare_compaction_has_a_settings_key_and_the_environment_wins(dirs):
    write(dirs[2] / ".claude" / "settings.json", {"prepareCompaction": False})
    assert load(dirs).compaction.prepare_compaction is False
    assert load(dirs, COMPACT_AGENT_PREPARE_COMPACTION="1").compaction.prepare_compaction is True
    write(dirs[2] / ".claude" / "settings.json", {"prepareCompaction": "no"})  # a project's bad file: skipped
    s = load(dirs)
    assert s.compaction.prepare_compaction is True
    assert any("prepareCompaction" in w for w in s.report.warnings)


def test_environment_turns_back_on_what_a_file_turned_off(dirs):
    write(dirs[2] / ".claude" / "settings.json", {"sessionMemory": False, "microcompact": False})
    s = load(dirs, COMPACT_AGENT_SESSION_MEMORY="1")
    assert (s.compaction.session_memory, s.compaction.microcompact) == (True, False)


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        (
            "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
            "abc",
            'CLAUDE_AUTOCOMPACT_PCT_OVERRIDE: expected a number in (0, 100], got "abc"',
        ),
        (
            "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
            "0",
            'CLAUDE_AUTOCOMPACT_PCT_OVERRIDE: expected a number in (0, 100], got "0"',
        ),
        (
            "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
            "150",
            'CLAUDE_AUTOCOMPACT_PCT_OVERRIDE: expected a number in (0, 100], got "150"',
        ),
        (
            "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
            "nan",
            'CLAUDE_AUTOCOMPACT_PCT_OVERRIDE: expected a number in (0, 100], got "nan"',
        ),
        (
            "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
            "big",
            'CLAUDE_CODE_AUTO_COMPACT_WINDOW: expected a positive integer, got "big"',
        ),
        (
            "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
            "-5",
            'CLAUDE_CODE_AUTO_COMPACT_WINDOW: expected a positive integer, got "-5"',
        ),
        (
            "CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE",
            "1.5",
            'CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE: expected a positive integer, got "1.5"',
        ),
        (
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
            "0",
            'CLAUDE_CODE_MAX_OUTPUT_TOKENS: expected a positive integer, got "0"',
        ),
    ],
)
def test_invalid_environment_values_give_one_line(dirs, name, raw, message):
    with pytest.raises(SettingsError) as info:
        load(dirs, **{name: raw})
    assert str(info.value) == message


def test_invalid_value_from_a_file_env_map_names_the_file(dirs):
    path = write(dirs[2] / ".claude" / "settings.json", {"env": {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "lots"}})
    with pytest.raises(SettingsError) as info:
        load(dirs)
    assert (
        str(info.value)
        == f'CLAUDE_CODE_MAX_OUTPUT_TOKENS: expected a positive integer, got "lots" (set in {path} "env")'
    )


def test_malformed_user_json_stops_naming_file_and_position(dirs):
    path = write(dirs[1] / "settings.json", '{\n  "model": "x"\n    "permissions": {}\n}')
    with pytest.raises(SettingsError) as info:
        load(dirs)
    assert str(info.value) == f"{path}: invalid JSON at line 3 column 5 (Expecting ',' delimiter)"


def test_malformed_project_json_is_skipped_with_one_warning(dirs):
    path = write(dirs[2] / ".claude" / "settings.json", '{\n  "model": "x"\n    "permissions": {}\n}')
    write(dirs[2] / ".claude" / "settings.local.json", {"permissions": {"deny": ["Bash(rm:*)"]}})
    s = load(dirs)
    assert s.report.warnings == [
        f"{path}: invalid JSON at line 3 column 5 (Expecting ',' delimiter); going on without this file"
    ]
    assert s.model == DEFAULT_MODEL and s.deny == ["Bash(rm:*)"]  # the other file still applies


def test_a_settings_file_must_be_an_object(dirs):
    path = write(dirs[1] / "settings.json", "[1, 2]")
    with pytest.raises(SettingsError) as info:
        load(dirs)
    assert str(info.value) == f"{path}: a settings file must hold a JSON object (got an array)"


def test_empty_file_is_fine(dirs):
    write(dirs[2] / ".claude" / "settings.local.json", "  \n")
    assert load(dirs).model == DEFAULT_MODEL


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"permissions": {"defaultMode": "yolo"}},
            '"permissions.defaultMode" must be one of default, acceptEdits, bypassPermissions, plan (got "yolo")',
        ),
        ({"permissions": []}, '"permissions" must be an object (got [])'),
        (
            {"permissions": {"allow": "Read"}},
            '"permissions.allow" must be an array of rule strings (got "Read")',
        ),
        (
            {"permissions": {"deny": ["Read", 3]}},
            '"permissions.deny[1]" must be a rule like "Read", "Bash(git status:*)" or "Edit(src/**)" (got 3)',
        ),
        ({"model": 42}, '"model" must be a non-empty string (got 42)'),
        ({"env": {"X": ["a"]}}, '"env.X" must be a string (got ["a"])'),
        ({"autoCompactEnabled": "no"}, '"autoCompactEnabled" must be true or false (got "no")'),
        ({"sessionMemory": 1}, '"sessionMemory" must be true or false (got 1)'),
        (
            {"compaction": {"autoCompactPct": 0}},
            '"compaction.autoCompactPct" must be a number in (0, 100] (got 0)',
        ),
        (
            {"compaction": {"contextWindow": 1.5}},
            '"compaction.contextWindow" must be a positive integer (got 1.5)',
        ),
        (
            {"compaction": {"blockingLimit": True}},
            '"compaction.blockingLimit" must be a positive integer (got true)',
        ),
        ({"microcompact": "yes"}, '"microcompact" must be true, false or an object (got "yes")'),
        ({"microcompact": {"keepRecent": -1}}, '"microcompact.keepRecent" must be an integer >= 0 (got -1)'),
        (
            {"contextEditing": {"triggerTokens": "many"}},
            '"contextEditing.triggerTokens" must be a positive integer (got "many")',
        ),
        (
            {"hooks": {"PreCompact": {"hooks": []}}},
            '"hooks.PreCompact" must be an array of matcher groups (got {"hooks": []})',
        ),
        (
            {"hooks": {"PreCompact": [{"hooks": [{"type": "command"}]}]}},
            '"hooks.PreCompact[0].hooks[0].command" must be a non-empty string (got null)',
        ),
        (
            {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": "5"}]}]}},
            '"hooks.Stop[0].hooks[0].timeout" must be a positive number of seconds (got "5")',
        ),
    ],
)
def test_wrong_types_name_file_and_key(dirs, data, message):
    path = write(dirs[1] / "settings.json", data)
    with pytest.raises(SettingsError) as info:
        load(dirs)
    assert str(info.value) == f"{path}: {message}"
    project_file = write(dirs[2] / ".claude" / "settings.local.json", data)
    path.unlink()
    assert load(dirs).report.warnings == [f"{project_file}: {message}; going on without this file"]


def test_cli_permission_mode_and_skip_permissions(dirs):
    write(dirs[2] / ".claude" / "settings.json", {"permissions": {"defaultMode": "plan"}})
    assert load(dirs).permission_mode == "plan"
    assert load(dirs, {"permission_mode": "acceptEdits"}).permission_mode == "acceptEdits"
    s = load(dirs, {"dangerously_skip_permissions": True})
    assert (s.permission_mode, s.report.sources["permission_mode"]) == (
        "bypassPermissions",
        "--dangerously-skip-permissions",
    )
    with pytest.raises(SettingsError) as info:
        load(dirs, {"permission_mode": "yolo"})
    assert str(info.value) == (
        '--permission-mode must be one of default, acceptEdits, bypassPermissions, plan (got "yolo")'
    )


def test_cli_rules_are_checked(dirs):
    with pytest.raises(SettingsError) as info:
        load(dirs, {"allowed_tools": ["Bash(git"]})
    assert (
        str(info.value)
        == '--allowedTools: "Bash(git" is not a rule like "Read", "Bash(git status:*)" or "Edit(src/**)"'
    )


def test_split_rules_keeps_parenthesised_text():
    assert split_rules("Bash(git log:*) Edit,Read  Bash(a, b)") == [
        "Bash(git log:*)",
        "Edit",
        "Read",
        "Bash(a, b)",
    ]


def test_one_grammar_of_rules_for_files_flags_and_custom_commands(dirs):
    """A rule the settings files take, --allowedTools and a custom command's allowed-tools take too."""
    from agent.config import custom_commands

    write(dirs[2] / ".claude" / "settings.json", {"permissions": {"allow": ["mcp__db__*"]}})
    assert load(dirs, cli={"allowed_tools": ["mcp__db__*"]}).allow == ["mcp__db__*"]
    commands = dirs[2] / ".claude" / "commands"
    commands.mkdir()
    (commands / "q.md").write_text("---\nallowed-tools: mcp__db__*, Bash(git log:*)\n---\nask\n")
    found = custom_commands.load(
        user_dirs=[], project_dir=commands, project_root=dirs[2], trusted=True, reserved=set()
    )
    assert found.commands["q"].allowed_tools == ("mcp__db__*", "Bash(git log:*)")


def test_one_effort_validator_for_files_variable_and_flag(dirs):
    """effortLevel, CLAUDE_CODE_EFFORT_LEVEL and --effort take the same names, in any case."""
    write(dirs[2] / ".claude" / "settings.json", {"effortLevel": "XHigh"})
    assert load(dirs).effort == "xhigh"
    assert load(dirs, CLAUDE_CODE_EFFORT_LEVEL=" Max ").effort == "max"
    assert load(dirs, cli={"effort": "AUTO"}).effort is None
    for source in ({"cli": {"effort": "huge"}}, {"CLAUDE_CODE_EFFORT_LEVEL": "huge"}):
        with pytest.raises(SettingsError, match="huge"):
            load(dirs, **source)
    write(dirs[2] / ".claude" / "settings.json", {"effortLevel": "huge"})  # a project's file: skipped
    assert any(
        '"effortLevel" must be one of low, medium, high, xhigh, max, auto' in w
        for w in load(dirs).report.warnings
    )


def test_truthy_and_falsy():
    assert [truthy(v) for v in ("1", "true", "YES", " On ", True)] == [True] * 5
    assert [truthy(v) for v in ("0", "false", "", "maybe", None, False)] == [False] * 6
    assert [falsy(v) for v in ("0", "FALSE", "no", "off", "", False)] == [True] * 6
    assert [falsy(v) for v in ("1", "maybe", None)] == [False] * 3


def test_api_key_is_not_in_repr(dirs):
    s = load(dirs, ANTHROPIC_API_KEY="sk-secret")
    assert "sk-secret" not in repr(s)


def test_context_editing_object_turns_it_on_unless_disabled(tmp_path):
    from agent.config.settings import load_settings

    project = tmp_path / "p"
    (project / ".claude").mkdir(parents=True)
    env = {"HOME": str(tmp_path), "COMPACT_AGENT_HOME": str(tmp_path / "h")}
    (project / ".claude" / "settings.json").write_text('{"contextEditing": {"keepToolUses": 2}}')
    s = load_settings(cwd=project, environ=env, cli={})
    assert s.compaction.context_editing == {
        "keepToolUses": 2,
        "triggerTokens": None,
        "clearAtLeastTokens": None,
        "clearThinking": None,
    }
    (project / ".claude" / "settings.json").write_text(
        '{"contextEditing": {"enabled": false, "keepToolUses": 2}}'
    )
    assert load_settings(cwd=project, environ=env, cli={}).compaction.context_editing is None
