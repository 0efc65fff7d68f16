"""The base of the background workers that send side requests beside the main conversation.

Three workers do: the session notes' updates (compact.compaction.notes_updater), context collapse's span summaries
(compact.workers.collapse_worker) and the compaction candidate prepared ahead (compact.workers.preparer). Each had
hand-rolled the same parts; they live here once:

- **One at a time.** ``start`` runs the work on a daemon thread (nobody waits for it, and it must not keep
  the process alive) and refuses while work is in flight: the caller decides whether the new work is
  dropped (collapse, the preparer: their next chance comes with the next response) or queued.
  ``QueuedWorker.submit`` queues it: the newest waits, merged with any that waited before it, and runs
  right after on the same thread (the notes: the update after a turn's last reply must never be lost).
- **A deadline.** ``start(..., timeout=)`` arms ``cancel`` to set itself after that many seconds: a
  request streamed with it is abandoned then (core.model.deadline is the same for work on the caller's
  thread).
- **Waiting.** ``join`` waits up to a deadline for the work in flight; a cancel event (the conversation's
  Ctrl-C) ends the wait early. ``exit_wait`` makes the process wait at exit for a kind of work (the
  notes: a print-mode run ends right after its last reply, just when an update starts).
- **Failures.** Each worker catches its own (what a failure costs differs: this cycle's candidate, one
  update, a span). An error that escapes anyway ends the work quietly and is kept in ``error``: a thread's
  traceback would land on the user's terminal. ``report_once`` warns the user once per session; a broken
  renderer must not kill the worker's thread.

``running`` is the state, not the thread's life: it is set when work starts and cleared, under ``lock``,
by the thread itself when its work is done, so a start that comes in between sees it either still
running (and queues) or done (and starts anew) — never a thread about to end that drops the new work.

What each worker decides stays in its own module: when work is due, what it sends, and whether what comes
back is still current (the preparer's cycle, the notes' marker, collapse's span check).
"""

from __future__ import annotations

import atexit
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Generic, TypeVar

J = TypeVar("J")

_exit_threads: list[threading.Thread] = []
_exit_waits: set[float] = set()  # the waits registered with atexit, one per length
_exit_lock = threading.Lock()


@dataclass(eq=False, kw_only=True)
class Worker:
    """One background worker's thread: at most one piece of work in flight."""

    thread_name: ClassVar[str] = "side-request"
    exit_wait: ClassVar[float] = 0.0  # seconds the process waits at exit for this kind's work (0: none)

    thread: threading.Thread | None = None
    running: bool = False
    # the work in flight's cancel event (armed with its deadline, when it has one)
    cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    reported: bool = False  # a failure was said this session (report_once)
    error: str = ""  # the last error that escaped the work (failure()); "" when none did
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def busy(self) -> bool:
        return self.running

    def start(self, work: Callable[..., None], *args: Any, timeout: float | None = None) -> bool:
        """Run ``work(*args)`` on the worker's thread unless work is in flight; True when it started.
        ``timeout``: seconds after which ``cancel`` sets itself."""
        with self.lock:
            if self.running:
                return False
            thread = self._spawn(work, args, timeout)
        self._launch(thread)
        return True

    def join(self, timeout: float | None = None, cancel: threading.Event | None = None) -> bool:
        """Wait up to ``timeout`` seconds (None: as long as it takes) for the work in flight, less when
        ``cancel`` is set meanwhile; True when none is running any more."""
        end = None if timeout is None else time.monotonic() + timeout
        while self.running:
            thread = self.thread
            left = None if end is None else end - time.monotonic()
            if thread is None or (left is not None and left <= 0) or (cancel is not None and cancel.is_set()):
                break
            if cancel is not None:  # look at the cancel event now and then
                left = 0.02 if left is None else min(left, 0.02)
            thread.join(left)
            if not thread.is_alive() and thread is self.thread:
                break  # ended without clearing ``running``: it never started, or died
        return not self.running

    def report_once(self, notice: Callable[[str, str], None], text: str) -> None:
        """Warn once per session (later failures are not reported)."""
        if self.reported:
            return
        self.reported = True
        try:
            notice(text, "warning")
        except Exception:  # noqa: BLE001 - a broken renderer must not kill the worker thread
            pass

    # -- the thread ----------------------------------------------------------------------------------
    def _spawn(
        self, work: Callable[..., None], args: tuple[Any, ...], timeout: float | None
    ) -> threading.Thread:
        """The thread for ``work``, with ``running`` set (the caller holds ``lock``)."""
        self.running = True
        self.cancel = threading.Event()
        self.thread = threading.Thread(
            target=self._body, args=(work, args, timeout, self.cancel), name=self.thread_name, daemon=True
        )
        return self.thread

    def _launch(self, thread: threading.Thread) -> None:
        if self.exit_wait > 0:
            _wait_at_exit_for(thread, self.exit_wait)
        thread.start()

    def _body(
        self, work: Callable[..., None], args: tuple[Any, ...], timeout: float | None, cancel: threading.Event
    ) -> None:
        timer = None
        if timeout is not None:
            timer = threading.Timer(timeout, cancel.set)
            timer.daemon = True
            timer.start()
        try:
            work(*args)
        except Exception as e:  # noqa: BLE001 - never a traceback on the user's terminal
            self.error = failure(e)
        finally:
            if timer is not None:
                timer.cancel()
            with self.lock:
                if self.thread is threading.current_thread():  # (a newer start owns it otherwise)
                    self.running = False


@dataclass(eq=False, kw_only=True)
class QueuedWorker(Worker, Generic[J]):
    """A worker whose work, when due while some runs, waits (only the newest) and runs right after."""

    pending: J | None = None

    def submit(self, job: J, run: Callable[[J], None], merge: Callable[[J | None, J], J]) -> bool:
        """Run ``run(job)`` on the worker's thread; while work is in flight the job waits instead,
        ``merge(waiting, job)`` taking the place of one already waiting. True when a thread started."""
        with self.lock:
            if self.running:
                self.pending = merge(self.pending, job)
                return False
            thread = self._spawn(self._drain, (job, run), None)
        self._launch(thread)
        return True

    def _drain(self, job: J, run: Callable[[J], None]) -> None:
        while True:
            run(job)
            with self.lock:
                waiting, self.pending = self.pending, None
                if waiting is None:
                    self.running = False  # under the lock: a submit from here on starts a new thread
                    return
            job = waiting


def failure(e: BaseException) -> str:
    """What a failed piece of work is recorded as: its message, else the kind of error."""
    return str(e).strip() or type(e).__name__


def wait_at_exit(seconds: float) -> None:
    """Wait (up to ``seconds`` in all) for the work of workers with an ``exit_wait`` still in flight."""
    end = time.monotonic() + seconds
    with _exit_lock:
        threads = list(_exit_threads)
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))


def _wait_at_exit_for(thread: threading.Thread, seconds: float) -> None:
    """Keep ``thread`` for the wait at process exit; the first of each length registers it with atexit."""
    with _exit_lock:
        if seconds not in _exit_waits:
            atexit.register(wait_at_exit, seconds)
            _exit_waits.add(seconds)
        _exit_threads[:] = [t for t in _exit_threads if t.is_alive()] + [thread]
