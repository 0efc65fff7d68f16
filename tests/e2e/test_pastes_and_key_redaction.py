"""A paste too big for the window (saved 0600, the note counting exactly) and the API key kept out of a
saved paste and out of a server error's message."""

from __future__ import annotations

import re
import stat

from agent.runtime.loop import run_turn
from tests.fakeapi import last_user_text
from tests.helpers.frontend import new_session


def test_a_paste_too_big_for_the_window_is_saved_and_the_note_counts_exactly(fake_api, project):
    session = new_session(fake_api, project, CLAUDE_CODE_AUTO_COMPACT_WINDOW="60000")
    budget = session.thresholds().auto_compact // 2
    small = "line of a log\n" * (budget * 2 // 14)  # about half the budget: sent whole
    fake_api.reply_text("read the small one")
    run_turn(session, small)
    assert last_user_text(fake_api.message_requests[-1].body).startswith(small.rstrip("\n"))
    huge = "".join(f"row {i:06d} of the paste\n" for i in range(5_000))  # 116,000 characters
    fake_api.reply_text("I will read the file")
    run_turn(session, huge)
    sent = last_user_text(fake_api.message_requests[-1].body)
    note = re.search(r"the ([\d,]+) characters after the first ([\d,]+) are not shown here", sent)
    assert note is not None and f"This message is {len(huge):,} characters long" in sent
    left_out, shown = (int(n.replace(",", "")) for n in note.groups())
    assert shown + left_out == len(huge) and sent.startswith(huge[:shown])
    [saved] = (session.session_dir / "pastes").iterdir()
    assert saved.read_text() == huge and str(saved) in sent
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    fake_api.check()


KEY = "sk-ant-test-PASTED-0123456789"


def test_a_saved_paste_never_holds_the_api_key(fake_api, project):
    """Issue 30: the key pasted into a huge prompt stayed in clear in the saved paste file."""
    session = new_session(fake_api, project, CLAUDE_CODE_AUTO_COMPACT_WINDOW="60000", ANTHROPIC_API_KEY=KEY)
    huge = f"export ANTHROPIC_API_KEY={KEY}\n" + "".join(f"row {i:06d} of the paste\n" for i in range(5_000))
    fake_api.reply_text("I will read the file")
    run_turn(session, huge)
    [saved] = (session.session_dir / "pastes").iterdir()
    text = saved.read_text()
    assert KEY not in text and "row 004999 of the paste" in text and "ANTHROPIC_API_KEY=" in text
    fake_api.check()


def test_a_server_error_echoing_the_key_is_shown_without_it(fake_api, run_cli, project):
    """Issue 30: a server's error message that echoed the key was printed on stderr as it was."""
    fake_api.error(400, "invalid_request_error", f"bad header x-api-key: {KEY}")
    res = run_cli(fake_api, "-p", "hi", env={"ANTHROPIC_API_KEY": KEY})
    assert res.code != 0 and "bad header x-api-key: [redacted" in res.stderr, res.stderr
    assert KEY not in res.stderr and KEY not in res.stdout
