"""The fleet's screen: many runs, one approval queue, one analyst (``cua-tui fleet`` without ``--headless``).
The table of runs, the queue in the core's order and groups (core/queue_rules.py), and the selected request
in the same decision view as a lone run; Enter opens the run's own screen. It knows the runner only as
``core.fleet_queue.FleetControl``. How it stays responsive under load: docs/development.md, "The TUI"."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message

from ..core.describe import Cut
from ..core.fleet_queue import (
    Deciders,
    FleetControl,
    FleetEvent,
    QueueItem,
    RunRow,
)
from ..core.guard import DEFAULT_GUARD_S
from ..core.injection import Injection
from ..core.queue_rules import Group, QueueRules
from ..core.run_view import RunView
from ..core.text import visible
from .app import CuaApp, ViewScreen
from .decision_panel import DecisionPanel, compact_terminal
from .desktop_view import DesktopView
from .fleet_keys import LEFT_BY, FleetKeys
from .fleet_parts import (
    SHOWN_CHARS,
    FleetInbox,
    group_line,
    run_name,
    who_line,
)
from .fleet_tables import (
    QueueTable,
    RunsTable,
    header_text,
    queue_rows,
    reselect,
    run_cells,
    run_detail,
    why_line,
)
from .footer import KeysFooter
from .keys import APP, FLEET, TABLE, bindings
from .messages import while_open
from .row_table import RowTable
from .screen_text import ScreenTextRead, ShownScreen
from .signals import Signals
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


class FleetChanged(Message):
    """Something changed in the fleet (posted once until the UI thread has taken the changes)."""


class FleetScreen(FleetKeys, ViewScreen):
    """The fleet: ``fleet`` is the running fleet (started on mount if it is not yet)."""

    BINDINGS = bindings(FLEET)  # tui/keys.py
    HOMES = (APP, FLEET, TABLE)
    # the App's, done here
    APP_ACTIONS = ("approve", "approve_scope", "reject", "kill", "kill_chord", "zoom", "screen_text", "help")

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
        # the request the decision panel shows and y / n / a answer
        self.selected: QueueItem | None = None
        # the pending requests in the core's order and groups, and what was read of their screens (a
        # possible injection goes first and alone); grouping off: a row per request
        self.rules = QueueRules(grouping=grouping)
        self.unfolded: set[str] = set()  # groups listed run by run (Enter)
        # the group the selected row stands for (None: one request)
        self.selected_group: Group | None = None
        # what each group answer reached, beside what the group listed when it was answered (measure)
        self.group_answers: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        self.seen: set[int] = set()  # tickets already signalled
        self.leaving = False
        # the fleet's changes, told on its thread (why requests closed, every run ended, ...)
        self.inbox = FleetInbox()
        self._last_refresh = 0.0
        self._last_runs = 0.0
        self._runs_timer = False
        self._unsubscribe: Callable[[], None] | None = None
        self._view: RunView = RunView()  # the selected request's run, when it was selected
        self._view_of: int | None = None  # the ticket _view was taken for
        # the decision view shows (ticket, pending)
        # a team's requests escalated to this analyst's group, rung once each
        self._rang: set[int] = set()
        self._selected_shown: tuple[int, bool, tuple[int, ...], str, tuple[str, ...], Deciders | None] | None = None
        # The two tables and the pane, held (not queried): check_action may run while another screen
        # is on top, or as the App closes and its widgets are gone.
        self.desktop = DesktopView(graphics=app.graphics, id="desktop")
        self.panel = DecisionPanel(id="decision")
        self.queue_table = QueueTable(id="queue")
        self.runs_table = RunsTable(id="runs")
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
        yield KeysFooter()

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
        now = self.fleet.now()
        runs.set_rows([(task, run_cells(row, now)) for task, row in self.fleet_rows.items()])
        self._unsubscribe = self.fleet.subscribe(self._told)
        try:
            self.fleet.start()
        except OSError as exc:
            self.notify(f"the fleet could not start: {visible(str(exc))}", severity="error", timeout=30, markup=False)
        # every row and the queue; it may have ended before this App listened (every task failed to build)
        self.inbox.note(self.fleet_rows, finished=self.fleet.done)
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
        self.fleet.looking(())
        if self._unsubscribe is not None:
            self._unsubscribe()
        if not self.fleet.done and self.fleet.owns_runs:
            # leaving the fleet TUI however it happens kills every run of this process (each is sealed); a
            # team's runs go on on their workers
            self.fleet.kill_all(by=LEFT_BY)

    # ---------------------------------------------------------------------------------------------
    # The fleet's changes: noted on the fleet's thread, taken on the UI thread
    # ----------------------------------------------------------------------------------------------
    def _told(self, event: FleetEvent) -> None:
        if self.inbox.told(event):
            self.post_message(FleetChanged())

    @property
    def finished(self) -> bool:
        """Every run of the fleet ended."""
        return self.inbox.finished

    @property
    def closed(self) -> dict[int, str]:
        return self.inbox.closed

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
        tasks, queue_dirty = self.inbox.take()
        if tasks and self._last_runs + RUNS_EVERY_S > self._last_refresh and not self.finished:
            self.inbox.note(tasks, queue=False)  # the runs table waits a little: its changes are kept for then
            if not self._runs_timer:
                self._runs_timer = True
                self.set_timer(self._last_runs + RUNS_EVERY_S - self._last_refresh, self._runs_due)
        elif tasks:
            self._last_runs = self._last_refresh
            self._update_runs(tasks)
        for line in self.inbox.refused():
            self.notify(visible(line, limit=300), title="not answered", severity="warning", markup=False)
        for line in self.inbox.recorded():
            self.notify(visible(line, limit=300), title="recorded", markup=False)
        for line in self.inbox.revealed():
            # a drill answered: said above the request that follows it, and in a toast should none follow
            self.panel.revealed = line
            if not self.is_current:
                continue  # a run's view on top says it itself
            missed = ", missed." in line or "a false alarm" in line
            self.notify(visible(line, limit=600), title="a drill", severity="warning" if missed else "information",
                        timeout=20, markup=False)  # fmt: skip
            self._show_selected(force=True)
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
        rows = self.fleet.rows()
        if any(row.task not in self.fleet_rows for row in rows):
            # a team's fleet is read after the screen opens: its runs join the table as they are read
            self.fleet_rows.update((row.task, row) for row in rows)
            table.set_rows([(row.task, run_cells(row, now)) for row in rows])
        for row in rows:
            if row.task not in tasks:
                continue
            old = self.fleet_rows.get(row.task)
            self.fleet_rows[row.task] = row
            if old is not row:
                # redrawn only if a cell changed
                table.update_row(row.task, run_cells(row, now))
        self._show_run_detail()

    @while_open
    def _tick(self) -> None:
        """Each second: the waiting times, and the header (a team's link may have gone or come back)."""
        if not self.runs_table.is_attached:
            return  # as in _take_changes: the screen's widgets go first as it is taken away
        now = self.fleet.now()
        self._update_header()
        self.runs_table.tick(self.fleet_rows.values(), now)
        self.queue_table.tick(now, self.pending_tickets)
        selected = self.selected
        if selected is not None and selected.request.deadline_s is not None and selected in self.items:
            self.panel.set_left(self._left(selected))

    def _left(self, item: QueueItem) -> float | None:
        """Seconds before ``item``'s deadline rejects it (None: it has none)."""
        deadline = item.request.deadline_s
        return None if deadline is None else deadline - item.waited(self.fleet.now())

    # the core's, as the tests and the benchmark read them
    @property
    def items(self) -> list[QueueItem]:
        """The pending requests, first to decide first (the core's order)."""
        return self.rules.items

    @property
    def groups(self) -> list[Group]:
        return self.rules.groups

    @property
    def hints(self) -> dict[int, Injection | None]:
        return self.rules.hints

    @property
    def pending_tickets(self) -> set[int]:
        return self.rules.tickets

    def _regroup(self) -> None:
        """The groups of the pending requests (one each with grouping off), and the selected group again."""
        self.rules.reading = not self.reading.unavailable
        self.rules.regroup()
        self.unfolded &= {g.id for g in self.groups}
        self.selected, self.selected_group = reselect(
            self.groups, self.items, self.selected, self.selected_group, self.unfolded
        )

    def _update_queue(self) -> None:
        items = self.fleet.queue()
        self.rules.read_by = self.fleet.readers()
        self.rules.pending(items)
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
        self._ring_escalated(items)
        self._show_selected()

    def _ring_escalated(self, items: list[QueueItem]) -> None:
        """A request escalated to this analyst's group (a team's rule): first in the queue already; the bell
        and a notification once, here."""
        fresh = [i for i in items if i.deciders is not None and i.deciders.escalated and i.ticket not in self._rang]
        if not fresh:
            return
        self._rang.update(i.ticket for i in fresh)
        first = fresh[0]
        line = f"request {abs(first.ticket)} of {visible(first.task, limit=64)} escalated to your group: it is first"
        line += f" (+{len(fresh) - 1} more)" if len(fresh) > 1 else ""
        self.cua.signal("cua-tui: escalated to your group", line)
        self.notify(line, title="escalated", severity="warning", markup=False)

    def _read_next(self) -> None:
        """Each pending request's screen read in turn (one at a time, while nothing else is read), so that a
        possible injection is found and put first; an engine that is missing reads nothing. Those that read
        like the selected row go first: each joins it once read."""
        while (item := self.rules.to_read(self.selected)) is not None:
            frame = item.request.frame
            assert frame is not None  # to_read gives only requests with a screen
            text, problem = self.reading.result(frame.sha256)
            if text is None and not problem:
                if not self.reading.busy:
                    limit = screen_limit(self.fleet.view(item.task))
                    load = partial(bytes, frame.png)
                    self.reading.request(ShownScreen(frame.sha256, load, run_id=item.run_id, limit=limit))
                return
            row = self.fleet_rows.get(item.task)
            self.rules.read(item, text, self.fleet.view(item.task).batch_text, row.allowed if row else ())

    def _select_first(self) -> None:
        """The first row to decide: a group's when the first request stands for one."""
        group = self.groups[0] if self.groups else None
        self.selected = group.first if group is not None else None
        self.selected_group = group if group is not None and group.size > 1 else None

    def _rebuild_queue(self, *, only_if_changed: bool = False) -> None:
        selected, group = self.selected, self.selected_group
        cursor = group.id if group is not None else str(selected.ticket) if selected is not None else None
        rows = queue_rows(self.groups, self.unfolded, selected, group)
        self.queue_table.show(
            rows, self.pending_tickets, self.hints, self.unfolded, self.fleet.now(),
            cursor=cursor, only_if_changed=only_if_changed, readers=self.rules.read_by,
        )  # fmt: skip

    def _update_header(self) -> None:
        header = header_text(
            self.fleet.fleet_id, self.fleet_rows.values(), len(self.items), self.finished, self.fleet.link(),
            drills=self.fleet.drills_on,
        )  # fmt: skip
        self._set("#fleet-header", header)

    def _show_run_detail(self) -> None:
        task = self._runs_cursor_task()
        found = list(self.query("#run-detail").results(TextLines))
        if not found:
            return  # the screen is being taken away
        width = found[0].size.width
        text, why = run_detail(self.fleet_rows.get(task) if task else None, width)
        self._set("#run-detail", text)
        self._set("#run-why", why)

    def _set(self, selector: str, text: Text) -> None:
        """A header or detail line's text (repainted only where it changed); none while the screen is taken
        away (its widgets go first, one by one, as the App closes)."""
        for lines in self.query(selector).results(TextLines):
            lines.update(text)

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
        row = self.queue_table.row_of(key)
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

    def _show_selected(self, *, force: bool = False) -> None:
        """The decision view of the selected request: the panel, the framed target, the screen's text
        (redrawn when the selection or its state changed, or with ``force``: the screen's text arrived)."""
        item = self.selected
        group = self.selected_group
        if item is not None and group is None:
            # a team's request whose approvals or pending edit changed is a new item: the panel shows it as it
            # is now, however the cursor came to the row (y answers that one, under its guard again)
            current = next((i for i in self.items if i.ticket == item.ticket), None)
            if current is not None and current is not item:
                self.selected = item = current
        # another request shown, or a group with other runs, or a team's request that changed under its rule (an
        # approval, a pending edit): the guard again, once its screen is shown
        shown_key = (
            (item.ticket, item.deciders)
            if item is not None and item.deciders is not None
            else (item.ticket if item is not None else None)
        )
        self.guard.arm((group.id, group.tickets) if group is not None else shown_key, screen=True)
        # why it is not one row with another that reads the same: said, and redrawn when that changes
        apart = self.rules.apart(item) if item is not None else ""
        pending = item is not None and item.ticket in self.pending_tickets
        # on a team's queue the others see it "read by" this analyst while it is on this panel
        self.fleet.looking((group.tickets if group is not None else (item.ticket,)) if item and pending else ())
        read_by = self.rules.read_by.get(item.ticket, ()) if item is not None else ()
        deciders = item.deciders if item is not None else None
        shown = (
            (item.ticket, pending, group.tickets if group else (), apart, read_by, deciders)
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
        self._show_run_of(item)
        if self._view_of != item.ticket:
            self._view = self.fleet.view(item.task)
            self._view_of = item.ticket
        view, request = self._view, item.request
        closed = self.closed.get(item.ticket, "no longer pending")
        hint = self.hints.get(item.ticket)
        self._set("#queue-why", why_line(item, group, pending, hint, closed, apart, read_by))
        panel.border_title = None if pending else "CLOSED: no longer answerable"
        panel.set_class(not pending, "closed")
        panel.run_name = run_name(item.task, item.run_id)
        try:
            worker = self.fleet.row(item.task).worker  # the control's row: the table's may lag
        except KeyError:
            worker = ""
        if worker:  # a team's: which worker's run a y lets go on
            panel.run_name += f" · on {visible(worker, limit=100)}"
        panel.group = group_line(group) if group is not None else ""
        panel.who = who_line(item.deciders) if item.deciders is not None else ""
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
            self.rules.settle()
            self._regroup()
            self._rebuild_queue()
            self._show_selected(force=True)
        shot = self.desktop.shot
        if shot is not None and message.digest == shot.sha and self.selected is not None:
            self._show_selected(force=True)


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
