"""Pictures through the terminal's graphics: its cell size in pixels, Sixel encoding, and the Sixel pane.

The desktop pane's worker encodes each frame (``encode_sixel``); ``SixelPane`` only writes that data, so
the UI thread never encodes.
"""

from __future__ import annotations

import os
import re
import sys
import termios
from array import array
from fcntl import ioctl

from PIL import Image
from rich.control import Control
from rich.segment import ControlType, Segment
from rich.style import Style
from textual.dom import NoScreen
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

# what textual-image assumes when nothing tells it the cell size: a VT340's
DEFAULT_CELL = (10, 20)
# the largest cell believed: the pane's pictures are sized from it, so a terminal or a setting that
# claims an absurd one must not make a worker allocate a picture of gigapixels
MAX_CELL = (128, 256)
# rows of pixels in a Sixel band
BAND = 6
MAX_COLOURS = 256

# RGB 0-255 -> Sixel's 0-100 percent
_PERCENT = [(v * 100 + 127) // 255 for v in range(256)]


def _row_bits() -> list[list[bytes]]:
    tables = []
    for colour in range(MAX_COLOURS):
        rows = []
        for row in range(BAND):
            table = bytearray(MAX_COLOURS)
            table[colour] = 1 << row
            rows.append(bytes(table))
        tables.append(rows)
    return tables


# per colour and row of a band: a translate table giving that colour the row's bit, the rest 0
_ROW_BIT = _row_bits()
# a band's six bits (0-63) -> the Sixel characters "?" to "~"
_TO_SIXEL = bytes(range(63, 127)) + bytes(192)
# four or more of one character: shorter runs cost less written out than as "!N"
_RUN = re.compile(rb"(.)\1{3,}")
_COUNTS = [b"!%d" % n for n in range(2048)]
# marked as a no-op control (cursor forward by 0): Rich and Textual give the data no width
_NO_WIDTH = ((ControlType.CURSOR_FORWARD, 0),)
_PLAIN = Style()
_DIGITS = re.compile(r"[0-9]{1,4}")


def cell_pixels() -> tuple[int, int]:
    """The terminal's cell in pixels (width, height).

    From the pixel fields of the tty's window size, which a Sixel terminal fills (xterm, foot, WezTerm,
    mlterm, tmux); asked at each call, so a font size changed in the terminal counts at the next frame.
    Else TEXTUAL_CELL_WIDTH / TEXTUAL_CELL_HEIGHT (textual-serve sets them), else a VT340's cell. A size
    past ``MAX_CELL`` is not believed.
    """
    stdout = sys.__stdout__
    if stdout is not None and not stdout.closed and stdout.isatty():
        size = array("H", [0, 0, 0, 0])
        try:
            ioctl(stdout.fileno(), termios.TIOCGWINSZ, size)
        except OSError:
            pass
        rows, columns, width, height = size
        if rows and columns and _believable(width // columns, height // rows):
            return width // columns, height // rows
    cell_w, cell_h = os.environ.get("TEXTUAL_CELL_WIDTH", ""), os.environ.get("TEXTUAL_CELL_HEIGHT", "")
    # ASCII digits only: str.isdigit takes "²", which int() refuses
    if _DIGITS.fullmatch(cell_w) and _DIGITS.fullmatch(cell_h) and _believable(int(cell_w), int(cell_h)):
        return int(cell_w), int(cell_h)
    return DEFAULT_CELL


def _believable(width: int, height: int) -> bool:
    return 0 < width <= MAX_CELL[0] and 0 < height <= MAX_CELL[1]


def _count(n: int) -> bytes:
    return _COUNTS[n] if n < len(_COUNTS) else b"!%d" % n


def _run(match: re.Match[bytes]) -> bytes:
    run = match[0]
    return _count(len(run)) + run[:1]


def _repeat(char: bytes, n: int) -> bytes:
    return _count(n) + char if n > 3 else char * n


def encode_sixel(image: Image.Image) -> str:
    """``image`` as Sixel data: at most 256 colours (Pillow's fast octree, as textual-image quantizes),
    each band of six rows as one run-length encoded line per colour present in it, from the colour's
    first column in the band to its last."""
    rgb = image if image.mode in ("RGB", "RGBA") else image.convert("RGB")
    picture = rgb.quantize(MAX_COLOURS, Image.Quantize.FASTOCTREE)
    width, height = picture.size
    data = picture.tobytes()
    palette = picture.getpalette() or []
    out = [b'\x1bP0;0;0q"1;1;%d;%d' % (width, height)]
    for colour, pixels in enumerate(picture.histogram()):
        if not pixels:
            continue
        r, g, b = palette[3 * colour : 3 * colour + 3]
        out.append(b"#%d;2;%d;%d;%d" % (colour, _PERCENT[r], _PERCENT[g], _PERCENT[b]))
    to_int, run = int.from_bytes, _RUN.sub
    for top in range(0, height, BAND):
        rows_in_band = min(BAND, height - top)
        band = data[top * width : (top + rows_in_band) * width]
        rows = [band[i * width : (i + 1) * width] for i in range(rows_in_band)]
        lines = []
        for colour in set(band):
            start, end = width, 0
            for row in rows:
                x = row.find(colour)
                if x >= 0:
                    start = min(start, x)
                    end = max(end, row.rfind(colour) + 1)
            # The rows' bits are disjoint, so OR-ing the rows as integers packs each column's sixel.
            bits, tables = 0, _ROW_BIT[colour]
            for i, row in enumerate(rows):
                bits |= to_int(row[start:end].translate(tables[i]))
            sixels = bits.to_bytes(end - start).translate(_TO_SIXEL)
            lines.append(b"#%d%s%s" % (colour, _repeat(b"?", start), run(_run, sixels)))
        out.append(b"$".join(lines))
        out.append(b"-")
    out.append(b"\x1b\\")
    return b"".join(out).decode("ascii")


class SixelPane(Widget, can_focus=False):
    """Writes Sixel data encoded elsewhere (the desktop pane's worker) over its whole area, the way
    textual-image's Sixel widget injects its data: blank strips, and on the last one the cursor moved to
    the pane's corner, the data, and the cursor moved back to where the line goes on."""

    DEFAULT_CSS = "SixelPane { width: 100%; height: 100%; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.sixel: str | None = None
        self.cells = Size(0, 0)

    def show(self, sixel: str, cells: Size) -> None:
        """Write ``sixel``, a picture of ``cells`` (from the pane's top left corner)."""
        self.sixel, self.cells = sixel, cells
        self.refresh()

    def clear(self) -> None:
        """No picture: what is behind the pane shows through."""
        self.sixel = None
        self.refresh()

    def render_lines(self, crop: Region) -> list[Strip]:
        # Not on a screen in front (a dialog over it): nothing, as textual-image's widget does.
        try:
            if self.sixel is None or not self.screen.is_active:
                return []
        except NoScreen:
            return []
        blank = Strip.blank(crop.width, Style(bgcolor=self.background_colors[1].rich_color))
        lines = [blank] * crop.height
        # A crop smaller than the pane (clipped, or one line's style asked for under the mouse) gets
        # the blank strips: encoding the part here would cost the UI thread a frame's encoding. So
        # does data for a larger pane: it would spill over the neighbours until the next frame.
        region = self.region
        whole = crop == self.size.region and region.size == crop.size
        if not whole or self.cells.width > crop.width or self.cells.height > crop.height or not crop.area:
            return lines
        lines[-1] = Strip(
            [
                *blank,
                Segment(Control.move_to(region.x, region.y).segment.text, _PLAIN, _NO_WIDTH),
                Segment(self.sixel, _PLAIN, _NO_WIDTH),
                Segment(Control.move_to(region.right, region.bottom - 1).segment.text, _PLAIN, _NO_WIDTH),
            ],
            crop.width,
        )
        return lines
