"""What every suite shares: the screen size, sample sizes, timing and statistics, the action mix."""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cua_tui.core.geometry import Size

SCREEN = Size(1024, 720)
ACTIONS_PER_TURN = 5

# Sample sizes: (full, quick). The quick ones are a smoke: the few samples a ratio of ours to a
# baseline needs to tell a regression (bench/check.py), in the seconds the suite can spare.
SIZES = {
    "micro_nofsync": (20_000, 2_000),
    "micro_fsync": (1_000, 60),
    "audit_vs_seed": (10_000, 1_000),
    "e2e_nofsync_actions": (2_000, 200),
    "e2e_fsync_actions": (300, 30),
    "e2e_runs": (3, 1),
    "verify_events": (100_000, 10_000),
    "verify_repeats": (5, 3),
    # the local ratios have the least room over their targets: a median of 7 holds them steady
    "local_samples": (30, 7),
    "local_checks": (5, 1),
    "cwsandbox_samples": (30, 3),
    "docker_samples": (30, 3),
    "docker_starts": (3, 1),
    "ocr_samples": (10, 3),
    "tui_frames": (30, 6),
    "resizes": (20, 6),
}
WARMUP = 200

pn = time.perf_counter_ns


def log(message: str) -> None:
    """Progress on stderr, so stdout holds the report alone."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def summarize_ns(samples: list[int]) -> dict[str, float]:
    """Median, p90 (nearest rank), mean, min and max of nanosecond samples, in microseconds."""
    if not samples:
        raise ValueError("no samples")
    s = sorted(samples)
    n = len(s)
    p90 = s[min(n - 1, max(0, math.ceil(0.9 * n) - 1))]
    return {
        "n": n,
        "median_us": statistics.median(s) / 1e3,
        "p90_us": p90 / 1e3,
        "mean_us": sum(s) / n / 1e3,
        "min_us": s[0] / 1e3,
        "max_us": s[-1] / 1e3,
    }


_TEXTS = (
    "cua-tui supervises computer-use agents",
    "hello@example.com",
    "Quarterly report, draft 3",
    "open source terminal user interface",
    "42",
)
_KEYS = (["ctrl", "a"], ["Tab"], ["Return"], ["ctrl", "l"], ["Escape"], ["PageDown"])


def action_mix(count: int, seed: int = 1234) -> list[dict[str, Any]]:
    """``count`` OpenAI computer actions cycling click, type, keypress, scroll, move (varied values)."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(count):
        x, y = rng.randrange(SCREEN.width), rng.randrange(SCREEN.height)
        match i % ACTIONS_PER_TURN:
            case 0:
                out.append({"type": "click", "button": "left", "x": x, "y": y})
            case 1:
                out.append({"type": "type", "text": _TEXTS[(i // ACTIONS_PER_TURN) % len(_TEXTS)]})
            case 2:
                out.append({"type": "keypress", "keys": list(_KEYS[(i // ACTIONS_PER_TURN) % len(_KEYS)])})
            case 3:
                out.append({"type": "scroll", "x": x, "y": y, "scroll_x": 0, "scroll_y": rng.choice((-300, 300, 500))})
            case _:
                out.append({"type": "move", "x": x, "y": y})
    return out


def standalone(
    module: str,
    doc: str | None,
    count: str,
    default: int,
    run: Callable[[int], dict[str, Any]],
    report: Callable[[dict[str, Any]], str],
    argv: list[str] | None = None,
) -> int:
    """A suite run on its own, ``python -m MODULE [--COUNT N] [--json PATH]``: measure, print the report,
    write the JSON when asked."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=(doc or "").splitlines()[0])
    parser.add_argument(f"--{count}", type=int, default=default)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    n = vars(args)[count]
    result = run(n)
    print(report(result))
    print(f"reproduce: {sys.executable} -m {module} --{count} {n}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


def sim_run(folder: Path, turns: list[dict[str, Any]], task: str, **options: Any) -> Any:
    """A real sim run of the scripted ``turns`` (the one builder, every decision approved, no fsync, no
    settings file), run to its end; the built run (``.path``) and its result."""
    from cua_tui.build import RunOptions, build_run
    from cua_tui.config import Settings

    run = build_run(
        RunOptions(
            task=task,
            backend="sim",
            agent=None,
            script={"turns": turns, "final_text": "done"},
            runs_dir=folder,
            decisions="approve",
            fsync=False,
            settings=Settings.load({"CUA_TUI_CONFIG": str(folder / "no-config.toml")}),
            **options,
        )
    )
    return run, run.run()
