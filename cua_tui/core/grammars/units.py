"""One action of an open-weight model's reply, as its grammar read it (``read`` in each grammar's module): a
small record in the model's own coordinates, with the name the model gave it, turned into an Action here,
the same way for every grammar. This is what the supervisor parses (core/wire.py): every coordinate
mapped from the model's space to the display and refused off it, every key and text checked as the
vendors' actions are.

A unit is ``{"name": <the model's call>, "do": <what>, ...}`` with ``do`` one of:
click (button, count, at), move (at), drag (from, to), scroll (at?, dx, dy: wheel notches), key (keys: a
list of key names pressed together), type (text), wait (ms), or refuse (code, reason): an action the
grammar has that this desktop cannot do, refused with the model's words kept.
"""

from __future__ import annotations

import math
from typing import Any

from ..actions import (
    MAX_SCROLL_NOTCHES,
    MAX_TEXT,
    MAX_WAIT_MS,
    Action,
    ActionError,
    Kind,
    Point,
    make_chord,
)
from ..geometry import OutOfRange, Scaling
from ..text import one_line

MAX_NAME = 40
BUTTONS = ("left", "right", "middle")
KINDS_BY_COUNT = {1: Kind.CLICK, 2: Kind.DOUBLE_CLICK, 3: Kind.TRIPLE_CLICK}
_FIELDS: dict[str, frozenset[str]] = {
    "click": frozenset({"button", "count", "at"}),
    "move": frozenset({"at"}),
    "drag": frozenset({"from", "to"}),
    "scroll": frozenset({"at", "dx", "dy"}),
    "key": frozenset({"keys"}),
    "type": frozenset({"text"}),
    "wait": frozenset({"ms"}),
    "refuse": frozenset({"code", "reason"}),
}


def unit(name: str, do: str, **fields: Any) -> dict[str, Any]:
    """A unit as a grammar's reader makes one (``name``: the model's call, cut to 40 characters)."""
    return {"name": one_line(name, MAX_NAME), "do": do, **fields}


def refused(name: str, code: str, reason: str) -> dict[str, Any]:
    """An action the grammar has and the desktop cannot do: refused when its turn comes, its reason heard."""
    return unit(name, "refuse", code=code, reason=reason)


def parse_unit(raw: Any, scaling: Scaling) -> Action:
    """The Action of one unit, in display coordinates; ActionError for anything else."""
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or raw.get("do") not in _FIELDS:
        raise ActionError("bad_schema", "an open-weight model's action is a unit {name, do, ...}")
    do, name = raw["do"], raw["name"]
    extra = set(raw) - {"name", "do"} - _FIELDS[do]
    if extra:
        raise ActionError("unknown_field", f"{name}: unexpected field(s) {', '.join(sorted(extra))}")
    match do:
        case "click":
            button, count = raw.get("button", "left"), raw.get("count", 1)
            if button not in BUTTONS or count not in KINDS_BY_COUNT or isinstance(count, bool):
                raise ActionError("bad_field", f"{name}: a click is left, right or middle, once to three times")
            kind = KINDS_BY_COUNT[count] if button == "left" else Kind.CLICK
            if button != "left" and count != 1:
                raise ActionError("unsupported", f"{name}: only the left button clicks more than once here")
            return Action(kind, point=point(raw.get("at"), scaling, name), button=button)
        case "move":
            return Action(Kind.MOVE, point=point(raw.get("at"), scaling, name))
        case "drag":
            start, end = point(raw.get("from"), scaling, name), point(raw.get("to"), scaling, name)
            return Action(Kind.DRAG, path=(start, end))
        case "scroll":
            at = raw.get("at")
            where = None if at is None else point(at, scaling, name)
            dx, dy = (_notches(raw.get(axis, 0), name) for axis in ("dx", "dy"))
            if not dx and not dy:
                raise ActionError("bad_field", f"{name}: a scroll moves the wheel at least one notch")
            return Action(Kind.SCROLL, point=where, scroll_x=dx, scroll_y=dy)
        case "key":
            keys = raw.get("keys")
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ActionError("bad_key", f"{name}: the keys are a list of key names")
            return Action(Kind.KEYPRESS, chord=make_chord(keys))
        case "type":
            text = raw.get("text")
            if not isinstance(text, str) or not text:
                raise ActionError("bad_field", f"{name}: nothing to type")
            if len(text) > MAX_TEXT:
                raise ActionError("too_long", f"{name}: {len(text)} characters to type; at most {MAX_TEXT}")
            return Action(Kind.TYPE, text=text)
        case "wait":
            ms = raw.get("ms")
            if type(ms) is not int or not 0 <= ms <= MAX_WAIT_MS:
                raise ActionError("out_of_range", f"{name}: a wait is 0 to {MAX_WAIT_MS // 1000} seconds")
            return Action(Kind.WAIT, duration_ms=ms)
        case _:  # refuse
            code, reason = raw.get("code"), raw.get("reason")
            raise ActionError(
                one_line(code, 40) if isinstance(code, str) else "unsupported",
                one_line(reason, 300) if isinstance(reason, str) else f"{name} is not available here",
            )


def point(value: Any, scaling: Scaling, name: str) -> Point:
    """A model's [x, y] (numbers in its space, rounded to the nearest unit) on the display."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ActionError("bad_point", f"{name}: a point is [x, y]")
    x, y = (_coordinate(v, name) for v in value)
    try:
        return scaling.to_display(x, y)
    except OutOfRange as exc:
        raise ActionError("outside_screen", f"{name}: {exc}") from None


def _coordinate(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ActionError("bad_point", f"{name}: a coordinate is a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ActionError("bad_point", f"{name}: a coordinate is a finite number")
    if abs(value) > 1 << 20:
        raise ActionError("outside_screen", f"{name}: a coordinate of {one_line(str(value), 24)} is off any screen")
    return math.floor(value + 0.5)


def _notches(value: Any, name: str) -> int:
    if type(value) is not int or abs(value) > MAX_SCROLL_NOTCHES:
        raise ActionError("out_of_range", f"{name}: a scroll is at most {MAX_SCROLL_NOTCHES} notches")
    return value
