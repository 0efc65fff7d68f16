"""The one place where tool calls are checked and tool failures become ``is_error`` results.

``run_tool`` validates the model's arguments against the tool's JSON schema (the small subset our
schemas use), runs the tool, and turns ``ToolError`` and any unexpected exception into a
``ToolResult(is_error=True)`` whose text tells the model what went wrong. It never raises.
``precheck`` finds the failures a tool can tell before running (its optional ``check``).
"""

from __future__ import annotations

from typing import Any

from core.boundary import guarded
from tools.base import Tool, ToolContext, ToolError, ToolResult

_TYPE_NAMES = {
    "object": "an object",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
    "array": "an array",
}


def run_tool(tool: Tool, args: Any, ctx: ToolContext) -> ToolResult:
    """Validate ``args``, run ``tool`` and always return a result (never raises: a bug in one tool must not
    end the session)."""

    def run() -> ToolResult:
        problem = validate(args, tool.input_schema)
        if problem:
            return _invalid(tool, problem)
        return _never_empty(tool.run(args, ctx), tool.name)

    return guarded(run, lambda exc: _failed(tool, exc))


def precheck(tool: Tool, args: Any, ctx: ToolContext) -> ToolResult | None:
    """The error a call would end in anyway, found without running it; None when it may go ahead.

    Asked before a permission prompt, so nobody approves a change that cannot happen. Tools that can
    tell cheaply define ``check(args, ctx)`` raising the ``ToolError`` their ``run`` would raise (any other
    exception: the run would fail the same way, so it is said now and nobody is asked).
    """
    problem = validate(args, tool.input_schema)
    if problem:
        return _invalid(tool, problem)
    check = getattr(tool, "check", None)
    if check is None:
        return None

    def checked() -> ToolResult | None:
        check(args, ctx)
        return None

    return guarded(checked, lambda exc: _failed(tool, exc))


def _invalid(tool: Tool, problem: str) -> ToolResult:
    return ToolResult(
        content=f"Invalid input for {tool.name}: {problem}", is_error=True, summary="invalid input"
    )


def _failed(tool: Tool, exc: Exception) -> ToolResult:
    """A ``ToolError`` says what went wrong in its own words; anything else is named with its type."""
    if isinstance(exc, ToolError):
        message = str(exc) or f"{tool.name} failed."
    else:
        message = f"Tool {tool.name} failed: {type(exc).__name__}: {exc}"
    return ToolResult(content=message, is_error=True, summary=_first_line(message))


def _never_empty(result: ToolResult, name: str) -> ToolResult:
    # The API rejects empty tool_result text, so a silent tool still says something.
    if isinstance(result.content, str) and not result.content.strip():
        result.content = f"({name} completed with no output)"
    elif isinstance(result.content, list) and not result.content:
        result.content = f"({name} completed with no output)"
    return result


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else ""


def validate(value: Any, schema: dict[str, Any], where: str = "") -> str | None:
    """Return a sentence describing the first way ``value`` breaks ``schema``, or None if it fits."""
    expected = schema.get("type")
    if expected and not _has_type(value, expected):
        return f"{_name(where)} must be {_TYPE_NAMES.get(expected, expected)}, got {_describe(value)}."
    if "enum" in schema and value not in schema["enum"]:
        options = ", ".join(repr(option) for option in schema["enum"])
        return f"{_name(where)} must be one of {options}, got {value!r}."
    if expected in ("integer", "number"):
        return _check_range(value, schema, where)
    if expected == "object":
        return _check_object(value, schema, where)
    if expected == "array" and "items" in schema:
        for index, item in enumerate(value):
            problem = validate(item, schema["items"], f"{where}[{index}]" if where else f"[{index}]")
            if problem:
                return problem
    return None


def _check_object(value: dict[str, Any], schema: dict[str, Any], where: str) -> str | None:
    properties: dict[str, Any] = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in value:
            kind = _TYPE_NAMES.get(properties.get(key, {}).get("type", ""), "a value")
            return f"the required parameter `{_join(where, key)}` is missing (expected {kind})."
    if schema.get("additionalProperties") is False:
        extra = [key for key in value if key not in properties]
        if extra:
            allowed = ", ".join(f"`{key}`" for key in properties) or "none"
            return f"unexpected parameter `{_join(where, extra[0])}`; allowed parameters are {allowed}."
    for key, item in value.items():
        if key in properties:
            problem = validate(item, properties[key], _join(where, key))
            if problem:
                return problem
    return None


def _check_range(value: float, schema: dict[str, Any], where: str) -> str | None:
    if "minimum" in schema and value < schema["minimum"]:
        return f"{_name(where)} must be at least {schema['minimum']}, got {value}."
    if "maximum" in schema and value > schema["maximum"]:
        return f"{_name(where)} must be at most {schema['maximum']}, got {value}."
    return None


def _has_type(value: Any, expected: str) -> bool:
    # bool is a subclass of int in Python, but JSON keeps them apart.
    if expected == "integer":
        if isinstance(value, float) and value.is_integer():
            return True
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    checks = {"object": dict, "string": str, "boolean": bool, "array": list}
    return isinstance(value, checks[expected]) if expected in checks else True


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    kinds = {str: "a string", int: "an integer", float: "a number", list: "an array", dict: "an object"}
    return kinds.get(type(value), type(value).__name__)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _name(where: str) -> str:
    return f"`{where}`" if where else "the input"
