"""Memory across sessions, checked against the code before use (issue 39, docs/memory.md): three sessions on the
fake API in a small real git repository, then the cost of loading 200 memories at start.

Session 1 (four print-mode runs continued with --continue: one conversation) discovers the project: it
reads the Makefile and pyproject.toml, builds (`make build`), tries `python3 setup.py test` (fails: a
failed approach), runs `make test` (fails), fixes src/calc.py, runs `make test` again (passes), lints
(`make lint`), edits src/helpers.py, and calls a health URL with a bearer token (fails). The user states 3
standing rules and 1 correction and asks for something to be remembered, with a token in it; the project
has a .env with a password. The model never mentions memory: every memory comes from the agent's records.

Between sessions the repository changes (and is committed):
  1. the make target `build` is renamed `compile` (same recipe)                      -> refresh expected
  2. the linter changes: `lint` runs `flake8 src` instead of `ruff check src`          -> refresh expected
  3. src/helpers.py, which a memory cites, is deleted                                 -> stale expected
  4. the Makefile no longer includes mk/test.mk; mk/test.mk, the cited file, is unchanged -> stale
  5. a pytest.ini appears; pyproject.toml's [tool.pytest.ini_options], the cited lines, is unchanged but no
     longer read by pytest                                                             -> stale
(4 and 5 leave the cited lines as they were and the memory wrong.)

Session 2 is fresh (no --continue). From its first request: how many of 20 probes are answerable (each
probe's answer, as strings, in the request), the tokens the memory adds (≤ 2,000), which of the 5 changed
memories were caught (stale or refreshed) and that none of them is served as current, with precision and
recall of the detection. Session 3 (fresh again) runs the tests the way that works now: the newer evidence
replaces the stale memory. Then: secrets found in the memory folder (target 0), and a second project in
the same home: memories of the first seen in its first request (target 0).

Loading cost: process start → first request of `compact-agent -p` with 200 memories on record against a
project with none (same home), interleaved, median of N runs each; target ≤ 1.2×.

    .venv/bin/python benchmarks/memory_sessions.py [--runs N] [--keep DIR] [--skip-load-cost]

Exits 1 when a target is missed. Runs on the 2026 profile (benchmarks/thinking.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.memory.entries import Evidence, Memory  # noqa: E402
from agent.memory.service import HEADER  # noqa: E402
from agent.memory.store import Index, Store, folder_for  # noqa: E402
from core.tokens import estimate_text  # noqa: E402
from tests.fakeapi import FakeAPI  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import thinking  # noqa: E402

SECRETS = {
    "env": "hunter2-very-secret-9",
    "user": "ghp_Zx8kQ2mN5vB7cD9fG1hJ3kL5mN7pQ9rS",
    "command": "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e",
}
MAKEFILE = "include mk/test.mk\n\nbuild:\n\tpython3 -m compileall -q src\n\nlint:\n\truff check src\n"
TEST_MK = "test:\n\tpython3 -m pytest -q tests\n"
PYPROJECT = (
    '[project]\nname = "calc"\nversion = "0.1.0"\n\n'
    '[tool.pytest.ini_options]\ntestpaths = ["tests"]\naddopts = "-q"\n'
)
FILES = {
    "Makefile": MAKEFILE,
    "mk/test.mk": TEST_MK,
    "pyproject.toml": PYPROJECT,
    "src/calc.py": "def add(a, b):\n    return a - b\n",
    "src/helpers.py": "def double(x):\n    return 2 * x\n",
    "tests/test_calc.py": (
        "import sys\n\nsys.path.insert(0, 'src')\n\nfrom calc import add\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n"
    ),
    "vendor/lib.py": "VALUE = 1\n",
    ".env": f"DATABASE_PASSWORD={SECRETS['env']}\n",
    ".gitignore": ".env\n__pycache__/\n.pytest_cache/\n.ruff_cache/\n",
}
# the memories the five changes make wrong: slot -> what of the old value must not be served as current
CHANGED = {
    "command:build": "`make build`",
    "command:lint": "ruff check src",
    "file:src/helpers.py": "src/helpers.py",
    "command:test": "`make test`",
    "config:pytest": "pyproject.toml [tool.pytest.ini_options]",
}
# (question, strings the answer needs, all of them in the first request)
PROBES = [
    ("How is the project built now?", ["make compile", "compileall"]),
    ("Does `make test` still work?", ["make test", "STALE", "no longer includes"]),
    ("Where is the test target defined?", ["mk/test.mk"]),
    ("What does `make lint` run now?", ["make lint", "flake8 src"]),
    ("Why did the tests fail at first?", ["failed first", "exit 2"]),
    ("Which file was fixed to make the tests pass?", ["calc.py"]),
    ("What did the fix change?", ["return a + b"]),
    ("What must happen before committing?", ["make lint before committing"]),
    ("Which files must never be edited?", ["vendor/"]),
    ("What about type hints?", ["type hints in every new function"]),
    ("How should the tests be run (correction)?", ["don't call pytest directly"]),
    ("Who gave the correction, and when?", ["the user", "UTC"]),
    ("What is the release branch called?", ["release branch is called stable"]),
    ("Which approach to testing failed?", ["python3 setup.py test", "failed"]),
    ("What failed with the health check?", ["curl", "failed"]),
    ("Is src/helpers.py still there?", ["src/helpers.py", "no longer exists"]),
    ("Where is pytest configured now?", ["pytest.ini"]),
    ("Are the pyproject.toml pytest settings still in effect?", ["pyproject.toml", "no longer apply"]),
    ("Was the Makefile's build target renamed?", ["`build` is now called `compile`"]),
    ("Were these memories checked?", ["checked against the working tree"]),
]


def sh(cwd: Path, *args: str) -> None:
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_repo(path: Path) -> None:
    for rel, text in FILES.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    sh(path, "git", "init", "-q", "-b", "main")
    sh(path, "git", "add", "-A")
    sh(path, "git", "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-q", "-m", "start")


def change_repo(path: Path) -> None:
    makefile = MAKEFILE.replace("build:\n", "compile:\n").replace("ruff check src", "flake8 src")
    makefile = makefile.replace("include mk/test.mk\n\n", "")
    (path / "Makefile").write_text(makefile)
    (path / "src/helpers.py").unlink()
    (path / "pytest.ini").write_text("[pytest]\ntestpaths = tests\naddopts = -x\n")
    sh(path, "git", "add", "-A")
    sh(path, "git", "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-q", "-m", "changes")


class Cli:
    def __init__(self, api: FakeAPI, home: Path) -> None:
        self.api, self.home = api, home
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "COMPACT_"))}
        env.update(api.env(), HOME=str(home), COMPACT_AGENT_HOME=str(home / ".compact-agent"))
        env["ANTHROPIC_MODEL"] = thinking.model("2026")
        env["PYTHONPATH"] = str(ROOT)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["COMPACT_AGENT_SESSION_MEMORY"] = "0"  # the notes updates are side requests the script can't plan
        self.env = env

    def run(self, cwd: Path, prompt: str, *extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "agent", "-p", prompt, "--dangerously-skip-permissions", *extra]
        done = subprocess.run(cmd, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"compact-agent failed ({done.returncode}): {done.stderr}")
        return done


def session_one(cli: Cli, repo: Path) -> None:
    api = cli.api
    p = str(repo)
    api.reply_tools(
        [("Read", {"file_path": f"{p}/Makefile"}), ("Read", {"file_path": f"{p}/pyproject.toml"})]
    )
    api.reply_tool("Bash", {"command": "make build"})
    api.reply_tool("Bash", {"command": "python3 setup.py test"})
    api.reply_tool("Bash", {"command": "make test"})
    api.reply_tool("Read", {"file_path": f"{p}/src/calc.py"})
    api.reply_tool("Edit", {"file_path": f"{p}/src/calc.py", "old_string": "a - b", "new_string": "a + b"})
    api.reply_tool("Bash", {"command": "make test"})
    api.reply_tool("Bash", {"command": "make lint"})
    api.reply_tool("Read", {"file_path": f"{p}/src/helpers.py"})
    api.reply_tool(
        "Edit",
        {"file_path": f"{p}/src/helpers.py", "old_string": "return 2 * x", "new_string": "return x + x"},
    )
    api.reply_tool(
        "Bash",
        {
            "command": f'curl -sf -H "Authorization: Bearer {SECRETS["command"]}" http://127.0.0.1:9/health',
        },
    )
    api.reply_text("Built, tested (fixed add in src/calc.py) and linted. The health endpoint is not up.")
    cli.run(
        repo,
        "Find out how to build, test and lint this project and fix what fails. Always run make lint before committing.",
    )
    api.reply_text("Understood.")
    cli.run(repo, "Never edit files under vendor/. Use type hints in every new function.", "--continue")
    api.reply_text("Noted.")
    cli.run(repo, "No, don't call pytest directly; use the make target for the tests.", "--continue")
    api.reply_text("I'll keep that in mind.")
    cli.run(
        repo,
        f"Remember that the release branch is called stable and that the deploy token is {SECRETS['user']}",
        "--continue",
    )


def first_request(api: FakeAPI, since: int) -> dict:
    return api.message_requests[since].body


def memory_block(body: dict) -> str:
    head = HEADER.split("{")[0]
    return next((b["text"] for b in body.get("system") or [] if b.get("text", "").startswith(head)), "")


def load_record(home: Path, repo: Path) -> dict:
    key = "".join(c if c.isalnum() else "-" for c in str(repo))
    newest = max(
        (home / ".compact-agent" / "projects" / key).glob("*.jsonl"), key=lambda p: p.stat().st_mtime
    )
    recs = [json.loads(line) for line in newest.read_text().splitlines() if line.strip()]
    return next(r for r in recs if r.get("type") == "memory-load")


def current_part(block: str) -> str:
    return block.split("## Stale")[0]


def sessions(keep: Path | None) -> tuple[list[str], bool]:
    out: list[str] = []
    ok = True
    tmp = Path(tempfile.mkdtemp(prefix="memory-sessions-"))
    try:
        home, repo, other = tmp / "home", tmp / "calc", tmp / "other"
        for d in (home, repo, other):
            d.mkdir()
        make_repo(repo)
        make_repo(other)
        with FakeAPI(**thinking.fake("2026")) as api:
            cli = Cli(api, home)
            session_one(cli, repo)
            change_repo(repo)
            # session 2: fresh
            since = len(api.message_requests)
            api.reply_text("I remember the project's commands and rules.")
            cli.run(repo, "What do you remember about this project?")
            body = first_request(api, since)
            context = json.dumps(
                {"system": body.get("system"), "messages": body.get("messages")}, ensure_ascii=False
            )
            block = memory_block(body)
            tokens = estimate_text(block)
            answered = [q for q, needles in PROBES if all(n in context for n in needles)]
            missed = [q for q, needles in PROBES if not all(n in context for n in needles)]
            rec = load_record(home, repo)
            states = {m["slot"]: m["state"] for m in rec["memories"]}
            flagged = {s for s, st in states.items() if st in ("stale", "refreshed")}
            caught = flagged & set(CHANGED)
            precision = len(caught) / len(flagged) if flagged else 1.0
            recall = len(caught) / len(CHANGED)
            current = current_part(block)
            served_as_current = [
                s for s, old in CHANGED.items() if old in current or states.get(s) == "current"
            ]
            out.append(
                f"session 2 (fresh): {len(rec['memories'])} memories on record, {rec['loaded']} loaded, "
                f"{rec['stale']} stale, {rec['refreshed']} refreshed; injected {tokens:,} tokens (target ≤ 2,000)"
            )
            out.append(
                f"  probes answerable from the first request: {len(answered)}/{len(PROBES)} (target ≥ 95%)"
            )
            out += [f"    missed: {q}" for q in missed]
            out.append(
                f"  stale memories caught: {len(caught)}/{len(CHANGED)} (target ≥ 4), served as current: "
                f"{len(served_as_current)} (target 0); precision {precision:.2f}, recall {recall:.2f}"
            )
            for slot in CHANGED:
                m = next((m for m in rec["memories"] if m["slot"] == slot), None)
                out.append(f"    {slot}: {m['state'] + ' — ' + m['reason'] if m else 'no such memory'}")
            extra = sorted(flagged - set(CHANGED))
            out += [f"    flagged but unchanged: {s}" for s in extra]
            ok &= len(answered) >= 0.95 * len(PROBES) and tokens <= 2000
            ok &= len(caught) >= 4 and not served_as_current
            # session 3: fresh, the tests run the way that works now
            api.reply_tool("Bash", {"command": "make -f mk/test.mk test"})
            api.reply_text("The tests pass with make -f mk/test.mk test.")
            since = len(api.message_requests)
            cli.run(repo, "Run the tests.")
            store = Store(folder_for(home / ".compact-agent", repo))
            memories, _ = store.read()
            test = next(m for m in memories if m.slot == "command:test")
            out.append(f"session 3 (fresh): the test memory is {test.state}: {test.text}")
            ok &= test.state == "current" and "mk/test.mk" in test.text
            # secrets
            leaked = 0
            for f in (home / ".compact-agent" / "projects").glob("*/memory/*"):
                text = f.read_text(errors="replace")
                leaked += sum(text.count(s) for s in SECRETS.values())
            out.append(f"secrets in the memory folder: {leaked} (target 0)")
            ok &= leaked == 0
            # a second project in the same home
            since = len(api.message_requests)
            api.reply_text("Hello.")
            cli.run(other, "hi")
            body = first_request(api, since)
            seen = json.dumps(body)
            foreign = sum(1 for m in memories if m.text and m.text[:40] in seen) + (
                1 if memory_block(body) else 0
            )
            out.append(f"second project, same home: memories of the first seen {foreign} (target 0)")
            ok &= foreign == 0
            refused = [r for r in api.message_requests if r.status and r.status >= 400]
            out.append(f"requests refused by the fake: {len(refused)}")
            ok &= not refused
        if keep is not None:
            shutil.copytree(tmp, keep, dirs_exist_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out, ok


# --- the loading cost ----------------------------------------------------------------------------------


def seed(home: Path, repo: Path, n: int) -> None:
    """``n`` memories of every kind, each with a check the load has to make."""
    for i in range(20):
        (repo / f"pkg/mod{i}.py").parent.mkdir(parents=True, exist_ok=True)
        (repo / f"pkg/mod{i}.py").write_text(
            "".join(f"def f{j}(x):\n    return x + {j}\n" for j in range(40))
        )
    targets = "".join(f"t{i}:\n\techo {i}\n\n" for i in range(60))
    (repo / "Makefile").write_text(targets)
    (repo / "pyproject.toml").write_text(
        '[tool.ruff]\nline-length = 100\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'
    )
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    memories = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            t = f"t{i % 60}"
            check = {
                "kind": "make",
                "dir": ".",
                "makefile": "",
                "target": t,
                "command": f"make {t}",
                "recipe": [f"echo {i % 60}"],
            }
            m = Memory(
                f"command:x{i}",
                "commands",
                t,
                f"`make {t}` runs `echo {i % 60}`",
                [Evidence("command", now, f"make {t}", 0)],
                check,
            )
        elif kind == 1:
            f = f"pkg/mod{i % 20}.py"
            j = i % 40
            check = {
                "kind": "lines",
                "path": f,
                "start": 2 * j + 1,
                "content": f"def f{j}(x):\n    return x + {j}",
            }
            m = Memory(
                f"file:{f}:{j}",
                "places",
                f,
                f"{f}:{2 * j + 1}-{2 * j + 2} was edited",
                [Evidence("file", now, path=f)],
                check,
            )
        elif kind == 2:
            check = {
                "kind": "config",
                "tool": "ruff",
                "path": "pyproject.toml",
                "section": "tool.ruff",
                "content": "[tool.ruff]\nline-length = 100",
            }
            m = Memory(
                f"config:ruff{i}",
                "places",
                "ruff",
                "ruff is configured in pyproject.toml",
                [Evidence("file", now, path="pyproject.toml")],
                check,
            )
        else:
            m = Memory(
                f"rule:{i}",
                "rules",
                "rule",
                f"Rule number {i}: keep functions short",
                [Evidence("user", now, message="...")],
                origin="user",
            )
        m.written = m.used = now
        memories.append(m)
    store = Store(folder_for(home / ".compact-agent", repo))
    with store.locked():
        store.write(memories, Index(), {})


def first_request_time(cli: Cli, cwd: Path) -> float:
    arrived = threading.Event()
    cli.api.on(lambda body: (arrived.set(), False)[1], None)  # type: ignore[arg-type]
    cli.api.reply_text("ok")
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent", "-p", "hi"],
        cwd=cwd,
        env=cli.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    arrived.wait(60)
    elapsed = time.perf_counter() - start
    proc.wait(60)
    cli.api.routes.clear()
    return elapsed


def load_cost(runs: int) -> tuple[list[str], bool]:
    with tempfile.TemporaryDirectory(prefix="memory-load-") as tmp:
        base = Path(tmp)
        home, full, empty = base / "home", base / "full", base / "empty"
        for d in (home, full, empty):
            d.mkdir()
        make_repo(full)
        make_repo(empty)
        seed(home, full, 200)
        with FakeAPI(**thinking.fake("2026")) as api:
            cli = Cli(api, home)
            cli.env.pop("PYTHONDONTWRITEBYTECODE", None)
            first_request_time(cli, empty)  # warm the bytecode caches
            with_memory, without = [], []
            for _ in range(runs):
                with_memory.append(first_request_time(cli, full))
                without.append(first_request_time(cli, empty))
                seed(home, full, 200)  # each run starts from the same 200 (a load renews and rewrites them)
            loaded = (
                estimate_text(memory_block(api.message_requests[-2].body))
                if len(api.message_requests) > 1
                else 0
            )
        a, b = statistics.median(with_memory), statistics.median(without)
    ratio = a / b
    return [
        f"load cost (median of {runs}): 200 memories {a * 1000:.0f} ms, none {b * 1000:.0f} ms → {ratio:.2f}× "
        f"(target ≤ 1.2×); the 200 served within the bound: {loaded:,} tokens"
    ], ratio <= 1.2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--skip-load-cost", action="store_true")
    parser.add_argument("--only-load-cost", action="store_true")
    args = parser.parse_args()
    lines, ok = sessions(args.keep) if not args.only_load_cost else ([], True)
    if not args.skip_load_cost:
        more, ok2 = load_cost(args.runs)
        lines += more
        ok &= ok2
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
