"""Replay shows the screen that was there and says what a live run is doing (issue 22, points 4 and 5).

Runs are real sim runs of the real supervisor (tests/review_runs.py): step 2 types into the field and is
approved, step 3 is rejected, step 4 never runs; a run under way waits on the handshake a TUI answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pilot_helpers import plain, replay_screen, until
from review_runs import Reviewer, reviewed_run, waiting_run
from runlogs import UNSIGNED, interrupted_turn, write_run
from textual.pilot import Pilot
from textual.widgets import Static

from cua_tui.core.ports import Answer
from cua_tui.core.runlog import RunReader
from cua_tui.tui.app import CuaApp
from cua_tui.tui.desktop_view import DesktopView
from cua_tui.tui.replay import ChainState, chain_state, replay_app
from cua_tui.tui.status import StatusBar

pytestmark = pytest.mark.timeout(90)

SIZE = (160, 48)


def replay(path: Path, follow: bool = False) -> CuaApp:
    """The App as ``cua-tui replay [--follow]`` opens it."""

    def verdict() -> ChainState:
        return chain_state(path, follow=follow)

    return replay_app(RunReader(path), verdict(), follow=follow, reverify=verdict)


def panel(app: CuaApp) -> str:
    return plain(app.query_one("#step", Static))


def status(app: CuaApp) -> str:
    return plain(app.query_one(StatusBar))


def shown(app: CuaApp) -> str:
    """The SHA-256 of the screenshot the desktop pane shows."""
    main = replay_screen(app)
    screen = main.shown_screen()
    assert screen is not None
    return screen.digest


async def picture(pilot: Pilot[Any], app: CuaApp) -> bytes:
    """The pixels of the frame on screen, once the selected step's frame is there."""
    main = replay_screen(app)
    await until(pilot, lambda: main.desktop.settled, "the step's frame on screen")
    rendered = app.query_one(DesktopView).rendered
    assert rendered is not None
    return rendered.image.tobytes()


async def test_a_rejected_step_shows_the_typed_field_and_says_it_never_ran(tmp_path: Path) -> None:
    run = reviewed_run(tmp_path)
    app = replay(run.path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("right")  # step 2, the typing: after it ran
        typed = await picture(pilot, app)
        assert "screen   after it ran" in panel(app)
        await pilot.press("b")
        clicked = await picture(pilot, app)  # before it: the field still empty
        assert clicked != typed and "screen   before it ran (b flips)" in panel(app)
        await pilot.press("b", "right")  # step 3, rejected: no screen after it
        assert "STEP 3 of 4" in panel(app) and "reject by human · not that text" in panel(app)
        assert await picture(pilot, app) == typed  # the field with the text step 2 typed
        assert "not run: declined · no screen after it" in panel(app) and "after it ran" not in panel(app)
        assert shown(app) == run.typed
        await pilot.press("right")  # step 4 (its click marked on the same screen)
        assert "not run: not_executed" in panel(app) and shown(app) == run.typed


async def test_at_a_decision_replay_shows_the_screen_the_reviewer_was_shown(tmp_path: Path) -> None:
    run = reviewed_run(tmp_path, Reviewer(record=True, lagging=True))
    app = replay(run.path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("right", "b")  # step 2 before it ran: the field empty
        clicked = await picture(pilot, app)
        await pilot.press("right")  # step 3: its reviewer was shown that same screen
        assert await picture(pilot, app) == clicked
        assert shown(app) == run.clicked
        text = panel(app)
        assert "the screen its reviewer was shown at the decision" in text
        assert "shown 2.4 s before the answer" in text


async def test_follow_says_a_step_waits_for_a_decision_and_moves_on_when_answered(tmp_path: Path) -> None:
    live, thread = waiting_run(tmp_path)
    try:
        app = replay(live.path, follow=True)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "STEP 2 of 4" in panel(app), "the step awaiting its decision")
            text = panel(app)
            assert "outcome  waiting for a decision" in text and "the run ended" not in text
            assert "waiting for a decision in the live run" in status(app)
            assert "AWAITING YOUR DECISION" not in status(app) and "waiting for the model" not in status(app)
            await pilot.press("right")  # proposed in the same batch, not reached yet
            assert "not reached yet" in panel(app) and "the run ended" not in panel(app)
            assert live.handshake is not None and live.handshake.answer(Answer.APPROVE)
            step3 = lambda: "STEP 3 of 4" in panel(app) and "outcome  waiting for a decision" in panel(app)  # noqa: E731
            await until(pilot, step3, "the next step awaiting its decision")
            await pilot.press("left")
            assert "EXECUTED" in panel(app) and "approve by human" in panel(app)
    finally:
        live.supervisor.kill()
        thread.join(30)


async def test_offline_a_run_that_ended_waiting_never_awaits_the_viewer(tmp_path: Path) -> None:
    live, thread = waiting_run(tmp_path)
    try:
        app = replay(live.path)  # no --follow: the log as it stands
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("end")
            await until(pilot, lambda: "STEP 4 of 4" in panel(app), "the last step")
            assert "unknown (the run ended before it was recorded)" in panel(app)  # never reached
            await pilot.press("left", "left")
            text = panel(app)
            assert "STEP 2 of 4" in text and "none: the run was waiting for a decision when it ended" in text
            assert "the run was waiting for a decision when it ended" in status(app)
            assert "AWAITING YOUR DECISION" not in status(app)
    finally:
        live.supervisor.kill()
        thread.join(30)


async def test_a_run_that_ended_with_no_outcome_still_says_so(tmp_path: Path) -> None:
    path = write_run(tmp_path / "run", None, interrupted_turn(), signed=UNSIGNED, seal=False)
    app = replay(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("end", "left")  # turn 2, action 2: handed to the desktop, outcome unknown
        await pilot.pause()
        assert "turn 2 · action 2" in panel(app)
        assert "unknown (the run ended before it was recorded)" in panel(app)
