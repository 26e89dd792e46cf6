"""The status bar renders what the run's view says of the desktop's isolation (the view itself is tested as
plain data in tests/test_run_view.py)."""

from __future__ import annotations

from pilot_helpers import plain, run_screen, until
from recorded_run import RecordedRun
from scenes import make_app

from cua_tui.core import events as ev
from cua_tui.tui.run_screen import RunScreen
from cua_tui.tui.status import RunInfo, StatusBar


async def test_the_status_bar_says_what_isolation_the_desktop_obtained() -> None:
    """Issue 12, point 1: a sandbox without bubblewrap says so in the status bar (and a full one too)."""
    for isolation, expected in (
        ({"bubblewrap": False, "remote": "cwsandbox"}, "NO bubblewrap"),
        ({"namespaces": ["user", "pid", "net"], "uid_per_run": True}, "bubblewrap (3 namespaces, uid per run)"),
    ):
        source = RecordedRun(
            RunInfo("r", "cwsandbox", "script"), [ev.Stamped(0, "0" * 64, ev.DesktopReady("x", isolation))]
        )
        app = make_app(source)
        main = run_screen(app)
        async with app.run_test(size=(160, 20)) as pilot:
            # bound as a default: each pass of the loop waits on its own app
            def ready(main: RunScreen = main) -> bool:
                return main.view.isolation is not None

            await until(pilot, ready, "the desktop_ready event")
            await pilot.pause()
            assert expected in plain(app.query_one(StatusBar))
