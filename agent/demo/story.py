"""The demo's story and its scripted model.

A story is a list of ``Beat``s. Each is one line typed at the prompt (a prompt for the model, or a slash
command) and one narration line saying what is about to happen and why. A prompt's beat also holds the
model's replies, one per request of that turn, each made from the request body (so a reply can quote
what a tool really returned, such as the path a large output was saved to).

``Story.respond`` is the model the scripted server runs: a function from a request body to a reply,
stateful by which beat of the story it is at::

    notes-update request (names the notes file, holds <current-notes>) → Edit calls on the notes file
    summary request (tool_choice none + the <summary> instruction)  → a summary of the beats so far
    last user message is a beat's prompt                             → that beat's first reply
    tool results, or the summary after a compaction                  → the current beat's next reply
    a tool call failed (a "no" to a permission question, say)        → the model stops and says why
    anything else                                                    → "I can only play the story"

Off-script moments are kept in ``problems`` (``--demo --auto`` exits 1 when there are any).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.demo.project import YEARS, YearFacts
from agent.demo.server import Reply, Step, last_user_text
from compact.compaction.notes_template import SECTIONS

ReplyFn = Callable[[dict[str, Any]], Reply]
ID_TAG = re.compile(r"\s*\[id:[^\]]*\]\s*$")
SAVED_TO = re.compile(r"Full output saved to: (\S+)")
OUT_OF_STORY = (
    "I'm the demo's scripted model, so I only know the story: press Enter to send the prompt "
    "the demo suggests, or type /exit. With an API key, `compact-agent` talks to a real model."
)


@dataclass
class Beat:
    say: str  # narration: what happens next, and why
    line: str  # typed at the prompt: a prompt for the model, or a slash command
    replies: list[ReplyFn] = field(default_factory=list)
    done: str = ""  # what the summary says about this beat once it is played
    fix: bool = False  # the beat that fixes the bug
    refunds: bool = False  # a beat about the orders (what the refund team needs)
    # the narration then says what the bar under the prompt shows now (agent.demo.driver): the story
    # never says in advance which colour it has or when the agent compacts; it reports what happened
    bar: bool = False
    # the line shows the session notes: the driver offers it once the notes update in flight, if any, has
    # landed (the notes are written in the background; at a fast pace the turn before can end first)
    notes: bool = False

    @property
    def is_prompt(self) -> bool:
        return not self.line.startswith("/")


class Story:
    def __init__(self, beats: list[Beat], *, latency: float = 0.0, summary_latency: float = 0.0) -> None:
        self.beats = beats
        self.latency, self.summary_latency = latency, summary_latency
        self.current: Beat | None = None
        self.index = 0  # the current beat's next reply
        self.offered: Beat | None = None  # the prompt the driver last put in the input line
        self.started: list[Beat] = []  # prompts the model has answered, in order
        self.played: list[Beat] = []  # beats whose replies all went out
        self.problems: list[str] = []
        self.notes_updates = 0
        self._lock = threading.Lock()

    def respond(self, body: dict[str, Any]) -> Step:
        """The scripted model: the reply to one /v1/messages request."""
        notes = notes_file(body)
        if notes is not None:  # a background notes update: Edit calls on the notes file, nothing else
            with self._lock:
                return self.notes_update(notes, current_notes(body))
        if is_summary_request(body):
            threading.Event().wait(self.summary_latency)  # long enough to see "Compacting conversation…"
            return Reply.text(self.summary(instructions_of(body)))
        threading.Event().wait(self.latency)
        with self._lock:
            return self._next(body)

    def _next(self, body: dict[str, Any]) -> Reply:
        typed = typed_prompt(body)
        beat = next((b for b in self.beats if b.is_prompt and b.line == typed), None)
        failed = failed_result(body)
        if beat is not None:
            self._start(beat)
        elif failed is not None:
            self.problems.append(f"a tool call failed: {failed}")
            self.index = len(self.current.replies) if self.current else 0
            first = (failed.splitlines() or ["no reason given"])[0]
            return Reply.text(
                f"That call did not go through ({first}), so I'll stop here. "
                "Tell me how you would like to go on."
            )
        elif typed is not None:
            self.problems.append(f"a prompt the story does not know: {typed!r}")
            return Reply.text(OUT_OF_STORY)
        elif not self._has_more() and self.offered is not None and self.offered not in self.played:
            # the compaction that ran before this request summarised the prompt away
            self._start(self.offered)
        if not self._has_more():
            self.problems.append("a request after the story's replies ran out")
            return Reply.text(OUT_OF_STORY)
        assert self.current is not None
        reply = self.current.replies[self.index](body)
        self.index += 1
        if self.index == len(self.current.replies) and self.current not in self.played:
            self.played.append(self.current)
        return reply

    def _start(self, beat: Beat) -> None:
        self.current, self.index = beat, 0
        self.started.append(beat)

    def _has_more(self) -> bool:
        return self.current is not None and self.index < len(self.current.replies)

    def notes_update(self, path: str, current: str = "") -> Reply:
        """What the scripted model writes into the session notes: each section it can fill says where the
        story stands now, in place of what the section said before (an Edit per section, whole), so the
        notes read as one up-to-date page, not a pile of updates."""
        self.notes_updates += 1
        done = [b.done for b in self.played if b.done]
        now = self.current.line if self.current is not None else "starting"
        fixed = any(b.fix for b in self.played)
        bodies = {
            "Session Title": "Fixing tinyshop's discount bug and sizing the refunds",
            "Current State": f"Working on: {now}",
            "Task specification": "Find why tinyshop's tests fail and fix it; check the fix under load; "
            "work out which past orders were overcharged and what to refund.",
            "Files and Functions": "- shop/pricing.py: apply_discount(total, percent), where the bug was\n"
            "- data/orders-<year>.csv: the order logs read for the refunds",
            "Workflow": "- python3 -m unittest: the test suite\n- python3 scripts/simulate.py: a day of checkouts",
            "Errors & Corrections": (
                "- apply_discount took the percentage off as money; fixed to total * (1 - percent / 100)"
                if fixed
                else "- tests/test_pricing.py fails: 190.0 != 180.0 (not fixed yet)"
            ),
            "Learnings": "- A Bash output over 30,000 characters is saved to disk; Grep still searches it there.",
            "Key results": "\n".join(f"- {b.done}" for b in self.played if b.refunds) or "- none yet",
            "Worklog": "\n".join(f"- {line}" for line in done) or "- nothing finished yet",
        }
        sections = _sections(current)
        edits = []
        for name, body in bodies.items():
            old = sections.get(name)
            if old is None or old.strip() == f"{_guide(name)}\n{body}".strip():
                continue
            edits.append(
                ("Edit", {"file_path": path, "old_string": old, "new_string": f"{_guide(name)}\n{body}\n"})
            )
        if not edits:
            return Reply.text("The notes are up to date.")
        return Reply.tools(edits)

    def summary(self, instructions: str) -> str:
        """What the scripted model writes when asked to summarise: the beats played so far.

        Instructions steer it as they would a real model: here they keep only the order findings.
        """
        done = [b.done for b in self.played if b.done and (not instructions or b.refunds)]
        asked = [b.line for b in self.started]
        current = self.current.line if self._has_more() and self.current else ""
        fixed = any(b.fix for b in self.played)
        parts = [
            "<analysis>The user is fixing a pricing bug in a toy shop and measuring what it cost "
            "customers.</analysis>",
            "<summary>",
        ]
        if instructions:
            parts.append(f"(Written as asked: {instructions}.)\n")
        parts += [
            "1. Primary Request and Intent: find why tinyshop's tests fail, fix it, check the fix under load, "
            "and work out which past orders the bug overcharged and what to refund.",
            "2. Key Technical Concepts: Python, unittest, percentage discounts, money rounded to cents.",
            "3. Files and Code Sections:",
            *[f"   - {line}" for line in done or ["none yet"]],
            "4. Errors and fixes: "
            + (
                "tests/test_pricing.py failed (190.0 != 180.0) until apply_discount was fixed."
                if fixed
                else "none yet."
            ),
            "5. Problem Solving: "
            + (
                "every order with a coupon and a subtotal over 100.00 was overcharged."
                if any(b.refunds for b in self.played)
                else "under way."
            ),
            "6. All user messages:",
            *[f"   - {line}" for line in asked or ["none yet"]],
            f"7. Pending Tasks: {current or 'none'}",
            f"8. Current Work: {'answering the request above' if current else 'the last request was answered'}.",
            "9. Optional Next Step: " + (f'carry on with "{current}"' if current else ""),
            "</summary>",
        ]
        return "\n".join(parts)


# --- reading requests -------------------------------------------------------------------------------


NOTES_FILE = re.compile(r"^Notes file: (\S+)$", re.MULTILINE)


def notes_file(body: dict[str, Any]) -> str | None:
    """The notes file a notes-update request names (compact.compaction.notes_template), or None for any other."""
    text = last_user_text(body)
    found = NOTES_FILE.search(text) if "<current-notes>" in text else None
    return found.group(1) if found else None


def _guide(section: str) -> str:
    return f"_{dict(SECTIONS)[section]}_"


CURRENT_NOTES = re.compile(r"<current-notes>\n(.*?)\n</current-notes>", re.DOTALL)


def current_notes(body: dict[str, Any]) -> str:
    found = CURRENT_NOTES.search(last_user_text(body))
    return found.group(1) if found else ""


def _sections(notes: str) -> dict[str, str]:
    """Each section's text after its "# Name" line, up to the next one, exactly as in the file."""
    parts = re.split(r"(?m)^# (.+)\n", notes)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def is_summary_request(body: dict[str, Any]) -> bool:
    return (body.get("tool_choice") or {}).get("type") == "none" and "<summary>" in last_user_text(body)


def instructions_of(body: dict[str, Any]) -> str:
    text = last_user_text(body)
    _, found, extra = text.partition("Additional instructions:")
    return " ".join(extra.split()) if found else ""


def _last_user_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    content = users[-1].get("content") if users else []
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def typed_prompt(body: dict[str, Any]) -> str | None:
    """The prompt the user typed, when the last user message is one (typed prompts carry an [id:] tag)."""
    for block in _last_user_blocks(body):
        text = block.get("text", "") if block.get("type") == "text" else ""
        if ID_TAG.search(text):
            return ID_TAG.sub("", text).strip()
    return None


def tool_results(body: dict[str, Any]) -> list[str]:
    """The text of each tool result in the last user message."""
    out = []
    for block in _last_user_blocks(body):
        if block.get("type") == "tool_result":
            content = block.get("content")
            out.append(
                content
                if isinstance(content, str)
                else "\n".join(b.get("text", "") for b in content or [] if b.get("type") == "text")
            )
    return out


SUMMARY_OPENING = "This session continues an earlier conversation"


def compacted(body: dict[str, Any]) -> bool:
    """Whether the request was made after a compaction (its history opens with a summary)."""
    first = (body.get("messages") or [{}])[0]
    content = first.get("content")
    text = (
        content
        if isinstance(content, str)
        else " ".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
    )
    return SUMMARY_OPENING in text


def failed_result(body: dict[str, Any]) -> str | None:
    for block in _last_user_blocks(body):
        if block.get("type") == "tool_result" and block.get("is_error"):
            content = block.get("content")
            return content if isinstance(content, str) else str(content)
    return None


# --- the story --------------------------------------------------------------------------------------


def tour(project: Path, facts: dict[int, YearFacts], *, auto: bool) -> list[Beat]:
    """The demo: a pricing bug found and fixed, a huge output, three order logs, compaction, commands."""
    pricing = str(project / "shop" / "pricing.py")
    saved: dict[str, str] = {}

    def total_line(body: dict[str, Any]) -> Reply:
        found = SAVED_TO.search("\n".join(tool_results(body)))
        if found is None:
            return Reply.text("The simulation did not produce its log, so there is nothing to check.")
        saved["path"] = found.group(1)
        return Reply.tool(
            "Grep",
            {"pattern": "^TOTAL", "path": found.group(1), "output_mode": "content"},
            text="That log is far too big for my context, so the agent saved it to disk and "
            f"gave me a 2 KB preview and the path:\n`{found.group(1)}`\n\n"
            "I can still search it. The last line holds the day's total:",
        )

    def total_said(body: dict[str, Any]) -> Reply:
        line = next((ln for text in tool_results(body) for ln in text.splitlines() if "TOTAL" in ln), "")
        total = line.split("TOTAL", 1)[-1].strip() or "(no total line)"
        return Reply.text(
            f"The day ran clean: **{total}**. Every checkout went through the fixed "
            "`apply_discount`, and the full log stays on disk if we need it again."
        )

    def log_read(year: int) -> ReplyFn:
        path = str(project / "data" / f"orders-{year}.csv")
        return lambda body: Reply.tool("Read", {"file_path": path})

    def year_said(year: int) -> ReplyFn:
        f = facts[year]
        return lambda body: Reply.text(
            f"**{year}:** {f.overcharged} of {f.orders} orders were overcharged, **{f.overcharge:,.2f}** in "
            "all: every order with a coupon and a subtotal over 100.00, since the old code took the "
            "percentage off as money (SAVE25 on 300.00 charged 275.00 instead of 225.00)."
        )

    def largest_said(year: int) -> ReplyFn:
        f = facts[year]
        return lambda body: Reply.text(
            f"In {year} the largest overcharges were the orders with the biggest coupons on the biggest "
            f"subtotals: {f.overcharged} orders, {f.overcharge:,.2f} in all, as before."
        )

    def refund_said(body: dict[str, Any]) -> Reply:
        rows = "\n".join(
            f"| {y} | {facts[y].overcharged} | {facts[y].overcharge:,.2f} |" for y in sorted(facts)
        )
        total = sum(f.overcharge for f in facts.values())
        count = sum(f.overcharged for f in facts.values())
        opening = (
            "Picking up from the summary, with 2023 read as well:"
            if compacted(body)
            else "With all three logs read:"
        )
        return Reply.text(
            f"{opening}\n\n"
            f"| year | orders overcharged | to refund |\n|---|---|---|\n{rows}\n\n"
            f"**{count} orders, {total:,.2f} to refund in all.**"
        )

    answer = (
        "--auto answers y"
        if auto
        else "type y and press Enter to allow it (n and Enter, or Enter alone, tells the model no)"
    )
    first, second, third = YEARS
    return [
        Beat(
            "The model explores: Glob, Grep and Read run for real in the sample project. Reads inside "
            "the project never ask for permission.",
            "The tests fail. Find out why, but don't change anything yet.",
            [
                lambda body: Reply.tool(
                    "Glob", {"pattern": "**/*.py"}, text="Let me look at the layout first."
                ),
                lambda body: Reply.tool(
                    "Grep", {"pattern": "apply_discount", "output_mode": "content", "-n": True}
                ),
                lambda body: Reply.tool("Read", {"file_path": pricing}),
                lambda body: Reply.text(
                    "Found it. `apply_discount(total, percent)` in `shop/pricing.py` subtracts the percentage "
                    "as if it were money:\n\n```python\nreturn round(total - percent, 2)\n```\n\n"
                    "so 10% off 200.00 gives 190.00, and `test_ten_percent_off` expects 180.00. "
                    "The fix is `round(total * (1 - percent / 100), 2)`."
                ),
            ],
            "shop/pricing.py: apply_discount took the percentage off as money; tests/test_pricing.py "
            "failed (190.0 != 180.0).",
        ),
        Beat(
            f"An Edit changes a file, so the agent asks first: {answer}. The test run after it does not "
            "ask: this demo's settings allow `python3 -m unittest`.",
            "Fix it and run the tests.",
            [
                lambda body: Reply.tool(
                    "Edit",
                    {
                        "file_path": pricing,
                        "old_string": "return round(total - percent, 2)",
                        "new_string": "return round(total * (1 - percent / 100), 2)",
                    },
                    text="The fix is one line:",
                ),
                lambda body: Reply.tool(
                    "Bash", {"command": "python3 -m unittest", "description": "Run the test suite"}
                ),
                lambda body: Reply.text("All tests pass now: `apply_discount` takes a percentage off."),
            ],
            "shop/pricing.py fixed: apply_discount returns round(total * (1 - percent / 100), 2); all "
            "tests pass.",
            fix=True,
        ),
        Beat(
            "This command prints 720 KB. A Bash result over 30,000 characters goes to disk: the model "
            "gets a 2 KB preview and the file's path, and can still search the whole output.",
            "Simulate a busy day of checkouts with the fix in place.",
            [
                lambda body: Reply.tool(
                    "Bash",
                    {"command": "python3 scripts/simulate.py", "description": "Replay 10,000 checkouts"},
                ),
                total_line,
                total_said,
            ],
            "scripts/simulate.py replayed 10,000 checkouts; its 720 KB log was saved to disk.",
        ),
        Beat(
            "Each order log is about 9k tokens of context, and this window is small (60k tokens, "
            "auto-compact at 27k). Compaction is cost-aware: the agent compacts on its own as soon as "
            "starting afresh from a summary costs less than resending the whole history, at the latest at "
            "the threshold.",
            f"Which {first} orders were overcharged? The log is data/orders-{first}.csv.",
            [log_read(first), year_said(first)],
            f"data/orders-{first}.csv: {facts[first].overcharged} orders overcharged, "
            f"{facts[first].overcharge:,.2f}.",
            refunds=True,
        ),
        Beat(
            "Another log.",
            f"Same for {second}: data/orders-{second}.csv.",
            [log_read(second), year_said(second)],
            f"data/orders-{second}.csv: {facts[second].overcharged} orders overcharged, "
            f"{facts[second].overcharge:,.2f}.",
            refunds=True,
            bar=True,
        ),
        Beat(
            "The third log, then the refund total for all three years.",
            f"And {third}: data/orders-{third}.csv. Then give me the refund total for all three years.",
            [log_read(third), refund_said],
            f"data/orders-{third}.csv: {facts[third].overcharged} orders overcharged, "
            f"{facts[third].overcharge:,.2f}; {sum(f.overcharge for f in facts.values()):,.2f} to refund "
            "for the three years.",
            refunds=True,
            bar=True,
        ),
        Beat(
            "/context shows where the window goes now: system prompt, tools, CLAUDE.md, messages, "
            "free space and the auto-compact buffer.",
            "/context",
        ),
        Beat("/summary shows what the last compaction wrote, and the before → after figures.", "/summary"),
        Beat(
            "/memory shows the session notes the agent keeps in the background as the window fills "
            "(one side request each time, off the main conversation); a compaction uses them in place "
            "of a summary when they cover enough of what it would drop.",
            "/memory",
            notes=True,
        ),
        Beat(
            "/compact with no instructions compacts from those notes: no summary request, the notes "
            "stand in for what it drops and the latest messages stay word for word.",
            "/compact",
        ),
        Beat("/summary now shows the notes the compaction used.", "/summary"),
        Beat(
            "One more log read fills the context again, so a compaction by hand has something to save.",
            f"Read data/orders-{first}.csv again: which overcharged order was the largest?",
            [log_read(first), largest_said(first)],
            f"data/orders-{first}.csv read again for its largest overcharge.",
            refunds=True,
        ),
        Beat(
            "/compact compacts by hand, and words after it steer the summary.",
            "/compact keep only what the refund team needs",
        ),
        Beat("/summary again: this time the summary followed the instructions.", "/summary"),
        Beat(
            "/history lists, in brief, the messages that compaction replaced: nothing is lost from the "
            "transcript, only from what the model is sent.",
            "/history",
        ),
        Beat(
            "/state is the working state the agent recorded from its own tool calls (files changed and "
            "read, commands and their exit codes): exact, and attached after every compaction.",
            "/state",
        ),
    ]
