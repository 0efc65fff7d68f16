"""Permission rules from a test: settings holding rules, and a working day's commands with the rules that cover them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RuleSettings:
    """Just what tools.permissions.engine.PermissionSettings asks for (the agent's Settings has it too)."""

    cwd: Path
    home: Path
    user_home: Path | None = None
    permission_mode: str = "default"
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    additional_dirs: list[Path] = field(default_factory=list)

    @property
    def project_dir(self) -> Path:
        return self.home / "projects" / "this-project"


WORKING_DAY_RULES = [
    "Bash(git status:*)",
    "Bash(git diff:*)",
    "Bash(git log:*)",
    "Bash(pytest:*)",
    "Bash(npm test)",
    "Bash(ls:*)",
    "Bash(grep:*)",
    "Bash(head:*)",
    "Bash(tail:*)",
    "Bash(cd:*)",
    "Bash(make)",
    "Bash(python -m pytest:*)",
    "Bash(echo:*)",
    "Bash(cat:*)",
    "Bash(wc:*)",
    "Bash(find:*)",
    "Bash(sort:*)",
    "Bash(mkdir:*)",
    "Bash(read:*)",
    "Bash(sed:*)",
    "Bash(awk:*)",
    "Bash(cp:*)",
    "Bash(tar:*)",
    "Bash(tee:*)",
    "Bash(uniq:*)",
    # other ecosystems' working day (issue 30): cargo, go, npm, pip, make targets
    "Bash(cargo build:*)",
    "Bash(cargo test:*)",
    "Bash(cargo clippy:*)",
    "Bash(cargo fmt:*)",
    "Bash(cargo run:*)",
    "Bash(go build:*)",
    "Bash(go test:*)",
    "Bash(go vet:*)",
    "Bash(go mod:*)",
    "Bash(gofmt:*)",
    "Bash(npm run:*)",
    "Bash(npm install:*)",
    "Bash(npm ci)",
    "Bash(tsc:*)",
    "Bash(pip install:*)",
    "Bash(python -m pip:*)",
    "Bash(make:*)",
    "Bash(ruff:*)",
    "Bash(mypy:*)",
]

WORKING_DAY = [
    "git status",
    "git status --short",
    "git diff --stat",
    "git diff HEAD~1 -- src/",
    "git log --oneline -5",
    "git log --format='%h %s' -n 3",
    "pytest -q",
    'pytest tests/test_x.py -k "name and not slow"',
    "pytest -q > test.log 2>&1",
    "npm test",
    "npm test 2>&1 | tail -20",
    "FOO=bar npm test",
    "export CI=1 && npm test",
    "ls -la | grep x",
    "ls src/*.py",
    "ls | wc -l",
    "cd x && make",
    "cd src && ls",
    "(cd src && ls)",
    "mkdir -p build && cd build && make",
    "make 2>/dev/null",
    "[ -f Makefile ] && make",
    "if [ -d build ]; then ls build; fi",
    "python -m pytest tests/ -q 2>&1 | tail -5",
    "python -m pytest -x -q tests/test_a.py::test_b",
    "echo hi > out.txt",
    "echo hi >> logs/run.txt",
    'echo "$HOME"',
    "echo $((1 + 2))",
    "echo done; ls",
    "grep -rn foo src | head",
    "grep -rn 'def main' --include=*.py . | head -20",
    "grep -c x file || echo none",
    "cat README.md | wc -l",
    "cat > notes.txt <<'EOF'\nhello\nEOF",
    "find . -name '*.py' | sort | head",
    "find src -name '*.py' -exec grep -l TODO {} +",
    'for f in src/*.py; do wc -l "$f"; done',
    "tail -n 20 log.txt",
    "git diff | head -50",
    "ls -la && git status",
    "git status && git diff --stat && pytest -q",
    'grep -l TODO -r src | while IFS= read -r f; do wc -l "$f"; done',
    # global options that only change output, wrappers, programs that could run commands but don't here
    "git --no-pager log --oneline -3",
    "git --no-pager diff --stat",
    "npm --silent test",
    "timeout 60 pytest -q",
    "find src -name '*.py' | xargs grep -l TODO",
    "ls src | xargs -n1 echo",
    "sed -n '1,20p' README.md",
    "sed -i 's/foo/bar/g' src/a.py",
    "awk '{print $1}' logs/run.txt | sort | uniq -c",
    "awk -F: '$3 > 100 {print $1}' data.txt",
    "cp src/a.py src/b.py",
    "mkdir -p build && cp -r src build/",
    "tar czf build/src.tgz src",
    "python -m pytest -q 2>&1 | tee logs/test.log",
    "git diff > changes.patch",
    "sort -o sorted.txt data.txt",
    # arithmetic on values the line fixes itself
    'i=0; for f in src/*.py; do i=$((i + 1)); done; echo "$i files"',
    "n=3; echo $((n * 2))",
    "for ((k = 0; k < 3; k++)); do echo $k; done",
    '[[ $# -eq 0 ]] && echo "no arguments"',
    # other ecosystems (issue 30): every program here is known not to run a command from its arguments
    "cargo build",
    "cargo build --release",
    "cargo test -- --nocapture",
    "cargo clippy --all-targets -- -D warnings",
    "cargo fmt --check",
    "cargo run --bin app -- --help",
    "RUST_BACKTRACE=1 cargo test",
    "go build ./...",
    "go test -race -count=1 ./...",
    "go vet ./...",
    "go mod tidy",
    "gofmt -l .",
    "CGO_ENABLED=0 go build -o bin/app .",
    "npm run build",
    "npm run lint -- --fix",
    "npm install",
    "npm ci",
    "NODE_ENV=test npm test",
    "npx tsc --noEmit",
    "pip install -r requirements.txt",
    "pip install -e '.[dev]'",
    "python -m pip install -U pip",
    "make test",
    "make -j4 build",
    "make -C docs html",
    "make lint VERBOSE=1",
    "CI=1 make test",
    "ruff check .",
    "mypy src",
]
