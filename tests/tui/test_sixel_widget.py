"""The desktop pane's Sixel widget writes the Sixel data the worker encoded, and that data is exactly what
the widget would have encoded itself on the UI thread for the same picture and pane."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image, ImageDraw
from textual.app import App, ComposeResult
from textual.geometry import Region

from cua_tui.core.imaging import ScreenLimit
from cua_tui.tui.desktop_view import DesktopView, sixel_widget
from cua_tui.tui.frames import Target, prepare

CELL = (8, 17)


@pytest.fixture
def pinned_cells() -> Iterator[None]:
    """textual-image's probe result pinned to an 8x17-pixel cell (no terminal answers it here)."""
    from textual_image import _terminal

    probe = _terminal.probe_terminal
    before = getattr(probe, "_result", None)
    probe._result = _terminal.TerminalCapabilities(_terminal.CellSize(*CELL), sixel=True, tgp=False)  # type: ignore[attr-defined]
    yield
    if before is None:
        del probe._result  # type: ignore[attr-defined]
    else:
        probe._result = before  # type: ignore[attr-defined]


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
        yield DesktopView(graphics=sixel_widget(), id="desktop")


async def test_the_pane_writes_the_workers_sixel_data(pinned_cells: None) -> None:
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
        own = rendered.sixel
        # tagged with a harmless colour selection before the terminator, so the test sees whose data is written
        tagged = own[: -len("\x1b\\")] + "#0\x1b\\"
        rendered = dataclasses.replace(rendered, sixel=tagged)
        view.show(rendered)
        await pilot.pause()
        # the widget's class is local to sixel_widget() (over textual-image's private one): reached untyped
        impl: Any = view.query_one("#desktop-image").children[0]
        assert impl.size == (w, h)  # the widget fills the pane: its crop is the worker's
        written = "".join(s.text for s in impl.render_lines(Region(0, 0, w, h))[-1])
        assert tagged in written  # the worker's data, not a new encoding
        # Without the worker's data the widget encodes on the UI thread: the worker's untagged bytes.
        impl.encoded = None
        impl._cached_sixels = None
        again = "".join(s.text for s in impl.render_lines(Region(0, 0, w, h))[-1])
        assert tagged not in again and own in again
        # A partial crop (part of the pane redrawn) is encoded by the widget itself, not the whole pane's data.
        impl.encoded = (rendered.image, tagged)
        part = "".join(s.text for s in impl.render_lines(Region(0, 0, w, h // 2))[-1])
        assert tagged not in part and "\x1bP" in part
