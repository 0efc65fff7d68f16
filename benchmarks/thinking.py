"""The model family a benchmark plays, and what became of the model's thinking (issues 29 and 31).

Every benchmark that talks to the fake runs on the 2026 profile by default: the 5.5 family's request
rules, every reply thinking (signed, bound to its prefix), preserved thinking's prefix check enforced,
the agent on ``claude-sonnet-5-5``. ``--profile 4.x`` plays last round's rules on ``claude-sonnet-4-5``
(no thinking), for a figure compared with last round's.

Each run then prints one line, the same in every benchmark::

    thinking [2026]: refused 0, drop_block 0, dropped between compaction points 0, at them 12, kept 30

  refused     requests the fake answered 400: a setting the family refuses, or the prefix check (any
              one is a bug the real API would hit)
  drop_block  retries with ``prefix_mismatch_behavior: "drop_block"``, the escape hatch (never in
              normal work)
  between     messages whose thinking was left out between compaction points (must be 0: an edit of
              the history that was neither held for the next compaction point nor server-side)
  at          ... left out at compaction points: a local summary in front of kept turns holding it,
              or a context-collapse commit (a span summary in front of the turns after it; shown
              apart in brackets)
  kept        messages whose thinking stayed valid across a compaction (the server's summary)

Drops are read from the transcripts' ``thinking-drop`` records (the main session's and every subagent's
sidechain, in-process or a CLI child alike, each message counted once); ``kept`` is only known in the
process that compacted, from ``conv.view_ctx.thinking``.

This module imports nothing of the agent at import time (the start-up benchmarks use it too).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROFILES = ("2026", "4.x")
DEFAULT = "2026"
# the model the agent runs on under each profile: the family whose rules the fake plays
MODELS = {"2026": "claude-sonnet-5-5", "4.x": "claude-sonnet-4-5"}


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        default=DEFAULT,
        help="the model family the fake plays: 2026 (the 5.5 family, thinking, the prefix check; "
        "the default) or 4.x (last round's rules)",
    )


def model(profile: str) -> str:
    return MODELS[profile]


def fake(profile: str) -> dict[str, Any]:
    """Keyword arguments for FakeAPI: the profile, with preserved thinking's prefix check enforced."""
    return {"profile": profile, "binding": "error"}


@dataclass
class Tally:
    """Refusals, fallbacks and thinking dropped or kept, over every fake and session of a run."""

    profile: str = DEFAULT
    refused: int = 0
    fallbacks: int = 0
    between: int = 0
    at: int = 0
    at_collapse: int = 0  # of ``at``: at context-collapse commits
    kept: int = 0
    problems: list[str] = field(default_factory=list)  # the first refusals and fallbacks, to show
    _seen: set[str] = field(default_factory=set)

    def api(self, api: Any) -> None:
        """What one fake refused (``api.violations``: every 400 it answered) and the fallbacks it took."""
        self.refused += len(api.violations)
        self.fallbacks += len(api.binding.fallbacks)
        self.problems += [f"refused: {v}" for v in api.violations]
        self.problems += [f"drop_block fallback: {len(f)} block(s)" for f in api.binding.fallbacks]

    def transcripts(self, home: Path) -> None:
        """The thinking left out, from the ``thinking-drop`` records of every transcript under ``home``
        (sidechains included); a message counted once however many files name it."""
        for path in sorted(Path(home).rglob("*.jsonl")):
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            for line in lines:
                if '"thinking-drop"' not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("type") != "thinking-drop":
                    continue
                for uuid in record.get("droppedThinkingUuids") or []:
                    if uuid in self._seen:
                        continue
                    self._seen.add(uuid)
                    if record.get("where") in ("compaction", "collapse"):
                        self.at += 1
                        self.at_collapse += record.get("where") == "collapse"
                    else:
                        self.between += 1

    def conv(self, conv: Any) -> None:
        """The thinking kept valid across compactions by a conversation of this process."""
        counts = getattr(getattr(conv, "view_ctx", None), "thinking", None)
        if counts is not None:
            self.kept += counts.kept_at_compaction

    def session(self, api: Any, home: Path, conv: Any = None) -> None:
        """All three for one session: its fake, its transcripts, its conversation."""
        self.api(api)
        self.transcripts(home)
        if conv is not None:
            self.conv(conv)

    def add(self, other: Tally) -> None:
        self.refused += other.refused
        self.fallbacks += other.fallbacks
        self.between += other.between
        self.at += other.at
        self.at_collapse += other.at_collapse
        self.kept += other.kept
        self.problems += other.problems

    @property
    def ok(self) -> bool:
        """No refusal, no fallback, nothing dropped between compaction points."""
        return self.refused == self.fallbacks == self.between == 0

    def line(self, label: str = "") -> str:
        where = f" {label}" if label else ""
        return (
            f"thinking [{self.profile}]{where}: refused {self.refused}, drop_block {self.fallbacks}, "
            f"dropped between compaction points {self.between}, at them {self.at}"
            + (f" (collapse commits {self.at_collapse})" if self.at_collapse else "")
            + f", kept {self.kept}"
        )

    def report(self, label: str = "", shown: int = 5) -> str:
        """The line, then the first few refusals / fallbacks when there were any."""
        out = [self.line(label)] + [f"  {p[:300]}" for p in self.problems[:shown]]
        if len(self.problems) > shown:
            out.append(f"  ... and {len(self.problems) - shown} more")
        return "\n".join(out)
