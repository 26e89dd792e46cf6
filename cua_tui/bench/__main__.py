"""``python -m cua_tui.bench [core|supervisor|verify|local|tui|replay|ocr|cwsandbox|docker|fleet|all] [--quick]
[--json PATH] [--fleet-parts sim,idle,local,cwsandbox,tui]``."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..core.ports import DesktopError
from .common import SIZES, log, pn
from .local import (
    TARGET_LOCAL_CLICK_X,
    TARGET_LOCAL_SHOT_MS,
    TARGET_LOCAL_TYPE_X,
    LocalBenchError,
    bench_local,
    local_missing,
)
from .report import render
from .supervisor import TARGET_ACTION_US, run_supervisor
from .verify import TARGET_VERIFY_EPS, bench_verify

SUITES = ("core", "supervisor", "verify", "local", "tui", "replay", "ocr", "cwsandbox", "docker", "fleet", "all")
FLEET_PARTS = ("sim", "idle", "local", "cwsandbox", "tui")


def _tmp_fs(path: str) -> str:
    """The file system type of the temp dir (best effort, Linux)."""
    try:
        best, fs = "", "unknown"
        real = os.path.realpath(path)
        with open("/proc/mounts", encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if (
                    len(parts) >= 3
                    and (real == parts[1] or real.startswith(parts[1].rstrip("/") + "/"))
                    and len(parts[1]) > len(best)
                ):
                    best, fs = parts[1], parts[2]
        return fs
    except OSError:
        return "unknown"


def run(
    suite: str, quick: bool, verify_events: int | None = None, fleet_parts: tuple[str, ...] = FLEET_PARTS
) -> dict[str, Any]:
    """Run ``suite`` in a temporary directory; the results as the JSON written by ``--json``."""
    pick = 1 if quick else 0
    size = {name: values[pick] for name, values in SIZES.items()}
    if verify_events:
        size["verify_events"] = verify_events
    results: dict[str, Any] = {
        "schema": 1,
        "suite": suite,
        "quick": quick,
        "machine": _machine(),
        "targets": {"action_median_us_nofsync": TARGET_ACTION_US, "verify_eps": TARGET_VERIFY_EPS},
    }
    started = pn()
    with tempfile.TemporaryDirectory(prefix="cua-tui-bench-") as tmp_name:
        tmp = Path(tmp_name)
        if suite in ("core", "supervisor", "all"):
            results["supervisor"] = run_supervisor(tmp, size)
        if suite in ("core", "verify", "all"):
            log(f"verify: generating {size['verify_events']:,} events, then {size['verify_repeats']} timed runs")
            results["verify"] = bench_verify(tmp, size["verify_events"], size["verify_repeats"])
        if suite in ("local", "all"):
            log(f"local desktop: starting Xvfb + openbox + Chromium ({size['local_samples']} samples per measurement)")
            results["local"] = bench_local(tmp, size["local_samples"], size["local_checks"])
            results["targets"].update(
                {
                    "local_screenshot_median_ms": TARGET_LOCAL_SHOT_MS,
                    "local_click_speedup": TARGET_LOCAL_CLICK_X,
                    "local_type_speedup": TARGET_LOCAL_TYPE_X,
                }
            )
        if suite in ("cwsandbox", "all"):
            from .cwsandbox import run as run_cwsandbox  # imports the vendor SDK: only for this suite

            results["cwsandbox"] = run_cwsandbox(tmp, 5 if quick else 30)
        if suite in ("docker", "all"):
            from .docker import run as run_docker

            results["docker"] = run_docker(tmp, 5 if quick else 30, 1 if quick else 3)
        if suite in ("fleet", "all"):
            from .fleet import TARGET_QUEUE_MS, TARGET_REFRESH_MS
            from .fleet import run as run_fleet

            results["fleet"] = run_fleet(tmp, quick, fleet_parts)
            results["targets"]["fleet_queue_ms"] = TARGET_QUEUE_MS
            if "tui" in fleet_parts:
                results["targets"]["fleet_tui_refresh_ms"] = TARGET_REFRESH_MS
        if suite in ("replay", "all"):
            from .replay import run as run_replay  # imports Textual: only for the suites that measure it

            results["replay"] = run_replay(tmp, quick)
        if suite in ("ocr", "all"):
            from .ocr import TARGET_CACHED_MS, TARGET_OCR_S, bench_ocr

            results["ocr"] = bench_ocr(3 if quick else 10)
            results["targets"].update({"ocr_extraction_s": TARGET_OCR_S, "ocr_cached_lookup_ms": TARGET_CACHED_MS})
    if suite in ("tui", "all"):
        from .tui import run as run_tui  # imports Textual: only for the suites that measure it

        log("tui: UI-thread time per new frame, ours vs textual-image's half-cell widget, and the Sixel path")
        results["tui"] = run_tui(8 if quick else 30)
        from .resize import run as run_resize

        log("tui: resize to redrawn picture, at a decision")
        results["resize"] = run_resize(6 if quick else 20)
    results["elapsed_s"] = (pn() - started) / 1e9
    return results


def _machine() -> dict[str, Any]:
    tmpdir = tempfile.gettempdir()
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count() or 0,
        "tmpdir": tmpdir,
        "tmp_fs": _tmp_fs(tmpdir),
    }


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the suite, print the report (and write the JSON); the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m cua_tui.bench",
        description="Benchmark cua-tui's supervisor overhead per action, verify throughput and the local desktop's "
        "capture and input against baselines.",
    )
    parser.add_argument(
        "suite",
        nargs="?",
        default="core",
        choices=SUITES,
        help="what to run: core (default: supervisor + verify), local (the real local desktop vs the seeds' "
        "tools), tui (UI-thread time per screenshot frame), replay (opening and stepping through recorded runs), "
        "ocr (a real lab page read as text with Tesseract, and the cached lookup), "
        "cwsandbox (requests and latency per step in a CoreWeave sandbox, ours vs the tutorial's, against a "
        "local service), docker (start time and step latency of the Docker backend vs the local desktop), fleet "
        "(200 sim runs 32 at a time through one approval queue, memory per idle run, local desktops at once, 8 "
        "cwsandbox runs at once, the fleet TUI's UI-thread time per refresh and queue latency), all (every suite)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a fast smoke run: fewer samples, 10,000 events, 5 local samples"
    )
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write the results as JSON to PATH")
    parser.add_argument("--events", type=int, metavar="N", help="events in the verify run (default 100,000)")
    parser.add_argument(
        "--fleet-parts",
        default=",".join(FLEET_PARTS),
        metavar="PARTS",
        help=f"the fleet suite's parts to run, comma-separated (default: {','.join(FLEET_PARTS)})",
    )
    args = parser.parse_args(argv)
    if args.events is not None and args.events < 10:
        parser.error("--events must be at least 10")
    if args.suite in ("local", "ocr", "all"):
        from .ocr import ocr_missing

        missing = local_missing() + (ocr_missing() if args.suite != "local" else [])
        if missing:
            print(
                f"the local suite cannot run: {', '.join(missing)} not found on this machine. Run "
                "`bash scripts/setup.sh bench local` as root: it installs the local desktop's programs (Xvfb, "
                "openbox, Chromium, bubblewrap, socat, xauth, Tesseract) and the seeds' xdotool and scrot.",
                file=sys.stderr,
            )
            return 2
    parts = tuple(p.strip() for p in args.fleet_parts.split(",") if p.strip())
    if not parts or any(p not in FLEET_PARTS for p in parts):
        parser.error(f"--fleet-parts: choose among {', '.join(FLEET_PARTS)}")
    try:
        results = run(args.suite, args.quick, args.events, parts)
    except (DesktopError, LocalBenchError) as exc:
        print(f"the {args.suite} benchmark failed: {exc}", file=sys.stderr)
        return 1
    results["command"] = shlex.join([sys.executable, "-m", "cua_tui.bench", *(sys.argv[1:] if argv is None else argv)])
    print(render(results))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
        log(f"results written to {args.json}")
    check = results.get("local", {}).get("typing_check")
    if check and not (check["intact"] == check["rounds"] and check["verify_passed"]):
        log("the typing check failed: typed text did not arrive intact")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
