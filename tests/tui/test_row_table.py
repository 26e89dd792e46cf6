"""RowTable and TextLines: the fleet TUI's tables and detail lines, where a change repaints only what changed.

What the fleet's refresh budget rests on is checked as behaviour, not time: after a change, which lines
were rendered again (a counting subclass), and that rows added or removed ask for no new layout. Keys,
clicks and the cursor that stays on its row; markup in a cell shown literally."""

from __future__ import annotations

from typing import Any

import pytest
from pilot_helpers import drawn, until
from rich.text import Text
from textual.app import App, ComposeResult
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from cua_tui.tui.row_table import RowTable
from cua_tui.tui.text_lines import TextLines

COLUMNS = (("name", 8), ("state", 6))


class CountingTable(RowTable):
    def __init__(self, **kw: Any) -> None:
        super().__init__(COLUMNS, **kw)
        self.lines: list[int] = []  # the y of each render_line call

    def render_line(self, y: int) -> Strip:
        self.lines.append(y)
        return super().render_line(y)


class CountingLines(TextLines):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.lines: list[int] = []

    def render_line(self, y: int) -> Strip:
        self.lines.append(y)
        return super().render_line(y)


class TableApp(App[None]):
    CSS = "#t { height: 12; width: 40; } #side { height: 3; } #lines { height: 3; width: 40; }"

    def __init__(self) -> None:
        super().__init__()
        self.highlighted: list[str] = []
        self.selected: list[str] = []

    def compose(self) -> ComposeResult:
        yield CountingTable(id="t")
        yield Static("beside the table", id="side")
        yield CountingLines(id="lines")

    def on_row_table_highlighted(self, message: RowTable.Highlighted) -> None:
        self.highlighted.append(message.key)

    def on_row_table_selected(self, message: RowTable.Selected) -> None:
        self.selected.append(message.key)


def rows(n: int, state: str = "run") -> list[tuple[str, list[Text]]]:
    return [(f"r{i}", [Text(f"run {i}"), Text(state)]) for i in range(n)]


async def settled(pilot: Any) -> None:
    await pilot.pause()
    await pilot.pause()


async def test_a_change_repaints_only_the_rows_that_changed() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(CountingTable)
        table.set_rows(rows(5))
        await settled(pilot)
        assert "run 3" in drawn(table) and table.row_count == 5
        table.lines.clear()
        changed = rows(5)
        changed[3] = ("r3", [Text("run 3"), Text("WAIT")])
        table.set_rows(changed)
        await settled(pilot)
        assert table.lines == [4]  # row 3 is line 4 (the header is line 0): that line only
        assert "WAIT" in drawn(table)
        table.lines.clear()
        table.update_cell("r1", "state", Text("done"))
        table.update_row("r2", [Text("run 2"), Text("run")])  # the same cells: nothing to repaint
        await settled(pilot)
        assert table.lines == [2]
        assert table.get_row("r1")[1].plain == "done"


async def test_rows_added_or_removed_lay_out_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows added or removed change the scrollable size without asking Textual for a new layout (which
    repaints the whole screen); only a scroll bar appearing or going does, as it must."""
    layouts: list[str] = []
    refresh = Widget.refresh

    def counting(self: Widget, *regions: Any, **kw: Any) -> Any:
        if kw.get("layout"):
            layouts.append(type(self).__name__)
        return refresh(self, *regions, **kw)

    monkeypatch.setattr(Widget, "refresh", counting)
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(CountingTable)
        table.set_rows(rows(3))
        await settled(pilot)
        layouts.clear()
        table.lines.clear()
        table.set_rows(rows(4))  # one more at the end
        await settled(pilot)
        assert table.lines == [4] and layouts == []  # only the new row's line
        table.set_rows(rows(30))  # past the table's height: the scroll bar appears (that lays out)
        await settled(pilot)
        assert "CountingTable" in layouts
        layouts.clear()
        table.lines.clear()
        table.set_rows(rows(25))  # fewer, still scrolling: the lines in view show the same rows
        await settled(pilot)
        assert table.lines == [] and layouts == []
        assert table.virtual_size.height == 26  # the header and 25 rows
        table.move_cursor(row=24)  # scrolled to the end
        await settled(pilot)
        table.set_rows(rows(12))  # the scroll position comes back within the rows left
        await settled(pilot)
        assert table.scroll_offset.y <= table.max_scroll_y and "run 11" in drawn(table)
        table.set_rows(rows(2))
        await settled(pilot)
        assert table.row_count == 2 and "run 2" not in drawn(table) and "run 1" in drawn(table)


async def test_the_cursor_stays_on_its_row_and_keys_and_clicks_move_and_choose() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(CountingTable)
        table.set_rows(rows(6))
        table.focus()
        await settled(pilot)
        assert table.cursor_key == "r0" and app.highlighted == ["r0"]
        await pilot.press("down", "down")
        assert table.cursor_key == "r2"
        # rows removed above it and the rest reordered: the cursor stays on r2
        table.set_rows([rows(6)[i] for i in (5, 2, 4)])
        await settled(pilot)
        assert (table.cursor_key, table.cursor_row) == ("r2", 1)
        # its row goes: the cursor keeps its place, on the row now there
        table.set_rows([rows(6)[i] for i in (5, 4)])
        await settled(pilot)
        assert table.cursor_key == "r4"
        await pilot.press("home")
        assert table.cursor_key == "r5"
        await pilot.press("enter")
        assert app.selected == ["r5"]
        # a click moves the cursor; a second click on that row chooses it
        await pilot.click(CountingTable, offset=(3, 2))  # line 2: the second row
        await until(pilot, lambda: table.cursor_key == "r4", "the clicked row under the cursor")
        await pilot.click(CountingTable, offset=(3, 2))
        await until(pilot, lambda: app.selected == ["r5", "r4"], "the second click to choose the row")
        await pilot.click(CountingTable, offset=(3, 0))  # the header chooses nothing
        await settled(pilot)
        assert app.selected == ["r5", "r4"] and app.highlighted[-1] == "r4"
        # the cursor put on a row by other means (keys, or a screen that follows a request): one click
        # on that row only confirms the cursor; it takes a second click on it to choose it
        await pilot.press("home")
        assert table.cursor_key == "r5"
        await pilot.click(CountingTable, offset=(3, 1))
        await settled(pilot)
        assert app.selected == ["r5", "r4"] and table.cursor_key == "r5"
        await pilot.click(CountingTable, offset=(3, 1))
        await until(pilot, lambda: app.selected == ["r5", "r4", "r5"], "the second click to choose the row")


async def test_cells_are_cut_to_their_column_and_shown_literally() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(CountingTable)
        table.set_rows([("x", [Text("[red]hostile[/red]"), Text("ab")])])
        await settled(pilot)
        line = drawn(table).splitlines()[1]
        assert line.startswith(" [red]ho… ab")  # 8 cells, cut with an ellipsis, no markup applied
        assert drawn(table).splitlines()[0].split() == ["name", "state"]


async def test_text_lines_repaint_only_the_line_that_changed_and_show_text_literally() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        lines = app.query_one(CountingLines)
        lines.update(Text("first\nsecond\nthird"))
        await settled(pilot)
        assert drawn(lines).splitlines() == [s.ljust(40) for s in ("first", "second", "third")]
        lines.lines.clear()
        lines.update(Text("first\nSECOND [b]x[/b]\nthird"))
        await settled(pilot)
        assert lines.lines == [1]
        assert drawn(lines).splitlines()[1].rstrip() == "SECOND [b]x[/b]"
        lines.lines.clear()
        lines.update(Text("first\nSECOND [b]x[/b]\nthird"))  # the same text: nothing repainted
        await settled(pilot)
        assert lines.lines == []
        lines.update(Text("y" * 100))
        await settled(pilot)
        assert drawn(lines).splitlines()[0] == "y" * 39 + "…"


def test_keys_must_be_unique_and_rows_complete() -> None:
    table = RowTable(COLUMNS)
    with pytest.raises(ValueError, match="unique"):
        table.set_rows([("a", [Text("1"), Text("2")]), ("a", [Text("1"), Text("2")])])
    with pytest.raises(ValueError, match="2 cells"):
        table.set_rows([("a", [Text("1")])])


class FlexApp(App[None]):
    CSS = "RowTable { width: 40; height: 6; }"

    def compose(self) -> ComposeResult:
        yield RowTable((("name", 8), ("state", 6)), flex="name", id="flex")


async def test_the_flex_column_takes_the_width_the_others_leave_and_never_less_than_its_own() -> None:
    app = FlexApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(RowTable)
        table.set_rows([("a", [Text("a long task name that goes on"), Text("ended")])])
        await settled(pilot)
        width = table.scrollable_content_region.width
        assert table.widths == (width - 6 - 2 - 1, 6)  # a space before, a gap after each column
        assert " ".join(drawn(table).splitlines()[1].split()) == "a long task name that goes on ended"
        table.styles.width = 12  # narrower than the columns: the flex column keeps its own width
        await settled(pilot)
        assert table.widths == (8, 6) and table.virtual_size.width == 8 + 6 + 2 + 1
    with pytest.raises(ValueError, match="no column"):
        RowTable((("name", 8),), flex="nope")


async def test_wrapped_text_lines_fold_long_words_and_show_what_fits() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        lines = app.query_one(CountingLines)
        lines.wrap = True
        lines.update(
            Text("could not build the run: the openai agent needs an API key: set OPENAI_API_KEY or " + "x" * 90)
        )
        await settled(pilot)
        shown = [line.rstrip() for line in drawn(lines).splitlines()]
        assert shown[0] == "could not build the run: the openai"  # words kept whole, 40 cells
        assert shown[1].startswith("agent needs an API key: set")
        assert len(shown) == 3 and all(len(line) <= 40 for line in shown)
