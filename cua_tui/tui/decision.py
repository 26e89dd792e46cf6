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

    def show_request(self, request: DecisionRequest | None, batch_size: int = 0, task: str = "") -> None:
        self.display = request is not None
        if request is None:
            self.update("")
            return
        text = Text()
        for part, role in describe.request_panel(request, batch_size, task):
            text.append(part, style=STYLES.get(role))
        self.update(text)
