"""The one process runner (tools.process.spawn) with real children: streams, stdin, when a child is
done (at exit or at end of output), cancel and timeout stopping the whole group; and the spill buffer's
secrets and its lenient mode (what hooks use)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers.cli import wait_for
from tools.process import spawn
from tools.process.spill import SpillingOutput


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def _run(script: str, tmp_path: Path, **options: object) -> tuple[spawn.Finished, bytes, bytes]:
    out, err = bytearray(), bytearray()
    options.setdefault("timeout", 30)
    finished = spawn.run(
        script,
        cwd=tmp_path,
        env=None,
        stdout=out.extend,
        stderr=err.extend,
        **options,  # type: ignore[arg-type]
    )
    return finished, bytes(out), bytes(err)


def test_stdin_is_fed_and_the_streams_are_kept_apart(tmp_path: Path) -> None:
    assert _run("cat; echo oops >&2; exit 3", tmp_path, stdin=b"payload") == (
        spawn.Finished(3, None),
        b"payload",
        b"oops\n",
    )


def test_without_a_stderr_sink_stderr_joins_stdout_and_stdin_is_closed(tmp_path: Path) -> None:
    out = bytearray()
    finished = spawn.run(
        'echo one; echo two >&2; read -r line || echo "no stdin"; echo "$1"',
        ["an arg"],
        cwd=tmp_path,
        env=None,
        stdout=out.extend,
        timeout=30,
    )
    assert (finished, bytes(out)) == (spawn.Finished(0, None), b"one\ntwo\nno stdin\nan arg\n")


def test_until_exit_returns_while_a_background_job_still_holds_the_pipe(tmp_path: Path) -> None:
    finished, out, _ = _run("sleep 60 & echo $! > bg.pid; echo started", tmp_path, until="exit")
    pid = int((tmp_path / "bg.pid").read_text())
    try:
        assert (finished, out) == (spawn.Finished(0, None), b"started\n")
        assert _alive(pid)  # returned without waiting for it; the watchdog still has its group
    finally:
        os.kill(pid, 9)


def test_until_eof_a_finished_shell_is_not_a_timeout_and_its_leftovers_die(tmp_path: Path) -> None:
    finished, out, _ = _run("sleep 60 & echo $! > bg.pid; echo started", tmp_path, until="eof", timeout=0.5)
    assert (finished, out) == (spawn.Finished(0, None), b"started\n")
    assert wait_for(lambda: not _alive(int((tmp_path / "bg.pid").read_text())), timeout=30)


def test_a_timeout_stops_the_whole_group_even_what_ignores_sigterm(tmp_path: Path) -> None:
    script = "trap '' TERM; (trap '' TERM; sleep 60) & echo $! > child.pid; echo up; wait"
    finished, out, _ = _run(script, tmp_path, until="exit", timeout=0.5, grace=0.1)
    assert (finished.stopped, finished.exit_code, out) == ("timeout", -9, b"up\n")
    assert wait_for(lambda: not _alive(int((tmp_path / "child.pid").read_text())), timeout=30)


def test_cancel_stops_the_child_and_says_so(tmp_path: Path) -> None:
    asked = []

    def cancel() -> bool:
        asked.append(1)
        return (tmp_path / "child.pid").exists()

    finished, _, _ = _run("echo $$ > child.pid; sleep 60", tmp_path, cancel=cancel)
    assert finished.stopped == "cancelled" and finished.exit_code == -9 and asked
    assert wait_for(lambda: not _alive(int((tmp_path / "child.pid").read_text())), timeout=30)


def test_a_child_that_cannot_start_raises_and_leaves_no_gate_open(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    try:
        spawn.run("true", cwd=tmp_path / "missing", env=None, stdout=lambda _: None, timeout=5)
    except FileNotFoundError:
        pass
    else:
        raise AssertionError("a missing working directory was not reported")
    assert len(os.listdir("/proc/self/fd")) == before


def test_secrets_are_redacted_in_the_file_even_split_across_writes(tmp_path: Path) -> None:
    secret = "sk-ant-secret-0123456789"
    data = ("x" * 7 + secret + "\n") * 50
    with SpillingOutput(tmp_path, "hook", 64, spill_after=16, secrets=(secret,)) as out:
        for i in range(0, len(data), 5):  # every cut through the secret
            out.write(data[i : i + 5].encode())
    assert out.path is not None and out.total_bytes == len(data)
    assert out.path.read_text() == data.replace(secret, "[redacted API key]")


def test_a_lenient_buffer_says_why_it_could_not_save(tmp_path: Path) -> None:
    (tmp_path / "not-a-dir").write_text("")
    out = SpillingOutput(tmp_path / "not-a-dir", "hook", 8, strict=False)
    out.write(b"0123456789")
    out.close()
    assert (out.path, bytes(out.head), out.total_bytes) == (None, b"01234567", 10)
    assert out.problem == "Not a directory"
