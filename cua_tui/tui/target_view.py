"""The decision view's pieces that every front end shares: what the desktop pane frames at a decision, where
typed text goes, the screen the text view reads, and the frame conversion run in a worker.

The single-run App (app.py) and the fleet TUI (fleet.py) both show a pending request this way: the
DecisionPanel with the task line, the DesktopView with ``frames.prepare``'s framed target, and the screen
as text (``t``, screen_text.py). The functions here take the request and the run's RunView, so each front
end keeps its own state (which request is shown, which screenshot) and none of them copies the rules.
"""

from __future__ import annotations

import dataclasses

from ..core import describe
from ..core.actions import Kind
from ..core.imaging import ImageRefused, ScreenLimit
from ..core.ports import DecisionRequest
from ..core.run_view import RunView
from .frames import Target, prepare
from .messages import FrameRefused, FrameRendered
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
    if request.action is None and request.gated:  # a safety check: the first action it approves, else the first
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


def shown_screen(
    png: bytes | None, digest: str | None, target: Target | None, run_id: str, limit: ScreenLimit
) -> ShownScreen | None:
    """The screen the text view (``t``) and the screenshot file (``o``) are about, with the point that matters."""
    if png is None or digest is None:
        return None
    label = "the field (last click point)" if target is not None and target.kind == "type" else "the pending target"
    point = target.point if target is not None else None
    return ShownScreen(digest, lambda: png, point, label if point else "", run_id, limit=limit)


def convert_frame(
    png: bytes,
    width: int,
    height: int,
    target: Target | None,
    zoom: bool,
    serial: int,
    strips: bool,
    sixel: bool = False,
    *,
    limit: ScreenLimit,
) -> FrameRendered | FrameRefused:
    """A frame worker's body: the screenshot prepared for a pane of ``width`` x ``height`` cells, as the
    message to post (refused when its header claims more than the run's screen, ``limit``: a bomb is never
    decoded)."""
    cell_pixels = None
    if not strips:
        from textual_image._terminal import get_cell_size  # cached probe result

        size = get_cell_size()
        cell_pixels = (size.width, size.height)
    try:
        rendered = prepare(
            png, width, height, target, limit=limit, zoom=zoom, strips=strips, cell_pixels=cell_pixels, sixel=sixel
        )
    except ImageRefused as exc:
        return FrameRefused(str(exc), serial)
    return FrameRendered(rendered, serial)
