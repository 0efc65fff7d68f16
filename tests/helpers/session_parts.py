"""A session's own parts on the compaction bench, for tests on the agent floor (tests/agent/): the real hook
runner (agent.runtime.hooks, run as a session runs it: agent.runtime.wiring.run_hooks), the instruction
files' Compact Instructions and paths, and the agent's system prompt (agent.config.system_prompt). The
bench itself (tests/helpers/bench.py) stays on compact's floor; this puts the agent's parts into its ports.
"""

from __future__ import annotations

import os
from typing import Any

from agent.config.system_prompt import build_system, compact_instructions, memory_files
from agent.runtime import wiring
from agent.runtime.hooks import HookRunner, base_payload
from tests.helpers.bench import Bench


def with_session_parts(bench: Bench, hooks: dict[str, Any] | None = None) -> Bench:
    """``bench`` with ``hooks`` (the settings' ``hooks`` object) run by the real runner, CLAUDE.md read as a
    session reads it, and the agent's system prompt."""
    runner = HookRunner(hooks or {}, bench.cwd, dict(os.environ))

    def run(event: str, match_value: str | None, **fields: Any) -> str:
        payload = {**base_payload(bench.session_id, bench.transcript_path, bench.cwd, event), **fields}
        outcomes = wiring.run_hooks(runner, event, payload, match_value, bench.notice)
        return runner.context_text(outcomes)

    bench.hooks = run
    bench.instructions = lambda: compact_instructions(bench.cwd, bench.home)
    bench.instruction_files = lambda: memory_files(bench.cwd, bench.home)
    bench.system = build_system(bench.cwd, bench.home, bench.model)
    return bench
