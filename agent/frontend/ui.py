"""Rendering for the REPL: turns the loop's typed events and the commands' results into Rich output.

``Renderer`` is the session's ``emit`` callback. It only ever appends to the console (scrollback is kept;
the screen is never cleared). A transient spinner line — "Working… 12s · ↓ 1.2k tokens" while the model
works, "Compacting conversation… 12s" during a compaction — is shown only on a real terminal; Rich's
Live keeps it under whatever is printed meanwhile.

Assistant text is Markdown. It is buffered as it streams and printed one finished block at a time
(``complete_blocks`` decides when a block can no longer change); a paragraph is printed line by line as
its lines end (``complete_lines``), a tight list item by item (``complete_items``), and a single newline
stays a line break. Only whole lines are ever
printed, so the spinner can keep running under them. Whatever is left is printed when the message ends: the recorded
assistant message, a tool call, the end of the turn (an interruption included). A retried stream starts
over: its unprinted text is dropped, never shown twice.

Events may arrive from the worker thread that runs the turn while the main thread reads keys, so every
public method takes the renderer's lock. Tests render onto ``Console(file=io.StringIO(), ...)`` and
compare whole strings; there the spinner is off.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Callable

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.segment import Segment, Segments
from rich.spinner import Spinner
from rich.style import Style
from rich.text import Text

from agent.frontend import commands
from agent.frontend.layout import middle_out, wrap_lines
from agent.runtime import mentions
from agent.runtime.tool_exec import INTERRUPTED, NOBODY_TO_ASK, NOT_RUN, USER_SAID_NO
from compact.decision import thresholds
from core.declaration import declaration_of
from core.events import (
    CallsInParallel,
    CompactFailed,
    CompactFinished,
    CompactStarted,
    MessageRecorded,
    Notice,
    PermissionDenied,
    Retrying,
    SubagentEvent,
    SubagentFinished,
    SubagentProgress,
    SubagentStarted,
    TextDelta,
    ThinkingDelta,
    TodosChanged,
    TokenState,
    ToolFinished,
    ToolOutput,
    ToolStarted,
    TurnFinished,
)
from core.terminal import visible

BULLET = "● "
REPLY_INDENT = "  "
RESULT = "  ⎿  "
INDENT = "     "
RESULT_LINES = 3
THINKING_LINES = 3  # a reply's thinking is shown folded to this many lines, dimmed
SUMMARY_HINT = "/summary (or ctrl+o) shows the summary"
PROMPT_ECHO = "> "  # a prompt as the REPL's input line shows it
RECAP_EXCHANGES = 3  # a resumed session shows its last few exchanges
RECAP_LINES = 4
COMPACTED_RECAP = "(earlier messages were compacted · /summary shows the summary, /history what it replaced)"
DIFF_LINES = 10
DIFF_STYLES = {"+": "green", "-": "red"}
NOTICE_STYLES = {"info": "dim", "warning": "yellow", "error": "red"}
# /context: (style, glyph) per category; glyphs keep the grid readable without colour
CATEGORY_LOOK = {
    "system": ("grey62", "■"),
    "tools": ("cyan", "■"),
    "memory": ("yellow", "■"),
    "messages": ("magenta", "■"),
    "free": ("grey39", "□"),
    "buffer": ("grey50", "▨"),
}


# fences and list items as CommonMark writes them; only what decides where a streamed block ends
FENCE_OPEN = re.compile(r"( *)(`{3,}(?!.*`)|~{3,})")
FENCE_CLOSE = re.compile(r" *(`{3,}|~{3,})[ \t]*")
LIST_ITEM = re.compile(r" {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


def complete_blocks(text: str) -> tuple[list[str], str]:
    """Split streamed Markdown into the blocks later text can no longer change, and the rest.

    A block ends at a blank line; a list only once the next line starts unindented and is not another
    item (an indented line continues an item). A fenced code block ends with its closing fence line, and
    a fence that starts at the margin ends the block before it. Only whole lines are looked at, so text
    cut inside ``**`` or inside a fence line simply waits for the rest.
    """
    blocks: list[str] = []
    start = pos = 0
    fence: tuple[str, int, bool] | None = None  # (character, length, at top level) of the open fence
    in_list = False
    blank_at = -1  # in a list: where the blank line that may end it starts

    def cut(at: int, resume: int) -> None:
        nonlocal start, in_list
        if text[start:at].strip():
            blocks.append(text[start:at])
        start, in_list = resume, False

    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        body, after = line[:-1], pos + len(line)
        if fence is not None:
            closing = FENCE_CLOSE.fullmatch(body)
            if closing and closing[1][0] == fence[0] and len(closing[1]) >= fence[1]:
                if fence[2]:
                    cut(after, after)
                fence = None
        elif not body.strip():
            if not text[start:pos].strip():
                start = after
            elif not in_list:
                cut(pos, after)
            elif blank_at < 0:
                blank_at = pos
        else:
            if blank_at >= 0 and body[0] not in " \t" and not LIST_ITEM.match(body):
                cut(blank_at, pos)
            blank_at = -1
            opening = FENCE_OPEN.match(body)
            if opening:
                indent = len(opening[1])
                top = indent == 0 or (not in_list and indent <= 3)
                if top:
                    cut(pos, pos)
                fence = (opening[2][0], len(opening[2]), top)
            elif LIST_ITEM.match(body):
                in_list = True
        pos = after
    return blocks, text[start:]


BLANK_START = re.compile(r"[ \t]*\n")


TABLE_ROW = re.compile(r" {0,3}\|")


def complete_lines(text: str) -> tuple[str, str]:
    """The whole lines at the start of a paragraph still streaming, which can be shown now, and the rest.

    ``text`` is what ``complete_blocks`` left: a block in progress. Only plain paragraph lines are
    let through; a list item, a fence, a table row or an indented line stops it (those need their
    whole block), as does a line not finished yet.
    """
    end = 0
    for line in text.splitlines(keepends=True):
        if (
            not line.endswith("\n")
            or not line.strip()
            or line[0] in " \t"
            or LIST_ITEM.match(line)
            or FENCE_OPEN.match(line)
            or TABLE_ROW.match(line)
        ):
            break
        end += len(line)
    return text[:end], text[end:]


def complete_items(text: str) -> tuple[str, str]:
    """The finished items of a tight list still streaming, and the rest.

    ``text`` is a block in progress that starts with a list item; an item is finished when the next
    item starts at the margin. A blank line stops the look (the list may be loose or ending: that is
    ``complete_blocks``' call), and nothing inside an open fence counts.
    """
    if not LIST_ITEM.match(text):
        return "", text
    end = pos = 0
    fence = False
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n") or not line.strip():
            break
        if FENCE_OPEN.match(line.lstrip()) or (fence and FENCE_CLOSE.fullmatch(line.strip())):
            fence = not fence
        elif pos and not fence and line[0] not in " \t" and LIST_ITEM.match(line):
            end = pos
        pos += len(line)
    return text[:end], text[end:]


@functools.cache
def _reply_markdown() -> type:
    """Rich's Markdown with headings at the margin and code blocks without a box (imported when first used)."""
    from rich.markdown import CodeBlock, Heading, Markdown
    from rich.syntax import Syntax

    class LeftHeading(Heading):
        LEVEL_ALIGN = dict.fromkeys(Heading.LEVEL_ALIGN, "left")

    class PlainCodeBlock(CodeBlock):
        def __rich_console__(self, console: Console, options: Any) -> Any:
            # the terminal's own colours for plain text, so it reads on dark and light backgrounds
            yield Syntax(
                str(self.text).rstrip(),
                self.lexer_name,
                theme="ansi_dark",
                word_wrap=True,
                background_color="default",
                padding=(0, 0, 0, 2),
            )

    class ReplyMarkdown(Markdown):
        elements = {
            **Markdown.elements,
            "heading_open": LeftHeading,
            "fence": PlainCodeBlock,
            "code_block": PlainCodeBlock,
        }

        def __init__(self, markup: str, **kw: Any) -> None:
            super().__init__(markup, **kw)
            self.parsed = _html_as_text(self.parsed)

    return ReplyMarkdown


KEPT_INLINE = {"html_inline": "text", "softbreak": "hardbreak"}


def _html_as_text(tokens: list[Any]) -> list[Any]:
    """Rich drops HTML; in a coding agent's reply ``<div>`` or ``<summary>`` is text to show as written.

    Rich also joins the lines of a paragraph; a reply's single newlines are kept as line breaks."""
    from markdown_it.token import Token

    out = []
    for token in tokens:
        if token.type == "html_block":
            text = Token("text", "", 0, content=token.content.rstrip("\n"))
            out += [
                Token("paragraph_open", "p", 1),
                Token("inline", "", 0, children=[text]),
                Token("paragraph_close", "p", -1),
            ]
            continue
        if token.children:  # and a single newline stays a line break, as the model wrote it
            token.children = [
                c.copy(type=KEPT_INLINE[c.type]) if c.type in KEPT_INLINE else c for c in token.children
            ]
        out.append(token)
    return out


def markdown_head(text: str) -> tuple[str, str]:
    """A command's Markdown result split into its plain first line ("Session notes (PATH):") and the rest."""
    first, sep, rest = text.partition("\n\n")
    if sep and "\n" not in first and first.endswith(":") and not first.startswith(("#", "|", "-", "*")):
        return first, rest
    return "", text


def markdown_lines(console: Console, text: str, first: bool) -> Segments:
    """A block of reply text rendered as Markdown, indented under the reply's bullet (shown when first)."""
    return indented(
        console, _reply_markdown()(text), BULLET if first else REPLY_INDENT, REPLY_INDENT, Style(bold=True)
    )


def indented(
    console: Console, renderable: Any, first: str, rest: str, prefix_style: Style | None = None
) -> Segments:
    """renderable wrapped to the width left after a prefix: ``first`` on its first line, ``rest`` below."""
    options = console.options.update(width=max(console.width - len(first), 20))
    lines = [_without_trailing_blanks(line) for line in console.render_lines(renderable, options, pad=False)]
    while lines and not lines[0]:  # Rich opens a document that starts with a list with an empty line
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    out: list[Segment] = []
    for i, line in enumerate(lines):
        out += [Segment(rest if i else first, prefix_style), *line, Segment.line()]
    return Segments(out)


def _without_trailing_blanks(line: list[Segment]) -> list[Segment]:
    """Rich pads rendered lines to the width; drop the padding unless it paints a background."""
    line = list(line)
    while line:
        seg = line[-1]
        bg = seg.style.bgcolor if seg.style else None
        if seg.control or (bg is not None and not bg.is_default):
            break
        text = seg.text.rstrip(" ")
        if text:
            line[-1] = Segment(text, seg.style)
            break
        line.pop()
    return line


def warning_of(state: TokenState | None, compact_disabled: bool = False) -> tuple[str, str] | None:
    """(severity, text) of the line under the input, or None below the warning level.

    severity is "warning" (yellow), "error" (red, from the error threshold) or "blocking" (red).
    The text is compact.decision.thresholds.warning_text for the state the trigger computed; with compaction
    disabled (DISABLE_COMPACT) it advises /clear, the one way left to free the context.
    """
    if compact_disabled and state is not None and (state.warning or state.blocking):
        severity = "blocking" if state.blocking else "error" if state.error else "warning"
        if state.blocking:
            return severity, "Context limit reached · /clear to start a new session (compaction is disabled)"
        return (
            severity,
            f"Context low ({state.percent_left}% remaining) · compaction is disabled; /clear starts anew",
        )
    if state is None or not (state.warning or state.blocking):
        return None
    lv = thresholds.Level(
        tokens=state.tokens,
        percent_left=state.percent_left,
        warning=state.warning,
        error=state.error,
        blocking=state.blocking,
        over_auto=False,
    )
    th = thresholds.Thresholds(
        window=state.window,
        effective=state.window,
        auto_compact=state.threshold,
        warning=0,
        error=0,
        blocking=0,
        auto_enabled=state.auto_compact,
    )
    severity = "blocking" if state.blocking else "error" if state.error else "warning"
    return severity, thresholds.warning_text(lv, th)


def _key_arg(name: str) -> str:
    """The argument the tool's declaration shows beside its name ("" when it names none)."""
    d = declaration_of(name)
    return (d.key_arg or "") if d is not None else ""


def key_argument(name: str, args: dict[str, Any], limit: int = 80) -> str:
    """The one argument that says what a tool call does, on one short line (``limit`` characters)."""
    value = args.get(_key_arg(name))
    if value is None:
        value = next((v for v in args.values() if isinstance(v, str)), "")
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value)
    lines = visible(str(value)).strip().splitlines() or [""]
    text = lines[0] + (" …" if len(lines) > 1 else "")
    if name == "Grep" and args.get("path"):
        text += f" in {visible(str(args['path']), one_line=True)}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def whole_argument(name: str, args: dict[str, Any]) -> str:
    """The key argument in full, every line of it (a permission question never cuts what it asks about)."""
    value = args.get(_key_arg(name))
    if value is None:
        value = next((v for v in args.values() if isinstance(v, str)), "")
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value)
    text = visible(str(value)).strip()
    if name == "Grep" and args.get("path"):
        text += f" in {visible(str(args['path']), one_line=True)}"
    return text


def result_text(content: Any) -> str:
    """A tool result's text as shown (terminal-safe); an image or other block as its kind."""
    if isinstance(content, str):
        return visible(content)
    parts = []
    found = []  # a tool search's finds: the tools it made callable, named
    for block in content or []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_reference":
            found.append(str(block.get("tool_name", "")))
            continue
        parts.append(str(block.get("text", "")) if kind == "text" else f"[{kind or 'content'}]")
    if found:
        parts.insert(0, f"Found {plural(len(found), 'tool')}: {', '.join(found)}")
    return visible("\n".join(parts))


def plural(n: int, word: str) -> str:
    """ "1 tool use", "2 tool uses"."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def diff_lines(name: str, args: dict[str, Any]) -> list[tuple[str, str]]:
    """(style, line) pairs of a small diff for an Edit or a Write."""
    if name == "Edit":
        old = visible(str(args.get("old_string", ""))).splitlines()
        new = visible(str(args.get("new_string", ""))).splitlines()
        body = [
            ln
            for ln in difflib.unified_diff(old, new, lineterm="", n=1)
            if not ln.startswith(("---", "+++", "@@"))
        ]
    elif name == "Write":
        content = str(args.get("content", ""))
        # only the lines shown are split out: a 200 MB Write must not be copied line by line to show ten
        body = ["+" + ln for ln in visible(content[: DIFF_LINES * 1000]).splitlines()]
        total = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        return _diff_rows(body, max(total, len(body)))
    else:
        return []
    return _diff_rows(body, len(body))


def _diff_rows(body: list[str], total: int) -> list[tuple[str, str]]:
    out = [(DIFF_STYLES.get(ln[:1], "dim"), ln) for ln in body[:DIFF_LINES]]
    if total > DIFF_LINES:
        out.append(("dim", f"… +{plural(total - DIFF_LINES, 'line')}"))
    return out


class SafeConsole(Console):
    """The REPL's console: every text segment it renders passes through ``visible`` on its way out.

    The renderer already makes each untrusted string visible where it builds its ``Text``; this is the
    guard for anything that reaches the console without that (a path added later, a renderable we did
    not build). Only the sequences Rich writes for our own styles, and its control segments (the
    spinner's cursor moves), get to the terminal as they are.
    """

    def render(self, renderable: Any, options: Any = None) -> Any:
        for segment in super().render(renderable, options):
            if segment.control or not segment.text:
                yield segment
            else:
                yield Segment(visible(segment.text), segment.style, segment.control)


LIVE_LINES = 5  # a running command's last lines under the spinner
SPINNER_FRAME = 1 / 8  # seconds between the spinner's frames
LIVE_LINE_CHARS = 160
LIVE_TAIL_CHARS = 4000
QUEUED_CHARS = 60  # the end of the text typed during a turn, as the status line shows it


class _Status:
    """The spinner line; its text is recomputed at every refresh so the seconds keep counting."""

    def __init__(self, renderer: Renderer) -> None:
        self.renderer = renderer
        self.spinner = Spinner("dots", style="cyan")

    def __rich__(self) -> Any:
        self.spinner.update(text=Text(self.renderer.status_text(), style="cyan"))
        lines = self.renderer.live_lines()
        if not lines:
            return self.spinner
        return Group(self.spinner, Text("\n".join(INDENT + line for line in lines), style="dim"))


class Renderer:
    """Event sink for a session (``emit=renderer``) plus the REPL's other output (banner, results)."""

    def __init__(
        self, console: Console, *, spinner: bool | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.console = console
        self.clock = clock
        self.spinner_enabled = console.is_terminal if spinner is None else spinner
        self.token_state: TokenState | None = None
        self.compact_events = 0  # CompactStarted/Finished/Failed and notices seen (the REPL asks)
        self._lock = threading.RLock()
        self._live: Live | None = None
        self._label = ""
        self._since = 0.0
        self._turn_since: float | None = None
        self._compact_since: float | None = None
        self._out_chars = 0
        self._live_tail = ""  # the end of what the running command has printed so far
        self.cwd: Path | None = None  # the project: tool headers show paths under it relative to it
        self.queued = (
            ""  # what the user has typed meanwhile, sent when the turn is over (shown in the status)
        )
        self._pending = ""  # reply text not printed yet (its block is not finished)
        self._thinking = ""  # the reply's thinking so far, shown folded once the reply moves on
        self._blocks_shown = 0  # blocks of the current reply already printed
        self._continuing = False  # the last thing printed was a paragraph's first lines: no blank line next
        self._paused = False
        self._paused_at: float | None = None  # when a question paused the spinner
        self._inputs: dict[str, tuple[str, dict[str, Any]]] = {}
        # a permission question shows the call's header (and diff); the call that follows right after
        # the answer does not repeat them
        self._just_asked: tuple[str, dict[str, Any]] | None = None
        self._in_question: set[str] = set()
        # running subagents (agent.runtime.subagents): id -> [description, tool uses, tokens], one status line each
        self._subagents: dict[str, list[Any]] = {}
        self._group: list[str] = []  # calls running side by side not shown whole yet, in order
        self._held: list[ToolStarted | ToolFinished] = []  # ... their events not shown yet
        self._open_tasks: set[str] = set()  # Task calls on screen without their result yet
        self._shared_tasks: set[str] = set()  # ... of which others ran beside them: results name them

    # --- events --------------------------------------------------------------------------------------
    def __call__(self, event: Any) -> None:
        handler = getattr(self, "_on_" + type(event).__name__, None)
        if handler is not None:
            with self._lock:
                if isinstance(event, (ToolStarted, ToolFinished)) and event.tool_use_id in self._group:
                    self._held.append(event)  # a call running beside others: shown whole, in order
                    self._release()
                else:
                    handler(event)

    def _on_CallsInParallel(self, event: CallsInParallel) -> None:
        self._release(everything=True)
        self._group = list(event.tool_use_ids)

    def _release(self, everything: bool = False) -> None:
        """The held events of the calls running side by side, in the message's order: each call's header
        and result together, the next one once the one before it has finished (``everything``: all of
        them, as far as they got, when the turn ends)."""
        while self._group:
            call = self._group[0]
            mine = [e for e in self._held if e.tool_use_id == call]
            self._held = [e for e in self._held if e.tool_use_id != call]
            for event in mine:
                getattr(self, "_on_" + type(event).__name__)(event)
            if not everything and not any(isinstance(e, ToolFinished) for e in mine):
                return  # still running: its result comes through here
            self._group.pop(0)

    def _on_TextDelta(self, event: TextDelta) -> None:
        self._flush_thinking()
        self._out_chars += len(event.text)
        text = self._pending + event.text
        if self._continuing and BLANK_START.match(text):
            self._continuing = False  # the paragraph shown line by line has ended
        blocks, pending = complete_blocks(text)
        for block in blocks:
            self._print_block(block)
        lines, pending = complete_lines(pending)
        items, self._pending = complete_items(pending)
        for part in (lines, items):
            if part:
                self._print_block(part, partial=True)

    def _on_ThinkingDelta(self, event: ThinkingDelta) -> None:
        self._out_chars += len(event.text)
        self._thinking += event.text
        if self._turn_since is not None:
            self._show_status("Thinking…")

    def _flush_thinking(self) -> None:
        """The thinking just finished, dimmed and folded to its first lines (the model's, not an answer)."""
        lines = [line for line in self._thinking.strip().splitlines() if line.strip()]
        self._thinking = ""
        if not lines:
            return
        self.console.print(Text("✻ Thinking…", style="dim italic"))
        width = max(20, self.console.width - 4)
        for line in lines[:THINKING_LINES]:
            shown = visible(line, one_line=True)
            self.console.print(
                Text("  " + (shown if len(shown) <= width else shown[: width - 1] + "…"), style="dim italic")
            )
        if len(lines) > THINKING_LINES:
            self.console.print(
                Text(f"  … {plural(len(lines) - THINKING_LINES, 'more line')} of thinking", style="dim")
            )

    def _on_MessageRecorded(self, event: MessageRecorded) -> None:
        if event.message.role == "assistant":
            self._flush_thinking()
            self._end_text()
            if self._turn_since is not None:
                self._show_status("Working…")
        elif attached := mentions.shown(event.message):  # an @path of the prompt: what went in, or why not
            line, went_in = attached
            self._result_lines([line], "dim" if went_in else "yellow")

    def _on_PermissionDenied(self, event: PermissionDenied) -> None:
        """A call refused without a question (a deny rule, a hook's or a mode's refusal): its header and
        why, on screen as the model is told. A "no" shows under its question, and a call left unasked by
        an interruption ends with the turn's own line."""
        if _shown_elsewhere(event.reason):
            return
        self._flush_thinking()
        self._end_text()
        self._just_asked = None
        self.console.print(
            tool_header(
                event.tool_name, relative_paths(event.tool_input, self.cwd), width=self.console.width
            ),
            highlight=False,
        )
        self._result_lines(f"Not run: {event.reason}".splitlines(), "yellow")

    def _on_ToolStarted(self, event: ToolStarted) -> None:
        self._flush_thinking()
        self._end_text()
        call = (event.name, dict(event.input))
        if call == self._just_asked:
            self._in_question.add(event.tool_use_id)  # its header and diff are on screen just above
        else:
            self.console.print(
                tool_header(event.name, relative_paths(event.input, self.cwd), width=self.console.width),
                highlight=False,
            )
        self._just_asked = None
        self._inputs[event.tool_use_id] = call
        if event.name == "Task":
            if self._open_tasks:
                self._shared_tasks |= self._open_tasks | {event.tool_use_id}
            self._open_tasks.add(event.tool_use_id)
        if self._turn_since is not None:
            self._show_status(f"Running {event.name}…")

    def _on_ToolOutput(self, event: ToolOutput) -> None:
        self._live_tail = (self._live_tail + event.text)[-LIVE_TAIL_CHARS:]

    def live_lines(self) -> list[str]:
        """The last lines the running command printed (what the status shows under the spinner)."""
        lines = [ln for ln in self._live_tail.replace("\r", "\n").split("\n") if ln.strip()]
        return [visible(ln, one_line=True)[:LIVE_LINE_CHARS] for ln in lines[-LIVE_LINES:]]

    def _on_ToolFinished(self, event: ToolFinished) -> None:
        printed, self._live_tail = self.live_lines(), ""
        name, args = self._inputs.pop(event.tool_use_id, (event.name, {}))
        if event.is_error and result_text(event.content).startswith((INTERRUPTED, NOT_RUN)):
            # the turn's end says "Interrupted by user", once; what a stopped command had printed stays
            # on screen as it was under the spinner (its last lines)
            if printed:
                self._result_lines(printed, "dim", limit=LIVE_LINES)
        elif event.is_error:
            self._result_lines(result_text(event.content).strip().splitlines(), "red")
        elif name == "TodoWrite":
            pass  # the checklist follows (TodosChanged); the result's text is a reminder for the model
        else:
            output = result_text(event.content).strip()
            decl = declaration_of(name)  # a tool whose output is the file itself: its summary says more
            prefer_summary = (decl is not None and decl.show_summary) or not output
            shown = (event.summary or output) if prefer_summary else output
            if decl is not None and decl.touches != "runs" and self.cwd is not None:
                shown = shown.replace(f"{self.cwd}{os.sep}", "")  # our tools' paths as the headers show them
            if event.tool_use_id in self._shared_tasks:  # several ran at once: say which one this is
                shown = f"{key_argument(name, args)}: {shown}"
            self._result_lines(shown.splitlines() or ["(no output)"], "dim")
            if event.tool_use_id not in self._in_question:
                for style, line in diff_lines(name, args):
                    self.console.print(Text(INDENT + line, style=style), highlight=False, soft_wrap=True)
        self._in_question.discard(event.tool_use_id)
        self._open_tasks.discard(event.tool_use_id)
        self._shared_tasks.discard(event.tool_use_id)
        if self._turn_since is not None:
            self._show_status("Working…")

    def _on_SubagentStarted(self, event: SubagentStarted) -> None:
        self._subagents[event.agent_id] = [event.description, 0, 0]

    def _on_SubagentProgress(self, event: SubagentProgress) -> None:
        if event.agent_id in self._subagents:
            self._subagents[event.agent_id][1:] = [event.tool_uses, event.tokens]

    def _on_SubagentEvent(self, event: SubagentEvent) -> None:
        """A subagent's own loop shows only in its progress line, but a call of its that was refused
        leaves a line saying which subagent, what and why, as one of ours does."""
        inner = event.event
        if not isinstance(inner, PermissionDenied) or _shown_elsewhere(inner.reason):
            return
        self._flush_thinking()
        self._end_text()
        self._just_asked = None
        who = self._subagents.get(event.agent_id, ["a subagent"])[0]
        call = f"{visible(inner.tool_name, one_line=True)}({key_argument(inner.tool_name, relative_paths(inner.tool_input, self.cwd))})"
        self._result_lines(
            [f"{flat(str(who))}: {call} not run: {flat(inner.reason)}"],
            "yellow",
        )

    def _on_SubagentFinished(self, event: SubagentFinished) -> None:
        self._subagents.pop(event.agent_id, None)  # the Task's result line sums it up

    def _on_TodosChanged(self, event: TodosChanged) -> None:
        self._end_text()
        for line, style in todo_lines(event.todos):
            self.console.print(Text(line, style=style), highlight=False, soft_wrap=True)

    def _on_Retrying(self, event: Retrying) -> None:
        # the next attempt streams the whole reply again: what was held back would be shown twice
        restarts = not event.compaction and (self._blocks_shown > 0 or bool(self._pending.strip()))
        if not event.compaction:
            self._pending, self._blocks_shown, self._continuing = "", 0, False
        line = Text(commands.retry_line(event, live=True), style="yellow")
        if event.reason:
            line.append(f" · {visible(event.reason)}", style="dim")
        if restarts:
            line.append(" · the reply starts again", style="yellow")
        self.console.print(line, highlight=False, soft_wrap=True)

    def _on_Notice(self, event: Notice) -> None:
        self._end_text()
        self._just_asked = None
        self.compact_events += 1
        self.console.print(
            Text(visible(event.text), style=NOTICE_STYLES.get(event.level, "")), highlight=False
        )

    def _on_CompactStarted(self, event: CompactStarted) -> None:
        self._end_text()
        self.compact_events += 1
        self._compact_since = self.clock()
        self._show_status("Compacting conversation…")

    def _on_CompactFinished(self, event: CompactFinished) -> None:
        self.compact_events += 1
        self._compact_since = None
        self._stop_status()
        self.console.print(Text(compaction_line(event), style="bold"), highlight=False)
        for line in event.hook_messages:  # its next lines under its text, not at the margin
            self.console.print(indented(self.console, Text(visible(line), style="dim"), RESULT, INDENT))
        self.console.print(Text(RESULT + SUMMARY_HINT, style="dim"), highlight=False)
        self._resume_turn_status()

    def _on_CompactFailed(self, event: CompactFailed) -> None:
        self.compact_events += 1
        self._compact_since = None
        self._stop_status()
        style = "red" if commands.is_failure(event) else "yellow"
        line = Text(visible(commands.failed_line(event)), style=style)
        self.console.print(line, highlight=False)
        self._resume_turn_status()

    def _on_TokenState(self, event: TokenState) -> None:
        self.token_state = event

    def _on_TurnFinished(self, event: TurnFinished) -> None:
        self._release(everything=True)
        self._end_text()
        self._turn_since = None
        self._stop_status()
        if event.stop_reason == "interrupted":
            self.console.print(Text(RESULT + "Interrupted by user", style="red"), highlight=False)
        elif event.stop_reason == "max_turns":
            self.console.print(
                Text(visible(event.error or "Stopped: maximum turns"), style="yellow"), highlight=False
            )
        elif event.stop_reason not in ("end_turn", "declined"):  # a "no" was shown where it was answered
            self.console.print(Text(visible(event.error or event.stop_reason), style="red"), highlight=False)

    # --- turn lifecycle (called by the REPL) --------------------------------------------------------
    def begin_turn(self) -> None:
        with self._lock:
            self._turn_since = self.clock()
            self._out_chars = 0
            self._show_status("Working…")

    def end_work(self) -> None:
        """After a turn or a command: no spinner, the cursor on a fresh line."""
        with self._lock:
            self._release(everything=True)
            self._end_text()
            self._turn_since = None
            self._compact_since = None
            self._stop_status()

    def pause(self) -> None:
        """Hide the spinner (a permission question is being asked): the time it waits is the user's, not
        the work's, so the seconds shown stop until ``resume``."""
        with self._lock:
            self._end_text()
            self._paused = True
            self._paused_at = self.clock()
            self._stop_status(keep_label=True)

    def resume(self) -> None:
        with self._lock:
            self._paused = False
            if self._paused_at is not None:
                waited, self._paused_at = self.clock() - self._paused_at, None
                self._since += waited
                if self._turn_since is not None:
                    self._turn_since += waited
                if self._compact_since is not None:
                    self._compact_since += waited
            if self._label and (self._turn_since is not None or self._compact_since is not None):
                self._show_status(self._label)

    def status_text(self) -> str:
        now = self.clock()
        if self._compact_since is not None:
            return f"{self._label} {int(now - self._compact_since)}s · esc to interrupt"
        since = self._turn_since if self._turn_since is not None else self._since
        parts = [f"{self._label} {int(now - since)}s"]
        if self._out_chars:
            parts.append(f"↓ {commands.fmt_tokens(self._out_chars // 4)} tokens")
        parts.append("esc to interrupt")
        if self.queued.strip():
            parts.append(f"queued: {flat(self.queued)[-QUEUED_CHARS:]}")
        return " · ".join(parts) + "".join(
            f"\n{RESULT}{flat(desc)} · {uses} tool use{'' if uses == 1 else 's'} · "
            f"{commands.fmt_tokens(tokens)} tokens"
            for desc, uses, tokens in list(self._subagents.values())
        )

    # --- other output --------------------------------------------------------------------------------
    def banner(self, version: str, model: str, cwd: str) -> None:
        """``✻ Compact Agent vX · model · directory`` on one line when it fits the terminal; else the
        directory on a line of its own (``~/…`` under home, its middle left out past the width), so a path
        is never broken mid-word by the terminal's wrapping."""
        line = Text("✻ ", style="bold magenta")
        line.append(f"Compact Agent v{version}", style="bold")
        line.append(f" · {visible(model, one_line=True)}")
        where = visible(shown_path(cwd, None), one_line=True)
        width = self.console.width
        if len(line.plain) + 3 + len(where) <= width:
            line.append(f" · {where}")
            self.console.print(line, highlight=False, soft_wrap=True)
        else:
            self.console.print(line, highlight=False, soft_wrap=True)
            self.console.print(Text("  " + middle_out(where, width - 2)), highlight=False, soft_wrap=True)
        self.console.print(Text("/help for commands", style="dim"), highlight=False)

    def recap(self, messages: list[Any], *, progress: bool = False, compacted: bool = False) -> None:
        """The last few exchanges of a resumed session: the user's prompts and the model's words, in brief
        (``progress``: the model writes its progress between tool calls in thinking blocks, shown as its
        words when it came, so shown here too). ``compacted``: the session was compacted (whatever wrote
        the summary, and however many exchanges followed): the recap opens by saying so."""
        with self._lock:
            shown = recent_exchanges(messages, RECAP_EXCHANGES, progress=progress)
            if shown and shown[0].kind == "summary":
                compacted, shown = True, shown[1:]
            if compacted:
                self.console.print(Text(COMPACTED_RECAP, style="dim"), highlight=False)
            for m in shown:
                lines = visible(said(m, progress)).strip().splitlines()
                clipped = "\n".join(lines[:RECAP_LINES])
                if m.role == "user":
                    self.console.print(
                        Text(PROMPT_ECHO + clipped, style="dim"), highlight=False, soft_wrap=True
                    )
                else:
                    self.console.print(markdown_lines(self.console, clipped, first=True))
                if len(lines) > RECAP_LINES:
                    self.console.print(
                        Text(f"{REPLY_INDENT}… +{plural(len(lines) - RECAP_LINES, 'line')}", style="dim"),
                        highlight=False,
                    )

    def echo(self, prompt: str) -> None:
        """A prompt the user did not type at our prompt (the command line's), shown as if typed."""
        with self._lock:
            self.console.print(
                Text(PROMPT_ECHO + visible(prompt), style="bold"), highlight=False, soft_wrap=True
            )

    def clear_screen(self) -> None:
        """/clear: a fresh screen for the fresh session (nothing happens on a console that is not a terminal)."""
        self.console.clear()

    def line(self, text: str, style: str = "", *, wrap: int | None = None) -> None:
        """One line of our own; ``wrap``: broken at word boundaries to at most that many columns."""
        with self._lock:
            self._end_text()
            self._just_asked = None
            shown = Text(visible(text), style=style)
            if wrap:
                self.console.print(shown, highlight=False, width=min(wrap, self.console.width))
            else:  # broken between words for this terminal, never by it
                shown = Text("\n".join(wrap_lines(visible(text), self.console.width)), style=style)
                self.console.print(shown, highlight=False, soft_wrap=True)

    def permission(
        self, tool: str, args: dict[str, Any], description: str, always: str | None = None
    ) -> None:
        """The call's header, what it will do (unless the header already says it all) and the question;
        ``always`` is the rule an "always" answer adds, named before the user picks it."""
        with self._lock:
            self._end_text()
            self._just_asked = None
            # the whole argument, wrapped: what is approved is what was shown, however long
            self.console.print(tool_header(tool, relative_paths(args, self.cwd), whole=True), highlight=False)
            details = question_details(tool, args, description)
            if details:
                body = Text()
                for i, (style, ln) in enumerate(numbered_diff(details)):
                    body.append(("\n" if i else "") + ln, style=style)
                self.console.print(
                    indented(
                        self.console,
                        Panel(body, border_style="yellow", expand=False),
                        REPLY_INDENT,
                        REPLY_INDENT,
                    )
                )
            rule = "a rule for exactly this command" if always and "\n" in always else flat(always or "")
            adds = f" (adds {rule})" if always else ""
            question = Text(f"Allow? [y]es / [n]o / [a]lways for this session{adds} · Enter: no", "bold")
            self.console.print(indented(self.console, question, REPLY_INDENT, REPLY_INDENT))

    def answered(self, tool: str, args: dict[str, Any], label: str) -> None:
        with self._lock:
            self.console.print(Text(f"{REPLY_INDENT}→ {label}", style="dim"), highlight=False)
            self._just_asked = (tool, dict(args))

    def result(self, result: commands.Result) -> None:
        """Show a command's result (the REPL's view; print mode prints ``result.text``)."""
        with self._lock:
            self._end_text()
            if isinstance(result, commands.ContextUsage):
                self.console.print(context_grid(result), highlight=False)
            elif isinstance(result, (commands.ModelMenu, commands.ConfigMenu)):  # laid out for this width
                text = "\n".join(result.lines(self.console.width))
                self.console.print(Text(visible(text)), highlight=False, soft_wrap=True)
            elif result.markdown:
                head, rest = markdown_head(visible(result.text))
                if head:  # often naming a path: broken between words only, so the path is never cut
                    head = "\n".join(wrap_lines(head, self.console.width))
                    self.console.print(Text(head, style="bold"), highlight=False, soft_wrap=True)
                    self.console.print()
                self.console.print(indented(self.console, _reply_markdown()(rest), "", ""))
            elif result.text:  # broken between words for this terminal, never by it
                text = "\n".join(wrap_lines(visible(result.text), self.console.width))
                self.console.print(
                    Text(text, style="" if result.ok else "red"), highlight=False, soft_wrap=True
                )

    # --- internals -----------------------------------------------------------------------------------
    def _result_lines(self, lines: list[str], style: str, limit: int = RESULT_LINES) -> None:
        shown = Text(visible("\n".join(lines[:limit])), style=style, overflow="fold")
        self.console.print(indented(self.console, shown, RESULT, INDENT))
        if len(lines) > limit:
            self.console.print(
                Text(f"{INDENT}… +{plural(len(lines) - limit, 'line')}", style="dim"), highlight=False
            )

    def _print_block(self, block: str, partial: bool = False) -> None:
        """Print a finished block, or (partial) the finished lines of a paragraph still streaming."""
        self._just_asked = None
        if self._blocks_shown and not self._continuing:
            self.console.print()
        self.console.print(markdown_lines(self.console, visible(block), first=not self._blocks_shown))
        self._blocks_shown += 1
        self._continuing = partial

    def _end_text(self) -> None:
        """The reply's message ended: print what is left of it."""
        if self._pending.strip():
            self._print_block(self._pending)
        self._pending, self._blocks_shown, self._continuing = "", 0, False

    def _resume_turn_status(self) -> None:
        if self._turn_since is not None:
            self._show_status("Working…")

    def _show_status(self, label: str) -> None:
        self._label = label
        if self._live is None:
            self._since = self.clock()
        if not self.spinner_enabled or self._paused:
            return
        if self._live is None:
            live = self._live = Live(
                _Status(self),
                console=self.console,
                transient=True,
                auto_refresh=False,  # its frames are drawn by _turn_spinner, under this renderer's lock
                redirect_stdout=False,
                redirect_stderr=False,
            )
            live.start(refresh=True)
            threading.Thread(target=self._turn_spinner, args=(live,), name="spinner", daemon=True).start()

    def _turn_spinner(self, live: Live) -> None:
        """The spinner's next frame every eighth of a second, drawn under the renderer's lock, so no frame
        comes between a line being printed and the cursor move that made room for it. (Rich's own
        refresh thread drew one there: on a loaded machine a printing thread paused in between left the
        frame on screen, a tool's header after it on the same line.)"""
        while True:
            time.sleep(SPINNER_FRAME)
            with self._lock:
                if self._live is not live:
                    return  # stopped, or paused and started again: that spinner has its own thread
                live.refresh()

    def _stop_status(self, keep_label: bool = False) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()
        if not keep_label:
            self._label = ""


def said(m: Any, progress: bool = False) -> str:
    """A message's words: its text blocks, and with ``progress`` (a model that writes the text between its
    tool calls in thinking blocks, under a display that returns only that text) its thinking blocks' text
    too, in their order, as the user saw it when it came."""
    if not progress or m.role != "assistant":
        return str(m.text)
    return "\n".join(
        b.get("text", "") if b.get("type") == "text" else b.get("thinking", "")
        for b in m.content
        if b.get("type") == "text" or (b.get("type") == "thinking" and b.get("thinking"))
    )


def recent_exchanges(messages: list[Any], exchanges: int, *, progress: bool = False) -> list[Any]:
    """The typed prompts and the replies' words (``said``) of the last ``exchanges`` exchanges, in order.

    A compaction summary is included when the walk back reaches it (it stands for what came before).
    """
    out: list[Any] = []
    prompts = 0
    for m in reversed(messages):
        if m.kind == "summary":
            out.append(m)
            break
        if m.is_typed_prompt and m.text.strip():
            out.append(m)
            prompts += 1
            if prompts == exchanges:
                break
        elif m.role == "assistant" and said(m, progress).strip():
            out.append(m)
    return out[::-1]


def flat(text: str) -> str:
    """Text for one line of the screen: its line breaks and tabs as spaces (never an escaped "\\n"), any
    other control character shown as its escape."""
    return visible(" ".join(text.split()))


def _shown_elsewhere(reason: str) -> bool:
    """A refusal the screen shows already: a "no" under its question, a call left unasked by an
    interruption at the turn's end."""
    return reason == USER_SAID_NO or reason.endswith(NOBODY_TO_ASK)


def relative_paths(args: dict[str, Any], cwd: Path | None) -> dict[str, Any]:
    """``args`` with their path shown as the rest of the screen shows paths, as Claude Code does: relative
    to the project inside it, ``~/…`` under the home directory, whole elsewhere. A permission question
    shows them so too: a relative path names one file as surely, with ``cwd`` on the banner."""
    out = dict(args)
    for key in ("file_path", "path"):
        value = out.get(key)
        if isinstance(value, str) and os.path.isabs(value):
            out[key] = shown_path(value, cwd)
    return out


def shown_path(path: str, cwd: Path | None) -> str:
    """One absolute path as the screen shows it (see relative_paths)."""
    if cwd is not None:
        rel = os.path.relpath(path, cwd)
        if not rel.startswith(".."):
            return rel
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home.rstrip(os.sep) + os.sep)):
        return "~" + path[len(home.rstrip(os.sep)) :]
    return path


def tool_header(name: str, args: dict[str, Any], whole: bool = False, width: int = 0) -> Text:
    """``● Name(argument)``: the argument on one short line (within ``width`` columns when given), or
    (``whole``: a question) all of it."""
    line = Text(BULLET, style="bold")
    line.append(visible(name, one_line=True), style="bold")
    # a question's whole argument: its lines under the header's text, not back at the margin
    limit = min(80, width - len(name) - 4) if width else 80
    shown = (
        whole_argument(name, args).replace("\n", "\n  ")
        if whole
        else key_argument(name, args, max(limit, 20))
    )
    line.append(f"({shown})")
    return line


def question_details(tool: str, args: dict[str, Any], description: str) -> list[str]:
    """The lines of a permission description that the call's header does not already show.

    Dropped: a first line naming the tool and its target ("Edit /p/app.py") and the two file-name lines
    that open a diff; nothing at all is left when it would only repeat the header's own argument.
    """
    lines = visible(description).splitlines()
    if lines and (lines[0] == tool or lines[0].startswith(f"{tool} ")):
        lines = lines[1:]
    if len(lines) > 1 and lines[0].startswith("--- ") and lines[1].startswith("+++ "):
        lines = lines[2:]
    if "\n".join(lines).strip() == whole_argument(tool, args):  # the header shows all of it already
        return []
    return lines


HUNK = re.compile(r"@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def numbered_diff(lines: list[str]) -> list[tuple[str, str]]:
    """(style, line) pairs of a permission preview; a unified diff's lines get the file's line numbers.

    A hunk header gives way to the numbers ("  12 -old", "  12 +new"); other lines are kept as written.
    """
    out: list[tuple[str, str]] = []
    old = new = 0
    in_hunk = False
    for ln in lines:
        hunk = HUNK.match(ln)
        if hunk:
            if in_hunk:
                out.append(("dim", "   ⋮"))
            old, new, in_hunk = int(hunk[1]), int(hunk[2]), True
        elif in_hunk and ln[:1] in ("-", "+", " "):
            number = old if ln[0] == "-" else new
            old, new = old + (ln[0] != "+"), new + (ln[0] != "-")
            out.append((DIFF_STYLES.get(ln[0], ""), f"{number:>4} {ln}"))
        else:
            out.append((DIFF_STYLES.get(ln[:1], "dim" if ln.startswith("@@") else ""), ln))
    return out


def compaction_line(event: CompactFinished) -> str:
    return commands.compaction_line(event)


TODO_MARKS = {"completed": ("☒", "dim strike"), "in_progress": ("☐", "bold"), "pending": ("☐", "")}


def todo_lines(todos: tuple[dict[str, Any], ...]) -> list[tuple[str, str]]:
    """The todo list as a compact checklist: (line, style) pairs, the task in progress by its activeForm."""
    out = []
    for i, t in enumerate(todos):
        mark, style = TODO_MARKS.get(str(t.get("status")), ("☐", ""))
        text = t.get("activeForm") if t.get("status") == "in_progress" else t.get("content")
        out.append((f"{RESULT if i == 0 else INDENT}{mark} {flat(str(text))}", style))
    return out


CONTEXT_WIDTH = 80  # /context's lines, whatever the terminal (a wider one leaves them as they are)
LEGEND_WIDTH = 80 - 22  # the grid (19 columns) and its gap (3): the legend fits the rest of 80 columns


def context_grid(usage: commands.ContextUsage) -> Text:
    """/context in the REPL: a 10×10 grid (one square per 1% of the window) beside its legend."""
    cells: list[Text] = []
    for cat in usage.categories:
        style, glyph = CATEGORY_LOOK.get(cat.key, ("", "■"))
        cells += [Text(glyph, style=style)] * cat.cells
    rows = [Text(" ").join(cells[r * 10 : (r + 1) * 10]) for r in range(10)]
    legend = [
        Text.assemble(
            (usage.model, "bold"),
            f" · {commands.fmt_tokens(usage.used)}/{commands.fmt_tokens(usage.window)} "
            f"tokens ({usage.percent:.0f}%)",
        ),
        Text(),
    ]
    for cat in usage.categories:
        style, glyph = CATEGORY_LOOK.get(cat.key, ("", "■"))
        legend.append(
            Text.assemble(
                (glyph, style), f" {cat.name}: {commands.fmt_tokens(cat.tokens)} tokens ({cat.share:.1f}%)"
            )
        )
        if cat.key == "memory":  # its files right under it
            for path, tokens in usage.memory_files:
                size = f": {commands.fmt_tokens(tokens)} tokens"
                name = visible(str(path), one_line=True)
                room = LEGEND_WIDTH - 4 - len(size)
                name = name if len(name) <= room else "…" + name[-(room - 1) :]
                legend.append(Text(f"  └ {name}{size}", style="dim"))
    if usage.prepared:
        legend += [Text(), Text(usage.prepared, style="dim")]
    out = Text("Context usage\n", style="bold")
    for i in range(max(len(rows), len(legend))):
        row = rows[i] if i < len(rows) else Text(" " * 19)
        line = Text.assemble(row, "   ", legend[i]) if i < len(legend) and legend[i].plain else row
        out.append_text(line)
        out.append("\n")
    for said in usage.extra:  # broken between words to fit 80 columns, a list item under its dash
        wrapped = textwrap.wrap(
            flat(said),
            width=CONTEXT_WIDTH,
            subsequent_indent="  " if said.startswith("- ") else "",
            break_on_hyphens=False,
        )
        for part in wrapped or [""]:
            out.append(part + "\n", style="dim")
    out.rstrip()
    return out
