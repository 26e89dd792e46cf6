"""A takeover (``T``): what the reviewer's own actions are called on record, and what the model is told of
them when control comes back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .actions import Action, Kind
from .edits import model_words
from .geometry import Scaling

# who proposed, approved and ran an action of a takeover (the operator is named beside it)
BY_TAKEOVER = "human (takeover)"
# what the model hears for an action of its batch that the takeover stopped
MSG_TAKEN_OVER = "Not executed: the reviewer took control of the desktop (what they did follows)."
# the note of the decision a takeover answered
TAKEOVER_NOTE = "the reviewer took control of the desktop instead (T)"
# the most actions a hand-back describes one by one
DESCRIBED = 20


class Desk(Protocol):
    """What a front end may do with a run's desktop (implemented by the Supervisor): every method is safe
    from any thread and returns at once; the run's own thread does the work, in order."""

    def take_over(self, by: str = "") -> str | None: ...  # None: asked; else why not
    @property
    def taken_over(self) -> bool: ...
    def takeover_input(self, action: Action) -> str | None: ...
    def takeover_private(self, private: bool) -> None: ...
    def hand_back(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Done:
    """One action of a takeover: what it was, whether it ran, and whether a private stretch hid it."""

    action: Action
    ran: bool
    private: bool = False


def takeover_note(done: list[Done], scaling: Scaling) -> str:
    """What the model's next input says of a takeover: that a person took control, what they did (in the
    model's coordinates, typed text by its length, a private stretch only counted), and that the screenshot
    shows the desktop now."""
    ran = [d for d in done if d.ran]
    shown = [d for d in ran if not d.private]
    hidden = len(ran) - len(shown)
    words = [_words(d.action, scaling) for d in shown[:DESCRIBED]]
    if len(shown) > DESCRIBED:
        words.append(f"and {len(shown) - DESCRIBED} more")
    parts = ["The person supervising this run took control of the desktop"]
    if not ran:
        parts.append(" and did nothing on it.")
    else:
        parts.append(f" and did {_count(len(ran))}")
        parts.append(f": {'; '.join(words)}" if words else "")
        if hidden:
            parts.append(f"{'; plus ' if words else ', '}{_count(hidden)} in a private stretch, not described")
        parts.append(".")
    if len(done) > len(ran):
        parts.append(f" {_count(len(done) - len(ran))} of theirs did not run.")
    parts.append(" They handed control back: the screenshot shows the desktop now. Continue the task from here.")
    return "".join(parts)


def _count(n: int) -> str:
    return f"{n} action{'s' if n != 1 else ''}"


def _words(action: Action, scaling: Scaling) -> str:
    return action.describe() if action.kind is Kind.TYPE else model_words(action, scaling)
