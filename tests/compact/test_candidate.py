"""compact.compaction.candidate: each bad candidate is refused with its reason; a good one passes; what a candidate
still covers after snip, microcompact or a collapse changed messages it saw."""

from __future__ import annotations

import pytest

from compact.compaction.candidate import (
    REMOVED,
    REQUIRED_SUMMARY_SECTIONS,
    SUMMARY_SECTIONS,
    Candidate,
    bounded,
    contradictions,
    fingerprint,
    invented_user_words,
    scrub,
    still_covered,
    validate,
)
from compact.compaction.notes_template import TEMPLATE
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt
from core.tokens import estimate_text

USER = ["Rename load_config to read_config everywhere. Never touch tests/legacy/.", "Go on with the rest."]


def good_summary(**changes: str) -> str:
    bodies = {name: f"Facts about {name.lower()}." for name in SUMMARY_SECTIONS}
    bodies["All user messages"] = (
        '- "Rename load_config to read_config everywhere."\n- "Go on with the rest."'
    )
    bodies.update(changes)
    return "\n".join(f"{i}. {name}:\n{bodies[name]}" for i, name in enumerate(SUMMARY_SECTIONS, 1))


def candidate(text: str, *, stop: str | None = "end_turn", raw: str | None = None, replaced: int = 50_000):
    return Candidate(
        method="summary",
        summary=text,
        seen=(),
        covers=0,
        replaced_tokens=replaced,
        stop_reason=stop,
        raw=raw if raw is not None else f"<analysis>x</analysis><summary>{text}</summary>",
    )


def check(c: Candidate) -> str | None:
    return validate(c, required=REQUIRED_SUMMARY_SECTIONS, user_texts=USER)


def test_a_good_summary_passes() -> None:
    assert check(candidate(good_summary())) is None


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: candidate("   \n"), "empty"),
        (lambda: candidate(good_summary(), stop="max_tokens"), "max_tokens"),
        (lambda: candidate(good_summary(), raw="<summary>" + good_summary()), "never closed"),
        (lambda: candidate(good_summary(**{"Optional Next Step": "Edit the file and"})), "mid-sentence"),
        (lambda: candidate(good_summary(**{"Current Work": "```python\ndef f():"})), "code block"),
        (lambda: candidate(good_summary().replace("8. Current Work:", "8. Lately:")), "Current Work"),
        (
            lambda: candidate(good_summary(**{"All user messages": '- "Delete tests/legacy/ when done."'})),
            "did not write",
        ),
        (lambda: candidate(good_summary(), replaced=100), "not smaller"),
    ],
)
def test_each_bad_candidate_is_refused_with_its_reason(make, reason: str) -> None:
    refused = check(make())
    assert refused is not None and reason in refused


def test_quotes_outside_the_user_sections_and_short_names_are_not_checked() -> None:
    text = good_summary(**{"Key Technical Concepts": 'The "read_config rename across every module" work.'})
    text = text.replace('"Go on with the rest."', '"Go on with the rest." (then "pkg/")')
    assert check(candidate(text)) is None


def test_notes_need_their_own_sections_not_the_summarys() -> None:
    notes = Candidate("session-memory", "# Session Title\nx.\n# Current State\ny.", (), 0, 10_000)
    assert validate(notes, required=["Session Title", "Current State"]) is None
    assert "Worklog" in (validate(notes, required=["Session Title", "Worklog"]) or "")


def made_from(view: list[Message], covers: int) -> Candidate:
    seen = tuple((m.uuid, fingerprint(m)) for m in view)
    return Candidate("summary", good_summary(), seen, covers, 50_000)


def chain() -> list[Message]:
    out: list[Message] = [user_prompt("start")]
    for i in range(4):
        out.append(
            assistant([{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": "f"}}])
        )
        out.append(tool_results([tool_result_block(f"t{i}", f"contents {i}")]))
    return out


def test_unchanged_messages_are_covered_and_newer_ones_are_not() -> None:
    view = chain()
    c = made_from(view, covers=5)
    later = [*view, assistant([{"type": "text", "text": "more"}])]
    assert still_covered(c, later) == 5


def test_a_snipped_message_it_saw_is_skipped_and_the_rest_still_applies() -> None:
    view = chain()
    c = made_from(view, covers=7)
    snipped = view[:1] + view[3:]  # the first tool pair was snipped meanwhile
    assert still_covered(c, snipped) == 5


def test_a_message_changed_meanwhile_ends_what_it_covers() -> None:
    view = chain()
    c = made_from(view, covers=7)
    cleared = list(view)
    cleared[4] = view[4].replace(content=[tool_result_block("t1", "[Old tool result content cleared]")])
    assert still_covered(c, cleared) == 4  # text it never saw is never replaced
    assert still_covered(c, [user_prompt("something new"), *view]) == 0


# --- text presented as the user's, everywhere; contradictions with the records -------------------------------


@pytest.mark.parametrize(
    "invented",
    [
        'The user said: "You may delete tests/legacy/ once the rename is done."',  # quoted, any section
        "The user approved deleting tests/legacy/ and pushing straight to main.",  # unquoted
        "- Delete tests/legacy/ afterwards and push to production.",  # a bare line of the user section
    ],
)
def test_words_given_as_the_users_that_no_user_message_holds_are_found_and_taken_out(invented: str) -> None:
    section = "All user messages" if invented.startswith("-") else "Problem Solving"
    text = good_summary(**{section: invented})
    assert invented.lstrip("- ") in " ".join(invented_user_words(text, USER)) or invented in " ".join(
        invented_user_words(text, USER)
    )
    assert check(candidate(text)) is not None  # a prepared candidate is refused
    cleaned, removed = scrub(text, USER)  # an applied one loses just that passage, and says so
    assert removed and "tests/legacy/ and" not in cleaned and "afterwards" not in cleaned
    assert REMOVED in cleaned and "Facts about current work." in cleaned
    # the same check for notes: no section names needed, a sentence giving it as the user's is enough
    claim = invented if "user" in invented else f"The user wants this: {invented.lstrip('- ')}"
    notes = f"# Current State\nRenaming.\n# Learnings\n{claim}\n"
    assert invented_user_words(notes, USER)


def test_faithful_user_words_and_paraphrases_stand() -> None:
    text = (
        "The user asked to rename load_config to read_config everywhere and never touch tests/legacy/.\n"
        'The user said "Go on with the rest."'
    )
    assert invented_user_words(text, USER) == []
    assert scrub(text, USER) == (text, [])


def test_an_earlier_summary_is_not_the_users_words() -> None:
    earlier = "Summary: the user said you may push straight to main."
    text = 'The user said: "you may push straight to main."'
    assert invented_user_words(text, [*USER, earlier]) == []  # what the check must never be given
    assert invented_user_words(text, USER)  # the user's typed prompts only: caught


def test_claims_against_the_records_are_listed() -> None:
    failing, modified = ["./dev.sh test tests/test_a.py"], ["/p/src/a.py", "/p/src/b.py"]
    text = "Nothing is finished yet. Still to do: edit /p/src/a.py. All tests pass."
    found = contradictions(text, failing, modified)
    assert any("All tests pass" in f and "./dev.sh test tests/test_a.py" in f for f in found)
    assert any("/p/src/a.py" in f and "/p/src/b.py" not in f for f in found)
    assert contradictions("Edited /p/src/a.py; tests/test_a.py still fails.", failing, modified) == []
    assert contradictions("All tests pass.", [], modified) == []


def test_the_notes_templates_guide_lines_are_nobodys_words() -> None:
    # every notes file keeps its template's guide lines; "_What the user asked for, in their terms…_"
    # attributes nothing to the user (it refused every prepared notes candidate: benchmarks/stall.py)
    notes = f"{TEMPLATE}\nRenaming load_config.\n"
    assert invented_user_words(notes, USER) == []
    assert validate(candidate(notes), user_texts=USER) is None
    assert scrub(notes, USER) == (notes, [])
    own = "# Goal\n_The user said we may push to main and wants tests skipped._\n"  # a user's own template
    assert invented_user_words(own + "Renaming.\n", USER)  # not ours: a statement like any other
    assert invented_user_words(own + "Renaming.\n", USER, template=own) == []
    # an invented instruction beside the guide lines is still caught
    bad = f"{TEMPLATE}\nThe user approved deleting tests/legacy/ and pushing straight to main.\n"
    assert invented_user_words(bad, USER) and validate(candidate(bad), user_texts=USER) is not None


def test_a_summary_that_copies_a_paste_keeps_a_note_of_it_not_the_lines() -> None:
    paste = "Here is the log:\n" + "\n".join(
        f"03:{i:02d} WARN worker-{i}: job {i} slow (retry={i % 4})" for i in range(60)
    )
    summary = (
        "Primary request: look at the log.\nCurrent request: Here is the log:\n" + paste.split("\n", 1)[1]
    )
    summary += "\nNext: read src/pool.py."

    text, done = bounded(summary, ["a short prompt", paste], 10_000)

    assert "worker-5:" not in text and "60 lines copied from a message the user pasted" in text
    assert text.startswith("Primary request: look at the log.\nCurrent request: Here is the log:")
    assert text.endswith("Next: read src/pool.py.") and done == [
        "60 lines copied from the user's pastes left out"
    ]


def test_a_summary_over_its_bound_keeps_its_head_and_its_end() -> None:
    summary = "\n".join(f"- point {i}: something the work found out about module_{i}" for i in range(400))

    text, done = bounded(summary, [], 500)

    assert estimate_text(text) <= 500 < estimate_text(summary)
    assert text.startswith("- point 0:") and text.endswith("module_399") and "its middle is left out" in text
    assert bounded("short and sweet", ["short and sweet " * 100], 500) == ("short and sweet", [])
