"""Headless output of run events as plain lines (stderr), for ``--headless`` runs and CI logs.

The wording is core/describe's, where untrusted text goes through ``visible`` so escape sequences in
model output never reach the terminal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from .core import events as ev
from .core.describe import event_line


def printer(stream: TextIO) -> Callable[[ev.Stamped], None]:
    """A run's listener that prints its events as lines; a refused egress host is printed once (browsers
    retry in the background)."""
    refused: set[tuple[str, int]] = set()

    def listen(stamped: ev.Stamped) -> None:
        event = stamped.event
        if isinstance(event, ev.Egress) and not event.allowed:
            if (event.host, event.port) in refused:
                return
            refused.add((event.host, event.port))
        line = event_line(event)
        if line is not None:
            stream.write(line + "\n")
            stream.flush()

    return listen
