"""Stale-screen guard: has the area around an action's target changed since the model looked?

Pixel comparison with tolerances, so a blinking caret or a hover tint does not count as a change, while a
moved button, a popup or a new page does. The check travels with the action (``ScreenCheck``): a desktop
performs the action only if the area still looks as the model saw it, in the same request, so nothing
can change between the check and the act and a remote sandbox spends one round trip on both.
"""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageChops

from .values import Frame

# a 64 x 64 crop's PNG is a few KB; a wire check larger than this is refused
MAX_REFERENCE_BYTES = 256 * 1024


class CheckError(ValueError):
    """A screen check from the wire that does not have the expected shape."""


@dataclass(frozen=True, slots=True)
class ScreenCheck:
    """ "Perform only if ``box`` still looks like ``reference``": the area around the target, cropped from
    the screenshot the model acted on (a PNG), and the tolerances that decide "changed"."""

    box: tuple[int, int, int, int]
    reference: bytes
    pixel_threshold: int = 48
    changed_fraction: float = 0.04
    # the SHA-256 of the screenshot the reference was cut from (not sent: the controller's)
    seen: str = ""

    def changed(self, region: Image.Image) -> bool:
        """Whether ``region`` (the same box, captured now) differs from the reference beyond the tolerances."""
        with Image.open(io.BytesIO(self.reference)) as ref:
            before = ref.convert("RGB")
        after = region.convert("RGB")
        if before.size != after.size:
            return True
        # L is a weighted mean of the channel deltas
        diff = ImageChops.difference(before, after).convert("L")
        changed = sum(diff.histogram()[self.pixel_threshold // 2 :])
        return changed > self.changed_fraction * before.width * before.height

    def changed_on(self, frame: Frame) -> bool:
        """The same question, asked of a whole screenshot."""
        if self.seen and frame.sha256 == self.seen:
            return False  # the very screen the model saw
        with Image.open(io.BytesIO(frame.png)) as img:
            if self.box[2] > img.width or self.box[3] > img.height:
                return True
            return self.changed(img.convert("RGB").crop(self.box))

    def to_wire(self) -> dict[str, Any]:
        return {
            "box": list(self.box),
            "reference": base64.b64encode(self.reference).decode("ascii"),
            "pixel_threshold": self.pixel_threshold,
            "changed_fraction": self.changed_fraction,
        }

    @classmethod
    def from_wire(cls, data: Any) -> ScreenCheck:
        """A check as a request carries it, every field checked (the helper reads it from a command line)."""
        if not isinstance(data, dict):
            raise CheckError("the screen check is not an object")
        box, reference = data.get("box"), data.get("reference")
        threshold, fraction = data.get("pixel_threshold"), data.get("changed_fraction")
        if not (
            isinstance(box, list)
            and len(box) == 4
            and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 65535 for v in box)
            and box[0] < box[2]
            and box[1] < box[3]
        ):
            raise CheckError("the screen check's box is not four ordered pixel coordinates")
        if not isinstance(reference, str) or len(reference) > 4 * MAX_REFERENCE_BYTES // 3 + 4:
            raise CheckError("the screen check's reference is missing or too large")
        if not isinstance(threshold, int) or isinstance(threshold, bool) or not 0 <= threshold <= 255:
            raise CheckError("the screen check's pixel threshold is not 0-255")
        if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not 0 <= fraction <= 1:
            raise CheckError("the screen check's changed fraction is not 0-1")
        try:
            png = base64.b64decode(reference, validate=True)
        except (binascii.Error, ValueError):
            raise CheckError("the screen check's reference is not base64") from None
        x0, y0, x1, y1 = box
        return cls((x0, y0, x1, y1), png, threshold, float(fraction))


@dataclass(frozen=True, slots=True)
class StaleGuard:
    # half the side of the compared square, in display pixels
    radius: int = 32
    # a pixel "changed" when one channel moved by more than this
    pixel_threshold: int = 48
    # the area is stale when more than this share of pixels changed
    changed_fraction: float = 0.04

    def check(self, before: Frame, point: tuple[int, int]) -> ScreenCheck | None:
        """The check for an action at ``point`` on the screen the model saw (None: the point is off it)."""
        x, y = point
        box = (
            max(0, x - self.radius),
            max(0, y - self.radius),
            min(before.width, x + self.radius),
            min(before.height, y + self.radius),
        )
        if box[0] >= box[2] or box[1] >= box[3]:
            return None
        with Image.open(io.BytesIO(before.png)) as img:
            crop = img.convert("RGB").crop(box)
        out = io.BytesIO()
        crop.save(out, format="PNG", compress_level=1)
        return ScreenCheck(box, out.getvalue(), self.pixel_threshold, self.changed_fraction, before.sha256)

    def changed(self, before: Frame, after: Frame, point: tuple[int, int]) -> bool:
        if before.sha256 == after.sha256:
            return False
        if before.size != after.size:
            return True
        check = self.check(before, point)
        return check is not None and check.changed_on(after)
