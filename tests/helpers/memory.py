"""The agent's own records, as a session's live list holds them, for the memory tests: commands with their
exit codes, edits, reads and the user's typed prompts (each with its time)."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agent.config.settings import Settings
from compact.compaction.ledger import FACTS_KEY
from core.messages import Message, assistant, tool_result_block, tool_results, user_prompt

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


class Records:
    def __init__(self, start: str = "2026-11-29T10:00:00Z") -> None:
        self.messages: list[Message] = []
        self.n = 0
        self.minute = 0
        self.start = start

    def _time(self) -> str:
        self.minute += 1
        return f"{self.start[:14]}{self.minute:02d}:00Z"

    def say(self, text: str) -> Records:
        self.messages.append(user_prompt(text).replace(timestamp=self._time()))
        return self

    def tool(self, name: str, args: dict[str, Any], output: str = "ok", code: int | None = None) -> Records:
        self.n += 1
        use_id = f"toolu_{self.n:04d}"
        self.messages.append(assistant([{"type": "tool_use", "id": use_id, "name": name, "input": args}]))
        failed = code not in (None, 0)
        text = f"{output}\nExit code {code}" if failed else output
        facts = {FACTS_KEY: {use_id: {"exitCode": 0 if code is None else code}}} if name == "Bash" else {}
        result = tool_results([tool_result_block(use_id, text, is_error=failed)])
        self.messages.append(result.replace(timestamp=self._time(), extra=facts))
        return self

    def run(self, command: str, code: int = 0, output: str = "done") -> Records:
        return self.tool("Bash", {"command": command}, output, code)

    def read(self, path: Path) -> Records:
        return self.tool("Read", {"file_path": str(path)}, "(the file)")

    def edit(self, path: Path, old: str, new: str) -> Records:
        path.write_text(path.read_text().replace(old, new))  # what the Edit tool did on disk
        return self.tool("Edit", {"file_path": str(path), "old_string": old, "new_string": new}, "edited")


def repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True)
    return path


def settings_for(project: Path, home: Path, **more: Any) -> Settings:
    return Settings(cwd=project, home=home / ".compact-agent", **more)
