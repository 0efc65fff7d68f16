"""The snip tool's answer: how many tokens the request it shapes loses, after micro-compaction cleared a
result."""

from __future__ import annotations

from compact.stages.snip import snip_id
from core.messages import assistant, tool_result_block, tool_results, user_prompt
from tests.helpers.frontend import new_session


def test_the_snip_result_reports_what_the_request_loses(fake_api, project):
    session = new_session(fake_api, project)
    first = user_prompt("read the big log")
    session.add(first)
    use = {"type": "tool_use", "id": "toolu_big", "name": "Read", "input": {"file_path": "/p/big.log"}}
    session.add(assistant([use], model=session.model, usage={"input_tokens": 100, "output_tokens": 5}))
    session.add(tool_results([tool_result_block("toolu_big", "x" * 40_000)]))
    session.add(
        assistant(
            [{"type": "text", "text": "read it"}],
            model=session.model,
            usage={"input_tokens": 10_100, "output_tokens": 5},
        )
    )
    current = user_prompt("now drop that")
    session.add(current)
    session.conv.current_prompt_uuid = current.uuid
    session.conv.state.cleared.add("toolu_big")  # micro-compaction already cleared the big result
    full = sum(m.tokens for m in session.messages[:4])
    sent = sum(m.tokens for m in session.conv.view().messages[:4])
    assert sent < full / 10
    answer = session.tool_ctx.services["snip"]([snip_id(first.uuid)], "done with it")
    assert answer == f"Snipped 4 messages, freeing about {sent:,} tokens."
