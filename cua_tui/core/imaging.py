"""PNG helpers: encoding for the in-process desktops (tuned for speed: level 1), and the checked decoding of
untrusted PNGs. A recorded screen is decoded only through ``decode_screen``, which holds it to its run's own
screen size (``ScreenLimit``) from the header, before anything is decompressed."""

from __future__ import annotations

import io
from dataclasses import dataclass

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


# Screens are at most 8K (7680 x 4320 = 33 MP); anything that claims more is refused before
# decoding, so a PNG whose header claims 40,000 x 40,000 pixels (a decompression bomb) never reaches
# the decoder.
MAX_PIXELS = 40_000_000
MAX_SIDE = 16_384
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# A run that records no usable screen size is held to the default --screen: cua-tui records the size
# in run.json and in run_started, so such a directory was edited or made elsewhere, and its screens
# get the room of a run made with the defaults (1024 x 720: 3 MB once decoded), not the global cap's
# 40 MP.
DEFAULT_SCREEN = Size(1024, 720)


class ImageRefused(ValueError):
    """An image that is not a PNG, or claims a size no screen has; ``str()`` says which, in one line."""


@dataclass(frozen=True, slots=True)
class ScreenLimit:
    """The largest picture a run's records admit: its screen. Every screen it records is at most that wide
    and that high (a zoom is a region of the screen captured at its resolution: never larger).
    ``recorded`` False: the run gives no usable size and ``DEFAULT_SCREEN`` holds."""

    width: int
    height: int
    recorded: bool = True

    @classmethod
    def of_run(cls, *screens: object) -> ScreenLimit:
        """The limit from what a run records of its screen (run.json's ``screen``, run_started's), each
        ``WIDTHxHEIGHT`` and read as untrusted: a value that is not a size ``--screen`` accepts (64 to 8192 a
        side) within ``MAX_PIXELS`` is ignored; of those left, the smallest side each way, so that neither
        record can widen what the other says; none left: ``DEFAULT_SCREEN``."""
        sizes = []
        for value in screens:
            if not isinstance(value, str) or len(value) > 32:
                continue
            try:
                size = Size.parse(value)
            except ValueError:
                continue
            if size.pixels <= MAX_PIXELS:
                sizes.append(size)
        if not sizes:
            return cls(*DEFAULT_SCREEN, recorded=False)
        return cls(min(s.width for s in sizes), min(s.height for s in sizes))

    def __str__(self) -> str:
        size = f"{self.width} x {self.height}"
        return size if self.recorded else f"{size}, the default: the run records no usable screen size"


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


def screen_size(data: bytes, limit: ScreenLimit, *, max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """Width and height of a recorded screen from its PNG header, refused when it claims more than the run's
    screen (``limit``) on either side, or more than ``max_pixels`` (a reader's own cap): judged from the
    header alone, nothing decompressed."""
    width, height = png_size(data)
    if width > limit.width or height > limit.height:
        raise ImageRefused(f"the PNG claims {width} x {height} pixels, more than the run's screen ({limit})")
    if width * height > max_pixels:
        raise ImageRefused(f"the PNG claims {width} x {height} pixels, more than {max_pixels:,} are read here")
    return width, height


def decode_screen(
    data: bytes, limit: ScreenLimit, *, expect: tuple[int, int] | None = None, max_pixels: int = MAX_PIXELS
) -> Image.Image:
    """A recorded screen (a run directory's screenshot or zoom, or a live run's) as RGB: the one way one is
    decoded. Its header is checked first against the run's screen (``limit``), then against ``expect`` (the
    size its record claims) and ``max_pixels`` (a reader's own cap); only then is it decoded."""
    return _decode(data, screen_size(data, limit, max_pixels=max_pixels), expect)


def decode_png(data: bytes, *, expect: tuple[int, int] | None = None, max_pixels: int = MAX_PIXELS) -> Image.Image:
    """An untrusted PNG that is not a recorded screen (a remote sandbox's reply, checked against the run's
    screen by its caller) as RGB: its header is checked first (and against ``expect``); only then decoded."""
    return _decode(data, png_size(data, max_pixels=max_pixels), expect)


def _decode(data: bytes, size: tuple[int, int], expect: tuple[int, int] | None) -> Image.Image:
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
