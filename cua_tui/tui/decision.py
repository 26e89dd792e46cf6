"""The decision panel: what exactly is being decided, shown so it cannot be misread."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ..core import describe
from ..core.ports import DecisionRequest

# The wording is core/describe's; the panel only styles its parts (appended as text, never as markup).
STYLES = {
    describe.TITLE: "bold reverse",
    describe.LABEL: "bold",
    describe.TYPED: "reverse",
    describe.KEY: "bold reverse",
}


class DecisionPanel(Static):
    """Hidden unless a decision is pending. Typed text is shown in full with control characters visible."""

    _shown: tuple[DecisionRequest | None, int, str, bool] = (None, 0, "", False)  # what show_request was given

    def show_request(
        self,
        request: DecisionRequest | None,
        batch_size: int = 0,
        task: str = "",
        destination: str | None = None,
        *,
        field: bool = False,
    ) -> None:
        """Show ``request`` (None hides the panel); ``destination``: where typed text goes (it may arrive
        later, from the screen's OCR: ``set_destination``)."""
        self.display = request is not None
        self._shown = (request, batch_size, task, field)
        if request is None:
            self.update("")
            return
        text = Text()
        for part, role in describe.request_panel(request, batch_size, task, destination, field=field):
            text.append(part, style=STYLES.get(role))
        self.update(text)

    def set_destination(self, destination: str | None, *, field: bool = False) -> None:
        """Redraw the shown request with a new "goes to" line (the OCR of the screen arrived)."""
        request, batch_size, task, _ = self._shown
        if request is not None:
            self.show_request(request, batch_size, task, destination, field=field)
