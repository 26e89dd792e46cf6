"""The desktop pane: one run's screenshot, the action's target marked, optional zoom.

The pane converts its own pictures: a thread worker of the widget decodes, fits and marks each screenshot
(frames.prepare); the newest frame asked for wins, and a few recent frames stay in a small cache.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.segment import Segment
from rich.style import Style
from textual import events, work
from textual.app import ComposeResult
from textual.dom import NoScreen
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from ..core.imaging import ImageRefused, ScreenLimit
from ..core.text import visible
from .frames import Rendered, Target, prepare
from .graphics import SixelPane, cell_pixels
from .messages import FrameRefused, FrameRendered

# seconds without a resize event before the picture is redrawn for the new size
RESIZE_SETTLE = 0.05
# the smallest pane (cells) that shows a picture: below it the layout shows no screen at all
READABLE_PANE = (16, 6)
# rendered frames kept: the shown one, its zoom, a replay's neighbours
FRAME_CACHE = 8


@dataclass(frozen=True)
class Shot:
    """A screenshot to show: its SHA-256, how to get its bytes (or why there are none), and the run's
    screen, larger than which nothing is decoded."""

    sha: str
    load: Callable[[], bytes | str] = field(compare=False)
    limit: ScreenLimit = field(default_factory=ScreenLimit.of_run)

    @classmethod
    def of(cls, png: bytes, sha: str, limit: ScreenLimit) -> Shot:
        return cls(sha, lambda: png, limit)


def _place(target: Target | None) -> Target | None:
    return dataclasses.replace(target, label=None, element=None) if target is not None else None


# screenshot, pane cells, target, zoom, the cell's pixels (None: half-blocks), Sixel
type FrameKey = tuple[str, int, int, Target | None, bool, tuple[int, int] | None, bool, bool]


class DesktopView(Widget):
    """Shows a screenshot as half-block strips, or through a graphics widget where the terminal speaks a
    graphics protocol (as textual-image's probe found): for Kitty TGP textual-image's widget, handed a
    picture the worker fitted and marked; for Sixel a ``SixelPane``, handed the data the worker encoded."""

    can_focus = False

    class Resized(Message):
        """The pane settled at a new size (no resize event for ``RESIZE_SETTLE`` s)."""

    class Refused(Message):
        """A screenshot could not be shown (said once for a run of frames refused for the same reason)."""

        def __init__(self, reason: str) -> None:
            super().__init__()
            self.reason = reason

    class Painted(Message):
        """The newest frame asked for is on the pane, or why it could not be (after the screen was
        refreshed)."""

    class Pointed(Message):
        """A click on the picture: the screen pixel under it (``point``), or why there is none."""

        def __init__(self, point: tuple[int, int] | None, why: str = "") -> None:
            super().__init__()
            self.point, self.why = point, why

    class Dragged(Message):
        """The mouse pressed on one pixel of the picture and released on another."""

        def __init__(self, start: tuple[int, int], end: tuple[int, int]) -> None:
            super().__init__()
            self.start, self.end = start, end

    class Hovered(Message):
        """The mouse is over the pixel ``point`` of the picture (None: off it)."""

        def __init__(self, point: tuple[int, int] | None) -> None:
            super().__init__()
            self.point = point

    def __init__(self, *, graphics: type[Widget] | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rendered: Rendered | None = None
        self.graphics = graphics
        self.placeholder = "waiting for the first screenshot…"
        self.shot: Shot | None = None
        self.target: Target | None = None
        self.zoom = False
        # a zoom of at least one cell per screen pixel (an action being edited)
        self.exact = False
        self.serial = 0  # frames asked for
        self.shown = 0  # the newest frame on the pane (or refused)
        self.painted_sha = ""  # the screenshot on the pane ("": none, or refused)
        self.refused: str | None = None  # why the frames shown last were refused (said once)
        self._shas: dict[int, str] = {}  # frames on their way: serial -> screenshot
        self._cache: OrderedDict[FrameKey, Rendered] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._settle: Timer | None = None
        self._sized = False  # the layout has given the pane its first size
        self._ahead: list[tuple[Shot, Target | None]] = []  # frames to convert ahead once one is on it
        # where a press landed (a release elsewhere is a drag), and whether the last release was one
        self._pressed: tuple[int, int] | None = None
        self._dragged = False

    def compose(self) -> ComposeResult:
        if self.graphics is not None:
            yield self.graphics(id="desktop-image")

    @property
    def wants_strips(self) -> bool:
        return self.graphics is None

    @property
    def wants_sixel(self) -> bool:
        """The graphics widget takes Sixel data encoded in the worker (a ``SixelPane``)."""
        return self.graphics is not None and issubclass(self.graphics, SixelPane)

    @property
    def settled(self) -> bool:
        """The newest frame asked for is on the pane, or was refused."""
        return self.serial > 0 and self.shown == self.serial

    def shows(self, sha: str) -> bool:
        """Whether the pane has settled on the screenshot ``sha``, or on why the newest could not be shown
        (a refusal is shown in its place)."""
        return self.settled and (self.painted_sha == sha if self.painted_sha else self.refused is not None)

    @property
    def on_screen(self) -> bool:
        """Whether the layout gives the pane room to show a picture a person can read (a narrow fleet
        gives it none, or a sliver)."""
        try:
            region = self.region.intersection(self.screen.region)
        except NoScreen:
            return False
        return bool(self.display) and region.width >= READABLE_PANE[0] and region.height >= READABLE_PANE[1]

    # ---------------------------------------------------------------------------------------------
    # What to show
    # ----------------------------------------------------------------------------------------------
    def show_shot(self, shot: Shot | None, target: Target | None = None, *, zoom: bool | None = None) -> None:
        """Show ``shot`` with ``target`` marked (None: no screenshot yet: the placeholder stays). A new
        screenshot or target zooms on the target unless ``zoom`` says otherwise."""
        # the words read at the target arriving later (its label, its element) do not undo a z
        changed = shot != self.shot or _place(target) != _place(self.target)
        self.shot, self.target = shot, target
        if zoom is not None:
            self.zoom = zoom and target is not None
        elif changed:
            self.zoom = target is not None
        if shot is None:
            self._drop_in_flight()
            return
        self.redraw()

    def set_zoom(self, zoom: bool) -> None:
        self.zoom = zoom and self.target is not None
        self.redraw()

    def blank(self, text: str) -> None:
        """No picture, saying why (not a refused screenshot); a frame on its way does not land."""
        self.shot = self.target = None
        self._drop_in_flight()
        self._clear(text)

    def _drop_in_flight(self) -> None:
        self.serial += 1
        self.shown = self.serial
        self._shas.clear()
        self.painted_sha = ""

    def redraw(self) -> None:
        """Convert the shown screenshot for the pane's size (a cached frame is shown at once)."""
        if self.shot is None or not self._sized:
            return  # before the layout has sized the pane, a frame would be fitted to nothing: its first size draws
        self.serial += 1
        key = self._key(self.shot, self.target)
        self._shas[self.serial] = self.shot.sha
        with self._cache_lock:
            cached = self._cache.get(key)
        if cached is not None:
            self._landed(FrameRendered(cached, self.serial))
        else:
            self._convert(self.shot, key, self.serial)

    def prefetch(self, shots: list[tuple[Shot, Target | None]]) -> None:
        """Convert these frames ahead into the cache (a replay's next and previous steps)."""
        if not (self._sized and self.settled):
            # once the frame asked for is on the pane: converted beside it, they slowed it down
            self._ahead = shots
            return
        self._ahead = []
        keys = [(shot, self._key(shot, target)) for shot, target in shots]
        self._prefetch(keys, self.serial)

    def _key(self, shot: Shot, target: Target | None) -> FrameKey:
        width, height = self.size.width, self.size.height
        # asked at each frame: a font size changed in the terminal changes the picture's pixels
        cells = None if self.wants_strips else cell_pixels()
        zoom = self.zoom and target is not None
        return (shot.sha, width, height, target, zoom, cells, self.wants_sixel, zoom and self.exact)

    # ---------------------------------------------------------------------------------------------
    # The worker
    # ----------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=False, exit_on_error=False, group="frame", description="convert screenshot")
    def _convert(self, shot: Shot, key: FrameKey, serial: int) -> None:
        if serial != self.serial:
            return  # a newer frame is on its way
        frame = self._frame(shot, key)
        if isinstance(frame, str):
            self.post_message(FrameRefused(frame, serial))
        else:
            self.post_message(FrameRendered(frame, serial))

    @work(thread=True, exclusive=True, exit_on_error=False, group="prefetch", description="prefetch frames")
    def _prefetch(self, keys: list[tuple[Shot, FrameKey]], serial: int) -> None:
        for shot, key in keys:
            if serial != self.serial:
                # the view moved on: these are no longer its neighbours
                return
            self._frame(shot, key)

    def _frame(self, shot: Shot, key: FrameKey) -> Rendered | str:
        """The frame for ``key`` (from the cache, or converted and cached), or why there is none. A
        screenshot larger than the run's screen is refused from its header: a bomb is never decoded."""
        with self._cache_lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        png = shot.load()
        if isinstance(png, str):
            return png
        _sha, width, height, target, zoom, cells, sixel, exact = key
        try:
            rendered = prepare(
                png, width, height, target, limit=shot.limit, zoom=zoom, strips=cells is None,
                cell_pixels=cells, sixel=sixel, exact=exact,
            )  # fmt: skip
        except ImageRefused as exc:
            return str(exc)
        with self._cache_lock:
            self._cache[key] = rendered
            while len(self._cache) > FRAME_CACHE:
                self._cache.popitem(last=False)
        return rendered

    def on_frame_rendered(self, message: FrameRendered) -> None:
        message.stop()
        self._landed(message)

    def _landed(self, message: FrameRendered) -> None:
        if message.serial < self.shown:
            return
        self.shown = message.serial
        self.refused = None
        self.painted_sha = self._take(message.serial)
        self.show(message.rendered)
        if message.serial == self.serial:
            self.call_after_refresh(self.post_message, self.Painted())
            if self._ahead:
                self.prefetch(self._ahead)

    def on_frame_refused(self, message: FrameRefused) -> None:
        message.stop()
        if message.serial < self.shown:
            return
        self.shown = message.serial
        self._take(message.serial)
        self.painted_sha = ""  # the pane shows why, not a screen
        reason = visible(message.reason, limit=200)
        self._clear(f"screenshot not shown: {reason}")
        if reason != self.refused:
            self.refused = reason
            self.post_message(self.Refused(reason))
        if message.serial == self.serial:
            self.call_after_refresh(self.post_message, self.Painted())
            if self._ahead:
                self.prefetch(self._ahead)

    def _take(self, serial: int) -> str:
        """The screenshot of frame ``serial``, now on the pane (older frames on their way are dropped)."""
        sha = self._shas.get(serial, "")
        self._shas = {k: v for k, v in self._shas.items() if k > serial}
        return sha

    # ---------------------------------------------------------------------------------------------
    # Painting
    # ----------------------------------------------------------------------------------------------
    def on_resize(self) -> None:
        if not self._sized:
            # the first size the layout gives: drawn at once (no burst to wait out; the first screen)
            self._sized = True
            self._settled_size()
            return
        # A drag of the terminal's corner sends a burst of resize events: redraw once it settles, so
        # the picture is re-rendered for the new size, never left cropped at the old one.
        if self._settle is not None:
            self._settle.stop()
        self._settle = self.set_timer(RESIZE_SETTLE, self._settled_size)

    def _settled_size(self) -> None:
        self.redraw()
        self.post_message(self.Resized())

    def show(self, rendered: Rendered) -> None:
        """Swap in a finished frame (UI thread; cheap for half-blocks)."""
        self.rendered = rendered
        if self.wants_sixel:
            pane = self.query_one("#desktop-image", SixelPane)
            if rendered.sixel is not None:
                pane.show(rendered.sixel, Size(rendered.width, rendered.height))
            else:
                pane.clear()
        elif self.graphics is not None:
            self.query_one("#desktop-image").image = rendered.image  # type: ignore[attr-defined]
        self.refresh()

    def _clear(self, text: str) -> None:
        """The pane without a picture, saying ``text``: never an older picture, which a reviewer could take
        for the screen the pending action is about."""
        self.rendered = None
        self.placeholder = text
        if self.wants_sixel:
            self.query_one("#desktop-image", SixelPane).clear()
        elif self.graphics is not None:
            self.query_one("#desktop-image").image = None  # type: ignore[attr-defined]
        self.refresh()

    # ---------------------------------------------------------------------------------------------
    # Pointing
    # ----------------------------------------------------------------------------------------------
    def point_at(self, x: int, y: int) -> tuple[int, int] | None:
        """The screen pixel shown at cell ``(x, y)`` of the pane (None: no picture there)."""
        rendered = self.rendered
        if rendered is None:
            return None
        if self.wants_strips:
            # as render_line places the strips: centred
            top = max(0, (self.size.height - len(rendered.strips)) // 2)
            left = max(0, (self.size.width - rendered.image.width) // 2)
            return rendered.screen_point(x - left, y - top)
        # a graphics widget shows the picture from the pane's top left, a cell its pixels
        return rendered.screen_point(x, y, cell_pixels())

    def _under(self, event: events.MouseEvent) -> tuple[int, int] | None:
        offset = event.get_content_offset(self)
        if offset is None or self.rendered is None or self.painted_sha == "":
            return None
        return self.point_at(offset.x, offset.y)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        self._pressed, self._dragged = self._under(event), False

    def on_mouse_up(self, event: events.MouseUp) -> None:
        start, self._pressed = self._pressed, None
        end = self._under(event)
        if start is not None and end is not None and start != end:
            self._dragged = True
            self.post_message(self.Dragged(start, end))

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self.post_message(self.Hovered(self._under(event)))

    def on_click(self, event: events.Click) -> None:
        if self._dragged:
            # the release ended a drag: no click
            self._dragged = False
            return
        if event.get_content_offset(self) is None or self.rendered is None or self.painted_sha == "":
            return
        point = self._under(event)
        self.post_message(self.Pointed(point, "" if point is not None else "not on the screenshot"))

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
