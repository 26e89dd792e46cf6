"""A team's fleet as the fleet TUI sees it (``core.fleet_queue.FleetControl``): every run of the fleet on every
worker, its open requests in the queue, each run's view from the lines its worker mirrors, and answers
through the same compare-and-set as any analyst's, as the role the database authenticated.

Two threads of its own, each with its own session: one reads (the fleet's rows, its open requests, the
mirrored lines of its running runs; woken by the schema's notifications, at least every ``POLL_S``), and
tells the listeners on that thread, in order; one writes the answers. Nothing here runs a statement on the
caller's thread: the UI thread reads snapshots, and ``answer`` only hands the answer over (or says at once
why not, when the link is down). What a row holds is someone else's writing: every read is bounded, and a
row that cannot be used is set aside with one line (``unreadable``), never shown half.
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Unpack

import psycopg
from psycopg.types.json import Jsonb

from ..core import drills, grants
from ..core import events as ev
from ..core.actions import MAX_TEXT, Action, ActionError, action_of_record
from ..core.fleet_queue import (
    AnswerRecorded,
    AnswerRefused,
    Deciders,
    FleetEvent,
    FleetFinished,
    FleetListener,
    QueueItem,
    ReadersChanged,
    RequestClosed,
    RequestQueued,
    RunChanged,
    RunFinished,
    RunRow,
    RunState,
    priority,
)
from ..core.imaging import ImageRefused, png_size
from ..core.policy import MAX_POLICY_BYTES, Policy, PolicyError
from ..core.ports import Answer, AnswerDetails, DecisionRequest, Frame
from ..core.run_view import RunView
from ..core.runlog import line_event
from ..core.takeover import Desk
from ..core.text import one_line, visible
from ..headless_approvers import CommandApprover
from . import analyst, db, schema
from . import requests as rq
from .approver import EDIT_BYTES
from .mirror import LINE_CAP

# the reader's pass at least this often without a notification (a run's turn and step have none)
POLL_S = 0.5
# open requests held (the first in the queue's order), mirrored lines folded per pass
MAX_OPEN = 500
LINES_PER_PASS = 5000
LINE_BYTES_PER_PASS = 4 * LINE_CAP  # at least one line of the largest size, so each pass moves on
# a screen held here: far above a desktop's screenshot (a 4K PNG is a few MB), far below the mirror's cap
HELD_SCREEN_CAP = 16 * 1024 * 1024
# the screens kept, in bytes at most (each run's newest, and the requests')
SCREEN_BYTES_KEPT = 128 * 1024 * 1024
# a request whose screen the worker's mirror has not brought yet waits this long before it is shown without
SCREEN_WAIT_S = 3.0
# screens kept in memory (each run's newest, and the requests')
SCREENS_KEPT = 64
# why recent requests closed, kept
CLOSED_KEPT = 10_000
# requests decoded, kept (each holds its screen): more than the open requests held
DECODED_KEPT = 2 * MAX_OPEN
HOW = "human"
ATTACH = analyst.ATTACH
# "read by": a mark's lease, renewed this often while its request stays on the panel (and it counts only
# while this session lives: a closed terminal's marks lapse at once)
LOOK_LEASE_S = 10.0
LOOK_RENEW_S = 3.0
# seconds the on_escalate command may take (then it is killed, as an approver command is)
ESCALATE_TIMEOUT_S = 30.0
# who else looks at a request: the first few roles named
READERS_NAMED = 5


@dataclass
class _Run:
    """A run of the fleet as read: its row, its view folded from the mirrored lines, who watches it."""

    row: RunRow
    view: RunView
    seq: int = -1  # the last mirrored line folded
    watchers: list[Callable[[ev.Stamped], None]] | None = None
    finished_told: bool = False
    # the policy it runs under, from its spec (what e's editor checks a draft by; the worker checks again)
    policy: Policy | None = None
    policy_read: bool = False


@dataclass(frozen=True, slots=True)
class _DrillJob:
    """The writer's work for a drill answered: its record, for the run's worker, against the real request."""

    request_id: int
    record: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Drilled:
    """A drill up in front of a real request: which, its item (the real one's ticket negated), and the real
    item held back until it is answered."""

    drill: drills.Drill
    item: QueueItem
    real: QueueItem


# who may answer an open request, as this session's role sees it (schema version 4): its approvers, its quorum,
# whether this role may answer, escalated to a group of this role's, the approvals so far, the pending edit
# (its approver, its record, its text, each bounded) and how often it was set aside
_DECIDERS = (
    "q.approvers[1:10], q.quorum, cua_tui.may_answer(q.approvers), q.escalated_at IS NOT NULL AND EXISTS ("
    "SELECT 1 FROM pg_roles r WHERE r.rolname = q.escalate_to AND pg_has_role(session_user, r.oid, 'MEMBER')), "
    "(SELECT array_agg(left(a.role, 64) ORDER BY a.id) FROM (SELECT a.role, a.id FROM cua_tui.approvals a "
    "WHERE a.request_id = q.id AND NOT a.superseded ORDER BY a.id LIMIT 10) a), "
    "(SELECT array[left(a.role, 64), CASE WHEN octet_length(a.edit::text) <= %(edit)s THEN a.edit::text END, "
    "left(a.edit_text, %(text)s)] FROM cua_tui.approvals a WHERE a.request_id = q.id AND NOT a.superseded "
    "AND a.edit IS NOT NULL ORDER BY a.id LIMIT 1), "
    "(SELECT count(*) FROM cua_tui.asides s WHERE s.request_id = q.id)"
)


def _deciders(ruled: Sequence[Any]) -> tuple[Deciders, Action | None]:
    """A row's rule as this role sees it, and the action a pending edit makes of it (None: as proposed);
    RowError for a pending edit that cannot be read whole (it would be approved unseen)."""
    approvers, quorum, mine, escalated, approved, pending, asides = ruled
    roles = tuple(visible(str(r), limit=63) for r in approvers) if approvers is not None else None
    edited: Action | None = None
    by = ""
    if pending is not None:
        by, record, text = [*pending, None, None, None][:3]
        try:
            edited = action_of_record(rq.read_json(record, EDIT_BYTES, "a pending edit"), text or "")
        except (rq.RowError, ActionError, TypeError) as exc:
            raise rq.RowError(f"its pending edit cannot be read ({one_line(str(exc), 120)}); not shown") from None
        by = visible(str(by), limit=63)
    return Deciders(
        approvers=roles, quorum=int(quorum or 1), approved_by=tuple(visible(str(r), limit=63) for r in approved or ()),
        mine=bool(mine), edited_by=by, escalated=bool(escalated), asides=int(asides or 0),
    ), edited  # fmt: skip


class TeamFleet:
    """``fleet_id`` on the queue at ``url``, for the fleet TUI (``attach --queue URL FLEET``)."""

    owns_runs = False

    def __init__(
        self,
        url: str,
        fleet_id: str,
        *,
        poll_s: float = POLL_S,
        on_escalate: str | None = None,
        drills: drills.DrillPlan | None = None,
    ) -> None:
        self.url = url
        # this analyst's drills (core/drills.py): never a request of the shared queue; None: none
        self.drills = drills
        self._drilling: dict[int, _Drilled] = {}  # real request id -> the drill in front of it
        self._rolled: set[int] = set()  # the requests a drill was considered for (once each)
        self._last_drill = ""
        self.fleet_id = fleet_id
        self.poll_s = poll_s
        # the settings file's command run when a request escalates to this role's group (never an answer)
        self.on_escalate = on_escalate
        self._escalated: set[int] = set()
        self.role = ""
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}  # by task (as shown)
        self._task_of: dict[str, str] = {}  # run id -> task
        self._items: dict[int, QueueItem] = {}  # open requests by ticket (the request's id)
        self._answering: set[int] = set()  # handed to the writer, its commit not yet known
        self._waiting_screen: dict[int, float] = {}  # request id -> when first seen without its screen
        self._line_wait: dict[tuple[str, int], float] = {}  # a decision_requested line whose row is not yet in
        self._decoded: dict[int, DecisionRequest] = {}  # request id -> its request, as first read
        self._mirrored: dict[str, int] = {}  # run id -> lines its worker has mirrored
        self._screens: dict[str, bytes] = {}
        self._listeners: list[FleetListener] = []
        self._link = "connecting to the queue"
        self._offset = 0.0  # the server's clock less this machine's, seconds
        self._done = threading.Event()
        self._finished_told = False
        self._stop = threading.Event()
        self._wake = threading.Event()
        # the writer's work: an answer (its items, the answer, its details), or runs to kill (their ids)
        self._answers: queue.Queue[
            tuple[list[QueueItem], Answer, AnswerDetails] | tuple[str, QueueItem, float] | _DrillJob | list[str] | None
        ] = queue.Queue()
        self._threads: list[threading.Thread] = []
        # request id -> why it was set aside unread (a row someone else wrote that cannot be used)
        self.unreadable: dict[int, str] = {}
        # request id -> who answered it or why it closed, for an answer pressed a moment late
        self._closed: dict[int, str] = {}
        # "read by": what this analyst's panel shows (written by the reader), and who else looks at what
        self._looking: tuple[int, ...] = ()
        self._looked: tuple[int, ...] | None = None  # as last written on this session (None: not yet)
        self._look_due = 0.0
        self._readers: dict[int, tuple[str, ...]] = {}
        # open requests whose rule names no role of any attached analyst (headless ones count)
        self._orphans = 0

    # ---------------------------------------------------------------------------------------------
    # FleetControl
    # ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._threads:
            return
        self._threads = [
            threading.Thread(target=self._read_loop, name="team-read", daemon=True),
            threading.Thread(target=self._write_loop, name="team-answer", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        """Stop both threads (the fleet goes on on its workers)."""
        self._stop.set()
        self._wake.set()
        self._answers.put(None)
        for thread in self._threads:
            thread.join(timeout=5)

    def link(self) -> str:
        """The link when it is down; else the requests set aside unread, if any (each would wait unseen), and
        those no attached analyst may answer (each would wait for its deadline)."""
        with self._lock:
            if self._link:
                return self._link
            said = []
            if self.unreadable:
                count = len(self.unreadable)
                first = next(iter(self.unreadable.values()))
                said.append(f"{count} request{'s' if count != 1 else ''} set aside unread: {visible(first, limit=160)}")
            if self._orphans:
                count = self._orphans
                said.append(f"{count} request{'s' if count != 1 else ''} no attached analyst may answer")
            return " · ".join(said)

    @property
    def drills_on(self) -> bool:
        """This analyst's drills are on (their settings' rate)."""
        return self.drills is not None and self.drills.rate > 0

    def subscribe(self, listener: FleetListener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def rows(self) -> list[RunRow]:
        with self._lock:
            return [run.row for run in self._runs.values()]

    def row(self, task: str) -> RunRow:
        with self._lock:
            return self._runs[task].row

    def queue(self) -> list[QueueItem]:
        with self._lock:
            items = [
                item
                for ticket, item in self._items.items()
                if ticket not in self._answering and ticket not in self._drilling
            ]
            items += [up.item for up in self._drilling.values()]
        return sorted(items, key=lambda item: item.order)

    def looking(self, tickets: Collection[int]) -> None:
        # a drill on this panel is read as the request it stands in front of (the others see that one read)
        with self._lock:
            self._looking = tuple(sorted({abs(t) for t in tickets}))[: schema.MAX_LOOKS]

    def readers(self) -> Mapping[int, tuple[str, ...]]:
        with self._lock:
            found = dict(self._readers)
            for real in self._drilling:
                if real in found:  # a drill's row says who reads the request behind it, as that row would
                    found[-real] = found[real]
            return found

    def _not_yours(self, item: QueueItem, answer: Answer) -> str | None:
        """Why this role's answer cannot count, before it is sent (the server holds the same rule)."""
        rule = item.deciders
        if rule is None:
            return None
        if not rule.mine:
            return f"not answered: only {rule.who} may answer request {item.ticket}; you are {self.role or '?'}"
        if answer is Answer.APPROVE and self.role and self.role in rule.approved_by:
            return f"not answered: you approved request {item.ticket} already; another role's approval must follow"
        return None

    def answer(self, item: QueueItem, answer: Answer, **details: Unpack[AnswerDetails]) -> str | None:
        if item.ticket < 0:
            return self._answer_drill(item, answer, details)
        refused = self._not_yours(item, answer)
        if refused is not None:
            return refused
        with self._lock:
            if self._link:  # the connection's, not the rows set aside
                return f"not answered: {self._link}"
            if self._items.get(item.ticket) is not item or item.ticket in self._answering:
                return self._closed.get(item.ticket, "it is no longer pending")
            self._answering.add(item.ticket)
        self._answers.put(([item], answer, details))
        return None

    def answer_many(
        self, items: Sequence[QueueItem], answer: Answer, **details: Unpack[AnswerDetails]
    ) -> list[str | None]:
        """A group's answer: one transaction for every member still open (the others say why not)."""
        if details.get("edit") is not None:
            return ["an edit is one run's: e from that run's view"] * len(items)
        if any(item.ticket < 0 for item in items):  # a drill is a row of its own, never one of a group
            return [self.answer(item, answer, **details) for item in items]
        out: list[str | None] = []
        taken: list[QueueItem] = []
        with self._lock:
            for item in items:
                if self._link:
                    out.append(f"not answered: {self._link}")
                elif (why := self._not_yours(item, answer)) is not None:
                    out.append(why)
                elif self._items.get(item.ticket) is not item or item.ticket in self._answering:
                    out.append(self._closed.get(item.ticket, "it is no longer pending"))
                else:
                    self._answering.add(item.ticket)
                    taken.append(item)
                    out.append(None)
        if taken:
            self._answers.put((taken, answer, details))
        return out

    def set_aside(self, item: QueueItem, minutes: float) -> str | None:
        """Out of this analyst's view for ``minutes`` (the others' stays): a row the server keeps, which this
        role's reads skip until the time; it answers nothing. At once here; None, or why not."""
        if item.ticket < 0:  # a drill set aside was not stopped: it is answered so (none), and revealed
            return self._answer_drill(item, None, {})
        with self._lock:
            if self._link:
                return f"not set aside: {self._link}"
            if self._items.get(item.ticket) is not item or item.ticket in self._answering:
                return self._closed.get(item.ticket, "it is no longer pending")
            self._items.pop(item.ticket, None)
        self._answers.put(("aside", item, minutes))
        self._tell([RequestClosed(item, f"set aside by you for {minutes:g} min")])
        return None

    def kill(self, task: str, by: str = "") -> bool:
        """The kill switch on one run, wherever its worker is: who pressed it is the database's role (``by``
        is this process's word, not used). False when the run ended or the queue cannot be reached."""
        with self._lock:
            run = self._runs.get(task)
            if run is None or run.row.ended or self._link:
                return False
            ids = [run.row.run_id]
            up = [d.item for d in self._drilling.values() if d.item.task == task]
        self._answers.put(ids)
        for item in up:  # the kill switch at a drill is real, and the drill is answered so
            self._answer_drill(item, Answer.KILL, {})
        return True

    def kill_all(self, by: str = "") -> None:
        """Every run of the fleet not ended, on every worker; queued ones never start."""
        with self._lock:
            ids = [run.row.run_id for run in self._runs.values() if not run.row.ended]
        if ids:
            self._answers.put(ids)

    def revoke(self, task: str, grant_id: int) -> bool:
        return False

    def view(self, task: str) -> RunView:
        with self._lock:
            run = self._runs.get(task)
            return run.view.snapshot() if run is not None else RunView()

    def watch(self, task: str, listener: Callable[[ev.Stamped], None]) -> tuple[RunView, Callable[[], None]]:
        with self._lock:
            run = self._runs[task]
            if run.watchers is None:
                run.watchers = []
            run.watchers.append(listener)
            snapshot = run.view.snapshot()

        def unwatch() -> None:
            with self._lock:
                if run.watchers is not None and listener in run.watchers:
                    run.watchers.remove(listener)

        return snapshot, unwatch

    def policy(self, task: str) -> Policy | None:
        """The run's policy once read (the reader reads it for a run whose view is open)."""
        with self._lock:
            run = self._runs.get(task)
            return run.policy if run is not None else None

    def desk(self, task: str) -> Desk | None:
        return None  # a takeover needs the desktop: it is on the worker's machine

    def now(self) -> float:
        """The server's clock (epoch seconds, as estimated here): what a request's ``asked_at`` is on."""
        return time.time() + self._offset

    @property
    def done(self) -> bool:
        return self._done.is_set()

    # ---------------------------------------------------------------------------------------------
    # Drills: each analyst's own, in front of a real request the analyst may answer
    # ----------------------------------------------------------------------------------------------
    def _front(self, item: QueueItem) -> QueueItem:
        """What the analyst is shown of a new request: a drill in front of it, when one is due (its row of its
        own, the real one held back until it is answered); else the request."""
        # the analyst's rate: a tasks file's drill setting is not sent to a queue (drills are each analyst's own)
        plan = self.drills
        with self._lock:
            run = self._runs.get(item.task)
        if plan is None or run is None or item.ticket in self._rolled:
            return item
        if item.deciders is not None and not item.deciders.mine:
            return item  # within the approver rules: no drill where this role may not answer
        self._rolled.add(item.ticket)
        drill = plan.before(item.request, self._last_drill)
        if drill is None:
            return item
        self._last_drill = drill.id
        real = item.request
        shown = drill.shown(real)
        if drill.action is not None:
            with self._lock:
                policy, focused = run.policy, run.view.focused
            focused = drill.focus or focused
            if policy is not None:  # offered the scope a real request of that action would offer
                shown = replace(shown, scope=grants.scope_for(drill.action, policy.classify(drill.action), focused))
            elif real.action is not None and real.action.kind is drill.action.kind:
                shown = replace(shown, scope=real.scope)
            else:
                shown = replace(shown, scope=None)
        front = replace(item, ticket=-item.ticket, request=shown, priority=priority(shown, drill.rule))
        focus = list(drill.focus) if drill.focus is not None else None
        event = ev.DrillShown(real.turn, real.index, real.call_id, shown.kind, shown.reason, drill.id,
                              real.deadline_s, drill.rule, drill.words, focus, request=shown)  # fmt: skip
        with self._lock:
            self._drilling[item.ticket] = _Drilled(drill, front, item)
        self._fold(item.task, event)
        return front

    def _fold(self, task: str, event: ev.Event) -> None:
        """A drill's event folded into the run's view as this front end's own (no line of the chain: its place
        stays), and told to the run's watchers. Answered, the view waits on the real request again."""
        with self._lock:
            run = self._runs.get(task)
            if run is None:
                return
            stamped = ev.Stamped(run.view.seq, run.view.head, event)
            run.view.apply(stamped)
            watchers = list(run.watchers or ())
        for watcher in watchers:  # no head: not a line of the chain (a run's view folds it all the same)
            watcher(replace(stamped, head=""))

    def _answer_drill(self, item: QueueItem, answer: Answer | None, details: AnswerDetails) -> str | None:
        """A drill's answer: compared, never acted on (the kill switch alone is real), sent to the run's worker
        for its chain (who answered is the server's role), revealed at once; then the real request."""
        with self._lock:
            up = self._drilling.get(-item.ticket)
            if up is None or up.item.ticket != item.ticket:
                return self._closed.get(item.ticket, "it is no longer pending")
            del self._drilling[-item.ticket]
            real = self._items.get(up.real.ticket)
        words = {Answer.APPROVE: "approve", Answer.REJECT: "reject", Answer.KILL: "kill"}
        said = "none" if answer is None else words.get(answer, "none")
        shown_ms = details.get("shown_ms")
        event = drills.answered(up.drill, up.real.request, said, "human (team queue)", self.role,
                                shown_ms if type(shown_ms) is int else None)  # fmt: skip
        self._answers.put(_DrillJob(up.real.ticket, drills.sent(event)))
        why = drills.revealed(event)
        with self._lock:
            self._closed[item.ticket] = why
        self._fold(item.task, event)
        told: list[FleetEvent] = [RequestClosed(item, why)]
        if real is not None:
            told.append(RequestQueued(real))
        self._tell(told)
        return None

    # ---------------------------------------------------------------------------------------------
    # The reader
    # ----------------------------------------------------------------------------------------------
    def _read_loop(self) -> None:
        backoff = db.Backoff(lambda line: None)
        conn: psycopg.Connection[Any] | None = None
        while not self._stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = db.connect(self.url, ATTACH)
                    conn.execute(f"LISTEN {schema.POSTED}")
                    conn.execute(f"LISTEN {schema.ANSWERED}")
                    self.role = db.session_user(conn)
                    self._looked = None  # a new session: its marks are made again
                    if conn.execute("SELECT 1 FROM cua_tui.fleets WHERE id = %s", (self.fleet_id,)).fetchone() is None:
                        self._set_link(f"no fleet {visible(self.fleet_id, limit=64)} on the queue")
                        return
                    backoff.ok()
                    self._set_link("")
                conn.execute("SELECT cua_tui.reap(), cua_tui.escalate()")
                self._pass(conn)
                if self._done.is_set() and not self._pending_watchers():
                    # every run ended: nothing more will change
                    self._stop.wait(self.poll_s * 4)
                    continue
                for _ in conn.notifies(timeout=self.poll_s, stop_after=1):
                    pass
            except db.QueueError as exc:
                self._set_link(f"reconnecting to the queue: {one_line(str(exc), 200)}")
                conn = None
                self._stop.wait(backoff.failed("reading", exc))
            except db.LINK_ERRORS as exc:
                self._set_link(f"reconnecting to the queue: {db.one_line_error(exc)}")
                if conn is not None:
                    conn.close()
                conn = None
                self._stop.wait(backoff.failed("reading", exc))
        if conn is not None:
            if self._looked:
                with contextlib.suppress(*db.LINK_ERRORS):
                    conn.execute("SELECT cua_tui.look('{}', 0)")  # the session's end lapses them too
            conn.close()

    def _set_link(self, line: str) -> None:
        """The link's state, which the fleet screen's header reads each second."""
        with self._lock:
            self._link = line

    def _pending_watchers(self) -> bool:
        with self._lock:
            return any(run.watchers for run in self._runs.values())

    def _pass(self, conn: psycopg.Connection[Any]) -> None:
        before = time.time()
        server = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        if server is not None:
            self._offset = float(server[0]) - (before + time.time()) / 2
        told: list[FleetEvent] = []
        rows = self._read_runs(conn)
        with self._lock:
            for task, row in rows.items():
                if task not in self._runs:
                    self._runs[task] = _Run(row, RunView())
                    told.append(RunChanged(row))
        # the lines first: a request is shown once its run's view has its line (and the screen before it)
        self._read_lines(conn)
        self._read_policies(conn)  # a drill's scope is its run policy's, as a request's is
        items = self._read_requests(conn, told)
        self._orphans = self._read_orphans(conn)
        self._mark(conn)
        readers = self._read_readers(conn)
        with self._lock:
            if readers != self._readers:
                self._readers = readers
                told.append(ReadersChanged())
            waiting: dict[str, float] = {}
            for item in items.values():
                waiting[item.task] = min(waiting.get(item.task, item.asked_at), item.asked_at)
            for task, row in rows.items():
                if row.state == RunState.RUNNING and task in waiting:
                    row = replace(row, state=RunState.WAITING, waiting_since=waiting[task])
                run = self._runs.get(task)
                if run is None:
                    self._runs[task] = run = _Run(row, RunView())
                    told.append(RunChanged(row))
                elif run.row != row:
                    run.row = row
                    told.append(RunChanged(row))
                if row.ended and not run.finished_told:
                    run.finished_told = True
                    told.append(RunFinished(row))
            every_row = tuple(run.row for run in self._runs.values())
            if every_row and all(r.ended for r in every_row) and not self._finished_told:
                self._finished_told = True
                self._done.set()
                told.append(FleetFinished(every_row))
        self._tell(told)

    def _read_orphans(self, conn: psycopg.Connection[Any]) -> int:
        """How many open requests of the fleet no attached analyst's role may answer (attached: a session of
        ``cua-tui attach`` on this database, as ``pg_stat_activity`` shows its role to any role)."""
        row = conn.execute(
            "SELECT count(*) FROM cua_tui.requests q WHERE q.fleet_id = %s AND q.answer IS NULL "
            "AND q.closed_at IS NULL AND q.approvers IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_stat_activity s "
            "JOIN pg_roles u ON u.rolname = s.usename WHERE s.application_name = %s AND s.datname = "
            "current_database() AND EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = ANY (q.approvers) "
            "AND pg_has_role(u.oid, r.oid, 'MEMBER')))",
            (self.fleet_id, ATTACH),
        ).fetchone()
        return int(row[0]) if row is not None else 0

    def _mark(self, conn: psycopg.Connection[Any]) -> None:
        """This analyst's "read by" marks: written when the panel changed, renewed before they lapse."""
        with self._lock:
            looking = self._looking
        now = time.monotonic()
        if looking == self._looked and (not looking or now < self._look_due):
            return
        conn.execute("SELECT cua_tui.look(%s::bigint[], %s)", (list(looking), LOOK_LEASE_S))
        self._looked, self._look_due = looking, now + LOOK_RENEW_S

    def _read_readers(self, conn: psycopg.Connection[Any]) -> dict[int, tuple[str, ...]]:
        """Who else has each open request of the fleet on their panel: a mark in its lease, of a session that
        lives (another terminal of the same role counts; this one does not)."""
        found = conn.execute(
            "SELECT l.request_id, (array_agg(DISTINCT left(l.role, 64)))[1:%s] FROM cua_tui.looks l "
            "JOIN cua_tui.requests q ON q.id = l.request_id WHERE q.fleet_id = %s AND q.answer IS NULL "
            "AND q.closed_at IS NULL AND l.until > clock_timestamp() AND l.pid <> pg_backend_pid() "
            "AND l.pid IN (SELECT pid FROM pg_stat_activity) GROUP BY l.request_id LIMIT %s",
            (READERS_NAMED, self.fleet_id, MAX_OPEN),
        ).fetchall()
        return {int(rid): tuple(visible(str(r), limit=64) for r in roles or ()) for rid, roles in found}

    def _read_policies(self, conn: psycopg.Connection[Any]) -> None:
        """The policy of each run whose view is open (every run's, with drills on), once: its spec's text,
        bounded, and only if it is the text its SHA-256 names (a row is someone else's writing; one that cannot
        be read leaves e unoffered)."""
        with self._lock:
            # with drills on, every run's: a drill offers the scope its run's policy would give its action
            drilling = self.drills is not None
            due = [r.row.run_id for r in self._runs.values() if (r.watchers or drilling) and not r.policy_read]
        if not due:
            return
        found = conn.execute(
            "SELECT id, CASE WHEN octet_length(spec->'policy'->>'text') <= %s THEN spec->'policy'->>'text' END, "
            "left(spec->'policy'->>'sha256', 64) FROM cua_tui.runs WHERE id = ANY(%s)",
            (MAX_POLICY_BYTES, due),
        ).fetchall()
        read: dict[str, Policy | None] = {}
        for rid, text, sha in found:
            policy = None
            if isinstance(text, str) and hashlib.sha256(text.encode()).hexdigest() == sha:
                with contextlib.suppress(PolicyError):
                    policy = Policy.from_toml(text, source=f"run {rid}'s spec")
            read[str(rid)] = policy
        with self._lock:
            for run in self._runs.values():
                if run.row.run_id in read:
                    run.policy, run.policy_read = read[run.row.run_id], True

    def _read_runs(self, conn: psycopg.Connection[Any]) -> dict[str, RunRow]:
        found = conn.execute(
            "SELECT id, left(task_name, 64), left(backend, 64), state, left(worker_id, 100), left(phase, 40), "
            "turn, steps, left(status, 40), left(reason, 500), verified, left(spec->>'lab', 64), "
            "left(spec->>'url', 500), position, mirrored FROM cua_tui.runs WHERE fleet_id = %s "
            "ORDER BY position LIMIT 100000",
            (self.fleet_id,),
        ).fetchall()
        rows: dict[str, RunRow] = {}
        for (
            rid,
            name,
            backend,
            state,
            worker,
            phase,
            turn,
            steps,
            status,
            reason,
            verified,
            lab,
            url,
            pos,
            mirrored,
        ) in found:
            self._mirrored[str(rid)] = int(mirrored or 0)
            task = self._task_of.get(rid)
            if task is None:
                task = str(name) if str(name) not in rows else f"{name}~{pos}"
                self._task_of[rid] = task
            shown = {"queued": RunState.QUEUED, "running": RunState.RUNNING}.get(str(state), RunState.ENDED)
            rows[task] = RunRow(
                task=task, backend=str(backend), state=shown, run_id=str(rid), phase=str(phase or ""),
                turn=int(turn or 0), steps=int(steps or 0), status=str(status or "") if shown == RunState.ENDED else "",
                reason=str(reason or ""), verified=verified, target=f"lab {lab}" if lab else str(url or ""),
                worker=str(worker or ""),
            )  # fmt: skip
        return rows

    def _read_requests(self, conn: psycopg.Connection[Any], told: list[FleetEvent]) -> dict[int, QueueItem]:
        found = conn.execute(
            "SELECT q.id, q.run_id, q.seq, extract(epoch FROM q.posted_at)::float8, q.screen, "
            "left(q.body->>'rule', 200), CASE WHEN octet_length(q.body::text) <= %(body)s THEN q.body END, "
            "CASE WHEN octet_length(q.texts::text) <= %(texts)s THEN q.texts END, q.texts IS NOT NULL, "
            f"{_DECIDERS} FROM cua_tui.requests q WHERE q.fleet_id = %(fleet)s AND q.answer IS NULL "
            "AND q.closed_at IS NULL AND NOT EXISTS (SELECT 1 FROM cua_tui.asides s WHERE s.request_id = q.id "
            "AND s.role = session_user AND s.until > clock_timestamp()) "
            "ORDER BY q.tier, q.posted_at, q.id LIMIT %(n)s",
            {"body": rq.MAX_BODY_BYTES, "texts": rq.MAX_TEXTS_BYTES, "fleet": self.fleet_id, "n": MAX_OPEN,
             "edit": EDIT_BYTES, "text": MAX_TEXT + 1},
        ).fetchall()  # fmt: skip
        open_ids = {int(r[0]) for r in found}
        with self._lock:
            known = dict(self._items)
        fresh: dict[int, QueueItem] = {}
        for rid, run_id, seq, posted, screen, rule, body, texts, has_texts, *ruled in found:
            request_id = int(rid)
            try:
                deciders, edited = _deciders(ruled)
            except rq.RowError as exc:
                self.unreadable[request_id] = f"request {request_id}: {exc}"
                continue
            if deciders.escalated and request_id not in self._escalated:
                self._escalated.add(request_id)
                self._escalate(request_id, body)
            if request_id in known:
                item = known[request_id]
                if (item.deciders, item.request.action) != (deciders, edited or self._proposed(item)):
                    # its approvals, its pending edit or its escalation changed: a new item, which an answer
                    # pressed on the one before (another screen) no longer matches
                    item = replace(item, deciders=deciders, request=replace(item.request, action=edited or
                                   self._proposed(item)))  # fmt: skip
                    if request_id in self._drilling:  # held behind its drill: told once that is answered
                        with self._lock:
                            up = self._drilling.get(request_id)
                            if up is not None:
                                self._drilling[request_id] = replace(up, real=item)
                    else:
                        told.append(RequestQueued(item))
                fresh[request_id] = item
                continue
            if request_id in self.unreadable:
                continue
            task = self._task_of.get(str(run_id))
            if task is None:
                continue  # its run is read next pass
            if body is None or (texts is None and has_texts):
                self.unreadable[request_id] = f"request {request_id}: larger than a request may be; not shown"
                continue
            frame = self._frame(conn, screen) if screen else None
            with self._lock:
                run = self._runs.get(task)
                behind = run is None or run.view.seq < int(seq)
            if (screen and frame is None) or behind:
                # the worker's mirror brings the screen and the request's line in a moment: shown with
                # them, as a run of this process shows it (its screen painted before the guard counts)
                first = self._waiting_screen.setdefault(request_id, time.monotonic())
                if time.monotonic() - first < SCREEN_WAIT_S:
                    continue
            try:
                request = self._decode(conn, request_id, body, texts, screen)
            except rq.RowError as exc:
                self.unreadable[request_id] = str(exc)
                continue
            self._waiting_screen.pop(request_id, None)
            item = QueueItem(
                ticket=request_id, task=task, run_id=str(run_id),
                request=replace(request, action=edited) if edited is not None else request,
                priority=priority(request, str(rule or "")), asked_at=float(posted), seq=int(seq), deciders=deciders,
            )  # fmt: skip
            fresh[request_id] = item
            told.append(RequestQueued(self._front(item)))
        gone = [known[i] for i in known if i not in open_ids]
        if gone and len(found) >= MAX_OPEN:
            # past the first MAX_OPEN in the queue's order is not closed: those still open stay
            still = {
                int(r[0])
                for r in conn.execute(
                    "SELECT id FROM cua_tui.requests WHERE id = ANY(%s) AND answer IS NULL AND closed_at IS NULL",
                    ([item.ticket for item in gone],),
                )
            }
            fresh.update((item.ticket, item) for item in gone if item.ticket in still)
            gone = [item for item in gone if item.ticket not in still]
        whys = self._why_closed(conn, [item.ticket for item in gone]) if gone else {}
        self._rolled.difference_update(item.ticket for item in gone)
        with self._lock:
            self._items = fresh
            for item in gone:
                why = whys.get(item.ticket, "closed")
                up = self._drilling.pop(item.ticket, None)
                if up is not None:
                    # answered by another analyst, or its run ended, while this one's drill stood in front of
                    # it: the row closes as the request's would (saying who answered it), and the drill goes
                    # unanswered, unscored; the run's view shows the request's place as written
                    self._closed[up.item.ticket] = why
                    told.append(RequestClosed(up.item, why))
                    run = self._runs.get(item.task)
                    if run is not None:
                        run.view.drill_withdrawn()
                elif item.ticket not in self._answering:
                    told.append(RequestClosed(item, why))
        return fresh

    def _escalate(self, request_id: int, body: Any) -> None:
        """A request escalated to this role's group: the settings' ``on_escalate`` command, if any, gets it as
        JSON on stdin (the panel's body: typed text as length and SHA-256 only), bounded and timed out as an
        approver command is, on a thread of its own; whatever it answers is ignored."""
        if self.on_escalate is None or not isinstance(body, dict):
            return
        data = {**body, "request_id": request_id, "escalated": True, "fleet": self.fleet_id}
        try:
            command = CommandApprover(self.on_escalate, timeout=ESCALATE_TIMEOUT_S)
        except ValueError:
            return
        threading.Thread(target=command.ask, args=(data, self._stop), name="cua-on-escalate", daemon=True).start()

    def _proposed(self, item: QueueItem) -> Any:
        """The action as its model proposed it (the row as first read), before any approver's edit."""
        with self._lock:
            first = self._decoded.get(item.ticket)
        return first.action if first is not None else item.request.action

    def _why_closed(self, conn: psycopg.Connection[Any], ids: list[int]) -> dict[int, str]:
        """Who answered each of ``ids`` and when, or why it closed; kept, for an answer to one of them."""
        out = {i: analyst.why_not(conn, i) for i in ids[:MAX_OPEN]}
        with self._lock:
            self._closed.update(out)
            while len(self._closed) > CLOSED_KEPT:
                self._closed.pop(next(iter(self._closed)))
        return out

    def _frame(self, conn: psycopg.Connection[Any], sha: str) -> Frame | None:
        png = self._screen(conn, sha)
        if png is None:
            return None
        try:
            width, height = png_size(png)
        except ImageRefused:
            return None
        return Frame(png, width, height, sha)

    def _screen(self, conn: psycopg.Connection[Any], sha: str) -> bytes | None:
        """A screen by its SHA-256, bounded, and only if its bytes are that screen."""
        with self._lock:
            png = self._screens.get(sha)
        if png is not None:
            return png
        row = conn.execute(
            "SELECT CASE WHEN octet_length(png) <= %s THEN png END FROM cua_tui.screens WHERE sha256 = %s",
            (HELD_SCREEN_CAP, sha),
        ).fetchone()
        if row is None or row[0] is None:
            return None
        png = bytes(row[0])
        if hashlib.sha256(png).hexdigest() != sha:
            return None
        with self._lock:
            self._screens[sha] = png
            while len(self._screens) > SCREENS_KEPT or sum(map(len, self._screens.values())) > SCREEN_BYTES_KEPT:
                self._screens.pop(next(iter(self._screens)))
        return png

    def _read_lines(self, conn: psycopg.Connection[Any]) -> None:
        """Each running run's mirrored lines since the last pass, folded into its view and told to its
        watchers; the newest screen of each, with its pixels."""
        with self._lock:
            # every run with lines mirrored past its view (an ended run's too: Enter opens it whole)
            cursors = {
                run.row.run_id: run.seq
                for run in self._runs.values()
                if run.row.run_id and run.seq + 1 < self._mirrored.get(run.row.run_id, 0)
            }
        if not cursors:
            return
        # at most LINES_PER_PASS lines and LINE_BYTES_PER_PASS bytes (each line capped): a worker's rows are
        # not trusted to be the few hundred bytes an audit line is
        found = conn.execute(
            "SELECT run_id, seq, line FROM (SELECT run_id, seq, line, sum(size) OVER (ORDER BY run_id, seq) AS upto "
            "FROM (SELECT e.run_id, e.seq, CASE WHEN octet_length(e.line) <= %(cap)s THEN e.line END AS line, "
            "least(octet_length(e.line), %(cap)s) AS size FROM cua_tui.events e "
            "JOIN unnest(%(runs)s::text[], %(after)s::bigint[]) AS c(run_id, after) ON c.run_id = e.run_id "
            "WHERE e.seq > c.after ORDER BY e.run_id, e.seq LIMIT %(n)s) AS due) AS counted "
            "WHERE upto <= %(budget)s ORDER BY run_id, seq",
            {"cap": LINE_CAP, "runs": list(cursors), "after": list(cursors.values()), "n": LINES_PER_PASS,
             "budget": LINE_BYTES_PER_PASS},
        ).fetchall()  # fmt: skip
        by_run: dict[str, list[ev.Stamped]] = {}
        for run_id, seq, line in found:
            stamped = (
                line_event(int(seq), bytes(line))
                if line is not None
                else ev.Stamped(int(seq), "", ev.Note(f"line {int(seq) + 1}: larger than a line may be; not read"))
            )
            by_run.setdefault(str(run_id), []).append(stamped)
        asked = self._requests_of(conn, by_run)
        for run_id, lines in by_run.items():
            lines = self._with_requests(run_id, lines, asked)
            if not lines:
                continue
            newest = max((i for i, s in enumerate(lines) if isinstance(s.event, ev.ScreenCaptured)), default=None)
            if newest is not None:
                shot = lines[newest]
                assert isinstance(shot.event, ev.ScreenCaptured)
                png = self._screen(conn, shot.event.sha256)
                if png is not None:
                    lines[newest] = replace(shot, event=replace(shot.event, png=png))
            with self._lock:
                task = self._task_of.get(run_id)
                run = self._runs.get(task) if task is not None else None
                if run is None:
                    continue
                for stamped in lines:
                    run.view.apply(stamped)
                run.seq = lines[-1].seq
                watchers = list(run.watchers or ())
            for watcher in watchers:
                for stamped in lines:
                    watcher(stamped)

    def _requests_of(
        self, conn: psycopg.Connection[Any], by_run: dict[str, list[ev.Stamped]]
    ) -> dict[tuple[str, int], DecisionRequest | str]:
        """The request rows the ``decision_requested`` lines among ``by_run`` posted, as their requests (or
        why a row cannot be used): a line read back holds no request, a run of this process's does."""
        wanted = [(r, s.seq) for r, lines in by_run.items() for s in lines if isinstance(s.event, ev.DecisionRequested)]
        if not wanted:
            return {}
        out: dict[tuple[str, int], DecisionRequest | str] = {}
        for rid, run_id, seq, screen, body, texts, has_texts in conn.execute(
            "SELECT q.id, q.run_id, q.seq, q.screen, CASE WHEN octet_length(q.body::text) <= %s THEN q.body END, "
            "CASE WHEN octet_length(q.texts::text) <= %s THEN q.texts END, q.texts IS NOT NULL "
            "FROM cua_tui.requests q JOIN unnest(%s::text[], %s::bigint[]) AS w(run_id, seq) "
            "ON w.run_id = q.run_id AND w.seq = q.seq",
            (rq.MAX_BODY_BYTES, rq.MAX_TEXTS_BYTES, [w[0] for w in wanted], [w[1] for w in wanted]),
        ):
            key = (str(run_id), int(seq))
            if body is None or (texts is None and has_texts):
                out[key] = f"request {int(rid)}: larger than a request may be; not shown"
                continue
            try:
                out[key] = self._decode(conn, int(rid), body, texts, screen)
            except rq.RowError as exc:
                out[key] = str(exc)
        return out

    def _decode(
        self, conn: psycopg.Connection[Any], request_id: int, body: Any, texts: Any, screen: Any
    ) -> DecisionRequest:
        """A request row as its request, once: the queue's item and the run's view hold the same object (an
        answer from the run's view finds its item by it)."""
        with self._lock:
            known = self._decoded.get(request_id)
        if known is not None:
            return known
        request = rq.request_of_row(body, texts, self._frame(conn, screen) if screen else None, request_id)
        with self._lock:
            self._decoded[request_id] = request
            while len(self._decoded) > DECODED_KEPT:  # each holds its screen's bytes
                self._decoded.pop(next(iter(self._decoded)))
        return request

    def _with_requests(
        self, run_id: str, lines: list[ev.Stamped], asked: dict[tuple[str, int], DecisionRequest | str]
    ) -> list[ev.Stamped]:
        """``lines`` with each ``decision_requested`` holding its request; up to one whose row is not posted
        yet (the worker posts it as the line is written), held back a moment, then folded without it."""
        out: list[ev.Stamped] = []
        for stamped in lines:
            event = stamped.event
            if isinstance(event, ev.DecisionRequested):
                found = asked.get((run_id, stamped.seq))
                if found is None:
                    first = self._line_wait.setdefault((run_id, stamped.seq), time.monotonic())
                    if time.monotonic() - first < SCREEN_WAIT_S:
                        return out  # read again from here next pass
                elif not isinstance(found, str):  # a row that cannot be used: folded as read (the queue says it)
                    stamped = replace(stamped, event=replace(event, request=found))
                self._line_wait.pop((run_id, stamped.seq), None)
            out.append(stamped)
        return out

    def _tell(self, told: list[FleetEvent]) -> None:
        if not told:
            return
        with self._lock:
            listeners = list(self._listeners)
        for event in told:
            for listener in listeners:
                listener(event)

    # ---------------------------------------------------------------------------------------------
    # The writer
    # ----------------------------------------------------------------------------------------------
    def _write_loop(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        backoff = db.Backoff(lambda line: None)
        while True:
            job = self._answers.get()
            if job is None or self._stop.is_set():
                break
            if isinstance(job, list):
                # a kill switch is never dropped: tried again until the server takes it (it is idempotent)
                while not self._stop.is_set():
                    try:
                        if conn is None or conn.closed:
                            conn = db.connect(self.url, ATTACH, check_schema=False)
                        conn.execute("SELECT cua_tui.kill_runs(%s)", (job,))
                        backoff.ok()
                        break
                    except (db.QueueError, psycopg.OperationalError, psycopg.InterfaceError) as exc:
                        if conn is not None:
                            conn.close()
                        conn = None
                        self._stop.wait(backoff.failed("killing", exc))
                self._wake.set()
                continue
            if isinstance(job, _DrillJob):
                conn = self._send_drill(conn, backoff, job.request_id, job.record)
                continue
            if len(job) == 3 and isinstance(job[0], str):
                _, item, minutes = job
                line: str | None = None
                try:
                    if conn is None or conn.closed:
                        conn = db.connect(self.url, ATTACH, check_schema=False)
                    conn.execute("SELECT cua_tui.set_aside(%s, %s)", (item.ticket, minutes))
                except psycopg.errors.CheckViolation as exc:
                    line = f"not set aside: {analyst.refusal(exc)}"
                except (db.QueueError, psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    if conn is not None:
                        conn.close()
                    conn = None
                    line = f"not set aside ({exc if isinstance(exc, db.QueueError) else db.one_line_error(exc)})"
                if line is not None:
                    with self._lock:
                        self._items[item.ticket] = item  # back in view: the aside was not recorded
                    self._tell([RequestQueued(item), AnswerRefused(item, line)])
                continue
            items, answer, details = job
            try:
                if conn is None or conn.closed:
                    conn = db.connect(self.url, ATTACH, check_schema=False)
                outcomes = self._commit(conn, items, answer, details)
            except (db.QueueError, psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if conn is not None:
                    conn.close()
                conn = None
                why = exc if isinstance(exc, db.QueueError) else db.one_line_error(exc)
                outcomes = [analyst.Outcome(item.ticket, False, f"request {item.ticket}: not answered ({why}); "
                                            "it is still open", open=True) for item in items]  # fmt: skip
                with self._lock:
                    self._answering.difference_update(item.ticket for item in items)
                self._tell([RequestQueued(item) for item in items])
            self._settle(items, outcomes)
        if conn is not None:
            conn.close()

    def _send_drill(
        self, conn: psycopg.Connection[Any] | None, backoff: db.Backoff, request_id: int, record: dict[str, Any]
    ) -> psycopg.Connection[Any] | None:
        """A drill's answer to the run's worker, as a row the server names this role in; tried again while the
        server is away (a score is not dropped), given up only if the server refuses it."""
        while not self._stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = db.connect(self.url, ATTACH, check_schema=False)
                conn.execute("SELECT cua_tui.drill_answered(%s, %s)", (request_id, Jsonb(record)))
                backoff.ok()
                return conn
            except psycopg.errors.CheckViolation:
                return conn  # its request is gone, or not this role's: nothing to record it against
            except (db.QueueError, psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if conn is not None:
                    conn.close()
                conn = None
                self._stop.wait(backoff.failed("recording a drill", exc))
        return conn

    def _commit(
        self, conn: psycopg.Connection[Any], items: list[QueueItem], answer: Answer, details: AnswerDetails
    ) -> list[analyst.Outcome]:
        note = details.get("note", "")
        group = details.get("group")
        # what this analyst was shown, for the run's chain (the screen's SHA-256, how long)
        screen, shown_ms = details.get("screen", ""), details.get("shown_ms")
        # a: each run grants its request's scope; e: the action to run instead (one run's view only)
        grant = bool(details.get("grant")) and answer is Answer.APPROVE
        edit = details.get("edit") if answer is Answer.APPROVE else None
        if edit is None and answer is Answer.APPROVE and len(items) == 1:
            rule = items[0].deciders
            if rule is not None and rule.edited_by:
                # y on an approver's edit, as the screen showed it: the approval names that action (the server
                # counts it only with the approvals of the same one)
                edit = items[0].request.action
        if group is not None and len(items) > 0:
            ids = [item.ticket for item in items]
            return analyst.answer_group(
                conn, ids, answer, how=HOW, group_id=group[0], note=note, screen=screen, shown_ms=shown_ms,
                grant=grant,
            )  # fmt: skip
        return [
            analyst.answer(conn, item.ticket, answer, how=HOW, note=note, screen=screen, shown_ms=shown_ms,
                           grant=grant, edit=edit)
            for item in items
        ]  # fmt: skip

    def _settle(self, items: list[QueueItem], outcomes: list[analyst.Outcome]) -> None:
        told: list[FleetEvent] = []
        with self._lock:
            for item, outcome in zip(items, outcomes, strict=True):
                self._answering.discard(item.ticket)
                if outcome.won:
                    if self._items.pop(item.ticket, None) is not None:
                        told.append(RequestClosed(item, "answered"))
                elif outcome.pending:
                    told.append(AnswerRecorded(item, outcome.line))  # open, for another role's approval
                elif outcome.open:
                    told.append(AnswerRefused(item, outcome.line))
                else:
                    self._items.pop(item.ticket, None)
                    told.append(AnswerRefused(item, outcome.line))
        self._tell(told)
