"""Suite ``tui``: the UI thread's cost of a new screenshot frame, ours against textual-image's widgets.

A 1024x720 screenshot in a 100x40-cell pane, in half-blocks and on the Sixel path. ``python -m
bench.tui [--frames N] [--json PATH]``; how it is measured: docs/benchmarks.md, "tui".
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PIL import Image, ImageDraw
from textual.app import App, ComposeResult
from textual.widget import Widget

from cua_tui.core.imaging import ScreenLimit
from cua_tui.tui.desktop_view import DesktopView
from cua_tui.tui.frames import Rendered, Target, prepare

from .common import standalone

if TYPE_CHECKING:
    # imported for real only once the cell size is pinned (its import probes the terminal)
    from textual_image.widget import HalfcellImage

PANE = (100, 40)
LIMIT = ScreenLimit(1024, 720)  # the screenshots' run: its screen
TARGET_MS = 10.0


def frames(count: int) -> list[bytes]:
    """Distinct 1024x720 screenshots (so no cache helps either side)."""
    out = []
    for i in range(count):
        img = Image.new("RGB", (1024, 720), (240, 242, 246))
        draw = ImageDraw.Draw(img)
        for j in range(24):
            y = (j * 29 + i * 7) % 700
            x0 = 40 + (j * 37) % 500
            draw.rectangle(
                (x0, y, x0 + 60 + (j * 53 + i) % 400, y + 18),
                fill=((j * 40 + i * 3) % 255, (j * 90) % 255, (i * 11 + 128) % 255),
            )
        draw.text((40, 20), f"frame {i}", fill=(0, 0, 0))
        buf = io.BytesIO()
        img.save(buf, format="PNG", compress_level=1)
        out.append(buf.getvalue())
    return out


# xterm's cell with DejaVu Sans Mono 10 (as the Sixel test in xterm measures it)
CELL_PIXELS = (8, 17)


def pin_cell_size() -> None:
    """textual-image learns the cell size from its terminal probe; with no terminal to ask it takes
    TEXTUAL_CELL_WIDTH / TEXTUAL_CELL_HEIGHT, its own setting for terminals that cannot answer. Set them
    before textual_image.widget is imported (which probes), and measure only with no terminal attached."""
    os.environ["TEXTUAL_CELL_WIDTH"], os.environ["TEXTUAL_CELL_HEIGHT"] = (str(n) for n in CELL_PIXELS)


def _run_detached(count: int) -> dict[str, Any]:
    """``run`` in a child whose output is no terminal: a terminal would answer textual-image's probe with
    its own cell size, which wins over the pinned one."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tui.json"
        command = [sys.executable, "-m", "bench.tui", "--frames", str(count), "--json", str(out)]
        subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)
        result: dict[str, Any] = json.loads(out.read_text())
        return result


class _Harness(App[None]):
    CSS = f"Screen {{ layout: vertical; }} #pane {{ width: {PANE[0]}; height: {PANE[1]}; }}"

    def __init__(self, widget: Widget) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


async def _measure[P](
    widget: Widget, prepare: Callable[[bytes], P], show: Callable[[P], None], pngs: list[bytes]
) -> list[float]:
    """The UI thread's CPU milliseconds per frame: ``show`` of what ``prepare`` (the worker's part, not
    timed here) made, until the app has composed the screen."""
    app = _Harness(widget)
    samples = []
    async with app.run_test(size=(PANE[0] + 10, PANE[1] + 4)) as pilot:
        await pilot.pause()
        for png in pngs:
            payload = prepare(png)
            start = time.thread_time()
            show(payload)
            # the app processes the refresh and composes the screen
            await pilot.pause()
            samples.append((time.thread_time() - start) * 1000)
    return samples


class _Worker:
    """The worker's conversion as the pane's own worker does it, timed on its own (wall milliseconds)."""

    def __init__(self, *, graphics: bool = False, encode: bool = False) -> None:
        # graphics: fit and mark the picture for the pane's pixels (and, when encode, make the Sixel data)
        # for a textual-image widget; else half-block strips
        self.graphics = graphics
        self.encode = encode
        self.worker_ms: list[float] = []

    def prepare(self, png: bytes) -> Rendered:
        start = time.perf_counter()
        if self.graphics:
            rendered = prepare(
                png,
                PANE[0],
                PANE[1],
                Target(point=(512, 360)),
                limit=LIMIT,
                strips=False,
                cell_pixels=CELL_PIXELS,
                sixel=self.encode,
            )
        else:
            rendered = prepare(png, PANE[0], PANE[1], Target(point=(512, 360)), limit=LIMIT)
        self.worker_ms.append((time.perf_counter() - start) * 1000)
        return rendered


def _ours(worker: _Worker, pane: DesktopView, pngs: list[bytes]) -> list[float]:
    """UI-thread milliseconds per frame of the pane, given what ``worker`` made (the 3 untimed ones dropped)."""
    return asyncio.run(_measure(pane, worker.prepare, pane.show, pngs))[3:]


def _theirs(widget: HalfcellImage, pngs: list[bytes]) -> list[float]:
    """UI-thread milliseconds per frame of textual-image's widget, which decodes and converts there."""

    def show(png: bytes) -> None:
        widget.image = Image.open(io.BytesIO(png))

    return asyncio.run(_measure(widget, lambda png: png, show, pngs))[3:]


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(values),
        "median_ms": statistics.median(values),
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))],
        "mean_ms": statistics.fmean(values),
    }


def run(count: int) -> dict[str, Any]:
    """Measure ``count`` frames (after 3 untimed ones) with both renderers; the results as JSON data."""
    if sys.__stdout__ is not None and sys.__stdout__.isatty():
        return _run_detached(count)
    pin_cell_size()
    from textual_image.widget import HalfcellImage, SixelImage

    from cua_tui.tui.graphics import SixelPane

    pngs = frames(count + 3)
    ours = _Worker()
    ours_ms = _ours(ours, DesktopView(id="pane"), pngs)
    theirs_ms = _theirs(HalfcellImage(id="pane"), pngs)
    # Sixel: textual-image's own widget (it encodes in render_lines, on the UI thread), then the
    # pane's widget, which is handed the Sixel data the worker encoded.
    plain = _Worker(graphics=True)
    plain_ms = _ours(plain, DesktopView(graphics=SixelImage, id="pane"), pngs)
    pre = _Worker(graphics=True, encode=True)
    pre_ms = _ours(pre, DesktopView(graphics=SixelPane, id="pane"), pngs)
    return {
        "pane_cells": list(PANE),
        "frame": [1024, 720],
        "ours_ui_thread": _stats(ours_ms),
        "ours_worker_conversion": _stats(ours.worker_ms[3:]),
        "textual_image_halfcell_ui_thread": _stats(theirs_ms),
        "sixel_cell_pixels": list(CELL_PIXELS),
        "sixel_encoded_on_ui_thread": _stats(plain_ms),
        "sixel_encoded_on_ui_thread_worker": _stats(plain.worker_ms[3:]),
        "sixel_ui_thread": _stats(pre_ms),
        "sixel_worker_conversion": _stats(pre.worker_ms[3:]),
        "target_ms": TARGET_MS,
    }


def report(result: dict[str, Any]) -> str:
    """The section of the text report for ``run``'s results."""
    ours, theirs, worker = (
        result["ours_ui_thread"],
        result["textual_image_halfcell_ui_thread"],
        result["ours_worker_conversion"],
    )
    lines = [
        "UI-thread time per new 1024x720 frame in a 100x40-cell pane (CPU time of the UI thread)",
        f"{'renderer':<46}{'n':>5}{'median':>11}{'p90':>11}   compared with          ratio",
        f"{'ours: half-block strips built in a worker':<46}{ours['n']:>5}{ours['median_ms']:>9.2f}ms"
        f"{ours['p90_ms']:>9.2f}ms   target <= {TARGET_MS:g} ms        {TARGET_MS / ours['median_ms']:.2f}x",
        f"{'':<46}{'':>5}{'':>11}{'':>11}   textual-image halfcell  {theirs['median_ms'] / ours['median_ms']:.2f}x",
        f"{'textual-image HalfcellImage (all on UI thread)':<46}{theirs['n']:>5}{theirs['median_ms']:>9.2f}ms"
        f"{theirs['p90_ms']:>9.2f}ms",
        f"{'ours: worker-thread conversion (not UI)':<46}{worker['n']:>5}{worker['median_ms']:>9.2f}ms"
        f"{worker['p90_ms']:>9.2f}ms",
    ]
    if "sixel_ui_thread" in result:
        cw, ch = result["sixel_cell_pixels"]
        sixel, plain = result["sixel_ui_thread"], result["sixel_encoded_on_ui_thread"]
        sixel_worker = result["sixel_worker_conversion"]
        lines += [
            f"Sixel path, same pane at {cw}x{ch}-pixel cells ({PANE[0] * cw}x{PANE[1] * ch} px):",
            f"{'ours: Sixel encoded in a worker':<46}{sixel['n']:>5}{sixel['median_ms']:>9.2f}ms"
            f"{sixel['p90_ms']:>9.2f}ms   target <= {TARGET_MS:g} ms        {TARGET_MS / sixel['median_ms']:.2f}x",
            f"{'':<73}   encoded on the UI thread {plain['median_ms'] / sixel['median_ms']:.2f}x",
            f"{'textual-image SixelImage (encodes on UI thread)':<46}{plain['n']:>5}{plain['median_ms']:>9.2f}ms"
            f"{plain['p90_ms']:>9.2f}ms   target <= {TARGET_MS:g} ms        {TARGET_MS / plain['median_ms']:.2f}x",
            f"{'ours: worker fit + Sixel encoding (not UI)':<46}{sixel_worker['n']:>5}"
            f"{sixel_worker['median_ms']:>9.2f}ms{sixel_worker['p90_ms']:>9.2f}ms",
        ]
    lines.append("ratios above 1.00x mean better than the target or the baseline")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.tui``: measure, print the report, write the JSON when asked."""
    return standalone("bench.tui", __doc__, "frames", 30, run, report, argv)


if __name__ == "__main__":
    sys.exit(main())
