"""Tricky conversation histories, shared by the stage tests and the invariant tests (STYLE habit 3).

``histories()`` is a hypothesis strategy for valid message lists: typed prompts, assistant text,
thinking blocks, parallel tool calls and their results (empty, error, image, list-of-blocks, huge),
injected meta messages, a leading compaction summary, old and recent timestamps. ``HAND_WRITTEN``
holds a few named histories built by hand. ``stage_cases()`` derives the stages under test from the one
registry, compact.stages.view.STAGES, each wrapped as ``messages -> messages`` on a fresh state and
directory: a new stage joins the invariant tests by its registration alone (a ``DRIVERS`` entry under
its name when it needs decisions made from outside the view to act).
"""

from __future__ import annotations

import os
import random
import uuid as _uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

from hypothesis import strategies as st

import tools.registry  # noqa: F401  (the built-in tools declare themselves, as in a session: Bash's and Read's results are clearable)
from compact.stages import view
from compact.stages.collapse import apply_collapses, candidate_spans, placeholder
from compact.stages.snip import apply_snips, plan_snip, snip_id, tag_prompts, turns
from compact.stages.state import ContextState
from compact.stages.view import WHOLE, Stage, ViewContext, build_view
from core.messages import Message

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
TOOLS = ["Bash", "Read", "Grep", "Glob", "Edit", "Write", "WebFetch", "TodoWrite", "mcp__docs__search"]
# most results are small; a few are big enough for the budget, one in a while is huge
SIZES = [0, 12, 80, 400, 2_500] * 4 + [21_000, 31_000, 55_000]
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
OUTPUT = "".join(f"{i:06d}  src/module_{i % 97}.py: result line with some words\n" for i in range(4_000))

# how many examples each property runs: HYPOTHESIS_PROFILE=quick|ci|thorough (default ci). With the
# eight generated-history properties of test_invariants.py, "ci" checks 3,200 histories (~45 s on 2 cores).
EXAMPLES = {"quick": 25, "ci": 400, "thorough": 3_000}.get(os.environ.get("HYPOTHESIS_PROFILE", "ci"), 400)


def ts(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def output(size: int) -> str:
    """Deterministic tool output of exactly ``size`` characters, newline-rich like real output."""
    reps = size // len(OUTPUT) + 1
    return (OUTPUT * reps)[:size]


def image_block() -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}


class Builder:
    """Makes messages with reproducible uuids, unique tool ids and a moving clock."""

    def __init__(self, seed: int = 0, start: datetime = NOW - timedelta(hours=3)):
        self.rnd = random.Random(seed)
        self.t = start
        self.tool_n = 0

    def _common(self, minutes: float = 1.0) -> dict:
        self.t += timedelta(minutes=minutes)
        return {"uuid": str(_uuid.UUID(int=self.rnd.getrandbits(128), version=4)), "timestamp": ts(self.t)}

    def prompt(self, text: str, *extra_blocks: dict) -> Message:
        return Message(
            "user", [{"type": "text", "text": text}, *extra_blocks], kind="prompt", **self._common()
        )

    def meta(self, text: str) -> Message:
        return Message("user", [{"type": "text", "text": text}], kind="meta", **self._common(0))

    def summary(self, text: str) -> Message:
        return Message("user", [{"type": "text", "text": text}], kind="summary", **self._common(0))

    def tool_id(self) -> str:
        self.tool_n += 1
        return f"toolu_{self.tool_n:04d}_{self.rnd.getrandbits(32):08x}"

    def assistant(self, blocks: list[dict], usage: dict | None = None, minutes: float = 1.0) -> Message:
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        return Message(
            "assistant",
            blocks,
            kind="response",
            message_id=f"msg_{self.rnd.getrandbits(40):x}",
            model="claude-test",
            stop_reason=stop,
            usage=usage,
            **self._common(minutes),
        )

    def calls(self, *names: str, text: str = "") -> tuple[Message, list[str]]:
        ids = [self.tool_id() for _ in names]
        blocks = ([{"type": "text", "text": text}] if text else []) + [
            {"type": "tool_use", "id": i, "name": n, "input": {"arg": n.lower()}}
            for i, n in zip(ids, names, strict=True)
        ]
        return self.assistant(blocks), ids

    def results(self, pairs: list[tuple[str, str | list[dict]]], errors: set[str] = frozenset()) -> Message:
        blocks = []
        for tid, content in pairs:
            b = {"type": "tool_result", "tool_use_id": tid, "content": content}
            if tid in errors:
                b["is_error"] = True
            blocks.append(b)
        return Message("user", blocks, kind="tool_results", **self._common(0.2))

    def round(self, tool: str, content: str | list[dict], n: int = 1) -> list[Message]:
        call, ids = self.calls(*[tool] * n)
        return [call, self.results([(i, content) for i in ids])]


# --- the strategy ---------------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
# strategies built once: building one per draw costs hypothesis a validation each time, and the
# invariant tests draw thousands of histories
_AGE = st.sampled_from([timedelta(days=2), timedelta(hours=3), timedelta(minutes=40), timedelta(minutes=2)])
_SEED = st.integers(0, 2**32)
_BOOL = st.booleans()
_TURNS = {n: st.integers(1, n) for n in range(1, 9)}
_ONE_IN = {n: st.integers(0, n - 1) for n in (4, 5, 6, 10)}
_ROUNDS = st.integers(0, 3)
_NAMES = st.lists(st.sampled_from(TOOLS), min_size=1, max_size=4)
_USAGE_INPUT = st.integers(1, 50_000)
_MINUTES = st.sampled_from([0.5, 5, 90])
# a tool's input matters to no stage beyond its size, so a cheap pick instead of free text
_TOOL_INPUT = st.sampled_from(["", "src/app.py", "grep -rn TODO .", "**/*.ts", "naïve 🐍 input"])
_KIND = st.sampled_from(["text"] * 6 + ["empty", "error", "blocks", "image"])
_EMPTY = st.sampled_from(["", []])
_SIZE = st.sampled_from(SIZES)


def _result(draw: st.DrawFn) -> tuple[str | list[dict], bool]:
    kind = draw(_KIND)
    if kind == "empty":
        return draw(_EMPTY), False
    if kind == "error":
        return "Error: " + draw(_text), True
    if kind == "image":
        return [{"type": "text", "text": "an image"}, image_block()], False
    size = draw(_SIZE)
    if kind == "blocks":
        return [
            {"type": "text", "text": output(size // 2)},
            {"type": "text", "text": output(size - size // 2)},
        ], False
    return output(size), False


@st.composite
def histories(draw: st.DrawFn, max_turns: int = 5) -> list[Message]:
    """A valid conversation as the query loop would hold it (after the last compaction boundary)."""
    age = draw(_AGE)
    b = Builder(draw(_SEED), NOW - age)
    out: list[Message] = []
    if draw(_BOOL):
        out.append(b.summary("This session continues an earlier conversation. Summary: " + draw(_text)))
        if draw(_BOOL):  # a kept segment that starts mid-turn
            out.append(b.assistant([{"type": "text", "text": "Kept reply " + draw(_text)}]))
    n_turns = draw(_TURNS[max_turns] if max_turns in _TURNS else st.integers(1, max_turns))
    for t in range(n_turns):
        if draw(_ONE_IN[5]) == 0:
            out.append(b.meta("<system-reminder>" + draw(_text) + "</system-reminder>"))
        text = draw(_text).strip() or "go on"
        out.append(b.prompt(text, image_block()) if draw(_ONE_IN[10]) == 0 else b.prompt(text))
        last_turn = t == n_turns - 1
        for _ in range(draw(_ROUNDS)):
            names = draw(_NAMES)
            blocks: list[dict] = []
            if draw(_ONE_IN[4]) == 0:
                blocks.append({"type": "thinking", "thinking": draw(_text) or "hmm", "signature": "sig"})
            if draw(_BOOL):
                blocks.append({"type": "text", "text": draw(_text) or "Let me look."})
            ids = [b.tool_id() for _ in names]
            blocks += [
                {"type": "tool_use", "id": i, "name": n, "input": {"q": draw(_TOOL_INPUT)}}
                for i, n in zip(ids, names, strict=True)
            ]
            usage = {"input_tokens": draw(_USAGE_INPUT), "output_tokens": 50} if draw(_BOOL) else None
            out.append(b.assistant(blocks, usage, minutes=draw(_MINUTES)))
            pairs, errors = [], set()
            for i in ids:
                content, is_error = _result(draw)
                pairs.append((i, content))
                if is_error:
                    errors.add(i)
            out.append(b.results(pairs, errors))
            if draw(_ONE_IN[6]) == 0:
                out.append(b.meta("<system-reminder>File changed on disk.</system-reminder>"))
        if not (last_turn and draw(_BOOL)):  # the last turn may stop mid tool loop
            out.append(b.assistant([{"type": "text", "text": draw(_text) or "Done."}]))
    return out


# --- hand-written histories -----------------------------------------------------------------------


def seq_history() -> list[Message]:
    """One Bash call printing `seq 1 100000`."""
    b = Builder(1)
    return [
        b.prompt("count to a lot"),
        *b.round("Bash", "".join(f"{i}\n" for i in range(1, 100_001))),
        b.assistant([{"type": "text", "text": "Done."}]),
    ]


def parallel_history(n: int = 8, size: int = 28_000) -> list[Message]:
    """``n`` parallel Bash calls of ``size`` characters each, in one round."""
    b = Builder(2)
    return [b.prompt("run them all"), *b.round("Bash", output(size), n)]


def old_bash_history(calls: int = 8, gap: timedelta = timedelta(hours=2)) -> list[Message]:
    """``calls`` sequential Bash calls, the last response ``gap`` before NOW."""
    b = Builder(3, NOW - gap - timedelta(minutes=2 + 1.2 * calls))  # so the last response is at NOW - gap
    out = [b.prompt("investigate")]
    for i in range(calls):
        out += b.round("Bash", output(500 + i))
    out.append(b.assistant([{"type": "text", "text": "Found it."}]))
    return out


def mixed_history() -> list[Message]:
    """Summary, image results, an error, a Read of 60K, a huge Grep, several turns."""
    b = Builder(4, NOW - timedelta(hours=5))
    out = [b.summary("Earlier: we set up the project."), b.prompt("look at the screenshot")]
    call, ids = b.calls("Read", "Grep", "Bash")
    out += [
        call,
        b.results(
            [
                (ids[0], [{"type": "text", "text": "screenshot.png"}, image_block()]),
                (ids[1], output(25_000)),
                (ids[2], "command not found"),
            ],
            errors={ids[2]},
        ),
    ]
    out.append(b.assistant([{"type": "text", "text": "I see it."}]))
    out.append(b.prompt("now read the big file"))
    out += b.round("Read", output(60_000))
    out.append(b.assistant([{"type": "text", "text": "Read it."}]))
    out.append(b.prompt("and run the tests"))
    out += b.round("Bash", "")
    out.append(b.assistant([{"type": "text", "text": "All quiet."}]))
    return out


HAND_WRITTEN: dict[str, Callable[[], list[Message]]] = {
    "seq": seq_history,
    "parallel": parallel_history,
    "old_bash": old_bash_history,
    "mixed": mixed_history,
}


# --- the stages under test: compact.stages.view.STAGES, the one registry ------------------------------

StageFn = Callable[[list[Message]], list[Message]]


@dataclass(frozen=True)
class StageCase:
    """One stage under test. ``make(tmp_dir)`` returns the stage bound to a fresh state; calling the
    returned function twice carries that state over (for idempotence). ``grows``: the stage may add a
    few tokens (the [id:…] tags), so the size invariant doesn't apply."""

    name: str
    make: Callable[[Path], StageFn]
    grows: bool = False


def registered(stage: Stage) -> StageCase:
    """A registered stage as the view runs it over the whole list, on a fresh state and directory."""

    def make(tmp: Path) -> StageFn:
        ctx = ViewContext(ContextState(), tmp / "tool-results", now=lambda: NOW, keep_recent=2)
        return lambda ms: stage.run(ms, ctx, WHOLE)

    return StageCase(f"registered:{stage.name}", make)


def _snip(tmp: Path) -> StageFn:
    """The model snips every other turn but the current one (what the Snip tool records)."""
    state = ContextState()

    def run(ms: list[Message]) -> list[Message]:
        if not state.snipped:
            old = turns(ms)[:-1:2]
            if old:
                state.snipped.update(plan_snip(ms, [snip_id(t[0].uuid) for t in old], None).removed_uuids)
        return apply_snips(ms, state)

    return run


def _collapse(tmp: Path) -> StageFn:
    """Commit every old span the selection offers (keeping only the last turn), each with a short summary."""
    collapses: list[dict] = []

    def run(ms: list[Message]) -> list[Message]:
        if not collapses:
            for n, span in enumerate(candidate_spans(ms, keep_turns=1)):
                c = {
                    "collapsedUuids": [m.uuid for m in span],
                    "summary": f"Span {n}: files read, tests run.",
                    "placeholderUuid": str(_uuid.UUID(int=n + 1, version=4)),
                }
                if placeholder(c).tokens < sum(m.tokens for m in span):  # as the stage: commit only a saving
                    collapses.append(c)
        return apply_collapses(ms, collapses)

    return run


# A registered stage whose decisions come from outside the view (the model's Snip calls, the collapse
# worker's summaries) decides nothing on a fresh state: its driver, under the stage's name, makes those
# decisions so the invariants see it act too. The others (budget, microcompact) decide as the view runs them.
DRIVERS: dict[str, Callable[[Path], StageFn]] = {"snip": _snip, "collapse": _collapse}


def _tags(tmp: Path) -> StageFn:
    return lambda ms: tag_prompts(ms)


def _view(tmp: Path) -> StageFn:
    ctx = ViewContext(ContextState(), tmp / "tool-results", now=lambda: NOW, keep_recent=2)
    return lambda ms: build_view(ms, ctx).messages


# the view's own steps around the stages: the [id:…] tags of the API copy, and the view as a whole
AROUND = [StageCase("tag_prompts", _tags, grows=True), StageCase("view", _view)]


def stage_cases() -> list[StageCase]:
    """Every stage of compact.stages.view.STAGES as the view runs it (read when called: a stage registered
    there is here with no line of its own), each one a driver drives also driven, then the view's steps."""
    cases = []
    for stage in view.STAGES:
        cases.append(registered(stage))
        if stage.name in DRIVERS:
            cases.append(StageCase(f"driven:{stage.name}", DRIVERS[stage.name]))
    return cases + AROUND
