"""Messages that carry core events into the App (posted from the run's thread; post_message is thread-safe)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, Protocol

from textual.message import Message

from ..core import events as ev
from .frames import Rendered


class _Pump(Protocol):
    @property
    def is_running(self) -> bool: ...


def while_open[A: _Pump, **P](handler: Callable[Concatenate[A, P], None]) -> Callable[Concatenate[A, P], None]:
    """An App's handler of a message a worker posts (or of its own timer), run only while the App runs.

    A worker's message can be queued, and a timer fire, as the App shuts down: Textual marks it not running,
    then takes its screens away one by one (their widgets go first, so a query finds nothing) while what is
    queued may still be handled, when ``App.screen`` raises ScreenStackError. There is nothing left to show:
    the call is dropped (the run's record is the audit log's, not the UI's).
    """

    @functools.wraps(handler)
    def handle(app: A, /, *args: P.args, **kwargs: P.kwargs) -> None:
        if app.is_running:
            handler(app, *args, **kwargs)

    return handle


# Messages are dataclasses, as Textual's own are (Message.__post_init__ does its set-up).
@dataclass
class RunEvent(Message):
    """One core event as written, with its place in the audit chain."""

    stamped: ev.Stamped


@dataclass
class FrameRendered(Message):
    """A screenshot converted off the UI thread; only the newest matters."""

    rendered: Rendered
    serial: int

    def can_replace(self, message: Message) -> bool:
        # Textual asks whether ``message``, queued right after this one, may supersede it. Frames
        # are converted in parallel and can arrive out of order: only a newer frame may, or the
        # newest one would be dropped for an older one and the pane would show a stale picture until
        # the next frame.
        return isinstance(message, FrameRendered) and message.serial >= self.serial


@dataclass
class FrameRefused(Message):
    """A screenshot the frame worker refused to decode (not a PNG, or a header claiming more pixels than a
    screen has: a decompression bomb); ``reason`` is one line."""

    reason: str
    serial: int


@dataclass
class RunFinished(Message):
    status: str
    reason: str
