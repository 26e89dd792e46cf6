"""A listener that keeps every event a run emits, for the end-to-end tests of the backends."""

from __future__ import annotations

from typing import Any

from cua_tui.core import events as ev


class Recorder:
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def __call__(self, stamped: ev.Stamped) -> None:
        self.events.append(stamped.event)

    def of(self, kind: type[ev.Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]
