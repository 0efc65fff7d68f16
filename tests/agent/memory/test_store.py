"""The memory folder on disk: Claude Code's layout, a damaged or hand-edited MEMORY.md (a clear message,
nothing lost), a damaged record file, private files, and two sessions writing at once (real processes)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

from agent.memory import service
from agent.memory.entries import FORGOTTEN
from agent.memory.store import END, START
from tests.helpers.cli import ROOT
from tests.helpers.memory import NOW, Records, repo, settings_for

FILES = {
    "Makefile": "build:\n\tcc -o app app.c\n\ntest:\n\t./run-tests\n",
    "app.c": "int main(){return 0;}\n",
}


def written(tmp_path: Path) -> tuple[Path, Path, Path]:
    project = repo(tmp_path / "project", FILES)
    home = tmp_path / "home"
    r = Records().say("Always run make test before pushing.").run("make build").run("make test")
    service.remember(settings_for(project, home), r.messages, NOW)
    return project, home, service.folder(settings_for(project, home))


def test_claude_codes_layout_index_and_topic_files(tmp_path: Path) -> None:
    project, home, folder = written(tmp_path)
    assert (
        folder
        == home
        / ".compact-agent"
        / "projects"
        / "".join(c if c.isalnum() else "-" for c in str(project))
        / "memory"
    )
    index = (folder / "MEMORY.md").read_text()
    assert "- [build](commands.md#m-" in index and "— `make build` runs `cc -o app app.c`" in index
    topic = (folder / "commands.md").read_text()
    assert topic.startswith("---\nname: Build, test, lint and run\ndescription: ")
    assert "\ntype: project\n---" in topic
    assert "- evidence: `$ make build` → exit 0 (2026-11-29 10:02:00 UTC)" in topic
    rules = (folder / "rules.md").read_text()
    assert "type: feedback" in rules and 'the user said "Always run make test before pushing."' in rules


def test_files_are_private(tmp_path: Path) -> None:
    _, _, folder = written(tmp_path)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for f in folder.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


def test_the_users_own_lines_outside_the_markers_are_kept_and_served(tmp_path: Path) -> None:
    project, home, folder = written(tmp_path)
    index = folder / "MEMORY.md"
    index.write_text(
        "# My notes\n- the staging box is slow on Mondays\n\n" + index.read_text() + "\nfooter line\n"
    )
    loaded = service.load(settings_for(project, home), NOW)
    assert loaded.problems == []
    text = index.read_text()
    assert text.startswith("# My notes\n- the staging box is slow on Mondays\n") and text.endswith(
        "footer line\n"
    )
    assert "the staging box is slow on Mondays" in loaded.text and loaded.user_lines >= 2


def test_a_line_taken_out_forgets_its_memory_and_a_line_added_stays_the_users(tmp_path: Path) -> None:
    project, home, folder = written(tmp_path)
    index = folder / "MEMORY.md"
    lines = index.read_text().splitlines()
    lines = [line for line in lines if "[build]" not in line]
    lines.insert(lines.index(END), "- deploys go through the release script")
    index.write_text("\n".join(lines) + "\n")
    loaded = service.load(settings_for(project, home), NOW)
    assert loaded.problems == [
        "MEMORY.md was edited by hand: 1 memory forgotten (line taken out), 1 line of yours kept outside the "
        "agent's section"
    ]
    assert "command:build" not in {m.slot for m in loaded.memories}
    records = json.loads((folder / "memories.json").read_text())["memories"]
    assert {m["slot"]: m["state"] for m in records}["command:build"] == FORGOTTEN  # kept on record
    text = index.read_text()
    before, _, inside = text.partition(START)
    assert "- deploys go through the release script" in before  # nothing the user wrote is lost
    assert "[build]" not in inside and "deploys go through" in loaded.text
    # a later session seeing the same old records does not bring it back
    again = Records().say("Always run make test before pushing.").run("make build").run("make test")
    service.remember(settings_for(project, home), again.messages, NOW)
    assert "[build]" not in index.read_text().partition(START)[2]


def test_a_memory_md_that_is_not_utf8_is_copied_aside_whole_and_its_text_kept(tmp_path: Path) -> None:
    project, home, folder = written(tmp_path)
    index = folder / "MEMORY.md"
    raw = b"# mine\n- caf\xe9 opens at 8\n" + index.read_bytes()
    index.write_bytes(raw)
    loaded = service.load(settings_for(project, home), NOW)
    [problem] = loaded.problems
    assert problem.startswith(f"{index} is not valid UTF-8 (byte 12); the file as it was is kept at ")
    [kept] = folder.glob("MEMORY.md.damaged-*")
    assert kept.read_bytes() == raw and stat.S_IMODE(kept.stat().st_mode) == 0o600
    text = index.read_text()
    assert "- caf\ufffd opens at 8" in text and text.count(START) == 1 and text.count(END) == 1
    assert loaded.served == 3 and "`make build`" in loaded.text and loaded.user_lines == 2


def test_damaged_markers_keep_the_file_and_write_the_section_again(tmp_path: Path) -> None:
    project, home, folder = written(tmp_path)
    index = folder / "MEMORY.md"
    original = index.read_text().replace(END + "\n", "") + "- my own line\n"
    index.write_text(original)
    loaded = service.load(settings_for(project, home), NOW)
    [problem] = loaded.problems
    assert "the markers around the agent's section are damaged (1 start, 0 end)" in problem
    [kept] = folder.glob("MEMORY.md.damaged-*")
    assert kept.read_text() == original
    text = index.read_text()
    assert "- my own line" in text and text.count(START) == 1 and text.count(END) == 1


def test_a_memory_md_written_by_hand_from_scratch_is_kept_as_the_users(tmp_path: Path) -> None:
    project = repo(tmp_path / "project", FILES)
    home = tmp_path / "home"
    folder = service.folder(settings_for(project, home))
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text("- [Style](style.md) — tabs, not spaces\n")
    loaded = service.load(settings_for(project, home), NOW)
    assert loaded.problems == [] and loaded.user_lines == 1 and "tabs, not spaces" in loaded.text
    service.remember(settings_for(project, home), Records().run("make build").messages, NOW)
    text = (folder / "MEMORY.md").read_text()
    assert text.startswith("- [Style](style.md) — tabs, not spaces\n") and "`make build`" in text


def test_a_damaged_record_file_is_copied_aside_and_said(tmp_path: Path) -> None:
    project, home, folder = written(tmp_path)
    (folder / "memories.json").write_text('{"version": 1, "memories": [')
    loaded = service.load(settings_for(project, home), NOW)
    [problem] = loaded.problems
    assert problem.startswith(f"{folder / 'memories.json'} is damaged (JSONDecodeError); a copy is kept at ")
    [kept] = folder.glob("memories.json.damaged-*")
    assert kept.read_text() == '{"version": 1, "memories": ['


def test_a_hand_edited_topic_file_is_copied_aside(tmp_path: Path) -> None:
    project, home, folder = written(tmp_path)
    (folder / "commands.md").write_text((folder / "commands.md").read_text() + "\nmy addition\n")
    _, problems = service.remember(settings_for(project, home), Records().run("make test").messages, NOW)
    assert any("commands.md was edited by hand" in p for p in problems)
    [kept] = folder.glob("commands.md.damaged-*")
    assert "my addition" in kept.read_text()


WRITER = """
import sys
from datetime import datetime, timezone
from pathlib import Path
sys.path.insert(0, {root!r})
from agent.memory import service
from tests.helpers.memory import Records, settings_for
project, home, who = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
for i in range(15):
    r = Records().say(f"Always keep rule {{who}}-{{i}} in mind.")
    service.remember(settings_for(project, home), r.messages, datetime.now(timezone.utc))
"""


def test_two_sessions_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    project = repo(tmp_path / "project", FILES)
    home = tmp_path / "home"
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(root=str(ROOT)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, str(script), str(project), str(home), who], env=env)
        for who in ("a", "b")
    ]
    threads = [
        threading.Thread(
            target=lambda who=who: [
                service.remember(
                    settings_for(project, home), Records().say(f"Never forget rule {who}-{i}.").messages, NOW
                )
                for i in range(10)
            ]
        )
        for who in ("c", "d")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert [p.wait(120) for p in procs] == [0, 0]
    folder = service.folder(settings_for(project, home))
    records = json.loads((folder / "memories.json").read_text())["memories"]
    texts = {m["text"] for m in records}
    expected = {f"Always keep rule {w}-{i} in mind." for w in "ab" for i in range(15)}
    expected |= {f"Never forget rule {w}-{i}." for w in "cd" for i in range(10)}
    assert texts == expected
    index = (folder / "MEMORY.md").read_text()
    assert all(f'"{t}"' in index for t in expected)
    assert not list(folder.glob(".*.tmp")) and not list(folder.glob("*.damaged-*"))
    for f in folder.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600


def test_a_record_edited_into_nonsense_is_stale_not_a_crash(tmp_path: Path) -> None:
    project, home, folder = written(tmp_path)
    data = json.loads((folder / "memories.json").read_text())
    for m in data["memories"]:
        if m["slot"] == "command:build":
            m["check"] = {"kind": "make", "recipe": 3}  # no target, a recipe that is no list
    (folder / "memories.json").write_text(json.dumps(data))
    loaded = service.load(settings_for(project, home), NOW)
    build = next(m for m in loaded.memories if m.slot == "command:build")
    assert build.state == "stale" and build.reason.startswith("its check can't be made (KeyError")
    assert loaded.served == 2
