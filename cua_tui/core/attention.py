"""What deserves the analyst's attention, apart from the noise: a security-relevant event raises an alert
that stays until seen; the browser's routine background requests (exact host names, never a suffix) are
folded into a count. One ``Attention`` per run and front end, fed the run's events in order (docs/tui.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import events as ev
from .policy import Verdict
from .text import visible

# The hosts Chromium 156 asks on its own (seen in the audit logs of the labs' runs, and Chromium's
# own component updater, sync and safe-browsing endpoints). Exact names only. The browser is set to ask
# none of them (desktops/quiet.py): a clean run folds nothing, and a count here says it asked anyway.
BROWSER_BACKGROUND_HOSTS = frozenset(
    {
        "accounts.google.com",
        "android.clients.google.com",
        "clients1.google.com",
        "clients2.google.com",
        "clients2.googleusercontent.com",
        "clientservices.googleapis.com",
        "content-autofill.googleapis.com",
        "edgedl.me.gvt1.com",
        "optimizationguide-pa.googleapis.com",
        "redirector.gvt1.com",
        "safebrowsing.googleapis.com",
        "update.googleapis.com",
        "www.googleapis.com",
        "www.gstatic.com",
    }
)


def routine_egress(event: ev.Egress) -> bool:
    """A refused request of the browser's own background traffic (folded, not alerted)."""
    return not event.allowed and event.host.lower().rstrip(".") in BROWSER_BACKGROUND_HOSTS


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert: the event's place in the log and a line saying what happened (already made visible)."""

    seq: int
    line: str


# actions of one turn named in alerts (a supervisor proposes at most 100; an edited log may hold more)
MAX_NAMES = 1000


@dataclass
class Attention:
    """Alerts not yet seen, and the count of routine refused requests folded away."""

    unseen: list[Alert] = field(default_factory=list)
    folded: int = 0  # routine refused requests
    folded_hosts: list[str] = field(default_factory=list)  # their hosts, first seen first
    # non-routine hosts alerted once each
    _refused: set[tuple[str, int]] = field(default_factory=set)
    _names: dict[int, str] = field(default_factory=dict)  # the current turn's actions, by index

    # a hostile page can make the browser ask thousands of hosts: the oldest go first
    MAX_UNSEEN = 200

    def name(self, index: int) -> str:
        """``#2 click at (550, 182)``: an action of the current turn as people read it."""
        summary = self._names.get(index)
        return f"#{index + 1} {summary}" if summary else f"#{index + 1}"

    def apply(self, stamped: ev.Stamped) -> Alert | None:
        """Take the next event of the run; returns the alert it raises, if any (also kept as unseen)."""
        event = stamped.event
        line: str | None = None
        match event:
            case ev.ModelTurn():
                self._names.clear()
            case ev.ActionProposed() if len(self._names) < MAX_NAMES:
                self._names[event.index] = visible(event.summary or event.raw_kind or "action", limit=80)
            case ev.Egress() if not event.allowed:
                if routine_egress(event):
                    self.folded += 1
                    host = visible(event.host, limit=80)
                    if host not in self.folded_hosts and len(self.folded_hosts) < 20:
                        self.folded_hosts.append(host)
                elif (event.host, event.port) not in self._refused:
                    self._refused.add((event.host, event.port))
                    reason = f" ({visible(event.reason, limit=80)})" if event.reason else ""
                    line = (
                        f"egress refused: {visible(event.method, limit=16)} {visible(event.host, limit=120)}:"
                        f"{event.port}{reason}"
                    )
            case ev.PolicyVerdict() if event.verdict == Verdict.BLOCK:
                line = f"{self.name(event.index)} BLOCKED: {visible(event.reason, limit=160)}"
            case ev.SafetyChecksRaised():
                codes = ", ".join(visible(c.get("code", "?"), limit=60) for c in event.checks[:10])
                line = f"turn {event.turn}: the model raised safety checks: {codes or '(no code)'}"
            case ev.TurnRefused():
                line = f"turn {event.turn} refused whole ({event.actions} actions): {visible(event.reason, limit=160)}"
            case ev.VerificationDone() if not event.passed:
                line = f"verification FAILED ({visible(event.verifier, limit=60)}): {visible(event.detail, limit=160)}"
        if line is None:
            return None
        alert = Alert(stamped.seq, line)
        self.unseen.append(alert)
        del self.unseen[: -self.MAX_UNSEEN]
        return alert

    def copy(self) -> Attention:
        """A copy that ``apply`` on this one leaves as it is (its alerts, frozen, shared)."""
        return Attention(list(self.unseen), self.folded, list(self.folded_hosts), set(self._refused), dict(self._names))

    def seen(self) -> int:
        """The analyst has seen every alert: returns how many there were."""
        count = len(self.unseen)
        self.unseen.clear()
        return count

    def folded_line(self) -> str:
        """``3 routine refused requests of the browser (clients2.google.com, …)``, or "" when none."""
        if not self.folded:
            return ""
        hosts = ", ".join(self.folded_hosts[:3]) + (", …" if len(self.folded_hosts) > 3 else "")
        plural = "s" if self.folded != 1 else ""
        return f"{self.folded} routine refused request{plural} of the browser ({hosts})"
