"""A table of keyed rows drawn through the line API, where a change redraws only the rows that changed (the
fleet's runs and queue change many times a second: Textual's DataTable repaints the whole table on any cell
update). Rows keep their cursor by key; cells are Rich Text, never markup. docs/development.md, "The TUI"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .keys import TABLE, bindings
from .scrolling import set_virtual_size

Cells = tuple[Text, ...]
GAP = 1  # blank cells between two columns
CELL_CACHE = 4096  # rendered cells kept (by width and content)


class RowTable(ScrollView, can_focus=True):
    """Keyed rows under a header. ``columns``: (label, width) each. Up / down / page up / page down / home /
    end (and a click) move the cursor (``Highlighted``); Enter, a second click on the same row or a
    double click choose it (``Selected``)."""

    DEFAULT_CSS = """
    RowTable {
        background: $surface;
        color: $foreground;
        overflow-y: auto;
        overflow-x: auto;
        height: auto;
        max-height: 100%;
    }
    RowTable > .row-table--header {
        text-style: bold;
        color: $text-muted;
    }
    RowTable > .row-table--cursor {
        background: $accent 30%;
    }
    RowTable:focus > .row-table--cursor {
        background: $accent 70%;
        text-style: bold;
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"row-table--header", "row-table--cursor"}
    # up, down, enter, a page up and down (10 rows), the first and last (tui/keys.toml)
    BINDINGS: ClassVar[list[BindingType]] = bindings(TABLE)

    class RowMessage(Message):
        """About the row ``key`` at ``index`` of ``table``."""

        def __init__(self, table: RowTable, index: int, key: str) -> None:
            super().__init__()
            self.table, self.index, self.key = table, index, key

        @property
        def control(self) -> RowTable:
            return self.table

    class Highlighted(RowMessage):
        """The cursor is on another row than before."""

    class Selected(RowMessage):
        """The row was chosen (Enter, a second click, a double click)."""

    def __init__(self, columns: Sequence[tuple[str, int]], *, flex: str | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns: tuple[tuple[str, int], ...] = tuple(columns)
        self.labels = tuple(label for label, _ in self.columns)
        self._column_of = {label: i for i, label in enumerate(self.labels)}
        if flex is not None and flex not in self._column_of:
            raise ValueError(f"no column {flex!r} to widen")
        self._flex = self._column_of[flex] if flex is not None else None
        # as drawn: the flex column takes what is left
        self._widths = tuple(width for _, width in self.columns)
        self._width = self._total(self._widths)
        self._keys: list[str] = []
        self._index: dict[str, int] = {}
        self._cells: dict[str, Cells] = {}
        # each row's rendered line (no cursor), until its cells change
        self._strips: dict[str, Strip] = {}
        self._header: Strip | None = None
        self._cell_cache: LRUCache[tuple[object, ...], list[Segment]] = LRUCache(CELL_CACHE)
        self._cursor = 0
        self._cursor_key: str | None = None  # the key Highlighted was last posted for
        # the row the last click landed on: a second click on it chooses it; a first click only moves
        # the cursor, even onto the row the cursor was already on
        self._clicked: str | None = None
        # the widget's style and the cursor's, as of the current repaint
        self._base = Style()
        self._cursor_style = Style()
        self.virtual_size = Size(self._width, 1)

    # ---------------------------------------------------------------------------------------------
    # The rows
    # ----------------------------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self._keys)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self._keys)

    @property
    def cursor_row(self) -> int:
        return self._cursor

    @property
    def cursor_key(self) -> str | None:
        return self._keys[self._cursor] if self._keys else None

    def row_index(self, key: str) -> int | None:
        return self._index.get(key)

    def get_row(self, key: str) -> Cells:
        return self._cells[key]

    def get_row_at(self, index: int) -> Cells:
        return self._cells[self._keys[index]]

    def set_rows(self, rows: Sequence[tuple[str, Sequence[Text]]]) -> None:
        """Every row, in order (keys unique). Only the lines in view whose row or cells changed are redrawn;
        the cursor stays on its row when that row is still here, else keeps its place."""
        before, was_cursor = self._keys, self._cursor
        keys = [key for key, _ in rows]
        if len(set(keys)) != len(keys):
            raise ValueError("row keys must be unique")
        held = self.cursor_key
        cells = {key: self._cell_tuple(row) for key, row in rows}
        for kept in list(self._strips):
            if kept not in cells or cells[kept] != self._cells.get(kept):
                del self._strips[kept]
        self._keys, self._cells = keys, cells
        self._index = {key: i for i, key in enumerate(keys)}
        if held is not None and held in self._index:
            self._cursor = self._index[held]
        else:
            self._cursor = min(self._cursor, max(len(keys) - 1, 0))
        if len(keys) != len(before):
            self._resize()
        top = self.scroll_offset.y
        for index in range(top, top + max(self.size.height - 1, 0)):
            key = keys[index] if index < len(keys) else None
            old = before[index] if index < len(before) else None
            if key != old or (key is not None and key not in self._strips):
                self._refresh_row(index)
        if self._cursor != was_cursor:
            self._refresh_row(was_cursor)
            self._refresh_row(self._cursor)
        self._told_cursor()

    def update_row(self, key: str, cells: Sequence[Text]) -> None:
        """One row's cells (a key not in the table raises KeyError); redrawn when they changed."""
        index = self._index[key]
        new = self._cell_tuple(cells)
        if new != self._cells[key]:
            self._cells[key] = new
            self._strips.pop(key, None)
            self._refresh_row(index)

    def update_cell(self, key: str, column: str, cell: Text) -> None:
        row = list(self._cells[key])
        row[self._column_of[column]] = cell
        self.update_row(key, row)

    @staticmethod
    def _total(widths: Sequence[int]) -> int:
        return sum(widths) + GAP * len(widths) + 1

    @property
    def widths(self) -> tuple[int, ...]:
        """Each column's width as drawn."""
        return self._widths

    def _fit(self, width: int) -> None:
        """The flex column widened (or narrowed, down to its own width) so the columns fill ``width``."""
        if self._flex is None:
            return
        widths = [w for _, w in self.columns]
        widths[self._flex] = max(widths[self._flex], width - self._total(widths) + widths[self._flex])
        if tuple(widths) != self._widths:
            self._widths = tuple(widths)
            self._width = self._total(widths)
            self._header = None
            self._strips.clear()
            self._resize()
            self.refresh()

    def on_resize(self) -> None:
        self._fit(self.scrollable_content_region.width)

    def _cell_tuple(self, cells: Sequence[Text]) -> Cells:
        if len(cells) != len(self.columns):
            raise ValueError(f"a row has {len(self.columns)} cells, not {len(cells)}")
        return tuple(cells)

    def _resize(self) -> None:
        set_virtual_size(self, Size(self._width, len(self._keys) + 1))

    def _refresh_row(self, index: int) -> None:
        """Repaint the one line of row ``index`` if it is in view."""
        y = index + 1 - self.scroll_offset.y
        if 1 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    # ---------------------------------------------------------------------------------------------
    # Drawing
    # ----------------------------------------------------------------------------------------------
    def _render_cells(self, cells: Sequence[Text], style: Style | None = None) -> Strip:
        """One row's line: each cell cut or padded to its column, a gap after each. A cell's rendering is
        kept by its width and content, so a row where one cell changed renders that cell only."""
        segments: list[Segment] = [Segment(" ")]
        gap = Segment(" " * GAP)
        console = self.app.console
        for width, cell in zip(self._widths, cells, strict=True):
            key = (width, cell.plain, cell.style, tuple(cell.spans))
            rendered = self._cell_cache.get(key)
            if rendered is None:
                piece = cell.copy()
                piece.no_wrap = True
                piece.end = ""
                piece.truncate(width, overflow="ellipsis", pad=True)
                rendered = self._cell_cache[key] = list(piece.render(console))
            segments.extend(rendered)
            segments.append(gap)
        if style is not None:
            segments = list(Segment.apply_style(segments, post_style=style))
        return Strip(segments)

    def render_lines(self, crop: Region) -> list[Strip]:
        # The widget's styles once per repaint, not once per line (each is a walk up the DOM).
        self._base = self.rich_style
        self._cursor_style = self.get_component_rich_style("row-table--cursor")
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self._base
        if y == 0:
            if self._header is None:
                header = [Text(label) for label in self.labels]
                self._header = self._render_cells(header, self.get_component_rich_style("row-table--header"))
            return self._header.crop_extend(scroll_x, scroll_x + width, base).apply_style(base)
        index = scroll_y + y - 1
        if index >= len(self._keys):
            return Strip.blank(width, base)
        key = self._keys[index]
        strip = self._strips.get(key)
        if strip is None:
            strip = self._strips[key] = self._render_cells(self._cells[key])
        line = strip.crop_extend(scroll_x, scroll_x + width, base).apply_style(base)
        if index == self._cursor:
            line = Strip(Segment.apply_style(list(line), post_style=self._cursor_style), line.cell_length)
        return line

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._header = None
        self._strips.clear()
        self._cell_cache.clear()

    def on_focus(self) -> None:
        self._refresh_row(self._cursor)

    def on_blur(self) -> None:
        self._clicked = None
        self._refresh_row(self._cursor)

    # ---------------------------------------------------------------------------------------------
    # The cursor
    # ----------------------------------------------------------------------------------------------
    def move_cursor(self, *, row: int, scroll: bool = True) -> None:
        """Put the cursor on row ``row`` (clamped), bring it into view."""
        if not self._keys:
            return
        row = max(0, min(row, len(self._keys) - 1))
        if row != self._cursor:
            self._refresh_row(self._cursor)
            self._cursor = row
            self._refresh_row(row)
        if scroll:
            self._keep_in_view(row)
        self._told_cursor()

    def _told_cursor(self) -> None:
        key = self.cursor_key
        if key is not None and key != self._cursor_key:
            self._cursor_key = key
            self.post_message(self.Highlighted(self, self._cursor, key))
        elif key is None:
            self._cursor_key = None

    def _keep_in_view(self, index: int) -> None:
        rows = max(self.scrollable_content_region.height - 1, 1)  # the header takes a line
        top = self.scroll_offset.y
        if index < top:
            self.scroll_to(y=index, animate=False, immediate=True)
        elif index >= top + rows:
            self.scroll_to(y=index - rows + 1, animate=False, immediate=True)

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(row=self._cursor + delta)

    def action_cursor_to(self, index: int) -> None:
        if self._keys:
            self.move_cursor(row=index % len(self._keys))

    def action_select(self) -> None:
        key = self.cursor_key
        if key is not None:
            self.post_message(self.Selected(self, self._cursor, key))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:
            return
        index = self.scroll_offset.y + offset.y - 1
        if 0 <= index < len(self._keys):
            key = self._keys[index]
            again = key == self._clicked and key == self.cursor_key
            self._clicked = key
            self.focus()
            self.move_cursor(row=index)
            if again or event.chain > 1:
                self.action_select()
