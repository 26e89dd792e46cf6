"""The desktop pane: the latest screenshot, the pending action's target marked, optional zoom."""

from __future__ import annotations

import functools

from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.message import Message
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from .frames import Rendered

RESIZE_SETTLE = 0.05  # seconds without a resize event before the picture is redrawn for the new size


class DesktopView(Widget):
    """Shows pre-rendered half-block strips; the App's worker produces them from screenshots.

    Where the terminal speaks a graphics protocol (Kitty TGP or Sixel, as textual-image's probe found), a
    textual-image widget of that kind shows the picture at full resolution instead; the worker hands it a
    picture already fitted and marked, so only the protocol encoding is left to textual-image.
    """

    can_focus = False

    def __init__(self, *, graphics: type[Widget] | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rendered: Rendered | None = None
        self.graphics = graphics
        self.placeholder = "waiting for the first screenshot…"
        self._settle: Timer | None = None

    def compose(self) -> ComposeResult:
        if self.graphics is not None:
            yield self.graphics(id="desktop-image")

    @property
    def wants_strips(self) -> bool:
        return self.graphics is None

    @property
    def wants_sixel(self) -> bool:
        """The graphics widget takes Sixel data encoded in the worker (``sixel_widget``)."""
        return bool(getattr(self.graphics, "takes_encoded_sixel", False))

    class Resized(Message):
        """The pane settled at a new size (no resize event for ``RESIZE_SETTLE`` s): redraw the picture."""

    def on_resize(self) -> None:
        # A drag of the terminal's corner sends a burst of resize events: redraw once it settles, so the
        # picture is re-rendered for the new size, never left cropped at the old one.
        if self._settle is not None:
            self._settle.stop()
        self._settle = self.set_timer(RESIZE_SETTLE, lambda: self.post_message(self.Resized()))

    def show(self, rendered: Rendered) -> None:
        """Swap in a finished frame (UI thread; cheap for half-blocks)."""
        self.rendered = rendered
        if self.graphics is not None:
            image = self.query_one("#desktop-image")
            if self.wants_sixel:
                image.encoded = (rendered.image, rendered.sixel)  # type: ignore[attr-defined]
            image.image = rendered.image  # type: ignore[attr-defined]
        self.refresh()

    def refuse(self, reason: str) -> None:
        """A screenshot that cannot be shown: the pane says so instead of keeping an older picture, which
        a reviewer could take for the screen the pending action is about."""
        self.rendered = None
        self.placeholder = f"screenshot not shown: {reason}"
        if self.graphics is not None:
            self.query_one("#desktop-image").image = None  # type: ignore[attr-defined]
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        rendered = self.rendered
        if rendered is None:
            if y == self.size.height // 2:
                text = self.placeholder[:width].center(width)
                return Strip([Segment(text, Style(dim=True))], width)
            return Strip.blank(width, self.rich_style)
        top = max(0, (self.size.height - len(rendered.strips)) // 2)
        index = y - top
        if 0 <= index < len(rendered.strips):
            strip = rendered.strips[index]
            left = max(0, (width - rendered.image.width) // 2)
            if left:
                strip = Strip.join([Strip.blank(left, self.rich_style), strip])
            return strip.crop_extend(0, width, self.rich_style)
        return Strip.blank(width, self.rich_style)


@functools.cache
def sixel_widget() -> type[Widget]:
    """textual-image's Sixel widget, given the Sixel data the worker encoded (``frames.prepare(sixel=True)``).

    textual-image's ``SixelImage`` scales, crops and encodes the picture in ``render_lines``, on the UI
    thread (about 340 ms a frame for a 1024x720 picture without numpy). This one fills the pane, takes the
    picture as the worker fitted it (no second scaling), and, when asked to encode the worker's picture for
    the whole pane, returns the data encoded in the worker; anything else (a partial crop) it encodes itself.
    """
    from PIL import Image as PILImage
    from textual_image._terminal import get_cell_size
    from textual_image.widget.sixel import Image as SixelImage
    from textual_image.widget.sixel import _ImageSixelImpl, _NoopRenderable

    class _Impl(_ImageSixelImpl):
        encoded: tuple[PILImage.Image, str | None] | None = None

        def _scale_image(self, image_data, terminal_sizes):  # type: ignore[no-untyped-def]
            return image_data  # frames.prepare fitted it to the pane's pixels already

        def _image_to_sixels(self, image, sixel_options=None, background=None):  # type: ignore[no-untyped-def]
            encoded, cells = self.encoded, get_cell_size()
            whole = (self.content_size.width * cells.width, self.content_size.height * cells.height)
            if encoded is not None and encoded[1] is not None and encoded[0] is self.image and image.size == whole:
                return encoded[1]
            return super()._image_to_sixels(image, sixel_options, background)

    class PreencodedSixelImage(SixelImage, Renderable=_NoopRenderable):
        DEFAULT_CSS = "PreencodedSixelImage { width: 100%; height: 100%; }"
        takes_encoded_sixel = True
        encoded: tuple[PILImage.Image, str | None] | None = None

        def compose(self) -> ComposeResult:
            impl = _Impl(self.image, self._sixel_options)
            impl.encoded = self.encoded
            yield impl

    return PreencodedSixelImage
