"""Screenshots fit to a model's image limits: the limits per vendor and model, the resize, the encodings."""

from __future__ import annotations

import base64
import io

from PIL import Image

from ..core.geometry import Scaling
from ..core.ports import Frame
from .vendors import ANTHROPIC_NEW as ANTHROPIC_NEW
from .vendors import ANTHROPIC_OLD as ANTHROPIC_OLD
from .vendors import OPENAI_ORIGINAL as OPENAI_ORIGINAL
from .vendors import VENDORS, ImageLimits, UnknownVendor


def image_limits(vendor: str, model: str) -> ImageLimits:
    """The image limits of ``model`` by prefix (first match), with the vendor's safe default: each vendor's
    own table (agents/vendors.py); a vendor not registered is an UnknownVendor, never another's limits."""
    found = VENDORS.get(vendor)
    if found is None:
        raise UnknownVendor(f"no image limits for vendor {vendor!r}; registered: {', '.join(VENDORS)}")
    return found.limits_for(model)


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
