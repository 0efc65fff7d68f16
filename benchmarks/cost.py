"""What a session costs under each context strategy, billed like the API bills a cached prompt.

Sessions: the three scripted ones of benchmarks/fidelity.py at a 50K window, as they are and with their
turns cut into turns of two replies (what collapse can take is whole old turns); a 36-read session of
~20 KB files at a 200K window (a figure of this fake only: not compared with Claude Code, whose bill
for such a session was measured on a different fake); and the
real Claude Code transcripts in tests/fixtures/transcripts/, re-lived at a 100K window: each recorded
user prompt is typed again, the fake answers with the recorded assistant replies (thinking left out) and
the recorded tool results are fed back as the results, so every request goes through the real pipeline.

Configurations:
  today         the defaults before cost-aware compaction (costAwareCompaction off: compaction at the
                threshold T, the five most recent files restored): the base of the "x today" column
  default       our defaults (session notes, microcompact, auto-compact, cost-aware compaction; collapse
                off)
  summary-only  no session notes, no microcompact: the LLM summary at the threshold
  masking       observation masking only: old tool results replaced by a placeholder on every request
                (microcompact with a 0-minute gap, keeping the last 5), no automatic summary
  collapse      context collapse on (auto-compact off, as it manages the room)
  no-compact    compaction disabled on a 1M window
  5.5 thinking  the defaults on claude-sonnet-5-5, the 5.5 family's fake enforcing preserved thinking's
                prefix check (every reply thinks; the server's summary where kept turns hold thinking,
                billed as its response's usage says: the compaction step reads the prompt cache over the
                prefix the last request wrote, like any request) — beside "today" in the same run

Bill: every request the fake answered (main, summary, notes updates, collapse spans), from the usage it
reported (tests/fakeapi.py PromptCache): input x1, cache write x1.25, cache read x0.1, output x5, in
token equivalents. The replay is contiguous, so the 5-minute cache lifetime never lapses within it.
Columns: billed (thousands of token equivalents), USD (the same usage at the benchmark model's prices,
core.models' family table), compactions, peak context (largest main request),
side% (the share of the bill spent on side requests), and the cache-read share of the compaction
requests (summary / collapse; "-" when there were none).

Run: .venv/bin/python benchmarks/cost.py [--quick | --reads] [--configs today,default,...]. About four
minutes (--quick: scripted sessions and the 36-read session only; --reads: the 36-read session only). The
background preparation's start depends on measured timing, so figures move by a few percent between runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scripted  # noqa: E402
from thinking import Tally  # noqa: E402

from agent.runtime.loop import submit_prompt  # noqa: E402
from compact import notes_updater  # noqa: E402
from compact.request_cycle import after_response, before_request, send  # noqa: E402
from compact.workers import collapse_worker
from core.errors import ContextLimitReached  # noqa: E402
from core.messages import Message  # noqa: E402
from core.model import cost_usd  # noqa: E402
from tests.fakeapi import DEFAULT_MODELS, Reply, model_info  # noqa: E402
from tests.helpers.session import make_session  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPTS = ROOT / "tests" / "fixtures" / "transcripts"
PRICE = {
    "input_tokens": 1.0,
    "cache_creation_input_tokens": 1.25,
    "cache_read_input_tokens": 0.1,
    "output_tokens": 5.0,
}
MAX_STEPS = 400
TRANSCRIPT_WINDOW = 100_000  # the replays' window cap: the largest transcript compacts at it  # replayed assistant replies per transcript (bounded run time)
BIG_MODEL = [model_info(name, 1_000_000) for name in DEFAULT_MODELS]

CONFIGS: dict[str, dict[str, Any]] = {
    "today": {"cost_aware": False},
    "default": {},
    "summary-only": {"session_memory": False, "microcompact": False},
    "masking": {"session_memory": False, "auto_compact": False, "gap_minutes": 0.0},
    "collapse": {"context_collapse": True},
    "no-compact": {"disable_compact": True},
    "5.5 thinking": {},
}
# "5.5 thinking": the defaults on claude-sonnet-5-5 against the 5.5 family's fake with preserved
# thinking's prefix check enforced: every reply thinks, compactions whose kept turns hold thinking go
# to the server's summary — billed as its response's usage.iterations says — beside today's default
THINKING_MODEL = "claude-sonnet-5-5"


def bill(usage: dict[str, int]) -> float:
    return sum(PRICE[k] * int(usage.get(k) or 0) for k in PRICE)


@dataclass
class Row:
    session: str
    config: str
    billed: float
    compactions: int
    peak: int
    side_share: float
    cache_read_shares: list[float]
    problems: list[str]
    server_input: int = 0  # uncached input tokens of the server's summaries
    usd: float = 0.0


def row_of(
    session: str,
    config: str,
    billed: list[tuple[str, dict[str, int], int]],
    compactions: int,
    peak: int,
    problems: list[str],
) -> Row:
    total = sum(bill(u) for _, u, _ in billed)
    side = sum(bill(u) for kind, u, _ in billed if kind != "main")
    shares = [
        u.get("cache_read_input_tokens", 0)
        / max(1, sum(int(u.get(k) or 0) for k in PRICE if k != "output_tokens"))
        for kind, u, _ in billed
        if kind in ("summary", "collapse")
    ]
    server = sum(int(u.get("input_tokens") or 0) for kind, u, _ in billed if kind == "server-summary")
    usd = sum(cost_usd(scripted.MODEL, u) for _, u, _ in billed)
    return Row(
        session,
        config,
        total,
        compactions,
        peak,
        side / total if total else 0.0,
        shares,
        problems,
        server,
        usd,
    )


# --- sessions ------------------------------------------------------------------------------------------------


def reads_36() -> scripted.Scenario:
    def setup(p: Path) -> None:
        for n in range(36):
            lines = [
                f"    value_{n}_{i} = compute(table[{i}], weight={i % 11}, label='section-{n}-{i}')\n"
                for i in range(250)
            ]
            (p / f"data_{n:02d}.py").write_text(f"def build_{n}(table, compute):\n" + "".join(lines))

    def turns(p: Path) -> list[scripted.Turn]:
        return [
            scripted.Turn(
                "Read every data_*.py file, one per reply, and tell me what they build.",
                [[("Read", {"file_path": str(p / f"data_{n:02d}.py")})] for n in range(36)],
            )
        ]

    return scripted.Scenario("36 reads", setup, turns, [])


TALLIES: dict[
    str, Tally
] = {}  # per configuration: refused, drop_block, thinking dropped (benchmarks/thinking.py)


def scripted_rows(scenario: scripted.Scenario, window: int | None, short_turns: bool = False) -> list[Row]:
    rows = []
    name = f"{scenario.name} (short turns)" if short_turns else scenario.name
    for config, settings in CONFIGS.items():
        big = config == "no-compact"
        thinking = config == "5.5 thinking"
        # every row but "5.5 thinking" runs on last round's rules (the fake's default is now the 5.5 family,
        # which a 4.x model's requests don't fit): the base the thinking row is compared with
        api_kw: dict[str, Any] | None = {"profile": "4.x", **({"models": BIG_MODEL} if big else {})}
        if thinking:
            api_kw = {"profile": "2026", "binding": "error", "models": [model_info(THINKING_MODEL)]}
        result = scripted.run(
            scenario,
            f"cost {config}",
            settings,
            window=None if big else window,
            api_kw=api_kw,
            short_turns=short_turns,
            model=THINKING_MODEL if thinking else scripted.MODEL,
        )
        rows.append(row_of(name, config, result.billed, result.compactions, result.peak, result.errors))
        TALLIES.setdefault(config, Tally(result.thinking.profile)).add(result.thinking)
    return rows


# --- replaying a real transcript -----------------------------------------------------------------------------


@dataclass
class Step:
    content: list[dict]  # the assistant reply, as sent by the fake
    results: list[dict]  # the tool results recorded for its calls


def load_turns(path: Path) -> list[tuple[str, list[Step]]]:
    """The main chain's typed prompts, each with its assistant replies and their recorded tool results."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    merged: list[dict] = []  # {"role", "content"} with one streamed response's records merged
    side = all(
        r.get("isSidechain") for r in records if r.get("type") in ("user", "assistant")
    )  # a sub-agent's
    for r in records:
        if r.get("type") not in ("user", "assistant") or r.get("isCompactSummary"):
            continue
        if r.get("isSidechain") and not side:
            continue
        msg = r.get("message") or {}
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        if r["type"] == "assistant":
            blocks = [
                b
                for b in blocks
                if b.get("type") in ("text", "tool_use")
                and (b.get("type") != "text" or b.get("text", "").strip())
            ]
            if merged and merged[-1]["role"] == "assistant" and merged[-1]["id"] == msg.get("id"):
                merged[-1]["content"] += blocks
                continue
            merged.append({"role": "assistant", "id": msg.get("id"), "content": blocks})
        else:
            merged.append({"role": "user", "content": blocks, "meta": bool(r.get("isMeta"))})
    turns: list[tuple[str, list[Step]]] = []
    seen: set[str] = set()
    results: dict[str, dict] = {}
    for m in merged:
        for b in m["content"]:
            if b.get("type") == "tool_result":
                results.setdefault(b.get("tool_use_id"), b)
    for m in merged:
        if m["role"] == "user":
            texts = [b["text"] for b in m["content"] if b.get("type") == "text" and b.get("text", "").strip()]
            typed = texts and not any(b.get("type") == "tool_result" for b in m["content"]) and not m["meta"]
            if typed and not texts[0].startswith("<"):
                turns.append(("\n".join(texts), []))
            continue
        if not turns or not m["content"]:
            continue
        ids = [b["id"] for b in m["content"] if b.get("type") == "tool_use"]
        if any(i in seen for i in ids):
            continue
        seen.update(ids)
        answered = [_result(results.get(i), i) for i in ids]
        turns[-1][1].append(Step(m["content"], answered))
    return [(prompt, steps) for prompt, steps in turns if steps]


def _result(block: dict | None, use_id: str) -> dict:
    if block is None:
        return {"type": "tool_result", "tool_use_id": use_id, "content": "(no result was recorded)"}
    out = {"type": "tool_result", "tool_use_id": use_id, "content": block.get("content") or "(empty)"}
    if block.get("is_error"):
        out["is_error"] = True
    return out


class Replayer:
    """The main model of a replay: the current step's recorded reply."""

    def __init__(self) -> None:
        self.content: list[dict] | None = None

    def __call__(self, body: dict) -> Reply:
        content, self.content = self.content, None
        return Reply(content) if content else Reply.text("Done.")


def replay(path: Path, config: str, settings: dict[str, Any]) -> Row:
    turns = load_turns(path)
    big = config == "no-compact"
    with (
        tempfile.TemporaryDirectory() as tmp_name,
        scripted.BillingAPI(profile="4.x", **({"models": BIG_MODEL} if big else {})) as api,
    ):
        tmp = Path(tmp_name)
        model = Replayer()
        events: list[Any] = []
        scripted.answer_side_requests(api)
        api.on(lambda body: True, model)
        session, _ = make_session(
            tmp,
            api,
            permission_mode="bypassPermissions",
            model=scripted.MODEL,
            model_explicit=True,
            context_window=None if big else TRANSCRIPT_WINDOW,
            **settings,
        )
        session.emit = events.append
        conv, ports = session.conv, session.ports
        problems: list[str] = []
        steps = 0
        for prompt, recorded in turns:
            if steps >= MAX_STEPS:
                break
            submit_prompt(session, prompt)
            try:
                for step in [*recorded, None]:
                    model.content = step.content if step else None
                    reply = send(conv, ports, before_request(conv, ports))
                    session.add(reply)
                    after_response(conv, ports)
                    steps += 1
                    if step is None or not reply.tool_uses:
                        break
                    session.add(Message("user", list(step.results), kind="tool_results"))
            except ContextLimitReached as e:
                problems.append(f"context limit: {e}")
                break
        notes_updater.wait_for_update(conv, 30)
        if (collapser := collapse_worker.collapser(conv)) is not None:
            collapser.join(30)
        mains = [tokens for kind, _, tokens in api.billed if kind == "main"]
        return row_of(
            path.name.split("__")[-1][:24],
            config,
            list(api.billed),
            scripted.compaction_count(events),
            max(mains, default=0),
            problems + api.violations,
        )


# --- the table -----------------------------------------------------------------------------------------------


BASE = "today"  # the ratios' base: today's default policy (compaction at T), in the same run


def print_table(rows: list[Row]) -> None:
    print(
        f"{'session':<30} {'config':<13} {'billed (K)':>10} {'USD':>7} {'x today':>9} {'compactions':>11} "
        f"{'peak':>8} {'side%':>6}  cache-read share of compaction requests"
    )
    base = {r.session: r.billed for r in rows if r.config == BASE}
    for r in rows:
        shares = ", ".join(f"{s:.0%}" for s in r.cache_read_shares[:6]) or "-"
        if len(r.cache_read_shares) > 6:
            shares += f", … ({len(r.cache_read_shares)})"
        ratio = r.billed / base[r.session] if base.get(r.session) else 0.0
        print(
            f"{r.session:<30} {r.config:<13} {r.billed / 1000:>10,.0f} {r.usd:>7.2f} {ratio:>9.2f} "
            f"{r.compactions:>11} "
            f"{r.peak:>8,} {r.side_share:>6.0%}  {shares}"
        )
    totals: dict[str, float] = {}
    for r in rows:
        totals[r.config] = totals.get(r.config, 0.0) + r.billed
    print(
        "\ntotal over all sessions: "
        + ", ".join(f"{c} {t / 1000:,.0f}K ({t / totals[BASE]:.2f}x)" for c, t in totals.items())
    )
    thinking = [r for r in rows if r.config == "5.5 thinking"]
    if thinking and totals.get(BASE):
        same = {t.session for t in thinking}
        today = sum(r.billed for r in rows if r.config == BASE and r.session in same)
        print(
            f"5.5 thinking against today's default on the same sessions: "
            f"{sum(r.billed for r in thinking) / today:.2f}x (the server's summaries billed as their usage "
            f"says: {sum(r.server_input for r in thinking) / 1000:,.0f}K uncached input tokens)"
        )
    reads = {r.config: r.billed for r in rows if r.session == "36 reads"}
    if reads.get(BASE) and reads.get("default"):
        print(
            f"36 reads of ~20 KB at a 200K window: today {reads[BASE] / 1000:,.0f}K, cost-aware default "
            f"{reads['default'] / 1000:,.0f}K token equivalents = {reads['default'] / reads[BASE]:.2f}x "
            "(this fake only: no figure measured elsewhere is comparable)"
        )
    for config, tally in TALLIES.items():
        print(tally.line(f"{config} (scripted sessions)"))
    for r in rows:
        for p in r.problems:
            print(f"problem: {r.session}/{r.config}: {p}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="scripted sessions and the 36-read session only")
    parser.add_argument("--reads", action="store_true", help="the 36-read session only")
    parser.add_argument("--configs", help="comma-separated configurations (default: all)")
    args = parser.parse_args()
    if args.configs:
        wanted = set(args.configs.split(","))
        for name in [c for c in CONFIGS if c not in wanted and c != "today"]:  # the ratios' base stays
            del CONFIGS[name]
    rows: list[Row] = []
    if not args.reads:
        for scenario in scripted.SCENARIOS:
            rows += scripted_rows(scenario, scripted.WINDOW)
        for scenario in scripted.SCENARIOS:  # turns of two replies: old turns context collapse can take
            rows += scripted_rows(scenario, scripted.WINDOW, short_turns=True)
    rows += scripted_rows(reads_36(), None)
    if not (args.quick or args.reads):
        for path in sorted(TRANSCRIPTS.glob("*.jsonl")):
            if not load_turns(path):
                print(f"(skipped {path.name}: no typed prompt to replay)")
                continue
            for config, settings in CONFIGS.items():
                if config != "5.5 thinking":  # a replay's recorded replies carry no thinking of this family
                    rows.append(replay(path, config, settings))
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
