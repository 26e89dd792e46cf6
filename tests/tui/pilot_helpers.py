"""Pilot helpers shared by the TUI tests: polled waits with generous deadlines, and what widgets show."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import App
from textual.command import Command, CommandList, CommandPalette
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Footer, Static

from cua_tui.build import HANDSHAKE, Run, RunOptions, build_run
from cua_tui.core.guard import DecisionGuard
from cua_tui.desktops.sim import SimDesktop
from cua_tui.tui.app import CuaApp
from cua_tui.tui.fleet_screen import FleetScreen
from cua_tui.tui.replay import ReplayScreen
from cua_tui.tui.run_screen import RunScreen, supervisor_app
from cua_tui.tui.source import LiveRun

# Deadlines for things that happen "soon": generous, because a loaded machine (a full suite next to other
# work, a busy disk: every run fsyncs run.json, screenshots and its sealed log) is many times slower than an
# idle one. Waits poll, so a fast machine never waits longer than it takes.
SOON = 30.0


async def until(pilot: Pilot[Any], condition: Callable[[], bool], what: str, timeout: float = SOON) -> float:
    """Let the app run until ``condition`` holds (polling); return how long that took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(0.02)
    return time.monotonic() - started


def quick_clock() -> float:
    """The input guard's clock in tests about something else: ten times as fast (its 1 s lasts 0.1 s). The
    guard's own tests use the real clock."""
    return time.monotonic() * 10


def run_screen(app: App[Any]) -> RunScreen:
    """The app's first screen, a run's view (live or recorded), typed for the tests that reach into it."""
    assert isinstance(app, CuaApp) and isinstance(app.main, RunScreen), "not a run's app"
    return app.main


def fleet_screen(app: App[Any]) -> FleetScreen:
    """The app's first screen, a fleet's, typed for the tests that reach into it."""
    assert isinstance(app, CuaApp) and isinstance(app.main, FleetScreen), "not a fleet's app"
    return app.main


def replay_screen(app: App[Any]) -> ReplayScreen:
    """The app's first screen, a replay's, typed for the tests that reach into it."""
    assert isinstance(app, CuaApp) and isinstance(app.main, ReplayScreen), "not a replay's app"
    return app.main


def guard_of(app: App[Any]) -> DecisionGuard:
    """The input guard of the decision the app's y / a / n would answer (a fleet run's view has its own)."""
    assert isinstance(app, CuaApp)
    view = app.view_screen
    guard = view.guard_for() if view is not None else None
    assert guard is not None, "no decision view"
    return guard


async def answer(pilot: Pilot[Any], *keys: str) -> None:
    """Press ``keys`` once the decision on screen has been there for its input guard: y, a and n count only
    then (pressed earlier they are ignored, and the app says so)."""
    guard = guard_of(pilot.app)
    await until(pilot, guard.passed, "the decision's input guard to pass")
    await pilot.press(*keys)


async def until_ended(pilot: Pilot[Any], app: CuaApp, timeout: float = SOON) -> float:
    main = run_screen(app)
    took = await until(pilot, lambda: not main.running and bool(main.final_status), "the end of the run", timeout)
    await pilot.pause()
    return took


def plain(widget: Static) -> str:
    """The text a Static was given (its Rich Text is built by the app, never parsed as markup)."""
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def drawn(widget: Widget) -> str:
    """What the widget actually draws on the terminal, line by line."""
    width, height = widget.size
    lines = widget.render_lines(Region(0, 0, width, height))
    return "\n".join("".join(segment.text for segment in line) for line in lines)


def footer_actions(app: App[Any]) -> set[str]:
    """Actions the footer shows as applicable now."""
    actions = set()
    for key in app.query_one(Footer).query("FooterKey"):
        # FooterKey is private to Textual: found by name, the action it runs read (and checked) by name
        action = getattr(key, "action", None)
        assert isinstance(action, str), key
        if not key.has_class("-disabled"):
            actions.add(action)
    return actions


def sim_run(tmp_path: Path, turns: list[dict[str, Any]], *, task: str = "test task", **options: Any) -> Run:
    """A run of scripted ``turns`` on the sim desktop, decided through the handshake (the TUI's way),
    tracked so that it cannot outlive its test. ``options``: more RunOptions (regions, a policy file, a
    decision deadline)."""
    from live_guard import track

    run = build_run(
        RunOptions(
            task=task,
            backend="sim",
            agent=None,
            script={"turns": turns, "final_text": "done"},
            runs_dir=tmp_path / "runs",
            decisions=HANDSHAKE,
            fsync=False,
            desktop=SimDesktop(),
            **options,
        )
    )
    assert run.handshake is not None
    track(run.supervisor)
    return run


def live_app(run: Run) -> CuaApp:
    """The supervision TUI on a live run built by ``sim_run``."""
    assert run.handshake is not None
    return supervisor_app(LiveRun(run.supervisor, run.handshake), guard_clock=quick_clock)


def possible(app: App[Any], action: str) -> bool | None:
    """Whether ``action`` is possible now, asked of whoever binds it: the App (the keys every view shares,
    done by the view they act on) or the screen shown (its own keys)."""
    from cua_tui.tui.app import VIEW_ACTIONS

    return app.check_action(action, ()) if action in VIEW_ACTIONS else app.screen.check_action(action, ())


async def palette_titles(pilot: Pilot[Any], app: App[Any], query: str = "") -> list[str]:
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the command palette")
    if query:
        await pilot.press(*query)
    palette = app.screen

    def titles() -> list[str]:
        found = []
        for option in palette.query_one(CommandList).options:
            assert isinstance(option, Command), option
            found.append(str(option.hit.text))
        return found

    await until(pilot, lambda: bool(titles()), "the palette's entries")
    await pilot.pause(0.3)  # every provider answered
    return titles()
