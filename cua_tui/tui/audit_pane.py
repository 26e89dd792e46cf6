"""The audit pane: a tail of the run's audit events and the chain's state and head hash."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import RichLog, Static

from ..core import events as ev
from ..core.text import visible
from ..headless import line_for


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

    def record(self, event: ev.Event, seq: int, head: str) -> None:
        self.events, self.head = seq + 1, head
        line = audit_line(event)
        self.query_one(RichLog).write(Text(f"{seq:>4} {visible(line, limit=300)}"))
        self._show_chain()

    def set_state(self, state: str) -> None:
        self.state = state
        self._show_chain()

    def _show_chain(self) -> None:
        text = Text()
        text.append("chain ", style="bold")
        text.append(f"{self.state} · {self.events} events · head {self.head[:16]}…")
        self.query_one("#chain", Static).update(text)


def audit_line(event: ev.Event) -> str:
    """A compact one-line form of every audit event (untrusted parts are made visible by the caller)."""
    match event:
        case ev.ScreenCaptured():
            return f"screen {event.sha256[:12]} {event.width}x{event.height} ({event.purpose})"
        case ev.Phase():
            return f"phase {event.phase}" + (f": {event.detail}" if event.detail else "")
        case ev.ActionProposed():
            what = event.summary or f"malformed {event.raw_kind or 'action'}: {event.error}"
            return f"proposal #{event.index + 1} {what}"
        case ev.PolicyVerdict():
            return f"verdict #{event.index + 1} {event.verdict}: {event.reason}"
        case ev.DecisionRequested():
            return f"decision requested #{event.index + 1} ({event.subject})"
        case ev.DecisionMade():
            return f"decision #{event.index + 1} {event.decision} by {event.by}"
        case ev.Executing():
            return f"executing #{event.index + 1}"
        case ev.Outcome():
            return f"outcome #{event.index + 1} {event.status}: {event.message}"
        case ev.Cleanup():
            return f"cleanup {'ok' if event.ok else 'PROBLEM'}: {event.detail}"
        case ev.Egress():
            return f"egress {'allowed' if event.allowed else 'REFUSED'} {event.method} {event.host}:{event.port}"
    return (line_for(event) or event.kind).strip()
