"""Where an action lands on its screen, from its audit record: the one geometry both exports draw.

The record comes from a run directory, so it is read as untrusted: only integers on the screen count, a
drag path is capped, and anything else simply has no marker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_PATH = 256  # the parser's own bound on a drag path


@dataclass(frozen=True)
class Marker:
    """``points``: one point (click, move, scroll...) or a drag path; ``region``: a zoom's (x0, y0, x1, y1);
    ``scroll``: (right, down) wheel notches at the point."""

    points: tuple[tuple[int, int], ...] = ()
    region: tuple[int, int, int, int] | None = None
    scroll: tuple[int, int] = (0, 0)

    @property
    def empty(self) -> bool:
        return not self.points and self.region is None


def _coord(value: Any, side: int) -> int | None:
    return value if type(value) is int and 0 <= value < max(side, 1) else None


def _point(x: Any, y: Any, width: int, height: int) -> tuple[int, int] | None:
    px, py = _coord(x, width), _coord(y, height)
    return None if px is None or py is None else (px, py)


def marker_of(action: Any, width: int, height: int) -> Marker:
    """The marker of an action record (``ActionProposed.action``) on a ``width`` x ``height`` screen."""
    if not isinstance(action, dict):
        return Marker()
    region = action.get("region")
    if isinstance(region, list) and len(region) == 4:
        a, b = _point(region[0], region[1], width, height), _point(region[2], region[3], width + 1, height + 1)
        if a is not None and b is not None and a[0] <= b[0] and a[1] <= b[1]:
            return Marker(region=(a[0], a[1], b[0], b[1]))
    path = action.get("path")
    if isinstance(path, list) and len(path) >= 2:
        points = []
        for item in path[:MAX_PATH]:
            point = _point(item[0], item[1], width, height) if isinstance(item, list) and len(item) == 2 else None
            if point is None:
                return Marker()
            points.append(point)
        return Marker(points=tuple(points))
    point = _point(action.get("x"), action.get("y"), width, height)
    if point is None:
        return Marker()
    sx, sy = action.get("scroll_x", 0), action.get("scroll_y", 0)
    scroll = (sx if type(sx) is int else 0, sy if type(sy) is int else 0)
    return Marker(points=(point,), scroll=scroll)
