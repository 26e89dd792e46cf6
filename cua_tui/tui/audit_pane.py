"""The audit pane: a tail of the run's audit events and the chain's state and head hash."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import RichLog, Static

from ..core import events as ev
from ..core.describe import audit_line
from ..core.text import visible


class AuditPane(Vertical):
    can_focus = False

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Audit log"
        self.events = 0
        self.head = "0" * 64
        self.state = "live"

    def compose(self) -> ComposeResult:
        yield Static(id="chain")
        yield RichLog(id="audit-log", markup=False, highlight=False, wrap=False, max_lines=2000, auto_scroll=True)

    def on_mount(self) -> None:
        self._show_chain()

    def record(self, event: ev.Event, seq: int, head: str, *, chain: bool = True) -> None:
        self.events, self.head = seq + 1, head
        line = audit_line(event)
        self.query_one(RichLog).write(Text(f"{seq:>4} {visible(line, limit=300)}"))
        if chain:
            self._show_chain()

    def show_tail(self, events: list[ev.Stamped], upto: int, tail: int) -> None:
        """Show the events of a run read back up to event ``upto`` (the last ``tail`` of them). Moving on
        by a few events only appends those (replay steps forward one action at a time)."""
        log = self.query_one(RichLog)
        if upto < self.events or upto - self.events > tail:
            log.clear()
            start = max(0, upto - tail)
        else:
            start = self.events
        for stamped in events[start:upto]:
            self.record(stamped.event, stamped.seq, stamped.head, chain=False)
        self.events = upto
        if upto and upto <= len(events):
            self.head = events[upto - 1].head
        self._show_chain()

    def set_state(self, state: str) -> None:
        self.state = state
        self._show_chain()

    def _show_chain(self) -> None:
        text = Text()
        text.append("chain ", style="bold")
        text.append(f"{self.state} · {self.events} events · head {self.head[:16]}…")
        self.query_one("#chain", Static).update(text)
