"""The one App of cua-tui: what a live run, a replay and a fleet share (the keys and when each is possible,
leaving, the bell and notifications, themes, the screen reader, the worker that drives a live run). What
is shown is a Screen: a run (RunScreen, ReplayScreen) or the fleet (FleetScreen)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from textual import work
from textual.app import App, ComposeResult
from textual.binding import ActiveBinding
from textual.command import CommandPalette
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input
from textual.worker import Worker, WorkerState, get_current_worker

from ..core.guard import DEFAULT_GUARD_S, DecisionGuard
from ..core.ports import Answer
from ..core.screentext import ScreenTextReader
from ..core.stats import Pace
from ..core.supervisor import RunResult
from ..core.text import failure, visible
from .commands import CuaCommands
from .help import HelpScreen
from .keys import APP, bindings, help_keys, keys_of
from .messages import RunFinished, while_open
from .screen_text import (
    ScreenReading,
    ScreenTextRead,
    ScreenTextScreen,
    ShownScreen,
    screen_text_arrived,
    write_and_open,
)
from .signals import Signals, notification_escape
from .source import RunSource
from .takeover import PassthroughScreen
from .themes import install_themes, project_themes_dir

# a second q within this many seconds leaves what goes on (and kills it)
LEAVE_WINDOW_S = 3.0
# The keys whose possibility the shown view decides; y / a / n also need the decision in view.
VIEW_ACTIONS = (
    "approve", "approve_scope", "edit", "reject", "kill", "zoom", "screen_text", "open_screenshot", "help",
)  # fmt: skip
ANSWERS = ("approve", "approve_scope", "edit", "reject")
LETTERS = ("edit", "reject", "kill")  # the view keys bound with priority (before the focused widget)
FIRST = ("approve", "approve_scope", "edit", "reject", "kill")  # the footer's first keys
LAST = ("leave", "quit", "quit_when_done")


def desktop_beside(desktop: Widget, *side: Widget) -> ComposeResult:
    """A run's desktop, and beside it the column of ``side`` (its panel, the batch, the audit tail)."""
    with Horizontal(id="main"):
        yield desktop
        with Vertical(id="side"):
            yield from side


class ViewScreen(Screen[None]):
    """A screen the App's keys act on: one run's view or the fleet's. Each says which of the App's actions
    it can do now (``can``) and does them; the App checks that nothing covers it before a y counts."""

    cua: CuaApp  # the App, typed (each view is given it)
    # where its keys are bound (tui/keys.py), and the App's actions it does
    HOMES: tuple[str, ...] = (APP,)
    APP_ACTIONS: tuple[str, ...] = (*VIEW_ACTIONS, "kill_chord")

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """The keys in the footer's order: the answers and the kill switch first, leaving last, the view's
        own keys and the App's others between (Textual lists a screen's before its App's)."""
        bindings = super().active_bindings

        def place(key: str) -> tuple[int, int]:
            action = bindings[key].binding.action.removeprefix("app.").partition("(")[0]
            return (0, FIRST.index(action)) if action in FIRST else (2 if action in LAST else 1, 0)

        return {key: bindings[key] for key in sorted(bindings, key=place)}

    def can(self, action: str, parameters: tuple[object, ...]) -> bool:
        return action == "help"

    def guard_for(self) -> DecisionGuard | None:
        """The input guard of the decision this view shows (None: it shows none)."""
        return None

    def approve(self, *, scope: bool = False) -> None: ...
    async def edit(self) -> None: ...
    async def reject(self) -> None: ...
    def kill(self, how: str = "") -> None: ...
    def zoom(self) -> None: ...

    def shown_screen(self) -> ShownScreen | None:
        """The screenshot the desktop pane shows, with the point that matters (None: none)."""
        return None

    def screen_text(self) -> None:
        """``t``: the shown screen as text, nearest the target first, searchable."""
        shown = self.shown_screen()
        if shown is None or isinstance(self.app.screen, ScreenTextScreen):
            return
        self.cua.reading.request(shown)
        self.app.push_screen(ScreenTextScreen(shown, self.cua.reading))

    def open_screenshot(self) -> None:
        """``o``: the shown screenshot at full resolution in a file (said where), opened in the viewer."""
        shown = self.shown_screen()
        if shown is not None:
            write_and_open(self.app, shown)

    def help_lines(self) -> list[str]:
        """The help screen's lines beside the keys (the active policy)."""
        return []

    def key_lines(self) -> list[tuple[str, str]]:
        """The help screen's keys: this view's bindings (tui/keys.py), each with its sentence."""
        return help_keys(keys_of(self.HOMES, self.APP_ACTIONS))

    def show_help(self) -> None:
        if not isinstance(self.app.screen, HelpScreen):
            self.app.push_screen(HelpScreen(self.help_lines(), self.key_lines()))

    def refused(self, whose: str, turn: int, index: int, why: str) -> None:
        """An answer did not reach its request (it closed meanwhile): said, never applied to another."""
        self.notify(
            f"not applied{whose} (turn {turn}, action {index + 1}): {visible(why, limit=200)}",
            title="answer refused",
            severity="warning",
            timeout=8,
            markup=False,
        )

    def leave_warning(self) -> str | None:
        """What leaving now would end (said before a second q leaves); None: nothing, q quits at once."""
        return None

    def leave(self) -> None:
        """Leave, ending what goes on (the second q)."""
        self.app.exit()

    def screen_text_read(self, message: ScreenTextRead) -> None:
        """The screen reader read a screen: a view showing it may say more now."""


class CuaApp(App[Any]):
    """The App. ``main`` makes the first screen, the one leaving ends; the settings are the same for every
    screen: the theme, the terminal's graphics widget, the clock of the status bars, the signals of a
    waiting decision, the screen reader (``t``, the panel's "goes to" line) and the input guard."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "cua-tui"
    COMMANDS = App.COMMANDS | {CuaCommands}  # cua-tui's own commands in the palette (ctrl+p)
    BINDINGS = bindings(APP)  # the keys of every view (tui/keys.py)

    def __init__(
        self,
        main: Callable[[CuaApp], ViewScreen],
        *,
        title: str = "cua-tui",
        theme: str = "cua-dark",
        theme_dirs: tuple[Path, ...] = (),
        graphics: type[Widget] | None = None,
        clock: Callable[[], float] = time.monotonic,
        signals: Signals | None = None,
        env: Mapping[str, str] | None = None,
        screen_reader: ScreenTextReader | None = None,
        guard_s: float = DEFAULT_GUARD_S,
        guard_clock: Callable[[], float] = time.monotonic,
        tell_theme: bool = True,
    ) -> None:
        super().__init__()
        self.title = title
        self.requested_theme = theme
        self.theme_dirs = (project_themes_dir(), *theme_dirs)
        self.tell_theme = tell_theme
        self.graphics = graphics
        # the status bars' elapsed time; fixtures pass a fixed one
        self.clock = clock
        self.signals = signals or Signals()
        # which terminal this is (its notification escape)
        self.env = os.environ if env is None else env
        # the screen as text (OCR in a worker; none: it says so)
        self.reading = ScreenReading(self, screen_reader)
        self.guard_s, self.guard_clock = guard_s, guard_clock
        # the approvals' pace, over every view (one person answers them all)
        self.pace = Pace()
        self.result: RunResult | None = None  # a live run's result, once it has one
        self._leave_asked = -LEAVE_WINDOW_S
        self.main = main(self)

    def get_default_screen(self) -> Screen[Any]:
        return self.main

    def on_mount(self) -> None:
        install_themes(self, self.requested_theme, self.theme_dirs, tell=self.tell_theme)

    def new_guard(self) -> DecisionGuard:
        """A view's own input guard: y / a / n count only once its decision has been on screen a moment."""
        return DecisionGuard(self.guard_s, self.guard_clock)

    # ---------------------------------------------------------------------------------------------
    # The shared keys, done by the view they act on
    # ----------------------------------------------------------------------------------------------
    @property
    def view_screen(self) -> ViewScreen | None:
        """The topmost view in the stack (a dialog may be above it)."""
        return next((s for s in reversed(self.screen_stack) if isinstance(s, ViewScreen)), None)

    def covered(self, view: ViewScreen) -> bool:
        """A dialog (help, an event's detail, a reason being typed) hides what a y would approve. The
        command palette hides nothing the choice depends on."""
        above = self.screen_stack[self.screen_stack.index(view) + 1 :] if view in self.screen_stack else []
        return any(not isinstance(screen, CommandPalette) for screen in above)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in LETTERS and parameters != ("always",) and isinstance(self.focused, Input):
            # a letter typed into a field (a search, a reason, an edit, the palette) is the field's
            return False
        return self.possible(action, parameters)

    def possible(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Whether ``action`` can be done now, whatever has the focus (the palette asks this)."""
        if isinstance(self.screen, PassthroughScreen):
            # every key is the desktop's until ctrl+] leaves, but the kill chord
            return action == "kill_chord"
        if action not in VIEW_ACTIONS:
            return True
        view = self.view_screen
        if view is None:
            return False
        if action in ANSWERS and self.covered(view):
            return False
        return view.can(action, parameters)

    def paced(self, answer: Answer, shown_ms: int | None) -> None:
        """An answer given: after a run of approvals each faster than a person reads, say so once."""
        warning = self.pace.answered(answer.value, shown_ms)
        if warning is not None:
            self.notify(warning, title="pace", severity="warning", timeout=15, markup=False)

    def held(self, key: str) -> bool:
        """The decision was painted too recently for ``key`` to count: say so; it is ignored."""
        view = self.view_screen
        guard = view.guard_for() if view is not None else None
        why = guard.refusal(key) if guard is not None else None
        if why is not None:
            self.notify(why, title="input guard", severity="warning", timeout=4, markup=False)
        return why is not None

    def action_approve(self) -> None:
        if (view := self.view_screen) is not None and not self.held("y"):
            view.approve()

    def action_approve_scope(self) -> None:
        if (view := self.view_screen) is not None and view.can("approve_scope", ()) and not self.held("a"):
            view.approve(scope=True)

    async def action_edit(self) -> None:
        # the editor shows what will run; opening it counts as an answer's first key. Awaited: the keys
        # typed after e wait until its field has the focus, so none reaches a binding (k kills) instead
        if (view := self.view_screen) is not None and view.can("edit", ()) and not self.held("e"):
            await view.edit()

    async def action_reject(self) -> None:
        # awaited, as e: the reason's box has its field focused before the next key is handled
        if (view := self.view_screen) is not None and not self.held("n"):
            await view.reject()

    def _on_view(self, do: Callable[[ViewScreen], None]) -> None:
        """Do what a key asks of the topmost view (with none, nothing)."""
        if (view := self.view_screen) is not None:
            do(view)

    def action_kill(self, how: str = "") -> None:
        self._on_view(lambda view: view.kill(how))

    def action_kill_chord(self) -> None:
        """``ctrl+\\``: the kill switch in every view and state, passthrough and typed fields included."""
        if (view := self.view_screen) is not None and view.can("kill", ("always",)):
            view.kill()

    def action_zoom(self) -> None:
        self._on_view(lambda view: view.zoom())

    def action_screen_text(self) -> None:
        self._on_view(lambda view: view.screen_text())

    def action_open_screenshot(self) -> None:
        self._on_view(lambda view: view.open_screenshot())

    def action_help(self) -> None:
        self._on_view(lambda view: view.show_help())

    # ---------------------------------------------------------------------------------------------
    # Leaving: what goes on ends only on a second q
    # ----------------------------------------------------------------------------------------------
    def action_leave(self) -> None:
        """``q``: with nothing going on, quit. Otherwise the first press says what leaving ends; a second
        within a few seconds leaves (what goes on is killed and sealed on the way out)."""
        warning = self.main.leave_warning()
        if warning is None:
            self.exit(self.result)
            return
        now = time.monotonic()
        if now - self._leave_asked < LEAVE_WINDOW_S:
            self.main.leave()
            return
        self._leave_asked = now
        self.notify(warning, title="leave?", severity="warning", timeout=LEAVE_WINDOW_S, markup=False)

    async def action_quit(self) -> None:
        """Textual's ctrl+q and the palette's Quit: the same as q."""
        self.action_leave()

    # ---------------------------------------------------------------------------------------------
    # Signals: the bell and a desktop notification when a decision starts waiting
    # ----------------------------------------------------------------------------------------------
    def signal(self, title: str, body: str) -> None:
        if self.signals.bell:
            self.bell()
        if self.signals.notify and (sequence := notification_escape(title, body, self.env)) is not None:
            self.write_escape(sequence)

    def write_escape(self, sequence: str) -> None:
        """Send an escape sequence to the terminal (not to a headless test driver)."""
        driver = self._driver
        if driver is not None and not self.is_headless:
            driver.write(sequence)
            driver.flush()

    # ---------------------------------------------------------------------------------------------
    # The screen reader's results reach every view that may show them
    # ----------------------------------------------------------------------------------------------
    @while_open
    def on_screen_text_read(self, message: ScreenTextRead) -> None:
        screen_text_arrived(self, self.reading, message)
        for screen in self.screen_stack:
            if isinstance(screen, ViewScreen):
                screen.screen_text_read(message)

    # ---------------------------------------------------------------------------------------------
    # A live run, driven from a worker thread
    # ----------------------------------------------------------------------------------------------
    def drive(self, source: RunSource, screen: Screen[Any]) -> None:
        """Run ``source`` in a thread worker; ``screen`` is told when it has finished (RunFinished)."""
        self._run_screen = screen
        self._drive(source)

    @work(thread=True, exclusive=True, exit_on_error=False, group="run", description="supervised run")
    def _drive(self, source: RunSource) -> Any:
        # Textual marks this worker cancelled whenever the App's message loop ends, even if
        # on_unmount is skipped; a watcher turns that into the kill switch, so a live run never
        # outlives its TUI (its non-daemon worker thread would otherwise hold the process open until
        # the run's deadline).
        worker = get_current_worker()
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.2):
                if worker.is_cancelled and source.live:
                    source.kill(by="human (left the TUI)")
                    return

        threading.Thread(target=watch, name="cua-tui-watch", daemon=True).start()
        try:
            return source.run()
        finally:
            done.set()

    def on_worker_state_changed(self, message: Worker.StateChanged) -> None:
        if message.worker.group != "run":
            return
        if message.state is WorkerState.SUCCESS:
            result = self.result = message.worker.result
            status, reason = (str(result.status), result.reason) if result is not None else ("", "")
            self._run_screen.post_message(RunFinished(status, reason))
        elif message.state is WorkerState.ERROR:
            error = visible(failure(message.worker.error) if message.worker.error else "the run failed")
            self.notify(error, title="run failed", severity="error", timeout=30, markup=False)
            self._run_screen.post_message(RunFinished("error", error))


def graphics_widget() -> type[Widget] | None:
    """The widget for the terminal's graphics protocol (textual-image's for Kitty TGP, our SixelPane for
    Sixel), or None for the fast half-block path. Importing textual_image.renderable probes the terminal:
    call before App.run."""
    from textual_image import renderable
    from textual_image.widget import TGPImage

    from .graphics import SixelPane

    if renderable.Image is renderable.TGPImage:
        return TGPImage
    if renderable.Image is renderable.SixelImage:
        # written from the data the worker encoded
        return SixelPane
    return None
