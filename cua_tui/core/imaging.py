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


# Screens are at most 8K (7680 x 4320 = 33 MP); anything that claims more is refused before decoding, so a
# PNG whose header claims 40,000 x 40,000 pixels (a decompression bomb) never reaches the decoder.
MAX_PIXELS = 40_000_000
MAX_SIDE = 16_384
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class ImageRefused(ValueError):
    """An image that is not a PNG, or claims a size no screen has; ``str()`` says which, in one line."""


def png_size(data: bytes, *, max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """Width and height from a PNG's header (signature, then IHDR first), checked before any decoding."""
    if len(data) < 33 or not data.startswith(_PNG_SIGNATURE):
        raise ImageRefused("not a PNG image")
    if data[12:16] != b"IHDR" or int.from_bytes(data[8:12], "big") != 13:
        raise ImageRefused("not a PNG image (its first chunk is not IHDR)")
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE) or width * height > max_pixels:
        raise ImageRefused(f"the PNG claims {width} x {height} pixels, more than a screen has")
    return width, height


def decode_png(data: bytes, *, expect: tuple[int, int] | None = None, max_pixels: int = MAX_PIXELS) -> Image.Image:
    """An untrusted PNG (a run directory's screenshot, a remote sandbox's capture) as RGB: its header is
    checked first (and against ``expect``, the size its record claims); only then is it decoded."""
    size = png_size(data, max_pixels=max_pixels)
    if expect is not None and size != tuple(expect):
        raise ImageRefused(f"the PNG is {size[0]} x {size[1]}, not {expect[0]} x {expect[1]} as recorded")
    try:
        with Image.open(io.BytesIO(data), formats=("PNG",)) as img:
            if img.size != size:
                raise ImageRefused("the PNG's header and its image disagree")
            return img.convert("RGB")
    except ImageRefused:
        raise
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ImageRefused(f"not a readable PNG ({type(exc).__name__})") from None
