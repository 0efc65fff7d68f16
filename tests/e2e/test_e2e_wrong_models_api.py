"""Issue 40, class 5: a Models API that reports the wrong thinking for a model never ends a session. The
real CLI against the fake Messages API (tests/fakeapi.py), whose 5.5 family refuses a thinking budget
whatever its Models API says."""

from __future__ import annotations

import pytest

from tests.fakeapi import FakeAPI, model_info

MODEL = "claude-sonnet-5-5"


def _reported(kind: str) -> dict:
    """Sonnet 5.5 as a wrong Models API reports it: budget-style thinking (``enabled``) and no effort, or
    thinking that can be ``disabled``."""
    from agent.demo.server import capabilities

    caps = capabilities(MODEL)
    if kind == "budget":
        caps["thinking"]["types"] = {
            "enabled": {"supported": True},
            "adaptive": {"supported": False},
            "disabled": {"supported": True},
            "between_tools": {"supported": False},
        }
        caps["effort"] = {"supported": False}
    else:
        caps["thinking"]["types"]["disabled"] = {"supported": True}
        caps["thinking"]["types"]["between_tools"] = {"supported": False}
    return {**model_info(MODEL, 200_000), "capabilities": caps}


@pytest.mark.parametrize("kind", ["budget", "disabled"])
def test_a_models_api_that_reports_the_wrong_thinking_never_ends_the_session(run_cli, kind):
    """Before: 'API error 400: "thinking.type.enabled" is not supported for this model', exit 1, on every
    run that learned the report before its first request."""
    with FakeAPI(models=[_reported(kind)]) as api:
        api.refusals_expected = True
        refused_kind = "enabled" if kind == "budget" else "disabled"
        args = ("--model", MODEL)
        settings = {"MAX_THINKING_TOKENS": "0"} if kind == "disabled" else {}
        saw_refusal = False
        for n in range(3):
            since = len(api.message_requests)
            api.reply_text(f"answer {n}")  # a refused request takes no reply
            cont = ("--continue",) if n else ()
            res = run_cli(api, "-p", f"question {n}", *args, *cont, env=settings)
            assert res.code == 0, (
                res.stderr,
                [(r.status, r.body.get("thinking")) for r in api.message_requests],
            )
            assert res.stdout.strip() == f"answer {n}", res.stdout
            sent = api.message_requests[since:]
            kinds = [(r.body.get("thinking") or {}).get("type") for r in sent]
            saw_refusal |= refused_kind in kinds
            # each refused request is followed by a legal one, and the last one sent is legal
            assert sent[-1].status == 200 and kinds[-1] != refused_kind, kinds
        assert saw_refusal, "the wrong report never reached a request: the test tests nothing"
