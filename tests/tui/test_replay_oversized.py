"""Replay holds recorded screens to the run's own screen size (issue 20, point 3): a run of 1024 x 720 whose 13
screens are real PNGs of 10,000 x 4,000 (tests/screen_bombs.py; 160 MB each once decoded, the chain intact)
is walked step by step, before and after, zoomed, read as text (t) and written to a file (o): every screen
is refused from its header, never decoded, and the pane, the text view and the notification say why. In a
child process the walk's peak memory (VmHWM) stays small: before the check it was 1.46 GB here."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pilot_helpers import plain, replay_screen, until
from screen_bombs import CLAIM, COUNT, SCREEN, oversized_run
from textual.widgets import Static

from cua_tui.core import imaging
from cua_tui.core.runlog import RunReader
from cua_tui.ocr import ScreenReader
from cua_tui.tui.app import CuaApp
from cua_tui.tui.desktop_view import DesktopView
from cua_tui.tui.replay import chain_state, replay_app
from cua_tui.tui.screen_text import ScreenTextScreen

pytestmark = pytest.mark.timeout(120)
REFUSED = f"the PNG claims {CLAIM[0]} x {CLAIM[1]} pixels, more than the run's screen ({SCREEN[0]} x {SCREEN[1]})"
MAX_PEAK_MB = 200  # the walk measured 52 MB; one decode of these screens alone is 120 MB (RGB)

# The replay walk in a child of its own (getrusage's ru_maxrss would report the forked pytest's size): every
# step, before and after, zoomed; then its peak resident memory.
WALK = """
import asyncio, sys, time
from cua_tui.core.runlog import RunReader
from cua_tui.tui.desktop_view import DesktopView
from cua_tui.tui.replay import replay_app, chain_state

async def walk(run):
    app = replay_app(RunReader(run), chain_state(run))
    async with app.run_test(size=(160, 48)) as pilot:
        for key in ["home"] + ["right", "b", "z", "b", "z"] * len(app.main.steps):
            await pilot.press(key)
            deadline = time.monotonic() + 30
            while not app.main.desktop.settled and time.monotonic() < deadline:
                await pilot.pause(0.02)
        await app.workers.wait_for_complete()
        print(app.query_one(DesktopView).placeholder)

cpu = time.process_time()
asyncio.run(walk(sys.argv[1]))
with open("/proc/self/status") as status:
    peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
print(int(peak) // 1024, time.process_time() - cpu)
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return oversized_run(tmp_path_factory.mktemp("oversized") / "runs")


async def shown(pilot: Any, app: CuaApp) -> str:
    """The pane's placeholder once the selected step's frame (or why there is none) is on screen."""
    main = replay_screen(app)
    await until(pilot, lambda: main.desktop.settled, "the frame or its refusal")
    view = app.query_one(DesktopView)
    assert view.rendered is None
    return view.placeholder


@pytest.mark.long
async def test_every_screen_is_refused_before_decoding_and_said_so(
    run: Path, opened: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cua_tui.tui.screen_text.screenshots_dir", lambda: tmp_path / "shots")
    reader = RunReader(run)
    app = replay_app(reader, chain_state(run), screen_reader=ScreenReader())
    main = replay_screen(app)
    with reader:
        async with app.run_test(size=(160, 48)) as pilot:
            assert main.screen_limit == imaging.ScreenLimit(*SCREEN)
            assert len(main.steps) == COUNT - 1
            seen: set[str] = set()
            for number in range(len(main.steps)):
                main.select(number)
                for key in ("", "b", "z", "b", "z"):  # after, before, zoomed before, zoomed after, after
                    if key:
                        await pilot.press(key)
                    assert await shown(pilot, app) == f"screenshot not shown: {REFUSED}"
                step = main.steps[number]
                seen.update(sha for sha in (step.before, step.after) if sha)
            assert len(seen) == COUNT  # every screen of the run was asked for

            await pilot.press("t")  # the screen as text: refused before the engine (or the decoder) sees it
            await until(pilot, lambda: isinstance(app.screen, ScreenTextScreen), "the screen-text view")
            await until(pilot, lambda: not app.reading.busy, "the reading to end")
            body = plain(app.screen.query_one("#screen-text-body", Static))
            assert body == f"screenshot not read: {REFUSED}"
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, ScreenTextScreen), "the view closed")

            await pilot.press("o")  # the screenshot in a file: refused, nothing written for a viewer
            await app.workers.wait_for_complete()
            await until(pilot, lambda: any(n.title == "screenshot" for n in app._notifications), "the answer")
            notes = [str(n.message) for n in app._notifications if n.title == "screenshot"]
            assert notes == [f"screenshot not written: {REFUSED}"]
            assert not (tmp_path / "shots").exists() or not any((tmp_path / "shots").iterdir())
            await app.workers.wait_for_complete()
    assert opened == []  # not one of the 13 screens was handed to the decoder


@pytest.mark.long
def test_the_walk_stays_small_in_memory(run: Path) -> None:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", WALK, str(run)],
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "CUA_TUI_CONFIG": str(run.parent / "none.toml")},
        check=False,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    placeholder, measured = proc.stdout.strip().splitlines()[-2:]
    peak_mb, cpu = measured.split()
    assert placeholder == f"screenshot not shown: {REFUSED}"
    assert int(peak_mb) < MAX_PEAK_MB, f"peak {peak_mb} MB"
    assert float(cpu) < 20 and time.monotonic() - started < 100
