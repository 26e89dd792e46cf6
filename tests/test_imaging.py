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
