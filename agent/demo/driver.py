"""The demo's hands on the REPL: it narrates, fills the input line, and under --auto presses the keys.

The REPL asks a driver two things (agent/frontend/repl.py, ``driver=``):

- ``prompt_args(repl)`` before each prompt: extra arguments for prompt_toolkit's ``prompt()``. The
  driver prints the next beat's narration and puts its line in the input (``default=``); with --auto
  it also submits it after a short pause (``pre_run=``), exactly as Enter does.
- ``answer(tool, args)`` when a permission question is on screen: "yes" under --auto (after a pause, so
  the question can be read), else None and the user answers.

Before a beat that shows the session notes (``Beat.notes``) the driver waits for the notes update in
flight, if any, to land: the notes are written in the background, and the story says they are there.

If the user sends something other than the offered line, or answers "no" so that the beat does not
finish, the same beat is offered again (the narration never goes on as if it had). Narration is
wrapped at word boundaries to 80 columns.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from agent.demo.story import Beat, Story
from agent.frontend.ui import warning_of
from agent.runtime.session import Answer
from compact.compaction.notes_updater import wait_for_update

if TYPE_CHECKING:
    from agent.frontend.repl import Repl

MARK = "demo ▸ "
WIDTH = 80  # narration is broken at word boundaries to fit this many columns
NOTES_WAIT = 30.0  # seconds at most for a notes update in flight before a beat that shows the notes
STOPPED = (
    'That step did not finish: a "no" stops the model, so nothing it would have changed was '
    "changed. The same line is offered again: press Enter to send it, then type y and press Enter to go on."
)


class Driver:
    def __init__(self, story: Story, intro: list[str], outro: list[str], *, auto: bool, pause: float) -> None:
        self.story = story
        self.intro, self.outro = intro, outro
        self.auto, self.pause = auto, pause
        self.next = 0  # the beat to offer
        self._narrated = -1  # the last beat whose narration was printed (a beat offered again is not)
        self.offered: str | None = None
        self._started = False
        self._ended = False
        self._compaction_said: Any = None  # the automatic compaction the narration has told of

    def prompt_args(self, repl: Repl) -> dict[str, Any]:
        def say(text: str, style: str = "dim") -> None:
            repl.renderer.line(text, style, wrap=WIDTH)

        if not self._started:
            self._started = True
            for line in self.intro:
                say(MARK + line)
        if self.offered is not None and _last_entry(repl) == self.offered:
            sent = self.story.beats[self.next]
            if sent.is_prompt and sent not in self.story.played:  # a "no" stopped it: nothing changed
                say(MARK + STOPPED)
            else:
                self.next += 1
        self.offered = None
        if self.next >= len(self.story.beats):
            return self._end(repl, say)
        beat: Beat = self.story.beats[self.next]
        if beat.notes and repl.session is not None:
            wait_for_update(repl.session.conv, NOTES_WAIT)
        if self._narrated != self.next:
            self._narrated = self.next
            for line in self.happened(repl):
                say(MARK + line)
            say(MARK + beat.say + (" " + bar_now(repl) if beat.bar else ""))
        self.offered = beat.line
        if beat.is_prompt:
            self.story.offered = beat
        return self._type(repl, beat.line)

    def happened(self, repl: Repl) -> list[str]:
        """What the agent did on its own in the turn just played that the story could not know in
        advance: an automatic compaction, said once it has happened."""
        session = repl.session
        last = session.last_compaction if session is not None else None
        if last is None or last is self._compaction_said or last.trigger != "auto":
            return []
        self._compaction_said = last
        return [
            'The agent compacted on its own during that turn (the "Compacted · auto" line above): a '
            "fresh start from a summary had become cheaper than resending the whole history, so it did "
            "not wait for the threshold. The model carried on from the summary."
        ]

    def answer(self, tool: str, args: dict[str, Any]) -> Answer | None:
        if not self.auto:
            return None
        threading.Event().wait(self.pause)
        return "yes"

    def _end(self, repl: Repl, say: Any) -> dict[str, Any]:
        if not self._ended:
            self._ended = True
            for line in self.outro:
                say(MARK + line)
        return self._type(repl, "/exit") if self.auto else {}

    def _type(self, repl: Repl, line: str) -> dict[str, Any]:
        if not self.auto:
            return {"default": line}

        def submit() -> None:
            app = repl.prompt.app
            if app.is_running and not app.is_done:
                app.current_buffer.validate_and_handle()  # what Enter does

        return {"default": line, "pre_run": lambda: asyncio.get_running_loop().call_later(self.pause, submit)}


def bar_now(repl: Repl) -> str:
    """What the line under the prompt shows now, in words: its colour and its text, or that there is none."""
    shown = warning_of(repl.token_state, repl.settings.compaction.disable_compact)
    if shown is None:
        return "No bar under the prompt yet: the context is still well below the auto-compact threshold."
    severity, text = shown
    colour = "yellow" if severity == "warning" else "red"
    return f'The bar under the prompt is {colour} now: "{text}".'


def _last_entry(repl: Repl) -> str | None:
    strings = repl.prompt.history.get_strings()
    return strings[-1] if strings else None
