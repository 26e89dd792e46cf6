"""A few lines of rich Text that change often (the fleet's header, the queue's and the run's detail lines),
drawn through the line API.

A Static converts its Text to Textual's Content and lays it out again on every update, about a
millisecond for two lines; under a busy fleet these lines change on most refreshes. This widget renders
the Text once per change (no wrapping: each line is cut with an ellipsis at the widget's width) and
repaints only the lines whose content changed. Its height is the CSS's (one line unless set). The Text
is the caller's, built from ``visible`` text: nothing is parsed as markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget


class TextLines(Widget):
    """Shows ``text`` (``\\n`` starts a line), each line cut to the width (or wrapped, with ``wrap``); lines
    past the widget's height are not shown."""

    DEFAULT_CSS = """
    TextLines {
        height: 1;
    }
    """

    def __init__(self, text: Text | None = None, *, wrap: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        # each line wrapped at the width (words; a longer word folded) instead of cut
        self.wrap = wrap
        self._text = text or Text()
        self._lines: list[Strip] | None = None  # rendered for _width
        self._width = -1

    @property
    def text(self) -> Text:
        return self._text

    @property
    def plain(self) -> str:
        return self._text.plain

    def update(self, text: Text) -> None:
        """Show ``text``; repaints only the lines that differ from what is shown."""
        if text == self._text:
            return
        old = self._lines
        self._text = text
        self._lines = None
        if old is None or self._width != self.content_region.width:
            self.refresh()
            return
        new = self._lines_for(self._width)
        self._lines = new
        for y in range(max(len(old), len(new))):
            if y >= len(old) or y >= len(new) or old[y] != new[y]:
                self.refresh(Region(0, y, self._width, 1))

    def _lines_for(self, width: int) -> list[Strip]:
        console = self.app.console
        strips = []
        for paragraph in self._text.split("\n", allow_blank=True):
            lines = paragraph.wrap(console, max(width, 1), overflow="fold") if self.wrap else [paragraph]
            for line in lines:
                line.no_wrap = True
                line.end = ""
                line.truncate(width, overflow="ellipsis")
                strips.append(Strip(list(line.render(console))))
        return strips

    def render_line(self, y: int) -> Strip:
        width = self.content_region.width
        if self._lines is None or width != self._width:
            self._width = width
            self._lines = self._lines_for(width)
        base = self.rich_style
        if y >= len(self._lines):
            return Strip.blank(width, base)
        return self._lines[y].crop_extend(0, width, base).apply_style(base)

    def on_resize(self) -> None:
        self._lines = None
