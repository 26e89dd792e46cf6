"""Screenshot rendering off the UI thread: decode, fit, mark the pending target, convert to half-block strips.

A half-block cell ("▀") shows two vertical pixels: the foreground colour is the top pixel, the background
the bottom one. Building the strips (thousands of styled segments) is the expensive part, so it happens in
a worker; the UI thread only swaps the finished list of strips in.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageDraw
from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from ..core.actions import Action
from ..core.imaging import ScreenLimit, decode_screen
from .graphics import encode_sixel

# points of a drag path drawn (a recorded path can be as long as the parser allows)
MAX_MARKED_PATH = 64
# magenta: stands out on the pages the labs and most sites use
MARKER = (255, 0, 200)
MARKER_EDGE = (0, 0, 0)
# amber: the framed area's outline in the overview inset
FRAMED = (255, 200, 0)
INSET_EDGE = (20, 20, 20)
# A zoom magnifies further (half-blocks: 2, 3, ... pixels per half-cell) only while the pane still
# shows at least this much of the screen around the target: a button with its label, a field with
# its label.
NEIGHBOURHOOD = (240, 120)
# the overview inset is a quarter of the pane's width
INSET_FRACTION = 4
# pixels of width below which the inset is left out (a pane too small for it)
INSET_MIN = 16


@dataclass(frozen=True)
class Target:
    """What to mark: a point, a drag path, or a zoom region (display coordinates)."""

    point: tuple[int, int] | None = None
    path: tuple[tuple[int, int], ...] = ()
    region: tuple[int, int, int, int] | None = None
    kind: str = ""
    # the words naming it (OCR): a zoom shows them too if it can
    label: tuple[int, int, int, int] | None = None
    # the field or button under it (core.elements): framed
    element: tuple[int, int, int, int] | None = None

    @classmethod
    def of(cls, action: Action | None) -> Target | None:
        if action is None or action.target is None:
            return None
        return cls(point=action.target, path=action.path, region=action.region, kind=action.kind.value)

    @classmethod
    def from_record(cls, record: dict[str, Any] | None) -> Target | None:
        """The target of an action as its audit record describes it (replay); None when it has none or
        the record's numbers are not plain integers (a hostile run directory)."""
        if not record:
            return None

        def point(value: Any) -> tuple[int, int] | None:
            if isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value):
                return (value[0], value[1])
            return None

        raw_path = record.get("path")
        points = (point(p) for p in (raw_path[:MAX_MARKED_PATH] if isinstance(raw_path, list) else []))
        path = tuple(p for p in points if p is not None)
        region = record.get("region")
        box = (
            tuple(region)
            if isinstance(region, list) and len(region) == 4 and all(type(v) is int for v in region)
            else None
        )
        x, y = record.get("x"), record.get("y")
        centre = (x, y) if type(x) is int and type(y) is int else (path[0] if path else None)
        if centre is None and box is not None:
            centre = ((box[0] + box[2]) // 2, (box[1] + box[3]) // 2)
        if centre is None:
            return None
        return cls(point=centre, path=path, region=box, kind=str(record.get("kind", "")))

    @property
    def centre(self) -> tuple[int, int]:
        assert self.point is not None
        return self.point


@dataclass(frozen=True)
class Rendered:
    """A frame ready for the UI thread."""

    strips: list[Strip]
    width: int  # cells
    height: int  # cells
    # the fitted, marked picture (for graphics protocols)
    image: Image.Image
    zoomed: bool = False
    # Sixel data for the whole pane (the picture padded to its cells' pixels), encoded in the worker
    # so the UI thread only writes it (graphics.SixelPane)
    sixel: str | None = None
    magnify: int = 1  # zoomed: picture pixels per screen pixel
    # zoomed: the screen area shown (x0, y0, x1, y1)
    framed: tuple[int, int, int, int] | None = None
    # zoomed: where the overview inset sits in the picture
    inset: tuple[int, int, int, int] | None = None
    # the screenshot's size in screen pixels
    source: tuple[int, int] = (0, 0)

    def screen_point(self, col: int, row: int, cell: tuple[int, int] = (1, 2)) -> tuple[int, int] | None:
        """The screen pixel under the centre of cell ``(col, row)`` of the picture (counted from its top
        left), where a cell is ``cell`` picture pixels (half-blocks: 1 x 2). None off the picture and on a
        zoom's overview inset. Exact (one cell, one screen pixel) in a zoom magnified at least ``cell``;
        in the whole-screen view off by at most half a cell's worth of screen pixels each way."""
        cw, ch = cell
        # the cell's centre, in picture pixels
        px, py = (col + 0.5) * cw, (row + 0.5) * ch
        if col < 0 or row < 0 or not (px < self.image.width and py < self.image.height):
            return None
        if self.inset is not None:
            ix0, iy0, ix1, iy1 = self.inset
            if ix0 <= px < ix1 and iy0 <= py < iy1:
                return None
        width, height = self.source
        if self.zoomed and self.framed is not None:
            x, y = self.framed[0] + int(px // self.magnify), self.framed[1] + int(py // self.magnify)
        else:
            x, y = int(px * width / self.image.width), int(py * height / self.image.height)
        return min(max(0, x), width - 1), min(max(0, y), height - 1)


def decode(png: bytes, limit: ScreenLimit) -> Image.Image:
    """A screenshot as RGB. It comes from the desktop (a remote sandbox is untrusted) or a run directory:
    its header is checked before decoding against the run's screen (``limit``), so a decompression bomb or
    a picture larger than the run's screen raises ImageRefused, never decodes."""
    return decode_screen(png, limit)


def prepare(
    png: bytes,
    cells_w: int,
    cells_h: int,
    target: Target | None = None,
    *,
    limit: ScreenLimit,
    zoom: bool = False,
    strips: bool = True,
    cell_pixels: tuple[int, int] | None = None,
    sixel: bool = False,
    exact: bool = False,
) -> Rendered:
    """The picture for a pane of ``cells_w`` x ``cells_h`` cells: fitted (or, with ``zoom``, the target's
    neighbourhood magnified with an overview inset: ``_zoom``), with the target marked, as half-block strips.

    For a graphics protocol (``strips=False``) pass the terminal's ``cell_pixels``: the picture is then
    fitted to the pane's real pixel size (never enlarged), so the terminal shows it at full resolution;
    with ``sixel`` it is also encoded as Sixel data for the whole pane (``Rendered.sixel``).
    With ``exact`` a zoom magnifies at least one cell per screen pixel, so a cell names one pixel (an
    action being edited, the desktop taken over).
    Raises core.imaging.ImageRefused for what is not a PNG the run's screen (``limit``) could produce."""
    cells_w, cells_h = max(cells_w, 2), max(cells_h, 2)
    source = decode(png, limit)
    if cell_pixels is not None and not strips:
        box_w, box_h = cells_w * cell_pixels[0], cells_h * cell_pixels[1]
        if not zoom:
            box_w, box_h = min(box_w, source.width), min(box_h, source.height)
    else:
        box_w, box_h = cells_w, cells_h * 2  # half-block pixels are about square
    if zoom and target is not None and target.point is not None:
        graphics = cell_pixels is not None and not strips
        least = (max(cell_pixels) if graphics and cell_pixels else 2) if exact else 1
        zoomed = _zoom(source, target, cells_w, cells_h, box_w, box_h, graphics=graphics, least=least)
        return _with_sixel(zoomed, sixel, cell_pixels, strips)
    scale = min(box_w / source.width, box_h / source.height)
    size = (max(1, round(source.width * scale)), max(1, round(source.height * scale)))
    picture = source.resize(size, Image.Resampling.BILINEAR)
    if target is not None:
        _mark(picture, target, scale, (0, 0), False)
    rendered = Rendered(halfblock(picture) if strips else [], cells_w, cells_h, picture, source=source.size)
    return _with_sixel(rendered, sixel, cell_pixels, strips)


def _with_sixel(rendered: Rendered, sixel: bool, cell_pixels: tuple[int, int] | None, strips: bool) -> Rendered:
    """The frame with its Sixel data for the whole pane, encoded here in the worker (see ``Rendered.sixel``)."""
    if not sixel or cell_pixels is None or strips:
        return rendered
    # the picture cropped to the pane's cells (black beyond it), as textual-image's widget crops it
    box = (0, 0, rendered.width * cell_pixels[0], rendered.height * cell_pixels[1])
    return dataclasses.replace(rendered, sixel=encode_sixel(rendered.image.crop(box)))


def _zoom(
    source: Image.Image,
    target: Target,
    cells_w: int,
    cells_h: int,
    box_w: int,
    box_h: int,
    *,
    graphics: bool,
    least: int = 1,
) -> Rendered:
    """The target's neighbourhood, magnified so that its label is legible (at least ``least`` times), with
    an overview inset."""
    x, y = target.centre
    interest = _interest(target)
    magnify = max(least, _magnification(interest, box_w, box_h, graphics=graphics))
    crop_w, crop_h = min(box_w // magnify, source.width), min(box_h // magnify, source.height)
    cx, cy = _zoom_centre(target, interest, crop_w, crop_h)
    left = min(max(0, cx - crop_w // 2), max(0, source.width - crop_w))
    top = min(max(0, cy - crop_h // 2), max(0, source.height - crop_h))
    framed = (left, top, left + crop_w, top + crop_h)
    picture = source.crop(framed)
    if magnify != 1:
        picture = picture.resize((picture.width * magnify, picture.height * magnify), Image.Resampling.NEAREST)
    # the field typing goes to, outlined
    if target.element is not None and target.kind == "type":
        ex0, ey0, ex1, ey1 = target.element
        ImageDraw.Draw(picture).rectangle(
            (
                (ex0 - 2 - left) * magnify,
                (ey0 - 2 - top) * magnify,
                (ex1 + 1 - left) * magnify,
                (ey1 + 1 - top) * magnify,
            ),
            outline=MARKER,
            width=1,
        )
    if left <= x < left + crop_w and top <= y < top + crop_h:
        _mark(picture, target, float(magnify), (-left, -top), True)
    marked = ((x - left) * magnify, (y - top) * magnify)
    inset = _inset(picture, source, framed, marked)
    return Rendered(
        [] if graphics else halfblock(picture),
        cells_w,
        cells_h,
        picture,
        zoomed=True,
        magnify=magnify,
        framed=framed,
        inset=inset,
        source=source.size,
    )


def _magnification(interest: tuple[int, int, int, int] | None, box_w: int, box_h: int, *, graphics: bool) -> int:
    """How many times a zoom magnifies. Half-blocks: at least 1:1 (one screen pixel per half-cell), more
    while the pane still holds NEIGHBOURHOOD around the target. Graphics protocols already show every
    pixel: 2x."""
    if interest is not None and not graphics:
        # as large as the element (with its label) still fits, at least 1:1, at most what the rule
        # allows
        most = max(1, min(box_w // NEIGHBOURHOOD[0], box_h // NEIGHBOURHOOD[1]) + 1)
        fits = min(box_w // max(1, interest[2] - interest[0]), box_h // max(1, interest[3] - interest[1]))
        return max(1, min(most, fits))
    return 2 if graphics else max(1, min(box_w // NEIGHBOURHOOD[0], box_h // NEIGHBOURHOOD[1]))


def _zoom_centre(
    target: Target, interest: tuple[int, int, int, int] | None, crop_w: int, crop_h: int
) -> tuple[int, int]:
    """The screen point a zoom of ``crop_w`` x ``crop_h`` screen pixels is centred on."""
    x, y = target.centre
    cx, cy = x, y
    if interest is not None:
        # The element and its label in the frame where they fit (per axis); a field wider than the
        # frame shows its start (where its words are); a button wider than it stays centred on the
        # point.
        ix0, iy0, ix1, iy1 = interest
        if ix1 - ix0 <= crop_w:
            cx = (ix0 + ix1) // 2
        elif target.kind == "type":
            cx = ix0 + crop_w // 2
        if iy1 - iy0 <= crop_h:
            cy = (iy0 + iy1) // 2
    elif target.label is not None:
        # The target's label in the frame too where both fit (per axis); where they do not, the
        # target stays centred: it is what is being decided.
        lx0, ly0, lx1, ly1 = target.label
        if max(x, lx1) - min(x, lx0) <= crop_w - 8:
            cx = (max(x, lx1) + min(x, lx0)) // 2
        if max(y, ly1) - min(y, ly0) <= crop_h - 8:
            cy = (max(y, ly1) + min(y, ly0)) // 2
    return cx, cy


def _interest(target: Target) -> tuple[int, int, int, int] | None:
    """What a zoom must show of the target, when the element under it is known: the element (a field:
    with its label) and a margin. None: not known (the zoom frames the point and the OCR's label line)."""
    if target.element is None:
        return None
    boxes = [target.element] + ([target.label] if target.label is not None and target.kind == "type" else [])
    margin = 6
    return (
        min(b[0] for b in boxes) - margin,
        min(b[1] for b in boxes) - margin,
        max(b[2] for b in boxes) + margin,
        max(b[3] for b in boxes) + margin,
    )


def _inset(
    picture: Image.Image, source: Image.Image, framed: tuple[int, int, int, int], marked: tuple[int, int]
) -> tuple[int, int, int, int] | None:
    """Paste a thumbnail of the whole screen, the framed area outlined, into the corner of ``picture``
    farthest from the marked target; where it went (None: the picture is too small for one)."""
    width = picture.width // INSET_FRACTION
    height = round(width * source.height / source.width)
    if width < INSET_MIN or height * 2 > picture.height:
        return None
    thumb = source.resize((width, height), Image.Resampling.BILINEAR)
    draw = ImageDraw.Draw(thumb)
    sx, sy = width / source.width, height / source.height
    x0, y0, x1, y1 = framed
    if (x1 - x0) * sx < 4 or (y1 - y0) * sy < 4:  # too small to outline: a block where it is
        cx, cy = round((x0 + x1) / 2 * sx), round((y0 + y1) / 2 * sy)
        draw.rectangle((cx - 1, cy - 1, cx + 1, cy + 1), fill=FRAMED)
    draw.rectangle(
        (
            round(x0 * sx),
            round(y0 * sy),
            max(round(x0 * sx) + 1, round(x1 * sx) - 1),
            max(round(y0 * sy) + 1, round(y1 * sy) - 1),
        ),
        outline=FRAMED,
        width=1,
    )
    framed_thumb = Image.new("RGB", (width + 2, height + 2), INSET_EDGE)
    framed_thumb.paste(thumb, (1, 1))
    # The corner away from the target, so the inset never hides what is being decided.
    right = marked[0] < picture.width / 2
    bottom = marked[1] < picture.height / 2
    px = picture.width - framed_thumb.width if right else 0
    py = picture.height - framed_thumb.height if bottom else 0
    picture.paste(framed_thumb, (px, py))
    return (px, py, px + framed_thumb.width, py + framed_thumb.height)


def _mark(img: Image.Image, target: Target, scale: float, offset: tuple[int, int], zoom: bool) -> None:
    draw = ImageDraw.Draw(img)

    def at(p: tuple[int, int]) -> tuple[int, int]:
        # the picture pixel holding the screen pixel (floor, not round: rounding put the mark up to half a
        # picture pixel off, in the next cell of the pane, where a click would not land on it)
        return math.floor((p[0] + offset[0]) * scale), math.floor((p[1] + offset[1]) * scale)

    if target.region is not None and target.kind == "zoom":
        x0, y0 = at(target.region[:2])
        x1, y1 = at(target.region[2:])
        draw.rectangle((x0, y0, x1, y1), outline=MARKER, width=1)
        return
    if len(target.path) > 1:
        draw.line([at(p) for p in target.path], fill=MARKER, width=1)
        end = at(target.path[-1])
        draw.rectangle((end[0] - 1, end[1] - 1, end[0] + 1, end[1] + 1), outline=MARKER)
    assert target.point is not None
    x, y = at(target.point)
    if zoom:
        # Magnified, the label under the target is what the reviewer reads: a ring with ticks
        # outside it and one centre pixel, instead of a cross drawn over the letters.
        ring = 7
        draw.ellipse((x - ring, y - ring, x + ring, y + ring), outline=MARKER, width=1)
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            draw.line((x + dx * (ring + 1), y + dy * (ring + 1), x + dx * (ring + 3), y + dy * (ring + 3)), fill=MARKER)
        draw.point((x, y), fill=MARKER)
        return
    arm = 3
    for colour, width in ((MARKER_EDGE, 3), (MARKER, 1)):
        draw.line((x - arm, y, x + arm, y), fill=colour, width=width)
        draw.line((x, y - arm, x, y + arm), fill=colour, width=width)
    draw.ellipse((x - arm - 2, y - arm - 2, x + arm + 2, y + arm + 2), outline=MARKER, width=1)


_STYLE_CACHE: dict[tuple[bytes, bytes], Style] = {}


def halfblock(img: Image.Image) -> list[Strip]:
    """Rows of "▀" cells: top pixel as foreground, bottom pixel as background; equal neighbours merged."""
    width, height = img.size
    if height % 2:
        padded = Image.new("RGB", (width, height + 1))
        padded.paste(img, (0, 0))
        img, height = padded, height + 1
    data = img.tobytes()
    stride = width * 3
    strips = []
    cache = _STYLE_CACHE
    if len(cache) > 200_000:
        cache.clear()
    for row in range(0, height, 2):
        top = data[row * stride : (row + 1) * stride]
        bottom = data[(row + 1) * stride : (row + 2) * stride]
        segments: list[Segment] = []
        run_style: Style | None = None
        run = 0
        for col in range(0, stride, 3):
            key = (top[col : col + 3], bottom[col : col + 3])
            style = cache.get(key)
            if style is None:
                t, b = key
                style = Style(color=Color.from_rgb(t[0], t[1], t[2]), bgcolor=Color.from_rgb(b[0], b[1], b[2]))
                cache[key] = style
            if style is run_style:
                run += 1
            else:
                if run:
                    segments.append(Segment("▀" * run, run_style))
                run_style, run = style, 1
        if run:
            segments.append(Segment("▀" * run, run_style))
        strips.append(Strip(segments, width))
    return strips
