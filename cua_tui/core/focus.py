"""Which field typing goes to: the one rule the supervisor, the TUI's reducer and replay share.

The focused field is known only as the point of the last click that focused it. Anything that can move
the keyboard focus ends that knowledge: a Tab, Enter, Escape, a key with a modifier that is not text
editing, typed text carrying a tab or a line break, a drag, a bare button press or release, or an action
that failed part-way. A click elsewhere names a new field. What cannot move focus (moves, scrolls, waits,
screenshots, zooms, editing keys such as BackSpace or the arrows along a line) keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .actions import FOCUS_TEXT, Action, Kind, chord_tokens

Point = tuple[int, int]

CLICKS = frozenset({Kind.CLICK, Kind.DOUBLE_CLICK, Kind.TRIPLE_CLICK})
# Actions that leave the keyboard focus where it was.
KEEPS = frozenset({Kind.MOVE, Kind.SCROLL, Kind.WAIT, Kind.SCREENSHOT, Kind.CURSOR_POSITION, Kind.ZOOM})
# Keys that edit text inside the focused field and never move the focus (alone or with shift /
# ctrl).
EDITING_KEYS = frozenset({"BackSpace", "Delete", "Left", "Right", "Home", "End", "Insert", "space"})
# ctrl+KEY shortcuts that edit inside a field (select all, copy, cut, paste, undo, redo).
EDITING_CTRL = frozenset({"a", "c", "x", "v", "z", "y"})


def keeps_focus(chord: str) -> bool:
    """Whether pressing ``chord`` (canonical, "ctrl+a") leaves the keyboard focus in the same field."""
    tokens = chord_tokens(chord) if chord else []
    if not tokens:
        return False
    *modifiers, key = tokens
    if "alt" in modifiers or "super" in modifiers:
        return False  # menus, window switching, browser shortcuts
    if "ctrl" in modifiers:
        return key in EDITING_KEYS or key.lower() in EDITING_CTRL
    return key in EDITING_KEYS or (len(key) == 1 and key.isprintable())


def text_moves_focus(text: str) -> bool:
    """Whether typing ``text`` can move the focus out of the field it starts in."""
    return any(c in text for c in FOCUS_TEXT)


def after(
    field: Point | None, kind: Kind | str, point: Point | None, chord: str = "", moves_focus: bool = False
) -> Point | None:
    """The focused field after an executed action described by its ``kind``, ``point``, ``chord`` and
    whether its typed text can move focus (``moves_focus``)."""
    try:
        kind = Kind(kind)
    except ValueError:
        # an action this version does not know: the field is unknown
        return None
    if kind in CLICKS:
        # a click names the field it lands in (None when the point is not known)
        return point
    if kind in KEEPS:
        return field
    if kind is Kind.TYPE:
        return None if moves_focus else field
    if kind is Kind.KEYPRESS:
        return field if keeps_focus(chord) else None
    # drag, hold_key, mouse_down / mouse_up: the focus may have gone anywhere
    return None


def after_action(field: Point | None, action: Action) -> Point | None:
    """The focused field after ``action`` ran (the live run: the typed text is known)."""
    return after(field, action.kind, action.point, action.chord, text_moves_focus(action.text))


def after_record(field: Point | None, record: Mapping[str, Any] | None) -> Point | None:
    """The focused field after the action an audit record describes ran (replay: the record's
    ``moves_focus`` stands in for the typed text, which is never stored)."""
    if not record:
        return None
    x, y = record.get("x"), record.get("y")
    point = (x, y) if type(x) is int and type(y) is int else None
    keys = record.get("keys")
    return after(
        field,
        str(record.get("kind", "")),
        point,
        keys if isinstance(keys, str) else "",
        record.get("moves_focus") is True,
    )


def after_outcome(
    field: Point | None, status: str, action: Action | None = None, record: Mapping[str, Any] | None = None
) -> Point | None:
    """The focused field once an action's outcome is known: executed moves it by the rule above, a failure
    (which may have run part-way) makes it unknown, anything that did not run leaves it."""
    if status == "executed":
        return after_action(field, action) if action is not None else after_record(field, record)
    if status == "failed":
        return None
    return field


def same_field(a: Point | None, b: Point | None, radius: int) -> bool:
    """Whether two click points name the same field (within ``radius`` pixels on each axis)."""
    return a is not None and b is not None and abs(a[0] - b[0]) <= radius and abs(a[1] - b[1]) <= radius
