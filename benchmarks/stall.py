"""How long the user waits at an automatic compaction (issue 23, docs/compaction.md), and what preparing costs.

Sessions, through the real agent (``agent.runtime.loop.run_turn``) and the loopback fake API at a real model's
pace: the fake's responders take their time before answering (the delay scripting of agent/demo's
story), a main reply 2 s, a notes update 8 s, a summary 20 s — "real" — and the same model ten times
faster — "fast":
  tool chain     one turn of 44 reads of ~5,500-token files at a 100K window (T = 67,000)
  text turns     60 short turns, each a pasted log excerpt of ~2,500 tokens and a short answer, 100K
  1M window      one turn of reads, four ~11,000-token files a reply, at a 1M window (T = 967,000)
each with session notes on and off, each with compactions prepared in the background ("prepared", the
default now) and without ("today": the foreground compaction at T, as before issue 23).

To keep the wall time reasonable every delay is divided by SCALE (10): the model's time is simulated
ten times faster and reported back in model seconds. A stall is the gap between the main requests
around a compaction minus the usual gap (the median gap between main requests away from compactions);
the part of it spent blocked on a model request (waiting for a candidate, or a foreground compaction's
own request) is multiplied back by SCALE, the rest (local work: writing the boundary, the ledger,
restoring files) is counted as it is — so the figures are in the model's seconds and never flatter.

Columns: compactions; p50 / p95 / max stall (model seconds); applied: the share of automatic
compactions applied from a prepared candidate; rejected / wasted candidates; billed token equivalents
(input x1, cache write x1.25, cache read x0.1, output x5) against "today" on the same session.

Run: .venv/bin/python benchmarks/stall.py [--quick] [--thinking] [--wasted] (--quick: the tool chain only; --thinking:
the 5.5 family's fake with the prefix check enforced, every reply thinking, the server's summary offered —
it prints refused requests, drop_block fallbacks, thinking dropped between / at compaction points and kept
across them). About four minutes. Every run prints the wasted compaction requests (prepared, never
applied) over all prepared ones. --wasted: only the tool chain, on the thinking model, at windows of 43K,
100K, 200K and 1M with two step sizes each (WASTE_GRID), printing each one's wasted compaction requests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scripted  # noqa: E402

from agent.runtime.loop import run_turn  # noqa: E402
from compact import preparer  # noqa: E402
from compact.compaction.candidate import SUMMARY_SECTIONS  # noqa: E402
from core.events import CompactFinished  # noqa: E402
from tests.fakeapi import Reply, model_info  # noqa: E402
from tests.helpers.session import make_session  # noqa: E402

SCALE = 10.0  # every delay is divided by this; stalls are reported in the model's seconds
PACES = {
    "real": {"main": 2.0, "notes": 8.0, "summary": 20.0},
    "fast": {"main": 0.2, "notes": 0.8, "summary": 2.0},
}
PRICE = {
    "input_tokens": 1.0,
    "cache_creation_input_tokens": 1.25,
    "cache_read_input_tokens": 0.1,
    "output_tokens": 5.0,
}
# the summary the fake writes: every section present and poor, the user's words quoted in theirs (the
# candidate check refuses a summary that gives as the user's words what the user never wrote)
SUMMARY_REPLY = "<analysis>{filler}</analysis>\n<summary>{body}</summary>"


def summary_reply(said: str) -> str:
    """The fake's summary of a session whose prompts begin with ``said``."""
    body = "\n".join(
        f'{i}. {name}:\n- "{said}"'
        if name == "All user messages"
        else f"{i}. {name}:\n{scripted.POOR} {scripted.FILLER * 4}"
        for i, name in enumerate(SUMMARY_SECTIONS, 1)
    )
    return SUMMARY_REPLY.format(filler=scripted.FILLER * 60, body=body)


WORDS = "alpha beta gamma delta parser token stream buffer index value".split()


@dataclass
class Session:
    name: str
    window: int
    setup: Callable[[Path], list[Any]]  # -> the turns: (prompt, [each reply's calls])
    model: str = scripted.MODEL


def _files(project: Path, count: int, lines: int, tag: str = "m") -> list[Path]:
    out = []
    (project / "src").mkdir(exist_ok=True)
    for n in range(count):
        body = [
            f"def f{n}_{i}(x): return {' '.join(WORDS[(i * 7 + j + n) % 10] for j in range(9))!r}"
            for i in range(lines)
        ]
        path = project / "src" / f"{tag}_{n:03d}.py"
        path.write_text("\n".join(body) + "\n")
        out.append(path)
    return out


def _tool_chain(project: Path) -> list[Any]:
    paths = _files(project, 44, 250)
    return [("Read every module in src/, one at a time.", [[("Read", {"file_path": str(p)})] for p in paths])]


LOG_LINE = "2025-06-01T12:{m:02d}:{s:02d} worker-{w} processed batch {b} in {ms} ms (queue depth {q})\n"


def _text_turns(project: Path) -> list[Any]:
    turns = []
    for t in range(60):
        log = "".join(
            LOG_LINE.format(m=t % 60, s=i % 60, w=i % 5, b=t * 100 + i, ms=(i * 37) % 97, q=i % 13)
            for i in range(90)
        )
        turns.append((f"What stands out in this part of the log?\n{log}", []))
    return turns


def _one_million(project: Path) -> list[Any]:
    paths = _files(project, 120, 480, tag="big")
    replies = [[("Read", {"file_path": str(p)}) for p in paths[k : k + 4]] for k in range(0, len(paths), 4)]
    return [("Read all of src/, four files at a time.", replies)]


SESSIONS = [
    Session("tool chain", 100_000, _tool_chain),
    Session("text turns", 100_000, _text_turns),
    Session("1M window", 1_000_000, _one_million),
]

# --wasted: the tool chain at each window with two step sizes (tokens one reply adds: one file read of
# about that size), long enough to pass T about three times (what it takes for a steady cycle)
WASTE_GRID = [
    (43_000, (1_100, 2_200)),
    (100_000, (2_750, 5_500)),
    (200_000, (5_500, 11_000)),
    (1_000_000, (22_000, 44_000)),
]
TOKENS_PER_LINE = 22  # of the generated modules (_files): 250 lines are about 5,500 tokens
WASTE_PASSES = 3.0  # the chain's files add up to this many times T
MIN_STEPS = 30  # and at least this many replies (a 43K window's T is 10,000)
FILE_TOKENS = 11_000


def chain_of(window: int, step: int) -> Session:
    """The tool chain at ``window``, each reply reading files of about ``step`` tokens in all (files of
    at most FILE_TOKENS: a larger result would go to disk with a preview, compact.stages.budget)."""
    threshold = window - 20_000 - 13_000
    steps = max(MIN_STEPS, round(WASTE_PASSES * threshold / step))
    per_reply = max(1, step // FILE_TOKENS)
    lines = max(10, step // per_reply // TOKENS_PER_LINE)

    def setup(project: Path) -> list[Any]:
        paths = _files(project, steps * per_reply, lines, tag=f"w{step}")
        replies = [
            [("Read", {"file_path": str(p)}) for p in paths[k : k + per_reply]]
            for k in range(0, len(paths), per_reply)
        ]
        return [("Read every module in src/, a few at a time.", replies)]

    return Session(f"{window // 1000}K/{step / 1000:g}K", window, setup)


@dataclass
class Result:
    compactions: int = 0
    stalls: list[float] = field(default_factory=list)
    applied: int = 0
    rejected: int = 0
    wasted: int = 0
    prepared: int = 0
    billed: float = 0.0
    errors: list[str] = field(default_factory=list)
    # --thinking: what became of the model's thinking, and the prefix check's refusals and fallbacks
    refused: int = 0
    fallbacks: int = 0
    dropped_between: int = 0
    dropped_at: int = 0
    kept_at: int = 0


def _delayed(seconds: float, answer: Callable[[dict], Any]) -> Callable[[dict], Any]:
    def respond(body: dict) -> Any:
        threading.Event().wait(seconds / SCALE)  # the model takes its time
        return answer(body)

    return respond


class Main:
    """The main model: the turn's replies in order, then a short answer; the time each request arrived."""

    def __init__(self) -> None:
        self.replies: list[list[Any]] = []
        self.arrivals: list[float] = []
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        with self.lock:
            self.arrivals.append(time.monotonic())
            if self.replies:
                calls = self.replies.pop(0)
                uses = []
                for name, args in calls:
                    self.n += 1
                    uses.append(
                        {"type": "tool_use", "id": f"toolu_b{self.n:05d}", "name": name, "input": args}
                    )
                return Reply(uses)
            return Reply.text("Noted: nothing unusual beyond the queue depth pattern. " + scripted.FILLER * 3)


THINKING_MODEL = "claude-sonnet-5-5"  # --thinking: every reply thinks, bound to its prefix


def run(session: Session, notes: bool, pace: str, prepare: bool, thinking: bool = False) -> Result:
    delays = PACES[pace]
    model = THINKING_MODEL if thinking else session.model
    models = [model_info(model, max_input_tokens=session.window)]  # the Models API says the window
    # without --thinking: last round's rules on a 4.x model (the fake's default plays the 5.5 family now)
    fake = {"profile": "2026", "binding": "error"} if thinking else {"profile": "4.x"}
    with tempfile.TemporaryDirectory() as tmp_name, scripted.BillingAPI(models=models, **fake) as api:
        api.compactions.delay = delays["summary"] / SCALE  # the server's summary takes a summary's time
        tmp = Path(tmp_name)
        project = tmp / "project"
        project.mkdir()
        turns = session.setup(project)
        main = Main()
        text = summary_reply(turns[0][0].splitlines()[0])
        api.on(scripted.is_summary_request, _delayed(delays["summary"], lambda body: Reply.text(text)))
        api.on(scripted.is_notes_update, _delayed(delays["notes"], scripted.poor_notes))
        api.on(lambda body: True, _delayed(delays["main"], main))
        agent, events = make_session(
            tmp,
            api,
            permission_mode="bypassPermissions",
            model=model,
            model_explicit=True,
            context_window=session.window,
            session_memory=notes,
            prepare_compaction=prepare,
            retry_seconds=120.0,
        )
        marks: list[tuple[int, float]] = []  # (main requests sent before it, seconds blocked on a model)
        agent.emit = _recorder(events, main, marks)
        out = Result()
        for prompt, replies in turns:
            main.replies = list(replies)
            finished = run_turn(agent, prompt)
            if finished.stop_reason != "end_turn":
                out.errors.append(f"{finished.stop_reason}: {finished.error}")
        out.errors += api.violations
        stats = preparer.stats(agent.conv)
        out.compactions = len(marks)
        out.applied, out.rejected, out.wasted = stats["applied"], stats["rejected"], stats["wasted"]
        out.prepared = stats["prepared"]
        out.refused, out.fallbacks = len(api.binding.refused), len(api.binding.fallbacks)
        counts = agent.conv.view_ctx.thinking
        out.dropped_between, out.dropped_at, out.kept_at = (
            counts.dropped_between,
            counts.dropped_at_compaction,
            counts.kept_at_compaction,
        )
        blocked = stats["blocked"] if prepare else [d for _, d in marks]
        out.stalls = _stalls(main.arrivals, [(n, b) for (n, _), b in zip(marks, blocked, strict=False)])
        out.billed = sum(sum(PRICE[k] * u.get(k, 0) for k in PRICE) for _, u, _ in api.billed)
        return out


def _recorder(events: list[Any], main: Main, marks: list[tuple[int, float]]) -> Callable[[Any], None]:
    def emit(event: Any) -> None:
        events.append(event)
        if isinstance(event, CompactFinished) and event.trigger != "manual":
            # blocked on a model: for a prepared one what the preparer reports (compact.workers.preparer
            # Stats.blocked); a foreground one all of its duration (its own request, mostly)
            marks.append((len(main.arrivals), event.duration))

    return emit


def _stalls(arrivals: list[float], marks: list[tuple[int, float]]) -> list[float]:
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    around = {n - 1 for n, _ in marks}  # gap index between the request before and the one after
    usual = statistics.median([g for i, g in enumerate(gaps) if i not in around] or [0.0])
    out = []
    for n, blocked in marks:
        if n - 1 < 0 or n - 1 >= len(gaps):
            continue
        extra = max(0.0, gaps[n - 1] - usual)
        blocked = min(blocked, extra)
        out.append(round((extra - blocked) + blocked * SCALE, 2))
    return out


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the tool chain only")
    parser.add_argument(
        "--thinking",
        action="store_true",
        help=f"{THINKING_MODEL} on the 5.5 family's fake with the prefix check enforced",
    )
    parser.add_argument(
        "--wasted",
        action="store_true",
        help="wasted compaction requests of the tool chain across windows and step sizes (thinking model)",
    )
    args = parser.parse_args()
    if args.wasted:
        wasted_table()
        return
    sessions = SESSIONS[:1] if args.quick else SESSIONS
    print(f"Delays divided by {SCALE:g} (real: main 2 s, notes 8 s, summary 20 s; fast: ten times less);")
    print("stalls in the model's seconds. billed: token equivalents, prepared / today on the same session.\n")
    header = f"{'session':<12} {'pace':<5} {'notes':<5} {'comp':>4} {'p50':>6} {'p95':>6} {'max':>6} "
    header += (
        f"{'applied':>8} {'rej':>4} {'waste':>5} {'billed':>9} {'today':>9} {'ratio':>6} {'today p95':>9}"
    )
    print(header)
    all_stalls: list[float] = []
    applied = compactions = prepared = wasted = refused = fallbacks = between = dropped_at = kept_at = 0
    worst_ratio = 0.0
    started = time.monotonic()
    for session in sessions:
        for pace in PACES:
            for notes in (True, False):
                new = run(session, notes, pace, prepare=True, thinking=args.thinking)
                old = run(session, notes, pace, prepare=False, thinking=args.thinking)
                prepared, wasted = prepared + new.prepared, wasted + new.wasted
                for r in (new, old):
                    refused, fallbacks = refused + r.refused, fallbacks + r.fallbacks
                    between, dropped_at, kept_at = (
                        between + r.dropped_between,
                        dropped_at + r.dropped_at,
                        kept_at + r.kept_at,
                    )
                ratio = new.billed / old.billed if old.billed else 0.0
                worst_ratio = max(worst_ratio, ratio)
                all_stalls += new.stalls
                applied += new.applied
                compactions += new.compactions
                share = f"{new.applied / new.compactions:.0%}" if new.compactions else "-"
                print(
                    f"{session.name:<12} {pace:<5} {'on' if notes else 'off':<5} {new.compactions:>4} "
                    f"{_pct(new.stalls, 0.5):>5.1f}s {_pct(new.stalls, 0.95):>5.1f}s {max(new.stalls, default=0):>5.1f}s "
                    f"{share:>8} {new.rejected:>4} {new.wasted:>5} {new.billed / 1000:>8.0f}k {old.billed / 1000:>8.0f}k "
                    f"{ratio:>5.2f}x {_pct(old.stalls, 0.95):>8.1f}s"
                    + (f"  errors: {new.errors + old.errors}" if new.errors or old.errors else "")
                )
    print(
        f"\nAll automatic compactions: {compactions}; p95 stall {_pct(all_stalls, 0.95):.2f}s, "
        f"max {max(all_stalls, default=0):.2f}s; applied from a prepared candidate {applied}/{compactions}; "
        f"worst billed ratio {worst_ratio:.3f}x today. Wall time {time.monotonic() - started:.0f}s."
    )
    share = f"{wasted / prepared:.0%}" if prepared else "-"
    print(f"Wasted compaction requests (prepared, never applied): {wasted}/{prepared} ({share}).")
    kept_share = f"{kept_at / (kept_at + dropped_at):.0%}" if kept_at + dropped_at else "-"
    print(
        f"Thinking (both policies): refused requests {refused}, drop_block fallbacks {fallbacks}; messages "
        f"whose thinking was dropped between compaction points {between}, at compaction points {dropped_at}; "
        f"kept valid across compactions {kept_at} ({kept_share} of the kept turns that held thinking)."
    )


def wasted_table() -> None:
    """--wasted: prepared candidates never applied, per window and step size, on the thinking model (real
    pace, notes off: the server's summary is every candidate there)."""
    print(f"The tool chain on {THINKING_MODEL} (5.5 family's fake, prefix check enforced), real pace,")
    print("compactions prepared in the background. wasted: prepared and never applied (discarded or")
    print("refused); open: still being prepared when the session ended (neither).\n")
    print(
        f"{'window':>8} {'step':>6} {'steps':>5} {'comp':>4} {'applied':>7} {'prepared':>8} "
        f"{'wasted':>6} {'open':>4} {'share':>6} {'p95':>6} {'refused':>7} {'drop':>4}"
    )
    worst = 0.0
    started = time.monotonic()
    for window, steps in WASTE_GRID:
        for step in steps:
            session = chain_of(window, step)
            r = run(session, notes=False, pace="real", prepare=True, thinking=True)
            lost = r.wasted + r.rejected
            share = lost / r.prepared if r.prepared else 0.0
            worst = max(worst, share)
            reads = max(MIN_STEPS, round(WASTE_PASSES * (window - 33_000) / step))
            print(
                f"{window:>8,} {step:>6,} {reads:>5} {r.compactions:>4} {r.applied:>7} {r.prepared:>8} "
                f"{lost:>6} {r.prepared - r.applied - lost:>4} {share:>6.0%} {_pct(r.stalls, 0.95):>5.1f}s "
                f"{r.refused:>7} {r.fallbacks:>4}" + (f"  errors: {r.errors}" if r.errors else "")
            )
    print(f"\nWorst wasted share {worst:.0%} (goal <= 10%). Wall time {time.monotonic() - started:.0f}s.")


if __name__ == "__main__":
    main_()
