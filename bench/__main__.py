"""``python -m bench [core|supervisor|verify|local|tui|replay|runs|otel|ocr|cwsandbox|docker|fleet|team|all]
[--quick] [--check] [--json PATH] [--fleet-parts sim,idle,local,cwsandbox,tui,keys]``."""

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

from cua_tui.core.ports import DesktopError

from . import check
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

SUITES = (
    "core",
    "supervisor",
    "verify",
    "local",
    "tui",
    "replay",
    "runs",
    "otel",
    "ocr",
    "cwsandbox",
    "docker",
    "fleet",
    "team",
    "all",
)
FLEET_PARTS = ("sim", "idle", "local", "cwsandbox", "tui", "keys")


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
    suite: str,
    quick: bool,
    verify_events: int | None = None,
    fleet_parts: tuple[str, ...] = FLEET_PARTS,
    *,
    resize: bool = True,
) -> dict[str, Any]:
    """Run ``suite`` in a temporary directory; the results as the JSON written by ``--json``. ``resize``
    off leaves the resize measurement out of the tui suite (it has no baseline the gate could hold)."""
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
        _run_in(Path(tmp_name), suite, quick, size, fleet_parts, results)
    if suite in ("tui", "all"):
        # imports Textual: only for the suites that measure it
        from .tui import run as run_tui

        log("tui: UI-thread time per new frame, ours vs textual-image's half-cell widget, and the Sixel path")
        results["tui"] = run_tui(size["tui_frames"])
        if resize:
            from .resize import run as run_resize

            log("tui: resize to redrawn picture, at a decision")
            results["resize"] = run_resize(size["resizes"])
    results["elapsed_s"] = (pn() - started) / 1e9
    return results


def _run_in(
    tmp: Path, suite: str, quick: bool, size: dict[str, int], fleet_parts: tuple[str, ...], results: dict[str, Any]
) -> None:
    """The suites of ``suite`` that work in the temporary directory ``tmp``, their results and targets
    added to ``results``."""
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
        # imports the vendor SDK: only for this suite
        from .cwsandbox import run as run_cwsandbox

        results["cwsandbox"] = run_cwsandbox(tmp, size["cwsandbox_samples"])
    if suite in ("docker", "all"):
        from .docker import run as run_docker

        results["docker"] = run_docker(tmp, size["docker_samples"], size["docker_starts"])
    if suite in ("fleet", "all"):
        from .fleet import TARGET_QUEUE_MS, TARGET_REFRESH_MS
        from .fleet import run as run_fleet

        results["fleet"] = run_fleet(tmp, quick, fleet_parts)
        results["targets"]["fleet_queue_ms"] = TARGET_QUEUE_MS
        if "tui" in fleet_parts:
            results["targets"]["fleet_tui_refresh_ms"] = TARGET_REFRESH_MS
    if suite in ("team", "all"):
        from .team import TARGET_P99_MS
        from .team import run as run_team

        results["team"] = run_team(tmp, quick)
        results["targets"]["team_answer_to_execution_ms_p99"] = TARGET_P99_MS
    if suite in ("replay", "all"):
        # imports Textual: only for the suites that measure it
        from .replay import run as run_replay

        results["replay"] = run_replay(tmp, quick)
    if suite in ("runs", "all"):
        from .runs import run as run_runs

        results["runs"] = run_runs(tmp, quick)
    if suite in ("otel", "all"):
        from .otel import run as run_otel

        results["otel"] = run_otel(tmp, quick)
    if suite in ("ocr", "all"):
        from .ocr import TARGET_CACHED_MS, TARGET_OCR_S, bench_ocr

        results["ocr"] = bench_ocr(size["ocr_samples"])
        results["targets"].update({"ocr_extraction_s": TARGET_OCR_S, "ocr_cached_lookup_ms": TARGET_CACHED_MS})


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


def missing_for(suite: str) -> str | None:
    """What ``suite`` needs and this machine lacks, in one line; None when it can run."""
    import importlib.util

    from .ocr import ocr_missing

    if suite in ("local", "ocr", "cwsandbox", "docker", "all"):
        missing = local_missing() + (ocr_missing() if suite in ("ocr", "all") else [])
        if missing:
            return (
                f"{', '.join(missing)} not found on this machine. Run `bash scripts/setup.sh bench local` as root: "
                "it installs the local desktop's programs (Xvfb, openbox, Chromium, bubblewrap, socat, xauth, "
                "Tesseract) and the seeds' xdotool and scrot."
            )
    if suite in ("team", "all") and not any(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        return "no PostgreSQL server on this machine: `bash scripts/setup.sh test` installs Debian's postgresql"
    if suite in ("cwsandbox", "all") and importlib.util.find_spec("cwsandbox") is None:
        return "the cwsandbox package is not installed (`bash scripts/setup.sh env`)"
    if suite in ("docker", "all"):
        from cua_tui.desktops.docker import DockerSettings
        from cua_tui.desktops.docker_engine import Engine

        return Engine().problem(DockerSettings().image)
    return None


def _check(suites: tuple[str, ...], quick: bool) -> tuple[dict[str, Any], list[check.Verdict], bool]:
    """Each suite of ``suites`` run on its own (one that cannot run or fails costs only its targets); the
    merged results, one verdict per target, and whether a suite failed while measuring."""
    merged: dict[str, Any] = {}
    not_run: dict[str, str] = {}
    failed = False
    for suite in suites:
        missing = missing_for(suite)
        if missing:
            not_run[suite] = f"cannot run here: {missing}"
            continue
        log(f"check: the {suite} suite")
        try:
            results = run(suite, quick, resize=False)
        except Exception as exc:
            # a suite that breaks is reported as such; the others still run
            not_run[suite] = f"failed: {type(exc).__name__}: {exc}"
            failed = True
            continue
        merged.setdefault("targets", {}).update(results.pop("targets"))
        merged.update(results)
    verdicts = check.evaluate(merged, suites, not_run)
    # A time ratio that misses is measured once more before it counts: a load that comes and goes beside the
    # gate (the suite's other parts) once put the local typing ratio at 3.5x where the same tree reads 5.8x
    # on a quiet machine. A change that costs the ratio misses twice; the first figures stay in the report.
    missed = [v for v in verdicts if not v.passed and v.target.margin > 0 and v.target.suite not in not_run]
    again = dict.fromkeys(v.target.suite for v in missed)
    for suite in again:
        first = {v.target.what: v.measured for v in verdicts if v.target.suite == suite}
        log(f"check: the {suite} suite again (a ratio missed: measured once more before it counts)")
        try:
            results = run(suite, quick, resize=False)
        except Exception:
            continue
        merged["targets"].update(results.pop("targets"))
        merged.update(results)
        merged.setdefault("measured_again", {})[suite] = first
    if again:
        verdicts = check.evaluate(merged, suites, not_run)
    return merged, verdicts, failed


def _parser() -> argparse.ArgumentParser:
    """The command line's arguments, each with its help."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark cua-tui's supervisor overhead per action, verify throughput and the local desktop's "
        "capture and input against baselines.",
    )
    parser.add_argument(
        "suite",
        nargs="?",
        choices=SUITES,
        help="what to run: core (the default: supervisor + verify), local (the real local desktop vs the seeds' "
        "tools), tui (UI-thread time per screenshot frame), replay (opening and stepping through recorded runs), "
        "runs (listing thousands of verified runs), otel (what a collector that refuses costs a run), "
        "ocr (a real lab page read as text with Tesseract, and the cached lookup), "
        "cwsandbox (requests and latency per step in a CoreWeave sandbox, ours vs the tutorial's, against a "
        "local service), docker (start time and step latency of the Docker backend vs the local desktop), fleet "
        "(200 sim runs 32 at a time through one approval queue, memory per idle run, local desktops at once, 8 "
        "cwsandbox runs at once, the fleet TUI's UI-thread time per refresh and queue latency), all (every suite)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: a few samples a side (3 steps on each desktop), 10,000 events",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="the speed gate: hold each ratio of ours to the baseline measured in the same run (never an "
        "absolute time) to its target, one line per target, and exit 1 when one falls short (2 when one cannot "
        f"be measured here). A time ratio passes at {round((1 - check.MARGIN) * 100)}%% of its target or above: "
        "a quick run takes a few samples a side, and on a 2-CPU machine busy with other work its ratios fell "
        "up to about a quarter below their medians; a count (requests per step) must meet its target. Without a "
        "suite: every suite "
        f"with a baseline ({', '.join(check.CHECKED_SUITES)}). Named, replay --check holds a 100,000-step run "
        "to a 10,000-step one in a real terminal (step and peak memory within 1.5x, under 150 MB, first screen "
        "under 1 s). See docs/benchmarks-gate.md",
    )
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write the results as JSON to PATH")
    parser.add_argument("--events", type=int, metavar="N", help="events in the verify run (default 100,000)")
    parser.add_argument(
        "--fleet-parts",
        default=",".join(FLEET_PARTS),
        metavar="PARTS",
        help=f"the fleet suite's parts to run, comma-separated (default: {','.join(FLEET_PARTS)})",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the suite, print the report (and write the JSON); the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.events is not None and args.events < 10:
        parser.error("--events must be at least 10")
    parts = tuple(p.strip() for p in args.fleet_parts.split(",") if p.strip())
    if not parts or any(p not in FLEET_PARTS for p in parts):
        parser.error(f"--fleet-parts: choose among {', '.join(FLEET_PARTS)}")
    if args.check:
        return _main_check(args, argv)
    suite = args.suite or "core"
    if suite in ("local", "ocr", "all"):
        missing = missing_for("ocr" if suite in ("ocr", "all") else "local")
        if missing:
            print(f"the {suite} suite cannot run: {missing}", file=sys.stderr)
            return 2
    try:
        results = run(suite, args.quick, args.events, parts)
    except (DesktopError, LocalBenchError) as exc:
        print(f"the {suite} benchmark failed: {exc}", file=sys.stderr)
        return 1
    _finish(results, args, argv)
    print(render(results))
    check_typing = results.get("local", {}).get("typing_check")
    if check_typing and not (check_typing["intact"] == check_typing["rounds"] and check_typing["verify_passed"]):
        log("the typing check failed: typed text did not arrive intact")
        return 1
    return 0


def _finish(results: dict[str, Any], args: argparse.Namespace, argv: list[str] | None) -> None:
    """The command that reproduces the run, and the JSON when asked for."""
    results["command"] = shlex.join([sys.executable, "-m", "bench", *(sys.argv[1:] if argv is None else argv)])
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
        log(f"results written to {args.json}")


def _main_check(args: argparse.Namespace, argv: list[str] | None) -> int:
    """``--check``: the chosen suite (or every one with a baseline), then one line per target."""
    suites: tuple[str, ...]
    if args.suite in (None, "all"):
        suites = check.CHECKED_SUITES
    elif args.suite in ("supervisor", "verify"):
        suites = ("core",)
    elif args.suite in (*check.CHECKED_SUITES, *check.NAMED_SUITES):
        suites = (args.suite,)
    else:
        print(
            f"--check: the {args.suite} suite has no baseline to hold a ratio to; choose among "
            f"{', '.join((*check.CHECKED_SUITES, *check.NAMED_SUITES))}",
            file=sys.stderr,
        )
        return 2
    started = pn()
    merged, verdicts, failed = _check(suites, args.quick)
    merged.update({"schema": 1, "suite": "check", "quick": args.quick, "machine": _machine()})
    merged["elapsed_s"] = (pn() - started) / 1e9
    merged["check"] = [
        {
            "suite": v.target.suite,
            "what": v.target.what,
            "measured": v.measured,
            "target": v.target.target,
            "margin": v.target.margin,
            "passed": v.passed,
            "why": v.why,
        }
        for v in verdicts
    ]
    _finish(merged, args, argv)
    if any(name in merged for name in ("supervisor", "local", "tui", "ocr", "otel", "cwsandbox", "docker", "replay")):
        print(render(merged))
        print()
    print(check.render(verdicts))
    typing = merged.get("local", {}).get("typing_check")
    if typing and not (typing["intact"] == typing["rounds"] and typing["verify_passed"]):
        print("the local suite's typing check failed: typed text did not arrive intact", file=sys.stderr)
        failed = True
    return 1 if failed else check.status(verdicts)


if __name__ == "__main__":
    sys.exit(main())
