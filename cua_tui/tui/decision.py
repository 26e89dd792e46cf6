"""The decision panel: what exactly is being decided, shown so it cannot be misread."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ..core.actions import Kind
from ..core.ports import DecisionRequest
from ..core.text import visible


class DecisionPanel(Static):
    """Hidden unless a decision is pending. Typed text is shown in full with control characters visible."""

    def show_request(self, request: DecisionRequest | None, batch_size: int = 0) -> None:
        self.display = request is not None
        if request is None:
            self.update("")
            return
        text = Text()
        of = f" of {batch_size}" if batch_size else ""
        text.append(f" DECISION NEEDED · turn {request.turn} · action {request.index + 1}{of} \n", style="bold reverse")
        if request.kind == "safety_check":
            text.append("The model raised safety checks; approving acknowledges them to the model:\n", style="bold")
            for check in request.safety_checks:
                text.append(f"  • {visible(check.code)}: {visible(check.message, limit=300)}\n")
        action = request.action
        if action is not None:
            text.append("action  ", style="bold")
            text.append(visible(action.describe()) + "\n")
            if action.kind is Kind.TYPE:
                text.append(f"text    ({len(action.text)} chars, shown here only, never stored)\n", style="bold")
                text.append("  " + visible(action.text) + "\n", style="reverse")
        text.append("why     ", style="bold")
        text.append(visible(request.reason, limit=400) + "\n")
        text.append("y", style="bold reverse")
        text.append(" approve   ")
        text.append("n", style="bold reverse")
        text.append(" reject   ")
        text.append("k", style="bold reverse")
        text.append(" kill switch")
        if action is not None and action.target is not None:  # as the footer: z only where there is a target
            text.append("   ")
            text.append("z", style="bold reverse")
            text.append(" zoom on target")
        self.update(text)
