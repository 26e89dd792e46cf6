"""A takeover (``T``): what the reviewer's own actions are called on record, and what the model is told of
them when control comes back."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .actions import MAX_TEXT, Action, Kind
from .decisions import BY_TAKEOVER as BY_TAKEOVER  # re-exported: where a takeover is named
from .decisions import TAKEOVER_NOTE as TAKEOVER_NOTE
from .edits import model_words
from .events import ActionProposed, Typed
from .geometry import Scaling, Size

# what the model hears for an action of its batch that the takeover stopped
MSG_TAKEN_OVER = "Not executed: the reviewer took control of the desktop (what they did follows)."
# the most actions a hand-back describes one by one
DESCRIBED = 20
# A typing stretch (the characters a reviewer types one after another) ends after this long without a
# key, or at any other input (a key that is not a character, a click, private on or off, hand-back).
TYPING_PAUSE_S = 1.0
# what the intent of a stretch says (the status line), before its length is known
TYPING = "typing, each character as it is typed"
# the note that says a stretch stopped because its next characters were refused
TYPING_STOPPED = "the reviewer's typing stopped at"


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


@dataclass(slots=True)
class Stretch:
    """A typing stretch of a takeover, on the run's thread: one action on record, proposed at its first
    character, each character sent as it comes once the policy has checked the stretch so far (a
    ``typed`` record before each), its outcome and screen when it ends. ``closed``: its outcome is on
    record (it ended, or its first character was refused); ``refused``: why the characters typed after
    that, until the stretch would have ended, are not sent."""

    index: int
    private: bool
    started: float  # the run's clock at its first character
    last: float  # and at its last key
    text: str = field(default="", repr=False)  # what reached the desktop (memory only)
    proposed: str = field(default="", repr=False)  # what its proposal records
    closed: bool = False
    refused: str = ""

    def done(self) -> Done:
        """What the hand-back tells of it: one action, the text typed (or the key refused, if none was)."""
        return Done(Action(Kind.TYPE, text=self.text or self.proposed), bool(self.text), self.private)


def typed_record(record: object, typed: Typed) -> dict[str, Any] | None:
    """A typing stretch's action record as its ``typed`` record says the stretch is now: its text's length,
    and its SHA-256 once the stretch ended (a stretch under way, or cut by a crash, has none); None when
    ``record`` is not one of typing."""
    if not isinstance(record, dict) or record.get("kind") != Kind.TYPE.value:
        return None
    out = {k: v for k, v in record.items() if k != "text_sha256"} | {"text_len": typed.text_len}
    return out | {"text_sha256": typed.text_sha256} if typed.text_sha256 else out


def typed_summary(typed: Typed) -> str:
    """What a stretch is called once ``typed`` is recorded (as ``Action.describe`` calls typing)."""
    return f"type {typed.text_len} characters"


def typed_so_far(proposal: ActionProposed, typed: Typed) -> ActionProposed | None:
    """A typing stretch's proposal as its ``typed`` record says the stretch is now: what replay and the
    exports show of it. None when the proposal is not one of typing."""
    record = typed_record(proposal.action, typed)
    return None if record is None else replace(proposal, action=record, summary=typed_summary(typed), parsed=None)


# what a takeover's inputs may be: the pointer and the keys a terminal gives
INPUT_KINDS = frozenset({Kind.CLICK, Kind.DOUBLE_CLICK, Kind.DRAG, Kind.MOVE, Kind.SCROLL, Kind.TYPE, Kind.KEYPRESS})


def input_problem(action: Action, screen: Size) -> str | None:
    """Why the run does not take ``action`` as a takeover's input (None: it does): a kind a terminal does not
    give, a point off the screen, typed text past the parser's bound. The policy still judges the rest."""
    if action.kind not in INPUT_KINDS:
        return f"a {action.kind.value} is not an input of a takeover"
    points = ([action.point] if action.point is not None else []) + list(action.path)
    off = next((p for p in points if not screen.contains(*p)), None)
    if off is not None:
        return f"({off[0]}, {off[1]}) is outside the {screen} screen"
    if action.kind is Kind.DRAG and len(action.path) < 2:
        return "a drag needs two points"
    if action.kind is Kind.TYPE and not 0 < len(action.text) <= MAX_TEXT:
        return f"typed text must be 1 to {MAX_TEXT} characters"
    return None


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
