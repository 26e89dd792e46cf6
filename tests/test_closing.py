"""The ending's own parts (core/closing.py): the switch settles a run's end once and ends every wait, and an
ending gives each action still owed its one outcome, a typing stretch cut by it its one hash."""

from __future__ import annotations

import threading

from cua_tui.core import events as ev
from cua_tui.core.actions import text_sha256
from cua_tui.core.closing import Owed, Switch
from cua_tui.core.events import RunStatus
from cua_tui.core.ports import OutcomeStatus


def test_the_first_ending_wins_and_wakes_every_wait() -> None:
    switch = Switch()
    waiting, outside = threading.Event(), threading.Event()
    with switch.waiting(waiting):
        assert switch.trip(RunStatus.KILLED, "killed by human", wake=True)
        assert not switch.trip(RunStatus.ERROR, "too late", wake=True)
    assert waiting.is_set() and not outside.is_set()
    assert switch.ending == (RunStatus.KILLED, "killed by human")
    assert switch.aborted.is_set() and switch.cancel.is_set() and not switch.finished.is_set()
    # the run's own end wakes nothing: its thread is the one ending it
    quiet, own = Switch(), threading.Event()
    with quiet.waiting(own):
        assert quiet.trip(RunStatus.PASSED, "verified", wake=False)
    assert not own.is_set() and quiet.aborted.is_set()


def test_an_ending_closes_what_ran_what_was_running_and_what_never_ran() -> None:
    owed = Owed()
    for index in range(4):
        owed.open[owed.take_index()] = f"call_{index}"
    owed.performed[0] = "OK"  # ran, its outcome not yet written
    owed.in_flight = 1  # its desktop call under way
    owed.performed[3] = "OK"  # a takeover's private typing stretch, cut by the ending
    owed.stretches[3] = ("123456", True)
    owed.stretches[2] = ("never sent", False)  # proposed, nothing of it ran
    records = owed.closing(turn=2, steps=5, reason="killed by human")
    outcomes = [r for r in records if isinstance(r, ev.Outcome)]
    assert [(o.index, o.status) for o in outcomes] == [
        (0, OutcomeStatus.EXECUTED),
        (1, OutcomeStatus.FAILED),
        (2, OutcomeStatus.NOT_EXECUTED),
        (3, OutcomeStatus.EXECUTED),
    ]
    assert outcomes[1].message == "Failed: interrupted before it completed (killed by human)"
    assert outcomes[2].message == "Not executed: the run ended (killed by human)."
    typed = [r for r in records if isinstance(r, ev.Typed)]
    # a private stretch: its length only (a one-time code's hash is the code)
    assert [(t.index, t.text_len, t.text_sha256) for t in typed] == [(3, 6, "")]
    assert records.index(typed[0]) < records.index(outcomes[3])
    assert not owed.open and owed.closing(2, 5, "again") == []
    public = Owed(open={0: "c"}, performed={0: "OK"}, stretches={0: ("hello", False)})
    (hashed, _outcome) = public.closing(1, 1, "deadline")
    assert isinstance(hashed, ev.Typed) and hashed.text_sha256 == text_sha256("hello")
