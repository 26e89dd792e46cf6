"""The supervision TUI: live screen, pending batch with risks, audit tail, status; y / n / k.

The App is given its event source (a live run or recorded events) in its constructor. The run itself
happens in a thread worker; core events arrive as messages; screenshots are converted off the UI thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Footer
from textual.worker import Worker, WorkerState, get_current_worker

from ..core import events as ev
from ..core.ports import Answer, DecisionRequest
from ..core.text import visible
from .audit_pane import AuditPane
from .batch import BatchPane
from .decision import DecisionPanel
from .desktop_view import DesktopView
from .frames import Target, prepare
from .help import HelpScreen
from .messages import DecisionNeeded, FrameRendered, RunEvent, RunFinished
from .source import RunSource
from .status import StatusBar
from .themes import load_themes, project_themes_dir


class SupervisorApp(App[Any]):
    """One screen: desktop pane | decision + batch + audit panes, status bar, footer."""

    CSS_PATH = "app.tcss"
    TITLE = "cua-tui"
    BINDINGS = [
        Binding("y", "approve", "approve", id="approve"),
        Binding("n", "reject", "reject", id="reject"),
        Binding("k", "kill", "KILL SWITCH", id="kill", priority=True),
        Binding("z", "zoom", "zoom", id="zoom"),
        Binding("question_mark", "help", "help", id="help"),
        Binding("q", "quit_when_done", "quit", id="quit"),
    ]

    def __init__(
        self,
        source: RunSource,
        *,
        theme: str = "cua-dark",
        theme_dirs: tuple[Path, ...] = (),
        graphics: type[Widget] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.graphics = graphics
        self.source = source
        self.clock = clock  # the status bar's elapsed time; fixtures pass a fixed one
        self.requested_theme = theme
        self.theme_dirs = (project_themes_dir(), *theme_dirs)
        self.pending: DecisionRequest | None = None
        self.running = True
        self.result: Any = None
        self.final_status = ""
        self.zoom = False
        self._png: bytes | None = None
        self._serial = 0
        self._shown = 0
        self._batch_size = 0
        self._actions: dict[int, Any] = {}  # index -> parsed Action of the current turn

    # ------------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield DesktopView(graphics=self.graphics, id="desktop")
            with Vertical(id="side"):
                yield DecisionPanel(id="decision")
                yield BatchPane(id="batch")
                yield AuditPane(id="audit")
        yield StatusBar(self.source.info, clock=self.clock, id="status")
        yield Footer()

    def on_mount(self) -> None:
        themes, problems = load_themes(*self.theme_dirs)
        for theme in themes:
            self.register_theme(theme)
        names = {t.name for t in themes} | set(self.available_themes)
        if self.requested_theme in names:
            self.theme = self.requested_theme
        else:
            self.theme = "cua-dark"
            problems.append(f"unknown theme {self.requested_theme!r}; using cua-dark")
        for problem in problems:
            # markup=False: file names and parser messages quote the file's own text ("[/]" would crash)
            self.notify(visible(problem), title="theme", severity="warning", timeout=10, markup=False)
        self.query_one("#desktop", DesktopView).border_title = "Desktop"
        self.query_one(DecisionPanel).show_request(None)
        self.source.attach(self._from_run, self._request_from_run)
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

    def _from_run(self, event: ev.Event, seq: int, head: str) -> None:
        self.post_message(RunEvent(event, seq, head))

    def _request_from_run(self, request: DecisionRequest) -> None:
        self.post_message(DecisionNeeded(request))

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
            error = visible(str(message.worker.error))
            self.notify(error, title="run failed", severity="error", timeout=30, markup=False)
            self.post_message(RunFinished("error", str(message.worker.error)))

    # ------------------------------------------------------------------------------------------------
    # Events
    # ------------------------------------------------------------------------------------------------
    def on_run_event(self, message: RunEvent) -> None:
        event = message.event
        self.query_one(AuditPane).record(event, message.seq, message.head)
        status = self.query_one(StatusBar)
        batch = self.query_one(BatchPane)
        match event:
            case ev.Phase():
                status.phase, status.detail = event.phase, event.detail
                status.redraw()
            case ev.Executing():
                status.phase, status.detail = "executing", event.summary
                status.redraw()
            case ev.ScreenCaptured() if event.png is not None:
                self._png = event.png
                self.render_frame()
            case ev.ModelTurn():
                status.turn = event.turn
                status.tokens = event.total_tokens
                status.cost = event.total_cost_usd
                status.redraw()
                if event.actions:
                    batch.start_turn(event.turn, event.text)
                    self._actions.clear()
                    self._batch_size = event.actions
                else:  # the agent is done: keep the last batch in view, add its final words
                    batch.final_text(event.text)
            case ev.ActionProposed():
                kind = (event.action or {}).get("kind", "") if event.action else (event.raw_kind or "?")
                params = event.summary or event.error
                row = batch.add(event.index, kind, params, error=event.error)
                self._actions[event.index] = event.parsed
                if event.error:
                    row.set_verdict("block", f"malformed: {event.error}")
            case ev.PolicyVerdict():
                row = batch.rows.get(event.index)
                if row is not None:
                    row.set_verdict(event.verdict, event.reason)
            case ev.DecisionMade():
                row = batch.rows.get(event.index)
                if row is not None and event.subject == "action" and event.by != "policy":
                    row.set_state("approved" if event.decision == "approve" else row.state, event.by)
                if self.pending is not None and event.index == self.pending.index:
                    self._clear_pending()
            case ev.Outcome():
                row = batch.rows.get(event.index)
                if row is not None:
                    row.set_state(event.status)
                status.steps = event.step
                status.redraw()
            case ev.RunEnded():
                status.final = f"{event.status} · {visible(event.reason, limit=80)}"
                status.ended = status.ended or self.clock()
                status.redraw()
                self.query_one(AuditPane).set_state("sealed")
                self.running = False
                self._clear_pending()
                self.refresh_bindings()
            case ev.Killed():
                self.notify("kill switch: run stopped", severity="error")

    def on_decision_needed(self, message: DecisionNeeded) -> None:
        if not self.running:
            return
        self.pending = message.request
        self.query_one(DecisionPanel).show_request(message.request, self._batch_size)
        self.query_one(BatchPane).mark_pending(message.request.index)
        self.zoom = False
        self.render_frame()
        self.refresh_bindings()
        self.bell()

    def on_run_finished(self, message: RunFinished) -> None:
        self.running = False
        self.final_status = message.status
        self._clear_pending()
        self.refresh_bindings()
        if message.status:
            self.notify(f"run ended: {visible(message.status)} · press q to quit", timeout=30, markup=False)

    def _clear_pending(self) -> None:
        if self.pending is None:
            return
        self.pending = None
        self.zoom = False
        self.query_one(DecisionPanel).show_request(None)
        self.query_one(BatchPane).mark_pending(None)
        self.render_frame()
        self.refresh_bindings()

    # ------------------------------------------------------------------------------------------------
    # Frames
    # ------------------------------------------------------------------------------------------------
    def render_frame(self) -> None:
        if self._png is None:
            return
        view = self.query_one(DesktopView)
        self._serial += 1
        target = Target.of(self.pending.action) if self.pending is not None else None
        self._convert(self._png, view.size.width, view.size.height, target, self.zoom, self._serial, view.wants_strips)

    @work(thread=True, exclusive=False, exit_on_error=False, group="frame", description="convert screenshot")
    def _convert(
        self, png: bytes, width: int, height: int, target: Target | None, zoom: bool, serial: int, strips: bool
    ) -> None:
        if serial != self._serial:
            return  # a newer frame is on its way
        cell_pixels = None
        if not strips:
            from textual_image._terminal import get_cell_size  # cached probe result

            size = get_cell_size()
            cell_pixels = (size.width, size.height)
        rendered = prepare(png, width, height, target, zoom=zoom, strips=strips, cell_pixels=cell_pixels)
        self.post_message(FrameRendered(rendered, serial))

    def on_frame_rendered(self, message: FrameRendered) -> None:
        if message.serial < self._shown:
            return
        self._shown = message.serial
        self.query_one(DesktopView).show(message.rendered)

    def on_resize(self) -> None:
        self.call_after_refresh(self.render_frame)

    # ------------------------------------------------------------------------------------------------
    # Keys
    # ------------------------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("approve", "reject"):
            return self.pending is not None
        if action == "kill":
            return self.running
        if action == "zoom":
            return (
                self.pending is not None and self.pending.action is not None and self.pending.action.target is not None
            )
        if action == "quit_when_done":
            return not self.running
        return True

    def _answer(self, answer: Answer) -> None:
        request = self.pending
        if request is None:
            return
        if self.source.answer(answer, request):
            self._clear_pending()

    def action_approve(self) -> None:
        self._answer(Answer.APPROVE)

    def action_reject(self) -> None:
        self._answer(Answer.REJECT)

    def action_kill(self) -> None:
        if not self.running:
            return
        self.source.kill()  # returns at once; the run's own thread ends it and seals the log
        self._clear_pending()
        self.query_one(StatusBar).phase = "stopping"
        self.query_one(StatusBar).redraw()

    def action_zoom(self) -> None:
        self.zoom = not self.zoom
        self.render_frame()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.source.policy_lines))

    def action_quit_when_done(self) -> None:
        if not self.running:
            self.exit(self.result)


def graphics_widget() -> type[Widget] | None:
    """The textual-image widget for the terminal's graphics protocol (Kitty TGP or Sixel), or None for the
    fast half-block path. Importing textual_image.renderable probes the terminal: call before App.run."""
    from textual_image import renderable
    from textual_image.widget import SixelImage, TGPImage

    if renderable.Image is renderable.TGPImage:
        return TGPImage
    if renderable.Image is renderable.SixelImage:
        return SixelImage
    return None
