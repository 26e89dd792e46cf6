"""The desktop pane's Sixel widget writes the Sixel data the worker encoded for the whole pane, and that
data, decoded, is the worker's picture in Sixel's 256 colours."""

from __future__ import annotations

import dataclasses
import io
import re
import subprocess
import sys

import pytest
from PIL import Image, ImageDraw
from pilot_helpers import until
from rich.control import Control
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.screen import ModalScreen
from textual.strip import Strip
from textual.widgets import Static

from cua_tui.core.imaging import ScreenLimit
from cua_tui.tui.desktop_view import DesktopView, Shot
from cua_tui.tui.frames import Target, prepare
from cua_tui.tui.graphics import SixelPane, cell_pixels, encode_sixel

CELL = (8, 17)


def page() -> bytes:
    img = Image.new("RGB", (1024, 720), (246, 247, 250))
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 0, 1024, 60), fill=(30, 50, 90))
    for i in range(12):
        draw.text((40, 90 + 40 * i), f"line {i}: the quick brown fox", fill=(20, 20, 20))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


class Pane(App[None]):
    CSS = "#desktop { width: 60; height: 24; }"

    def compose(self) -> ComposeResult:
        yield DesktopView(graphics=SixelPane, id="desktop")


def written(strip: Strip) -> str:
    return "".join(segment.text for segment in strip)


async def test_the_pane_writes_the_workers_sixel_data() -> None:
    app = Pane()
    async with app.run_test(size=(70, 30)) as pilot:
        view = app.query_one(DesktopView)
        assert view.wants_sixel and not view.wants_strips
        w, h = view.size
        rendered = prepare(
            page(),
            w,
            h,
            Target(point=(512, 360)),
            limit=ScreenLimit(1024, 720),
            strips=False,
            cell_pixels=CELL,
            sixel=True,
        )
        assert rendered.sixel is not None and rendered.sixel.startswith("\x1bP")
        # a harmless colour selection added before the terminator: the test sees whose data it is
        sixel = rendered.sixel[: -len("\x1b\\")] + "#0\x1b\\"
        rendered = dataclasses.replace(rendered, sixel=sixel)
        view.show(rendered)
        await pilot.pause()
        pane = view.query_one("#desktop-image", SixelPane)
        assert pane.size == (w, h)  # the widget fills the pane: its crop is the worker's
        lines = pane.render_lines(Region(0, 0, w, h))
        assert len(lines) == h and all(line.cell_length == w for line in lines)  # the data takes no cells
        x, y, right, bottom = pane.region.x, pane.region.y, pane.region.right, pane.region.bottom
        # On the last line: to the pane's corner, the worker's data, back to where the line goes on.
        corner, back = Control.move_to(x, y).segment.text, Control.move_to(right, bottom - 1).segment.text
        assert written(lines[-1]).endswith(corner + sixel + back)
        assert not any("\x1bP" in written(line) for line in lines[:-1])
        # A crop smaller than the pane (clipped, or one line asked for its style) gets blank lines:
        # no encoding on the UI thread, no data for another size.
        for crop in (Region(0, 0, w, h // 2), Region(0, 3, w, 1)):
            part = pane.render_lines(crop)
            assert len(part) == crop.height and not any("\x1bP" in written(line) for line in part)
        # Blank lines too for data of a larger pane (it would spill over the neighbours); data of a
        # smaller one is written from the corner.
        view.show(dataclasses.replace(rendered, width=w + 1))
        assert not any("\x1bP" in written(line) for line in pane.render_lines(Region(0, 0, w, h)))
        view.show(dataclasses.replace(rendered, width=w - 4, height=h - 2))
        assert sixel in written(pane.render_lines(Region(0, 0, w, h))[-1])
        assert not any("\x1bP" in written(line) for line in pane.render_lines(Region(0, 1, w, h - 1)))
        # No picture: nothing, the desktop pane's placeholder shows through.
        view.blank("no screenshot")
        await pilot.pause()
        assert pane.render_lines(Region(0, 0, w, h)) == []
        assert "no screenshot" in "".join(written(view.render_line(y)) for y in range(h))


async def test_a_frame_from_the_worker_lands_as_sixel_for_the_whole_pane() -> None:
    app = Pane()
    async with app.run_test(size=(70, 30)) as pilot:
        view = app.query_one(DesktopView)
        view.show_shot(Shot.of(page(), "a" * 64, ScreenLimit(1024, 720)), Target(point=(512, 360)), zoom=False)
        await until(pilot, lambda: view.settled and view.rendered is not None, "the worker's frame")
        await pilot.pause()
        rendered, pane = view.rendered, view.query_one("#desktop-image", SixelPane)
        assert rendered is not None and rendered.sixel is not None and pane.sixel == rendered.sixel
        # encoded for the whole pane at the terminal's cell size (none answers here: the default)
        cw, ch = cell_pixels()
        assert (rendered.width, rendered.height) == tuple(view.size) == tuple(pane.size)
        assert f'"1;1;{view.size.width * cw};{view.size.height * ch}#' in rendered.sixel
        assert rendered.sixel in written(pane.render_lines(pane.size.region)[-1])


class Dialog(ModalScreen[None]):
    def compose(self) -> ComposeResult:
        yield Static("a dialog")


async def test_nothing_is_written_under_a_dialog() -> None:
    app = Pane()
    async with app.run_test(size=(70, 30)) as pilot:
        pane = app.query_one("#desktop-image", SixelPane)
        pane.show(encode_sixel(Image.new("RGB", (16, 17))), pane.size)
        assert pane.render_lines(pane.size.region)
        await app.push_screen(Dialog())
        await pilot.pause()
        # the pane's screen is behind the dialog: Sixel would draw over it
        assert pane.render_lines(pane.size.region) == []


def decode(data: str) -> tuple[tuple[int, int], dict[tuple[int, int], tuple[int, int, int]]]:
    """The declared size and the pixels of Sixel ``data`` (colours in Sixel's percent)."""
    assert data.startswith("\x1bP") and data.endswith("\x1b\\")
    body = data[data.index("q") + 1 : -2]
    raster = re.match(r'"1;1;(\d+);(\d+)', body)
    assert raster is not None
    colours: dict[int, tuple[int, int, int]] = {}
    pixels: dict[tuple[int, int], tuple[int, int, int]] = {}
    x = y = colour = 0
    token = re.compile(r"#(\d+)(?:;2;(\d+);(\d+);(\d+))?|!(\d+)([?-~])|([?-~])|(\$)|(-)")
    for t in token.finditer(body, raster.end()):
        if t[1] is not None and t[2] is not None:
            colours[int(t[1])] = (int(t[2]), int(t[3]), int(t[4]))
        elif t[1] is not None:
            colour = int(t[1])
        elif t[8] or t[9]:
            x, y = 0, y + (6 if t[9] else 0)
        else:
            count, char = (int(t[5]), t[6]) if t[5] else (1, t[7])
            rows = [row for row in range(6) if (ord(char) - 63) >> row & 1]
            pixels |= {(x + i, y + row): colours[colour] for i in range(count) for row in rows}
            x += count
    return (int(raster[1]), int(raster[2])), pixels


@pytest.mark.parametrize("size", [(61, 23), (5, 1), (130, 37)])
def test_the_encoding_decodes_to_the_picture_in_256_colours(size: tuple[int, int]) -> None:
    width, height = size
    img = Image.new("RGB", size, (246, 247, 250))
    draw = ImageDraw.Draw(img)
    # more colours than Sixel's 256 registers, runs of every length, bands cut short at the bottom
    for i in range(width * height):
        x, y = (i * 7919) % width, (i * 104729) % height
        if i % 3:
            img.putpixel((x, y), ((i * 37) % 256, (i * 91) % 256, (i * 53) % 256))
    draw.rectangle((width // 4, 0, width // 2, height), fill=(255, 0, 200))
    (w, h), pixels = decode(encode_sixel(img))
    assert (w, h) == size
    quantized = img.quantize(256, Image.Quantize.FASTOCTREE)
    palette = quantized.getpalette() or []
    percent = [(v * 100 + 127) // 255 for v in palette]
    indices = quantized.tobytes()
    expected = {
        (x, y): tuple(percent[3 * indices[y * width + x] : 3 * indices[y * width + x] + 3])
        for x in range(width)
        for y in range(height)
    }
    assert pixels == expected


def test_the_cell_size_is_the_terminals() -> None:
    """In a terminal whose window size has pixel fields (as xterm fills them), the cell is theirs."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    try:
        # 40 rows of 120 columns, 960 x 680 pixels: 8 x 17-pixel cells
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 960, 680))
        code = "from cua_tui.tui.graphics import cell_pixels; import sys; sys.stderr.write(repr(cell_pixels()))"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TEXTUAL_CELL")}
        child = subprocess.run(
            [sys.executable, "-c", code], stdout=follower, stderr=subprocess.PIPE, env=env, timeout=60
        )
        assert child.returncode == 0 and child.stderr.decode() == "(8, 17)", child.stderr
    finally:
        os.close(leader)
        os.close(follower)


@pytest.mark.skipif(sys.__stdout__ is not None and sys.__stdout__.isatty(), reason="the terminal answers")
def test_without_a_terminal_the_cell_size_is_textuals_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_CELL_WIDTH", "9")
    monkeypatch.setenv("TEXTUAL_CELL_HEIGHT", "18")
    assert cell_pixels() == (9, 18)
    monkeypatch.delenv("TEXTUAL_CELL_WIDTH")
    assert cell_pixels() == (10, 20)


@pytest.mark.parametrize("width,height", [("100000", "18"), ("9", "99999999999999999999"), ("0", "18"), ("²", "18")])
def test_an_absurd_cell_size_is_not_believed(monkeypatch: pytest.MonkeyPatch, width: str, height: str) -> None:
    """The pane's pictures are sized from the cell: a setting claiming a huge one would have a worker
    allocate gigapixels. It is not believed; the default stands."""
    monkeypatch.setenv("TEXTUAL_CELL_WIDTH", width)
    monkeypatch.setenv("TEXTUAL_CELL_HEIGHT", height)
    assert cell_pixels() == (10, 20)
