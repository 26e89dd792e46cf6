"""A reviewer's edit of a pending action: what may change, the checks an edit passes, and the words the
model hears about it."""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass
from typing import Any

from .actions import MAX_SCROLL_NOTCHES, MAX_TEXT, Action, ActionError, Kind, Point, parse_chord_text
from .geometry import OutOfRange, Scaling, Size
from .text import escape, hidden, visible

# what an edit may change, by kind; every other field stays as proposed
POINTED = frozenset({Kind.CLICK, Kind.DOUBLE_CLICK, Kind.TRIPLE_CLICK, Kind.MOVE, Kind.MOUSE_DOWN, Kind.MOUSE_UP})
EDITABLE: dict[Kind, frozenset[str]] = {
    **{kind: frozenset({"point"}) for kind in POINTED},
    Kind.SCROLL: frozenset({"point", "scroll_x", "scroll_y"}),
    Kind.DRAG: frozenset({"path"}),
    Kind.TYPE: frozenset({"text"}),
    Kind.KEYPRESS: frozenset({"chord"}),
    Kind.HOLD_KEY: frozenset({"chord"}),
}


def editable(action: Action | None) -> bool:
    """True if ``e`` can change this action (a wait, a zoom or a screenshot has nothing to point or type)."""
    return action is not None and action.kind in EDITABLE


@dataclass(frozen=True, slots=True)
class Edited:
    """An approved edit: the action as the model proposed it and as it will run."""

    proposed: Action
    ran: Action

    def to_record(self) -> dict[str, Any]:
        """Both forms for the audit log (typed text as length and SHA-256, as everywhere), and what ran in
        words, as a proposal's summary says it."""
        return {"proposed": self.proposed.to_record(), "ran": self.ran.to_record(), "summary": self.ran.describe()}


def apply_edit(
    action: Action,
    screen: Size,
    *,
    point: Point | None = None,
    start: Point | None = None,
    end: Point | None = None,
    text: str | None = None,
    chord: str | None = None,
    scroll: tuple[int, int] | None = None,
) -> Action:
    """``action`` with the given parts changed; ActionError (with a reason for people) when the change
    does not fit the action's kind, leaves the screen or breaks a bound of the parser."""
    if not editable(action):
        raise ActionError("not_editable", f"a {action.kind.value} has nothing to edit")
    changes: dict[str, Any] = {}
    allowed = EDITABLE[action.kind]
    if point is not None:
        _require("point", allowed, action)
        changes["point"] = _on_screen(point, screen, "the point")
    if start is not None or end is not None:
        _require("path", allowed, action)
        path = list(action.path)
        if start is not None:
            path[0] = _on_screen(start, screen, "the drag's start")
        if end is not None:
            path[-1] = _on_screen(end, screen, "the drag's end")
        changes["path"] = tuple(path)
    if text is not None:
        _require("text", allowed, action)
        if not text:
            raise ActionError("bad_text", "the text to type is empty (reject the action instead)")
        if len(text) > MAX_TEXT:
            raise ActionError("bad_text", f"the text to type has {len(text)} characters; at most {MAX_TEXT}")
        changes["text"] = text
    if chord is not None:
        _require("chord", allowed, action)
        changes["chord"] = parse_chord_text(chord)
    if scroll is not None:
        _require("scroll_x", allowed, action)
        sx, sy = scroll
        if not (abs(sx) <= MAX_SCROLL_NOTCHES and abs(sy) <= MAX_SCROLL_NOTCHES):
            raise ActionError("bad_scroll", f"a scroll moves at most {MAX_SCROLL_NOTCHES} notches each way")
        if sx == sy == 0:
            raise ActionError("bad_scroll", "a scroll of no notches does nothing (reject the action instead)")
        changes["scroll_x"], changes["scroll_y"] = sx, sy
    return dataclasses.replace(action, **changes)


def check_edit(proposed: Action, ran: Action, screen: Size) -> str | None:
    """Why ``ran`` is not an edit of ``proposed`` a reviewer may make (None: it is one). The run's own
    check of what a front end sends: the same kind, only the kind's editable parts changed, in bounds."""
    if not editable(proposed):
        return f"a {proposed.kind.value} has nothing to edit"
    if ran.kind is not proposed.kind:
        return f"an edit keeps the action's kind ({proposed.kind.value}, not {ran.kind.value})"
    if ran == proposed:
        return "the edit changes nothing"
    allowed = EDITABLE[proposed.kind]
    for spec in dataclasses.fields(Action):
        if spec.name not in allowed and getattr(ran, spec.name) != getattr(proposed, spec.name):
            return f"an edit of a {proposed.kind.value} cannot change its {spec.name}"
    try:
        rebuilt = apply_edit(
            proposed,
            screen,
            point=ran.point if "point" in allowed and ran.point is not None else None,
            start=ran.path[0] if "path" in allowed and len(ran.path) == len(proposed.path) else None,
            end=ran.path[-1] if "path" in allowed and len(ran.path) == len(proposed.path) else None,
            text=ran.text if "text" in allowed else None,
            chord=ran.chord if "chord" in allowed else None,
            scroll=(ran.scroll_x, ran.scroll_y) if "scroll_x" in allowed else None,
        )
    except ActionError as exc:
        return str(exc.reason)
    if rebuilt != ran:
        # a drag's inner points, a chord not in canonical form, a point added where none was
        return "the edit changes more than the editor can"
    return None


def edit_note(edited: Edited, scaling: Scaling) -> str:
    """What the model hears after ``OK`` for an action a reviewer changed: that it was changed, and what
    ran, in the model's own coordinates (typed text by its length only, as the record keeps it)."""
    before, after = model_words(edited.proposed, scaling), model_words(edited.ran, scaling)
    if edited.ran.kind is Kind.TYPE:
        return (
            f"The reviewer changed the text before it ran: {after} were typed "
            f"(you proposed {len(edited.proposed.text)})."
        )
    return f"The reviewer changed this action before it ran: {after} ran, not {before}."


def model_words(action: Action, scaling: Scaling) -> str:
    """``describe`` in the coordinates of the screenshot the model was shown (typed text by its length)."""
    if scaling.is_identity:
        return _words(action)
    try:
        point = scaling.to_model(*action.point) if action.point is not None else None
        path = tuple(scaling.to_model(*p) for p in action.path)
    except OutOfRange:
        return _words(action)
    return _words(dataclasses.replace(action, point=point, path=path))


def _words(action: Action) -> str:
    if action.kind is Kind.TYPE:
        return f"{len(action.text)} characters"
    return action.describe()


def _require(part: str, allowed: frozenset[str], action: Action) -> None:
    if part not in allowed:
        raise ActionError("not_editable", f"a {action.kind.value} has no {part} to edit")


def _on_screen(point: Point, screen: Size, what: str) -> Point:
    x, y = point
    if not screen.contains(x, y):
        raise ActionError("bad_point", f"{what} ({x}, {y}) is outside the {screen} screen")
    return x, y


# ------------------------------------------------------------------------------------------------
# Typed text in a one-line editor: every hidden character written out, and back
# --------------------------------------------------------------------------------------------------
_NAMED = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.)|$)", re.DOTALL)


def escape_text(text: str) -> str:
    """``text`` on one line with nothing hidden: a backslash, Enter (``\\n``), Tab and a carriage return
    are written as backslash escapes, and so is every character ``core.text.hidden`` flags (``\\x1b``,
    ``\\u200b``, ``\\U000e0041``): the same characters ``visible`` shows as stand-ins."""
    return "".join(_NAMED.get(c) or (escape(c) if hidden(c) else c) for c in text)


def unescape_text(written: str) -> str:
    """The text ``escape_text`` wrote (and what a reviewer typed in that form); ActionError for a backslash
    that starts no escape, or an escape of no code point."""
    singles = {"\\": "\\", "n": "\n", "t": "\t", "r": "\r"}

    def one(match: re.Match[str]) -> str:
        hex2, hex4, hex8, other = match.groups()
        digits = hex2 or hex4 or hex8
        if digits:
            if int(digits, 16) > sys.maxunicode:
                raise ActionError("bad_text", f"\\U{digits} is not a code point (the last is \\U0010ffff)")
            return chr(int(digits, 16))
        if other in singles:
            return singles[other]
        shown = "a backslash at the end" if other is None else f"\\{visible(other)}"
        raise ActionError("bad_text", f"{shown} is not an escape (\\\\ types a backslash)")

    return _ESCAPE.sub(one, written)


def written_escapes(written: str) -> list[tuple[int, int]]:
    """Where ``written`` (the editor's form) escapes a character other than a backslash: the spans a front
    end draws apart, read by the same grammar as ``unescape_text`` (``\\\\u200b`` is a backslash and text)."""
    spans = []
    for match in _ESCAPE.finditer(written):
        hex2, hex4, hex8, other = match.groups()
        if hex2 or hex4 or hex8 or other in ("n", "t", "r"):
            spans.append(match.span())
    return spans
