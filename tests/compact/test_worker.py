"""The background-worker base (compact.context.worker) on real threads: one piece of work at a time, the queue of
one, the deadline, the waits, the failure said once. Every wait is on a condition with a deadline."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import ClassVar

from compact.context import worker as base
from compact.context.worker import QueuedWorker, Worker

WAIT = 10.0  # seconds any condition below may take on a loaded machine before the test fails


@dataclass(eq=False)
class Gate:
    """Work that holds its thread until released, saying when it began and on which thread it ran."""

    began: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def __call__(self, *args: object) -> None:
        self.threads.append(threading.current_thread())
        self.began.set()
        assert self.release.wait(WAIT)


@dataclass(eq=False)
class Named(Worker):
    thread_name: ClassVar[str] = "test-worker"


def test_one_piece_of_work_at_a_time_on_a_named_daemon_thread() -> None:
    w, gate = Named(), Gate()
    assert not w.busy and w.thread is None
    assert w.start(gate, "a") is True
    assert gate.began.wait(WAIT)
    assert w.busy and w.running
    assert w.thread is not None and w.thread.name == "test-worker" and w.thread.daemon
    assert gate.threads == [w.thread]

    second = Gate()
    assert w.start(second) is False  # refused while one is in flight, never queued
    gate.release.set()
    assert w.join(WAIT)
    assert not w.busy and not second.began.is_set()

    assert w.start(second) is True  # done: the next one starts, on a thread of its own
    second.release.set()
    assert w.join(WAIT)
    assert second.threads and second.threads[0] is not gate.threads[0]


def test_join_gives_up_at_its_deadline_and_when_cancelled() -> None:
    w, gate = Named(), Gate()
    w.start(gate)
    assert gate.began.wait(WAIT)
    assert w.join(0.01) is False  # still running at the deadline
    cancel = threading.Event()
    cancel.set()
    assert w.join(None, cancel=cancel) is False  # Ctrl-C ends the wait, not the work
    assert w.busy
    gate.release.set()
    assert w.join(None, cancel=threading.Event()) is True
    assert w.join(0) is True  # nothing in flight: no wait


def test_a_deadline_sets_the_work_s_cancel_event() -> None:
    w = Named()
    seen: list[bool] = []

    def request() -> None:  # what a streamed side request does with its cancel event
        seen.append(w.cancel.wait(WAIT))

    assert w.start(request, timeout=0.05)
    assert w.join(WAIT)
    assert seen == [True]

    untimed = Gate()
    w.start(untimed)
    assert untimed.began.wait(WAIT)
    assert not w.cancel.is_set()  # each start has a fresh event; no deadline, none set
    untimed.release.set()
    assert w.join(WAIT) and not w.cancel.is_set()


def test_an_error_that_escapes_the_work_ends_it_quietly() -> None:
    w = Named()

    def broken() -> None:
        raise ValueError("disk full")

    assert w.start(broken)
    assert w.join(WAIT)
    assert w.error == "disk full" and not w.busy
    assert base.failure(RuntimeError()) == "RuntimeError"


def test_a_failure_is_said_once_and_a_broken_renderer_is_survived() -> None:
    w = Named()
    said: list[tuple[str, str]] = []
    w.report_once(lambda text, level: said.append((text, level)), "first")
    w.report_once(lambda text, level: said.append((text, level)), "second")
    assert said == [("first", "warning")]

    def broken(text: str, level: str) -> None:
        raise OSError("terminal gone")

    Named().report_once(broken, "anything")  # raises nothing


@dataclass(eq=False)
class Queue(QueuedWorker[str]):
    thread_name: ClassVar[str] = "test-queue"


def joined(waiting: str | None, job: str) -> str:
    return f"{waiting}+{job}" if waiting else job


def test_work_due_while_one_runs_waits_merged_and_runs_after_it_on_the_same_thread() -> None:
    q = Queue()
    ran: list[tuple[str, threading.Thread]] = []
    first = Gate()

    def run(job: str) -> None:
        if job == "a":
            first()
        ran.append((job, threading.current_thread()))

    assert q.submit("a", run, joined) is True
    assert first.began.wait(WAIT)
    assert q.submit("b", run, joined) is False
    assert q.submit("c", run, joined) is False
    assert q.pending == "b+c"  # one waits; merge decides what it becomes
    first.release.set()
    assert q.join(WAIT)
    assert [job for job, _ in ran] == ["a", "b+c"]
    assert ran[0][1] is ran[1][1] is first.threads[0]
    assert q.pending is None and not q.busy


def test_work_submitted_after_the_queue_drained_starts_a_new_thread() -> None:
    q = Queue()
    ran: list[str] = []
    for job in ("a", "b"):  # one after the other: each drains the queue before the next comes
        assert q.submit(job, ran.append, joined) is True
        assert q.join(WAIT)
    assert ran == ["a", "b"]


def test_no_submitted_work_is_lost_when_submits_race_the_end_of_a_drain() -> None:
    """Many threads submit while the worker drains: every job runs exactly once (the state flips under
    the lock, so a submit never lands on a thread about to end)."""
    q = Queue()
    ran: list[str] = []
    lock = threading.Lock()

    def run(job: str) -> None:
        with lock:
            ran.extend(job.split("+"))

    def submitter(n: int) -> None:
        for i in range(200):
            q.submit(f"{n}.{i}", run, joined)

    threads = [threading.Thread(target=submitter, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert q.join(WAIT)
    assert sorted(ran) == sorted(f"{n}.{i}" for n in range(4) for i in range(200))


@dataclass(eq=False)
class KeptAtExit(Worker):
    thread_name: ClassVar[str] = "test-exit"
    exit_wait: ClassVar[float] = 20.0  # the notes' (one atexit wait of that length is registered)


def test_the_process_waits_at_exit_for_a_kind_that_asks_for_it_within_its_deadline() -> None:
    w, gate = KeptAtExit(), Gate()
    w.start(gate)
    assert gate.began.wait(WAIT)
    base.wait_at_exit(0.01)  # gives up at its deadline, work still running
    assert w.busy and w.thread is not None and w.thread.is_alive()
    gate.release.set()
    base.wait_at_exit(WAIT)
    assert not w.thread.is_alive() and not w.busy
