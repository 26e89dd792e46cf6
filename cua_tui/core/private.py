"""Which screens of a run are private: the one rule every export asks (docs/commands/export.md, "Private
screens").

A screen is private when every reference to it in the audit log lies inside a private stretch of a takeover:
from a ``takeover_private`` event that starts one to the next that ends it. References are the records that
name a screenshot by its SHA-256: a screen event, the screen a decision showed, the screen a hand-back gave
the model. A screen also named anywhere outside a stretch (the same picture before it, or the screen the model
is given at hand-back) is not private. When in doubt, private: a ``takeover_private`` record this version
cannot read, or a line that cannot be read at all, starts a stretch that only a readable end closes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from . import events as ev

# What an export says beside its private screens, left out or included.
HAND_BACK = (
    "the first screen after hand-back, which the model gets by design, may still show what was typed "
    "in the private stretch"
)
LEFT_OUT = "private: left out"
# the notes ``core.runlog`` makes of a record it cannot read: either may have been a stretch's start
_DOUBTFUL = (f"{ev.TakeoverPrivate.kind} record", "line ")


def private_screens(events: Iterable[ev.Event]) -> frozenset[str]:
    """The SHA-256 of every screen referenced only inside private stretches of ``events`` (chain order)."""
    inside: set[str] = set()
    outside: set[str] = set()
    private = False
    for event in events:
        if isinstance(event, ev.TakeoverPrivate):
            # only an explicit end closes a stretch; anything else a forged record holds opens one
            private = event.private is not False
        elif isinstance(event, ev.Note) and _doubtful(event.message):
            private = True
        else:
            (inside if private else outside).update(_references(event))
    return frozenset(inside - outside)


def private_line(count: int, included: bool) -> str:
    """What an export says of a run's ``count`` private screens, left out or ``included`` ("" for none)."""
    if not count:
        return ""
    if included:
        return f"{count} private screen(s) included as asked (--include-private), each marked private; {HAND_BACK}"
    return (
        f"{count} private screen(s) left out (seen only inside a takeover's private stretch; "
        f"--include-private puts them in, marked); {HAND_BACK}"
    )


def _doubtful(message: object) -> bool:
    return isinstance(message, str) and message.startswith(_DOUBTFUL)


def _references(event: ev.Event) -> Iterator[str]:
    if isinstance(event, ev.ScreenCaptured):
        names: tuple[object, ...] = (event.sha256,)
    elif isinstance(event, ev.DecisionMade | ev.TakeoverEnded):
        names = (event.screen,)
    else:
        return
    yield from (name for name in names if isinstance(name, str) and name)
