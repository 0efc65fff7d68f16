"""run_tool's validation messages and error conversion, and the registry of built-in tools."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tools.base import ToolContext, ToolError, ToolResult
from tools.registry import builtin_tools, get, tool_schemas
from tools.runner import run_tool, validate


def make_ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(project_dir=tmp_path, session_dir=tmp_path / ".session", cwd=tmp_path)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "ids": {"type": "array", "items": {"type": "string"}},
        "inner": {
            "type": "object",
            "properties": {"depth": {"type": "integer"}},
            "required": ["depth"],
            "additionalProperties": False,
        },
    },
    "required": ["name"],
    "additionalProperties": False,
}


class FakeTool:
    """A tool whose behaviour the test chooses."""

    name = "Fake"
    description = "test double"
    input_schema = SCHEMA
    read_only = True

    def __init__(self, outcome: ToolResult | Exception) -> None:
        self.outcome = outcome

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def test_valid_input_passes() -> None:
    args = {
        "name": "x",
        "count": 3,
        "ratio": 0.5,
        "flag": True,
        "mode": "fast",
        "ids": ["a"],
        "inner": {"depth": 1},
    }
    assert validate(args, SCHEMA) is None
    assert validate({"name": "x", "ratio": 2}, SCHEMA) is None  # an integer is a number


def test_validation_messages() -> None:
    cases = [
        ({}, "the required parameter `name` is missing (expected a string)."),
        ({"name": 5}, "`name` must be a string, got an integer."),
        ({"name": "x", "count": "3"}, "`count` must be an integer, got a string."),
        ({"name": "x", "count": True}, "`count` must be an integer, got a boolean."),
        ({"name": "x", "count": 2.5}, "`count` must be an integer, got a number."),
        ({"name": "x", "count": 0}, "`count` must be at least 1, got 0."),
        ({"name": "x", "count": 11}, "`count` must be at most 10, got 11."),
        ({"name": "x", "ratio": "1"}, "`ratio` must be a number, got a string."),
        ({"name": "x", "flag": "yes"}, "`flag` must be a boolean (true or false), got a string."),
        ({"name": "x", "mode": "medium"}, "`mode` must be one of 'fast', 'slow', got 'medium'."),
        ({"name": "x", "ids": "a"}, "`ids` must be an array, got a string."),
        ({"name": "x", "ids": ["a", 2]}, "`ids[1]` must be a string, got an integer."),
        (
            {"name": "x", "inner": {}},
            "the required parameter `inner.depth` is missing (expected an integer).",
        ),
        (
            {"name": "x", "inner": {"depth": 1, "x": 0}},
            "unexpected parameter `inner.x`; allowed parameters are `depth`.",
        ),
        ({"name": None}, "`name` must be a string, got null."),
        ("text", "the input must be an object, got a string."),
    ]
    assert [validate(args, SCHEMA) for args, _ in cases] == [message for _, message in cases]


def test_unexpected_parameters_are_named() -> None:
    assert validate({"name": "x", "colour": "red"}, SCHEMA) == (
        "unexpected parameter `colour`; allowed parameters are `name`, `count`, `ratio`, `flag`, `mode`, "
        "`ids`, `inner`."
    )


def test_invalid_input_becomes_an_error_result_without_running(tmp_path: Path) -> None:
    tool = FakeTool(RuntimeError("must not run"))
    assert run_tool(tool, {"name": 1}, make_ctx(tmp_path)) == ToolResult(
        content="Invalid input for Fake: `name` must be a string, got an integer.",
        is_error=True,
        summary="invalid input",
    )


def test_tool_error_becomes_an_error_result(tmp_path: Path) -> None:
    tool = FakeTool(ToolError("Do this instead.\nMore detail."))
    assert run_tool(tool, {"name": "x"}, make_ctx(tmp_path)) == ToolResult(
        content="Do this instead.\nMore detail.", is_error=True, summary="Do this instead."
    )


def test_unexpected_exceptions_are_contained(tmp_path: Path) -> None:
    tool = FakeTool(ValueError("boom"))
    assert run_tool(tool, {"name": "x"}, make_ctx(tmp_path)) == ToolResult(
        content="Tool Fake failed: ValueError: boom",
        is_error=True,
        summary="Tool Fake failed: ValueError: boom",
    )


def test_success_passes_through(tmp_path: Path) -> None:
    result = ToolResult(content="fine", summary="ok")
    assert run_tool(FakeTool(result), {"name": "x"}, make_ctx(tmp_path)) == result


def test_empty_content_is_never_sent(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    assert (
        run_tool(FakeTool(ToolResult(content="")), {"name": "x"}, ctx).content
        == "(Fake completed with no output)"
    )
    assert (
        run_tool(FakeTool(ToolResult(content=[])), {"name": "x"}, ctx).content
        == "(Fake completed with no output)"
    )
    assert run_tool(FakeTool(ToolError("")), {"name": "x"}, ctx).content == "Fake failed."


# --- registry ----------------------------------------------------------------------------------


def test_builtin_tools_and_their_schemas() -> None:
    tools = builtin_tools()
    schemas = tool_schemas(tools)
    assert [s["name"] for s in schemas] == ["Bash", "Glob", "Grep", "Read", "Edit", "Write", "TodoWrite"]
    assert {t.name: t.declaration.touches for t in tools} == {
        "Bash": "runs",
        "Glob": "reads",
        "Grep": "reads",
        "Read": "reads",
        "Edit": "writes",
        "Write": "writes",
        "TodoWrite": "nothing",
    }
    for schema in schemas:
        assert set(schema) == {"name", "description", "input_schema"}
        assert schema["description"].strip()
        assert schema["input_schema"]["type"] == "object"
        assert schema["input_schema"]["additionalProperties"] is False


def test_required_fields_match_claude_code() -> None:
    required = {t.name: t.input_schema["required"] for t in builtin_tools()}
    assert required == {
        "Bash": ["command"],
        "Glob": ["pattern"],
        "Grep": ["pattern"],
        "Read": ["file_path"],
        "Edit": ["file_path", "old_string", "new_string"],
        "Write": ["file_path", "content"],
        "TodoWrite": ["todos"],
    }
    grep = get(builtin_tools(), "Grep")
    assert grep is not None
    assert list(grep.input_schema["properties"]) == [
        "pattern",
        "path",
        "glob",
        "type",
        "output_mode",
        "-i",
        "-n",
        "-A",
        "-B",
        "-C",
        "multiline",
        "head_limit",
    ]


def test_get_finds_by_name() -> None:
    tools = builtin_tools()
    assert get(tools, "Read") is tools[3]
    assert get(tools, "Nope") is None


def test_builtin_tools_is_a_fresh_list_callers_may_extend() -> None:
    tools = builtin_tools()
    tools.append(FakeTool(ToolResult(content="x")))
    assert len(builtin_tools()) == 7


def test_importing_the_tools_starts_no_process() -> None:
    code = (
        "import subprocess\n"
        "def refuse(*a, **k): raise SystemExit('subprocess at import')\n"
        "subprocess.Popen.__init__ = refuse\n"
        "import shutil; shutil.which = refuse\n"
        "import tools.registry\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stderr) == (0, "")
