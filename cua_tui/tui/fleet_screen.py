"""The fleet's screen: many runs, one approval queue, one analyst (``cua-tui fleet`` without ``--headless``).
The table of runs, the queue in the runner's order, and the selected request in the same decision view as
a lone run; Enter opens the run's own screen. It knows the runner only as ``core.fleet_queue.FleetControl``.
How it stays responsive under load: docs/development.md, "The TUI"."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from ..core import ending
from ..core import events as ev
from ..core.actions import Kind
from ..core.describe import URGENT_S, Cut
from ..core.fleet_queue import (
    FleetControl,
    FleetEvent,
    FleetFinished,
    QueueItem,
    RequestClosed,
    RequestQueued,
    RunChanged,
    RunFinished,
    RunRow,
    RunState,
)
from ..core.grouping import Group, group_items, look, why_apart
from ..core.guard import DEFAULT_GUARD_S, DecisionGuard
from ..core.injection import Injection, find_injection
from ..core.policy import Policy
from ..core.ports import Answer, AnswerDetails, DecisionRequest, VerifierPlace
from ..core.run_view import RunView
from ..core.takeover import Desk
from ..core.text import visible
from .app import LEAVE_WINDOW_S, CuaApp, ViewScreen
from .audit_list import MAX_ENTRIES
from .decision_panel import DecisionPanel, compact_terminal
from .desktop_view import DesktopView
from .dialogs import RejectReason, open_reason
from .literal import literal
from .messages import while_open
from .row_table import RowTable
from .run_screen import RunScreen
from .screen_text import ScreenTextRead, ScreenTextScreen, ShownScreen
from .signals import Signals
from .status import RunInfo
from .target_view import (
    destination,
    focus_target,
    labelled,
    screen_limit,
    shot_of,
    shown_screen,
    typing_field,
)
from .text_lines import TextLines

if TYPE_CHECKING:
    from ..core.screentext import ScreenTextReader

# leaving: how long the TUI waits for every run to be sealed before it closes anyway
SEAL_WAIT_S = 60.0
WHAT_CHARS = 60  # the queue's "what" column
# What a y approves (typed text, the words read at a target) is shown whole up to this many characters;
# past it, that many and how many more, and where the rest is read.
SHOWN_CHARS = 160
RUN_CUT = Cut(SHOWN_CHARS, "enter reads all", "t reads the screen")
GROUP_CUT = Cut(SHOWN_CHARS, "enter lists the runs, enter on one reads all", "t reads the screen")
# columns: a narrower terminal has no room for the desktop pane beside the queue (the panel says so)
DESKTOP_FROM = 100
# rows: a shorter terminal keeps its rows for the decision and the queue (one header line, no run detail)
SHORT_BELOW = 36
# at most one refresh of the queue this often: under load, many changes make one
REFRESH_EVERY_S = 0.03
# the table of runs (turn and step of every run) at most this often
RUNS_EVERY_S = 0.25
# earlier events a run's live view reads back from its audit log
AUDIT_HISTORY = MAX_ENTRIES
KILLED_BY = "human (fleet TUI)"
LEFT_BY = "human (left the fleet TUI)"

KEYS = [
    ("y", "approve the selected request (the queue's highlighted row, shown in the decision panel)"),
    ("a", "approve it and every later action of its scope, for that run only (where the panel offers it)"),
    ("n", "reject it, with an optional one-line reason the model hears"),
    ("y n a on a group", "answer each of its runs, each its own recorded decision naming the group and its size"),
    (
        "enter",
        "on a group (×N): list its runs, or fold them again; on a request whose typed text the panel cut: all of "
        "it (enter again: the run); else the run's full live view; Esc returns",
    ),
    ("k", "kill the selected run (the queue's request's run, or the run table's row when it has the focus)"),
    ("K", "kill every run (asks first)"),
    ("tab", "move between the queue and the table of runs; up / down select"),
    ("z", "whole screen / zoom on the selected request's target"),
    ("t", "the selected request's screen as text (OCR), nearest the target first; type to search"),
    ("?", "this help"),
    ("q", "leave: during the fleet, press twice (every run is killed and sealed first); ctrl+q too"),
]
ORDER_LINE = (
    "Queue order: model safety checks first, then clicks in marked regions and transmissions (typing, "
    "Return and the keys that send), then any other rule; the oldest first within each."
)


@dataclass(frozen=True, slots=True)
class QueueRow:
    """A row of the queue table: one request, or a group's (``group``, more than one run) first line, or one
    of an unfolded group's runs (``member``)."""

    key: str
    item: QueueItem
    group: Group | None = None
    member: bool = False


class FleetChanged(Message):
    """Something changed in the fleet (posted once until the UI thread has taken the changes)."""


class KillAllScreen(ModalScreen[bool]):
    """``K``: kill every run? y kills, n or Esc keeps them going."""

    BINDINGS = [
        Binding("y", "answer(True)", "kill every run"),
        Binding("n,escape", "answer(False)", "cancel"),
    ]

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


def tail_path(path: str, width: int) -> str:
    """``path`` in ``width`` characters: whole, or "…/" and as many of its last folders as fit."""
    if len(path) <= width:
        return path
    parts = path.split("/")
    tail = parts[-1]
    for part in reversed(parts[:-1]):
        if len(f"…/{part}/{tail}") > width:
            break
        tail = f"{part}/{tail}"
    return f"…/{tail}"


def run_name(task: str, run_id: str) -> str:
    """The run a request is of, as the decision panel names it."""
    return f"{visible(task, limit=64)} · run {visible(run_id, limit=80) or '(not started)'}"


def waited_cell(item: QueueItem, now: float) -> Text:
    """How long a request has waited, or with a deadline the seconds left before it is rejected (``⏱``)."""
    deadline = item.request.deadline_s
    if deadline is None:
        return Text(f"{int(item.waited(now))}s")
    left = max(0, math.ceil(deadline - item.waited(now)))
    return Text(f"⏱{left}s", style="bold reverse" if left < URGENT_S else "bold")


def group_line(group: Group) -> str:
    """Who a group stands for, and what its y does, for the decision panel."""
    tasks = [visible(item.task, limit=40) for item in group.members]
    named = ", ".join(tasks[:4]) + (f" and {len(tasks) - 4} more" if len(tasks) > 4 else "")
    # where it lands is said by the action's own lines (its point, where typing goes)
    return f"{group.size} runs ask this on the same screen: {named} · y / n / a answer each, recorded as its own"


def cut_text(item: QueueItem) -> str | None:
    """The typed text of ``item`` when the panel shows only its first ``SHOWN_CHARS`` characters (else None)."""
    action = item.request.action
    if action is None or action.kind is not Kind.TYPE or len(action.text) <= SHOWN_CHARS:
        return None
    return action.text


class AllText(ModalScreen[bool]):
    """``enter`` on a request whose typed text the panel cut: all of it, literally, scrollable; ``esc`` returns
    to the fleet, ``enter`` opens the run's view. Nothing here answers."""

    BINDINGS = [
        Binding("escape,q", "dismiss(False)", "back"),
        Binding("enter", "dismiss(True)", "the run's view"),
    ]

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


# ------------------------------------------------------------------------------------------------
# One run of the fleet, as a run's screen sees it
# --------------------------------------------------------------------------------------------------
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
        item = next((item for item in self.fleet.queue() if item.request is request), None)
        if item is None:
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
# The fleet
# --------------------------------------------------------------------------------------------------
RUN_COLUMNS = (
    ("task", 10),  # at least: it takes the width the others leave
    ("backend", 7),
    ("state", 7),
    ("turn·step", 9),
    ("waiting", 7),
    ("status", 8),
    ("checked in", 10),
    ("record", 10),
)
# the App's, done here
APP_ACTIONS = ("approve", "approve_scope", "reject", "kill", "zoom", "screen_text")
SCREEN_ACTIONS = ("kill_all", "open_run")
# what: flex
QUEUE_COLUMNS = (("#", 2), ("priority", 12), ("rule", 14), ("task", 12), ("what", 16), ("waited", 6))


class FleetScreen(ViewScreen):
    """The fleet: ``fleet`` is the running fleet (started on mount if it is not yet)."""

    BINDINGS = [
        Binding("enter", "open_run", "live view", id="open_run"),
        # the App's kill switch, worded for what it kills here: the selected run (K: every run)
        Binding("k", "app.kill", "kill run", id="kill_run", priority=True),
        Binding("K", "kill_all", "kill all", id="kill_all"),
        Binding("q", "leave", "quit", id="leave"),
    ]

    def __init__(self, app: CuaApp, fleet: FleetControl, *, measure: bool = False, grouping: bool = True) -> None:
        super().__init__()
        self.cua = app
        self.fleet = fleet
        self.guard = app.new_guard()  # y / a / n count only once the selection was seen
        self.graphics = app.graphics
        self.clock = app.clock
        # the screen as text (OCR in a worker), shared by every run
        self.reading = app.reading
        self.fleet_rows: dict[str, RunRow] = {}  # as shown
        self.items: list[QueueItem] = []  # pending, first to decide first (the fleet's order)
        # the request the decision panel shows and y / n / a answer
        self.selected: QueueItem | None = None
        # the same decision in many runs, one row each (core/grouping.py); off: a row per request
        self.grouping = grouping
        self.groups: list[Group] = []
        self.unfolded: set[str] = set()  # groups listed run by run (Enter)
        # the group the selected row stands for (None: one request)
        self.selected_group: Group | None = None
        # a possible injection per pending request, once its screen was read (None: none found); such a
        # request goes first and alone (core/injection.py)
        self.hints: dict[int, Injection | None] = {}
        self.unreadable: set[int] = set()  # pending requests whose screen the engine could not read
        # pending requests kept out of every group for now, and why (not read as text yet, say)
        self.held: dict[int, str] = {}
        # what each group answer reached, beside what the group listed when it was answered (measure)
        self.group_answers: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        # why recent requests left the queue (ticket -> why), bounded
        self.closed: dict[int, str] = {}
        self.seen: set[int] = set()  # tickets already signalled
        self.finished = False
        self.leaving = False
        self._inbox_lock = threading.Lock()
        self._dirty_tasks: set[str] = set()
        self._queue_dirty = False
        self._woken = False
        self._last_refresh = 0.0
        self._last_runs = 0.0
        self._runs_timer = False
        self._unsubscribe: Callable[[], None] | None = None
        self._view: RunView = RunView()  # the selected request's run, when it was selected
        self._view_of: int | None = None  # the ticket _view was taken for
        self._queue_keys: set[str] = set()  # the rows the queue table lists
        # what the queue table lists, and which are pending
        self._queue_shown: tuple[tuple[str, tuple[int, ...], bool], ...] = ()
        # the decision view shows (ticket, pending)
        self._selected_shown: tuple[int, bool, tuple[int, ...], str] | None = None
        # the screen and the actions check_action allowed, when last told
        self._offered: tuple[object, ...] = ()
        # The two tables and the pane, held (not queried): check_action may run while another screen
        # is on top, or as the App closes and its widgets are gone.
        self.desktop = DesktopView(graphics=app.graphics, id="desktop")
        self.panel = DecisionPanel(id="decision")
        self.queue_table = RowTable(QUEUE_COLUMNS, flex="what", id="queue")
        self.runs_table = RowTable(RUN_COLUMNS, flex="task", id="runs")
        # The benchmark's measurements (``measure``): UI-thread CPU per refresh, when each ticket
        # was shown.
        self.measure = measure
        self.refresh_ms: list[float] = []
        self.shown_at: dict[int, float] = {}

    # ---------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # What a y approves across the top, the terminal's whole width: in full at every size (80x24 up);
        # the queue and the runs below it, beside the desktop where there is room for one.
        yield TextLines(id="fleet-header")
        yield self.panel
        with Horizontal(id="main"):
            with Vertical(id="fleet-side"):
                yield self.queue_table
                yield TextLines(id="queue-why")
                yield self.runs_table
                yield TextLines(id="run-detail")
                yield TextLines(wrap=True, id="run-why")
            with Vertical(id="fleet-decision"):
                yield self.desktop
        yield Footer()

    def on_mount(self) -> None:
        queue = self.queue_table
        queue.border_title = "Approval queue"
        runs = self.runs_table
        runs.border_title = "Runs"
        self.desktop.border_title = "Desktop"
        self.desktop.placeholder = "no request selected"
        self.panel.show_request(None)
        self._fit(self.app.size.width, self.app.size.height)
        for row in self.fleet.rows():
            self.fleet_rows[row.task] = row
        runs.set_rows([(task, self._run_cells(row)) for task, row in self.fleet_rows.items()])
        self._unsubscribe = self.fleet.subscribe(self._told)
        try:
            self.fleet.start()
        except OSError as exc:
            self.notify(f"the fleet could not start: {visible(str(exc))}", severity="error", timeout=30, markup=False)
        with self._inbox_lock:
            self._dirty_tasks.update(self.fleet_rows)
            self._queue_dirty = True
            if self.fleet.done:
                # it ended before this App listened (every task failed to build, say)
                self.finished = True
        self._take_changes()
        queue.focus()
        self.set_interval(1.0, self._tick)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        """The layout for a terminal of ``width`` x ``height`` cells: the desktop pane only where it has room
        beside the queue, the compact panel on a small terminal."""
        self.set_class(width < DESKTOP_FROM, "narrow")
        self.set_class(height < SHORT_BELOW, "short")
        self.panel.set_compact(compact_terminal(width, height))
        self.call_after_refresh(self._pane_moved)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        # a short terminal gives its rows to the table with the focus
        self.set_class(event.widget is self.runs_table, "runs-first")

    def _pane_moved(self) -> None:
        """The desktop pane left the layout or came back: the selected decision is shown again, saying
        whether its screen is, and its keys count after the guard from then (once its screen is painted)."""
        if self.selected is None or self.panel.unseen == (not self.desktop.on_screen):
            return
        self.guard.arm(None)
        self._show_selected(force=True)

    def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if not self.fleet.done:
            # leaving the fleet TUI however it happens kills every run (each is sealed)
            self.fleet.kill_all(by=LEFT_BY)

    # ---------------------------------------------------------------------------------------------
    # The fleet's changes: noted on the fleet's thread, taken on the UI thread
    # ----------------------------------------------------------------------------------------------
    def _told(self, event: FleetEvent) -> None:
        with self._inbox_lock:
            if isinstance(event, RequestClosed):
                self.closed[event.item.ticket] = event.why
                self._queue_dirty = True
            elif isinstance(event, RequestQueued):
                self._queue_dirty = True
            elif isinstance(event, FleetFinished):
                self._dirty_tasks.update(r.task for r in event.rows)
                self.finished = True
            elif isinstance(event, RunChanged | RunFinished):
                self._dirty_tasks.add(event.row.task)
            if self._woken:
                return
            self._woken = True
        self.post_message(FleetChanged())

    @while_open
    def on_fleet_changed(self, message: FleetChanged) -> None:
        # Under load, the changes of a few tens of milliseconds make one refresh, well within the
        # queue's 100 ms; each redraws only the table rows whose cells changed (row_table.py).
        wait = self._last_refresh + REFRESH_EVERY_S - time.monotonic()
        if wait > 0:
            self.set_timer(wait, self._take_changes)
        else:
            self._take_changes()

    # a timer's too: one can fire as the App closes and its widgets go
    @while_open
    def _take_changes(self) -> None:
        if not self.runs_table.is_attached:
            # the screen is being taken away (its widgets go first) while a timer still fires
            return
        started = time.thread_time()
        self._last_refresh = time.monotonic()
        with self._inbox_lock:
            tasks, self._dirty_tasks = self._dirty_tasks, set()
            queue_dirty, self._queue_dirty = self._queue_dirty, False
            self._woken = False
            while len(self.closed) > 10_000:
                self.closed.pop(next(iter(self.closed)))
        if tasks and self._last_runs + RUNS_EVERY_S > self._last_refresh and not self.finished:
            with self._inbox_lock:
                # the runs table waits a little: its changes are kept for then
                self._dirty_tasks |= tasks
            if not self._runs_timer:
                self._runs_timer = True
                self.set_timer(self._last_runs + RUNS_EVERY_S - self._last_refresh, self._runs_due)
        elif tasks:
            self._last_runs = self._last_refresh
            self._update_runs(tasks)
        if queue_dirty:
            self._update_queue()
        self._update_header()
        if self.finished and self.selected is None:
            self._show_selected(force=True)  # "Every run ended."
        self.bindings_may_have_changed()
        if self.finished and self.leaving:
            self.app.exit()
        if self.measure:
            self.refresh_ms.append((time.thread_time() - started) * 1000)

    def _runs_due(self) -> None:
        self._runs_timer = False
        self._take_changes()

    def _update_runs(self, tasks: set[str]) -> None:
        table = self.runs_table
        now = self.fleet.now()
        for row in self.fleet.rows():
            if row.task not in tasks:
                continue
            old = self.fleet_rows.get(row.task)
            self.fleet_rows[row.task] = row
            if old is not row:
                # redrawn only if a cell changed
                table.update_row(row.task, self._run_cells(row, now))
        self._show_run_detail()

    def _run_cells(self, row: RunRow, now: float | None = None) -> list[Text]:
        now = self.fleet.now() if now is None else now
        waiting = f"{int(now - row.waiting_since)}s" if row.waiting_since is not None else ""
        # where its status was checked: the sandbox's word (or from a place not recorded) is its
        # own, not the controller's: it stands out here, and the run's detail line says so too
        checked = ending.checked_in(row.verifier, "", short=True) if row.ended and row.verified is not None else ""
        ours = row.verifier in ("", VerifierPlace.CONTROLLER)
        log = {True: "intact", False: "NOT INTACT", None: "-"}[row.intact] if row.ended else ""
        state_style = {RunState.WAITING: "bold reverse", RunState.RUNNING: "bold"}.get(row.state, "")
        status_style = "bold" if row.status in ("passed", "finished") else "bold reverse" if row.status else ""
        return [
            literal(row.task, limit=64),
            literal(row.backend, limit=20),
            Text(row.state, style=state_style),
            Text(f"{row.turn}·{row.steps}" if row.run_id else ""),
            Text(waiting),
            literal(row.status, limit=20, style=status_style),
            Text(checked or ("-" if row.ended else ""), style="" if ours else "bold reverse"),
            Text(log, style="bold reverse" if row.intact is False else ""),
        ]

    @while_open
    def _tick(self) -> None:
        """Each second: the waiting times."""
        now = self.fleet.now()
        runs = self.runs_table
        for row in self.fleet_rows.values():
            if row.waiting_since is not None:
                runs.update_cell(row.task, "waiting", Text(f"{int(now - row.waiting_since)}s"))
        queue = self.queue_table
        pending = self.pending_tickets
        for line in self._queue_rows():
            if line.key in self._queue_keys and line.item.ticket in pending:
                queue.update_cell(line.key, "waited", waited_cell(line.item, now))
        selected = self.selected
        if selected is not None and selected.request.deadline_s is not None and selected in self.items:
            self.panel.set_left(self._left(selected))

    def _left(self, item: QueueItem) -> float | None:
        """Seconds before ``item``'s deadline rejects it (None: it has none)."""
        deadline = item.request.deadline_s
        return None if deadline is None else deadline - item.waited(self.fleet.now())

    def _queue_rows(self) -> list[QueueRow]:
        """What the queue table lists: a row per group (its runs too where unfolded) in the fleet's order,
        and the selected request even once it has closed (marked so), until the selection moves: what
        the cursor is on is what y / n / a answer."""
        rows: list[QueueRow] = []
        for group in self.groups:
            if group.size == 1:
                rows.append(QueueRow(str(group.first.ticket), group.first))
                continue
            rows.append(QueueRow(group.id, group.first, group))
            if group.id in self.unfolded:
                rows += [QueueRow(str(item.ticket), item, member=True) for item in group.members]
        selected = self.selected
        if selected is not None and self.selected_group is None and all(r.item.ticket != selected.ticket for r in rows):
            place = next((i for i, r in enumerate(rows) if r.item.order > selected.order), len(rows))
            rows.insert(place, QueueRow(str(selected.ticket), selected))
        return rows

    def _regroup(self) -> None:
        """The groups of the pending requests (one each with grouping off), and the selected group again."""
        self.held = self._held()
        self.groups = group_items(self.items, self.held)
        self.unfolded &= {g.id for g in self.groups}
        chosen = self.selected_group
        if chosen is None:
            # the request selected alone has been joined by others: its row is now the group's (unless the
            # group is listed run by run), and what y answers is what the row shows
            item = self.selected
            home = next((g for g in self.groups if item is not None and item.ticket in g.tickets), None)
            if home is not None and home.size > 1 and home.id not in self.unfolded:
                self.selected_group, self.selected = home, home.first
            return
        # the same group, or the one its first runs went on in (its first member answered or closed)
        tickets = set(chosen.tickets)
        again = next((g for g in self.groups if g.id == chosen.id), None) or next(
            (g for g in self.groups if g.size > 1 and tickets & set(g.tickets)), None
        )
        self.selected_group = again
        if again is not None:
            self.selected = again.first
        elif self.selected is not None and self.selected.ticket not in self.pending_tickets:
            self.selected = self.items[0] if self.items else None

    def _held(self) -> dict[int, str]:
        """The pending requests kept out of every group for now, and why (the panel says it of a row that
        reads like another: core/grouping.py, ``why_apart``)."""
        if not self.grouping:
            return {item.ticket: "grouping is off" for item in self.items}
        held: dict[int, str] = {}
        # With an OCR engine, a request joins a group only once its screen was read and no possible
        # injection found: one answer must never carry a marked request along unseen.
        if not self.reading.unavailable:
            for item in self.items:
                if item.ticket in self.unreadable:
                    held[item.ticket] = "its screen could not be read as text, so it stays a row of its own"
                elif item.ticket not in self.hints:
                    held[item.ticket] = "its screen is not read as text yet (it joins once read)"
        for ticket, hint in self.hints.items():
            if hint is not None:
                held[ticket] = "a possible injection is never grouped"
        return held

    def _apart(self, item: QueueItem) -> str:
        """Why the selected row is not one row with another that reads the same in the queue (the same rule
        and action in words), from ``why_apart``; "" when no other row does."""
        if not self.grouping or item.ticket not in self.pending_tickets:
            return ""
        seen = look(item)
        others = [g.first for g in self.groups if item.ticket not in g.tickets and look(g.first) == seen]
        why = why_apart(item, others[0], self.held) if others else None
        if why is None:
            return ""
        more = f" (and {len(others) - 1} more rows)" if len(others) > 1 else ""
        return f"not one row with {visible(others[0].task, limit=40)}{more}, which reads the same: {why}"

    def _update_queue(self) -> None:
        items = self.fleet.queue()
        self.items = self._ordered(items)
        new = [item for item in items if item.ticket not in self.seen]
        now_wall = time.monotonic()
        for item in new:
            self.seen.add(item.ticket)
            if self.measure:
                self.shown_at[item.ticket] = now_wall
        self._read_next()
        self._regroup()
        if self.selected is None and items:
            self._select_first()
        self._rebuild_queue(only_if_changed=True)
        if new:
            self._signal(new[0], len(new))
        self._show_selected()

    def _ordered(self, items: list[QueueItem]) -> list[QueueItem]:
        """The fleet's order, with the possible injections first."""
        return sorted(items, key=lambda item: (self.hints.get(item.ticket) is None, item.order))

    def _read_next(self) -> None:
        """Each pending request's screen read in turn (one at a time, while nothing else is read), so that a
        possible injection is found and put first; an engine that is missing reads nothing. Those that read
        like the selected row go first: each joins it once read."""
        seen = look(self.selected) if self.selected is not None else None
        for item in sorted(self.items, key=lambda item: look(item) != seen):
            if item.ticket in self.hints:
                continue
            frame = item.request.frame
            if item.request.kind != "action" or frame is None:
                self.hints[item.ticket] = None
                continue
            text, problem = self.reading.result(frame.sha256)
            if text is not None or problem:
                view = self.fleet.view(item.task)
                allowed = self.fleet_rows[item.task].allowed if item.task in self.fleet_rows else ()
                self.hints[item.ticket] = find_injection(text, view.batch_text, allowed)
                if text is None:
                    self.unreadable.add(item.ticket)
                continue
            if not self.reading.busy:
                limit = screen_limit(self.fleet.view(item.task))
                load = partial(bytes, frame.png)
                self.reading.request(ShownScreen(frame.sha256, load, run_id=item.run_id, limit=limit))
            return
        pending = self.pending_tickets
        for ticket in [t for t in self.hints if t not in pending]:
            del self.hints[ticket]
        self.unreadable &= pending

    def _select_first(self) -> None:
        """The first row to decide: a group's when the first request stands for one."""
        group = self.groups[0] if self.groups else None
        self.selected = group.first if group is not None else None
        self.selected_group = group if group is not None and group.size > 1 else None

    def _rebuild_queue(self, *, only_if_changed: bool = False) -> None:
        table = self.queue_table
        rows = self._queue_rows()
        pending = self.pending_tickets
        shown = tuple((row.key, row.group.tickets if row.group else (), row.item.ticket in pending) for row in rows)
        if only_if_changed and shown == self._queue_shown:
            return  # each rebuild redraws the table: not for nothing
        self._queue_shown = shown
        now = self.fleet.now()
        place = 0
        cells = []
        for row in rows:
            if not row.member:
                place += 1
            cells.append(self._queue_cells(row, place, now, row.item.ticket in pending))
        table.set_rows([(row.key, row_cells) for row, row_cells in zip(rows, cells, strict=True)])
        self._queue_keys = {row.key for row in rows}
        if self.selected is not None:
            key = self.selected_group.id if self.selected_group is not None else str(self.selected.ticket)
            index = next((i for i, row in enumerate(rows) if row.key == key), None)
            if index is not None:
                table.move_cursor(row=index)

    def _queue_cells(self, row: QueueRow, position: int, now: float, pending: bool) -> list[Text]:
        item = row.item
        request = item.request
        what = (
            request.action.describe()
            if request.action is not None
            else "a soft budget: go on?"
            if request.kind == "budget"
            else "the model's safety checks"
        )
        dim = "" if pending else "dim strike"
        if self.hints.get(item.ticket) is not None and pending:
            return [
                Text(str(position), style="bold"),
                Text("INJECTION?", style="bold reverse"),
                literal(item.priority.rule, limit=40, style="bold"),
                literal(item.task, limit=64, style="bold"),
                Text(f"t{request.turn} #{request.index + 1} ", style="bold").append_text(
                    literal(what, limit=WHAT_CHARS, style="bold")
                ),
                waited_cell(item, now),
            ]
        if row.group is not None:
            fold = "▾" if row.group.id in self.unfolded else "▸"
            return [
                Text(str(position), style="bold"),
                Text(item.priority.label, style="bold" if item.priority.tier == 0 else ""),
                literal(item.priority.rule, limit=40),
                Text(f"{fold} ×{row.group.size} runs", style="bold reverse"),
                Text(f"t{request.turn} #{request.index + 1} {visible(what, limit=WHAT_CHARS)}"),
                waited_cell(item, now),
            ]
        return [
            Text(" ·" if row.member else str(position) if pending else "-", style=dim),
            Text(item.priority.label, style="bold" if item.priority.tier == 0 else dim),
            literal(item.priority.rule, limit=40, style=dim),
            literal(item.task, limit=64, style=dim),
            Text(f"t{request.turn} #{request.index + 1} ", style=dim).append_text(
                literal(what, limit=WHAT_CHARS, style=dim)
            ),
            waited_cell(item, now) if pending else Text("closed", style=dim),
        ]

    def _update_header(self) -> None:
        rows = self.fleet_rows.values()
        counts: dict[str, int] = {}
        ended: dict[str, int] = {}
        for row in rows:
            counts[row.state] = counts.get(row.state, 0) + 1
            if row.ended:
                ended[row.status] = ended.get(row.status, 0) + 1
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" FLEET ", style="bold reverse")
        runs = len(self.fleet_rows)
        text.append(f" {visible(self.fleet.fleet_id, limit=60)} · {runs} run{'s' if runs != 1 else ''}: ")
        text.append(
            ", ".join(f"{counts.get(s, 0)} {s}" for s in (RunState.QUEUED, RunState.RUNNING, RunState.WAITING))
            + f", {counts.get(RunState.ENDED, 0)} ended"
        )
        if ended:
            text.append(" (" + ", ".join(f"{n} {visible(s, limit=20)}" for s, n in sorted(ended.items())) + ")")
        text.append(" · ")
        text.append(f"{len(self.items)} waiting for you", style="bold" if self.items else "")
        if self.finished:
            text.append(" · every run ended: q quits", style="bold")
        text.append("\n " + ORDER_LINE, style="dim")
        self._set("#fleet-header", text)

    def _show_run_detail(self) -> None:
        task = self._runs_cursor_task()
        row = self.fleet_rows.get(task) if task else None
        text, why = Text(no_wrap=True, overflow="ellipsis"), Text()
        if row is not None:
            text.append(visible(row.task, limit=64), style="bold")
            if row.run_id:
                text.append(f" · run {visible(row.run_id)}")
            if row.phase and not row.ended:
                text.append(f" · {visible(row.phase, limit=40)}")
            if row.path:
                # where it is, by its last folders when the line is short: they tell runs apart
                width = self.query_one("#run-detail", TextLines).size.width
                path = visible(row.path, limit=300)
                text.append(f" · {tail_path(path, width - text.cell_len - 3) if width else path}")
            if row.reason:  # why it ended, in full (two lines, wrapped)
                why.append(visible(row.reason, limit=300), style="bold")
            if row.ended and row.verified is not None:
                where = ending.checked_in(row.verifier, "")
                ours = row.verifier == VerifierPlace.CONTROLLER
                why.append(f"{' · ' if row.reason else ''}checked {where}", style="" if ours else "bold reverse")
        self._set("#run-detail", text)
        self._set("#run-why", why)

    def _set(self, selector: str, text: Text) -> None:
        """A header or detail line's text (repainted only where it changed)."""
        self.query_one(selector, TextLines).update(text)

    def _runs_cursor_task(self) -> str | None:
        return self.runs_table.cursor_key

    # ---------------------------------------------------------------------------------------------
    # The selected request
    # ----------------------------------------------------------------------------------------------
    def on_row_table_highlighted(self, message: RowTable.Highlighted) -> None:
        if message.table.id == "runs":
            self._show_run_detail()
            return
        # The cursor as it is now (not as the message says it was): a rebuild may move it before
        # this is handled.
        key = message.table.cursor_key
        row = next((r for r in self._queue_rows() if r.key == key), None)
        if row is None:
            return
        shown = self.selected_group.id if self.selected_group is not None else self.selected
        if (row.group.id if row.group is not None else row.item) == shown:
            return
        left = self.selected
        self.selected, self.selected_group = row.item, row.group
        if left is not None and left.ticket not in self.pending_tickets:
            self._rebuild_queue()  # the closed row the cursor left goes
        self._show_selected()

    def on_row_table_selected(self, message: RowTable.Selected) -> None:
        if message.table.id == "queue" and (group := self.selected_group) is not None:
            # Enter on a group lists its runs (each can be opened, or answered alone), or folds them
            self.unfolded ^= {group.id}
            self._rebuild_queue()
            return
        item = self.selected
        if message.table.id == "queue" and item is not None and (text := cut_text(item)) is not None:
            # the panel showed the first SHOWN_CHARS and said "enter reads all": here it is, all of it
            self.app.push_screen(AllText(item, text), self._read_all)
            return
        self.action_open_run(task=message.key if message.table.id == "runs" else None)

    def _read_all(self, opened: bool | None) -> None:
        """Back from the whole text: the decision is painted again (its keys count after the guard), or the
        run's view opens (enter there)."""
        self.guard.rearm()
        if opened:
            self.action_open_run()

    @property
    def pending_tickets(self) -> set[int]:
        return {item.ticket for item in self.items}

    def _show_selected(self, *, force: bool = False) -> None:
        """The decision view of the selected request: the panel, the framed target, the screen's text
        (redrawn when the selection or its state changed, or with ``force``: the screen's text arrived)."""
        item = self.selected
        group = self.selected_group
        # another request shown, or a group with other runs: the guard again, once its screen is shown
        self.guard.arm(
            (group.id, group.tickets) if group is not None else item.ticket if item is not None else None, screen=True
        )
        # why it is not one row with another that reads the same: said, and redrawn when that changes
        apart = self._apart(item) if item is not None else ""
        shown = (
            (item.ticket, item.ticket in self.pending_tickets, group.tickets if group else (), apart)
            if item is not None
            else None
        )
        if shown == self._selected_shown and not force and item is not None:
            return
        self._selected_shown = shown
        panel = self.panel
        desktop = self.desktop
        if item is None:
            panel.run_name, panel.closed, panel.group, panel.apart = "", None, "", ""
            panel.show_request(None)
            self._set("#queue-why", Text("No request waits." if not self.finished else "Every run ended.", style="dim"))
            desktop.border_title = "Desktop"
            desktop.blank("no request selected")
            self.bindings_may_have_changed()
            return
        pending = item.ticket in self.pending_tickets
        self._show_run_of(item)
        if self._view_of != item.ticket:
            self._view = self.fleet.view(item.task)
            self._view_of = item.ticket
        view, request = self._view, item.request
        self._set("#queue-why", self._why_line(item, group, pending, apart))
        panel.border_title = None if pending else "CLOSED: no longer answerable"
        panel.set_class(not pending, "closed")
        panel.run_name = run_name(item.task, item.run_id)
        panel.group = group_line(group) if group is not None else ""
        panel.cut = GROUP_CUT if group is not None else RUN_CUT
        panel.apart = apart
        panel.closed = None if pending else visible(self.closed.get(item.ticket, "no longer pending"), limit=120)
        shot = shot_of(view)
        # not markup
        desktop.border_title = Text(f"Desktop · {visible(item.task, limit=64)} · turn {request.turn}")
        if shot is None:
            desktop.blank("no screenshot of this run yet")
        else:
            desktop.show_shot(shot, labelled(focus_target(request, view), self.reading, shot.sha))
        panel.left = self._left(item) if pending else None
        panel.injection = self.hints.get(item.ticket) if pending else None
        # where the layout has no room for the screen, the panel says so from its first paint
        panel.unseen = not desktop.on_screen
        panel.show_request(
            request,
            view.batch_size,
            view.started.task if view.started else "",
            destination(request, view, self.reading, shot.sha if shot else None),
            field=typing_field(request, view) is not None,
            model_text=view.batch_text,
        )
        if (screen_shown := self.shown_screen()) is not None:
            self.reading.request(screen_shown)
        self.call_after_refresh(self._screen_check)
        self.bindings_may_have_changed()

    def on_desktop_view_painted(self, message: DesktopView.Painted) -> None:
        message.stop()
        self._screen_check()

    def _screen_check(self) -> None:
        """The input guard starts once the selected request's own screenshot is on the pane (or the pane
        says why not); where the layout leaves no room for the pane, once the panel, which then says the
        screen is not shown, is painted."""
        item = self.selected
        if item is None or not self.guard.waiting:
            return
        frame = item.request.frame
        unseen = not self.desktop.on_screen
        if self.panel.unseen != unseen:
            self.panel.set_unseen(unseen)
        if unseen or frame is None:
            self.call_after_refresh(self.guard.screen_shown)
        elif self.desktop.shows(frame.sha256):
            self.guard.screen_shown()

    def _why_line(self, item: QueueItem, group: Group | None, pending: bool, apart: str = "") -> Text:
        """The line under the queue: what the selected row is, and why it sits where it does (``apart``: why
        it is not one row with another that reads the same, said first)."""
        text = Text()
        if apart:
            text.append(" APART ", style="bold reverse")
            text.append(f" {apart} · ")
        if group is not None:
            text.append(f" {item.priority.label.upper()} ×{group.size} ", style="bold reverse")
            text.append(f" the same decision in {group.size} runs · rule {visible(item.priority.rule, limit=60)} · ")
            text.append("Enter lists them; y / n / a answer each, as its own decision")
        elif pending and (hint := self.hints.get(item.ticket)) is not None:
            text.append(" POSSIBLE INJECTION ", style="bold reverse")
            text.append(f" {visible(item.task, limit=64)} · the model's words echo the screen: ")
            text.append(visible(hint.summary, limit=120))
        elif pending:
            text.append(f" {item.priority.label.upper()} ", style="bold reverse")
            text.append(f" {visible(item.task, limit=64)} · rule {visible(item.priority.rule, limit=60)} · ")
            text.append(visible(item.priority.why, limit=120))
        else:
            closed = self.closed.get(item.ticket, "no longer pending")
            text.append(" CLOSED ", style="bold reverse")
            text.append(f" {visible(item.task, limit=64)}: {visible(closed, limit=120)} · y / n / a are refused; ")
            text.append("up / down picks another")
        return text

    def _show_run_of(self, item: QueueItem) -> None:
        """The runs table's cursor on the selected request's run (unless the analyst is moving it there)."""
        table = self.runs_table
        index = table.row_index(item.task)
        if index is not None and self.app.focused is not table and table.cursor_row != index:
            table.move_cursor(row=index)

    def shown_screen(self) -> ShownScreen | None:
        item = self.selected
        return shown_screen(self.desktop.shot, self.desktop.target, item.run_id) if item is not None else None

    def _signal(self, item: QueueItem, count: int) -> None:
        """New requests arrived: the bell, and a desktop notification where the terminal shows one."""
        request = item.request
        what = request.action.describe() if request.action is not None else "model safety checks"
        more = f" (+{count - 1} more)" if count > 1 else ""
        body = f"{item.task}: turn {request.turn}, action {request.index + 1}: {what} · {request.reason}{more}"
        self.cua.signal("cua-tui fleet: decision needed", body)

    # ---------------------------------------------------------------------------------------------
    # Frames and the screen's text
    # ----------------------------------------------------------------------------------------------
    @while_open
    def on_desktop_view_refused(self, message: DesktopView.Refused) -> None:
        self.notify(f"screenshot not shown: {message.reason}", title="desktop", severity="warning", markup=False)

    def on_desktop_view_resized(self, message: DesktopView.Resized) -> None:
        self._show_run_detail()  # its path cut to the new width

    def screen_text_read(self, message: ScreenTextRead) -> None:
        known = set(self.hints)
        self._read_next()
        if set(self.hints) != known:
            # a screen read: a clean request may join its group; a possible injection goes first, alone
            self.items = self._ordered(self.items)
            self._regroup()
            self._rebuild_queue()
            self._show_selected(force=True)
        shot = self.desktop.shot
        if shot is not None and message.digest == shot.sha and self.selected is not None:
            self._show_selected(force=True)

    # ---------------------------------------------------------------------------------------------
    # Keys: y / a / n / k / z / t / ? are the App's, done here for the fleet's selection
    # ----------------------------------------------------------------------------------------------
    def selected_task(self) -> str | None:
        """The run k kills and Enter opens: the run table's row when it has the focus, else the selected
        request's run."""
        if self.app.focused is self.runs_table:
            return self._runs_cursor_task()
        return self.selected.task if self.selected is not None else self._runs_cursor_task()

    def bindings_may_have_changed(self) -> None:
        """Refresh the footer's keys when what they would do changed. Not on every change of the fleet: each
        refresh of the bindings makes the Footer compose itself again, a new layout of the whole screen."""
        app = self.app
        offered = (
            id(app.screen),
            *(app.check_action(action, ()) for action in APP_ACTIONS),
            *(self.check_action(action, ()) for action in SCREEN_ACTIONS),
        )
        if offered != self._offered:
            self._offered = offered
            app.refresh_bindings()

    def can(self, action: str, parameters: tuple[object, ...]) -> bool:
        if action in ("approve", "reject", "approve_scope"):
            item = self.selected
            return item is not None and (action != "approve_scope" or item.request.scope is not None)
        if action == "kill":
            task = self.selected_task()
            row = self.fleet_rows.get(task) if task else None
            # While a reason or a search is typed, k is a letter of it (the Input takes it); ctrl+k
            # kills.
            return row is not None and not row.ended
        if action in ("zoom", "screen_text"):
            return self.desktop.shot is not None and self.selected is not None
        return action == "help"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "kill_all":
            return not self.finished
        return True

    def guard_for(self) -> DecisionGuard:
        return self.guard

    def _answer(
        self,
        item: QueueItem,
        answer: Answer,
        *,
        note: str = "",
        grant: bool = False,
        seen: tuple[DecisionGuard, DesktopView] | None = None,
        group: Group | None = None,
    ) -> None:
        # what was seen, and how long, where it was
        guard, desktop = seen or (self.guard, self.desktop)
        shown = guard.shown_ms()
        # a picture painted where the layout left no room for it was not shown
        screen = desktop.painted_sha if desktop.on_screen else ""
        details: AnswerDetails = {
            "note": note, "grant": grant, "screen": screen, "shown_ms": shown, "guard_ms": guard.ms,
        }  # fmt: skip
        if group is not None:
            answered = self._answer_group(group, answer, details)
        else:
            why = self.fleet.answer(item, answer, **details)
            request = item.request
            if why is not None:
                self.refused(f" to {visible(item.task, limit=64)}", request.turn, request.index, why)
                return
            answered = [item.ticket]
        if not answered:
            return
        self.cua.paced(answer, shown)
        done = set(answered)
        self.items = [i for i in self.items if i.ticket not in done]
        for ticket in done:
            self.closed[ticket] = "answered"
        if self.selected is not None and (self.selected.ticket in done or group is not None):
            self._regroup()
            self._select_first()  # the next first to decide
        else:
            self._regroup()
        self._rebuild_queue()
        self._show_selected()
        self._update_header()

    def _answer_group(self, group: Group, answer: Answer, details: AnswerDetails) -> list[int]:
        """Each run of ``group`` as listed when the key was pressed, answered as its own decision naming the
        group; a run whose request closed, or whose screen differs from the first's, has left the
        group and is not answered. The tickets answered."""
        pending = {item.ticket for item in self.fleet.queue()}
        like = group.first.likeness
        members = [
            m for m in group.members
            if m.ticket in pending and like is not None and m.likeness is not None and m.likeness.looks_like(like)
        ]  # fmt: skip
        answered: list[int] = []
        refusals: list[str] = []
        tagged: AnswerDetails = {**details, "group": (group.id, len(members))}
        for member in members:
            why = self.fleet.answer(member, answer, **tagged)
            if why is None:
                answered.append(member.ticket)
            else:
                refusals.append(why)
        if self.measure:
            self.group_answers.append((group.tickets, tuple(answered)))
        left = group.size - len(answered)
        verb = {Answer.APPROVE: "approved", Answer.REJECT: "rejected"}.get(answer, str(answer))
        message = f"{verb} the same decision in {len(answered)} runs, each recorded as its own"
        if left:
            why = visible(refusals[0], limit=120) if refusals else "its request closed or its screen changed"
            message += f"; {left} of the {group.size} had left the group ({why}) and were not answered"
        self.notify(message, title="group", severity="warning" if left else "information", markup=False)
        return answered

    def approve(self, *, scope: bool = False) -> None:
        """``y``; ``a``: it and every later action of its scope, for that run only (each run of a group)."""
        item = self.selected
        if item is not None and (not scope or item.request.scope is not None):
            self._answer(item, Answer.APPROVE, grant=scope, group=self.selected_group)

    async def reject(self) -> None:
        """``n``: an optional one-line reason (Enter sends, Esc none), then reject that same request (or each
        run of that same group)."""
        item = self.selected
        if item is None:
            return
        seen = (self.guard, self.desktop)  # the view under the reason's dialog
        group = self.selected_group
        if item.request.kind == "budget":
            # no to a soft budget stops the run: there is no model to tell a reason to
            self._answer(item, Answer.REJECT, seen=seen)
            return

        def done(reason: str | None) -> None:
            # refused with a message if it closed meanwhile
            self._answer(item, Answer.REJECT, note=reason or "", seen=seen, group=group)

        await open_reason(self.app, done)

    def kill(self, how: str = "") -> None:
        task = self.selected_task()
        if task is None:
            return
        if isinstance(self.app.screen, RejectReason | ScreenTextScreen):
            self.app.pop_screen()
        if self.fleet.kill(task, by=KILLED_BY):
            self.notify(f"kill switch: {visible(task, limit=64)} stops (it is sealed as killed)", markup=False)

    def action_kill_all(self) -> None:
        going = sum(1 for row in self.fleet_rows.values() if not row.ended)

        def done(kill: bool | None) -> None:
            if kill:
                self.fleet.kill_all(by=KILLED_BY)
                self.notify(f"kill switch: every run stops ({going} not ended); each is sealed", markup=False)

        self.app.push_screen(KillAllScreen(going), done)

    def action_open_run(self, task: str | None = None) -> None:
        task = task or self.selected_task()
        if task is None or self.app.screen is not self:
            return
        # back from a run's view, the fleet's decision is painted again: its keys count after the
        # guard
        self.app.push_screen(RunScreen(self.cua, FleetRun(self.fleet, task)), lambda _: self.guard.rearm())

    def zoom(self) -> None:
        self.desktop.set_zoom(not self.desktop.zoom)

    def help_lines(self) -> tuple[list[str], list[tuple[str, str]] | None]:
        return [ORDER_LINE], KEYS

    def action_leave(self) -> None:
        self.cua.action_leave()

    def leave_warning(self) -> str | None:
        """Once every run ended, nothing: q quits. While runs go on, leaving kills them."""
        if self.fleet.done or self.finished:
            return None
        going = sum(1 for row in self.fleet_rows.values() if not row.ended)
        return (
            f"{going} runs are still going: leaving kills every one (each is sealed as killed). Press q again "
            f"within {LEAVE_WINDOW_S:g} s to leave; k kills the selected run, K every run."
        )

    def leave(self) -> None:
        """Kill every run and leave once each is sealed (the command line waits for the seals in any case)."""
        self.leaving = True
        self.fleet.kill_all(by=LEFT_BY)
        self.notify("leaving: every run is killed and sealed first…", severity="warning", markup=False)
        self.set_timer(SEAL_WAIT_S, self.app.exit)


def fleet_app(fleet: FleetControl, *, measure: bool = False, grouping: bool = True, **settings: Any) -> CuaApp:
    """The App answering ``fleet``'s queue (``settings``: CuaApp's: theme, graphics, screen reader, ...)."""
    screen = partial(FleetScreen, fleet=fleet, measure=measure, grouping=grouping)
    return CuaApp(screen, title="cua-tui fleet", **settings)


def run_fleet_tui(
    fleet: FleetControl,
    *,
    theme: str | None = None,
    settings: Any = None,
    screen_reader: ScreenTextReader | None = None,
    on_start: Callable[[CuaApp], None] | None = None,
) -> None:
    """Start ``fleet`` and answer its queue in the fleet TUI until the analyst leaves. Raises OSError when
    the fleet cannot start (its runs directory cannot be written). Leaving kills every run; the caller
    waits for the seals (cli/fleet.py). ``on_start`` is given the App before it runs (``App.exit`` may be
    called from any thread: the command line closes it on a signal)."""
    from .app import graphics_widget

    fleet.start()
    graphics = graphics_widget()  # probes the terminal: before the App runs
    app = fleet_app(
        fleet,
        theme=theme or getattr(settings, "theme", "cua-dark"),
        theme_dirs=(settings.themes_dir,) if settings is not None else (),
        graphics=graphics,
        signals=Signals(bell=settings.bell, notify=settings.notify) if settings is not None else None,
        screen_reader=screen_reader,
        guard_s=getattr(settings, "decision_guard_s", DEFAULT_GUARD_S),
    )
    if on_start is not None:
        on_start(app)
    app.run()
