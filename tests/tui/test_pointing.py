"""From a cell of the desktop pane to a screen pixel (issue 24, point 6): a click on the pane, an edit's
point. In a zoom magnified at least one cell per screen pixel (an edit, a takeover) the mapping is exact:
the cell where a point is marked maps back to that very point, and every pixel of the framed area has a
cell. In the whole-screen view a cell covers several pixels: the error is at most half a cell each way,
measured here at several pane sizes."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from cua_tui.core.imaging import ScreenLimit
from cua_tui.tui.frames import Target, prepare

SCREEN = (1024, 720)
LIMIT = ScreenLimit(*SCREEN)


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", SCREEN, (30, 60, 90)).save(out, format="PNG")
    return out.getvalue()


PICTURE = png()


@pytest.mark.parametrize("cells", [(94, 40), (60, 20), (150, 45), (40, 30)])
@pytest.mark.parametrize("point", [(500, 300), (3, 2), (1020, 717), (120, 422)])
def test_the_exact_zoom_maps_each_cell_to_one_pixel_and_back(cells: tuple[int, int], point: tuple[int, int]) -> None:
    rendered = prepare(PICTURE, *cells, Target(point=point), limit=LIMIT, zoom=True, exact=True)
    assert rendered.zoomed and rendered.magnify >= 2 and rendered.framed is not None
    left, top, right, bottom = rendered.framed
    # the cell holding the point's mark maps back to the point itself
    m = rendered.magnify
    col, row = (point[0] - left) * m, (point[1] - top) * m // 2
    assert rendered.screen_point(col, row) == point
    # every cell names one pixel, which shows under it: its picture pixels hold the cell's centre
    seen = set()
    for r in range(len(rendered.strips)):
        for c in range(rendered.image.width):
            found = rendered.screen_point(c, r)
            if found is None:
                continue  # the overview inset
            x, y = found
            assert (x - left) * m <= c + 0.5 < (x - left + 1) * m
            assert (y - top) * m <= 2 * r + 1 < (y - top + 1) * m
            seen.add(found)
    # and every pixel of the framed area has at least one cell (the inset hides a corner)
    inset = rendered.inset
    hidden = 0
    if inset is not None:
        hidden = ((inset[2] - inset[0]) // m + 2) * ((inset[3] - inset[1]) // m + 2)
    assert len(seen) >= (right - left) * (bottom - top) - hidden


@pytest.mark.parametrize(("cells", "worst"), [((94, 40), (6, 11)), ((60, 20), (9, 18)), ((150, 45), (4, 8))])
def test_the_whole_screen_view_is_off_by_at_most_half_a_cell(cells: tuple[int, int], worst: tuple[int, int]) -> None:
    rendered = prepare(PICTURE, *cells, None, limit=LIMIT)
    width, height = rendered.image.size
    cell_w, cell_h = SCREEN[0] / width, 2 * SCREEN[1] / height
    off = [0, 0]
    for x in range(SCREEN[0]):
        # the cell a screen pixel is drawn in, and the pixel that cell names
        named = rendered.screen_point(int(x * width / SCREEN[0]), 0)
        assert named is not None
        off[0] = max(off[0], abs(named[0] - x))
    for y in range(SCREEN[1]):
        named = rendered.screen_point(0, int(y * height / SCREEN[1]) // 2)
        assert named is not None
        off[1] = max(off[1], abs(named[1] - y))
    assert off[0] <= cell_w / 2 + 1 and off[1] <= cell_h / 2 + 1
    assert tuple(off) == worst  # the figures docs/tui.md quotes for 160x48 (the 94 x 40 pane)


def test_nothing_is_named_off_the_picture_or_on_the_inset() -> None:
    rendered = prepare(PICTURE, 94, 40, Target(point=(500, 300)), limit=LIMIT, zoom=True, exact=True)
    assert rendered.screen_point(-1, 0) is None and rendered.screen_point(0, 10_000) is None
    inset = rendered.inset
    assert inset is not None
    assert rendered.screen_point(inset[0] + 1, (inset[1] + 2) // 2) is None


@pytest.mark.parametrize("zoom", [True, False])
@pytest.mark.parametrize("point", [(500, 300), (120, 422), (900, 80)])
def test_the_marker_is_drawn_where_a_click_on_it_lands(zoom: bool, point: tuple[int, int]) -> None:
    """The marker's centre, found in the picture by its colour, sits in a cell that names the marked
    pixel: exactly in the exact zoom, within half a cell in the whole view."""
    from cua_tui.tui.frames import MARKER

    rendered = prepare(PICTURE, 94, 40, Target(point=point), limit=LIMIT, zoom=zoom, exact=zoom)
    image = rendered.image
    inset = rendered.inset or (0, 0, 0, 0)
    marked = [
        (x, y)
        for y in range(image.height)
        for x in range(image.width)
        if image.getpixel((x, y)) == MARKER and not (inset[0] <= x < inset[2] and inset[1] <= y < inset[3])
    ]
    assert marked, "no marker drawn"
    xs, ys = [x for x, _ in marked], [y for _, y in marked]
    centre = ((min(xs) + max(xs)) // 2, (min(ys) + max(ys)) // 2)
    named = rendered.screen_point(centre[0], centre[1] // 2)
    assert named is not None
    if zoom:
        assert named == point
    else:
        half_w, half_h = SCREEN[0] / image.width / 2, SCREEN[1] / image.height
        assert abs(named[0] - point[0]) <= half_w + 1 and abs(named[1] - point[1]) <= half_h + 1
