"""The TUI's frame worker refuses oversized screenshots in a live run the way every reader does (issue 10,
point 7): a desktop whose screenshots are forged PNG headers claiming 40,000 x 40,000 pixels (what a
hostile remote sandbox could send) gives a one-line notification and a pane that says so, never a
decode, a crash or a hang; the next good screenshot is shown again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hostile_runs import BOMB, forged_png  # tests/ (on the path with its conftest): the corpus's forger
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import run_screen, until, until_ended

from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.core.ports import Frame
from cua_tui.desktops.sim import SimDesktop
from cua_tui.tui.app import CuaApp
from cua_tui.tui.desktop_view import DesktopView
from cua_tui.tui.run_screen import supervisor_app
from cua_tui.tui.source import LiveRun

pytestmark = pytest.mark.timeout(60)
SIZE = (160, 50)
TURNS = [{"actions": [{"type": "click", "x": 250, "y": 182}, {"type": "click", "x": 550, "y": 182}]}]
REFUSED = f"the PNG claims {BOMB[0]} x {BOMB[1]} pixels, more than a screen has"


class BombDesktop(SimDesktop):
    """The sim desktop whose first ``bombs`` screenshots are a forged header claiming 40,000 x 40,000
    pixels (recorded at the screen's own size, as a lying desktop would)."""

    def __init__(self, bombs: int) -> None:
        super().__init__()
        self.bombs = bombs

    def _render(self) -> Frame:
        if self.bombs > 0:
            self.bombs -= 1
            return Frame(forged_png(*BOMB), self.size.width, self.size.height)
        return super()._render()


class LargeDesktop(SimDesktop):
    """The sim desktop whose screenshots claim twice its screen each way (within the global cap: only the
    run's own screen size gives them away), recorded at the screen's size, as a lying desktop would."""

    def _render(self) -> Frame:
        return Frame(forged_png(self.size.width * 2, self.size.height * 2), self.size.width, self.size.height)


def live_app(tmp_path: Path, desktop: SimDesktop, **kwargs: Any) -> CuaApp:
    run = build_run(
        RunOptions(
            task="bombs",
            backend="sim",
            agent=None,
            script={"turns": TURNS, "final_text": "done"},
            runs_dir=tmp_path / "runs",
            decisions=HANDSHAKE,
            fsync=False,
            desktop=desktop,
        )
    )
    assert run.handshake is not None
    track(run.supervisor)
    return supervisor_app(LiveRun(run.supervisor, run.handshake), **kwargs)


def desktop_notes(app: CuaApp) -> list[str]:
    return [str(n.message) for n in app._notifications if n.title == "desktop"]


async def test_a_bomb_screenshot_is_one_notification_and_a_pane_that_says_so(tmp_path: Path, opened: list[Any]) -> None:
    app = live_app(tmp_path, BombDesktop(bombs=1_000))
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_ended(pilot, app)
        view = app.query_one(DesktopView)
        await until(pilot, lambda: view.placeholder != "waiting for the first screenshot…", "the refusal")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert desktop_notes(app) == [f"screenshot not shown: {REFUSED}"]  # once, for every refused frame
        assert view.rendered is None and view.placeholder == f"screenshot not shown: {REFUSED}"
        assert not any(n.title == "run failed" for n in app._notifications)
        assert main.final_status  # the run went on to its end; the TUI did not stop it
        assert opened == []  # refused from the header: never handed to the decoder
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "the app to exit")


async def test_the_next_good_screenshot_is_shown_again(tmp_path: Path) -> None:
    app = live_app(tmp_path, BombDesktop(bombs=1))  # the first screenshot only
    async with app.run_test(size=SIZE) as pilot:
        await until_ended(pilot, app)
        view = app.query_one(DesktopView)
        await until(pilot, lambda: view.rendered is not None, "a good frame")
        assert desktop_notes(app) in ([], [f"screenshot not shown: {REFUSED}"])  # the bomb may be superseded
        assert view.refused is None
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "the app to exit")


async def test_a_screenshot_larger_than_the_run_screen_is_refused_and_never_read(
    tmp_path: Path, opened: list[Any]
) -> None:
    """Issue 20, point 3: the live pane and the screen's text (t) hold each screenshot to the run's own
    screen (1024 x 720, as its run_started records it), not only to the global cap."""
    from pilot_helpers import plain
    from textual.widgets import Static

    from cua_tui.ocr import ScreenReader
    from cua_tui.tui.screen_text import ScreenTextScreen

    refused = "the PNG claims 2048 x 1440 pixels, more than the run's screen (1024 x 720)"
    app = live_app(tmp_path, LargeDesktop(), screen_reader=ScreenReader())
    async with app.run_test(size=SIZE) as pilot:
        await until_ended(pilot, app)
        view = app.query_one(DesktopView)
        await until(pilot, lambda: view.placeholder == f"screenshot not shown: {refused}", "the refusal")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert desktop_notes(app) == [f"screenshot not shown: {refused}"] and view.rendered is None
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ScreenTextScreen), "the screen-text view")
        await until(pilot, lambda: not app.reading.busy, "the reading to end")
        assert plain(app.screen.query_one("#screen-text-body", Static)) == f"screenshot not read: {refused}"
        await pilot.press("escape")
        assert opened == []  # refused from the header: never handed to the decoder, nor to Tesseract
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "the app to exit")
