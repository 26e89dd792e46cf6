"""Blocking calls run on a helper thread and waited for so that a cancel (the kill switch) or a deadline wins.

An adapter's call (a model request, a desktop command, an approver program) may hang for minutes; the
thread that waits for it must still be able to give up at once. The call runs as a ``Job`` on a daemon
thread; the waiter stops waiting when it is over, when a cancel is set or when a deadline passes. A job
given up on is abandoned, not stopped: whatever it still does ends with the adapter's own timeout, or
because the adapter was stopped or closed in the meantime.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# seconds between looks at a cancel event that nobody can make wake the waiter
POLL = 0.05


class Job[T]:
    """One call to make on another thread: ``done`` is set once it returned or raised."""

    def __init__(self, fn: Callable[..., T], *args: Any) -> None:
        self._fn = fn
        self._args = args
        self._value: T | None = None
        self._error: BaseException | None = None
        self.done = threading.Event()

    def run(self, before_done: Callable[[], None] | None = None) -> None:
        """Make the call (on the helper thread); ``before_done`` runs just before ``done`` is set."""
        try:
            self._value = self._fn(*self._args)
        except BaseException as exc:
            self._error = exc
        finally:
            if before_done is not None:
                before_done()
            self.done.set()

    def wait(self, cancel: threading.Event | None = None, timeout: float | None = None) -> bool:
        """True once the call is over; False as soon as ``cancel`` is set or ``timeout`` seconds passed."""
        if cancel is None:
            return self.done.wait(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.done.is_set():
            if cancel.is_set() or (deadline is not None and time.monotonic() > deadline):
                return False
            self.done.wait(POLL)
        return True

    def result(self) -> T:
        """The call's value, or its exception raised again. Only once ``done`` is set."""
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def spawn(job: Job[Any], name: str) -> None:
    """Run ``job`` on a new daemon thread (one that never holds up the interpreter's exit)."""
    threading.Thread(target=job.run, name=name, daemon=True).start()


class Worker:
    """Runs jobs one at a time on a daemon thread that is reused from one job to the next.

    Reused because a run makes thousands of short calls and a thread per call costs more than the call.
    A job that hangs keeps its thread; the next job gets a fresh one (the hung one is abandoned).
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[Job[Any] | None] | None = None
        self._busy = False

    def _spawn(self) -> queue.SimpleQueue[Job[Any] | None]:
        q: queue.SimpleQueue[Job[Any] | None] = queue.SimpleQueue()

        def loop() -> None:
            while True:
                job = q.get()
                if job is None:
                    return
                # Idle before ``done`` is set: the waiter's next job then finds this thread free.
                job.run(before_done=self._idle)

        threading.Thread(target=loop, name=self._name, daemon=True).start()
        return q

    def _idle(self) -> None:
        self._busy = False

    def submit(self, job: Job[Any]) -> None:
        """Start ``job`` on the worker's thread, or on a fresh one while the last job still runs."""
        if self._queue is None or self._busy:
            self._queue = self._spawn()
        self._busy = True
        self._queue.put(job)

    def close(self) -> None:
        """Let the thread end once idle (a thread still inside a hung job is left to it)."""
        if self._queue is not None and not self._busy:
            self._queue.put(None)


class GiveWay:
    """Background work that gives way to the thread a person watches. That thread ``hold``s it while it
    shows something (a replay's step) and lets it ``go`` once that is on screen; background loops call
    ``wait`` between slices of their work and block while it is held. In one process the background
    threads share the interpreter with it: left running, they made a step of a replay still reading a
    100,000-step log take several times as long, seconds at worst (docs/benchmarks.md, replay). A hold
    lapses after ``lapse`` seconds, so a ``go`` that never comes never stops the work for good."""

    def __init__(self, lapse: float = 1.0) -> None:
        self.lapse = lapse
        self._until = 0.0
        self._changed = threading.Condition()
        self.waits = 0  # slices that waited for a hold (the tests)

    def hold(self) -> None:
        with self._changed:
            self._until = time.monotonic() + self.lapse

    def go(self, after: float = 0.0) -> None:
        """Let the work go, ``after`` seconds from now (at once by default)."""
        with self._changed:
            self._until = time.monotonic() + after if after > 0 else 0.0
            self._changed.notify_all()

    @property
    def held(self) -> bool:
        return self._until > time.monotonic()

    def wait(self) -> None:
        """Return once nothing holds the work (at once when nothing does)."""
        if not self.held:
            return
        with self._changed:
            self.waits += 1
            while (left := self._until - time.monotonic()) > 0:
                self._changed.wait(left)


_pacing = threading.local()


@contextmanager
def paced(way: GiveWay) -> Iterator[None]:
    """Long reads in this thread (``give_way``: a verification's pass over a log) give way to ``way``
    between blocks while the block runs."""
    before = getattr(_pacing, "way", None)
    _pacing.way = way
    try:
        yield
    finally:
        _pacing.way = before


def give_way() -> bool:
    """Wait while this thread's ``paced`` work is held (at once outside one); whether it is paced."""
    way: GiveWay | None = getattr(_pacing, "way", None)
    if way is None:
        return False
    way.wait()
    return True
