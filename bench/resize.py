"""Resize to redrawn picture: how long after the last resize event the desktop pane shows the screenshot
re-rendered for its new size (issue 11, point 3: within 150 ms).

A real run of the real supervisor on the sim desktop waits at a decision inside a headless run screen;
the terminal is resized alternately between 160x48 and 80x24, and each time the wall-clock time is taken
from the resize until the pane shows a frame fitted to its new size (the 50 ms settle, the conversion in a
worker, the swap on the UI thread).

    python -m bench.resize [--resizes N] [--json PATH]

The ``tui`` suite of ``python -m bench`` runs the same measurement and adds it to the report.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import standalone

TARGET_MS = 150.0
SIZES = ((80, 24), (160, 48))


async def _measure(tmp: Path, resizes: int) -> list[float]:
    from cua_tui.build import HANDSHAKE, RunOptions, build_run
    from cua_tui.desktops.sim import SimDesktop
    from cua_tui.ocr import ScreenReader
    from cua_tui.tui.desktop_view import DesktopView
    from cua_tui.tui.run_screen import supervisor_app
    from cua_tui.tui.signals import Signals
    from cua_tui.tui.source import LiveRun

    turns = [{"actions": [{"type": "click", "x": 250, "y": 182}, {"type": "type", "text": "benchmark"}]}]
    run = build_run(
        RunOptions(
            backend="sim",
            agent=None,
            script={"turns": turns, "final_text": "done"},
            runs_dir=tmp / "runs",
            decisions=HANDSHAKE,
            fsync=False,
            desktop=SimDesktop(),
        )
    )
    assert run.handshake is not None
    app = supervisor_app(
        LiveRun(run.supervisor, run.handshake), signals=Signals(bell=False, notify=False), screen_reader=ScreenReader()
    )
    took: list[float] = []
    async with app.run_test(size=SIZES[1]) as pilot:
        view = app.query_one(DesktopView)

        def fitted() -> bool:
            shown = view.rendered
            return (
                app.main.pending is not None  # type: ignore[attr-defined]
                and shown is not None
                and (shown.width, shown.height) == (view.size.width, view.size.height)
                and app.main.desktop.settled  # type: ignore[attr-defined]
            )

        async def until(condition: Any, timeout: float = 30.0) -> None:
            deadline = time.monotonic() + timeout
            while not condition():
                if time.monotonic() > deadline:
                    raise RuntimeError("the picture was not redrawn within 30 s")
                await asyncio.sleep(0.002)

        await until(fitted)
        for i in range(resizes):
            size = SIZES[i % 2]
            started = time.perf_counter()
            await pilot.resize_terminal(*size)
            await until(lambda size=size: app.size == size and fitted())
            took.append((time.perf_counter() - started) * 1000)
        await pilot.press("k")
        run.supervisor.wait(30)
    return took


def run(resizes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cua-tui-bench-resize-") as tmp:
        took = asyncio.run(_measure(Path(tmp), resizes))
    ordered = sorted(took)
    return {
        "resizes": len(took),
        "median_ms": statistics.median(took),
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))],
        "max_ms": ordered[-1],
        "target_ms": TARGET_MS,
    }


def report(result: dict[str, Any]) -> str:
    median, p90 = result["median_ms"], result["p90_ms"]
    return "\n".join(
        [
            "Resize to redrawn picture (160x48 <-> 80x24, at a decision; wall clock, 50 ms settle included)",
            f"{'measurement':<46}{'n':>5}{'median':>11}{'p90':>11}   compared with          ratio",
            f"{'last resize event -> picture fitted to the pane':<46}{result['resizes']:>5}{median:>9.1f}ms"
            f"{p90:>9.1f}ms   target <= {TARGET_MS:g} ms       {TARGET_MS / median:.2f}x (p90 {TARGET_MS / p90:.2f}x)",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.resize``: measure, print the report, write the JSON when asked."""
    return standalone("bench.resize", __doc__, "resizes", 20, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
