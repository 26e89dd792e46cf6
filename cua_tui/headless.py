"""Headless output of run events as plain lines (stderr), for ``--headless`` runs and CI logs.

The wording is core/describe's, where untrusted text goes through ``visible`` so escape sequences in
model output never reach the terminal. Actions are named (``#2 click at (550, 182): executed``); alerts
(core/attention: a refused host that is not the browser's background traffic, a blocked action, a safety
check, a failed verification) are marked ``!``; the browser's routine refused requests are printed once
and then only counted, the count printed when the run ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from .core import events as ev
from .core.attention import Attention, routine_egress
from .core.describe import event_line


def printer(stream: TextIO) -> Callable[[ev.Stamped], None]:
    """A run's listener that prints its events as lines."""
    attention = Attention()
    routine_said = False

    def write(line: str) -> None:
        stream.write(line + "\n")
        stream.flush()

    def listen(stamped: ev.Stamped) -> None:
        nonlocal routine_said
        event = stamped.event
        alert = attention.apply(stamped)
        if isinstance(event, ev.Egress) and not event.allowed:
            if alert is not None:
                write(f"! {alert.line}")
            elif routine_egress(event) and not routine_said:
                routine_said = True
                write(f"{event_line(event)} (the browser's own background traffic: further ones are counted)")
            return
        if isinstance(event, ev.RunEnded) and attention.folded:
            write(f"  {attention.folded_line()} folded")
        line = event_line(event, attention.name)
        if alert is not None:
            write(f"! {line.strip() if line else alert.line}")
        elif line is not None:
            write(line)

    return listen
