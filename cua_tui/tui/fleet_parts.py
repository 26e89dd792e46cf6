"""The fleet screen's parts beside its queue: one run of the fleet as a run's screen sees it (``FleetRun``),
the wording of a request's run and group for the decision panel, the fleet's two dialogs (kill every run;
a typed text the panel cut, in full), the inbox of the fleet's changes and a group's answers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Unpack

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..core import events as ev
from ..core.actions import Kind
from ..core.drills import REVEALED
from ..core.fleet_queue import (
    AnswerRecorded,
    AnswerRefused,
    Deciders,
    FleetControl,
    FleetEvent,
    FleetFinished,
    QueueItem,
    ReadersChanged,
    RequestClosed,
    RequestQueued,
    RunChanged,
    RunFinished,
    RunRow,
)
from ..core.policy import Policy
from ..core.ports import Answer, AnswerDetails, DecisionRequest
from ..core.queue_rules import Group
from ..core.run_view import RunView
from ..core.takeover import Desk
from ..core.text import visible
from .keys import ALL_TEXT, KILL_ALL, bindings
from .literal import literal
from .status import RunInfo

KILLED_BY = "human (fleet TUI)"
NO_TEAM_TAKEOVER = (
    "a takeover needs the run's desktop, which is on its worker's machine: not on a team's queue in this version"
)
# What a y approves (typed text, the words read at a target) is shown whole up to this many characters;
# past it, that many and how many more, and where the rest is read.
SHOWN_CHARS = 160


class KillAllScreen(ModalScreen[bool]):
    """``K``: kill every run? y kills, n or Esc keeps them going."""

    BINDINGS = bindings(KILL_ALL)  # tui/keys.toml

    def __init__(self, going: int) -> None:
        super().__init__()
        self.going = going

    def compose(self) -> ComposeResult:
        with Vertical(id="kill-all-box"):
            yield Static(
                Text.assemble(
                    ("Kill every run of the fleet?", "bold"),
                    f"\n{self.going} not ended yet: each ends killed and is sealed; nothing more starts.\n",
                    ("y", "bold reverse"),
                    " kills them all   ",
                    ("n", "bold reverse"),
                    " / ",
                    ("Esc", "bold reverse"),
                    " keeps them going",
                )
            )

    def action_answer(self, kill: bool) -> None:
        self.dismiss(kill)


def run_name(task: str, run_id: str) -> str:
    """The run a request is of, as the decision panel names it."""
    return f"{visible(task, limit=64)} · run {visible(run_id, limit=80) or '(not started)'}"


def group_line(group: Group) -> str:
    """Who a group stands for, and what its y does, for the decision panel."""
    tasks = [visible(item.task, limit=40) for item in group.members]
    named = ", ".join(tasks[:4]) + (f" and {len(tasks) - 4} more" if len(tasks) > 4 else "")
    # where it lands is said by the action's own lines (its point, where typing goes)
    return f"{group.size} runs ask this on the same screen: {named} · y / n / a answer each, recorded as its own"


def who_line(rule: Deciders) -> str:
    """On a team's queue: who may answer the request shown, its approvals so far, whose edit the action shown
    is, and whether this analyst may answer it (each name shown literally)."""
    parts = [f"{visible(rule.who, limit=120)} may answer"]
    if rule.approvals_line:
        parts.append(visible(rule.approvals_line, limit=160))
    if rule.edited_by:
        parts.append(f"the action as {visible(rule.edited_by, limit=63)} edited it: y approves the edit")
    if rule.escalated:
        parts.append("ESCALATED to your group")
    if rule.asides:
        parts.append(f"set aside {_times(rule.asides)} before")
    if not rule.mine:
        parts.append("not you: y and n say why not")
    return " · ".join(parts)


def _times(count: int) -> str:
    return {1: "once", 2: "twice"}.get(count, f"{count} times")


def cut_text(item: QueueItem) -> str | None:
    """The typed text of ``item`` when the panel shows only its first ``SHOWN_CHARS`` characters (else None)."""
    action = item.request.action
    if action is None or action.kind is not Kind.TYPE or len(action.text) <= SHOWN_CHARS:
        return None
    return action.text


class AllText(ModalScreen[bool]):
    """``enter`` on a request whose typed text the panel cut: all of it, literally, scrollable; ``esc`` returns
    to the fleet, ``enter`` opens the run's view. Nothing here answers."""

    BINDINGS = bindings(ALL_TEXT)  # tui/keys.toml

    def __init__(self, item: QueueItem, text: str) -> None:
        super().__init__()
        self.item = item
        self.text = text

    def compose(self) -> ComposeResult:
        request = self.item.request
        with VerticalScroll(id="all-text") as body:
            # a str border title is parsed as markup
            body.border_title = Text(
                f"{visible(self.item.task, limit=64)} · turn {request.turn} · action {request.index + 1}: "
                f"the typed text, all {len(self.text)} characters"
            )
            body.border_subtitle = Text("shown here only, never stored · esc returns · enter opens the run's view")
            yield Static(literal(self.text, style="reverse"), id="all-text-body")

    async def action_dismiss(self, result: bool | None = None) -> None:
        self.dismiss(bool(result))


def run_info(row: RunRow, view: RunView) -> RunInfo:
    """The goal and status bars' facts of a fleet run, from its row and its run_started event."""
    started = view.started
    if started is None:
        return RunInfo(row.run_id, row.backend, task=f"(task {row.task}: not started yet)", target=row.target)
    limits = started.limits

    def number(key: str) -> int:
        value = limits.get(key)
        return value if type(value) is int else 0

    return RunInfo(
        row.run_id,
        started.backend,
        started.agent,
        started.model,
        number("max_turns"),
        number("max_steps"),
        number("deadline_seconds"),
        task=started.task,
        target=f"{row.target or f'the {started.backend} desktop'} (fleet task {row.task})",
        allowed=row.allowed,
        policy=f"{started.policy} ({started.policy_sha256[:12]})",
    )


class FleetRun:
    """One run of the fleet as a RunScreen's source: its state when the view opened and every later event
    (``FleetControl.watch``), and the answers, through the fleet, to that run's own pending request."""

    live = True
    # the fleet runs it: leaving its view leaves it running
    owned = False
    policy_lines: list[str] = []

    def __init__(self, fleet: FleetControl, task: str) -> None:
        self.fleet = fleet
        self.task = self.label = task
        self.no_desk = "" if fleet.owns_runs else NO_TEAM_TAKEOVER
        # The runner's row as it is now, not the table's copy: that one is refreshed on a timer and
        # may not have the run's directory yet, whose audit log the earlier events are read back
        # from.
        self.row = fleet.row(task)
        self.run_name = run_name(task, self.row.run_id)
        self.run_dir = Path(self.row.path) if self.row.path else None
        self.info = run_info(self.row, RunView())
        self._unwatch: Callable[[], None] | None = None

    def attach(self, on_event: Callable[[ev.Stamped], None]) -> RunView:
        snapshot, self._unwatch = self.fleet.watch(self.task, on_event)
        self.info = run_info(self.row, snapshot)
        return snapshot

    def detach(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None

    def run(self) -> None:
        return None  # the fleet's own threads run it

    def kill(self, by: str = KILLED_BY) -> None:
        self.fleet.kill(self.task, by=KILLED_BY)

    def answer(self, answer: Answer, request: DecisionRequest, **details: Unpack[AnswerDetails]) -> str | None:
        queued = self.fleet.queue()
        item = next((item for item in queued if item.request is request), None)
        if item is None:
            same = (request.run_id, request.turn, request.index, request.kind)
            if any((i.run_id, i.request.turn, i.request.index, i.request.kind) == same for i in queued):
                # a team's request another analyst approved or edited since: this view shows it as it was
                return "it changed since (another analyst's approval or edit): answer it in the queue, as it is now"
            return "it is no longer pending"
        return self.fleet.answer(item, answer, **details)

    def revoke(self, grant_id: int) -> bool:
        return False  # grants are revoked from a lone run's view only

    @property
    def policy(self) -> Policy | None:
        return self.fleet.policy(self.task)

    @property
    def desk(self) -> Desk | None:
        return self.fleet.desk(self.task)


# ------------------------------------------------------------------------------------------------
# The fleet's changes, and a group's answers
# --------------------------------------------------------------------------------------------------
class FleetInbox:
    """The fleet's changes as its dispatcher thread tells them (``told``), taken on the UI thread (``take``):
    the tasks whose rows changed, whether the queue did; why recent requests closed (``closed``, bounded);
    whether every run ended. ``told`` says when the UI thread is to be woken: once, until it takes them."""

    CLOSED_KEPT = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: set[str] = set()
        self._queue = False
        self._woken = False
        self.closed: dict[int, str] = {}
        self.finished = False
        # answers that did not count after all (a team's queue), and those that counted without closing their
        # request (an approval under a two-person rule): said once each
        self._refused: list[str] = []
        self._recorded: list[str] = []
        # drills just answered, each revealed once (what was right and why, whether it was caught)
        self._revealed: list[str] = []

    def told(self, event: FleetEvent) -> bool:
        with self._lock:
            if isinstance(event, AnswerRefused):
                self._refused.append(event.line)
                self._queue = True
            elif isinstance(event, AnswerRecorded):
                self._recorded.append(event.line)
                self._queue = True
            elif isinstance(event, RequestClosed):
                self.closed[event.item.ticket] = event.why
                if event.why.startswith(REVEALED):
                    self._revealed.append(event.why)
                self._queue = True
            elif isinstance(event, RequestQueued | ReadersChanged):
                self._queue = True
            elif isinstance(event, FleetFinished):
                self._tasks.update(r.task for r in event.rows)
                self.finished = True
            elif isinstance(event, RunChanged | RunFinished):
                self._tasks.add(event.row.task)
            if self._woken:
                return False
            self._woken = True
            return True

    def note(self, tasks: Iterable[str], *, queue: bool = True, finished: bool = False) -> None:
        """Changes to take next time (the first look at every row; a table's changes kept for later)."""
        with self._lock:
            self._tasks.update(tasks)
            self._queue |= queue
            self.finished |= finished

    def refused(self) -> list[str]:
        """The lines of answers that did not count, since the last time."""
        with self._lock:
            lines, self._refused = self._refused, []
        return lines

    def revealed(self) -> list[str]:
        """The drills answered since the last time, as each was revealed."""
        with self._lock:
            lines, self._revealed = self._revealed, []
        return lines

    def recorded(self) -> list[str]:
        """The lines of approvals recorded without closing their request, since the last time."""
        with self._lock:
            lines, self._recorded = self._recorded, []
        return lines

    def take(self) -> tuple[set[str], bool]:
        """The tasks whose rows changed and whether the queue did, since the last time."""
        with self._lock:
            tasks, self._tasks = self._tasks, set()
            queue, self._queue = self._queue, False
            self._woken = False
            while len(self.closed) > self.CLOSED_KEPT:
                self.closed.pop(next(iter(self.closed)))
        return tasks, queue


def answer_group(
    fleet: FleetControl, group: Group, answer: Answer, details: AnswerDetails
) -> tuple[list[int], str, int]:
    """Each run of ``group`` as listed when the key was pressed, answered as its own decision naming the group;
    a run whose request closed, or whose screen differs from the first's, has left the group and is not
    answered. The tickets answered, what to tell the analyst, and how many had left."""
    pending = {item.ticket for item in fleet.queue()}
    like = group.first.likeness
    members = [
        m for m in group.members
        if m.ticket in pending and like is not None and m.likeness is not None and m.likeness.looks_like(like)
    ]  # fmt: skip
    answered: list[int] = []
    refusals: list[str] = []
    tagged: AnswerDetails = {**details, "group": (group.id, len(members))}
    for member, why in zip(members, fleet.answer_many(members, answer, **tagged), strict=True):
        if why is None:
            answered.append(member.ticket)
        else:
            refusals.append(why)
    left = group.size - len(answered)
    verb = {Answer.APPROVE: "approved", Answer.REJECT: "rejected"}.get(answer, str(answer))
    message = f"{verb} the same decision in {len(answered)} runs, each recorded as its own"
    if left:
        why = visible(refusals[0], limit=120) if refusals else "its request closed or its screen changed"
        message += f"; {left} of the {group.size} had left the group ({why}) and were not answered"
    return answered, message, left
