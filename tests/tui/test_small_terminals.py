"""Small terminals keep the decision (issue 22, point 7): at 100x30 and 80x24 the panel shows the action,
the target's name, the reason, the model's words and the keys, all inside the panel as drawn; every dialog
(a rejection's reason, the grants, the help) fits the screen with its way out in view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from live_guard import no_run_outlives_its_test  # noqa: F401 (an autouse fixture)
from pilot_helpers import answer, drawn, live_app, run_screen, sim_run, until
from textual.geometry import Region, Size
from textual.widgets import Static

from cua_tui.tui.decision_panel import DecisionPanel
from cua_tui.tui.dialogs import GrantsScreen, RejectReason

FIELD = (250, 182)
MODEL_SAYS = "I will type the phrase into the field."


def turns() -> list[dict[str, Any]]:
    return [
        {
            "text": MODEL_SAYS,
            "actions": [
                {"type": "click", "button": "left", "x": FIELD[0], "y": FIELD[1]},
                {"type": "type", "text": "cua-tui verified"},
            ],
        }
    ]


def whole(widget: Any) -> str:
    """What a widget draws, its border included (pilot_helpers.drawn shows the content area only)."""
    lines = widget.render_lines(Region(0, 0, widget.outer_size.width, widget.outer_size.height))
    return "\n".join("".join(segment.text for segment in line) for line in lines)


def within(region: Region, size: Size) -> bool:
    return region.x >= 0 and region.y >= 0 and region.right <= size.width and region.bottom <= size.height


@pytest.mark.parametrize("size", [(100, 30), (80, 24)])
async def test_the_panel_keeps_action_reason_model_and_keys(tmp_path: Path, size: tuple[int, int]) -> None:
    run = sim_run(tmp_path, turns())
    app = live_app(run)
    main = run_screen(app)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: main.pending is not None, "the typing decision")
        await pilot.pause(0.3)
        panel = app.query_one(DecisionPanel)
        assert panel.compact
        shown = whole(panel)  # what the terminal shows of it, borders and all, cut where the panel is cut
        for words in ("y approve", "n reject", "k kill switch", "action  type 16 characters", "cua-tui verified"):
            assert words in shown, shown
        assert "why" in shown and "model   I will type the phrase" in shown, shown
        assert shown.rstrip().splitlines()[-1].startswith("┗"), shown  # its bottom edge: nothing cut off below
        assert "field." in shown, shown  # the model's words to their end
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert not panel.compact and "DECISION NEEDED" in whole(panel)
        run.supervisor.kill(by="test")


@pytest.mark.parametrize("size", [(100, 30), (80, 24)])
async def test_every_dialog_fits_with_its_way_out_in_view(tmp_path: Path, size: tuple[int, int]) -> None:
    run = sim_run(tmp_path, turns())
    app = live_app(run)
    main = run_screen(app)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: main.pending is not None, "the typing decision")
        await answer(pilot, "n")  # n counts once the input guard has passed
        await until(pilot, lambda: isinstance(app.screen, RejectReason), "the reason dialog")
        box = app.screen.query_one("#reason-box")
        assert within(box.region, app.size), (box.region, app.size)
        hint = box.query_one(Static)
        assert within(hint.region, app.size) and "Esc without" in " ".join(drawn(hint).split()), drawn(hint)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, RejectReason), "the dialog closed")
        app.push_screen(GrantsScreen([]))  # g opens it where a grant is in force: the box is the same
        await until(pilot, lambda: isinstance(app.screen, GrantsScreen), "the grants dialog")
        await pilot.pause()
        box = app.screen.query_one("#grants-box")
        assert within(box.region, app.size), (box.region, app.size)
        await pilot.press("escape")
        await pilot.press("question_mark")
        await pilot.pause()
        body = app.screen.query_one("#help-body")
        assert within(body.region, app.size), (body.region, app.size)
        run.supervisor.kill(by="test")
