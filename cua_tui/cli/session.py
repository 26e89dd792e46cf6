"""Carry a built run to its end, in the TUI or headless, and exit with its status code."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from dataclasses import replace
from typing import Any

import click

from ..build import Run, RunOptions, build_run
from ..core.errors import CommandError
from .base import OnSignal, fail, next_steps, settings
from .otel import close_sink, open_sink


def execute(options: RunOptions, *, headless: bool, theme: str | None, otel: str | None = None) -> None:
    """Build the run from the options, drive it in the TUI (or headless), exit with the run's status. Its
    spans go to ``otel`` (or the settings' endpoint), if any."""
    options = replace(options, settings=options.settings or settings())
    if headless:
        from ..headless import printer

        options = replace(options, listeners=(*options.listeners, printer(sys.stderr)))
    else:
        check_theme(theme, options.settings)
    # a BuildError is the command line's: exit 2 for usage, 1 for a run directory that cannot be
    # written
    run = build_run(options)
    sink = open_sink(otel, options.settings, headless=headless)
    if sink is not None:
        run.subscribe(sink.listener(run.run_id))
    try:
        if headless:
            click.echo(f"run {run.run_id} · {run.path}", err=True)
            result = _run_with_interrupt(run)
        else:
            result = _run_in_tui(run, theme, options.settings)
        click.echo(end_line(result), err=True)
        click.echo(f"run directory: {result.path}", err=True)
        for line in next_steps(result.path, options.settings.runs_dir):
            click.echo(line, err=True)
    finally:
        close_sink(sink)
    sys.exit(result.exit_code)


def end_line(result: Any) -> str:
    """The run's last word: its status, why, and who checked it where (the reason may be a sandbox's
    verifier's words: shown literally). The run's own record, just sealed: its status is no claim."""
    from ..core.ending import checked_by
    from ..core.text import visible

    line = f"status: {result.status} · {visible(result.reason)}"
    checked = checked_by(result.verification)
    return f"{line} · {checked}" if checked else line


def check_theme(theme: str | None, where: Any) -> None:
    """An unknown ``--theme`` is bad usage (exit 2, the themes listed), before anything starts."""
    if theme is None:
        return
    from ..tui.themes import theme_names

    names = theme_names(where.themes_dir)
    if theme not in names:
        fail(f"--theme {theme!r}: no such theme", hint=f"choose one of {', '.join(names)}")


def _run_in_tui(run: Run, theme: str | None, settings: Any) -> Any:
    """Open the supervision TUI on a live run. Leaving the TUI while the run is going presses the kill switch."""
    from ..ocr import ScreenReader
    from ..tui.app import graphics_widget
    from ..tui.run_screen import supervisor_app
    from ..tui.signals import Signals
    from ..tui.source import LiveRun

    supervisor, handshake = run.supervisor, run.handshake
    assert handshake is not None, "a TUI run decides through the handshake"
    app = supervisor_app(
        LiveRun(supervisor, handshake),
        theme=theme or settings.theme,
        theme_dirs=(settings.themes_dir,),
        graphics=graphics_widget(),
        signals=Signals(bell=settings.bell, notify=settings.notify),
        screen_reader=ScreenReader(),
        guard_s=settings.decision_guard_s,
    )
    # App.exit only posts a message: safe from the signal thread, and it never waits on a loop that may be
    # stopping already (call_from_thread would, for ever, if the terminal went away first)
    with KillOnSignal(supervisor, then=app.exit):
        app.run()
    if supervisor.result is None:
        # the user left (ctrl+q) before the end: that is a kill
        supervisor.kill(by="human (left the TUI)")
    result = supervisor.wait(60)
    if result is None:
        raise CommandError("the run did not end within 60 s after the TUI closed", path=run.path)
    return result


class KillOnSignal(OnSignal):
    """While in effect, SIGINT, SIGTERM and SIGHUP press the run's kill switch (pressing it again is harmless):
    the run ends ``killed`` and seals itself; then ``then`` (the TUI's exit: without it Textual would die of
    SIGTERM and leave the run unsealed)."""

    def __init__(self, supervisor: Any, then: Any = None) -> None:
        super().__init__(tui=then is not None)
        self.supervisor = supervisor
        self.then = then

    def act(self, signum: int, count: int) -> None:
        self.supervisor.kill(by="signal " + signal.Signals(signum).name)
        if self.then is not None:
            with contextlib.suppress(Exception):
                # the App may be gone already: the run's end does not wait
                self.then()

    def sealed(self, timeout: float) -> bool:
        return bool(self.supervisor.finished.wait(timeout))


def _run_with_interrupt(run: Run) -> Any:
    """Run in a worker thread; Ctrl-C (SIGINT), SIGTERM or SIGHUP (the terminal went away) press the kill switch."""
    supervisor = run.supervisor
    box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: box.setdefault("result", supervisor.run()), name="cua-run", daemon=True)
    with KillOnSignal(supervisor):
        worker.start()
        while worker.is_alive():
            worker.join(0.2)
    if "result" not in box:
        # run() ends every run itself; this is the last line of defence
        raise CommandError("the run ended without a result", path=run.path, hint="see its audit.jsonl")
    return box["result"]
