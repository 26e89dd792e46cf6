"""The desktop pane: the latest screenshot, the pending action's target marked, optional zoom."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from .frames import Rendered


class DesktopView(Widget):
    """Shows pre-rendered half-block strips; the App's worker produces them from screenshots."""

    can_focus = False

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rendered: Rendered | None = None
        self.placeholder = "waiting for the first screenshot…"

    def show(self, rendered: Rendered) -> None:
        """Swap in a finished frame (UI thread; cheap)."""
        self.rendered = rendered
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        rendered = self.rendered
        if rendered is None:
            if y == self.size.height // 2:
                text = self.placeholder[:width].center(width)
                return Strip([Segment(text, Style(dim=True))], width)
            return Strip.blank(width, self.rich_style)
        top = max(0, (self.size.height - len(rendered.strips)) // 2)
        index = y - top
        if 0 <= index < len(rendered.strips):
            strip = rendered.strips[index]
            left = max(0, (width - rendered.image.width) // 2)
            if left:
                strip = Strip.join([Strip.blank(left, self.rich_style), strip])
            return strip.crop_extend(0, width, self.rich_style)
        return Strip.blank(width, self.rich_style)
