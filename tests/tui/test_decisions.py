"""The richer decisions in the TUI (issue 11, point 4): ``a`` approves an action and its scope (shown in the
panel before it can be pressed), ``n`` asks for an optional reason that reaches the model, ``g`` lists the
grants in force and revokes one. Live runs made by the one builder, decisions through the handshake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import answer, plain, possible, quick_clock, run_screen, until, until_ended
from textual.widgets import Input

from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.core import events as ev
from cua_tui.core.ports import (
    HEARD,
    OutcomeStatus,
)
from cua_tui.desktops.sim import SimDesktop
from cua_tui.tui.app import CuaApp
from cua_tui.tui.decision_panel import DecisionPanel
from cua_tui.tui.dialogs import GrantsScreen, RejectReason
from cua_tui.tui.run_screen import supervisor_app
from cua_tui.tui.source import LiveRun

pytestmark = pytest.mark.timeout(60)

SIZE = (160, 50)
FIELD = (250, 182)
OTHER = (250, 400)
OPERATOR = "alice@desk-7"


def click(point: tuple[int, int]) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": point[0], "y": point[1]}


def live(tmp_path: Path, turns: list[dict[str, Any]]) -> tuple[CuaApp, list[ev.Event], Any]:
    events: list[ev.Event] = []
    run = build_run(
        RunOptions(
            backend="sim",
            agent=None,
            script={"turns": turns, "final_text": "done"},
            runs_dir=tmp_path / "runs",
            decisions=HANDSHAKE,
            operator=OPERATOR,
            listeners=(lambda s: events.append(s.event),),
            fsync=False,
            desktop=SimDesktop(),
        )
    )
    assert run.handshake is not None
    track(run.supervisor)
    return supervisor_app(LiveRun(run.supervisor, run.handshake), guard_clock=quick_clock), events, run


async def until_asked(pilot: Any, app: CuaApp, turn: int) -> None:
    main = run_screen(app)
    await until(pilot, lambda: main.pending is not None and main.pending.turn == turn, f"a decision in turn {turn}")
    await pilot.pause()


async def test_a_approves_the_scope_shown_and_a_matching_action_is_not_asked_again(tmp_path: Path) -> None:
    turns = [
        {"actions": [click(FIELD), {"type": "type", "text": "first"}]},
        {"actions": [click(FIELD), {"type": "type", "text": "second"}]},
        {"actions": [click(FIELD), {"type": "keypress", "keys": ["ENTER"]}]},  # not the grant's: asked
    ]
    app, events, _run = live(tmp_path, turns)
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app, 1)
        text = plain(app.query_one(DecisionPanel))
        offer = "approve this and all typing into the field clicked at (250, 182) until the focus leaves that field"
        assert offer in text
        await answer(pilot, "a")
        await until_asked(pilot, app, 3)  # turn 2's typing went by the grant; turn 3's Enter is asked
        assert [e.index for e in events if isinstance(e, ev.DecisionRequested)] == [1, 1]
        assert main.view.grants  # the focus stayed in the field: the grant is still in force
        assert possible(app, "grants") is True
        await pilot.press("g")
        assert isinstance(app.screen, GrantsScreen)
        await pilot.press("enter")  # revoke the selected (only) grant
        await until(pilot, lambda: not main.view.grants, "the grant revoked")
        await answer(pilot, "y")
        await until_ended(pilot, app)
    grant = next(e for e in events if isinstance(e, ev.GrantAdded))
    assert (grant.scope, grant.by) == ("typing", OPERATOR)
    assert any(isinstance(e, ev.GrantRevoked) and e.grant == grant.grant for e in events)
    by = [e.by for e in events if isinstance(e, ev.DecisionMade) and e.by != "policy"]
    assert by == ["human (TUI)", f"grant #1 (given by {OPERATOR})", "human (TUI)"]


async def test_n_with_a_reason_reaches_the_model(tmp_path: Path) -> None:
    turns = [{"actions": [click(FIELD), {"type": "type", "text": "secret"}]}]
    app, events, run = live(tmp_path, turns)
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app, 1)
        await answer(pilot, "n")
        assert isinstance(app.screen, RejectReason)
        await pilot.press(*"use the search box, k is a letter here")  # k types, it does not kill
        assert app.screen.query_one(Input).value.endswith("k is a letter here")
        assert main.running
        await pilot.press("enter")
        await until_ended(pilot, app)
    message = f"{HEARD[OutcomeStatus.DECLINED]} The reviewer said: use the search box, k is a letter here"
    assert [e.message for e in events if isinstance(e, ev.Outcome)][1] == message
    assert run.supervisor.agent.received[0][0].results[1].message == message
    decision = next(e for e in events if isinstance(e, ev.DecisionMade) and e.by == "human (TUI)")
    assert decision.operator == OPERATOR and decision.note.startswith("use the search box")


async def test_ctrl_k_kills_while_a_reason_is_typed(tmp_path: Path) -> None:
    app, _events, run = live(tmp_path, [{"actions": [click(FIELD), {"type": "type", "text": "secret"}]}])
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app, 1)
        await answer(pilot, "n", "x", "ctrl+k")
        await until_ended(pilot, app)
    assert run.supervisor.result is not None and run.supervisor.result.status == "killed"


async def test_the_goal_is_in_view_in_every_state_and_repeated_at_the_decision(tmp_path: Path) -> None:
    """Issue 11, point 1: the task, where the agent works, what it may reach and the policy, shown literally."""
    from cua_tui.tui.goal import GoalBar

    task = "Fill the form [b]now[/b] \x1b[2J please"
    events: list[ev.Event] = []
    run = build_run(
        RunOptions(
            task=task,
            backend="sim",
            agent=None,
            script={"turns": [{"actions": [click(FIELD), {"type": "type", "text": "x"}]}], "final_text": "done"},
            runs_dir=tmp_path / "runs",
            decisions=HANDSHAKE,
            allow_domains=("docs.example.org",),
            listeners=(lambda s: events.append(s.event),),
            fsync=False,
            desktop=SimDesktop(),
        )
    )
    assert run.handshake is not None
    track(run.supervisor)
    app = supervisor_app(LiveRun(run.supervisor, run.handshake), guard_clock=quick_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        goal = app.query_one(GoalBar)
        await until_asked(pilot, app, 1)
        shown = plain(goal)
        assert "Fill the form [b]now[/b] ␛[2J please" in shown and "\x1b" not in shown
        assert "docs.example.org" in shown and "policy default (" in shown and "the sim desktop" in shown
        assert "task" not in plain(app.query_one(DecisionPanel))  # compact: the goal bar above holds it
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert "task    Fill the form [b]now[/b]" in plain(app.query_one(DecisionPanel))  # repeated at the decision
        await answer(pilot, "y")
        await until_ended(pilot, app)
        # still there at the end: two lines, and two more that say the agent is a script ignoring answers
        assert "TASK" in plain(goal) and goal.region.height == 4
        assert "SCRIPTED" in plain(goal) and "It ignores your answers" in plain(goal)


async def test_a_resize_redraws_the_picture_and_the_decision_stays_in_view(tmp_path: Path) -> None:
    """Issue 11, point 3: from 160x48 to 80x24 and back, the picture is re-rendered for the pane's new size
    (never left cropped), and at 80x24 the pending row and AWAITING YOUR DECISION stay visible."""
    import time

    from cua_tui.tui.batch import BatchPane
    from cua_tui.tui.desktop_view import DesktopView
    from cua_tui.tui.status import StatusBar

    turns = [{"actions": [click(FIELD), {"type": "type", "text": "x"}, click((550, 182)), click((560, 182))]}]
    app, _events, _run = live(tmp_path, turns)
    main = run_screen(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await until_asked(pilot, app, 1)
        view = app.query_one(DesktopView)

        def fitted() -> bool:
            rendered = view.rendered
            return (
                rendered is not None
                and rendered.width == view.size.width
                and rendered.height == view.size.height
                and len(rendered.strips) <= view.size.height
                and main.desktop.settled
            )

        await until(pilot, fitted, "the picture at 160x48")
        for size in ((80, 24), (160, 48)):
            started = time.monotonic()
            await pilot.resize_terminal(*size)
            await until(pilot, fitted, f"the picture redrawn for {size}")
            # 50 ms of settling plus one conversion; the bound is a hang's, not a speed target (bench/ has those):
            # the suite's own load once stretched it to 2.3 s
            assert time.monotonic() - started < 8.0
            if size == (80, 24):
                assert "AWAITING YOUR DECISION" in plain(app.query_one(StatusBar))
                batch = app.query_one(BatchPane)
                row = batch.rows[1]
                assert row.has_class("pending")
                await pilot.pause()
                assert batch.scrollable_content_region.overlaps(row.region)  # scrolled back into view


async def test_y_does_nothing_under_a_dialog_that_hides_the_decision(tmp_path: Path) -> None:
    """A y (or n, or a) pressed while help, an event's detail or the policy covers the decision panel must not
    decide what the analyst cannot see; once the dialog is closed, it does."""
    app, events, _run = live(tmp_path, [{"actions": [click(FIELD), {"type": "type", "text": "x"}]}])
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app, 1)
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.screen is not app.screen_stack[0]  # the help screen covers the decision
        await answer(pilot, "y", "a", "n")  # the guard has passed: only the dialog stands in the way
        await pilot.pause(0.2)
        assert main.pending is not None and not [
            e for e in events if isinstance(e, ev.DecisionMade) and e.by != "policy"
        ]
        await pilot.press("escape")
        await pilot.pause()
        await answer(pilot, "y")
        await until_ended(pilot, app)
    humans = [e for e in events if isinstance(e, ev.DecisionMade) and e.by != "policy"]
    assert [(h.decision, h.by) for h in humans] == [("approve", "human (TUI)")]


async def test_a_reason_typed_right_after_n_loses_no_letter(tmp_path: Path) -> None:
    """Letters typed the moment the reason box opens, before its field has the focus (in a real terminal the
    focus comes a refresh later), belong to the reason: the box hands them to its field."""
    app, events, _run = live(tmp_path, [{"actions": [click(FIELD), {"type": "type", "text": "x"}]}])
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app, 1)
        await answer(pilot, "n")
        await until(pilot, lambda: isinstance(app.screen, RejectReason), "the reason box")
        app.screen.set_focus(None)  # the moment before the field is focused
        await pilot.press(*"use search", "enter")
        await until_ended(pilot, app)
    decision = next(e for e in events if isinstance(e, ev.DecisionMade) and e.by == "human (TUI)")
    assert decision.note == "use search"
