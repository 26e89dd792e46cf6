"""The ending of a run: the switch that settles it once (a kill, a limit, a failure or its own end, from any
thread), the outcomes still owed when it comes, the desktop's bounded stop and the audit log's seal. The
Supervisor (core/supervisor.py) drives them; result.json's content is core/records.py's, and the words a
run's end is shown with are core/ending.py's."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import events as ev
from .actions import text_sha256
from .audit import AuditKey, AuditWriter
from .events import RunStatus
from .ports import ActionResult, Desktop, OutcomeStatus
from .text import failure
from .threads import Job, spawn


class Aborted(Exception):
    """Raised inside the loop once the run was killed or hit a hard limit from another thread."""


class StorageFailure(Exception):
    """A record of the run could not be written: nothing further may execute (fail closed)."""


class Halt(Exception):
    """The batch stops at an action; ``result`` is that action's outcome, already on record."""

    def __init__(self, result: ActionResult) -> None:
        super().__init__(result)
        self.result = result


@dataclass(frozen=True)
class RunResult:
    run_id: str
    path: Path
    status: RunStatus
    reason: str
    verified: bool | None
    turns: int
    steps: int
    executed: int
    # as written to result.json; empty when the run could not be sealed
    seal: dict[str, Any]
    # the verdict and who vouched for it, when there was one
    verification: ev.VerificationDone | None = None

    @property
    def sealed(self) -> bool:
        """result.json holds the seal, so ``verify`` can tell the run whole (else it reports it interrupted)."""
        return bool(self.seal)

    @property
    def exit_code(self) -> int:
        # A run whose seal is not on disk is no success, whatever it ended as.
        return 0 if self.sealed and self.status in (RunStatus.PASSED, RunStatus.FINISHED) else 1


@dataclass(slots=True)
class Tally:
    """What a run has done and spent so far, as its records and its soft budgets count it."""

    began: float  # the run's clock at its start (the seconds a budget counts)
    turn: int = 0
    steps: int = 0
    executed: int = 0
    tokens: int = 0
    cost: float | None = None
    final_text: str = ""  # the model's answer when it said it is done

    def spent(self, now: float) -> dict[str, float]:
        """The spend each soft budget reads (core/budgets.py), at the run's clock ``now``."""
        return {"cost": self.cost or 0.0, "tokens": float(self.tokens), "steps": float(self.steps),
                "seconds": now - self.began}  # fmt: skip


class Switch:
    """How the run ends, settled once from any thread (the first ending wins), and the events that end every
    wait of the run's thread when it does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ending: tuple[RunStatus, str] | None = None
        self.aborted = threading.Event()  # nothing further executes
        self.cancel = threading.Event()  # handed to approvers
        self.finished = threading.Event()  # the result is in (sealed or not)
        self._waiters: set[threading.Event] = set()
        self._waiters_lock = threading.Lock()
        # the run's thread's: an ending asked for once the batch is answered (a limit), the deadline's
        # timer, and the verifier's verdict for result.json
        self.pending: tuple[RunStatus, str] | None = None
        self.timer: threading.Timer | None = None
        self.verdict: ev.VerificationDone | None = None

    def trip(self, status: RunStatus, reason: str, *, wake: bool) -> bool:
        """Settle the ending (False: it already was) and stop everything further; ``wake``: end every wait of
        the run's thread at once (an ending from another thread)."""
        with self._lock:
            if self.ending is not None:
                return False
            self.ending = (status, reason)
        self.aborted.set()
        self.cancel.set()
        if wake:
            with self._waiters_lock:
                for waiter in list(self._waiters):
                    waiter.set()
        return True

    @contextmanager
    def waiting(self, event: threading.Event) -> Iterator[None]:
        """Within the block, an ending from another thread sets ``event``: a wait on it ends at once."""
        with self._waiters_lock:
            self._waiters.add(event)
        try:
            yield
        finally:
            with self._waiters_lock:
                self._waiters.discard(event)


def typed_fields(text: str, private: bool) -> tuple[int, str]:
    """A typing stretch's text as it is recorded: its length and SHA-256; in a private stretch its length
    only (a one-time code's hash is the code: a million guesses find six digits)."""
    return len(text), "" if private else text_sha256(text)


@dataclass(slots=True)
class Owed:
    """The proposals of the turn still owed their one outcome, and what an ending records for each."""

    open: dict[int, str] = field(default_factory=dict)  # index -> call id
    # actions that ran but whose outcome is not yet recorded -> what the model hears of them
    performed: dict[int, str] = field(default_factory=dict)
    in_flight: int | None = None  # the action whose desktop call is running
    # a takeover's typing stretch under way: its text on record so far, the last piece maybe still in flight
    # (memory only), hashed once should the run end before the stretch does; and whether it is private
    stretches: dict[int, tuple[str, bool]] = field(default_factory=dict)
    next_index: int = 0  # the turn's next index (a takeover's actions follow the batch's)

    def take_index(self) -> int:
        index = self.next_index
        self.next_index += 1
        return index

    def settle(self, index: int) -> None:
        """The action's outcome is on record."""
        self.open.pop(index, None)
        self.performed.pop(index, None)

    def closing(self, turn: int, steps: int, reason: str) -> list[ev.Event]:
        """The records that give every open proposal its one outcome (the run ended before it ran), and a
        typing stretch cut by the ending its whole text's one hash. Nothing is owed after."""
        records: list[ev.Event] = []
        for index, call_id in sorted(self.open.items()):
            text, private = self.stretches.pop(index, ("", False))
            if text and index in self.performed:
                records.append(ev.Typed(turn, index, call_id, *typed_fields(text, private)))
            if index in self.performed:
                # it ran; the run ended before its outcome was recorded
                status, message = OutcomeStatus.EXECUTED, self.performed[index]
            elif index == self.in_flight:
                status, message = OutcomeStatus.FAILED, f"Failed: interrupted before it completed ({reason})"
            else:
                status, message = OutcomeStatus.NOT_EXECUTED, f"Not executed: the run ended ({reason})."
            records.append(ev.Outcome(turn, index, call_id, status, message, steps))
        self.open.clear()
        return records


def stop_desktop(desktop: Desktop, timeout: float, run_id: str) -> tuple[bool, str]:
    """Release held input and stop the desktop, bounded in time even if the desktop hangs: (stopped cleanly,
    detail)."""

    def stop() -> list[str]:
        problems = []
        for name, step in (("release_all", desktop.release_all), ("stop", desktop.stop)):
            try:
                step()
            except BaseException as exc:
                # on a thread of its own: whatever it raises, the run still seals
                problems.append(f"{name}: {failure(exc)}")
        return problems

    job = Job(stop)
    spawn(job, f"cua-stop-{run_id}")
    if not job.wait(timeout=timeout):
        return False, f"the desktop did not stop within {timeout:g} s"
    problems = job.result()
    return not problems, "; ".join(problems) or "desktop stopped, input released"


def seal_audit(audit: AuditWriter, key: AuditKey | None, lost: str | None) -> tuple[dict[str, Any], str | None]:
    """The audit log's seal, or ({}, why) when the end of the run is not on disk whole (``lost``: a record
    of it already failed). Called with the run's record lock held."""
    if lost is None:
        try:
            return audit.seal(key), None
        except OSError as exc:
            lost = f"could not write audit.jsonl: {exc.strerror or exc}"
    # Leave the log unsealed (verify reports an interrupted prefix) rather than seal a record that misses
    # its ending.
    audit.close()
    return {}, lost


def storage_reason(reason: str, failure: str) -> str:
    """The reason of a run whose ending could not be recorded whole: the failed write comes first."""
    if reason.startswith("storage:"):
        return reason
    return f"storage: {failure} (while ending: {reason})"
