"""Attention in the TUI (issue 11, point 5): the bell and a desktop notification when a decision starts
waiting (each can be turned off), an alert line that stays until seen (x), routine refused requests of
the browser folded into a count in the status bar."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import answer, footer_actions, plain, quick_clock, run_screen, until, until_ended
from recorded_run import RecordedRun
from scenes import SCENES

from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.core import events as ev
from cua_tui.desktops.sim import SimDesktop
from cua_tui.tui.app import CuaApp
from cua_tui.tui.run_screen import RunScreen, supervisor_app
from cua_tui.tui.signals import AlertBar, Signals
from cua_tui.tui.source import LiveRun
from cua_tui.tui.status import RunInfo, StatusBar

pytestmark = pytest.mark.timeout(60)

SIZE = (160, 50)


class Recording(CuaApp):
    """The app, with what it would send to the terminal recorded."""

    def __init__(self, source: Any, **kwargs: Any) -> None:
        super().__init__(partial(RunScreen, source=source), **kwargs)
        self.bells = 0
        self.escapes: list[str] = []

    def bell(self) -> None:
        self.bells += 1

    def write_escape(self, sequence: str) -> None:
        self.escapes.append(sequence)


def live(tmp_path: Path, **kwargs: Any) -> Recording:
    turns = [{"actions": [{"type": "click", "x": 250, "y": 182}, {"type": "type", "text": "x"}]}]
    run = build_run(
        RunOptions(
            backend="sim",
            agent=None,
            script={"turns": turns, "final_text": "done"},
            runs_dir=tmp_path / "runs",
            decisions=HANDSHAKE,
            fsync=False,
            desktop=SimDesktop(),
        )
    )
    assert run.handshake is not None
    track(run.supervisor)
    return Recording(LiveRun(run.supervisor, run.handshake), guard_clock=quick_clock, **kwargs)


async def test_a_waiting_decision_rings_and_notifies_where_the_terminal_shows_it(tmp_path: Path) -> None:
    app = live(tmp_path, env={"TERM": "xterm-kitty"})
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.pending is not None, "the decision")
        await pilot.pause()
        assert app.bells == 1
        assert len(app.escapes) == 1 and app.escapes[0].startswith("\x1b]99;")
        assert "decision needed" in app.escapes[0] and "type 1 characters" in app.escapes[0]
        assert "\x1b]99;i=cua:d=1:p=body;turn 1, action 2" in app.escapes[0]
        await answer(pilot, "y")
        await until_ended(pilot, app)
        assert app.bells == 1  # once per decision, not once per redraw


async def test_bell_and_notification_can_be_turned_off(tmp_path: Path) -> None:
    app = live(tmp_path, env={"TERM": "xterm-kitty"}, signals=Signals(bell=False, notify=False))
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.pending is not None, "the decision")
        await pilot.pause()
        assert app.bells == 0 and app.escapes == []
        await answer(pilot, "n", "escape")
        await until_ended(pilot, app)


async def test_an_unknown_terminal_gets_the_bell_and_no_escape(tmp_path: Path) -> None:
    app = live(tmp_path, env={"TERM": "xterm-256color"})
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.pending is not None, "the decision")
        await pilot.pause()
        assert app.bells == 1 and app.escapes == []
        await pilot.press("k")
        await until_ended(pilot, app)


async def test_a_blocked_action_raises_an_alert_that_stays_until_seen() -> None:
    app = SCENES["refused"].app()
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        bar = app.query_one(AlertBar)
        await until(pilot, lambda: bar.display, "the alert line")
        await pilot.pause(0.3)
        assert bar.display and "ALERT" in plain(bar) and "BLOCKED" in plain(bar)
        # the footer recomposes after the bindings change: wait for it, as a person would
        await until(pilot, lambda: "alerts_seen" in footer_actions(app), "x in the footer")
        await pilot.pause(0.5)
        assert bar.display  # it stays: no timeout takes it away
        await pilot.press("x")
        await pilot.pause()
        assert not bar.display and main.view.attention.unseen == []
        await until(pilot, lambda: "alerts_seen" not in footer_actions(app), "x gone from the footer")
        await pilot.press("k")


def egress(seq: int, host: str, method: str = "CONNECT") -> ev.Stamped:
    event = ev.Egress(host=host, port=443, method=method, allowed=False, reason="not on the allow-list")
    return ev.Stamped(seq, f"{seq:064x}", event)


async def test_routine_refusals_are_counted_and_an_outside_host_alerts() -> None:
    hosts = ["clients2.google.com", "update.googleapis.com", "update.googleapis.com", "collect.evil.example"]
    source = RecordedRun(RunInfo("r1", "local", "openai", task="t"), [egress(i, h) for i, h in enumerate(hosts)])
    app = supervisor_app(source)
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        bar = app.query_one(AlertBar)
        await until(pilot, lambda: main.view.seq == 3, "the events")
        await pilot.pause()
        assert "egress refused: CONNECT collect.evil.example:443" in plain(bar)
        assert "google" not in plain(bar)  # the browser's own traffic never alerts
        assert "3 routine refused" in plain(app.query_one(StatusBar))
        await pilot.press("k")
