"""Screenshots fit to a model's image limits: the limits per vendor and model, the resize, the encodings."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

from PIL import Image

from ..core.geometry import Scaling, Size
from ..core.ports import Frame


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """The largest screenshot a model accepts: long edge in pixels and total pixel count."""

    long_edge: int | None
    pixels: int | None
    source: str = ""

    def scaling(self, display: Size) -> Scaling:
        return Scaling.fit(display, self.long_edge, self.pixels)


# Anthropic (REFERENCE.md and the vision / computer-use docs): the API does NOT downscale toolset
# screenshots, it rejects oversized ones. Models that support computer_toolset_20260801 accept 2576
# px on the long edge and 4,784 visual tokens ("about 3.75 MP"; 3.58 MP at 750 px a token, the safer
# reading); earlier models 1568 px and ~1.15 MP. An unknown model gets the earlier, safe tier.
ANTHROPIC_NEW = ImageLimits(2576, 3_580_000, "toolset-generation Claude: 2576 px long edge, ~3.58 MP")
ANTHROPIC_OLD = ImageLimits(1568, 1_150_000, "earlier Claude: 1568 px long edge, ~1.15 MP")
ANTHROPIC_IMAGE_LIMITS: tuple[tuple[str, ImageLimits], ...] = (
    ("claude-fable-", ANTHROPIC_NEW),
    ("claude-mythos-", ANTHROPIC_NEW),
    ("claude-opus-5", ANTHROPIC_NEW),
    ("claude-sonnet-5", ANTHROPIC_NEW),
    ("claude-haiku-5", ANTHROPIC_NEW),
    ("claude-opus-4-8", ANTHROPIC_NEW),
    ("claude-opus-4-7", ANTHROPIC_NEW),
    ("claude-", ANTHROPIC_OLD),
)
# OpenAI: `detail: "original"` keeps screenshots at full resolution up to 10.24 MP and 6000 px on
# the long edge; common screens (1024x720, 1920x1080, 2560x1440) go out unscaled.
OPENAI_ORIGINAL = ImageLimits(6000, 10_240_000, "OpenAI detail=original: 6000 px long edge, 10.24 MP")
OPENAI_IMAGE_LIMITS: tuple[tuple[str, ImageLimits], ...] = (("", OPENAI_ORIGINAL),)


def image_limits(vendor: str, model: str) -> ImageLimits:
    """The image limits of ``model`` by prefix (first match), with a safe default per vendor."""
    table = ANTHROPIC_IMAGE_LIMITS if vendor == "anthropic" else OPENAI_IMAGE_LIMITS
    default = ANTHROPIC_OLD if vendor == "anthropic" else OPENAI_ORIGINAL
    name = model.lower()
    for prefix, limits in table:
        if name.startswith(prefix):
            return limits
    return default


def fit_png(frame: Frame, limits: ImageLimits) -> tuple[bytes, Scaling]:
    """The screenshot as the model will see it (PNG, resized with Pillow if over the limits) and the
    Scaling that maps the model's coordinates back to the display."""
    scaling = limits.scaling(frame.size)
    if scaling.is_identity:
        return frame.png, scaling
    with Image.open(io.BytesIO(frame.png)) as img:
        small = img.convert("RGB").resize(scaling.model, Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    small.save(buf, format="PNG", compress_level=1)
    return buf.getvalue(), scaling


def b64(png: bytes) -> str:
    return base64.b64encode(png).decode("ascii")


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + b64(png)
