from __future__ import annotations

from types import SimpleNamespace

from compact.context.context_editing import BETA, applied_edits, request_params


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
