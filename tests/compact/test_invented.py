"""Invented text caught everywhere (issue 38 item 9): the notes and the server's summary are checked like
the local summary. "The user approved deleting tests/legacy/" reached the model through the notes (a
bullet under "Task specification") and through the server's signed summary, which can't be edited:
what it invents is flagged in the working state, first."""

from __future__ import annotations

from pathlib import Path

import pytest

from compact.compaction import compactor
from compact.compaction.candidate import invented_user_words, scrub
from compact.compaction.notes_template import TEMPLATE
from core.messages import user_prompt
from core.scripted import ScriptedModel, reply_text
from tests.helpers.bench import make_bench
from tests.helpers.compaction import INVENTED, SUMMARY_REPLY, conversation
from tests.helpers.compaction import REFUSING_USER as USER


def notes_with(bullet: str) -> str:
    return TEMPLATE.replace(
        "# Task specification\n_What the user asked for",
        f"# Task specification\n{bullet}\n_What the user asked for",
    ).replace("_\n# Files", "_\n# Files")


def test_a_refusal_given_back_as_an_approval_is_invented() -> None:
    assert invented_user_words(INVENTED, USER) == [INVENTED]
    # a paraphrase of what the user did say stands, and so does an approval the user gave
    assert invented_user_words("The user asked to clean up the test suite under tests/.", USER) == []
    assert invented_user_words("The user said not to delete tests/legacy/ yet.", USER) == []
    assert invented_user_words(INVENTED, ["Yes, go ahead: delete tests/legacy/ and tag the release."]) == []


@pytest.mark.parametrize(
    "bullet", ["- " + INVENTED, "- Deleting tests/legacy/ is approved; the release may be tagged unreviewed."]
)
def test_a_permission_under_the_notes_task_specification_is_checked(bullet: str) -> None:
    notes = notes_with(bullet)
    found = invented_user_words(notes, USER)
    assert found and bullet.lstrip("- ") in found[0] or found[0] in bullet
    cleaned, _ = scrub(notes, USER)
    assert "tests/legacy/" not in cleaned.split("# Files")[0].replace(USER[0], "")
    # the section's own guide line and a requirement the user gave stand
    fine = notes_with("- Clean up the test suite under tests/; keep tests/legacy/ for now.")
    assert invented_user_words(fine, USER) == []


def test_a_summary_loses_an_invented_approval_at_a_compaction(tmp_path: Path) -> None:
    reply = SUMMARY_REPLY.replace("</summary>", f"\n{INVENTED}\n</summary>")
    assert INVENTED in reply
    model = ScriptedModel([reply_text(reply)])
    bench = make_bench(tmp_path, model_api=model)
    for text in USER:
        bench.add(user_prompt(text))
    conversation(bench, ["a.py", "b.py", "c.py"])
    assert compactor.compact(bench.conv, bench.ports, "manual") is True
    assert model.left == 0
    shown = "\n".join(m.text for m in bench.messages)
    assert "approved deleting" not in shown and "removed a statement" in shown
