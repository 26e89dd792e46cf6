"""Reading a screenshot as text: Tesseract, through pytesseract (the adapter; core.screentext orders it).

``ScreenReader`` implements ``core.screentext.ScreenTextReader``. The engine runs as a child process (why:
docs/tui.md, "The screen as text"), on a checked and re-encoded picture, with a timeout and a small cache.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image, ImageOps

from .core.elements import Box, element_box
from .core.imaging import ImageRefused, ScreenLimit, decode_screen
from .core.screentext import MAX_WORD_CHARS, ScreenText, ScreenTextFailed, ScreenTextUnavailable, TargetText, from_data
from .core.text import one_line

# Tesseract's OpenMP threads spin while they wait for work: on this project's 2-CPU machines (shared
# with a browser and Xvfb) a 1024x720 page took 1.2 s wall with them and 0.2 s with one thread
# (measured, Tesseract 5.3.0). pytesseract passes the process environment to the engine, so the
# limit is set there, once, at import (before any thread of the App starts); a user's own
# OMP_THREAD_LIMIT wins.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

INSTALL = "apt-get install tesseract-ocr tesseract-ocr-eng (bash scripts/setup.sh env does it)"
# the engine's wall-clock budget for one screen (a 1024x720 page takes about 0.2 s)
TIMEOUT_S = 15.0
# a 4K screen; OCR of a bigger one would take many seconds
MAX_PIXELS = 3840 * 2160
CACHE_SIZE = 16  # screens whose text is kept
LANGUAGE = "eng"
# Reading one element: its inside (borders confuse the engine's page segmentation), enlarged, as one
# line. a 16 px label becomes 48 px, where Tesseract reads best
CROP_SCALE = 3
CROP_PAD = 16  # white around the crop, as on a page
# half the window read around a point with no element box (a link, text on the page)
LOOSE = (120, 14)
LABEL_ABOVE = 34  # pixels above a field searched for its label
LABEL_LEFT = 240  # pixels left of a field searched for its label
# words the engine is less sure of are left out of a target's name
MIN_CONF = 55.0
TARGET_CACHE = 64  # (screen, point) readings kept
# A text cursor just before the first letter reads as "|", "[", "l" or "I": dropped before a
# capital.
CARET = re.compile(r"^[|\[\]lI!](?=[A-Z])")


# Tesseract (or its English data) is not installed: how to install it
OcrUnavailable = ScreenTextUnavailable
# this screenshot could not be read (refused image, timeout, engine error)
OcrFailed = ScreenTextFailed


def sha256(png: bytes) -> str:
    return hashlib.sha256(png).hexdigest()


def _keep[K, V](cache: OrderedDict[K, V], key: K, value: V, size: int) -> None:
    """Put ``value`` in the LRU ``cache`` as the most recent, dropping the oldest beyond ``size``."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > size:
        cache.popitem(last=False)


@dataclass(kw_only=True, eq=False)
class ScreenReader:
    """Reads screenshots as text with Tesseract; thread-safe (workers of the App call ``read``), cached by
    screen hash. A ``core.screentext.ScreenTextReader``."""

    command: str = "tesseract"
    timeout: float = TIMEOUT_S
    cache_size: int = CACHE_SIZE
    max_pixels: int = MAX_PIXELS
    language: str = LANGUAGE
    _cache: OrderedDict[str, ScreenText] = field(default_factory=OrderedDict, init=False, repr=False)
    _targets: OrderedDict[tuple[str, tuple[int, int]], TargetText] = field(
        default_factory=OrderedDict, init=False, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def cached(self, digest: str) -> ScreenText | None:
        """The text of the screen whose PNG has SHA-256 ``digest``, if it was read already."""
        with self._lock:
            found = self._cache.get(digest)
            if found is not None:
                self._cache.move_to_end(digest)
            return found

    def read(self, png: bytes, digest: str | None = None, *, limit: ScreenLimit) -> ScreenText:
        """The words of ``png``, a screen of a run whose screen is ``limit`` (blocking: call from a worker
        thread). ``digest`` is its SHA-256 if known. Raises OcrUnavailable (Tesseract missing) or OcrFailed
        (this image, a larger one than ``limit`` too: refused from its header)."""
        digest = digest or sha256(png)
        found = self.cached(digest)
        if found is not None:
            return found
        image = self._decode(png, limit)
        data = self._engine(image)
        text = from_data(data, image.width, image.height)
        with self._lock:
            _keep(self._cache, digest, text, self.cache_size)
        return text

    def cached_target(self, digest: str, point: tuple[int, int]) -> TargetText | None:
        with self._lock:
            return self._targets.get((digest, point))

    def read_target(self, png: bytes, digest: str, point: tuple[int, int], *, limit: ScreenLimit) -> TargetText:
        """The element at ``point`` (core.elements: its box from the pixels), the words inside it and, for a
        box, the label above or left of it, each read from an enlarged crop (blocking: call from a worker)."""
        found = self.cached_target(digest, point)
        if found is not None:
            return found
        image = self._decode(png, limit)
        box = element_box(image, point)
        x, y = point
        inside = (
            (box[0] + 3, box[1] + 3, box[2] - 3, box[3] - 3)
            if box
            else (x - LOOSE[0], y - LOOSE[1], x + LOOSE[0], y + LOOSE[1])
        )
        text = self._line(image, inside)
        label, label_box = "", None
        if box is not None:
            height = box[3] - box[1]
            for near in (
                (box[0] - 4, box[1] - 2 - LABEL_ABOVE, box[2], box[1] - 3),  # above
                # to the left
                (box[0] - 3 - LABEL_LEFT, box[1] - 2, box[0] - 4, box[1] + max(height, 20)),
            ):
                label = self._line(image, near)
                if label:
                    label_box = near
                    break
        found = TargetText(point, box, text, label, label_box)
        with self._lock:
            _keep(self._targets, (digest, point), found, TARGET_CACHE)
        return found

    def _decode(self, png: bytes, limit: ScreenLimit) -> Image.Image:
        try:
            return decode_screen(png, limit, max_pixels=self.max_pixels)
        except ImageRefused as exc:
            raise OcrFailed(f"screenshot not read: {exc}") from None

    def _line(self, image: Image.Image, box: Box) -> str:
        """The words the engine is sure of in ``box`` of ``image``, read as one line ("" for none)."""
        x0, y0 = max(0, box[0]), max(0, box[1])
        x1, y1 = min(image.width, box[2]), min(image.height, box[3])
        if x1 - x0 < 4 or y1 - y0 < 4:
            return ""
        crop = ImageOps.autocontrast(image.crop((x0, y0, x1, y1)).convert("L"), cutoff=1)
        corners = [crop.getpixel(p) for p in ((0, 0), (crop.width - 1, 0), (0, crop.height - 1))]
        # Light words on a dark fill: the engine reads dark on light. A grey image's pixels are
        # numbers.
        if sum(c for c in corners if isinstance(c, (int, float))) < 3 * 128:
            crop = ImageOps.invert(crop)
        crop = crop.resize((crop.width * CROP_SCALE, crop.height * CROP_SCALE), Image.Resampling.LANCZOS)
        crop = ImageOps.expand(crop, border=CROP_PAD, fill=255)
        data = self._engine(crop, config="--psm 7")
        words = []
        for raw, conf in zip(data.get("text", []), data.get("conf", []), strict=False):
            word = str(raw).strip()[:MAX_WORD_CHARS]
            try:
                sure = float(conf) >= MIN_CONF
            except (TypeError, ValueError):
                sure = False
            if word and sure and any(c.isalnum() for c in word):
                words.append(word)
        return CARET.sub("", " ".join(words))[:200]

    def _engine(self, image: Any, config: str = "") -> dict[str, Any]:
        try:
            # imported on first use: only the screen-text view needs it
            import pytesseract
        except ImportError:
            raise OcrUnavailable("the screen text needs pytesseract: uv sync (it is a dependency)") from None
        pytesseract.pytesseract.tesseract_cmd = self.command
        # Our own file (Pillow's re-encoding of the checked pixels, fast compression) in a private
        # directory: the engine never sees the sandbox's bytes themselves.
        with tempfile.TemporaryDirectory(prefix="cua-tui-ocr-") as folder:
            path = Path(folder) / "screen.png"
            image.save(path, format="PNG", compress_level=1)
            try:
                result: dict[str, Any] = pytesseract.image_to_data(
                    str(path),
                    lang=self.language,
                    config=config,
                    timeout=self.timeout,
                    output_type=pytesseract.Output.DICT,
                )
            except pytesseract.TesseractNotFoundError:
                raise OcrUnavailable(f"Tesseract is not installed: {INSTALL}") from None
            except pytesseract.TesseractError as exc:
                message = one_line(str(getattr(exc, "message", exc)), 200)
                if "language" in message or "data file" in message or "traineddata" in message:
                    raise OcrUnavailable(f"Tesseract has no English data: {INSTALL}") from None
                raise OcrFailed(f"Tesseract failed: {message}") from None
            except RuntimeError as exc:  # pytesseract's timeout (the child is killed)
                if "timeout" in str(exc).lower():
                    raise OcrFailed(f"Tesseract took longer than {self.timeout:g} s: gave up") from None
                raise OcrFailed(f"Tesseract failed: {one_line(str(exc), 200)}") from None
            except OSError as exc:  # not executable, ...
                raise OcrUnavailable(f"Tesseract cannot run ({exc.strerror}): {INSTALL}") from None
        return result
