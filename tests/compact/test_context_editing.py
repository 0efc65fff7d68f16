"""compact.context.context_editing: the clearing's request parameters, what the server reports it cleared, and
where the automatic clearing's point moves (``advance``, ``automatic``); the requests as the server clears
them are tests/agent/runtime/test_server_clearing.py's."""

from __future__ import annotations

from types import SimpleNamespace

from compact.context import context_editing
from compact.context.context_editing import (
    AUTO_TRIGGER,
    BETA,
    advance,
    applied_edits,
    automatic,
    request_params,
)
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt


def test_off_without_a_setting_or_when_disabled() -> None:
    assert request_params(None, thinking_enabled=True) == ({}, [])
    assert request_params({}, thinking_enabled=False) == ({}, [])
    assert request_params({"enabled": False, "keepToolUses": 2}, thinking_enabled=True) == ({}, [])


def test_tool_clearing_with_the_configured_numbers() -> None:
    config = {"enabled": True, "keepToolUses": 4, "triggerTokens": 120_000, "clearAtLeastTokens": 30_000}
    assert request_params(config, thinking_enabled=False) == (
        {
            "context_management": {
                "edits": [
                    {
                        "type": "clear_tool_uses_20250919",
                        "trigger": {"type": "input_tokens", "value": 120_000},
                        "keep": {"type": "tool_uses", "value": 4},
                        "clear_at_least": {"type": "input_tokens", "value": 30_000},
                    }
                ]
            }
        },
        [BETA],
    )
    assert BETA == "context-management-2025-06-27"


def test_defaults_and_thinking_first() -> None:
    body, betas = request_params({"enabled": True}, thinking_enabled=True)
    assert body == {
        "context_management": {
            "edits": [
                {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}},
                {
                    "type": "clear_tool_uses_20250919",
                    "trigger": {"type": "input_tokens", "value": 100_000},
                    "keep": {"type": "tool_uses", "value": 3},
                    "clear_at_least": {"type": "input_tokens", "value": 20_000},
                },
            ]
        }
    }
    assert betas == [BETA]


def test_thinking_clearing_can_be_turned_off_and_clear_at_least_left_out() -> None:
    body, _ = request_params(
        {"clearThinking": False, "clearAtLeastTokens": 0, "excludeTools": ["Edit"]}, thinking_enabled=True
    )
    assert body["context_management"]["edits"] == [
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": 100_000},
            "keep": {"type": "tool_uses", "value": 3},
            "exclude_tools": ["Edit"],
        }
    ]


APPLIED = [
    {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 8, "cleared_input_tokens": 50_000},
    {"type": "clear_thinking_20251015", "cleared_thinking_turns": 3, "cleared_input_tokens": 15_000},
]


def test_applied_edits_from_a_response_dict() -> None:
    response = {"id": "msg_1", "content": [], "context_management": {"applied_edits": APPLIED}}
    assert applied_edits(response) == APPLIED
    assert applied_edits({"id": "msg_1", "content": []}) == []
    assert applied_edits({"context_management": None}) == []
    assert applied_edits({"context_management": {"applied_edits": []}}) == []


def test_applied_edits_from_an_sdk_object() -> None:
    class Edit(SimpleNamespace):
        def model_dump(self) -> dict:
            return dict(vars(self))

    response = SimpleNamespace(context_management=SimpleNamespace(applied_edits=[Edit(**APPLIED[0])]))
    assert applied_edits(response) == [APPLIED[0]]
    assert applied_edits(SimpleNamespace(content=[])) == []


def test_the_point_never_passes_what_was_seen() -> None:
    history = [user_prompt("go"), *[m for n in range(10) for m in _use(n)]]
    threshold = 10_000
    assert advance(history, None, threshold, threshold, 3, seen=0) is None
    assert advance(history, None, threshold, threshold, 3, seen=2 * 5 + 1) == "t4"  # t0..t4 answered
    assert advance(history, None, threshold, threshold, 3, seen=2 * 5) == "t3"  # t4's result not seen


def _use(n: int) -> list[Message]:
    call = assistant(
        [{"type": "tool_use", "id": f"t{n}", "name": "ToolSearch" if n == 1 else "Read", "input": {}}]
    )
    return [call, tool_results([tool_result_block(f"t{n}", "x" * 4_000)])]  # ~1,000 tokens a result


def test_the_point_moves_once_over_the_trigger_and_worth_it_and_is_said_by_how_many_to_keep() -> None:
    history = [user_prompt("go"), *[m for n in range(10) for m in _use(n)]]
    threshold = 10_000
    assert (
        advance(history, None, int(threshold * AUTO_TRIGGER) - 1, threshold, 3) is None
    )  # under the trigger
    moved = advance(history, None, int(threshold * AUTO_TRIGGER), threshold, 3)
    assert moved == "t6"  # all but the 3 newest
    assert advance(history, moved, threshold, threshold, 3) == "t6"  # nothing more to clear yet
    longer = [*history, *[m for n in range(10, 12) for m in _use(n)]]
    assert advance(longer, moved, threshold, threshold, 3) == "t6"  # 2 more results: under AT_LEAST of T
    assert advance(longer, moved, threshold, threshold, 1) == "t10"  # 4 more: worth a cache write
    # a compaction point rewrites the prefix anyway: the point moves whatever the count
    assert advance(history, None, 0, threshold, 3, rewritten=True) == "t6"
    body, betas = automatic(longer, "t6")
    (edit,) = body["context_management"]["edits"]
    assert edit["keep"] == {"type": "tool_uses", "value": 5} and betas == [context_editing.BETA]
    assert edit["exclude_tools"] == ["ToolSearch"]  # its results make deferred tools callable
    assert automatic(longer, None) == ({}, []) and automatic(longer, "gone") == ({}, [])
