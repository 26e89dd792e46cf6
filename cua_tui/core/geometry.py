"""Screen sizes, screenshot scaling and exact coordinate mapping.

A model sees a screenshot that may be smaller than the display. Coordinates it returns live in the
screenshot's pixel space and must be mapped back to the display exactly; a coordinate outside the
screenshot is refused, never clamped (a clamped click lands on a control the model did not aim at).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NamedTuple

_SIZE_RE = re.compile(r"^\s*(\d{1,5})\s*[xX×]\s*(\d{1,5})\s*$")

MIN_SIDE = 64
MAX_SIDE = 8192


class Size(NamedTuple):
    """A width and height in pixels."""

    width: int
    height: int

    def __str__(self) -> str:
        return f"{self.width}x{self.height}"

    @property
    def pixels(self) -> int:
        return self.width * self.height

    def contains(self, x: int, y: int) -> bool:
        return 0 <= x < self.width and 0 <= y < self.height

    @classmethod
    def parse(cls, text: str) -> Size:
        """Parse ``WIDTHxHEIGHT`` (e.g. ``1024x720``); raise ValueError with a readable message."""
        match = _SIZE_RE.match(text or "")
        if not match:
            raise ValueError(f"screen size {text!r} is not WIDTHxHEIGHT, e.g. 1024x720")
        size = cls(int(match.group(1)), int(match.group(2)))
        for side in size:
            if not MIN_SIDE <= side <= MAX_SIDE:
                raise ValueError(f"screen size {text!r}: each side must be between {MIN_SIDE} and {MAX_SIDE}")
        return size


class OutOfRange(ValueError):
    """A coordinate outside the space it claims to belong to."""


@dataclass(frozen=True, slots=True)
class Scaling:
    """Maps between the display and the (possibly smaller) image a model is shown.

    ``to_display`` sends a model pixel to the centre of the display pixels it covers, so that
    ``to_model(to_display(p)) == p`` for every model pixel (checked by property tests).
    """

    display: Size
    model: Size
    # a relative grid (an open-weight model's 0-1000 or 0-999 coordinates): ``model`` is the grid, not an image,
    # and its far edge (the value equal to its side, 1000 on 0-1000) is on screen too, in the last cell
    relative: bool = False

    @classmethod
    def identity(cls, size: Size) -> Scaling:
        return cls(size, size)

    @classmethod
    def grid(cls, display: Size, side: int) -> Scaling:
        """A relative grid of ``side`` units on each axis (0-1000: 1000), mapped onto the display."""
        return cls(display, Size(side, side), relative=True)

    @classmethod
    def fit(cls, display: Size, max_long_edge: int | None = None, max_pixels: int | None = None) -> Scaling:
        """The largest model image with the display's aspect ratio within both limits."""
        factor = 1.0
        if max_long_edge:
            factor = min(factor, max_long_edge / max(display))
        if max_pixels:
            factor = min(factor, math.sqrt(max_pixels / display.pixels))
        if factor >= 1.0:
            return cls.identity(display)
        width = max(1, math.floor(display.width * factor))
        height = max(1, math.floor(display.height * factor))
        # Floating point may leave the product a hair over the pixel cap: shrink until it fits.
        while max_pixels and width * height > max_pixels:
            width, height = max(1, width - 1), max(1, math.floor((width - 1) * display.height / display.width))
        return cls(display, Size(width, height))

    @property
    def space(self) -> str:
        """The model's coordinates as a record names them: "1036x728" (that image's pixels) or "0-1000"."""
        return f"0-{self.model.width}" if self.relative else str(self.model)

    @property
    def is_identity(self) -> bool:
        return self.display == self.model and not self.relative

    def to_display(self, x: int, y: int) -> tuple[int, int]:
        """Map a model pixel to a display pixel; raise OutOfRange outside the model image."""
        if self.relative:
            side = self.model.width
            if not (0 <= x <= side and 0 <= y <= self.model.height):
                raise OutOfRange(f"point ({x}, {y}) is outside the 0-{side} grid")
            x, y = min(x, side - 1), min(y, self.model.height - 1)
        elif not self.model.contains(x, y):
            raise OutOfRange(f"point ({x}, {y}) is outside the {self.model} screenshot")
        if self.is_identity:
            return x, y
        return (
            _centre(x, self.model.width, self.display.width),
            _centre(y, self.model.height, self.display.height),
        )

    def to_model(self, x: int, y: int) -> tuple[int, int]:
        """Map a display pixel to the model pixel that covers it."""
        if not self.display.contains(x, y):
            raise OutOfRange(f"point ({x}, {y}) is outside the {self.display} display")
        if self.is_identity:
            return x, y
        return x * self.model.width // self.display.width, y * self.model.height // self.display.height


def _centre(v: int, model_side: int, display_side: int) -> int:
    # Display pixels [v*D/M, (v+1)*D/M) belong to model pixel v; take the middle one, in integers.
    lo = -(-v * display_side // model_side)  # ceil(v*D/M): first display pixel mapping back to v
    hi = ((v + 1) * display_side - 1) // model_side  # last display pixel mapping back to v
    if hi < lo:
        # upscaling: several model pixels share one display pixel
        return v * display_side // model_side
    return (lo + hi) // 2
