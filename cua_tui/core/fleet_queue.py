"""The fleet's pure parts: the one approval queue across runs, its order (risk, then age), and what a fleet
front end sees (``FleetControl``, the protocol the fleet TUI is given). No threads, no locks and no I/O.
The order and its tiers: docs/commands/fleet.md, "The queue".
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol, Unpack

from .events import Stamped
from .grouping import Likeness
from .policy import Policy
from .ports import Answer, AnswerDetails, DecisionRequest
from .run_view import RunView
from .takeover import Desk


class Tier(IntEnum):
    """A request's risk tier: lower comes first."""

    SAFETY_CHECK = 0
    # a marked region, or a transmission (typing, a key that submits or sends)
    RISKY = 1
    OTHER = 2


TRANSMISSION_RULES = frozenset(
    {"actions.type", "keys.confirm:Return", "keys.confirm:KP_Enter", "keys.confirm:ctrl+Return"}
)
REGION_PREFIX = "regions."


@dataclass(frozen=True, slots=True)
class Priority:
    """Where a request sits and why: ``tier``, ``label`` (safety check | region | transmission | other), the
    policy ``rule`` that asked (``regions.send``, ``actions.type``, ``safety_check``), and ``why``, a sentence."""

    tier: Tier
    label: str
    rule: str
    why: str


def priority(request: DecisionRequest, rule: str) -> Priority:
    """The place of ``request`` in the queue; ``rule`` is the policy rule of its verdict (``""`` for a
    safety check, which no policy rule raises)."""
    if request.kind == "safety_check":
        return Priority(Tier.SAFETY_CHECK, "safety check", "safety_check", "the model raised safety checks: first")
    if request.kind == "budget":
        return Priority(Tier.OTHER, "budget", "soft budget", "a soft budget was crossed: after the risky actions")
    if request.kind == "ask":
        # a run waits on a person here, with nothing to approve: with the risky actions
        return Priority(Tier.RISKY, "other", "model.asks", "the model asks for a person: second")
    if rule.startswith(REGION_PREFIX):
        name = rule.removeprefix(REGION_PREFIX)
        return Priority(Tier.RISKY, "region", rule, f"a click in the marked region {name!r}: second")
    if rule in TRANSMISSION_RULES:
        what = "typing" if rule == "actions.type" else f"the key {rule.removeprefix('keys.confirm:')}"
        return Priority(Tier.RISKY, "transmission", rule, f"{what} can send data out: second")
    return Priority(Tier.OTHER, "other", rule or "?", f"rule {rule or '?'}: after safety checks, regions, sending")


@dataclass(frozen=True, slots=True)
class Deciders:
    """On a team's queue: who may answer a request and how many must approve it (the rule it took as it was
    posted, the server's to enforce), as this analyst sees it now."""

    approvers: tuple[str, ...] | None = None  # None: any analyst; (): nobody
    quorum: int = 1
    approved_by: tuple[str, ...] = ()  # the approvals counted so far, in order
    mine: bool = True  # this analyst's role may answer it
    edited_by: str = ""  # the action shown is this approver's edit, which another approval approves
    escalated: bool = False  # it escalated to a group this analyst is in
    asides: int = 0  # how often someone set it aside

    @property
    def approvals_line(self) -> str:
        """``1 of 2 approvals, by alice``, or ``""`` where one answer decides."""
        if self.quorum <= 1:
            return ""
        line = f"{len(self.approved_by)} of {self.quorum} approvals"
        return line + (f", by {', '.join(self.approved_by)}" if self.approved_by else "")

    @property
    def who(self) -> str:
        """Who may answer, in words."""
        if self.approvers is None:
            return "any analyst"
        return ", ".join(self.approvers) if self.approvers else "nobody"


@dataclass(frozen=True, slots=True)
class QueueItem:
    """One pending decision of one run of the fleet.

    ``ticket`` is unique in the fleet and names this request for good: an answer carries the item, and
    the runner refuses it unless this very ticket is still pending. ``asked_at`` is the runner's clock
    (monotonic seconds) when the request's ``decision_requested`` event was written; ``seq`` is that
    event's place in the run's audit chain."""

    ticket: int
    task: str  # the task's name in the tasks file
    run_id: str
    request: DecisionRequest
    priority: Priority
    asked_at: float
    seq: int
    # what makes it the same decision as another run's (core/grouping.py); None: not worked out
    likeness: Likeness | None = None
    # on a team's queue: who may answer it and how many must approve (None: a fleet of this process)
    deciders: Deciders | None = None

    @property
    def order(self) -> tuple[int, float, int]:
        """The sort key: risk tier, then age (older first), then ticket."""
        return (int(self.priority.tier), self.asked_at, self.ticket)

    def waited(self, now: float) -> float:
        """Seconds this request has waited at ``now`` (the runner's clock)."""
        return max(0.0, now - self.asked_at)


class ApprovalQueue:
    """The pending requests of every run, in order. Plain data: the runner serializes access to it."""

    def __init__(self) -> None:
        self._items: dict[int, QueueItem] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[QueueItem]:
        return iter(self.items())

    def __contains__(self, item: object) -> bool:
        return isinstance(item, QueueItem) and self._items.get(item.ticket) is item

    def add(self, item: QueueItem) -> None:
        if item.ticket in self._items:
            raise ValueError(f"ticket {item.ticket} is already queued")
        self._items[item.ticket] = item

    def remove(self, item: QueueItem) -> bool:
        """Take ``item`` out; False when it was not pending (this exact item)."""
        if self._items.get(item.ticket) is not item:
            return False
        del self._items[item.ticket]
        return True

    def find(self, run_id: str, turn: int, index: int, kind: str) -> QueueItem | None:
        """The pending item of run ``run_id`` for the request at ``(turn, index)`` of ``kind``."""
        for item in self._items.values():
            r = item.request
            if item.run_id == run_id and r.turn == turn and r.index == index and r.kind == kind:
                return item
        return None

    def of_run(self, run_id: str) -> list[QueueItem]:
        return [item for item in self._items.values() if item.run_id == run_id]

    def items(self) -> list[QueueItem]:
        """Every pending item, first to decide first."""
        return sorted(self._items.values(), key=lambda item: item.order)


# ------------------------------------------------------------------------------------------------
# What a front end sees: one row per task, and the changes it is told about
# --------------------------------------------------------------------------------------------------
class RunState:
    """A fleet run's state (strings, as shown)."""

    QUEUED = "queued"  # not started yet (the concurrency limit)
    RUNNING = "running"
    WAITING = "waiting"  # a decision request of this run is pending
    TAKEN = "taken"  # the reviewer has its desktop (a takeover): it alone is paused
    ENDED = "ended"


@dataclass(frozen=True, slots=True)
class RunRow:
    """One task of the fleet as a front end's table shows it; an immutable snapshot.

    ``run_id`` and ``path`` are empty until the run is built; ``status`` is set once it ended (a run
    cancelled before it started ends ``killed`` with no run directory; one that could not be built ends
    ``error``); ``verified`` is the verifier's verdict (None: none ran), ``verifier`` who vouched for it;
    ``intact`` whether its audit log
    verified intact after the seal (None until checked)."""

    task: str
    backend: str
    state: str = RunState.QUEUED
    run_id: str = ""
    path: str = ""
    phase: str = ""
    turn: int = 0
    steps: int = 0
    # runner clock: when its oldest pending request was asked
    waiting_since: float | None = None
    status: str = ""
    reason: str = ""
    verified: bool | None = None
    # where the verdict's verifier ran (core.ports.VerifierPlace), "" without a verdict
    verifier: str = ""
    intact: bool | None = None
    # where its desktop goes: "lab form", or the URL it opens
    target: str = ""
    # hosts the task lets the browser reach besides its target
    allowed: tuple[str, ...] = ()
    # the worker process that runs it, on a team's queue ("" in a fleet of this process)
    worker: str = ""

    @property
    def ended(self) -> bool:
        return self.state == RunState.ENDED


@dataclass(frozen=True, slots=True)
class RequestQueued:
    """A new request joined the queue."""

    item: QueueItem


@dataclass(frozen=True, slots=True)
class RequestClosed:
    """A request left the queue. ``why``: ``answered`` (through ``FleetControl.answer``), ``decided by
    <who>`` (an approver command, a grant, the kill switch), ``run killed`` or ``run ended (<status>)``."""

    item: QueueItem
    why: str


@dataclass(frozen=True, slots=True)
class AnswerRefused:
    """An answer ``FleetControl.answer`` took (it returned None) did not count after all: on a team's queue,
    another analyst answered first, or the request closed, or the link dropped before the commit. ``line``
    says who answered what and when, or why not, in one line."""

    item: QueueItem
    line: str


@dataclass(frozen=True, slots=True)
class AnswerRecorded:
    """An answer ``FleetControl.answer`` took counted without closing the request: on a team's queue, an
    approval under a two-person rule, which waits for another role's. ``line`` says so in one line."""

    item: QueueItem
    line: str


@dataclass(frozen=True, slots=True)
class RunChanged:
    """A row changed (state, phase, turn, steps, waiting time)."""

    row: RunRow


@dataclass(frozen=True, slots=True)
class RunFinished:
    """A run ended (``row.status`` says how); sent once per task, after its last ``RunChanged``."""

    row: RunRow


@dataclass(frozen=True, slots=True)
class FleetFinished:
    """Every task of the fleet ended; the last event a listener receives."""

    rows: tuple[RunRow, ...]


@dataclass(frozen=True, slots=True)
class ReadersChanged:
    """On a team's queue: who else has which request on their panel changed (``FleetControl.readers``)."""


FleetEvent = (
    RequestQueued
    | RequestClosed
    | AnswerRefused
    | AnswerRecorded
    | RunChanged
    | RunFinished
    | FleetFinished
    | ReadersChanged
)
FleetListener = Callable[[FleetEvent], None]


class FleetControl(Protocol):
    """What a front end needs of a running fleet (implemented by cua_tui.fleet_runner.Fleet).

    Threads: every method is safe from any thread. Listeners are called on the fleet's one dispatcher
    thread, in order, never with a run's lock held: they may call any method here, but must return
    quickly (post a message to the UI thread; do not wait for it)."""

    fleet_id: str
    # the runs live in this process and end with it (leaving the TUI kills them); False on a team's queue,
    # where leaving detaches and the workers go on
    owns_runs: bool

    # returns at once; a second call does nothing; OSError: the runs dir
    def start(self) -> None: ...
    # "" while the fleet can be reached; else one line (a team's queue reconnecting), which the keys that
    # need it say when pressed
    def link(self) -> str: ...
    # drills may come before some of its requests (core/drills.py): the header says so, never which
    @property
    def drills_on(self) -> bool: ...
    def subscribe(self, listener: FleetListener) -> Callable[[], None]: ...
    def rows(self) -> list[RunRow]: ...
    def row(self, task: str) -> RunRow: ...  # KeyError for a task not in the fleet
    def queue(self) -> list[QueueItem]: ...
    # the requests on this analyst's panel now: on a team's queue the others see them "read by <role>" (a short
    # lease, renewed while they stay there); () when none is
    def looking(self, tickets: Collection[int]) -> None: ...
    # who else has each request on their panel (ticket -> roles); never blocks an answer; {} in this process
    def readers(self) -> Mapping[int, tuple[str, ...]]: ...
    # a team's queue: the request leaves this analyst's view for ``minutes`` (never answered); None, or why not
    def set_aside(self, item: QueueItem, minutes: float) -> str | None: ...
    def answer(self, item: QueueItem, answer: Answer, **details: Unpack[AnswerDetails]) -> str | None: ...
    # a group's answer: each item's refusal or None, in order (on a team's queue, one transaction)
    def answer_many(
        self, items: Sequence[QueueItem], answer: Answer, **details: Unpack[AnswerDetails]
    ) -> list[str | None]: ...
    def kill(self, task: str, by: str = ...) -> bool: ...
    def kill_all(self, by: str = ...) -> None: ...
    def revoke(self, task: str, grant_id: int) -> bool: ...
    def view(self, task: str) -> RunView: ...  # a private copy of the run's view
    def policy(self, task: str) -> Policy | None: ...  # the run's policy (None: not started)
    def desk(self, task: str) -> Desk | None: ...  # the run's desktop, to take over (None: not started)
    # (that copy, unwatch); then every Stamped event of the task's run, on the dispatcher thread
    def watch(self, task: str, listener: Callable[[Stamped], None]) -> tuple[RunView, Callable[[], None]]: ...
    def now(self) -> float: ...
    @property
    def done(self) -> bool: ...
