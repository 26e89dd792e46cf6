"""What a decision view frames and says of its target: the target itself (or the focused field, for typing),
the words read there, the screenshot to show and the screen the text view reads. Every front end that shows
a pending request takes these from the request and the run's RunView."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..core import describe
from ..core.actions import Kind
from ..core.imaging import ScreenLimit
from ..core.injection import Injection, find_injection
from ..core.ports import DecisionRequest
from ..core.run_view import RunView
from .desktop_view import Shot
from .frames import Target
from .screen_text import ScreenReading, ShownScreen


def typing_field(request: DecisionRequest | None, view: RunView) -> tuple[int, int] | None:
    """For pending typing: the focused field's point (core/focus.py), else None."""
    if request is None or request.action is None or request.action.kind is not Kind.TYPE:
        return None
    return view.focused


def focus_target(request: DecisionRequest | None, view: RunView) -> Target | None:
    """What the pane frames at a decision: the action's target, or for typing the focused field."""
    if request is None:
        return None
    if request.action is None and request.gated:
        # a safety check: the first action it approves, else the first
        order = sorted(request.gated, key=lambda g: not g.covered)
        return next((t for g in order if (t := Target.of(g.action)) is not None), None)
    target = Target.of(request.action)
    if target is None and (field := typing_field(request, view)) is not None:
        target = Target(point=field, kind="type")
    return target


def destination(
    request: DecisionRequest | None, view: RunView, reading: ScreenReading, digest: str | None
) -> str | None:
    """What the panel says of the target, from the screen read at it: for pending typing the "goes to" line
    (the field, its words and its label); for an action with a target the words that name it (a button's
    label, read from a crop of the element under the point), None while unknown."""
    if request is None or request.action is None:
        return None
    if request.action.kind is not Kind.TYPE:
        point = request.action.target
        found = reading.target(digest, point)
        return found.name if found is not None and found.name else None
    field = typing_field(request, view)
    text, problem = reading.result(digest) if digest is not None else (None, "")
    found = reading.target(digest, field)
    if found is not None and (found.text or found.label):
        return describe.field_destination(field, found.text, found.label, boxed=found.box is not None)
    return describe.text_destination(field, text.around(field) if text and field else None, problem)


def injection_at(
    request: DecisionRequest | None, view: RunView, reading: ScreenReading, digest: str | None, allowed: Iterable[str]
) -> Injection | None:
    """At a decision on an action: the passage of its screen's text (once read) that reads as an instruction to
    the agent and that the model's words for the turn echo (core/injection.py); None otherwise."""
    if request is None or request.kind != "action" or digest is None:
        return None
    text, _problem = reading.result(digest)
    return find_injection(text, view.batch_text, allowed)


def labelled(target: Target | None, reading: ScreenReading, digest: str | None) -> Target | None:
    """The target with the element under it and its label (read from the screen), so that the zoom frames
    them: a field with its label and content, a button with its words."""
    if target is None or digest is None or target.point is None:
        return target
    found = reading.target(digest, target.point)
    if found is not None and found.box is not None:
        return dataclasses.replace(target, element=found.box, label=found.label_box)
    text = reading.result(digest)[0]
    if text is not None and (line := text.label_line(target.centre)) is not None:
        return dataclasses.replace(target, label=line.box)
    return target


def screen_limit(view: RunView) -> ScreenLimit:
    """The run's screen as its run_started records it: no screenshot of the run is decoded if larger."""
    return ScreenLimit.of_run(view.started.screen if view.started is not None else None)


def shot_of(view: RunView) -> Shot | None:
    """The run's newest screenshot, to show (None: none with pixels yet)."""
    screen = view.screen
    if screen is None or screen.png is None:
        return None
    return Shot.of(screen.png, screen.sha256, screen_limit(view))


def shown_screen(shot: Shot | None, target: Target | None, run_id: str) -> ShownScreen | None:
    """The screen the text view (``t``) and the screenshot file (``o``) are about, with the point that matters."""
    if shot is None:
        return None
    label = "the field (last click point)" if target is not None and target.kind == "type" else "the pending target"
    point = target.point if target is not None else None

    def load() -> bytes | None:
        png = shot.load()
        return png if isinstance(png, bytes) else None

    return ShownScreen(shot.sha, load, point, label if point else "", run_id, limit=shot.limit)
