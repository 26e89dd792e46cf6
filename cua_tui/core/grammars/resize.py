"""The image sizes of the Qwen-VL family of processors (UI-TARS, Qwen2.5-VL, Qwen3-VL, Fara, OpenCUA and
GLM-V all resize this way): each side a multiple of the patch factor, the area between a floor and a cap,
the aspect ratio kept as closely as those allow. A screenshot sent at the size this function gives is left
as it is by the server's processor (given the same floor and cap), so the pixels the model names are the
pixels of the image that was sent.

``smart_resize`` follows the published ``qwen_vl_utils.smart_resize``: Python's ``round`` (half to even),
then floor or ceil by the factor when the area leaves the range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..geometry import Size

MAX_RATIO = 200


@dataclass(frozen=True, slots=True)
class Resize:
    """A processor's resize: the patch factor (patch size x merge size) and the area's floor and cap."""

    factor: int
    min_pixels: int
    max_pixels: int

    def __call__(self, size: Size) -> Size:
        """The size the processor gives an image of ``size``."""
        height, width = smart_resize(size.height, size.width, self.factor, self.min_pixels, self.max_pixels)
        return Size(width, height)


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """(height, width), each a multiple of ``factor``, with an area within [min_pixels, max_pixels]."""
    if min(height, width) <= 0 or max(height, width) / min(height, width) > MAX_RATIO:
        raise ValueError(f"an image of {width}x{height} is outside the processor's aspect ratio")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar
