"""One answer for the same decision across runs: when two pending requests of a fleet are the same
decision, and the groups the queue shows. The rule, stated for people: docs/commands/fleet.md, "Groups".
Pure: the pixels come in decoded; no threads, no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PIL import Image, ImageChops

from .actions import Action, Kind, Point
from .policy import Region, Verdict

if TYPE_CHECKING:
    from .fleet_queue import QueueItem
    from .policy import Policy
    from .ports import DecisionRequest

# the screen around a target that must look the same in every member: this many pixels either side
AROUND = (48, 24)
# a region's box is compared whole, up to this size about its centre
REGION_MOST = (160, 80)
# pixels that differ by more than this (0-255, any channel) count as changed ...
PIXEL_TOLERANCE = 32
# ... and a member whose screen there has more than this share of them changed leaves the group (a
# blinking text caret is 2 x 18 pixels: 0.8% of the window)
CHANGED_SHARE = 0.01
REGION_PREFIX = "regions."


@dataclass(frozen=True, slots=True)
class Likeness:
    """What makes a request the same decision as another (``key``), the screen around its target
    (``patch``: the grey pixels of ``box``, where the window sits on the screen; or ``screen``, the whole
    screen's SHA-256 when the action has no target), or why it is never grouped (``alone``)."""

    key: str = ""
    patch: bytes = b""
    box: tuple[int, int, int, int] = (0, 0, 0, 0)
    screen: str = ""
    target: str = ""  # the target, for people: "region 'send'", "(250, 182)", "the focused field (…)"
    alone: str = ""

    @property
    def groupable(self) -> bool:
        return not self.alone and bool(self.key)

    def looks_like(self, other: Likeness) -> bool:
        """Whether the screen around the target is the same in both (within the caret's tolerance)."""
        if self.screen or other.screen:
            return self.screen == other.screen
        # where the window sits is part of its look: one cut by the screen's edge differs
        if self.box != other.box or not self.patch or len(self.patch) != len(other.patch):
            return False
        if self.patch == other.patch:
            return True  # the common case, the very same pixels: no pixel loop
        # The fleet TUI groups on its UI thread at every refresh: the pixels compared in C (PIL), not in
        # a Python loop over some 4,800 of them per pair.
        size = (self.box[2] - self.box[0], self.box[3] - self.box[1])
        diff = ImageChops.difference(Image.frombytes("L", size, self.patch), Image.frombytes("L", size, other.patch))
        changed = sum(diff.histogram()[PIXEL_TOLERANCE + 1 :])
        return changed <= CHANGED_SHARE * len(self.patch)


def never(reason: str) -> Likeness:
    return Likeness(alone=reason)


def likeness(
    request: DecisionRequest,
    rule: str,
    tier: int,
    policy: Policy | None,
    focused: Point | None,
    screen: Image.Image | None,
) -> Likeness:
    """The likeness of ``request``, asked by policy ``rule`` (its queue ``tier``), on the decoded ``screen``
    it was asked on (None: not readable), ``focused`` the field typing goes to (core/focus.py)."""
    action = request.action
    if request.kind == "safety_check":
        return never("the model raised safety checks: never grouped")
    if request.kind != "action" or action is None:
        return never(f"a {request.kind} question is each run's own")
    if policy is None:
        return never("its run's policy is not known")
    region = None
    if rule.startswith(REGION_PREFIX):
        name = rule.removeprefix(REGION_PREFIX)
        region = next((r for r in policy.regions if r.name == name), None)
        if region is None:
            return never(f"the region of rule {rule!r} is not in its policy")
        if region.sends_out:
            return never(f"the region {name!r} sends data out: each is decided alone")
    if policy.classify(action).verdict is Verdict.BLOCK:
        return never("a blocked action is never put to a group")
    if screen is None:
        return never("its screen could not be read")
    record = action.to_record()
    box, target = _target(action, record, region, focused)
    key = json.dumps(
        {
            "policy": policy.sha256,
            "rule": rule,
            "tier": tier,
            "action": record,
            "checks": sorted(c.code for c in request.safety_checks),
        },
        sort_keys=True,
    )
    if box is None:
        digest = request.frame.sha256 if request.frame is not None else ""
        return Likeness(key, screen=digest or "?", target=target) if digest else never("no screen")
    patch, where = _grey(screen, box)
    if not patch:
        return never("its target is off the screen")
    return Likeness(key, patch, where, target=target)


def _target(
    action: Action, record: dict[str, Any], region: Region | None, focused: Point | None
) -> tuple[tuple[int, int, int, int] | None, str]:
    """The window compared around the action's target (None: the whole screen) and the target in words;
    ``record`` (the action's) is made to name the target as the key needs it."""
    if region is not None:
        # the target is the region: where in it the click lands is not part of the decision
        for coordinate in ("x", "y", "path"):
            record.pop(coordinate, None)
        return _region_box(region.x, region.y, region.width, region.height), f"region {region.name!r}"
    point = action.target
    if point is None and action.kind in (Kind.TYPE, Kind.KEYPRESS) and focused is not None:
        record["field"] = list(focused)
        return _around(focused), f"the focused field at ({focused[0]}, {focused[1]})"
    if point is None:
        return None, "the whole screen"
    return _around(point), f"({point[0]}, {point[1]})"


def _around(point: Point) -> tuple[int, int, int, int]:
    x, y = point
    return x - AROUND[0], y - AROUND[1], x + AROUND[0] + 1, y + AROUND[1] + 1


def _region_box(x: int, y: int, width: int, height: int) -> tuple[int, int, int, int]:
    cx, cy = x + width // 2, y + height // 2
    half_w, half_h = min(width, REGION_MOST[0]) // 2, min(height, REGION_MOST[1]) // 2
    return cx - half_w, cy - half_h, cx + half_w + 1, cy + half_h + 1


def _grey(screen: Image.Image, box: tuple[int, int, int, int]) -> tuple[bytes, tuple[int, int, int, int]]:
    """The grey pixels of ``box`` within the screen, and the box as cut by the screen's edges."""
    x0, y0, x1, y1 = box
    x0, y0 = max(0, x0), max(0, y0)
    x1, y1 = min(screen.width, x1), min(screen.height, y1)
    if x1 <= x0 or y1 <= y0:
        return b"", (0, 0, 0, 0)
    return screen.crop((x0, y0, x1, y1)).convert("L").tobytes(), (x0, y0, x1, y1)


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


# ------------------------------------------------------------------------------------------------
# The groups the queue shows
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Group:
    """Pending requests that are one decision, first to decide first. ``id`` names it while it lasts: its
    key's hash and its first member's ticket (``g1a2b3c-17``). A single request is a group of one."""

    id: str
    members: tuple[QueueItem, ...]

    @property
    def first(self) -> QueueItem:
        return self.members[0]

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def tickets(self) -> tuple[int, ...]:
        return tuple(item.ticket for item in self.members)


def group_items(items: Sequence[QueueItem], alone: frozenset[int] = frozenset()) -> list[Group]:
    """``items`` (in the queue's order) as groups, in the order of their first members: each request joins
    the first group with its key whose first member's screen around the target looks like its own.
    ``alone``: tickets never grouped (a possible injection, say)."""
    groups: list[list[QueueItem]] = []
    open_by_key: dict[str, list[list[QueueItem]]] = {}
    for item in items:
        like = item.likeness
        if like is None or not like.groupable or item.ticket in alone:
            groups.append([item])
            continue
        candidates = open_by_key.setdefault(like.key, [])
        home = next((g for g in candidates if _likeness(g[0]).looks_like(like)), None)
        if home is None:
            home = [item]
            candidates.append(home)
            groups.append(home)
        else:
            home.append(item)
    return [Group(_group_id(members), tuple(members)) for members in groups]


def _likeness(item: QueueItem) -> Likeness:
    assert item.likeness is not None
    return item.likeness


def _group_id(members: list[QueueItem]) -> str:
    first = members[0]
    key = first.likeness.key if first.likeness is not None else str(first.ticket)
    return f"g{hashlib.sha256(key.encode()).hexdigest()[:6]}-{first.ticket}"
