"""Suite ``runs``: `cua-tui runs` over 200 and 2,000 run directories, every run verified, against the
listing that verified each run in turn. ``python -m bench runs [--quick]``; docs/benchmarks.md.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .common import log, sim_run

TARGET_S = 2.0  # 2,000 runs listed, each verified
REPEATS = 3


def _source(tmp: Path) -> Path:
    """A real sim run of a few turns (the one builder, the sim desktop), sealed: the run copied."""
    turns = [
        {
            "text": f"turn {n}",
            "actions": [{"type": "click", "button": "left", "x": 100 + 40 * i, "y": 120 + 30 * n} for i in range(3)]
            + [{"type": "type", "text": "cua-tui"}, {"type": "keypress", "keys": ["Tab"]}],
        }
        for n in range(4)
    ]
    run, _result = sim_run(tmp / "source", turns, "runs benchmark")
    return Path(run.path)


def _runs_dir(source: Path, folder: Path, count: int) -> Path:
    """``count`` copies of the run, each named as a run id (its files its own: copies, not links)."""
    folder.mkdir(parents=True)
    for i in range(count):
        shutil.copytree(source, folder / f"20261201-{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}-{i:06x}")
    return folder


_BASELINE = """
import sys
from pathlib import Path
from cua_tui.cli.runs import layout, read_runs
from cua_tui.core.safeio import RunFolder
with RunFolder.open(Path(sys.argv[1])) as top:
    entries = read_runs(top, check=True)
print(len(layout(entries)[0]) - 1)
"""


def _time(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=600)
    took = time.perf_counter() - started
    if out.returncode:
        raise RuntimeError(f"{' '.join(args[:3])} failed: {out.stderr[-1000:]}")
    return took


def _measure(folder: Path, cache: Path, repeats: int) -> dict[str, Any]:
    """Wall time of the command as a user runs it (a process of its own): the baseline (each run verified
    in turn, nothing remembered), the first listing (nothing remembered yet) and the next ones."""
    env = {**os.environ, "CUA_TUI_CACHE_DIR": str(cache), "CUA_TUI_CONFIG": str(cache / "none.toml")}
    command = [sys.executable, "-m", "cua_tui.cli", "runs", "--runs-dir", str(folder)]
    baseline, first, again = [], [], []
    for _ in range(repeats):
        baseline.append(_time([sys.executable, "-c", _BASELINE, str(folder)], env))
        shutil.rmtree(cache, ignore_errors=True)
        first.append(_time(command, env))
        again.append(_time(command, env))
    return {
        "baseline_s": statistics.median(baseline),
        "first_s": statistics.median(first),
        "again_s": statistics.median(again),
    }


def run(tmp: Path, quick: bool) -> dict[str, Any]:
    # quick: a smoke of the same code paths (the larger count still has the listing verify in workers)
    counts, repeats = ((10, 60), 1) if quick else ((200, 2000), REPEATS)
    log("runs: making a sim run to copy")
    source = _source(tmp)
    rows = []
    for count in counts:
        log(f"runs: {count:,} run directories")
        folder = _runs_dir(source, tmp / f"runs-{count}", count)
        rows.append({"runs": count, **_measure(folder, tmp / f"cache-{count}", repeats)})
        shutil.rmtree(folder)
    lines = sum(1 for _ in (source / "audit.jsonl").open("rb"))
    screens = len(list((source / "screens").iterdir()))
    return {"rows": rows, "run_lines": lines, "run_screens": screens, "repeats": repeats}


def report(r: dict[str, Any]) -> list[str]:
    """The two sizes side by side: the baseline, the first listing and the next, each against the target."""
    rows = r["rows"]
    out = [
        f"`cua-tui runs`, every run verified (copies of one sim run: {r['run_lines']} log lines, "
        f"{r['run_screens']} screenshots)",
        "-" * 100,
        f"{'measurement':<52}"
        + "".join(f"{format(row['runs'], ',') + ' runs':>14}" for row in rows)
        + f"{'target':>12}",
    ]

    def line(label: str, key: str, target: str = "") -> str:
        return f"{label:<52}" + "".join(f"{row[key]:>13.2f}s" for row in rows) + f"{target:>12}"

    out += [
        line("baseline: each run verified in turn, nothing kept", "baseline_s"),
        line("ours, first listing (verified in worker processes)", "first_s"),
        line("ours, next listings (unchanged runs remembered)", "again_s", f"< {TARGET_S:.0f} s"),
        f"{'  ratio: baseline / ours (next listings)':<52}"
        + "".join(f"{row['baseline_s'] / row['again_s']:>13.2f}x" for row in rows),
        f"{'  ratio: target / ours (next listings)':<52}"
        + "".join(f"{TARGET_S / row['again_s']:>13.2f}x" for row in rows),
        "Wall time of the command in a process of its own (Python's start included), median of "
        f"{r.get('repeats', REPEATS)}.",
        "-" * 100,
    ]
    return out
