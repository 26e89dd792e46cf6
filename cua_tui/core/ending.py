"""How a run's end is worded, the same in every view (the TUI, replay, `runs`, the HTML report, `run`'s end
line) and in the manual (docs/commands/run.md, "Status, record, checked in"). Three words, one meaning each:

- **status**: how the run ended (``passed``, ``failed``, ``finished``, ``killed``, ``limit``, ``error``);
  passed and failed are the task's verifier's word;
- **record**: the audit log as ``cua-tui verify`` finds it (intact and sealed, unsealed, TAMPERED, unusable);
- **checked in**: where the task's verifier ran, and as whom.

A status is the run's own claim until an intact, sealed record vouches for it: it then reads ``claimed: ...``
in the warning colour, and only a passed run on such a record is ever green.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from . import events as ev
from .ports import VerifierPlace
from .text import visible

# the record's states (``runs --json`` and verify's verdicts spell the first four so)
INTACT = "intact"  # intact and sealed: the one state that vouches for the status
UNSEALED = "unsealed"
TAMPERED = "tampered"
UNUSABLE = "unusable"
VERIFYING = "verifying"  # being verified (replay's background check)
UNCHECKED = "unchecked"  # not verified (`runs --no-check`)

RECORD_WORDS = {
    INTACT: "intact",
    UNSEALED: "unsealed",
    TAMPERED: "TAMPERED",
    UNUSABLE: "unusable",
    VERIFYING: "being verified…",
    UNCHECKED: "not checked",
}
CLAIMED = "claimed: "


class Tone(enum.StrEnum):
    """How a status is coloured: each view maps these to its own success, error and warning colours."""

    GOOD = "good"  # passed, on an intact and sealed record: the only green
    BAD = "bad"  # any other end on such a record (failed, killed, limit, error)
    PLAIN = "plain"  # finished: the task has no verifier, so the run neither passed nor failed
    CLAIM = "claim"  # what the record does not (yet) vouch for: the warning colour


@dataclass(frozen=True, slots=True)
class Headline:
    """The status as a view leads with it. ``text`` holds the run's own words (its status): shown literally
    by the caller (made visible, escaped)."""

    text: str
    tone: Tone
    claimed: bool = False


def headline(status: str | None, record: str, *, no_end: str = "no end recorded") -> Headline:
    """The status of a run whose record is in state ``record`` (one of the states above). ``status`` None:
    no end is recorded (``no_end`` says so: "unfinished", "not ended yet"), which vouches for nothing."""
    if not status:
        return Headline(no_end, Tone.CLAIM)
    if record != INTACT:
        return Headline(CLAIMED + status, Tone.CLAIM, claimed=True)
    if status == ev.RunStatus.PASSED:
        return Headline(status, Tone.GOOD)
    return Headline(status, Tone.PLAIN if status == ev.RunStatus.FINISHED else Tone.BAD)


def record_tone(record: str) -> Tone:
    """How the record's state is coloured: TAMPERED and unusable as a failure, unsealed as a claim."""
    return {TAMPERED: Tone.BAD, UNUSABLE: Tone.BAD, UNSEALED: Tone.CLAIM}.get(record, Tone.PLAIN)


def record_words(record: str) -> str:
    """The record's state after the word "record" (``record TAMPERED``); an unknown state reads as not checked."""
    return RECORD_WORDS.get(record, RECORD_WORDS[UNCHECKED])


def record_label(record: str) -> str:
    """``record intact``, ``record TAMPERED``, ``record being verified…``: the record as the views name it."""
    return f"record {record_words(record)}"


def checked_in(where: str, user: str, *, short: bool = False) -> str:
    """Where a task's verifier ran and as whom: "in the controller, as alice", "inside the sandbox, as root",
    "in a place not recorded"; ``short``, for a table's cell under CHECKED IN: "controller, as alice",
    "sandbox, as root", "not recorded". ``where`` and ``user`` come from a record (untrusted): a value this
    version does not know reads as not recorded."""
    who = f", as {visible(user, limit=40)}" if user else ""
    if where == VerifierPlace.CONTROLLER:
        return f"{'' if short else 'in the '}controller{who}"
    if where == VerifierPlace.SANDBOX:  # the sandbox's own word on what it did
        return f"{'' if short else 'inside the '}sandbox{who}"
    return "not recorded" if short else "in a place not recorded"


def checked_by(verification: ev.VerificationDone | None) -> str:
    """Who checked the run's status and where ("checked by lab:form (server-side) in the controller, as
    alice"), or "" for a run without a verifier."""
    if verification is None:
        return ""
    return f"checked by {visible(verification.verifier, limit=60)} {checked_in(verification.where, verification.user)}"


def ours(verification: ev.VerificationDone | None) -> bool:
    """Whether the controller checked it: anything else (the sandbox's own word, a place not recorded)
    stands out wherever it is shown."""
    return verification is None or verification.where == VerifierPlace.CONTROLLER
