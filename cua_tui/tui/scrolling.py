"""The scrollable size of a line-API view, changed without a new layout of the screen.

``Widget.virtual_size`` is a layout reactive: set as one, each row or event added to a table or a log
lays out and repaints the whole screen (measured in the fleet TUI: most of its UI-thread time per refresh;
in the single-run TUI: every audit event). A view whose own size does not depend on its content only needs
its scroll bars told, which is what this does; a scroll bar appearing or going still lays out, as it must.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.scroll_view import ScrollView


def set_virtual_size(view: ScrollView, size: Size) -> None:
    """Give ``view`` the scrollable ``size``; its scroll position is brought back within it."""
    if size == view.virtual_size:
        return
    view.set_reactive(ScrollView.virtual_size, size)
    # the scroll bars' sizes (and showing or hiding one), as a layout would
    view._scroll_update(size)
    if view.scroll_offset.y > view.max_scroll_y:
        view.scroll_to(y=view.max_scroll_y, animate=False, immediate=True)
