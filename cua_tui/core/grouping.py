"""One answer for the same decision across runs: when two pending requests of a fleet are the same
decision (their ``Likeness``); the groups the queue shows are core/queue_rules.py's. The rule, stated for
people: docs/commands/fleet.md, "Groups". Pure: the pixels come in decoded; no threads, no I/O.

Two requests are one group only if one answer means the same thing for both: the same action exactly
(its point too, in a region as anywhere), the same rule and tier, and the same screen: the two
screenshots identical but for one box of at most ``CARET`` pixels inside the focused field (its blinking
caret). Text read from the screen never makes two screens alike.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PIL import Image

from .actions import Kind, Point
from .elements import element_box
from .policy import Verdict

if TYPE_CHECKING:
    from .policy import Policy
    from .ports import DecisionRequest

# the most two screens of one group may differ by: one box this wide and this tall (a text caret is 1 or
# 2 pixels wide and about a line high), inside the focused field, and drawn as a caret is: one solid
# colour where the other screen has another solid colour (a glyph's stroke, 3 against 8, is not)
CARET = (4, 24)
# the field's pixels are kept (RGB) to check that, up to this many; a larger "field" allows no caret
FIELD_PIXELS_KEPT = 640 * 64
REGION_PREFIX = "regions."
# bytes of each row's and column's digest: a screen's fingerprint is (width + height) x this many bytes
_DIGEST = 16
Box = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class Likeness:
    """What makes a request the same decision as another (``key``) and the screen it was asked on (``screen``:
    the screenshot's SHA-256; ``size``, ``rows`` and ``cols``: a digest of each row and each column of its
    pixels, which locate any difference between two screens exactly; ``field``: the focused field's box,
    where a caret may blink), or why it is never grouped (``alone``)."""

    key: str = ""
    screen: str = ""
    size: tuple[int, int] = (0, 0)
    rows: bytes = b""
    cols: bytes = b""
    field: Box | None = None
    # the RGB pixels of ``field`` (empty: not kept, the field too large): where a caret may blink
    field_rgb: bytes = b""
    target: str = ""  # the target, for people: "(250, 182) in region 'buy'", "the focused field at (…)"
    alone: str = ""

    @property
    def groupable(self) -> bool:
        return not self.alone and bool(self.key)

    def looks_like(self, other: Likeness) -> bool:
        """Whether both were asked on the same screen: the same picture, or pictures that differ only inside
        one box of at most ``CARET`` pixels within the focused field (the same field in both)."""
        return self.screen_apart(other) is None

    def screen_apart(self, other: Likeness) -> str | None:
        """Why the two were not asked on the same screen, and where the screens differ, for people (None:
        the same screen, a caret aside)."""
        if self.screen and self.screen == other.screen:
            return None
        if not self.rows or not self.cols or not other.rows or not other.cols:
            return "a screen was not read"
        if self.size != other.size or len(self.rows) != len(other.rows) or len(self.cols) != len(other.cols):
            (w, h), (w2, h2) = self.size, other.size
            return f"the screens differ in size ({w}x{h} and {w2}x{h2})"
        rows, cols = _differing(self.rows, other.rows), _differing(self.cols, other.cols)
        if rows is None and cols is None:
            return None  # the very same pixels, encoded differently
        if rows is None or cols is None:
            return "the screens differ"
        (y0, y1), (x0, x1) = rows, cols
        where = f"the screens differ in the box ({x0}, {y0})-({x1 - 1}, {y1 - 1})"
        if self.field is None:
            return f"{where}; no field is focused, where only a caret may differ"
        if self.field != other.field:
            return f"{where}; the focused field's box is not the same in both"
        if x1 - x0 > CARET[0] or y1 - y0 > CARET[1]:
            return f"{where}, larger than a caret ({CARET[0]} x {CARET[1]} pixels)"
        fx0, fy0, fx1, fy1 = self.field
        if not (fx0 <= x0 and x1 <= fx1 and fy0 <= y0 and y1 <= fy1):
            return f"{where}, outside the focused field"
        # a caret: the box is one solid colour in each screen, and not the same one
        mine, theirs = self._box_colours(x0, y0, x1, y1), other._box_colours(x0, y0, x1, y1)
        if len(mine) == 1 and len(theirs) == 1 and mine != theirs:
            return None
        return f"{where}, inside the focused field but not as a caret does"

    def _box_colours(self, x0: int, y0: int, x1: int, y1: int) -> set[bytes]:
        """The distinct RGB colours of the screen's box ``x0, y0, x1, y1`` (inside the field), from the field's
        pixels kept (none kept: no colour, so no caret)."""
        if self.field is None or not self.field_rgb:
            return set()
        fx0, fy0, fx1, _ = self.field
        width = fx1 - fx0
        colours: set[bytes] = set()
        for y in range(y0, y1):
            start = ((y - fy0) * width + (x0 - fx0)) * 3
            row = self.field_rgb[start : start + (x1 - x0) * 3]
            colours.update(row[i : i + 3] for i in range(0, len(row), 3))
        return colours


def _differing(a: bytes, b: bytes) -> tuple[int, int] | None:
    """The first and one past the last index whose digest differs in ``a`` and ``b`` (None: none does). A
    pixel differs only where both its row and its column differ, so these bound every difference exactly."""
    if a == b:
        return None
    # the longest equal prefix and suffix, by halving (each probe one memcmp in C, not a Python loop)
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    first = lo
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    last = len(a) - lo  # one past the last differing byte
    return first // _DIGEST, (last - 1) // _DIGEST + 1


def fingerprint(screen: Image.Image) -> tuple[bytes, bytes]:
    """A digest of each row and of each column of ``screen``'s RGB pixels."""
    rgb = screen if screen.mode == "RGB" else screen.convert("RGB")
    return _lines(rgb.tobytes(), rgb.width * 3), _lines(
        rgb.transpose(Image.Transpose.TRANSPOSE).tobytes(), rgb.height * 3
    )


def _lines(data: bytes, stride: int) -> bytes:
    view = memoryview(data)
    blake = hashlib.blake2b
    return b"".join(blake(view[i : i + stride], digest_size=_DIGEST).digest() for i in range(0, len(data), stride))


def never(reason: str) -> Likeness:
    return Likeness(alone=reason)


def likeness(
    request: DecisionRequest,
    rule: str,
    tier: int,
    policy: Policy | None,
    focused: Point | None,
    screen: Image.Image | None,
    prints: tuple[bytes, bytes] | None = None,
) -> Likeness:
    """The likeness of ``request``, asked by policy ``rule`` (its queue ``tier``), on the decoded ``screen``
    it was asked on (None: not readable), ``focused`` the field typing goes to (core/focus.py); ``prints``:
    the screen's ``fingerprint`` when already known (the runs of one task often wait on the same screen)."""
    action = request.action
    if request.kind == "safety_check":
        return never("the model raised safety checks: never grouped")
    if request.kind != "action" or action is None:
        return never(f"a {request.kind} question is each run's own")
    if policy is None:
        return never("its run's policy is not known")
    where = ""
    if rule.startswith(REGION_PREFIX):
        name = rule.removeprefix(REGION_PREFIX)
        region = next((r for r in policy.regions if r.name == name), None)
        if region is None:
            return never(f"the region of rule {rule!r} is not in its policy")
        if region.sends_out:
            return never(f"the region {name!r} sends data out: each is decided alone")
        where = f" in region {name!r}"
    if policy.classify(action).verdict is Verdict.BLOCK:
        return never("a blocked action is never put to a group")
    if screen is None or request.frame is None:
        return never("its screen could not be read")
    if (screen.width, screen.height) != (request.frame.width, request.frame.height):
        return never("its screen is not the size its request names")
    record = action.to_record()
    point = action.target
    if point is None and action.kind in (Kind.TYPE, Kind.KEYPRESS) and focused is not None:
        record["field"] = list(focused)
        target = f"the focused field at ({focused[0]}, {focused[1]})"
    elif point is None:
        target = "the whole screen"
    else:
        target = f"({point[0]}, {point[1]}){where}"
    key = json.dumps(
        {
            "policy": policy.sha256,
            "rule": rule,
            "tier": tier,
            "action": record,
            "checks": sorted(c.code for c in request.safety_checks),
            "focused": list(focused) if focused is not None else None,
        },
        sort_keys=True,
    )
    rgb = screen if screen.mode == "RGB" else screen.convert("RGB")
    rows, cols = prints if prints is not None else fingerprint(rgb)
    field = element_box(rgb, focused) if focused else None
    kept = b""
    if field is not None and (field[2] - field[0]) * (field[3] - field[1]) <= FIELD_PIXELS_KEPT:
        kept = rgb.crop(field).tobytes()
    return Likeness(key, request.frame.sha256, (screen.width, screen.height), rows, cols, field, kept, target)


# a group's id as the fleet queue writes it, and the most runs one can hold
GROUP_ID_CHARS = 64
MAX_GROUP = 100_000


def group_record(group: object) -> dict[str, Any] | None:
    """The group an answer came with as a record, ``{"id", "size"}``, from the fleet's ``(id, size)`` or
    a recorded dict; None for none, or for one no fleet writes (the supervisor writes only such, replay
    and the export believe only such)."""
    if isinstance(group, dict):
        gid, size = group.get("id"), group.get("size")
    elif isinstance(group, tuple) and len(group) == 2:
        gid, size = group
    else:
        return None
    if not isinstance(gid, str) or not gid.isprintable() or not 0 < len(gid) <= GROUP_ID_CHARS:
        return None
    if type(size) is not int or not 1 <= size <= MAX_GROUP:
        return None
    return {"id": gid, "size": size}
