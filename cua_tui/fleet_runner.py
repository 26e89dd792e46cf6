"""Many runs, one approval queue: ``cua-tui fleet``. Every run stays exactly the run it would be alone.

Each task becomes ``RunOptions`` made by the one builder; the fleet adds a listener on each run's events
and a scheduler that keeps at most ``concurrency`` runs going, one thread per run. Why threads, how the
fleet always ends, and the threading rules for a front end (``FleetControl``): docs/commands/fleet.md and
docs/development.md.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from .build import BuildError, Run, RunOptions, build_run
from .core import events as ev
from .core import fleet_queue as fq
from .core.drills import revealed
from .core.fleet_queue import ApprovalQueue, FleetListener, QueueItem, RunRow, RunState, priority
from .core.grouping import Likeness, fingerprint, likeness, never
from .core.imaging import ImageRefused, ScreenLimit, decode_screen
from .core.policy import Policy
from .core.ports import Answer, AnswerDetails, DecisionRequest
from .core.run_view import RunView
from .core.rundir import new_run_id, write_json_atomic
from .core.stamps import iso_time
from .core.supervisor import RunResult
from .core.takeover import TAKEOVER_NOTE, Desk
from .core.tasks import TasksFile, TaskSpec
from .core.text import failure, one_line
from .desktops import runs_here
from .headless_approvers import InOrder

if TYPE_CHECKING:
    from PIL import Image

KILLED_BY = "human (fleet)"
# <runs-dir>/fleet.json: every fleet of the runs directory, by fleet id (DESIGN.md)
MANIFEST = "fleet.json"
# a fleet.json larger than this is not read back (it is set aside)
MANIFEST_CAP = 64 * 1024 * 1024
# why a closed request closed, for the refusal of a late answer (bounded)
_CLOSED_KEPT = 100_000
# seconds kill_all waits for the kill switches it pressed (each returns at once, unless wedged)
KILL_WAIT = 2.0
# seconds, beyond a run's stop timeout, for a killed run to seal itself
SEAL_GRACE = 5.0
# seconds a listener that does not return may hold up the fleet's end after a kill_all
LISTENER_GRACE = 2.0
# seconds to wait for another process's lock on fleet.json before giving up
MANIFEST_LOCK_WAIT = 10.0

# Local desktops: each counted as 300 MB (226-263 MB measured) and 3 per CPU, from `python -m
# bench fleet` on two machines; the figures are in docs/benchmarks.md, "Local desktops at
# once".
LOCAL_DESKTOP_BYTES = 300 * 1024 * 1024
LOCAL_DESKTOPS_PER_CPU = 3
# of the machine's memory, for desktops: the rest is the controller's and others'
LOCAL_MEMORY_SHARE = 0.5
DEFAULT_CONCURRENCY = 8  # other backends (remote sandboxes, sim, dry)
SCREENS_KEPT = 8  # decoded screens kept to work out requests' likeness (core/grouping.py)


@dataclass(frozen=True)
class FleetTask:
    """One task of a fleet: its unique name and the options of its run."""

    name: str
    options: RunOptions


def task_options(spec: TaskSpec, tasks: TasksFile, base: RunOptions) -> RunOptions:
    """The run options of one task: the command line's ``base``, with what the task sets itself on top
    (the tasks file is the more specific). Paths in the file are relative to the file's folder."""
    agent = base.agent
    if spec.agent is not None:
        agent = spec.agent
        if agent.startswith("script:"):
            agent = "script:" + tasks.path_of(agent.removeprefix("script:"))
    return replace(
        base,
        task=spec.task or base.task,
        backend=spec.backend or base.backend,
        lab=spec.lab if spec.lab is not None or spec.url is not None else base.lab,
        url=spec.url if spec.url is not None or spec.lab is not None else base.url,
        agent=agent,
        model=spec.model if spec.model is not None else base.model,
        policy_path=Path(tasks.path_of(spec.policy)) if spec.policy is not None else base.policy_path,
        max_turns=spec.max_turns if spec.max_turns is not None else base.max_turns,
        max_steps=spec.max_steps if spec.max_steps is not None else base.max_steps,
        deadline=spec.deadline_seconds if spec.deadline_seconds is not None else base.deadline,
        decision_timeout=spec.decision_timeout if spec.decision_timeout is not None else base.decision_timeout,
        allow_domains=(*base.allow_domains, *spec.allow_domains),
        drill_rate=drill_rate if (drill_rate := _drill_rate(spec)) is not None else base.drill_rate,
    )


def _drill_rate(spec: TaskSpec) -> float | None:
    """The task's own drill rate (None: it sets none, and the analyst's settings apply)."""
    from .core.drills import rate_of

    if spec.drill_rate is None and spec.drill_every is None:
        return None
    return rate_of(spec.drill_rate, spec.drill_every, spec.name)


def local_desktop_limit(mem_total: int | None = None, cpus: int | None = None) -> int:
    """How many local desktops fit on this machine at once: by memory and by CPU, the smaller."""
    if mem_total is None:
        mem_total = memory_total()
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    by_memory = int(mem_total * LOCAL_MEMORY_SHARE // LOCAL_DESKTOP_BYTES)
    return max(1, min(by_memory, cpus * LOCAL_DESKTOPS_PER_CPU))


def memory_total() -> int:
    """This machine's memory in bytes (/proc/meminfo; 4 GiB where it cannot be read)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 4 * 1024**3


def concurrency_for(backend: str, asked: int | None, tasks: int) -> tuple[int, str | None]:
    """The concurrency to use, and a one-line message when the one asked for was lowered.

    On backends whose desktops run on this machine, asking for more than fit is clamped, not refused:
    concurrency is a matter of throughput, and every task still runs, a few at a time, instead of all at
    once on a machine where their steps would slow down and their deadlines pass."""
    if runs_here(backend):  # its record says its desktops run on this machine
        limit = local_desktop_limit()
        if asked is not None and asked > limit:
            return limit, (
                f"--concurrency {asked}: this machine fits {limit} {backend} desktops at once "
                f"(~{LOCAL_DESKTOP_BYTES // 2**20} MB each, {LOCAL_DESKTOPS_PER_CPU} per CPU); "
                f"running {limit} at a time"
            )
        return max(1, min(asked or limit, tasks)), None
    return max(1, min(asked or DEFAULT_CONCURRENCY, tasks)), None


# ------------------------------------------------------------------------------------------------
# The runner
# --------------------------------------------------------------------------------------------------
@dataclass
class _Entry:
    """One task of the fleet, as the runner keeps it (the lock guards view, watchers and row)."""

    name: str
    options: RunOptions
    row: RunRow
    view: RunView = field(default_factory=RunView)
    lock: threading.Lock = field(default_factory=threading.Lock)
    run: Run | None = None
    # its run_started event is out (a kill before that waits for it)
    started: bool = False
    kill_pending: str | None = None
    cancelled: bool = False  # killed before it was built: it never starts
    watchers: list[Callable[[ev.Stamped], None]] = field(default_factory=list)
    # the current turn's verdict rules
    rules: dict[tuple[int, int], str] = field(default_factory=dict)
    finished: threading.Event = field(default_factory=threading.Event)


def _check_tasks(tasks: Sequence[FleetTask], concurrency: int) -> None:
    """A fleet's tasks and concurrency, refused before anything is built."""
    if not tasks:
        raise ValueError("a fleet needs at least one task")
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise ValueError("task names must be unique")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")


class Fleet:
    """Runs ``tasks`` (each through ``build_run``), at most ``concurrency`` at a time, with one queue of
    their pending decisions. Implements core.fleet.FleetControl; see the module's threading rules.

    ``start()`` returns at once; ``wait()`` blocks until every task ended; ``run()`` does both. Each task's
    options are used as given (their ``decisions`` says who answers: ``tui``, the handshake, makes the
    queue answerable with ``answer``; a headless rule or ``approver:CMD`` answers by itself, and the queue
    then only shows what waits; ``in_order`` asks those approvers one at a time, in the queue's order). The
    fleet adds its id to every run's run.json (``fleet``, ``fleet_task``) and keeps its entry in the
    manifest ``<runs-dir>/fleet.json`` (every fleet of the runs directory, by id)."""

    def __init__(
        self,
        tasks: Sequence[FleetTask],
        *,
        runs_dir: Path,
        concurrency: int,
        backend: str = "",
        tasks_source: str = "",
        tasks_sha256: str = "",
        name: str = "",
        fleet_id: str | None = None,
        builder: Callable[[RunOptions], Run] = build_run,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        check: bool = True,
        in_order: InOrder | None = None,
    ) -> None:
        _check_tasks(tasks, concurrency)
        names = [t.name for t in tasks]
        self.fleet_id = fleet_id or f"fleet-{new_run_id()}"
        self.runs_dir = Path(runs_dir).expanduser()
        self.concurrency = concurrency
        self.backend = backend or tasks[0].options.backend
        self.name = name
        self.tasks_source = tasks_source
        self.tasks_sha256 = tasks_sha256
        self._builder = builder
        self._clock = clock
        self._wall_clock = wall_clock
        self._check = check
        self._entries: dict[str, _Entry] = {}
        for task in tasks:
            options = task.options
            target = f"lab {options.lab}" if options.lab else options.url or ""
            row = RunRow(task.name, options.backend, target=target, allowed=tuple(options.allow_domains))
            self._entries[task.name] = _Entry(task.name, task.options, row)
        self._order = names
        self._lock = threading.Lock()  # queue, closed, listeners, counters
        self._start_lock = threading.Lock()  # building a run vs. kill_all
        self._manifest_lock = threading.Lock()
        self._queue = ApprovalQueue()
        self._closed: dict[int, str] = {}
        # the drills up, by run, turn and position: their reveal closes them, answered or not
        self._drills: dict[tuple[str, int, int], QueueItem] = {}
        self._tickets = itertools.count(1)
        # decoded screens and their row and column digests (core/grouping.py), by SHA-256
        self._screens: OrderedDict[str, tuple[Image.Image, tuple[bytes, bytes]]] = OrderedDict()
        self._screens_lock = threading.Lock()
        self._listeners: list[FleetListener] = []
        self._slots = threading.Semaphore(concurrency)
        self._stopping = False
        self._all_done = threading.Event()
        self._remaining = len(tasks)
        self._events: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._dispatcher: threading.Thread | None = None
        self._scheduler: threading.Thread | None = None
        self.started_at: float | None = None
        self.manifest_path = self.runs_dir / MANIFEST
        # why fleet.json could not be written last time, if it could not
        self.manifest_problem: str | None = None
        self._reaper: threading.Thread | None = None
        # stop_waiting: the runs still sealing are waited for no longer
        self._give_up = threading.Event()
        # a headless fleet's: its runs' approvers asked one at a time, in the queue's order
        self._in_order = in_order
        if in_order is not None:
            in_order.attach(self)

    # ---------------------------------------------------------------------------------------------
    # Life cycle
    # ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Write the manifest and start the first runs; returns at once. Raises OSError when the runs
        directory cannot be written (nothing started then)."""
        if self._scheduler is not None:
            return
        self.started_at = self._wall_clock()
        self._write_manifest()
        self._dispatcher = threading.Thread(target=self._dispatch, name="cua-fleet-events", daemon=True)
        self._dispatcher.start()
        self._scheduler = threading.Thread(target=self._schedule, name="cua-fleet", daemon=True)
        self._scheduler.start()

    def wait(self, timeout: float | None = None) -> bool:
        """True once every task ended and the listeners were told ``FleetFinished`` (after ``kill_all``, a
        listener that does not return within ``LISTENER_GRACE`` is not waited for)."""
        return self._all_done.wait(timeout)

    def run(self) -> list[RunRow]:
        """Start, wait for every task, and return the rows."""
        self.start()
        self.wait()
        return self.rows()

    @property
    def done(self) -> bool:
        return self._all_done.is_set()

    def now(self) -> float:
        """The fleet's clock (monotonic seconds): what ``QueueItem.asked_at`` is measured on."""
        return self._clock()

    # the runs are this process's: leaving its TUI kills them
    owns_runs = True

    def link(self) -> str:
        return ""  # in this process: always reachable

    @property
    def drills_on(self) -> bool:
        """A run of the fleet was built with drills (its task's rate, else the settings')."""
        with self._lock:
            runs = [entry.run for entry in self._entries.values()]
        return any(run is not None and run.supervisor.config.drills is not None for run in runs)

    # ---------------------------------------------------------------------------------------------
    # What a front end reads
    # ----------------------------------------------------------------------------------------------
    def subscribe(self, listener: FleetListener) -> Callable[[], None]:
        """Be told of every change (core.fleet events) on the dispatcher thread; returns the unsubscribe."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def rows(self) -> list[RunRow]:
        """One row per task, in the tasks file's order."""
        return [self._entries[name].row for name in self._order]

    def row(self, task: str) -> RunRow:
        return self._entry(task).row

    def queue(self) -> list[QueueItem]:
        """The pending requests of every run, first to decide first (risk, then age)."""
        with self._lock:
            return self._queue.items()

    def looking(self, tickets: Collection[int]) -> None:
        """One analyst's fleet: nobody else to tell what is on the panel."""

    def readers(self) -> Mapping[int, tuple[str, ...]]:
        return {}

    def set_aside(self, item: QueueItem, minutes: float) -> str | None:
        return "set aside is a team's queue's: one analyst's fleet has nobody else to take the request meanwhile"

    def run_of(self, task: str) -> Run | None:
        """The task's built run (None before it started): its supervisor, approver and run directory."""
        return self._entry(task).run

    def policy(self, task: str) -> Policy | None:
        """The policy the task's run classifies by (None before it started): an edit is checked by it."""
        run = self.run_of(task)
        return run.supervisor.config.policy if run is not None else None

    def desk(self, task: str) -> Desk | None:
        """The task's run's desktop for a takeover (None before it started): only that run pauses."""
        run = self.run_of(task)
        return run.supervisor if run is not None else None

    def view(self, task: str) -> RunView:
        """A private copy of the task's RunView (its state after the events so far)."""
        entry = self._entry(task)
        with entry.lock:
            return _copy_view(entry.view)

    def watch(self, task: str, listener: Callable[[ev.Stamped], None]) -> tuple[RunView, Callable[[], None]]:
        """The task's RunView now (a copy) and, from the next event on, every event of its run, told on the
        dispatcher thread (a run's full live view). Returns (view, unwatch)."""
        entry = self._entry(task)
        with entry.lock:
            entry.watchers.append(listener)
            snapshot = _copy_view(entry.view)

        def unwatch() -> None:
            with entry.lock:
                if listener in entry.watchers:
                    entry.watchers.remove(listener)

        return snapshot, unwatch

    # ---------------------------------------------------------------------------------------------
    # What a front end does
    # ----------------------------------------------------------------------------------------------
    def answer_many(
        self, items: Sequence[QueueItem], answer: Answer, **details: Unpack[AnswerDetails]
    ) -> list[str | None]:
        """Each item answered as its own decision, in order."""
        return [self.answer(item, answer, **details) for item in items]

    def answer(self, item: QueueItem, answer: Answer, **details: Unpack[AnswerDetails]) -> str | None:
        """Answer the request of ``item``, and only it. None when the answer was taken; otherwise why it
        was refused (the request is no longer pending: answered, decided, its run killed or ended), and
        nothing was applied anywhere."""
        with self._lock:
            if item not in self._queue:
                return f"no longer pending: {self._closed.get(item.ticket, 'not a request of this fleet')}"
            entry = self._entries.get(item.task)
            run = entry.run if entry is not None else None
            if run is None or run.run_id != item.run_id:  # cannot happen for an item of this queue
                return "no longer pending: not a request of this fleet"
            handshake = run.handshake
            if handshake is None:
                return f"decided by this fleet's rule ({run.options.decisions}), not here"
            if run.supervisor.finished.is_set() or run.supervisor.ending:
                return "no longer pending: its run is ending"
            # The handshake takes the answer only for this very request object (identity), pending
            # or about to be asked: never for the run's next request, never for another run's.
            if not handshake.answer(answer, item.request, **details):
                return "no longer pending: the run moved on"
            why = TAKEN_OVER if details.get("takeover") else "answered"
            self._close(item, why)
        self._post(fq.RequestClosed(item, why))
        return None

    def kill(self, task: str, by: str = KILLED_BY) -> bool:
        """The kill switch of one task's run (a task not started yet never starts). False when it had ended."""
        entry = self._entry(task)
        with self._start_lock:
            if entry.run is None:
                if entry.row.ended or entry.cancelled:
                    return False
                entry.cancelled = True
                cancelled = True
            else:
                cancelled = False
        if cancelled:
            self._end_unstarted(entry, "killed", f"killed by {by} before it started")
            return True
        run = entry.run
        assert run is not None
        if run.supervisor.finished.is_set():
            return False
        with entry.lock:
            if not entry.started:
                # its first record is not out yet: the kill follows it (see _on_event)
                entry.kill_pending = by
                return True
        run.supervisor.kill(by=by)
        return True

    def kill_all(self, by: str = KILLED_BY) -> None:
        """Kill every run and start nothing more; each run ends ``killed`` and sealed (``wait`` for it). The
        fleet ends within every run's stop timeout and ``SEAL_GRACE`` even if a run's thread is wedged."""
        # first: a builder holding the start lock must not hold up the fleet's end
        self._start_reaper()
        with self._start_lock:
            self._stopping = True  # nothing is built from here on
        # Each run's kill switch on a thread of its own: one that a wedged run holds up (a listener
        # that never returns holds its emit lock) must not keep the other runs going.
        pressing = []
        for name in self._order:
            entry = self._entries[name]
            if entry.row.ended:
                continue
            if entry.run is None:
                self.kill(name, by=by)
                continue
            thread = threading.Thread(target=self._quietly, args=(self.kill, name, by), name="cua-kill", daemon=True)
            thread.start()
            pressing.append(thread)
        deadline = time.monotonic() + KILL_WAIT
        for thread in pressing:
            thread.join(max(0.0, deadline - time.monotonic()))

    def stop_waiting(self) -> None:
        """After ``kill_all``: wait no longer for the runs still sealing (each is recorded as not sealed now)."""
        self._start_reaper()
        self._give_up.set()

    def revoke(self, task: str, grant_id: int) -> bool:
        """End a scoped approval of the task's run."""
        run = self._entry(task).run
        return run.supervisor.revoke_grant(grant_id, KILLED_BY) if run else False

    # ---------------------------------------------------------------------------------------------
    # Scheduling and running
    # ----------------------------------------------------------------------------------------------
    def _entry(self, task: str) -> _Entry:
        try:
            return self._entries[task]
        except KeyError:
            raise KeyError(f"no task {task!r} in this fleet") from None

    def _schedule(self) -> None:
        for name in self._order:
            entry = self._entries[name]
            while not self._slots.acquire(timeout=0.1):
                if self._stopping:
                    break
            else:
                try:
                    launched = self._launch(entry)
                except BaseException as exc:
                    # whatever fails here ends this task, never the scheduler
                    launched = False
                    self._quietly(self._end_unstarted, entry, "error", f"could not start the run: {_why(exc)}")
                if not launched:
                    self._slots.release()
                continue
            # stopping: every task not started is cancelled by kill_all
            break

    def _launch(self, entry: _Entry) -> bool:
        """Build the task's run and start its thread; False when nothing was started (slot unused)."""
        with self._start_lock:
            if self._stopping or entry.cancelled:
                if not entry.cancelled:
                    entry.cancelled = True
                    self._end_unstarted(entry, "killed", "the fleet was stopped before it started")
                return False
            options = replace(
                entry.options,
                runs_dir=self.runs_dir,
                listeners=(*entry.options.listeners, self._listener(entry)),
                extra={**entry.options.extra, "fleet": self.fleet_id, "fleet_task": entry.name},
            )
            try:
                run = self._builder(options)
                asked = run.supervisor.approver
                if self._in_order is not None and run.handshake is None and asked is not None:
                    run.supervisor.approver = self._in_order.approver(asked)
                if entry.row.ended:
                    # the fleet stopped waiting while it was built: it never starts
                    self._quietly(run.supervisor.kill, "the fleet (stopped while the run was built)")
                    return False
            except BuildError as exc:
                self._end_unstarted(entry, "error", f"could not build the run: {exc}")
                return False
            except Exception as exc:  # a broken adapter constructor ends this task alone
                self._end_unstarted(entry, "error", f"could not build the run: {type(exc).__name__}: {exc}")
                return False
            with entry.lock:
                entry.run = run
                entry.row = replace(entry.row, state=RunState.RUNNING, run_id=run.run_id, path=str(run.path))
                row = entry.row
        self._post(fq.RunChanged(row))
        self._write_manifest()
        thread = threading.Thread(target=self._drive, args=(entry, run), name=f"cua-fleet-{run.run_id}", daemon=True)
        try:
            thread.start()
        except BaseException as exc:
            # no thread for it (the process's limit): it ends here, never started
            self._finish(entry, "error", f"could not start the run's thread: {_why(exc)}", None, None)
            self._quietly(run.supervisor.kill, "fleet (no thread for the run)")
            return False
        return True

    def _drive(self, entry: _Entry, run: Run) -> None:
        """One run from start to seal, on its own thread; whatever escapes ends this run alone, and its end
        is recorded whatever fails while it is (the fleet's end waits for every task's)."""
        status, reason, verified, intact = "error", "the run's thread failed", None, None
        try:
            try:
                status, reason, verified = _ended(run.run())
            except BaseException as exc:
                # the supervisor ends every run itself; this is the last defence
                status, reason, verified = self._escaped(run, exc)
            intact, why = self._intact(run)
            if intact is False and status != "error":
                # what is on disk decides: no success without a whole record
                status, reason, verified = "error", f"{why} (it ended {status}: {reason})", None
        except BaseException as exc:
            # a failure while the one above was handled (memory, most likely)
            reason = f"{reason}; then {_why(exc)}"
        finally:
            try:
                self._finish(entry, status, reason, verified, intact)
            finally:
                self._slots.release()

    def _escaped(self, run: Run, exc: BaseException) -> tuple[str, str, bool | None]:
        """An exception escaped the run's own loop: its supervisor ends it ``error`` from another thread (as
        the kill switch would: the desktop stopped, the log sealed), unless it escaped as the run was ending."""
        why = one_line(f"the run's thread failed: {_why(exc)}")
        supervisor = run.supervisor
        ending = supervisor.ending or supervisor.finished.is_set()
        if not ending:
            supervisor.fail(why)
        grace = supervisor.config.stop_timeout + SEAL_GRACE
        result = supervisor.wait(grace)
        if result is None:
            return "error", f"{why}; it did not end within {grace:g} s: not sealed", None
        status, reason, verified = _ended(result)
        return (status, f"{reason}; then {why}", verified) if ending else (status, reason, verified)

    def _intact(self, run: Run | None) -> tuple[bool | None, str]:
        """Whether the run's directory verifies intact and sealed (None: not checked), and if not, why."""
        if run is None or not self._check:
            return None, ""
        from .core.audit import verify_run

        report = verify_run(run.path)
        if report.intact and not report.sealed:
            return False, "not sealed: its run directory has no result.json"
        return report.intact, one_line(report.summary)

    def _quietly(self, fn: Callable[..., Any], *args: Any) -> None:
        """``fn(*args)``, whatever it raises swallowed: on a path that must go on (it records what it can)."""
        try:
            fn(*args)
        except BaseException:
            pass

    def _end_unstarted(self, entry: _Entry, status: str, reason: str) -> None:
        self._finish(entry, status, reason, None, None)

    def _finish(self, entry: _Entry, status: str, reason: str, verified: bool | None, intact: bool | None) -> None:
        """Record the task's end, once; the fleet's own end follows the last task's, whatever fails here."""
        verdict = entry.run.supervisor.result if entry.run is not None and verified is not None else None
        done = verdict.verification if verdict is not None else None
        with entry.lock:
            if entry.row.ended:
                return
            entry.row = replace(
                entry.row,
                state=RunState.ENDED,
                status=status,
                reason=reason,
                verified=verified,
                verifier=str(done.where) if done is not None else "",
                intact=intact,
                waiting_since=None,
            )
            row = entry.row
        try:
            run_id = entry.run.run_id if entry.run is not None else None
            closed = []
            with self._lock:
                if run_id is not None:
                    for item in self._queue.of_run(run_id):
                        self._close(item, f"run ended ({status})")
                        closed.append(item)
            for item in closed:
                self._post(fq.RequestClosed(item, f"run ended ({status})"))
            self._write_manifest()
            self._post(fq.RunChanged(row))
            self._post(fq.RunFinished(row))
        finally:
            entry.finished.set()
            with self._lock:
                self._remaining -= 1
                last = self._remaining == 0
            if last:
                try:
                    self._write_manifest(ended=True)
                    self._post(fq.FleetFinished(tuple(self.rows())))
                finally:
                    # the dispatcher sets _all_done once everything before is told
                    self._events.put(None)

    # ---------------------------------------------------------------------------------------------
    # The fleet's end after kill_all, even with a run whose thread is wedged
    # ----------------------------------------------------------------------------------------------
    def _start_reaper(self) -> None:
        with self._lock:
            if self._reaper is not None:
                return
            self._reaper = threading.Thread(target=self._reap, name="cua-fleet-reaper", daemon=True)
        self._reaper.start()

    def _grace(self) -> float:
        """How long a killed run may take to seal: the longest stop timeout of the fleet's runs, and a margin."""
        timeouts = [entry.run.supervisor.config.stop_timeout for entry in self._entries.values() if entry.run]
        return max(timeouts, default=0.0) + SEAL_GRACE

    def _reap(self) -> None:
        """Wait for every task to end; past the grace, record each one still going as ended without its seal,
        then give the listeners a little time to hear of the end before the fleet is done without them."""
        grace = self._grace()
        deadline = time.monotonic() + grace
        for entry in self._entries.values():
            while not entry.finished.is_set() and not self._give_up.is_set() and time.monotonic() < deadline:
                entry.finished.wait(0.1)
        for entry in self._entries.values():
            if not entry.finished.is_set():
                self._quietly(self._finish_late, entry, grace)
        if not self._all_done.wait(LISTENER_GRACE):
            # a listener that does not return is left behind, not the fleet
            self._all_done.set()

    def _finish_late(self, entry: _Entry, grace: float) -> None:
        """A task that did not end in time: its run's result if its supervisor has one (its own thread is
        still busy), else ``error``, not sealed."""
        run = entry.run
        result = run.supervisor.result if run is not None else None
        if result is not None:
            status, reason, verified = _ended(result)
        elif run is None:
            status, reason, verified = "killed", "the fleet was stopped before its run was built", None
        else:
            late = "before the fleet stopped waiting for it" if self._give_up.is_set() else f"within {grace:g} s"
            status, reason, verified = "error", f"killed, but not sealed {late} (its thread did not end)", None
        intact = None
        try:
            intact, _why_not = self._intact(run)
        finally:
            self._finish(entry, status, reason, verified, intact)

    # ---------------------------------------------------------------------------------------------
    # Each run's events (on the run's thread, under its supervisor's emit lock: quick, never
    # blocking)
    # ----------------------------------------------------------------------------------------------
    def _listener(self, entry: _Entry) -> Callable[[ev.Stamped], None]:
        def on_event(stamped: ev.Stamped) -> None:
            self._on_event(entry, stamped)

        return on_event

    def _on_event(self, entry: _Entry, stamped: ev.Stamped) -> None:
        event = stamped.event
        run = entry.run
        run_id = run.run_id if run is not None else ""
        posts: list[fq.FleetEvent] = []
        kill_by = None
        with entry.lock:
            try:
                entry.view.apply(stamped)
            except Exception:
                # the view is for people; the queue below must still hear of the request
                pass
            if isinstance(event, ev.RunStarted):
                entry.started = True
                kill_by, entry.kill_pending = entry.kill_pending, None
            elif isinstance(event, ev.ModelTurn):
                entry.rules.clear()
            elif isinstance(event, ev.PolicyVerdict):
                entry.rules[(event.turn, event.index)] = event.rule
            watchers = list(entry.watchers)
            for watcher in watchers:
                self._events.put(("watch", watcher, stamped))
        if isinstance(event, ev.DecisionRequested) and event.request is not None:
            request = event.request
            rule = "" if request.kind == "safety_check" else entry.rules.get((request.turn, request.index), "")
            rank = priority(request, rule)
            like = self._likeness(entry, request, rule, int(rank.tier))
            with self._lock:
                item = QueueItem(
                    next(self._tickets), entry.name, run_id, request, rank, self._clock(), stamped.seq, like
                )
                self._queue.add(item)
            posts.append(fq.RequestQueued(item))
        elif isinstance(event, ev.DrillShown) and event.request is not None:
            # a row of its own, as a request of its rule is, and never grouped: its likeness is its own
            request = event.request
            rank = priority(request, event.rule)
            like = self._likeness(entry, request, event.rule, int(rank.tier))
            with self._lock:
                ticket = next(self._tickets)
                if like.key:  # compared as a request is, and like no other: its key is its own
                    like = replace(like, key=json.dumps({**json.loads(like.key), "drill": ticket}, sort_keys=True))
                item = QueueItem(ticket, entry.name, run_id, request, rank, self._clock(), stamped.seq, like)
                self._queue.add(item)
                self._drills[(run_id, event.turn, event.index)] = item
            posts.append(fq.RequestQueued(item))
        elif isinstance(event, ev.DrillAnswered):
            # revealed at once: the row closes saying it was a drill, what was right, and whether it was caught
            why = revealed(event)
            with self._lock:
                drilled = self._drills.pop((run_id, event.turn, event.index), None)
                if drilled is not None:
                    if drilled in self._queue.of_run(run_id):
                        self._queue.remove(drilled)
                    self._closed[drilled.ticket] = why
            if drilled is not None:
                posts.append(fq.RequestClosed(drilled, why))
        elif isinstance(event, ev.DecisionMade) and event.by != "policy":
            why = TAKEN_OVER if event.note == TAKEOVER_NOTE else f"decided by {event.by}"
            with self._lock:
                found = self._queue.find(run_id, event.turn, event.index, event.subject)
                if found is not None:
                    self._close(found, why)
            if found is not None:
                posts.append(fq.RequestClosed(found, why))
        elif isinstance(event, ev.Killed | ev.RunEnded):
            why = "run killed" if isinstance(event, ev.Killed) else f"run ended ({event.status})"
            with self._lock:
                items = self._queue.of_run(run_id)
                for item in items:
                    self._close(item, why)
            posts += [fq.RequestClosed(item, why) for item in items]
        row = self._row_of(entry, run_id)
        if row is not None:
            posts.append(fq.RunChanged(row))
        for post in posts:
            self._post(post)
        if kill_by is not None and run is not None:
            run.supervisor.kill(by=kill_by)

    def _likeness(self, entry: _Entry, request: DecisionRequest, rule: str, tier: int) -> Likeness:
        """What makes the request the same decision as another run's (core/grouping.py). Its screen is
        decoded once per distinct screen (the runs of one task often wait on the very same one)."""
        if request.kind != "action" or request.frame is None or entry.run is None:
            return likeness(request, rule, tier, None, None, None)
        with entry.lock:
            focused = entry.view.focused
            limit = ScreenLimit.of_run(entry.view.started.screen if entry.view.started is not None else None)
        frame = request.frame
        with self._screens_lock:
            known = self._screens.get(frame.sha256)
            if known is not None:
                self._screens.move_to_end(frame.sha256)
        if known is None:
            try:
                screen = decode_screen(frame.png, limit, expect=(frame.width, frame.height))
            except ImageRefused as exc:
                return never(f"its screen could not be read ({exc})")
            known = screen, fingerprint(screen)
            with self._screens_lock:
                self._screens[frame.sha256] = known
                while len(self._screens) > SCREENS_KEPT:
                    self._screens.popitem(last=False)
        screen, prints = known
        return likeness(request, rule, tier, entry.run.supervisor.config.policy, focused, screen, prints)

    def _row_of(self, entry: _Entry, run_id: str) -> RunRow | None:
        """The task's row after an event, or None when nothing a table shows changed."""
        with self._lock:
            waiting = [item.asked_at for item in self._queue.of_run(run_id)] if run_id else []
        with entry.lock:
            if entry.row.ended:
                return None
            view = entry.view
            state = RunState.WAITING if waiting else RunState.RUNNING
            row = replace(
                entry.row,
                state=RunState.TAKEN if view.takeover is not None else state,
                phase=str(view.phase),
                turn=view.turn,
                steps=view.steps,
                waiting_since=min(waiting) if waiting else None,
            )
            if row == entry.row:
                return None
            entry.row = row
            return row

    def _close(self, item: QueueItem, why: str) -> None:
        """Take ``item`` out of the queue, remembering why (the fleet lock is held)."""
        self._queue.remove(item)
        self._closed[item.ticket] = why
        if len(self._closed) > _CLOSED_KEPT:
            del self._closed[next(iter(self._closed))]

    # ---------------------------------------------------------------------------------------------
    # Telling the listeners (one thread, in order)
    # ----------------------------------------------------------------------------------------------
    def _post(self, event: fq.FleetEvent) -> None:
        self._events.put(("fleet", event))

    def _dispatch(self) -> None:
        while True:
            got = self._events.get()
            if got is None:
                self._all_done.set()
                return
            # A broken listener or watcher (a UI), whatever it raises, must not stop the others or
            # the fleet.
            try:
                if got[0] == "watch":
                    _, watcher, stamped = got
                    self._quietly(watcher, stamped)
                    continue
                with self._lock:
                    listeners = list(self._listeners)
                for listener in listeners:
                    self._quietly(listener, got[1])
            except BaseException:
                pass

    # ---------------------------------------------------------------------------------------------
    # The manifest
    # ----------------------------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        """This fleet's entry in fleet.json: the fleet, the tasks file's hash, and each task's run."""
        runs = []
        for name in self._order:
            row = self._entries[name].row
            runs.append(
                {
                    "task": name,
                    "run_id": row.run_id or None,
                    "status": row.status or None,
                    "reason": row.reason or None,
                    "intact": row.intact,
                }
            )
        started = self.started_at or self._wall_clock()
        return {
            "schema": 1,
            "fleet": self.fleet_id,
            "name": self.name,
            "tasks_file": self.tasks_source,
            "tasks_sha256": self.tasks_sha256,
            "backend": self.backend,
            "concurrency": self.concurrency,
            "started_at": started,
            "started_at_iso": iso_time(started),
            "runs": runs,
        }

    def _write_manifest(self, ended: bool = False) -> None:
        with self._manifest_lock:
            data = self.manifest()
            if ended:
                ended_at = self._wall_clock()
                data.update({"ended_at": ended_at, "ended_at_iso": iso_time(ended_at)})
            try:
                self.manifest_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                _update_manifest(self.manifest_path, self.fleet_id, data)
                self.manifest_problem = None
            except Exception as exc:
                if self._scheduler is None and isinstance(exc, OSError):
                    # at start: nothing has run yet, the caller reports it
                    raise
                # later: the runs themselves are complete run directories; the manifest is an index,
                # and the next write (every task's end, the fleet's) brings it up to date if it can
                self.manifest_problem = f"{self.manifest_path} could not be written: {failure(exc)}"


def _update_manifest(path: Path, fleet_id: str, entry: dict[str, Any]) -> None:
    """Put ``entry`` under ``fleets.<fleet_id>`` of ``fleet.json``, the runs directory's one index of its
    fleets (several fleets, even at once in several processes, share a runs directory): under an exclusive
    lock on a lock file beside it, read back (bounded), updated, written atomically. A fleet.json that cannot
    be read back as such an index is set aside (``fleet.json.unreadable-<time>``), never overwritten: the
    runs themselves stay complete run directories that name their fleet in run.json either way."""
    import json

    with open(path.with_name(f".{path.name}.lock"), "a+b") as lock:
        _lock_within(lock.fileno(), MANIFEST_LOCK_WAIT)
        fleets: dict[str, Any] = {}
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            fd = -1
        except OSError:  # a link, or something else that is no file of ours
            fd = -2
        known = fd == -1
        if fd >= 0:
            with os.fdopen(fd, "rb") as fh:
                raw = fh.read(MANIFEST_CAP + 1) if os.fstat(fh.fileno()).st_mode & 0o170000 == 0o100000 else b""
            try:
                data = json.loads(raw) if 0 < len(raw) <= MANIFEST_CAP else None
            except ValueError:
                data = None
            if isinstance(data, dict) and isinstance(data.get("fleets"), dict):
                fleets, known = data["fleets"], True
        if not known:
            os.replace(path, path.with_name(f"{path.name}.unreadable-{time.time_ns()}"))
        fleets[fleet_id] = entry
        write_json_atomic(path, {"schema": 1, "fleets": fleets})


def _lock_within(fd: int, seconds: float) -> None:
    """An exclusive lock on ``fd`` within ``seconds``: another process holding it forever (stopped, hung) must
    not hold up this fleet's end. Raises OSError when it could not be had."""
    import errno
    import fcntl

    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise OSError(errno.EWOULDBLOCK, f"locked by another process for over {seconds:g} s") from None
            time.sleep(0.05)


def _ended(result: RunResult) -> tuple[str, str, bool | None]:
    """How a run ended, for its row: a run whose seal is not on disk is no success, whatever it ended as."""
    if not result.sealed and result.status != "error":
        return "error", f"not sealed ({result.status}: {result.reason})", None
    return str(result.status), result.reason, result.verified


def _why(exc: BaseException) -> str:
    """An exception that escaped, in one line: its type (what failed, even without a message) and message."""
    name = type(exc).__name__
    try:
        text = failure(exc)
    except BaseException:  # a message that cannot even be made into text
        return name
    return name if text == name else f"{name}: {text}"


# why a request left the queue when its run was taken over at it
TAKEN_OVER = "taken over: the reviewer has this run's desktop (only this run is paused)"


def _copy_view(view: RunView) -> RunView:
    """A copy of a RunView that shares its immutable pieces: the pending request stays the very object the
    run's handshake knows (an answer is matched by identity), and screenshots are not duplicated."""
    keep = (view.pending, view.screen, view.ended)
    memo: dict[int, Any] = {id(value): value for value in keep if value is not None}
    return copy.deepcopy(view, memo)


def fleet_tasks(tasks: TasksFile, base: RunOptions) -> list[FleetTask]:
    """The fleet's tasks from a validated tasks file and the command line's options."""
    return [FleetTask(spec.name, task_options(spec, tasks, base)) for spec in tasks.tasks]
