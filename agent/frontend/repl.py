"""The interactive REPL: a prompt_toolkit prompt, turns run in a worker thread, events rendered by agent.frontend.ui.

    main thread                                   worker thread
    ───────────                                   ─────────────
    prompt (history, completion, warning bar)
    line ──► start worker ─────────────────────► run_turn / commands.run
    wait: read keys (raw mode)                    emits events ──► Renderer (prints)
      Esc / Ctrl-C ──► session.cancel.set()       session.ask(...) ──► queue
      permission question ◄── queue                 waits for the answer
      answer ──────────────────────────────────►
    worker done ──► back to the prompt

Keys typed during a turn that are not Esc or Ctrl-C are handed to the next prompt (type-ahead).
Start-up: the SDK import starts in a background thread as soon as the prompt has been drawn (at once
when there is a first message), so it loads while the user types and never delays the prompt.
"""

from __future__ import annotations

import os
import queue
import select
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from prompt_toolkit import PromptSession
from prompt_toolkit.application.current import get_app
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import ANSI, to_formatted_text
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input, create_input, create_pipe_input
from prompt_toolkit.input.typeahead import get_typeahead, store_typeahead
from prompt_toolkit.key_binding import KeyBindings, KeyPress
from prompt_toolkit.keys import Keys
from prompt_toolkit.output import ColorDepth, DummyOutput, Output
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style
from rich.console import Console

from agent import RESUME_PICK, __version__
from agent.config import trust, user_settings
from agent.config.settings import Settings, reload_settings
from agent.frontend import commands, memory_note, shell_escape
from agent.frontend.ui import Renderer, SafeConsole, relative_paths, shown_path, warning_of
from agent.mcp import setup as mcp_setup
from agent.mcp.client import McpHub
from agent.runtime import first_request, lifecycle, mentions, rewind, sdk
from agent.runtime.loop import run_turn
from agent.runtime.sdk import import_in_background, import_to_come
from agent.runtime.session import Answer, Session
from agent.runtime.status_line import StatusLine, payload_of
from agent.transcript.listing import list_sessions
from compact.request_cycle import token_state
from core.boundary import guarded
from core.errors import AgentError
from core.events import TokenState
from core.messages import Message
from core.private import redact, secrets_of
from core.terminal import visible
from core.tokens import defer_loading

PROMPT = "> "
STYLE = Style.from_dict(
    {
        "bottom-toolbar": "noreverse",
        "warning": "fg:ansiyellow",
        "error": "fg:ansired",
        "blocking": "fg:ansired bold",
        "prompt": "bold",
        "mode": "fg:ansimagenta",
        "thinking": "fg:ansimagenta",
    }
)
INTERRUPT_KEYS = (Keys.Escape, Keys.ControlC)
ANSWERS: dict[str, Answer] = {"y": "yes", "n": "no", "a": "always"}
ANSWER_WORDS = ("y", "yes", "n", "no", "a", "always")
ANSWER_PROMPT = "  › "  # where every question's answer is typed
YES_NO = "[y]es / [n]o"
PERMISSION_KEYS = "type y, n or a, then Enter (Enter alone: no)"


def asked(question: str, enter: str) -> str:
    """A question as the REPL asks every one: what Enter alone does is said at its end."""
    return f"{question} · Enter: {enter}"


SHOW_SUMMARY = "/summary"
THINKING_ON = "✻ thinking on (tab to turn off)"
KEY_HOLD = 0.05  # seconds a key typed holds the background import (first_request.hold_imports)
QUIET = 0.3  # seconds with no key typed and no prompt being sent before the SDK starts loading
LATEST = 1.0  # ... but keys typed on and on postpone it this long at most after the prompt is drawn
ALWAYS_LOAD_WAIT = 5.0  # seconds the first prompt waits for servers configured with "alwaysLoad"


def thinking_status(session: Session) -> str:
    """The toolbar's thinking part: on or off, and the effort on a model that thinks by effort (nothing
    while the model is left at its defaults)."""
    family = session.family()
    if not family.adaptive:
        return THINKING_ON if session.thinking_on else ""
    effort = f"effort {session.effort or 'auto'}"
    if session.thinking_on and session.effort is None and family.thinks_by_default:
        return ""  # the model's own default, as nothing shows for a 4.x model left as it is
    if session.thinking_on:
        return f"✻ thinking on · {effort} (tab to turn off)"
    if family.stop is None:
        return f"✻ thinking on · {effort} ({family.name} can't turn it off)"
    if (
        family.stop == "between_tools"
        and (session.pinned_effort or session.effort or "high") not in family.stop_efforts
    ):
        return f"✻ thinking on · {effort} (off only at high effort or below)"
    return f"thinking off · {effort} (tab to turn on)"


DRAFT_MARK = "\0"  # ctrl+o's result: the command, this, then the text the user had typed


def run_repl(
    settings: Settings,
    initial_prompt: str | None,
    resume: str | None = None,
    continue_last: bool = False,
    environ: dict[str, str] | None = None,
    driver: Driver | None = None,
    plain: bool = False,
) -> int:
    """The interactive session; returns the exit code. ``driver``: agent.demo.driver (--demo); ``plain``:
    no terminal to draw on (``--demo --auto > file``): the input line is not drawn, each line sent is
    printed as a plain line instead, and no key is read from stdin."""
    lifecycle.locate(
        settings, resume, continue_last
    )  # a bad --resume: its one error line, before the terminal is touched
    console = SafeConsole(no_color=settings.no_color, highlight=False)
    if plain:
        with create_pipe_input() as keys:  # open and silent: the driver types
            repl = Repl(
                settings,
                console,
                environ=dict(environ or {}),
                driver=driver,
                input=keys,
                output=DummyOutput(),
            )
            repl.echo_lines = True
            repl.open(resume=resume, continue_last=continue_last)
            return repl.run(initial_prompt)
    repl = Repl(settings, console, environ=dict(environ or {}), driver=driver)
    if initial_prompt:
        import_in_background()  # the first request needs it at once
    else:
        # The SDK loads once the prompt is up and the user is quiet (Repl.when_quiet). Started any earlier,
        # its import (~2 s of Python) competes with drawing the prompt for the GIL and nearly doubles the
        # time to the first prompt. A prompt typed at once never waits for it: its requests go the
        # standard library's way (agent.runtime.first_request), its estimate is characters / 4 until the
        # tokenizer is in.
        repl.when_drawn(lambda: warm_up_deferred(repl))
        repl.hold_imports_while_typing()
    repl.open(resume=resume, continue_last=continue_last)
    try:
        code = repl.run(initial_prompt)
    finally:
        if repl.session is not None:
            lifecycle.end(repl.session)
        if repl.mcp is not None:
            repl.mcp.close()
    if driver is None and repl.session is not None and repl.session.messages:  # the demo's is thrown away
        repl.renderer.line(resume_hint(repl.session.session_id), "dim")
    return code


def warm_up_deferred(repl: Repl) -> None:
    """Once the prompt is drawn: estimates are characters / 4 until the tokenizer is in, and the SDK and
    the tokenizer load once the user is quiet (Repl.when_quiet)."""
    defer_loading()
    import_to_come()
    repl.when_quiet(import_in_background)


def resume_hint(session_id: str) -> str:
    """The line on leaving: how to come back to this conversation."""
    return (
        f"Saved. To pick up where you left off: compact-agent --resume {session_id} (or -c in this directory)"
    )


# --- pieces ------------------------------------------------------------------------------------------


class SlashCompleter(Completer):
    """Completes command names (built-in, then custom ones from ``custom``) while the line is a lone
    "/word", and paths after "@" anywhere (relative to ``cwd``)."""

    def __init__(self, custom: Callable[[], dict[str, str]] | None = None, cwd: Path | None = None) -> None:
        self.custom = custom or dict
        self.cwd = cwd

    def get_completions(self, document: Any, complete_event: Any) -> Any:
        text = document.text_before_cursor
        word = text.rsplit(None, 1)[-1] if text and not text[-1].isspace() else ""
        if self.cwd is not None and word.startswith("@"):
            for path in mentions.complete(self.cwd, word[1:]):
                yield Completion(
                    "@" + path, start_position=-len(word), display=visible("@" + path, one_line=True)
                )
            return
        if not text.startswith("/") or any(c.isspace() for c in text):
            return
        for name in commands.names():
            if name.startswith(text[1:]):
                yield Completion(
                    "/" + name, start_position=-len(text), display_meta=commands.COMMANDS[name].summary
                )
        for name, summary in self.custom().items():
            if name.startswith(text[1:]):
                yield Completion("/" + name, start_position=-len(text), display_meta=summary)


def history_file(settings: Settings) -> Path:
    """settings.home/history/<project key>.txt, private to the user (dirs 0700, file 0600)."""
    folder = Path(settings.home) / "history"
    for d in (Path(settings.home), folder):
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    path = folder / f"{settings.project_key}.txt"
    os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))
    os.chmod(path, 0o600)
    return path


class RedactingHistory(FileHistory):
    """Input history on disk without the API key (a pasted key stays in memory for Up, never on disk)."""

    def __init__(self, filename: str, secrets: tuple[str, ...]) -> None:
        super().__init__(filename)
        self.secrets = secrets

    def store_string(self, string: str) -> None:
        super().store_string(redact(string, self.secrets))


MODES = ("default", "acceptEdits", "plan")  # what Shift-Tab cycles through, as in Claude Code
MODE_LABELS = {
    "acceptEdits": "⏵⏵ accept edits on (shift+tab to cycle)",
    "plan": "⏸ plan mode on (shift+tab to cycle)",
    "bypassPermissions": "bypass permissions on (shift+tab to cycle)",
}


def next_mode(mode: str, started: str) -> str:
    """The mode after ``mode``; bypassPermissions stays in the cycle only if the session started in it."""
    cycle = MODES + (("bypassPermissions",) if started == "bypassPermissions" else ())
    return cycle[(cycle.index(mode) + 1) % len(cycle)] if mode in cycle else cycle[0]


def key_bindings(
    cycle_mode: Callable[[], None] = lambda: None, toggle_thinking: Callable[[], None] | None = None
) -> KeyBindings:
    kb = KeyBindings()

    @kb.add("s-tab")
    def _cycle_mode(event: Any) -> None:
        cycle_mode()
        event.app.invalidate()  # the line under the input shows the new mode

    if toggle_thinking is not None:

        @kb.add("tab", filter=Condition(lambda: not get_app().current_buffer.text))
        def _thinking(event: Any) -> None:  # Tab on an empty line, as in Claude Code; else it completes
            toggle_thinking()
            event.app.invalidate()

    @kb.add("escape", "enter")
    def _newline(event: Any) -> None:  # Alt-Enter, or Esc then Enter
        event.current_buffer.insert_text("\n")

    @kb.add("c-o")
    def _show_summary(event: Any) -> None:  # as in Claude Code; what was typed comes back afterwards
        event.app.exit(result=SHOW_SUMMARY + DRAFT_MARK + event.current_buffer.text)

    @kb.add("escape", "escape")
    def _rewind(event: Any) -> None:  # as in Claude Code: Esc Esc clears the line, or on an empty one rewinds
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(result="/rewind")

    @kb.add("c-c")
    def _ctrl_c(event: Any) -> None:
        buffer = event.app.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return kb


class KeyReader:
    """Key presses read without blocking while a turn runs; the rest is kept as type-ahead."""

    def __init__(self, inp: Input) -> None:
        self.inp = inp
        self.kept: list[KeyPress] = list(get_typeahead(inp))

    def poll(self, timeout: float) -> list[KeyPress]:
        try:
            ready = select.select([self.inp.fileno()], [], [], timeout)[0]
        except (OSError, ValueError):
            time.sleep(timeout)
            return []
        keys = self.inp.read_keys() if ready else self.inp.flush_keys()  # a lone Esc comes out on flush
        if ready and not keys:
            time.sleep(timeout)  # closed input, or half an escape sequence
        return keys

    def close(self) -> None:
        keys = [k for k in self.kept if k.key not in INTERRUPT_KEYS]
        if keys:
            store_typeahead(self.inp, keys)


def typed_text(keys: list[KeyPress]) -> str:
    """What keys typed during a turn will put in the input line (backspace applied, Enter as a newline)."""
    text = ""
    for k in keys:
        if k.key in (Keys.Backspace, Keys.ControlH):
            text = text[:-1]
        elif k.key in (Keys.Enter, Keys.ControlM, Keys.ControlJ):
            text += "\n"
        elif len(k.data) == 1 and k.data.isprintable():
            text += k.data
    return text


@dataclass
class _Question:
    tool: str
    args: dict[str, Any]
    description: str
    answer: Answer = "no"
    done: threading.Event = field(default_factory=threading.Event)


# --- the REPL ----------------------------------------------------------------------------------------


class Driver(Protocol):
    """What drives the REPL in the demo (agent.demo.driver, a room above this one): the input line's
    next contents and the answers to permission questions."""

    def prompt_args(self, repl: Repl) -> dict[str, Any]: ...

    def answer(self, tool: str, args: dict[str, Any]) -> Answer | None: ...


class Repl:
    def __init__(
        self,
        settings: Settings,
        console: Console,
        *,
        environ: dict[str, str],
        input: Input | None = None,
        output: Output | None = None,
        history: History | None = None,
        driver: Driver | None = None,
    ) -> None:
        self.settings = settings
        self.driver = driver  # the demo's: fills (or, with --auto, submits) the input and answers questions
        self.environ = environ
        self.console = console
        self.renderer = Renderer(console)
        self.renderer.cwd = Path(settings.cwd)
        self.input = input or create_input()
        self.output = output
        self.real_terminal = input is None
        self.echo_lines = False  # plain output (run_repl's ``plain``): each line sent is printed
        self.session: Session | None = None
        self.status: StatusLine | None = None  # the statusLine setting's command (agent.runtime.status_line)
        self.mcp: McpHub | None = None  # the MCP servers, shared by /clear and /resume
        self.token_state: TokenState | None = None
        self._questions: queue.Queue[_Question] = queue.Queue()
        self._ctrl_c_armed = False
        self._draft = ""  # text typed before ctrl+o, put back at the next prompt
        self._typed_at = self._sent_at = 0.0  # the last key typed; the last prompt sent before the SDK loaded
        self.prompt: PromptSession[str] = PromptSession(
            history=history if history is not None else self._history(),
            input=self.input,
            output=output,
            completer=SlashCompleter(self._custom_commands, Path(settings.cwd)),
            complete_while_typing=True,
            key_bindings=key_bindings(self.cycle_mode, self.toggle_thinking),
            multiline=False,
            enable_history_search=False,
            style=STYLE,
            include_default_pygments_style=False,
            color_depth=ColorDepth.MONOCHROME if settings.no_color else None,
            prompt_continuation=lambda width, line, wrap: " " * width,
        )

    def hold_imports_while_typing(self) -> None:
        """While the SDK loads in the background, each key typed holds it a moment (it would otherwise take
        most of the GIL from the prompt), so a line typed at once reaches ``turn`` without delay."""

        def typed(_buffer: Any) -> None:
            self._typed_at = time.monotonic()
            if not sdk.sdk_loaded():
                first_request.hold_imports(KEY_HOLD)

        self.prompt.default_buffer.on_text_changed += typed

    def when_quiet(self, fn: Callable[[], Any]) -> None:
        """Call fn (the SDK's import, ~2 s of Python) on a thread of its own once no key has been typed for
        ``QUIET`` seconds (or ``LATEST`` seconds have gone by), and not within ``QUIET`` seconds of a
        prompt's request being prepared (``sending``). A prompt typed the moment the REPL appears is
        then prepared and sent (agent.runtime.first_request) with the interpreter to itself: a running
        import is held only at its next module or Python call (first_request's module doc), and its native
        parts (pydantic's validators) can't be, so it still took the first request from ~45 ms to
        ~110-230 ms (benchmarks/startup_repl.py)."""
        start = time.monotonic()

        def due() -> float:
            now = time.monotonic()
            typing = max(start + QUIET, min(self._typed_at + QUIET, start + LATEST))
            return max(typing, self._sent_at + QUIET) - now

        def wait() -> None:
            while (left := due()) > 0:
                time.sleep(left)
            fn()

        threading.Thread(target=wait, name="sdk-import-when-quiet", daemon=True).start()

    def sending(self) -> None:
        """A prompt's request is being prepared before the SDK has loaded: the SDK's import, running or
        not started, waits (``when_quiet``, first_request.hold_imports)."""
        self._sent_at = time.monotonic()
        first_request.hold_imports()

    def when_drawn(self, fn: Callable[[], Any]) -> None:
        """Call fn once, right after the prompt is first drawn."""
        fired = threading.Event()

        def after_render(_app: Any) -> None:
            if not fired.is_set():
                fired.set()
                fn()

        self.prompt.app.after_render += after_render

    def _history(self) -> History:
        try:
            s = self.settings
            return RedactingHistory(str(history_file(s)), secrets_of(s.api_key, s.auth_token))
        except OSError:
            return InMemoryHistory()

    # --- session -----------------------------------------------------------------------------------
    def open(self, *, resume: str | None = None, continue_last: bool = False) -> None:
        for warning in self.settings.report.warnings:  # a project's broken settings file: skipped, said once
            self.renderer.line(f"Warning: {warning}", "yellow")
        self.confirm_trust()  # before anything of the project's runs (SessionStart hooks)
        self.mcp = self.mcp_servers()
        if resume == RESUME_PICK:
            resume = self.pick_at_start()
        self.session = lifecycle.open_session(
            self.settings,
            emit=self.renderer,
            ask=self.ask,
            resume=resume,
            continue_last=continue_last,
            environ=self.environ,
            mcp=self.mcp,
        )
        if self.mcp is not None:
            hub = self.mcp
            hub.on_change = lambda state: mcp_setup.report(state, self.live.notice)
            if any(s.config.always_load for s in hub.states.values()):
                hub.start()  # alwaysLoad servers: worth a few seconds before the first prompt
                hub.wait(ALWAYS_LOAD_WAIT, [s.name for s in hub.states.values() if s.config.always_load])
            self.when_drawn(hub.start)  # the rest connect once the prompt is up
        if self.settings.status_line:  # the user's statusLine command, under the input
            self.status = StatusLine(
                self.settings.status_line,
                lambda: payload_of(self.live, __version__),
                self.settings.cwd,
                self.settings.environ or self.environ,
            )
            self.status.on_change = self._redraw
            self.when_drawn(self.status.refresh)
        self.renderer.banner(__version__, self.session.model, str(self.settings.cwd))
        if resume or continue_last:
            self.renderer.recap(
                self.session.messages,
                progress=self.session.family().progress_in_thinking,
                compacted=self.session.last_compaction is not None,
            )
            self.renderer.line(lifecycle.resumed_line(self.session), "dim")
        lifecycle.start(self.session, "resume" if (resume or continue_last) else "startup")
        if self.session.messages:  # a resumed conversation may already be over the warning level
            self.when_drawn(lambda: threading.Thread(target=self._refresh_tokens_bg, daemon=True).start())

    def mcp_servers(self) -> McpHub | None:
        """The MCP servers to start (agent/mcp): a project's new .mcp.json servers are asked about first
        (only once the project is trusted); None when none are configured."""
        setup = mcp_setup.setup_of(self.settings)
        for problem in setup.problems:
            self.renderer.line(f"Warning: {problem}", "yellow")
        if setup.untrusted:
            names = ", ".join(c.name for c in setup.untrusted)
            self.renderer.line(
                f"MCP servers in .mcp.json not started: the project is not trusted ({names}).", "dim"
            )
        if setup.unapproved:
            self.renderer.line("This project's .mcp.json configures MCP servers:", "bold")
            for config in setup.unapproved:
                self.renderer.line(f"  - {config.name}: {config.describe()}")
            approved = self._yes("Start them, now and in later sessions?")
            setup = mcp_setup.approve(self.settings, list(setup.unapproved), approved)
            if not approved:
                self.renderer.line(
                    "Not started (/mcp shows them; the answer is kept in your agent home).", "dim"
                )
        return mcp_setup.hub_for(self.settings, setup) if setup.servers else None

    def pick_at_start(self) -> str | None:
        """--resume without an id: the directory's sessions, and the one picked (None: a new session)."""
        found = list_sessions(self.settings.project_dir)
        if not found:
            self.renderer.line("No saved sessions in this directory; starting a new one.", "dim")
            return None
        for line in commands.session_lines(found, str(self.settings.cwd)):
            self.renderer.line(line)
        answer = self._ask(f"Resume which session? 1-{len(found)}", "a new one")
        if answer.isdigit() and 1 <= int(answer) <= len(found):
            return str(found[int(answer) - 1].path)
        if answer:
            self.renderer.line(f"No session {answer!r}; starting a new one.", "dim")
        return None

    def confirm_trust(self) -> None:
        """The trust dialog, when the project's settings files ask for what needs trust (agent/config/trust.py):
        trusting records it and reloads the settings with them; not trusting goes on without them."""
        s = self.settings
        untrusted = [i for i in s.report.ignored if i.kind != "credential"]
        keys = [
            i
            for i in s.report.ignored
            if i.kind == "credential" and i.confirm not in s.report.trust.declined_keys
        ]
        if not (untrusted or keys):
            return
        if untrusted:
            self.renderer.line(
                f"This project ({s.root}) is not trusted yet. Its settings files would:", "bold"
            )
            for line in trust.dialog_lines(untrusted):
                self.renderer.line(line)
            if not self._yes("Trust this project and apply them?"):
                self.renderer.line("Not trusted: going on without them (/trust shows them).", "dim")
                return
        confirmed: list[str] = []
        declined: list[str] = []
        for item in keys:
            self.renderer.line(
                f"Its settings also set {item.what} ({item.source}): ANTHROPIC_* settings decide which "
                "credentials are used and where your API key is sent.",
                "yellow",
            )
            (
                confirmed
                if self._yes(f"Use {visible(item.key, one_line=True)} from this project?")
                else declined
            ).append(item.confirm)
        trust.grant(s.home, s.root, tuple(confirmed), tuple(declined), s.report.trust_fingerprint)
        self.settings = s = reload_settings(s, self.environ)
        if isinstance(self.prompt.history, RedactingHistory):  # a confirmed project key is a secret too
            self.prompt.history.secrets = secrets_of(s.api_key, s.auth_token)
        self.renderer.line("Trusted: its settings apply (/trust revoke withdraws it).", "dim")

    def _yes(self, question: str) -> bool:
        return self._ask(f"{question} {YES_NO}", "no").lower() in ("y", "yes")

    def _ask(self, question: str, enter: str) -> str:
        """Every question the REPL asks is asked this one way (permission questions, confirmations and
        pickers alike): the question on its line, ending with what Enter alone does, and the answer typed
        after ``›`` and sent with Enter. Enter alone, Esc, Ctrl-C or Ctrl-D give "" (``enter``: what that
        does, always the answer that changes nothing)."""
        self.renderer.line(asked(question, enter), "bold")
        return self._ask_line() or ""

    def _ask_line(self) -> str | None:
        """The answer typed at the question's prompt (None for Esc, Ctrl-C or Ctrl-D)."""
        keys = KeyBindings()

        @keys.add("escape", eager=True)
        @keys.add("c-c")
        @keys.add("c-d", filter=Condition(lambda: not get_app().current_buffer.text))
        def _leave(event: Any) -> None:
            event.app.exit(result=None)

        try:
            with patch_stdout(raw=True) if self.real_terminal else nullcontext():
                answer = PromptSession[str | None](
                    input=self.input, output=self.output, key_bindings=keys
                ).prompt([("class:prompt", ANSWER_PROMPT)], style=STYLE)
        except (KeyboardInterrupt, EOFError):
            return None
        if answer is not None and self.echo_lines:
            self.renderer.line(ANSWER_PROMPT + answer, "dim")  # nothing drew the answer's line
        return None if answer is None else answer.strip()

    @property
    def live(self) -> Session:
        """The session in use: open() (or use()) sets it before any input is read."""
        if self.session is None:
            raise RuntimeError("no session is open yet")
        return self.session

    def use(self, session: Session) -> None:
        """Continue with another session (tests; /clear and /resume)."""
        self.session = session
        session.emit = self.renderer
        session.ask = self.ask
        self.token_state = None

    # --- main loop ---------------------------------------------------------------------------------
    def run(self, initial_prompt: str | None = None) -> int:
        if initial_prompt and initial_prompt.strip():
            self.renderer.echo(initial_prompt)  # the command line's prompt, shown as a typed one stays
            if not self.handle(initial_prompt):
                return 0
        while True:
            try:
                line = self.read_line()
            except KeyboardInterrupt:
                if self._ctrl_c_armed:
                    return 0
                self._ctrl_c_armed = True
                self.renderer.line("Press Ctrl-C again to exit", "dim")
                continue
            except EOFError:
                return 0
            self._ctrl_c_armed = False
            if line.strip() and not self.handle(line):
                return 0

    def read_line(self) -> str:
        draft, self._draft = self._draft, ""
        options: dict[str, Any] = {"default": draft}
        if self.driver is not None and not draft:  # the demo's next line, unless ctrl+o kept the user's text
            options.update(self.driver.prompt_args(self))
        with patch_stdout(raw=True) if self.real_terminal else nullcontext():
            line = self.prompt.prompt([("class:prompt", PROMPT)], bottom_toolbar=self._toolbar, **options)
        if DRAFT_MARK in line:  # ctrl+o
            line, self._draft = line.split(DRAFT_MARK, 1)
        if self.echo_lines and line.strip():
            self.renderer.echo(line)  # nothing drew the input line: say what was sent
        return line

    def _redraw(self) -> None:
        app = self.prompt.app
        if app.is_running:
            app.invalidate()

    def _toolbar(self) -> Any:
        parts: list[tuple[str, str]] = []
        if self.status is not None and self.status.text:
            parts = [(f[0], f[1]) for f in to_formatted_text(ANSI(self.status.text))] + [("", "\n")]
        mode = self.session.permissions.mode if self.session is not None else "default"
        if mode in MODE_LABELS:
            parts.append(("class:mode", MODE_LABELS[mode]))
        shown = warning_of(self.token_state, self.settings.compaction.disable_compact)
        if shown is not None:
            severity, text = shown
            parts += [("", " · ")] if parts else []
            parts.append((f"class:{severity}", text))
        status = thinking_status(self.session) if self.session is not None else ""
        if status:
            parts += [("", "  ")] if parts else []
            parts.append(("class:thinking", status))
        if parts and parts[-1] == ("", "\n"):
            parts.pop()  # the status line alone
        return parts or ""

    def cycle_mode(self) -> None:
        """Shift-Tab: default → acceptEdits → plan → default, for this session."""
        if self.session is not None:
            perms = self.session.permissions
            perms.mode = next_mode(perms.mode, self.settings.permission_mode)

    def _custom_commands(self) -> dict[str, str]:
        """Custom command names and what completion shows beside them (read from disk as typed)."""
        found = commands.custom_for(self.settings).commands.values()
        return {c.name: (c.argument_hint + " " if c.argument_hint else "") + c.description for c in found}

    def toggle_thinking(self) -> None:
        """Tab on an empty input line: thinking on or off for the rest of the session (the toolbar shows
        where the model would not let it go off)."""
        if self.session is not None:
            self.session.toggle_thinking()

    def handle(self, line: str) -> bool:
        """Run one input line; False when the REPL should end."""
        try:
            return self._handle(line)
        finally:
            if self.status is not None:
                self.status.refresh()  # the conversation changed: the status line's command runs again

    def _handle(self, line: str) -> bool:
        if commands.is_command(line):
            return self.command(line)
        if line.startswith("!") and line[1:].strip():
            self.shell(line[1:].strip())
        elif memory_note.note_of(line) and "\n" not in line.strip():
            self.remember(memory_note.note_of(line))
        else:
            self.turn(line)
        return True

    def shell(self, command: str) -> None:
        """!command: run by the user, its output shown here and recorded for the model."""
        ran = self.in_worker(lambda: shell_escape.run(self.live, command))
        if ran is None:
            return
        if not ran.ran:
            self.renderer.line(ran.output, "red")
            return
        for text in (ran.output.rstrip("\n") or "(no output)").splitlines():
            self.renderer.line("  " + text, "red" if ran.is_error else "dim")
        self.refresh_tokens()

    def remember(self, note: str) -> None:
        """# note: appended to the project's or the user's CLAUDE.md, as the user picks."""
        places = memory_note.targets(self.settings)
        answer = self._ask(
            f"Add to memory: [p]roject {self._shown(places['project'])} or [u]ser {self._shown(places['user'])}?",
            "cancel",
        ).lower()
        where = next((k for k in memory_note.CHOICES if answer and k.startswith(answer)), None)
        if where is None:
            self.renderer.line("Not saved.", "dim")
            return
        target = places[where]
        own = [Path(self.settings.root)] if where == "project" else None  # the user's own file may be a link
        if why := self.live.permissions.note_refusal(target, own):
            self.renderer.line(f"Not saved: {why}.", "red")
            return
        try:
            memory_note.add(target.resolve(), note)
        except OSError as e:
            self.renderer.line(f"Could not save the note to {self._shown(places[where])}: {e}", "red")
            return
        self.renderer.line(f"Noted in {self._shown(places[where])} (read with every request).", "dim")

    def _shown(self, path: Path) -> str:
        """A path as the rest of the screen shows paths (relative in the project, ~/… at home)."""
        return shown_path(str(path), Path(self.settings.cwd))

    def turn(self, text: str, allowed: tuple[str, ...] = ()) -> None:
        if not sdk.sdk_loaded():  # a prompt typed at once: its request goes first, the import waits
            self.sending()
        self.renderer.begin_turn()
        session = self.live

        def work() -> Any:
            with session.allowing(allowed):
                return run_turn(session, text)

        self.in_worker(work)
        self.refresh_tokens()

    def command(self, line: str) -> bool:
        before = self.renderer.compact_events
        result = self.in_worker(lambda: commands.run(self.live, line))
        if result is None:
            return True
        if isinstance(result, commands.Exit):
            return False
        if isinstance(result, commands.Prompt):  # a custom command: its prompt runs as a turn
            self.turn(result.prompt, result.allowed)
            return True
        if isinstance(result, commands.Switched) and not result.session.messages:
            self.renderer.clear_screen()  # /clear, as in Claude Code
        if isinstance(result, commands.Switched):
            self.renderer.recap(  # /resume: where the conversation was
                result.session.messages,
                progress=result.session.family().progress_in_thinking,
                compacted=result.session.last_compaction is not None,
            )
        if not isinstance(result, commands.Compacted) or self.renderer.compact_events == before:
            self.renderer.result(result)
        if isinstance(result, commands.Switched):
            self.use(result.session)
        elif isinstance(result, commands.SessionList) and result.sessions:
            self._pick_session(len(result.sessions))
        elif isinstance(result, commands.ModelMenu) and result.choices:
            self._pick_model(len(result.choices))
        elif isinstance(result, commands.RewindMenu) and result.points:
            self._pick_rewind(result.points)
        elif isinstance(result, commands.ConfigMenu) and result.choices:
            self._pick_setting(result.choices)
        self.refresh_tokens()
        return True

    def _pick_rewind(self, points: list[Message]) -> None:
        """N: back to just before prompt N (its text returns to the input line); sN: summarize up to it."""
        n = len(points)
        self.renderer.line(
            f"N (1-{n}) takes the conversation back to just before prompt N · cN the code too (the files "
            "the agent changed since) · sN summarizes what came before it, keeping the rest",
            "dim",
        )
        answer = self._ask(f"Rewind to which prompt? N, cN or sN (1-{n})", "stay here").lower()
        summarize, code = answer.startswith("s"), answer.startswith("c")
        number = answer[1:].strip() if summarize or code else answer
        if not number.isdigit() or not 1 <= int(number) <= n:
            if answer:
                self.renderer.line(f"No prompt {answer!r}; the conversation is unchanged.", "dim")
            return
        point = points[int(number) - 1]
        if summarize:
            self.in_worker(lambda: rewind.summarize_up_to(self.live, point))
        else:
            restored = rewind.restore_code(self.live, point) if code else []
            self._draft = rewind.rewind(self.live, point)
            self.renderer.line(
                f"Rewound to just before prompt {number}; it is back in the input line "
                "(the transcript keeps everything).",
                "dim",
            )
            if code:
                cwd = Path(self.settings.cwd)
                shown = ", ".join(relative_paths({"path": str(p)}, cwd)["path"] for p in restored)
                shown = shown or "none had changed"
                self.renderer.line(f"Code restored: {shown}", "dim")
        self.refresh_tokens()

    def _pick_model(self, count: int) -> None:
        answer = self._ask(f"Switch to which model? 1-{count} or a name", f"keep {self.live.model}")
        if answer:
            self.command(f"/model {answer}")

    def _pick_setting(self, keys: list[str]) -> None:
        """After /config: which setting to change, then its value, asked as every question is."""
        answer = self._ask(f"Change which setting? 1-{len(keys)} or a name", "none")
        if not answer:
            return
        item = user_settings.find(answer)
        if item is None:
            self.renderer.line(f"No setting {answer!r} to change here; nothing changed.", "dim")
            return
        now = self.live.model if item.key == "model" else user_settings.current(self.live.settings, item.key)
        what = "a model id or alias" if item.choices == ("",) else " | ".join(item.choices)
        value = self._ask(f"{item.key} (now {user_settings.shown(now)}): {what}?", "keep it")
        if value:
            self.command(f"/config {item.key} {value}")

    def _pick_session(self, count: int) -> None:
        answer = self._ask(f"Resume which session? 1-{count}", "stay here")
        if answer:
            self.command(f"/resume {answer}")

    # --- the worker and the wait -----------------------------------------------------------------------
    def in_worker(self, fn: Callable[[], Any]) -> Any:
        """Run fn in a worker thread; meanwhile read keys (Esc / Ctrl-C cancel) and answer its questions."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - reported below, never kills the REPL
                box["error"] = e
            finally:
                done.set()

        worker = threading.Thread(target=work, name="turn", daemon=True)
        worker.start()
        self._wait(done)
        worker.join()
        self.renderer.end_work()
        error = box.get("error")
        if error is not None:
            text = (
                str(error)
                if isinstance(error, AgentError)
                else f"Internal error: {type(error).__name__}: {error}"
            )
            self.renderer.line(text, "red")
        return box.get("value")

    def _wait(self, done: threading.Event) -> None:
        reader = KeyReader(self.input)
        try:
            with self.input.raw_mode() if self.real_terminal else nullcontext():
                while not done.is_set():
                    try:
                        self._serve_question(reader)
                        for key in reader.poll(0.05):
                            if key.key in INTERRUPT_KEYS:
                                self.interrupt()
                            else:
                                reader.kept.append(key)
                                self.renderer.queued = typed_text(reader.kept)
                    except KeyboardInterrupt:
                        self.interrupt()
        finally:
            self.renderer.queued = ""
            reader.close()

    def interrupt(self) -> None:
        if self.session is not None:
            self.session.cancel.set()

    # --- permission questions (asked by the worker, answered here) ------------------------------------
    def ask(self, tool: str, args: dict[str, Any], description: str) -> Answer:
        """session.ask: called from the worker thread; blocks until the main thread has the answer."""
        question = _Question(tool, args, description)
        self._questions.put(question)
        while not question.done.wait(0.1):
            if self.session is not None and self.session.cancel.is_set():
                return "no"
        return question.answer

    def _serve_question(self, reader: KeyReader) -> None:
        try:
            question = self._questions.get_nowait()
        except queue.Empty:
            return
        self.renderer.pause()
        always = self.session.permissions.suggest_rule(question.tool, question.args) if self.session else None
        self.renderer.permission(question.tool, question.args, question.description, always)
        scripted = self.driver.answer(question.tool, question.args) if self.driver is not None else None
        question.answer = scripted or self._read_answer()
        label = {"yes": "Yes", "no": "No", "always": "Yes, and don't ask again this session"}[question.answer]
        self.renderer.answered(question.tool, question.args, label)
        question.done.set()
        self.renderer.resume()

    def _read_answer(self) -> Answer:
        """The permission question's answer, asked as every question is (``_ask``): y, n or a (or the
        word), then Enter; Enter alone is no, and Esc or Ctrl-C also stop the turn, as while it runs."""
        while True:
            if self.session is not None and self.session.cancel.is_set():
                return "no"
            typed = self._ask_line()
            if typed is None:
                self.interrupt()
                return "no"
            answer = ANSWERS.get(typed[:1].lower()) if typed.lower() in ANSWER_WORDS else None
            if not typed or answer is not None:
                return answer or "no"
            self.renderer.line(
                f"{visible(typed, one_line=True)!r} is not an answer: {PERMISSION_KEYS}", "yellow"
            )

    # --- the warning bar -----------------------------------------------------------------------------
    def refresh_tokens(self) -> None:
        """The numbers the trigger will use for the next request (view + thresholds)."""
        session = self.live
        if not session.messages:
            self.token_state = None
            return
        # no new bar is better than a crashed prompt: the one shown stays
        self.token_state = guarded(
            lambda: token_state(session.conv, session.conv.view().tokens), lambda _: self.renderer.token_state
        )

    def _refresh_tokens_bg(self) -> None:
        self.refresh_tokens()
        app = self.prompt.app
        if app.is_running:
            app.invalidate()
