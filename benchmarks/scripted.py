"""Scripted sessions through the real agent, shared by benchmarks/fidelity.py and benchmarks/cost.py.

A session is an in-process ``agent.runtime.session.Session`` (tests/helpers/session.py ``make_session``) talking to the
loopback fake API (tests/fakeapi.py ``FakeAPI``) through the official SDK. The fake plays every model:

  main requests      the scenario's script: each turn's tool calls, one reply after another, then a
                     closing line (tools really run: files are read and edited, commands really exit)
  summary requests   a deliberately poor summary: "We worked on some code."
  notes updates      one Edit of the notes file writing the same poor line into "Current State"
  collapse requests  the same poor line as a span summary

``run(scenario, mode)`` plays a scenario under one compaction mode (``MODES``) and returns a ``Run``:
every request's kind and the usage the fake billed for it, the main request bodies that followed each
compaction, and the facts (modified paths, commands and exit codes, the user's constraints, the todo)
as they stood at each of those compactions — taken from the messages the session recorded.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import thinking  # noqa: E402

from agent.frontend import commands  # noqa: E402
from agent.runtime.loop import run_turn  # noqa: E402
from compact.compaction import notes_updater  # noqa: E402
from compact.compaction.notes_template import SECTIONS  # noqa: E402
from compact.context import cache_health  # noqa: E402
from compact.workers import collapse_worker  # noqa: E402
from core.events import CompactFinished, MessageRecorded, Notice  # noqa: E402
from core.messages import Message  # noqa: E402
from tests.fakeapi import FakeAPI, PromptTooLong, Reply, estimate_tokens, last_user_text  # noqa: E402
from tests.helpers.session import make_session  # noqa: E402

POOR = "We worked on some code."
# what a real model spends on its private analysis before a summary (stripped from the summary), and on a
# notes edit or a span summary: the replies carry that much filler so outputs are billed at a realistic size
FILLER = "I went through the conversation in order and checked each part of it once more. "
# ~2,300 output tokens, ~800 of them the summary itself: its size is a real one, its content still poor
SUMMARY_REPLY = f"<analysis>{FILLER * 75}</analysis>\n<summary>{POOR} {FILLER * 40}</summary>"
NOTES_LINE = f"{POOR} {FILLER * 12}"  # ~250 output tokens per notes update
SPAN_REPLY = f"{POOR} {FILLER * 8}"  # ~170 output tokens per span summary
WINDOW = 50_000  # CLAUDE_CODE_AUTO_COMPACT_WINDOW for the scripted sessions
MODEL = "claude-sonnet-4-5"
PTL_AT = 20_000  # reactive mode: the fake answers "prompt is too long" to a main request above this
MANUAL_AT = 15_000  # manual mode: /compact between turns once the context is this big

# mode -> Settings fields (every mode runs with a poor summary / poor notes)
MODES: dict[str, dict[str, Any]] = {
    "summary": {"session_memory": False},
    "notes": {"session_memory": True},
    "collapse": {"context_collapse": True, "session_memory": False},
    "reactive": {"auto_compact": False, "session_memory": False},
    "/compact": {"auto_compact": False, "session_memory": False},
}
NOTES_GUIDE = f"_{dict(SECTIONS)['Current State']}_"
NOTES_PATH = re.compile(r"(/\S+/session-memory/summary\.md)")


# --- scenarios -----------------------------------------------------------------------------------------

Call = tuple[str, dict[str, Any]]


@dataclass
class Turn:
    prompt: str
    replies: list[list[Call]]  # each reply's (parallel) tool calls; a closing text reply follows
    todo: list[str] = field(default_factory=list)  # with TodoWrite: the plan set at the turn's start


@dataclass
class Scenario:
    name: str
    setup: Callable[[Path], None]
    turns: Callable[[Path], list[Turn]]
    constraints: list[str]  # sentences of the prompts that are rules the user set, verbatim


def _module(n: int, lines: int) -> str:
    body = [f'"""Module {n}: part of the order pipeline."""\n', "from pkg.config import load_config\n\n"]
    for i in range(lines):
        body.append(
            f"def handle_{n}_{i}(order, settings=None):\n"
            f"    cfg = load_config(settings)\n"
            f"    return order.amount * cfg.rate_{i % 7} + {i}  # stage {n}.{i}\n\n"
        )
    return "".join(body)


def _setup_refactor(p: Path) -> None:
    (p / "pkg").mkdir()
    (p / "pkg" / "config.py").write_text("def load_config(settings=None):\n    return settings\n")
    for n in range(15):
        (p / "pkg" / f"orders_{n}.py").write_text(_module(n, 55))
    (p / "tests" / "legacy").mkdir(parents=True)
    (p / "tests" / "legacy" / "test_old.py").write_text("from pkg.config import load_config\n")


def _turns_refactor(p: Path) -> list[Turn]:
    files = [str(p / "pkg" / f"orders_{n}.py") for n in range(15)]
    turns = [
        Turn(
            "Rename load_config to read_config everywhere in pkg/. Never touch tests/legacy/: those files are "
            "frozen.",
            [
                [("Read", {"file_path": str(p / "pkg" / "config.py")})],
                [
                    (
                        "Edit",
                        {
                            "file_path": str(p / "pkg" / "config.py"),
                            "old_string": "def load_config",
                            "new_string": "def read_config",
                        },
                    )
                ],
            ],
            todo=["Rename load_config in pkg/config.py", "Update every caller in pkg/", "Run a final check"],
        ),
    ]
    prompts = [
        "Carry on with the next modules. Keep every line under 100 characters.",
        "Next ones, please.",
        "Go on.",
        "Continue with the remaining modules.",
        "And the last ones.",
    ]
    for k, prompt in enumerate(prompts):
        replies: list[list[Call]] = []
        for f in files[3 * k : 3 * k + 3]:
            replies.append([("Read", {"file_path": f})])
            replies.append(
                [
                    (
                        "Edit",
                        {
                            "file_path": f,
                            "old_string": "load_config",
                            "new_string": "read_config",
                            "replace_all": True,
                        },
                    )
                ]
            )
        replies.append([("Bash", {"command": f"python3 -m py_compile pkg/orders_{3 * k}.py"})])
        turns.append(Turn(prompt, replies))
    turns.append(
        Turn(
            "Add a changelog entry and check nothing still says load_config.",
            [
                [
                    (
                        "Write",
                        {
                            "file_path": str(p / "CHANGELOG.md"),
                            "content": "# Changelog\n\n- load_config is now read_config.\n",
                        },
                    )
                ],
                [("Grep", {"pattern": "load_config", "path": str(p / "pkg")})],
                [("Bash", {"command": "grep -rn load_config pkg"})],
                [("Bash", {"command": "git status --short"})],
            ],
        )
    )
    return turns


CALC = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n"
TESTS = (
    "import unittest\nfrom calc import mean\n\n\nclass T(unittest.TestCase):\n"
    "    def test_mean(self):\n        self.assertEqual(mean([2, 4]), 3)\n"
)


def _setup_debug(p: Path) -> None:
    (p / "calc.py").write_text(CALC)
    (p / "test_calc.py").write_text(TESTS)
    log = "".join(
        f"2025-06-01T12:{i // 60:02d}:{i % 60:02d} worker-{i % 5} processed batch {i} in {i % 97} ms "
        f"(queue depth {i % 13}, retries {i % 3})\n"
        for i in range(240)
    )
    (p / "build.log").write_text(log)
    for n in range(8):
        (p / f"helpers_{n}.py").write_text(_module(n, 50))


def _turns_debug(p: Path) -> list[Turn]:
    log, calc = str(p / "build.log"), str(p / "calc.py")
    helpers = [str(p / f"helpers_{n}.py") for n in range(8)]
    return [
        Turn(
            "The tests fail; find out why. Do not modify test_calc.py: the tests are the spec.",
            [
                [("Bash", {"command": "python3 -m unittest -q test_calc"})],
                [("Read", {"file_path": log})],
                [("Bash", {"command": "grep -n 'FATAL' build.log"})],
                [("Read", {"file_path": helpers[0]})],
            ],
            todo=["Reproduce the failing test", "Find the cause", "Fix calc.py", "Run the tests again"],
        ),
        Turn(
            "Look at the helpers too.",
            [
                [("Bash", {"command": "false"})],
                [("Read", {"file_path": helpers[1]})],
                [("Read", {"file_path": helpers[2]})],
                [("Bash", {"command": "ls missing_dir"})],
            ],
        ),
        Turn(
            "Check the environment as well.",
            [
                [("Read", {"file_path": helpers[3]})],
                [("Bash", {"command": "python3 -c 'import sys; sys.exit(3)'"})],
                [("Read", {"file_path": helpers[4]})],
                [("Bash", {"command": "python3 -m unittest -q test_calc"})],
            ],
        ),
        Turn(
            "Look at the rest of the helpers and the log's second half.",
            [
                [("Read", {"file_path": helpers[5]})],
                [("Read", {"file_path": helpers[6]})],
                [("Bash", {"command": "grep -c 'retries 7' build.log"})],
            ],
        ),
        Turn(
            "Now fix it. Run the tests with python3 -m unittest, never with pytest.",
            [
                [("Read", {"file_path": calc})],
                [("Edit", {"file_path": calc, "old_string": "(len(xs) + 1)", "new_string": "len(xs)"})],
                [("Bash", {"command": "python3 -m unittest -q test_calc"})],
                [("Read", {"file_path": helpers[7]})],
                [("Read", {"file_path": helpers[0]})],
            ],
        ),
        Turn(
            "Double-check the other helpers still import.",
            [
                [("Bash", {"command": "python3 -c 'import helpers_0, helpers_1'"})],
                [("Read", {"file_path": helpers[1]})],
                [("Read", {"file_path": helpers[2]})],
                [("Bash", {"command": "wc -l build.log calc.py"})],
            ],
        ),
    ]


def _setup_explore(p: Path) -> None:
    for d in ("api", "core", "store", "jobs"):
        (p / d).mkdir()
        for n in range(5):
            (p / d / f"part_{n}.py").write_text(_module(n, 45).replace("pkg.config", f"{d}.settings"))


def _turns_explore(p: Path) -> list[Turn]:
    turns = []
    for k, d in enumerate(("api", "core", "store", "jobs")):
        replies: list[list[Call]] = [
            [("Grep", {"pattern": "def handle_", "path": str(p / d), "output_mode": "count"})]
        ]
        replies += [[("Read", {"file_path": str(p / d / f"part_{n}.py")})] for n in range(5)]
        replies.append([("Bash", {"command": f"ls {d} | wc -l"})])
        prompt = (
            f"Now the {d} package."
            if k
            else "Explain how the order pipeline is organised, package by package. Only report findings; "
            "do not change any file except NOTES.md."
        )
        turns.append(
            Turn(prompt, replies, todo=[] if k else ["Map the packages", "Read each part", "Write NOTES.md"])
        )
    turns.append(
        Turn(
            "Anything unused?",
            [[("Glob", {"pattern": "**/*.py"})], [("Bash", {"command": "grep -rn 'no_such_symbol' ."})]],
        )
    )
    turns.append(
        Turn(
            "Write what you found to NOTES.md.",
            [
                [("Write", {"file_path": str(p / "NOTES.md"), "content": "# Findings\n\nFour packages.\n"})],
                [("Bash", {"command": "wc -l NOTES.md"})],
            ],
        )
    )
    return turns


SCENARIOS = [
    Scenario(
        "refactor",
        _setup_refactor,
        _turns_refactor,
        ["Never touch tests/legacy/: those files are frozen.", "Keep every line under 100 characters."],
    ),
    Scenario(
        "debugging",
        _setup_debug,
        _turns_debug,
        [
            "Do not modify test_calc.py: the tests are the spec.",
            "Run the tests with python3 -m unittest, never with pytest.",
        ],
    ),
    Scenario(
        "exploration",
        _setup_explore,
        _turns_explore,
        ["Only report findings; do not change any file except NOTES.md."],
    ),
]


# --- the fake's models -----------------------------------------------------------------------------------


def is_summary_request(body: dict) -> bool:
    return body.get("tool_choice", {}).get("type") == "none" and not is_collapse_request(body)


def is_notes_update(body: dict) -> bool:
    return "summary.md" in last_user_text(body) and "session notes" in last_user_text(body)


SPAN_MARK = "One part of the conversation above is being taken out"


def is_collapse_request(body: dict) -> bool:
    system = body.get("system") or []
    return (bool(system) and system[0].get("text") == collapse_worker.SYSTEM) or SPAN_MARK in last_user_text(
        body
    )


def kind_of(body: dict) -> str:
    if "compaction" in body:
        return "server-summary"
    if is_summary_request(body):
        return "summary"
    if is_notes_update(body):
        return "notes"
    if is_collapse_request(body):
        return "collapse"
    return "main"


class BillingAPI(FakeAPI):
    """The fake, keeping the kind and the usage of every message it answered (what the bill is made of)."""

    def __init__(self, **kw: Any) -> None:
        # a maker that names no profile runs claude-sonnet-4-5 (cost.py's and stall.py's rows compared
        # with last round): the 4.x rules, whatever the fake's own default (the 5.5 family's since the
        # flip, which refused that model's requests); the 5.5 rows name "2026"
        kw.setdefault("profile", "4.x")
        super().__init__(**kw)
        self.billed: list[tuple[str, dict[str, int], int]] = []  # (kind, usage, request tokens)

    def _message(self, reply: Reply, body: dict) -> dict:
        message = super()._message(reply, body)
        usage = dict(message["usage"])
        if "compaction" in body:
            # the server's summary: billed as its response's usage says (its ``iterations`` entry: what
            # the compaction step read uncached, wrote to and read from the prompt cache, and wrote out)
            keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
            steps = usage.get("iterations") or []
            usage = {k: sum(int(i.get(k) or 0) for i in steps) for k in keys}
        self.billed.append((kind_of(body), usage, estimate_tokens(body)))
        return message


class Script:
    """The main model: the current turn's replies in order, then a closing line."""

    def __init__(
        self,
        on_main: Callable[[dict], None],
        ptl_at: int | None = None,
        use_todo: Callable[[dict], bool] | None = None,
    ) -> None:
        self.replies: list[list[Call]] = []
        self.todo: list[str] = []
        self.on_main, self.ptl_at = on_main, ptl_at
        self.n = 0
        self.lock = threading.Lock()

    def start(self, turn: Turn) -> None:
        self.replies, self.todo = list(turn.replies), list(turn.todo)

    def __call__(self, body: dict) -> Reply | PromptTooLong:
        with self.lock:
            tokens = estimate_tokens(body)
            if self.ptl_at is not None and tokens > self.ptl_at:
                return PromptTooLong(WINDOW + tokens - self.ptl_at, WINDOW)
            self.on_main(body)
            has_todo = any(t.get("name") == "TodoWrite" for t in body.get("tools") or [])
            if self.todo and has_todo:
                todos = [
                    {
                        "content": c,
                        "status": "in_progress" if i == 0 else "pending",
                        "activeForm": f"Working on: {c[0].lower()}{c[1:]}",
                    }
                    for i, c in enumerate(self.todo)
                ]
                self.todo = []
                return self._calls([("TodoWrite", {"todos": todos})])
            if self.replies:
                return self._calls(self.replies.pop(0))
            return Reply.text("Done with this step.")

    def _calls(self, calls: list[Call]) -> Reply:
        uses = []
        for name, args in calls:
            self.n += 1
            uses.append({"type": "tool_use", "id": f"toolu_s{self.n:04d}", "name": name, "input": args})
        return Reply(uses)


def answer_side_requests(api: FakeAPI) -> None:
    """Poor summaries, notes and span summaries, at a realistic output length."""
    api.on(is_summary_request, lambda body: Reply.text(SUMMARY_REPLY))
    api.on(is_notes_update, poor_notes)
    api.on(is_collapse_request, lambda body: Reply.text(SPAN_REPLY))


def poor_notes(body: dict) -> Reply:
    found = NOTES_PATH.search(last_user_text(body))
    path = found.group(1) if found else "summary.md"
    return Reply(
        [
            {
                "type": "tool_use",
                "id": f"toolu_notes_{id(body)}",
                "name": "Edit",
                "input": {
                    "file_path": path,
                    "old_string": NOTES_GUIDE,
                    "new_string": f"{NOTES_GUIDE}\n{NOTES_LINE}",
                },
            }
        ]
    )


# --- facts the session recorded ----------------------------------------------------------------------------


@dataclass
class Facts:
    modified: list[str]  # paths written or edited (successfully), first-seen order
    failing: list[tuple[str, int]]  # (command, exit code): failed, and not run successfully since
    recent: list[str]  # the last 10 commands
    constraints: list[str]  # given so far
    todo: list[str] | None  # contents of the last TodoWrite list (None: no TodoWrite tool)


def facts(messages: list[Message], scenario: Scenario, todo_tool: bool) -> Facts:
    uses: dict[str, dict] = {}
    results: dict[str, dict] = {}
    prompts: list[str] = []
    for m in messages:
        for b in m.tool_uses:
            uses[b["id"]] = b
        for b in m.tool_results:
            results[b["tool_use_id"]] = b
        if m.is_typed_prompt:
            prompts.append(m.text)
    modified: list[str] = []
    runs: list[tuple[str, int]] = []
    todo: list[str] | None = [] if todo_tool else None
    for uid, use in uses.items():
        res = results.get(uid)
        if res is None:
            continue
        name, args = use["name"], use.get("input") or {}
        if name in ("Edit", "Write") and not res.get("is_error") and args["file_path"] not in modified:
            modified.append(args["file_path"])
        elif name == "Bash":
            text = _result_text(res)
            code = re.search(r"Exit code (\d+)\s*$", text)
            runs.append((args["command"], int(code.group(1)) if res.get("is_error") and code else 0))
        elif name == "TodoWrite" and not res.get("is_error"):
            todo = [t["content"] for t in args.get("todos") or []]
    failing: list[tuple[str, int]] = []
    for i, (command, code) in enumerate(runs):
        if code and not any(c == command and k == 0 for c, k in runs[i + 1 :]):
            failing.append((command, code))
    given = [c for c in scenario.constraints if any(c in p for p in prompts)]
    return Facts(modified, failing, [c for c, _ in runs[-10:]], given, todo)


def _result_text(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


# --- one run -----------------------------------------------------------------------------------------------


@dataclass
class Checkpoint:
    facts: Facts
    body: dict  # the main request that followed the compaction
    lists: str = ""  # the complete lists the request names (the ledger over its budget), read then


FULL_LIST = re.compile(r"(/[^\s\"]+/working-state/[\w-]+\.md)")


def named_lists(body: dict) -> str:
    """The text of the complete-list files a request names (they live in the session's temp dir)."""
    return "".join(Path(p).read_text() for p in FULL_LIST.findall(dump(body)) if Path(p).is_file())


@dataclass
class Run:
    scenario: str
    mode: str
    billed: list[tuple[str, dict[str, int], int]]
    checkpoints: list[Checkpoint]
    compactions: int
    peak: int  # the largest main request, in the fake's tokens
    errors: list[str]
    methods: list[str] = field(default_factory=list)  # of each compaction: summary, session-memory, collapse
    # preserved thinking and cache health (each also among ``errors``): requests the prefix check refused,
    # drop_block fallbacks taken, prompt-cache misses the server reported between compaction points
    refused: int = 0
    fallbacks: int = 0
    misses: list[dict[str, Any]] = field(default_factory=list)
    thinking: thinking.Tally = field(default_factory=thinking.Tally)  # refused, fallbacks, thinking dropped


def split(turns: list[Turn], size: int = 2) -> list[Turn]:
    out = []
    for turn in turns:
        for k in range(0, max(1, len(turn.replies)), size):
            out.append(
                Turn(
                    turn.prompt if k == 0 else "Continue.",
                    turn.replies[k : k + size],
                    turn.todo if k == 0 else [],
                )
            )
    return out


def methods(events: list[Any]) -> list[str]:
    return [
        e.method if isinstance(e, CompactFinished) else "collapse"
        for e in events
        if isinstance(e, CompactFinished) or (isinstance(e, Notice) and e.text.startswith("Collapsed "))
    ]


def compaction_count(events: list[Any]) -> int:
    collapses = sum(1 for e in events if isinstance(e, Notice) and e.text.startswith("Collapsed "))
    return collapses + sum(1 for e in events if isinstance(e, CompactFinished))


def run(
    scenario: Scenario,
    mode: str,
    settings: dict[str, Any] | None = None,
    *,
    window: int = WINDOW,
    manual_at: int | None = None,
    ptl_at: int | None = None,
    api_kw: dict[str, Any] | None = None,
    short_turns: bool = False,
    model: str | None = None,
    profile: str | None = None,
) -> Run:
    """Play ``scenario`` under ``mode`` (a MODES key) plus ``settings``; see the module docstring.

    ``short_turns``: each turn is cut into turns of two replies (the rest prompted by "Continue."), so
    context collapse, which only takes whole old turns, has turns to take.

    ``profile``: the model family the fake plays (benchmarks/thinking.py); the agent runs on that
    family's model unless ``model`` names one. Neither given: the fake's default profile, on MODEL."""
    if profile is not None:
        api_kw = {**thinking.fake(profile), **(api_kw or {})}
        model = model or thinking.model(profile)
    model = model or MODEL
    options = {**MODES.get(mode, {}), **(settings or {})}
    if mode == "reactive" and ptl_at is None:
        ptl_at = PTL_AT
    if mode == "/compact" and manual_at is None:
        manual_at = MANUAL_AT
    with tempfile.TemporaryDirectory() as tmp_name, BillingAPI(**(api_kw or {})) as api:
        tmp = Path(tmp_name)
        project = tmp / "project"
        project.mkdir()
        scenario.setup(project)
        events: list[Any] = []
        checkpoints: list[Checkpoint] = []
        seen = [0]
        holder: dict[str, Any] = {}

        def on_main(body: dict) -> None:
            n = compaction_count(events)
            if n > seen[0]:
                seen[0] = n
                todo_tool = any(t.get("name") == "TodoWrite" for t in body.get("tools") or [])
                recorded = [e.message for e in list(events) if isinstance(e, MessageRecorded)]
                checkpoints.append(Checkpoint(facts(recorded, scenario, todo_tool), body, named_lists(body)))

        script = Script(on_main, ptl_at)
        answer_side_requests(api)
        api.on(lambda body: True, script)
        session, session_events = make_session(
            tmp,
            api,
            permission_mode="bypassPermissions",
            model=model,
            model_explicit=True,
            context_window=window,
            **options,
        )
        session.emit = events.append
        holder["session"] = session
        errors: list[str] = []
        for turn in split(scenario.turns(project)) if short_turns else scenario.turns(project):
            script.start(turn)
            finished = run_turn(session, turn.prompt)
            if finished.stop_reason != "end_turn":
                errors.append(f"{finished.stop_reason}: {finished.error}")
            notes_updater.wait_for_update(session.conv, 30)
            if manual_at is not None and session.conv.view().tokens >= manual_at:
                commands.run(session, "/compact")
        notes_updater.wait_for_update(session.conv, 30)
        if (collapser := collapse_worker.collapser(session.conv)) is not None:
            collapser.join(30)
        errors += api.violations  # a request the prefix check refused is one
        misses = cache_health.unexpected(session.conv)
        errors += [f"drop_block fallback: {dropped}" for dropped in api.binding.fallbacks]
        errors += [
            f"cache miss between compaction points: {m['reason']} (~{m['missedTokens']} tokens)"
            for m in misses
        ]
        mains = [tokens for kind, _, tokens in api.billed if kind == "main"]
        tally = thinking.Tally(api.profile.name)
        tally.session(api, tmp / "home", session.conv)
        return Run(
            scenario.name,
            mode,
            list(api.billed),
            checkpoints,
            compaction_count(events),
            max(mains, default=0),
            errors,
            methods(events),
            len(api.binding.refused),
            len(api.binding.fallbacks),
            misses,
            tally,
        )


def dump(body: dict) -> str:
    return json.dumps(body)
