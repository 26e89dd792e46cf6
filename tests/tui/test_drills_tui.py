"""A drill in the TUI (issue 41): at drill_rate 1.0 a drill is pending before each real request, shown as a
request is (its action the batch's pending row, its screen on the pane, its line in the audit pane as a
request's), answered with the same keys, revealed at once, and the real request it held back comes next;
nothing a drill shows ever reaches the desktop."""

from __future__ import annotations

from pathlib import Path

from drill_cases import SIM_FORM, make_library
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import live_app, plain, run_screen, until, until_ended

from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.desktops.sim import PHRASE, SimDesktop
from cua_tui.tui.goal import GoalBar

SIZE = (160, 48)


async def test_a_drill_is_answered_like_a_request_revealed_and_the_real_one_follows(tmp_path: Path) -> None:
    library = make_library(tmp_path / "made")
    desktop = SimDesktop()
    run = build_run(
        RunOptions(task="fill the form", backend="sim", agent=None, script=SIM_FORM, runs_dir=tmp_path / "runs",
                   decisions=HANDSHAKE, fsync=False, desktop=desktop, drill_rate=1.0, drill_seed=5,
                   drill_library=library)
    )  # fmt: skip
    track(run.supervisor)
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        screen = run_screen(app)
        await until(pilot, lambda: screen.pending is not None, "the first request (a drill)")
        drill = screen.pending
        assert drill is not None and drill.action is not None
        panel = plain(screen.panel)
        assert "DECISION NEEDED" in panel and "drill" not in panel.lower()
        assert "drills on" in plain(app.query_one(GoalBar))  # said, never which request is one
        await pilot.pause(0.3)  # past the input guard
        await pilot.press("n")
        await pilot.press("enter")  # no reason
        await until(pilot, lambda: any("That was a drill" in n.message for n in app._notifications), "the reveal")
        await until(pilot, lambda: screen.pending is not None and screen.pending is not drill, "the real request")
        real = screen.pending
        assert real is not None and real.action is not None and real.action.text == PHRASE
        await pilot.pause(0.3)
        await pilot.press("y")
        await until_ended(pilot, app)
    # the desktop got the script's own actions only, the phrase typed once
    assert desktop.app.values.get("phrase") == PHRASE and desktop.app.proofs == [PHRASE]
