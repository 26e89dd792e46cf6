"""The fleet screen's keys (a mixin, as tui/commands.py's HistoryActions is for a run's screen: the screen's
own file stays small): y / a / n / k / z / t / ? of the App done for the fleet's selection, Enter, K, q, and
what is possible when. ``FleetHost`` is what they need of the screen (tui/fleet_screen.py's FleetScreen)."""

from __future__ import annotations

from typing import Protocol, cast

from textual.app import App
from textual.notifications import SeverityLevel
from textual.timer import Timer, TimerCallback

from ..core.describe import ASK_NOT_APPROVED
from ..core.fleet_queue import FleetControl, QueueItem, RunRow
from ..core.guard import DecisionGuard
from ..core.ports import Answer, AnswerDetails
from ..core.queue_rules import ORDER_LINE, Group, QueueRules
from ..core.text import visible
from .app import LEAVE_WINDOW_S, CuaApp
from .decision_panel import DecisionPanel
from .desktop_view import DesktopView
from .dialogs import RejectReason, SetAside, open_reason
from .fleet_parts import KILLED_BY, AllText, FleetRun, KillAllScreen, answer_group, cut_text
from .fleet_tables import RunsTable
from .row_table import RowTable
from .run_screen import RunScreen
from .screen_text import ScreenTextScreen

# leaving: how long the TUI waits for every run to be sealed before it closes anyway
SEAL_WAIT_S = 60.0
LEFT_BY = "human (left the fleet TUI)"
SCREEN_ACTIONS = ("kill_all", "open_run", "set_aside")


class FleetHost(Protocol):
    """What the keys need of the fleet's screen."""

    selected: QueueItem | None
    selected_group: Group | None
    unfolded: set[str]
    leaving: bool
    _offered: tuple[object, ...]
    cua: CuaApp
    fleet: FleetControl
    guard: DecisionGuard
    desktop: DesktopView
    panel: DecisionPanel
    rules: QueueRules
    fleet_rows: dict[str, RunRow]
    runs_table: RunsTable
    measure: bool
    group_answers: list[tuple[tuple[int, ...], tuple[int, ...]]]

    @property
    def APP_ACTIONS(self) -> tuple[str, ...]: ...  # the class's constant
    @property
    def app(self) -> App[object]: ...
    @property
    def finished(self) -> bool: ...
    @property
    def closed(self) -> dict[int, str]: ...
    def notify(
        self, message: str, *, title: str = "", severity: SeverityLevel = "information", timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...  # fmt: skip
    def set_timer(
        self, delay: float, callback: TimerCallback | None = None, *, name: str | None = None, pause: bool = False
    ) -> Timer: ...
    def refused(self, whose: str, turn: int, index: int, why: str) -> None: ...
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None: ...
    def selected_task(self) -> str | None: ...
    def action_open_run(self, task: str | None = None) -> None: ...
    def bindings_may_have_changed(self) -> None: ...
    def _answer(
        self, item: QueueItem, answer: Answer, *, note: str = "", grant: bool = False,
        seen: tuple[DecisionGuard, DesktopView] | None = None, group: Group | None = None,
    ) -> None: ...  # fmt: skip
    def _answer_group(self, group: Group, answer: Answer, details: AnswerDetails) -> list[int]: ...
    def _read_all(self, opened: bool | None) -> None: ...
    def _runs_cursor_task(self) -> str | None: ...
    def _regroup(self) -> None: ...
    def _select_first(self) -> None: ...
    def _rebuild_queue(self, *, only_if_changed: bool = False) -> None: ...
    def _show_selected(self, *, force: bool = False) -> None: ...
    def _update_header(self) -> None: ...


class FleetKeys:
    """The fleet screen's keys; mixed into FleetScreen before ViewScreen."""

    # the screen and the actions check_action allowed, when last told
    _offered: tuple[object, ...] = ()

    def on_row_table_selected(self: FleetHost, message: RowTable.Selected) -> None:
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

    def _read_all(self: FleetHost, opened: bool | None) -> None:
        """Back from the whole text: the decision is painted again (its keys count after the guard), or the
        run's view opens (enter there)."""
        self.guard.rearm()
        if opened:
            self.action_open_run()

    # ---------------------------------------------------------------------------------------------
    # Keys: y / a / n / k / z / t / ? are the App's, done here for the fleet's selection
    # ----------------------------------------------------------------------------------------------
    def selected_task(self: FleetHost) -> str | None:
        """The run k kills and Enter opens: the run table's row when it has the focus, else the selected
        request's run."""
        if self.app.focused is self.runs_table:
            return self._runs_cursor_task()
        return self.selected.task if self.selected is not None else self._runs_cursor_task()

    def bindings_may_have_changed(self: FleetHost) -> None:
        """Refresh the footer's keys when what they would do changed. Not on every change of the fleet: each
        refresh of the bindings makes the Footer compose itself again, a new layout of the whole screen."""
        app = self.app
        offered = (
            id(app.screen),
            *(app.check_action(action, ()) for action in self.APP_ACTIONS),
            *(self.check_action(action, ()) for action in SCREEN_ACTIONS),
        )
        if offered != self._offered:
            self._offered = offered
            app.refresh_bindings()

    def can(self: FleetHost, action: str, parameters: tuple[object, ...]) -> bool:
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

    def check_action(self: FleetHost, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "kill_all":
            return not self.finished
        if action == "set_aside":
            # a team's queue only: on one machine nobody else would take it meanwhile
            return not self.fleet.owns_runs and self.selected is not None
        return True

    def guard_for(self: FleetHost) -> DecisionGuard:
        return self.guard

    def _answer(
        self: FleetHost,
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
        self.rules.answered(done)
        for ticket in done:
            self.closed[ticket] = "answered"
        self.panel.revealed = ""  # a drill's reveal stood above this request: answered now
        if self.selected is not None and (self.selected.ticket in done or group is not None):
            self._regroup()
            self._select_first()  # the next first to decide
        else:
            self._regroup()
        self._rebuild_queue()
        self._show_selected()
        self._update_header()

    def _answer_group(self: FleetHost, group: Group, answer: Answer, details: AnswerDetails) -> list[int]:
        answered, message, left = answer_group(self.fleet, group, answer, details)
        if self.measure:
            self.group_answers.append((group.tickets, tuple(answered)))
        self.notify(message, title="group", severity="warning" if left else "information", markup=False)
        return answered

    def approve(self: FleetHost, *, scope: bool = False) -> None:
        """``y``; ``a``: it and every later action of its scope, for that run only (each run of a group)."""
        item = self.selected
        if item is not None and item.request.kind == "ask":
            self.notify(ASK_NOT_APPROVED, title="nothing to approve", severity="warning", markup=False)
            return
        if item is not None and (not scope or item.request.scope is not None):
            self._answer(item, Answer.APPROVE, grant=scope, group=self.selected_group)

    async def reject(self: FleetHost) -> None:
        """``n``: an optional one-line reason (Enter sends, Esc none), then reject that same request (or each
        run of that same group)."""
        item = self.selected
        if item is None:
            return
        seen = (self.guard, self.desktop)  # the view under the reason's dialog
        group = self.selected_group
        if item.request.kind in ("budget", "ask"):
            # no to a soft budget stops the run, to a model's call lets it go on: no reason to tell it
            self._answer(item, Answer.REJECT, seen=seen)
            return

        def done(reason: str | None) -> None:
            # refused with a message if it closed meanwhile
            self._answer(item, Answer.REJECT, note=reason or "", seen=seen, group=group)

        await open_reason(self.app, done)

    def kill(self: FleetHost, how: str = "") -> None:
        task = self.selected_task()
        if task is None:
            return
        if isinstance(self.app.screen, RejectReason | ScreenTextScreen):
            self.app.pop_screen()
        if self.fleet.kill(task, by=KILLED_BY):
            self.notify(f"kill switch: {visible(task, limit=64)} stops (it is sealed as killed)", markup=False)
        elif link := self.fleet.link():
            self.notify(f"not killed: {visible(link, limit=200)}", severity="error", markup=False)

    def action_set_aside(self: FleetHost) -> None:
        """``l`` (a team's queue): the selected request leaves this analyst's view for a while; never answered."""
        item = self.selected
        if item is None or item.ticket not in self.rules.tickets:
            return

        def done(minutes: float | None) -> None:
            if minutes is None:
                return
            why = self.fleet.set_aside(item, minutes)
            if why is not None:
                self.notify(visible(why, limit=300), title="not set aside", severity="warning", markup=False)
            else:
                self.notify(
                    f"request {abs(item.ticket)} set aside for {minutes:g} min: it comes back then", markup=False
                )

        self.app.push_screen(SetAside(), done)

    def action_kill_all(self: FleetHost) -> None:
        going = sum(1 for row in self.fleet_rows.values() if not row.ended)

        def done(kill: bool | None) -> None:
            if kill:
                self.fleet.kill_all(by=KILLED_BY)
                self.notify(f"kill switch: every run stops ({going} not ended); each is sealed", markup=False)

        self.app.push_screen(KillAllScreen(going), done)

    def action_open_run(self: FleetHost, task: str | None = None) -> None:
        task = task or self.selected_task()
        if task is None or self.app.screen is not cast(object, self):
            return
        # back from a run's view, the fleet's decision is painted again: its keys count after the
        # guard
        self.app.push_screen(RunScreen(self.cua, FleetRun(self.fleet, task)), lambda _: self.guard.rearm())

    def zoom(self: FleetHost) -> None:
        self.desktop.set_zoom(not self.desktop.zoom)

    def help_lines(self: FleetHost) -> list[str]:
        return [ORDER_LINE]

    def action_leave(self: FleetHost) -> None:
        self.cua.action_leave()

    def leave_warning(self: FleetHost) -> str | None:
        """Once every run ended, nothing: q quits. While runs go on, leaving kills them; a team's go on."""
        if self.fleet.done or self.finished or not self.fleet.owns_runs:
            return None
        going = sum(1 for row in self.fleet_rows.values() if not row.ended)
        return (
            f"{going} runs are still going: leaving kills every one (each is sealed as killed). Press q again "
            f"within {LEAVE_WINDOW_S:g} s to leave; k kills the selected run, K every run."
        )

    def leave(self: FleetHost) -> None:
        """Kill every run and leave once each is sealed (the command line waits for the seals in any case); a
        team's fleet is left as it is, its runs going on on their workers."""
        if not self.fleet.owns_runs:
            self.app.exit()
            return
        self.leaving = True
        self.fleet.kill_all(by=LEFT_BY)
        self.notify("leaving: every run is killed and sealed first…", severity="warning", markup=False)
        self.set_timer(SEAL_WAIT_S, self.app.exit)
