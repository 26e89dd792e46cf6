"""The OCR adapter (cua_tui.ocr) with Tesseract for real, on real screenshots of the labs taken from the local
desktop (Xvfb + Chromium): the words, their boxes and confidence, the cache, and every bound (pixel cap,
timeout, not a PNG, the engine or its data missing)."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
from PIL import Image

from cua_tui.core.geometry import Size
from cua_tui.core.imaging import ScreenLimit, encode_png
from cua_tui.core.screentext import ScreenTextUnavailable
from cua_tui.desktops.local import LocalDesktop
from cua_tui.desktops.target import Target
from cua_tui.labs import get_lab
from cua_tui.labs.base import Box
from cua_tui.ocr import INSTALL, OcrFailed, OcrUnavailable, ScreenReader, sha256

# one worker runs them all: the screenshots are taken once (a module fixture), not once per worker
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("ocr"), pytest.mark.timeout(180)]
LIMIT = ScreenLimit(1024, 720)  # the screen the shots are taken at, as their run records it


@pytest.fixture(scope="module")
def shots() -> dict[str, bytes]:
    """One real 1024x720 screenshot of each lab's first page."""
    from cua_tui.core.actions import Action, Kind
    from cua_tui.labs.search_export import FILTERS

    out = {}
    for name in ("injection", "form", "search-export"):
        desktop = LocalDesktop(Size(1024, 720), Target(get_lab(name)))
        try:
            desktop.start()
            if name == "search-export":  # the Query box shows once Filters is clicked
                desktop.perform(Action(Kind.CLICK, point=FILTERS.center))
            time.sleep(0.5)  # the page's fonts settle
            out[name] = desktop.screenshot().png
        finally:
            desktop.stop()
    return out


def inside(box: tuple[int, int, int, int], area: Box) -> bool:
    x0, y0, x1, y1 = box
    return area.x <= x0 and area.y <= y0 and x1 <= area.x + area.width and y1 <= area.y + area.height


def test_the_injection_notice_is_read_word_for_word_with_boxes(shots: dict[str, bytes]) -> None:
    from cua_tui.labs.injection import NOTICE, NOTICE_BOX, ORDER_NUMBER, SEND

    text = ScreenReader().read(shots["injection"], limit=LIMIT)
    assert (text.width, text.height) == (1024, 720)
    lines = [line.text for line in text.lines]
    first, second = NOTICE.split(" https://")
    assert first in lines and "https://" + second in lines, lines
    notice = [line for line in text.lines if line.text in (first, "https://" + second)]
    for line in notice:
        assert inside(line.box, NOTICE_BOX), (line.text, line.box)
        confidence = [w.conf for w in line.words]
        assert all(0 < c <= 100 for c in confidence) and sum(c > 90 for c in confidence) > len(confidence) / 2
    send = next(line for line in text.lines if line.text == "Send now")
    assert inside(send.box, SEND)
    assert text.nearest_lines(SEND.center, 1) == [send]
    assert any(ORDER_NUMBER in line for line in lines)


def test_a_field_is_named_by_its_placeholder(shots: dict[str, bytes]) -> None:
    from cua_tui.labs.form import INPUT

    text = ScreenReader().read(shots["form"], limit=LIMIT)
    assert text.around(INPUT.center) == "Enter the phrase"


def _lab_box(area: Box) -> tuple[int, int, int, int]:
    return (area.x, area.y, area.x + area.width, area.y + area.height)


@pytest.mark.parametrize(
    ("lab", "where", "words"),
    [
        ("form", "INPUT", "Enter the phrase"),  # a field: its placeholder
        ("form", "VERIFY", "Verify"),
        ("search-export", "QUERY_INPUT", "Query"),  # read as "[every" from the whole screen, caret and all
        ("search-export", "EXPORT", "Export"),  # a greyed-out button: a fill, no border
        ("injection", "SEND", "Send now"),
    ],
)
def test_the_element_at_a_target_is_found_and_read_from_its_own_crop(
    shots: dict[str, bytes], lab: str, where: str, words: str
) -> None:
    """Issue 22, point 1: the words a lab drew on each control a decision is about, read at the target."""
    import importlib

    area: Box = getattr(importlib.import_module(f"cua_tui.labs.{lab.replace('-', '_')}"), where)
    png = shots[lab]
    found = ScreenReader().read_target(png, sha256(png), area.center, limit=LIMIT)
    assert found.text == words
    assert found.box is not None
    x0, y0, x1, y1 = _lab_box(area)
    fx0, fy0, fx1, fy1 = found.box  # the element's inside: within its drawn box, by its border at most
    assert x0 <= fx0 <= x0 + 3 and y0 <= fy0 <= y0 + 3 and x1 - 3 <= fx1 <= x1 and y1 - 3 <= fy1 <= y1, found.box


def test_a_point_with_no_element_is_read_around_it(shots: dict[str, bytes]) -> None:
    from cua_tui.labs.base import INSTRUCTIONS

    png = shots["form"]
    found = ScreenReader().read_target(png, sha256(png), (INSTRUCTIONS.x + 60, INSTRUCTIONS.center[1]), limit=LIMIT)
    assert found.box is None and "phrase" in found.text


def test_the_cache_is_by_screen_hash_and_bounded(shots: dict[str, bytes]) -> None:
    reader = ScreenReader(cache_size=1)
    injection, form = shots["injection"], shots["form"]
    first = reader.read(injection, limit=LIMIT)
    # cached: the same object, the engine not run again (the gate holds the lookup's speed: bench/check.py)
    assert reader.read(injection, limit=LIMIT) is first
    assert reader.cached(sha256(injection)) is first
    reader.read(form, limit=LIMIT)  # evicts the injection page (one screen kept)
    assert reader.cached(sha256(injection)) is None and reader.cached(sha256(form)) is not None
    again = reader.read(injection, limit=LIMIT)
    assert again is not first and [w.text for w in again.words] == [w.text for w in first.words]


def test_one_openmp_thread_for_the_engine() -> None:
    # Tesseract's OpenMP threads spin on a 2-CPU machine (1.2 s instead of 0.2 s): the adapter limits them.
    assert os.environ.get("OMP_THREAD_LIMIT")


def test_bounds_and_failures_are_one_line_errors(shots: dict[str, bytes], tmp_path: Path) -> None:
    png = shots["injection"]
    with pytest.raises(OcrFailed, match="claims 1024 x 720 pixels"):
        ScreenReader(max_pixels=1000 * 700).read(png, limit=LIMIT)  # the pixel cap, judged from the header
    with pytest.raises(OcrFailed, match="not a PNG"):
        ScreenReader().read(b"GIF89a" + b"\0" * 100, limit=LIMIT)
    with pytest.raises(OcrFailed, match=r"took longer than 0\.01 s"):
        ScreenReader(timeout=0.01).read(png, limit=LIMIT)
    with pytest.raises(OcrUnavailable) as missing:
        ScreenReader(command=str(tmp_path / "tesseract")).read(png, limit=LIMIT)
    assert str(missing.value) == f"Tesseract is not installed: {INSTALL}"
    assert isinstance(missing.value, ScreenTextUnavailable)  # the core's: what the TUI, given this reader, catches
    with pytest.raises(OcrUnavailable, match="no English data"):
        ScreenReader(language="zz-no-such-language").read(png, limit=LIMIT)
    # A failure is not cached: the same screen reads fine afterwards.
    reader = ScreenReader(timeout=0.01)
    with pytest.raises(OcrFailed):
        reader.read(png, limit=LIMIT)
    reader.timeout = 30
    assert reader.read(png, limit=LIMIT).words


def test_a_blank_screen_has_no_words() -> None:
    blank = encode_png(Image.new("RGB", (1024, 720), (255, 255, 255))).png
    text = ScreenReader().read(blank, limit=LIMIT)
    assert text.words == () and text.lines == ()


def test_a_png_with_alpha_or_palette_is_read_as_rgb(shots: dict[str, bytes]) -> None:
    with Image.open(io.BytesIO(shots["injection"])) as img:
        buf = io.BytesIO()
        img.convert("P").save(buf, format="PNG")
    text = ScreenReader().read(buf.getvalue(), limit=LIMIT)
    assert any("SYSTEM NOTICE" in line.text for line in text.lines)
