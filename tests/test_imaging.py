"""Untrusted PNGs: the header is checked before any decoding, so a decompression bomb never reaches it."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from cua_tui.core.imaging import ImageRefused, decode_png, png_size


def png(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (10, 20, 30)).save(buf, format="PNG")
    return buf.getvalue()


def forged(width: int, height: int) -> bytes:
    """A tiny file whose header claims ``width`` x ``height`` (what a bomb looks like to a reader)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + chunk
        + struct.pack(">I", zlib.crc32(chunk))
        + struct.pack(">I", 0)
        + b"IEND"
        + struct.pack(">I", zlib.crc32(b"IEND"))
    )


def test_a_real_screenshot_decodes() -> None:
    data = png(64, 48)
    assert png_size(data) == (64, 48)
    assert decode_png(data, expect=(64, 48)).size == (64, 48)


@pytest.mark.parametrize("size", [(40_000, 40_000), (20_000, 10), (8_000, 8_000), (0, 10)])
def test_a_header_claiming_more_than_a_screen_is_refused_before_decoding(size: tuple[int, int]) -> None:
    with pytest.raises(ImageRefused, match="more than a screen"):
        decode_png(forged(*size))


@pytest.mark.parametrize("data", [b"", b"GIF89a" + b"\0" * 40, b"\x89PNG\r\n\x1a\n" + b"\0" * 30])
def test_what_is_not_a_png_is_refused(data: bytes) -> None:
    with pytest.raises(ImageRefused, match="not a PNG"):
        decode_png(data)


def test_a_size_other_than_recorded_is_refused() -> None:
    with pytest.raises(ImageRefused, match="not 100 x 48 as recorded"):
        decode_png(png(64, 48), expect=(100, 48))


def test_a_truncated_body_is_refused_in_one_line() -> None:
    data = png(64, 48)
    with pytest.raises(ImageRefused, match="not a readable PNG"):
        decode_png(data[: len(data) // 2])


def test_a_run_argument_is_a_path_a_run_id_or_a_unique_beginning(tmp_path: Path) -> None:
    from cua_tui.core.rundir import RunNotFound, resolve_run

    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("20260101-120000-aaaaaa", "20260101-120000-aaabbb", "20260202-090000-cccccc"):
        (runs / name).mkdir()
    assert resolve_run(runs / "20260101-120000-aaaaaa", tmp_path) == runs / "20260101-120000-aaaaaa"
    assert resolve_run("20260202-090000-cccccc", runs) == runs / "20260202-090000-cccccc"
    assert resolve_run("20260202", runs) == runs / "20260202-090000-cccccc"
    with pytest.raises(RunNotFound, match="2 runs"):
        resolve_run("20260101-120000-aaa", runs)
    with pytest.raises(RunNotFound, match="no run 20260303-090000-dddddd"):
        resolve_run("20260303-090000-dddddd", runs)
    with pytest.raises(RunNotFound, match="no such run directory"):
        resolve_run("../etc", runs)


# ---------------------------------------------------------------------------------------------------
# Recorded screens are held to their run's own screen (issue 20, point 3)
# ---------------------------------------------------------------------------------------------------
def test_the_run_screen_is_what_run_json_and_run_started_record() -> None:
    from cua_tui.core.imaging import ScreenLimit

    assert ScreenLimit.of_run("1920x1080", "1920x1080") == ScreenLimit(1920, 1080)
    assert ScreenLimit.of_run("1920x1080", None) == ScreenLimit(1920, 1080)  # run.json gone: run_started says
    assert ScreenLimit.of_run(None, "800x600") == ScreenLimit(800, 600)
    # two records that disagree: neither widens the other, side by side
    assert ScreenLimit.of_run("1920x720", "1024x1080") == ScreenLimit(1024, 720)
    assert str(ScreenLimit.of_run("1024x720")) == "1024 x 720"


@pytest.mark.parametrize(
    "value",
    [None, "", 1024, ["1024", "720"], {"w": 1}, "1024", "wide", "10x10", "99999x720", "8192x8192", "1x" + "9" * 40],
)
def test_a_run_with_no_usable_screen_size_gets_the_default(value: object) -> None:
    """Not a size --screen takes (64 to 8192 a side), more than the global cap (8192 x 8192 is 67 MP), or not
    a string at all: ignored; with nothing left, the default screen holds, and the refusal says so."""
    from cua_tui.core.imaging import DEFAULT_SCREEN, ScreenLimit, screen_size

    limit = ScreenLimit.of_run(value, value)
    assert (limit.width, limit.height, limit.recorded) == (*DEFAULT_SCREEN, False)
    assert ScreenLimit.of_run(value, "1280x800") == ScreenLimit(1280, 800)  # the usable one counts alone
    with pytest.raises(ImageRefused, match=r"more than the run's screen \(1024 x 720, the default: the run records"):
        screen_size(forged(1280, 800), limit)


def test_a_screen_of_the_run_and_a_zoom_within_it_decode(opened: list[object]) -> None:
    from cua_tui.core.imaging import ScreenLimit, decode_screen, screen_size

    limit = ScreenLimit(1024, 720)
    assert decode_screen(png(1024, 720), limit, expect=(1024, 720)).size == (1024, 720)
    assert decode_screen(png(300, 120), limit).size == (300, 120)  # a zoom: a region of the screen
    assert screen_size(png(1024, 1), limit) == (1024, 1)
    assert len(opened) == 2


@pytest.mark.parametrize("size", [(1025, 720), (1024, 721), (10_000, 4_000), (720, 1024)])
def test_a_screen_larger_than_the_run_is_refused_from_its_header(size: tuple[int, int], opened: list[object]) -> None:
    from cua_tui.core.imaging import ScreenLimit, decode_screen

    with pytest.raises(ImageRefused) as refused:
        decode_screen(forged(*size), ScreenLimit(1024, 720))
    assert str(refused.value) == f"the PNG claims {size[0]} x {size[1]} pixels, more than the run's screen (1024 x 720)"
    assert opened == []  # never handed to the decoder


def test_the_global_cap_and_the_recorded_size_still_hold_for_a_screen() -> None:
    from cua_tui.core.imaging import ScreenLimit, decode_screen

    wide = ScreenLimit(8192, 4880)  # a run may say any sane size: the 40 MP cap still comes first
    with pytest.raises(ImageRefused, match="more than a screen has"):
        decode_screen(forged(40_000, 40_000), wide)
    with pytest.raises(ImageRefused, match="not 100 x 48 as recorded"):
        decode_screen(png(64, 48), wide, expect=(100, 48))
    with pytest.raises(ImageRefused, match="claims 1024 x 720 pixels"):
        decode_screen(forged(1024, 720), wide, max_pixels=1000 * 700)  # a reader's own cap (OCR's)
