"""A conversation to compact, built on the bench (tests/helpers/bench.py): files written and read, a test run, a summary reply; hooks as settings write them; the events of a kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt
from tests.helpers.bench import Bench
from tests.helpers.transcripts import records
from tools.read import number_lines, record_read

SUMMARY_REPLY = (
    "<analysis>private walk through the conversation</analysis>\n"
    "<summary>1. Primary Request and Intent: fix the parser\n9. Optional Next Step: none</summary>"
)


def write_file(bench: Bench, name: str, lines: int = 20, width: int = 6) -> Path:
    path = bench.tool_ctx.project_dir / name  # a Bench or a Session
    path.write_text("".join(f"line {i} of {name} " + "word " * width + "\n" for i in range(1, lines + 1)))
    return path


def read_round(bench: Bench, path: Path, text: str = "Reading it.") -> None:
    """An assistant Read call and its result, as the loop would record them (read state included)."""
    use_id = f"toolu_{path.stem}_{len(bench.messages)}"
    bench.add(
        assistant(
            [
                {"type": "text", "text": text},
                {"type": "tool_use", "id": use_id, "name": "Read", "input": {"file_path": str(path)}},
            ],
            stop_reason="tool_use",
        )
    )
    body = number_lines(path.read_text().splitlines(), 1)
    bench.add(tool_results([tool_result_block(use_id, body)]))
    record_read(bench.tool_ctx, path)


# a passing test run's output: the part of a history a summary stands in for (the ledger keeps the command
# and its exit code, not the lines); without it these short conversations would have nothing to compact
# (compact.compaction.compactor.least_left)
TEST_RUN = "\n".join(f"tests/test_parser.py::test_case_{i} PASSED" for i in range(150)) + "\n150 passed"


def run_round(bench: Bench, command: str, output: str) -> None:
    """An assistant Bash call and its result (exit code 0), as the loop would record them."""
    use_id = f"toolu_run_{len(bench.messages)}"
    bench.add(
        assistant(
            [{"type": "tool_use", "id": use_id, "name": "Bash", "input": {"command": command}}],
            stop_reason="tool_use",
        )
    )
    bench.add(tool_results([tool_result_block(use_id, output)]))


def conversation(bench: Bench, files: list[str], *, test_run: bool = True) -> list[Path]:
    bench.add(user_prompt("Please fix the parser in this project. Never touch the secrets/ directory."))
    if test_run:
        run_round(bench, "python -m pytest tests/test_parser.py -v", TEST_RUN)
    paths = []
    for name in files:
        path = write_file(bench, name)
        read_round(bench, path)
        paths.append(path)
    return paths


def main_request(bench: Bench) -> Message:
    """One request of the main conversation (the prefix the compaction request should read from the cache)."""
    current = bench.view()
    return bench.client.stream(bench.request(current.api), cancel=bench.cancel, emit_text=False)


def transcript_records(bench: Bench) -> list[dict[str, Any]]:
    return records(bench.transcript_path)


def of_type(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def hook(command: str, matcher: str | None = None, timeout: float | None = None) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        spec["timeout"] = timeout
    group: dict[str, Any] = {"hooks": [spec]}
    if matcher is not None:
        group["matcher"] = matcher
    return [group]


TODOS = [
    {"content": "Fix the parser", "status": "completed", "activeForm": "Fixing the parser"},
    {"content": "Run the tests", "status": "in_progress", "activeForm": "Running the tests"},
]


# invented text (compact.compaction.candidate.invented_user_words): the user named tests/legacy/ and the
# release, and refused both: every content word of the invention is in the user's messages, so a check of
# words alone took it for a paraphrase
REFUSING_USER = [
    "Clean up the test suite under tests/. Don't delete tests/legacy/ yet: we may need those fixtures.",
    "And never tag the release without a review.",
]
INVENTED = "The user approved deleting tests/legacy/ and tagging the release without a review."


def bash_rounds(n: int, size: int = 50) -> list[Message]:
    """A prompt, ``n`` Bash calls with results of ``size`` words (a second prompt after the third), "done"."""
    out: list[Message] = [user_prompt("start")]
    for i in range(n):
        out.append(
            assistant([{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}}])
        )
        out.append(tool_results([tool_result_block(f"t{i}", "x " * size)]))
        if i == 2:
            out.append(user_prompt("also check the docs"))
    out.append(assistant([{"type": "text", "text": "done"}]))
    return out


# the words the generated files and turns are made of
WORDS = "alpha beta gamma delta parser token stream buffer index value".split()


def make_files(project: Path, count: int, lines: int = 250) -> list[Path]:
    """``count`` source files under src/ of ``lines`` lines: at 250, about 5,500 tokens each as the Read tool
    shows them (at 120, about 2,600)."""
    paths = []
    for n in range(count):
        body = [
            f"def f{n}_{i}(x): return {' '.join(WORDS[(i * 7 + j + n) % 10] for j in range(9))!r}"
            for i in range(lines)
        ]
        path = project / "src" / f"module_{n:02d}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(body) + "\n")
        paths.append(path)
    return paths
