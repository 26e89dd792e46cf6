"""Untrusted text as Rich draws it: ``literal`` makes a ``Text`` of ``core.text.visible`` with every stand-in
in reverse video, so that a real U+200B (``\\u200b`` reversed) never looks like the six characters a model
typed; and an Input for text that may be pasted from the page or the model.

Typed keys never carry an escape byte, but a paste does (text copied from the page, a model's reply), and
Textual's Input paints its value as it is: an ``ESC [2J`` pasted into a search box would reach the terminal.
A paste goes through ``core.text.visible``, as every run string shown elsewhere does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.highlighter import Highlighter
from rich.style import Style, StyleType
from rich.text import Text
from textual import events
from textual.binding import BindingsMap
from textual.widgets import Input

from ..core.edits import written_escapes
from ..core.text import visible, visible_parts


def escape_style(base: StyleType | None = None) -> Style:
    """The style of a stand-in drawn over ``base``: reverse video, or plain video where ``base`` is already
    reversed (typed text in the decision panel), so a stand-in always stands apart from its text."""
    reversed_base = bool(Style.parse(base).reverse) if isinstance(base, str) else bool(base and base.reverse)
    return Style(reverse=not reversed_base, bold=True)


def literal(text: object, *, limit: int | None = None, keep_newlines: bool = False, style: StyleType = "") -> Text:
    """``visible(text)`` as a ``Text`` (never markup) in ``style``, each stand-in drawn in reverse video."""
    out = Text(style=style, end="")
    stand_in = escape_style(style)
    for part, escaped in visible_parts(str(text), keep_newlines=keep_newlines, limit=limit):
        out.append(part, style=stand_in if escaped else None)
    return out


class EscapeHighlighter(Highlighter):
    """The editor's field (``core.edits.escape_text`` form) with each escape in reverse video, as
    ``literal`` draws a stand-in: ``\\u200b`` reversed is a U+200B, ``\\\\u200b`` the six characters."""

    def highlight(self, text: Text) -> None:
        for start, end in written_escapes(text.plain):
            text.stylize(escape_style(), start, end)


class LiteralInput(Input):
    """Textual's Input, with the first line of a paste made visible before it is inserted, and every key
    handled in the order it was typed.

    Textual inserts a printable key in the Input's own message queue, but runs a bound key (BackSpace,
    Delete, the arrows, Enter) only once its event has bubbled through every ancestor's queue up to the
    App. When an ancestor is busy (a draft classified at each keystroke, a loaded machine), the
    BackSpaces typed before a phrase run after it and eat its end: "cua-tui verif" approved for
    "cua-tui verified". Here the Input's own bindings run where its letters do, in arrival order."""

    # the editing keys Input itself binds (not the scrolling ones it inherits, which an ancestor may
    # take first: the editor's arrows move a scroll's point)
    EDITING_KEYS = BindingsMap(Input.BINDINGS).key_to_bindings

    def __init__(self, *args: Any, pasted: Callable[[str], str] = visible, **kwargs: Any) -> None:
        """``pasted`` writes a paste's first line as the field shows it (the editor's field: its escapes,
        so that what is pasted is what runs)."""
        super().__init__(*args, **kwargs)
        self.pasted = pasted

    async def _on_key(self, event: events.Key) -> None:
        if not event.is_printable:
            bindings = self.EDITING_KEYS.get(event.key)
            if bindings:
                # as Textual would run it once bubbled up; the App's priority keys (the kill switch)
                # were checked before the key reached this widget, as ever
                event.stop()
                event.prevent_default()
                await self.run_action(bindings[0].action)
        # else Textual goes on to Input's own handler (the handlers of a class's bases run after its own)

    def _on_paste(self, event: events.Paste) -> None:
        lines = event.text.splitlines()
        if lines:
            line = self.pasted(lines[0])
            selection = self.selection
            if selection.is_empty:
                self.insert_text_at_cursor(line)
            else:
                self.replace(line, *selection)
        # Input's own handler would insert the raw text as well
        event.prevent_default()
        event.stop()
