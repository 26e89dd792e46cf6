"""An Input for text that may be pasted from the page or the model: its control characters are made visible.

Typed keys never carry an escape byte, but a paste does (text copied from the page, a model's reply), and
Textual's Input paints its value as it is: an ``ESC [2J`` pasted into a search box would reach the terminal.
A paste goes through ``core.text.visible``, as every run string shown elsewhere does.
"""

from __future__ import annotations

from textual import events
from textual.widgets import Input

from ..core.text import visible


class LiteralInput(Input):
    """Textual's Input, with the first line of a paste made visible before it is inserted."""

    def _on_paste(self, event: events.Paste) -> None:
        lines = event.text.splitlines()
        if lines:
            line = visible(lines[0])
            selection = self.selection
            if selection.is_empty:
                self.insert_text_at_cursor(line)
            else:
                self.replace(line, *selection)
        # Input's own handler would insert the raw text as well
        event.prevent_default()
        event.stop()
