"""Reading a screenshot as text: Tesseract, through pytesseract (the adapter; core.screentext orders it).

``ScreenReader`` implements ``core.screentext.ScreenTextReader``, the protocol the TUI is given a reader
through (the TUI never imports this module: the command line, the scenes and the benchmarks pass one in);
``OcrUnavailable`` and ``OcrFailed`` are the core's ``ScreenTextUnavailable`` and ``ScreenTextFailed``.

Why pytesseract rather than tesserocr: pytesseract runs the ``tesseract`` program as a child process. The
screenshot comes from a sandbox (untrusted), so the engine should not run inside the TUI's process: a
child can be killed at a timeout (a thread running tesserocr's in-process C++ engine cannot be stopped), and
a crash or a runaway allocation in the engine on a crafted image ends the child, not the TUI. pytesseract
is pure Python (nothing to build against libtesseract's headers), and the 0.1 s a process start costs is
small beside the recognition itself.

Bounds: the PNG is checked and decoded by ``core.imaging.decode_screen`` first (a header claiming more than
the run's screen, or than ``MAX_PIXELS``, is refused before any decoding), and only the decoded pixels,
re-encoded by Pillow, reach the
engine; the engine gets ``TIMEOUT_S``; at most ``core.screentext.MAX_WORDS`` words are kept; results are
cached by the PNG's SHA-256 in a small LRU (``CACHE_SIZE`` screens).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from .core.imaging import ImageRefused, ScreenLimit, decode_screen
from .core.screentext import ScreenText, ScreenTextFailed, ScreenTextUnavailable, from_data
from .core.text import one_line

# Tesseract's OpenMP threads spin while they wait for work: on this project's 2-CPU machines (shared with a
# browser and Xvfb) a 1024x720 page took 1.2 s wall with them and 0.2 s with one thread (measured, Tesseract
# 5.3.0). pytesseract passes the process environment to the engine, so the limit is set there, once, at
# import (before any thread of the App starts); a user's own OMP_THREAD_LIMIT wins.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

INSTALL = "apt-get install tesseract-ocr tesseract-ocr-eng (bash scripts/setup.sh env does it)"
TIMEOUT_S = 15.0  # the engine's wall-clock budget for one screen (a 1024x720 page takes about 0.2 s)
MAX_PIXELS = 3840 * 2160  # a 4K screen; OCR of a bigger one would take many seconds
CACHE_SIZE = 16  # screens whose text is kept
LANGUAGE = "eng"


OcrUnavailable = ScreenTextUnavailable  # Tesseract (or its English data) is not installed: how to install it
OcrFailed = ScreenTextFailed  # this screenshot could not be read (refused image, timeout, engine error)


def sha256(png: bytes) -> str:
    return hashlib.sha256(png).hexdigest()


class ScreenReader:
    """Reads screenshots as text with Tesseract; thread-safe (workers of the App call ``read``), cached by
    screen hash. A ``core.screentext.ScreenTextReader``."""

    def __init__(
        self,
        *,
        command: str = "tesseract",
        timeout: float = TIMEOUT_S,
        cache_size: int = CACHE_SIZE,
        max_pixels: int = MAX_PIXELS,
        language: str = LANGUAGE,
    ) -> None:
        self.command = command
        self.timeout = timeout
        self.cache_size = cache_size
        self.max_pixels = max_pixels
        self.language = language
        self._cache: OrderedDict[str, ScreenText] = OrderedDict()
        self._lock = threading.Lock()

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
        try:
            image = decode_screen(png, limit, max_pixels=self.max_pixels)
        except ImageRefused as exc:
            raise OcrFailed(f"screenshot not read: {exc}") from None
        data = self._engine(image)
        text = from_data(data, image.width, image.height)
        with self._lock:
            self._cache[digest] = text
            self._cache.move_to_end(digest)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return text

    def _engine(self, image: Any) -> dict[str, Any]:
        try:
            import pytesseract  # imported on first use: only the screen-text view needs it
        except ImportError:
            raise OcrUnavailable("the screen text needs pytesseract: uv sync (it is a dependency)") from None
        pytesseract.pytesseract.tesseract_cmd = self.command
        # Our own file (Pillow's re-encoding of the checked pixels, fast compression) in a private directory:
        # the engine never sees the sandbox's bytes themselves.
        with tempfile.TemporaryDirectory(prefix="cua-tui-ocr-") as folder:
            path = Path(folder) / "screen.png"
            image.save(path, format="PNG", compress_level=1)
            try:
                result: dict[str, Any] = pytesseract.image_to_data(
                    str(path),
                    lang=self.language,
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
