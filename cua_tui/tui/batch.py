"""The batch pane: the current turn's actions, one row each, risk and state as CSS classes."""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from ..core.text import visible

STATES = ("waiting", "approved", "executed", "declined", "refused", "failed", "not_executed", "stale")


class ActionRow(Static):
    """index · kind · parameters · verdict and reason · state. Classes: risk-*, state-*, pending."""

    def __init__(self, index: int, kind: str, params: str, *, error: str = "") -> None:
        super().__init__(classes="action-row state-waiting")
        self.index = index
        self.kind = kind
        self.params = params
        self.error = error
        self.verdict = "malformed" if error else "…"
        self.reason = error
        self.state = "waiting"
        self.decided_by = ""

    def on_mount(self) -> None:
        self.redraw()

    def set_verdict(self, verdict: str, reason: str) -> None:
        self.verdict, self.reason = verdict, reason
        for risk in ("allow", "confirm", "block"):
            self.set_class(verdict == risk, f"risk-{risk}")
        self.redraw()

    def set_state(self, state: str, by: str = "") -> None:
        for name in STATES:
            self.set_class(name == state, f"state-{name}")
        self.state = state
        if by:
            self.decided_by = by
        self.redraw()

    def redraw(self) -> None:
        text = Text(no_wrap=False, overflow="fold")
        marker = "▶ " if self.has_class("pending") else "  "
        text.append(marker, style="bold")
        text.append(f"{self.index + 1:>2} ", style="bold")
        text.append(f"{visible(self.kind, limit=16):<14}", style="bold")
        text.append(visible(self.params, limit=80))
        text.append("\n     ")
        verdict = self.verdict.upper()
        text.append(f"{verdict:<8}", style="bold")
        if self.reason:
            text.append(visible(self.reason, limit=120))
        text.append("  →  ")
        state = self.state.replace("_", " ")
        text.append(state.upper() if self.state != "waiting" else state, style="bold")
        if self.decided_by and self.decided_by != "policy":
            text.append(f" ({visible(self.decided_by, limit=40)})", style="italic")
        self.update(text)


class BatchPane(VerticalScroll):
    """Rows of the current turn; cleared when a new turn starts."""

    can_focus = False

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.turn = 0
        self.rows: dict[int, ActionRow] = {}
        self.border_title = "Pending batch"

    def start_turn(self, turn: int, text: str) -> None:
        self.turn = turn
        self.rows.clear()
        self.remove_children()
        self.border_title = f"Turn {turn} batch"
        if text:
            self.mount(Static(Text(f"model: {visible(text, limit=400)}"), classes="model-text"))

    def final_text(self, text: str) -> None:
        self.mount(
            Static(
                Text(f"final: {visible(text, limit=400)}" if text else "final: (no text)"),
                classes="model-text final-text",
            )
        )

    def add(self, index: int, kind: str, params: str, error: str = "") -> ActionRow:
        row = ActionRow(index, kind, params, error=error)
        self.rows[index] = row
        self.mount(row)
        return row

    def mark_pending(self, index: int | None) -> None:
        for i, row in self.rows.items():
            pending = i == index
            if row.has_class("pending") != pending:
                row.set_class(pending, "pending")
                row.redraw()
        if index is not None and index in self.rows:
            # after the next refresh: rows mounted just now have no place in the layout yet
            self.call_after_refresh(self.scroll_to_widget, self.rows[index], animate=False, top=True)
