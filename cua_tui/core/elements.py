"""The on-screen element under a point, found from the pixels alone: the box of the field or button a click
or typing lands in, so that its own text (a button's label, a field's content or placeholder) and the label
beside it can be read from small crops (Tesseract reads a crop of one element far better than a screen,
where borders and other boxes break its page segmentation).

An element is a box drawn with a border, or a filled box whose colour differs from what surrounds it: from
the point, the scan goes out along a few rows and columns until it meets a line of another colour that is
long enough not to be a letter's stroke. Anything else (text on the page, an image) has no box: None.
"""

from __future__ import annotations

from PIL import Image

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 (x1, y1 exclusive)

# summed RGB difference that counts as another colour (anti-aliasing stays below it)
TOLERANCE = 40
# a border is at least this long beside the scan line; a letter's stroke is shorter
LINE = 9
# smaller than this is a glyph or an icon, not a field or a button
MIN_SIZE = (16, 14)
# larger than this is a panel or the page, not one element
MAX_SIZE = (1400, 240)


def _distance(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1]) + abs(a[2] - b[2])


def background(image: Image.Image, point: tuple[int, int], radius: tuple[int, int] = (10, 4)) -> tuple[int, ...]:
    """The most common colour around ``point``: the element's fill, even when the point is on a letter."""
    x, y = point
    box = (
        max(0, x - radius[0]),
        max(0, y - radius[1]),
        min(image.width, x + radius[0] + 1),
        min(image.height, y + radius[1] + 1),
    )
    crop = image.crop(box)
    colours = crop.getcolors(crop.width * crop.height) or [(1, (0, 0, 0))]
    colour: object = max(colours, key=lambda item: item[0])[1]
    if isinstance(colour, tuple):
        return tuple(int(c) for c in colour)
    return (colour,) * 3 if isinstance(colour, int) else (0, 0, 0)


def element_box(image: Image.Image, point: tuple[int, int]) -> Box | None:
    """The box of the element at ``point`` in an RGB ``image`` (its inside, without the border), or None."""
    x, y = point
    if not (0 <= x < image.width and 0 <= y < image.height):
        return None
    pixels = image.load()
    assert pixels is not None
    fill = background(image, point)

    def other(px: int, py: int) -> bool:
        return _distance(tuple(pixels[px, py]), fill) > TOLERANCE  # type: ignore[arg-type]

    def horizontal_line(px: int, py: int) -> bool:
        left, right = max(0, px - LINE), min(image.width - 1, px + LINE)
        return all(other(qx, py) for qx in range(left, right + 1, 3))

    def vertical_line(px: int, py: int, top: int, bottom: int) -> bool:
        span = range(max(top + 2, py - LINE), min(bottom - 2, py + LINE) + 1, 2)
        return len(span) > 0 and all(other(px, qy) for qy in span)

    def edge(step: int, columns: list[int]) -> int | None:
        """The row of the border above (step -1) or below (+1), as most of the columns find it."""
        found = []
        for cx in columns:
            cy = y
            while 0 <= cy < image.height and abs(cy - y) <= MAX_SIZE[1]:
                if other(cx, cy) and horizontal_line(cx, cy):
                    found.append(cy)
                    break
                cy += step
        if len(found) * 2 <= len(columns):
            return None
        found.sort()
        return found[len(found) // 2]

    columns = [c for c in (x - 24, x - 8, x, x + 8, x + 24) if 0 <= c < image.width]
    top, bottom = edge(-1, columns), edge(1, columns)
    if top is None or bottom is None or bottom - top < MIN_SIZE[1]:
        return None
    # just inside the top border: above any text in the element
    row = top + 2 if bottom - top > 6 else y

    def side(step: int) -> int | None:
        cx = x
        while 0 <= cx < image.width and abs(cx - x) <= MAX_SIZE[0]:
            if other(cx, row) and vertical_line(cx, (top + bottom) // 2, top, bottom):
                return cx
            cx += step
        return None

    left, right = side(-1), side(1)
    if left is None or right is None:
        return None
    box = (left + 1, top + 1, right, bottom)
    width, height = box[2] - box[0], box[3] - box[1]
    if not (MIN_SIZE[0] <= width <= MAX_SIZE[0] and MIN_SIZE[1] <= height <= MAX_SIZE[1]):
        return None
    return box
