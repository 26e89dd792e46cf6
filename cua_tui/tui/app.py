"""The supervision TUI: live screen, pending batch with risks, audit tail, status; y / n / k.

The App is given its event source (a live run or recorded events) in its constructor. The run itself
happens in a thread worker; core events arrive as messages; screenshots are converted off the UI thread.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import CommandPalette
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Footer
from textual.worker import Worker, WorkerState, get_current_worker

from ..core import events as ev
from ..core.guard import DEFAULT_GUARD_S, DecisionGuard
from ..core.ports import Answer, DecisionRequest
from ..core.run_view import RunView
from ..core.screentext import ScreenTextReader
from ..core.text import failure, visible
from .audit_pane import AuditPane
from .batch import BatchPane
from .commands import CuaCommands, HistoryActions
from .decision_panel import DecisionPanel, compact_terminal
from .desktop_view import DesktopView
from .dialogs import GrantsScreen, RejectReason
from .frames import Target
from .goal import GoalBar
from .help import HelpScreen
from .messages import RunEvent, RunFinished, while_open
from .screen_text import (
    ScreenReading,
    ScreenTextRead,
    ScreenTextScreen,
    ShownScreen,
    screen_text_arrived,
    write_and_open,
)
from .signals import AlertBar, Signals, notification_escape
from .source import RunSource
from .status import StatusBar
from .target_view import (
    destination,
    focus_target,
    labelled,
    shot_of,
    shown_screen,
    typing_field,
)
from .themes import install_themes, project_themes_dir

LEAVE_WINDOW_S = 3.0  # a second q within this many seconds leaves a run that goes on (and kills it)


class SupervisorApp(HistoryActions, App[Any]):
    """One screen: desktop pane | decision + batch + audit panes, status bar, footer. ``source`` is the
    event source; ``screen_reader`` reads screenshots as text (``t``, the panel's "goes to" line; none: they
    say so)."""

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses elsewhere find it too
    # The run's state, from its event stream alone: the panes are bound to it and render their part.
    view: reactive[RunView] = reactive(RunView, init=False, layout=False, repaint=False)
    TITLE = "cua-tui"
    COMMANDS = App.COMMANDS | {CuaCommands}  # cua-tui's own commands in the palette (ctrl+p)
    BINDINGS = [
        Binding("y", "approve", "approve", id="approve"),
        Binding("a", "approve_scope", "approve scope", id="approve_scope"),
        Binding("n", "reject", "reject", id="reject"),
        Binding("k", "kill", "KILL SWITCH", id="kill", priority=True),
        Binding("ctrl+k", "kill('always')", "kill", id="kill_always", priority=True, show=False),
        Binding("g", "grants", "grants", id="grants"),
        Binding("x", "alerts_seen", "alerts seen", id="alerts_seen"),
        Binding("z", "zoom", "zoom", id="zoom"),
        Binding("t", "screen_text", "screen text", id="screen_text"),
        Binding("o", "open_screenshot", "screenshot", id="open_screenshot"),
        Binding("question_mark", "help", "help", id="help"),
        Binding("q", "quit_when_done", "quit", id="quit"),
        Binding("q", "leave", "leave", id="leave", show=False),  # during a run: says what leaving means
        Binding("slash", "search", "search", id="search", show=False),  # the audit log, by text and kind
    ]

    def __init__(
        self,
        source: RunSource,
        *,
        theme: str = "cua-dark",
        theme_dirs: tuple[Path, ...] = (),
        graphics: type[Widget] | None = None,
        clock: Callable[[], float] = time.monotonic,
        signals: Signals | None = None,
        env: Mapping[str, str] | None = None,
        screen_reader: ScreenTextReader | None = None,
        guard_s: float = DEFAULT_GUARD_S,
        guard_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.guard = DecisionGuard(guard_s, guard_clock)  # y / a / n count only once the decision was seen
        self.signals = signals or Signals()  # the bell and the desktop notification when a decision starts waiting
        self.env = os.environ if env is None else env  # which terminal this is (its notification escape)
        self.graphics = graphics
        self.source = source
        self.clock = clock  # the status bar's elapsed time; fixtures pass a fixed one
        self.requested_theme = theme
        self.theme_dirs = (project_themes_dir(), *theme_dirs)
        self._answered: DecisionRequest | None = None
        self._leave_asked = -LEAVE_WINDOW_S  # when q was last pressed during the run
        self.running = True
        self.result: Any = None
        self.final_status = ""
        self._sealed_known = False  # the run's own result said whether its seal reached the disk
        self.zoom = False
        self.reading = ScreenReading(self, screen_reader)  # the screen as text (OCR in a worker; none: it says so)

    # ------------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield GoalBar(self.source.info, id="goal")
        yield AlertBar(id="alerts").data_bind(view=SupervisorApp.view)
        with Horizontal(id="main"):
            yield DesktopView(graphics=self.graphics, id="desktop")
            with Vertical(id="side"):
                yield DecisionPanel(id="decision")
                yield BatchPane(id="batch", history=True).data_bind(view=SupervisorApp.view)
                yield AuditPane(id="audit")
        yield StatusBar(self.source.info, clock=self.clock, id="status").data_bind(view=SupervisorApp.view)
        yield Footer()

    def on_mount(self) -> None:
        install_themes(self, self.requested_theme, self.theme_dirs)
        self.query_one("#desktop", DesktopView).border_title = "Desktop"
        self.query_one(DecisionPanel).show_request(None)
        self.source.attach(self._from_run)
        self.drive()

    # ------------------------------------------------------------------------------------------------
    # The run, in a worker thread
    # ------------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="run", description="supervised run")
    def drive(self) -> Any:
        # Textual marks this worker cancelled whenever the App's message loop ends, even if on_unmount is
        # skipped; a watcher turns that into the kill switch, so a live run never outlives its TUI (its
        # non-daemon worker thread would otherwise hold the process open until the run's deadline).
        worker = get_current_worker()
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.2):
                if worker.is_cancelled and self.source.live:
                    self.source.kill(by="human (left the TUI)")
                    return

        threading.Thread(target=watch, name="cua-tui-watch", daemon=True).start()
        try:
            return self.source.run()
        finally:
            done.set()

    def _from_run(self, stamped: ev.Stamped) -> None:
        self.post_message(RunEvent(stamped))

    def on_unmount(self) -> None:
        # Leaving the TUI while the run goes on is a kill: the run's thread must end, or the process could
        # not exit (asyncio waits for the worker's thread) and the caller's own kill would never come.
        if self.running:
            self.source.kill(by="human (left the TUI)")

    def on_worker_state_changed(self, message: Worker.StateChanged) -> None:
        if message.worker.group != "run":
            return
        if message.state is WorkerState.SUCCESS:
            self.result = message.worker.result
            status = getattr(self.result, "status", "") if self.result is not None else ""
            self.post_message(RunFinished(status, getattr(self.result, "reason", "")))
        elif message.state is WorkerState.ERROR:
            error = visible(failure(message.worker.error))
            self.notify(error, title="run failed", severity="error", timeout=30, markup=False)
            self.post_message(RunFinished("error", error))

    # ------------------------------------------------------------------------------------------------
    # Events
    # ------------------------------------------------------------------------------------------------
    @property
    def pending(self) -> DecisionRequest | None:
        """The request awaiting the reviewer: the run's own (from the event stream, through the RunView),
        unless this reviewer has already answered it and the stream has not yet said so."""
        request = self.view.pending
        if request is None or request is self._answered or not self.running:
            return None
        return request

    @while_open
    def on_run_event(self, message: RunEvent) -> None:
        stamped = message.stamped
        event = stamped.event
        view = self.view
        was_pending = self.pending
        view.apply(stamped)
        audit = self.query_one(AuditPane)
        audit.record(event, stamped.seq, stamped.head)
        self.mutate_reactive(SupervisorApp.view)  # the batch pane, the status bar and the alerts follow it
        match event:
            case ev.RunEnded():
                self.running = False
                # result.json is written after this last event and may fail: sealed only once it is there
                sealing = self.source.live and not self._sealed_known
                audit.set_state("sealing…" if sealing else "sealed")
            case ev.Killed():
                self.notify("kill switch: run stopped", severity="error", markup=False)
        if view.alert is not None:
            self.refresh_bindings()
        if isinstance(event, ev.ScreenCaptured) and event.png is not None:
            self.render_frame()
            if self.pending is not None and self.pending is was_pending:  # a new screen during a decision
                self._read_screen()
        if self.pending is not was_pending:
            self._show_pending()

    @while_open
    def on_run_finished(self, message: RunFinished) -> None:
        self.running = False
        self.final_status = message.status
        self._sealed_known = True
        if self.source.live:
            self._show_seal(message)
        self._show_pending()
        if message.status:
            self.notify(f"run ended: {visible(message.status)} · press q to quit", timeout=30, markup=False)

    def _show_seal(self, message: RunFinished) -> None:
        """The audit pane and the status bar as the run's result has them: a run whose seal could not be
        written (its RunEnded record says how it ended, not that it was sealed) is shown not sealed, why."""
        sealed = bool(getattr(self.result, "sealed", False))
        self.query_one(AuditPane).set_state("sealed" if sealed else "NOT sealed")
        if sealed:
            return
        reason = visible(message.reason or "the run ended without a result", limit=300)
        status = self.query_one(StatusBar)
        status.final = f"{visible(message.status or 'error')} · {reason}"
        status.ended = status.ended or self.clock()
        status.show(self.view)
        self.notify(f"not sealed: {reason}", title="seal", severity="error", timeout=60, markup=False)

    def _show_pending(self) -> None:
        """Show what ``pending`` says (the one place that reads it for the panes)."""
        request = self.pending
        self.guard.arm(request)  # a new decision on screen: its keys count after the guard
        self.zoom = self._focus_target() is not None  # at a decision the pane frames the target (z: whole screen)
        panel = self.query_one(DecisionPanel)
        panel.set_compact(compact_terminal(self.size.width, self.size.height))
        panel.show_request(
            request,
            self.view.batch_size,
            self.source.info.task,
            self._destination(),
            field=self._field() is not None,
            model_text=self.view.batch_text,
        )
        if request is not None:
            self._read_screen()
        self.query_one(BatchPane).mark_pending(request.index if request is not None else None)
        self.render_frame()
        self.refresh_bindings()
        if request is not None:
            self._signal(request)

    def _signal(self, request: DecisionRequest) -> None:
        """A decision starts waiting: the bell, and a desktop notification where the terminal shows one."""
        if self.signals.bell:
            self.bell()
        if self.signals.notify:
            what = request.action.describe() if request.action is not None else "model safety checks"
            body = f"turn {request.turn}, action {request.index + 1}: {what} · {request.reason}"
            sequence = notification_escape("cua-tui: decision needed", body, self.env)
            if sequence is not None:
                self.write_escape(sequence)

    def write_escape(self, sequence: str) -> None:
        """Send an escape sequence to the terminal (not to a headless test driver)."""
        driver = self._driver
        if driver is not None and not self.is_headless:
            driver.write(sequence)
            driver.flush()

    # ------------------------------------------------------------------------------------------------
    # Frames
    # ------------------------------------------------------------------------------------------------
    @property
    def desktop(self) -> DesktopView:
        return self.query_one("#desktop", DesktopView)

    @property
    def painted_sha(self) -> str:
        """The SHA-256 of the screenshot the pane shows ("": none, refused, or none yet)."""
        return self.desktop.painted_sha

    def render_frame(self) -> None:
        screen = self.view.screen
        if screen is None or screen.png is None:
            return
        # the zoom keeps the target's label in view
        target = labelled(self._focus_target(), self.reading, screen.sha256)
        self.desktop.show_shot(shot_of(self.view), target, zoom=self.zoom)

    @while_open
    def on_desktop_view_refused(self, message: DesktopView.Refused) -> None:
        self.notify(f"screenshot not shown: {message.reason}", title="desktop", severity="warning", markup=False)

    def on_resize(self, event: events.Resize) -> None:
        self.query_one(DecisionPanel).set_compact(compact_terminal(event.size.width, event.size.height))

    def on_desktop_view_resized(self, message: DesktopView.Resized) -> None:
        if self.pending is not None:  # the pending row back in view at the new size (unless read back)
            self.query_one(BatchPane).reveal_pending()

    # ------------------------------------------------------------------------------------------------
    # Keys
    # ------------------------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("approve", "reject", "approve_scope"):
            # Only where the decision is in view: never from under a dialog (help, an event's detail, the
            # policy, a reason being typed) that hides what a y would approve.
            # (The command palette lists them over the decision: it hides nothing the choice depends on.)
            covered = any(not isinstance(screen, CommandPalette) for screen in self.screen_stack[1:])
            if self.pending is None or covered:
                return False
            return action != "approve_scope" or self.pending.scope is not None
        if action == "kill":
            # While a reason is typed, k is a letter of it: ctrl+k (always bound) is the kill switch there.
            # So is it in the screen-text view's search box.
            typing = isinstance(self.screen, RejectReason | ScreenTextScreen)
            return self.running and (parameters == ("always",) or not typing)
        if action == "grants":
            return self.running and bool(self.view.grants)
        if action == "alerts_seen":
            return bool(self.view.attention.unseen)
        if action == "zoom":
            return self._focus_target() is not None
        if action in ("screen_text", "open_screenshot"):
            return self.view.screen is not None
        if action == "leave":
            return self.running
        if action == "quit_when_done":
            return not self.running
        if (possible := self.check_history_action(action)) is not None:
            return possible
        return True

    def _held(self, key: str) -> bool:
        """The decision was painted too recently for ``key`` to count: say so; it is ignored."""
        why = self.guard.refusal(key)
        if why is not None:
            self.notify(why, title="input guard", severity="warning", timeout=4, markup=False)
        return why is not None

    def _answer(self, answer: Answer, *, note: str = "", grant: bool = False) -> None:
        request = self.pending
        if request is None:
            return
        shown = {"screen": self.painted_sha, "shown_ms": self.guard.shown_ms()}  # what was seen, how long
        if self.source.answer(answer, request, note=note, grant=grant, **shown):
            self._answered = request  # answered: hidden until the stream records the decision
            self._show_pending()

    def action_approve(self) -> None:
        if not self._held("y"):
            self._answer(Answer.APPROVE)

    def action_reject(self) -> None:
        """``n``: ask for an optional reason first (Enter sends it, Esc skips), then reject."""
        request = self.pending
        if request is None or self._held("n"):
            return

        def done(reason: str | None) -> None:
            if self.pending is request:  # still the same decision (not killed or timed out meanwhile)
                self._answer(Answer.REJECT, note=reason or "")

        self.push_screen(RejectReason(), done)

    def action_approve_scope(self) -> None:
        """``a``: approve this action and every later one of its scope (shown in the panel) for the run."""
        if self.pending is not None and self.pending.scope is not None and not self._held("a"):
            self._answer(Answer.APPROVE, grant=True)

    def action_grants(self) -> None:
        """The scoped approvals in force; the one selected is revoked."""

        def done(grant_id: int | None) -> None:
            if grant_id is not None and self.source.revoke(grant_id):
                self.notify(f"grant #{grant_id} revoked: its actions are asked again", markup=False)

        self.push_screen(GrantsScreen(list(self.view.grants.values())), done)

    def action_kill(self, how: str = "") -> None:
        if not self.running:
            return
        if isinstance(self.screen, RejectReason | ScreenTextScreen):
            self.pop_screen()
        self.source.kill()  # returns at once; the run's own thread ends it and seals the log
        if self.pending is not None:
            self._answered = self.pending  # nobody may answer it any more
            self._show_pending()
        self.query_one(StatusBar).stopping()

    def action_alerts_seen(self) -> None:
        """``x``: the alerts have been seen; the line goes until the next one (the audit log keeps them all)."""
        if self.view.attention.seen():
            self.mutate_reactive(SupervisorApp.view)
            self.refresh_bindings()

    def action_zoom(self) -> None:
        self.zoom = not self.zoom
        self.render_frame()

    # ------------------------------------------------------------------------------------------------
    # The screen as text (t), the screenshot in a file (o); the bulk is in screen_text.py
    # ------------------------------------------------------------------------------------------------
    def _field(self) -> tuple[int, int] | None:
        """For pending typing: the last click point (the field it focused), else None."""
        return typing_field(self.pending, self.view)

    def _sha(self) -> str | None:
        """The SHA-256 of the newest screenshot (the screen-text cache's key)."""
        return self.view.screen.sha256 if self.view.screen is not None else None

    def _focus_target(self) -> Target | None:
        """What the pane frames at a decision: the action's target, or for typing the focused field."""
        return focus_target(self.pending, self.view)

    def _destination(self) -> str | None:
        """The panel's "goes to" line for pending typing (None for anything else)."""
        return destination(self.pending, self.view, self.reading, self._sha())

    def _shown_screen(self) -> ShownScreen | None:
        return shown_screen(shot_of(self.view), self._focus_target(), self.source.info.run_id)

    def _read_screen(self) -> None:
        shown = self._shown_screen()
        if shown is not None:
            self.reading.request(shown)

    @while_open
    def on_screen_text_read(self, message: ScreenTextRead) -> None:
        screen_text_arrived(self, self.reading, message)
        if message.digest == self._sha() and self._focus_target() is not None and self.pending is not None:
            self.query_one(DecisionPanel).set_destination(self._destination(), field=self._field() is not None)
            self.query_one(BatchPane).mark_pending(self.pending.index)  # the panel grew: the row back in view
        if message.digest == self._sha() and self.pending is not None and message.text is not None:
            self.render_frame()  # framed with the target's label in view

    def action_screen_text(self) -> None:
        """``t``: the screen as text, nearest the pending target first, searchable."""
        shown = self._shown_screen()
        if shown is None or isinstance(self.screen, ScreenTextScreen):
            return
        self.reading.request(shown)
        self.push_screen(ScreenTextScreen(shown, self.reading))

    def action_open_screenshot(self) -> None:
        """``o``: the current screenshot at full resolution in a file (said where), opened in the viewer."""
        shown = self._shown_screen()
        if shown is not None:
            write_and_open(self, shown)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            grants = [f"grant #{g.grant}: {g.label} (given by {g.by})" for g in self.view.grants.values()]
            lines = [
                *self.source.policy_lines,
                *(["", "Scoped approvals in force (g revokes):", *grants] if grants else []),
            ]
            self.push_screen(HelpScreen(lines))

    def action_leave(self) -> None:
        """``q`` while the run goes on: leaving kills the run, so the first press only says so; a second
        within a few seconds leaves (the run is killed and sealed on the way out)."""
        now = time.monotonic()
        if now - self._leave_asked < LEAVE_WINDOW_S:
            self.source.kill(by="human (left the TUI)")
            self.exit(self.result)
            return
        self._leave_asked = now
        self.notify(
            f"The run is still going: k is the kill switch. Press q again within {LEAVE_WINDOW_S:g} s to leave "
            "the TUI, which kills the run (it is sealed as killed).",
            title="leave?",
            severity="warning",
            timeout=LEAVE_WINDOW_S,
            markup=False,
        )

    def action_quit_when_done(self) -> None:
        if not self.running:
            self.exit(self.result)

    async def action_quit(self) -> None:
        """Textual's ctrl+q and the palette's Quit: during a run, the same as q (say that leaving kills the
        run; a second press within a few seconds leaves); once it has ended, quit."""
        if self.running:
            self.action_leave()
        else:
            self.exit(self.result)


def graphics_widget() -> type[Widget] | None:
    """The textual-image widget for the terminal's graphics protocol (Kitty TGP or Sixel), or None for the
    fast half-block path. Importing textual_image.renderable probes the terminal: call before App.run."""
    from textual_image import renderable
    from textual_image.widget import TGPImage

    from .desktop_view import sixel_widget

    if renderable.Image is renderable.TGPImage:
        return TGPImage
    if renderable.Image is renderable.SixelImage:
        return sixel_widget()  # textual-image's SixelImage, given the data the worker encoded
    return None
