"""Typed text with nothing hidden in it, in the TUI (issue #34, point 3): the 18 characters that drew as
``hello`` show every hidden one as a stand-in in the decision panel, the batch, the audit pane and the
editor, and each stand-in is drawn apart (reverse video against its text), so the six characters ``\\u200b``
a model typed never look like a real U+200B. Live runs on the sim desktop through the TUI's handshake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import answer, live_app, run_screen, sim_run, until
from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Input

from cua_tui.core.text import hidden, visible
from cua_tui.tui.audit_list import AuditList
from cua_tui.tui.batch import BatchPane

SIZE = (200, 50)
FIELD = {"type": "click", "button": "left", "x": 250, "y": 182}
TAGS = "".join(chr(0xE0000 + ord(c)) for c in "evil")
HELLO = "h\u200be\u00adl\u034fl\ufe0fo" + TAGS + "\u2028\u206a\u3164\uffa0\ufff9"  # 18 characters
TEXT = f"{HELLO}|\\u200b|\u200b"  # and the six characters \u200b, then a real U+200B


def segments(widget: Widget) -> list[Segment]:
    width, height = widget.outer_size
    return [segment for line in widget.render_lines(Region(0, 0, width, height)) for segment in line]


def drawn(widget: Widget) -> str:
    return "".join(segment.text for segment in segments(widget))


def flat(widget: Widget) -> str:
    """What the widget draws without white space and box-drawing characters: wrapped text reads whole."""
    return "".join(c for c in drawn(widget) if not c.isspace() and not "\u2500" <= c <= "\u259f")


def look(segment: Segment) -> tuple[Any, ...]:
    """How a segment is drawn: its colours as the terminal gets them (reverse video swaps them) and reverse."""
    style = segment.style
    assert style is not None
    return (style.color, style.bgcolor) if not style.reverse else (style.bgcolor, style.color)


def drawn_apart(widget: Widget, stand_in: str, text: str) -> bool:
    """On each line that draws both, the segments that draw ``stand_in`` alone look unlike those that draw
    ``text`` (the same characters, typed); there is such a line."""
    width, height = widget.outer_size
    both = 0
    for line in widget.render_lines(Region(0, 0, width, height)):
        stand_ins = {look(s) for s in line if s.text == stand_in}
        texts = {look(s) for s in line if text in s.text}
        if stand_ins and texts:
            both += 1
            if stand_ins & texts:
                return False
    return both > 0


def nothing_hidden(widget: Widget) -> None:
    assert not any(hidden(c) for c in drawn(widget) if c not in " \n")


async def test_the_eighteen_characters_that_drew_as_hello_are_shown_whole(tmp_path: Path) -> None:
    run = sim_run(tmp_path, [{"text": TEXT, "actions": [FIELD, {"type": "type", "text": TEXT}]}])
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        track(run.supervisor)
        await until(pilot, lambda: run_screen(app).pending is not None, "the typing decision")
        screen: Any = run_screen(app)
        panel = screen.panel
        shown = visible(TEXT)
        await until(pilot, lambda: shown in flat(panel), "the typed text in the panel")
        assert f"type{len(TEXT)}characters" in flat(panel)
        nothing_hidden(panel)
        # the stand-ins drawn apart from the text: a real U+200B is not the six characters typed
        assert drawn_apart(panel, "\\u200b", "|\\u200b|")
        # the batch (the model's words) and the audit pane
        batch = app.query_one(BatchPane)
        nothing_hidden(batch)
        assert drawn_apart(batch.query_one(".model-text"), "\\u200b", "|\\u200b|")
        nothing_hidden(app.query_one(AuditList))

        # the editor: its field writes each hidden character as an escape, reversed; a backslash as \\
        await answer(pilot, "e")
        await until(pilot, lambda: screen.editor is not None, "the editor")
        await pilot.pause()
        field = screen.editor.query_one(Input)
        assert field.value.startswith("h\\u200be\\xadl\\u034fl\\ufe0fo\\U000e0065\\U000e0076")
        assert field.value.endswith("|\\\\u200b|\\u200b")
        nothing_hidden(screen.editor)
        assert drawn_apart(field, "\\U000e0065", "o")
        # the typed \\u200b (a backslash, then text) stays plain: the field marks only what escapes
        spans = field.highlighter(Text(field.value)).spans if field.highlighter else []
        marked = [field.value[span.start : span.end] for span in spans]
        assert len(marked) == 13 + 1 and marked[-2:] == ["\\ufff9", "\\u200b"]


async def test_the_goal_bar_and_the_fleets_rows_draw_stand_ins_apart(tmp_path: Path) -> None:
    """The task (the goal bar) and a fleet task's name (the runs table, the queue) are untrusted too: their
    hidden characters are stand-ins, drawn apart from the same characters typed."""
    from functools import partial

    from fleet_cases import opts
    from pilot_helpers import fleet_screen

    from cua_tui.config import Settings
    from cua_tui.fleet_runner import Fleet, FleetTask
    from cua_tui.tui.app import CuaApp
    from cua_tui.tui.fleet_screen import FleetScreen
    from cua_tui.tui.goal import GoalBar
    from cua_tui.tui.row_table import RowTable

    task = "pay|\\u200b|\u200b"
    run = sim_run(tmp_path, [{"actions": [FIELD, {"type": "type", "text": "x"}]}], task=task)
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: run_screen(app).pending is not None, "the decision")
        goal = app.query_one(GoalBar)
        nothing_hidden(goal)
        assert drawn_apart(goal, "\\u200b", "|\\u200b|")
        run.supervisor.kill()

    settings = Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")})
    fleet = Fleet([FleetTask(task, opts(settings))], runs_dir=tmp_path / "fleet", concurrency=1)
    fleet_app = CuaApp(partial(FleetScreen, fleet=fleet))
    main = fleet_screen(fleet_app)
    async with fleet_app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.selected is not None, "the fleet's request")
        await pilot.pause()
        for table in fleet_app.query(RowTable):
            nothing_hidden(table)
        # the runs table has room for the name: the stand-in is drawn apart from the six characters typed
        assert drawn_apart(fleet_app.query_one("#runs", RowTable), "\\u200b", "|\\u200b|")
        fleet.kill_all()
        await until(pilot, lambda: fleet.done, "the fleet to end")
