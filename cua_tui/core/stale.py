"""Stale-screen guard: has the area around an action's target changed since the model looked?

Pixel comparison with tolerances, so a blinking caret or a hover tint does not count as a change, while a
moved button, a popup or a new page does.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import Image, ImageChops

from .ports import Frame


@dataclass(frozen=True, slots=True)
class StaleGuard:
    radius: int = 32  # half the side of the compared square, in display pixels
    pixel_threshold: int = 48  # a pixel "changed" when one channel moved by more than this
    changed_fraction: float = 0.04  # the area is stale when more than this share of pixels changed

    def changed(self, before: Frame, after: Frame, point: tuple[int, int]) -> bool:
        if before.sha256 == after.sha256:
            return False
        if before.size != after.size:
            return True
        x, y = point
        box = (
            max(0, x - self.radius),
            max(0, y - self.radius),
            min(before.width, x + self.radius),
            min(before.height, y + self.radius),
        )
        if box[0] >= box[2] or box[1] >= box[3]:
            return False
        a = _crop(before, box)
        b = _crop(after, box)
        diff = ImageChops.difference(a, b).convert("L")  # L is a weighted mean of the channel deltas
        histogram = diff.histogram()
        changed = sum(histogram[self.pixel_threshold // 2 :])
        return changed > self.changed_fraction * (box[2] - box[0]) * (box[3] - box[1])


def _crop(frame: Frame, box: tuple[int, int, int, int]) -> Image.Image:
    with Image.open(io.BytesIO(frame.png)) as img:
        return img.convert("RGB").crop(box)
