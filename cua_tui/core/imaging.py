"""PNG helpers shared by the in-process desktops (encoding tuned for speed: level 1)."""

from __future__ import annotations

import io

from PIL import Image

from .geometry import Size
from .ports import Frame


def encode_png(image: Image.Image, level: int = 1) -> Frame:
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=level)
    return Frame(buf.getvalue(), image.width, image.height)


def blank_frame(size: Size, colour: tuple[int, int, int] = (255, 255, 255)) -> Frame:
    return encode_png(Image.new("RGB", size, colour))


def crop_frame(frame: Frame, region: tuple[int, int, int, int]) -> Frame:
    with Image.open(io.BytesIO(frame.png)) as img:
        return encode_png(img.convert("RGB").crop(region))
