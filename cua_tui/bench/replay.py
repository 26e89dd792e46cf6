"""Suite ``replay``: opening a long run, moving one step, and the memory a 10,000-step run costs, in the
real replay app. ``python -m cua_tui.bench replay [--quick]``; docs/benchmarks.md, "replay".
"""

from __future__ import annotations

import asyncio
import gc
import random
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

from .common import log

SIZE = (160, 48)
FIRST_SCREEN_TARGET_S = 1.0
STEP_TARGET_MS = 50.0


def make_run(folder: Path, steps: int) -> Path:
    """A passed-through sim run of ``steps`` actions that change the screen (clicks and scrolls)."""
    from ..build import RunOptions, build_run
    from ..config import Settings

    actions: list[dict[str, Any]] = []
    for i in range(steps):
        if i % 2:
            actions.append({"type": "scroll", "x": 500, "y": 400, "scroll_x": 0, "scroll_y": 100 if i % 4 else -100})
        else:
            actions.append({"type": "click", "button": "left", "x": 60 + (i * 37) % 880, "y": 60 + (i * 53) % 600})
    turns = [{"text": f"turn {n + 1}", "actions": actions[i : i + 5]} for n, i in enumerate(range(0, steps, 5))]
    run = build_run(
        RunOptions(
            task="replay benchmark",
            backend="sim",
            agent=None,
            script={"turns": turns, "final_text": "done"},
            runs_dir=folder,
            decisions="approve",
            fsync=False,
            max_turns=len(turns) + 2,
            max_steps=steps + 10,
            deadline=24 * 3600,
            settings=Settings.load({"CUA_TUI_CONFIG": str(folder / "no-config.toml")}),
        )
    )
    result = run.run()
    if result.steps != steps:
        raise RuntimeError(f"the generated run has {result.steps} steps, not {steps}: {result.reason}")
    return run.path


def _app(path: Path) -> Any:
    from ..core.runlog import RunReader
    from ..ocr import ScreenReader
    from ..tui.replay import chain_state, replay_app

    return replay_app(RunReader(path), chain_state(path), screen_reader=ScreenReader())


async def _until(pilot: Any, condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the replay did not show the step")
        await pilot.pause(0.001)


def _frame_shown(app: Any) -> bool:
    return bool(app.main.desktop.settled)


async def _open_and_walk(path: Path, moves: int, seed: int = 7) -> dict[str, Any]:
    started = time.perf_counter()
    app = _app(path)
    screen: Any = app.main
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: _frame_shown(app))
        first = time.perf_counter() - started
        step_ms: list[float] = []
        rng = random.Random(seed)
        for i in range(moves):
            key = "right" if i % 10 else rng.choice(["end", "home", "d", "up", "down"])
            serial, redraws = screen.desktop.serial, len(screen.redraw_ms)
            await pilot.press(key)
            await _until(
                pilot, lambda serial=serial, n=redraws: screen.desktop.serial > serial and len(screen.redraw_ms) > n
            )
            if key == "right":
                # from the key's handler until the new frame was painted (the App's own time)
                step_ms.append(screen.redraw_ms[-1])
        steps = len(screen.steps)
        cached = len(screen.reader._screens)
    screen.reader.close()
    return {"first_screen_s": first, "step_ms": step_ms, "steps": steps, "cached_screens": cached}


def run(tmp: Path, quick: bool) -> dict[str, Any]:
    """The suite: a 1,000-step run (first screen, steps) and a 10,000-step one (memory); smaller with quick."""
    # quick: a smoke, though the long run still has many more screens than the replay keeps cached
    short, long_ = (60, 150) if quick else (1000, 10000)
    moves, long_moves = (20, 10) if quick else (60, 40)
    log(f"replay: generating a {short:,}-step sim run")
    path = make_run(tmp / "replay-short", short)
    opens = [asyncio.run(_open_and_walk(path, 0 if i else moves)) for i in range(3)]
    walk = opens[0]
    log(f"replay: generating a {long_:,}-step sim run")
    long_path = make_run(tmp / "replay-long", long_)
    disk = sum(p.stat().st_size for p in long_path.rglob("*") if p.is_file())
    gc.collect()
    tracemalloc.start()
    big = asyncio.run(_open_and_walk(long_path, long_moves))
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    firsts = [o["first_screen_s"] for o in opens]
    steps = sorted(walk["step_ms"])
    return {
        "short_steps": short,
        "first_screen_s": statistics.median(firsts),
        "first_screen_samples": firsts,
        "step_ms_median": statistics.median(steps),
        "step_ms_p90": steps[int(len(steps) * 0.9) - 1] if len(steps) >= 10 else max(steps),
        "step_samples": len(steps),
        "long_steps": long_,
        "long_first_screen_s": big["first_screen_s"],
        "long_peak_heap_mb": peak / 2**20,
        "long_run_dir_mb": disk / 2**20,
        "long_cached_screens": big["cached_screens"],
    }


def report(r: dict[str, Any]) -> list[str]:
    """The suite's lines for the benchmark report, with the ratio to each target."""
    first, step = r["first_screen_s"], r["step_ms_median"]
    return [
        f"Replay ({r['short_steps']:,}-step and {r['long_steps']:,}-step sim runs, 160x48, headless)",
        "-" * 100,
        f"{'measurement':<58}{'median':>12}{'target':>14}{'ratio':>10}",
        f"{'open a ' + format(r['short_steps'], ',') + '-step run: first screen shown':<58}"
        f"{first * 1000:>10.0f}ms{'< 1,000 ms':>14}{FIRST_SCREEN_TARGET_S / first:>9.2f}x",
        f"{'move one step: panes and frame redrawn':<58}{step:>10.1f}ms{'< 50 ms':>14}{STEP_TARGET_MS / step:>9.2f}x",
        f"{'  (p90 of ' + str(r['step_samples']) + ' steps)':<58}{r['step_ms_p90']:>10.1f}ms",
        f"{'open a ' + format(r['long_steps'], ',') + '-step run: first screen (under tracemalloc)':<58}"
        f"{r['long_first_screen_s'] * 1000:>10.0f}ms",
        f"{'  peak Python heap while opened and walked':<58}{r['long_peak_heap_mb']:>10.1f}MB"
        f"  (run directory {r['long_run_dir_mb']:.1f} MB; {r['long_cached_screens']} screens cached)",
        "-" * 100,
    ]
