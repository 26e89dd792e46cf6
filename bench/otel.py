"""Suite ``otel``: what ``--otel`` costs a run whose collector cannot take the spans. The shipped sim
script (``cua_tui/labs/scripts/sim-form.json``) run through the CLI, as a person starts it, with no collector
configured (the baseline), with one that refuses the connection (nothing listens at its port), and with
one that accepts and never answers; the three interleaved so that a busy machine slows each alike.
``python -m bench otel [--quick]``; docs/benchmarks.md.

The target: a refusing collector costs at most 0.2 s more than none (the fastest run against the fastest:
the least disturbed by a load that comes and goes; a cost of --otel's own is in every run, the fastest
too). One that never answers may cost its stated timeout (``EXPORT_TIMEOUT_S``): that figure is reported,
not held.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import cua_tui

from .common import log

# seconds a refusing collector may add to a run (median of ours against median of the baseline)
TARGET_EXTRA_S = 0.2
# the shipped sim script (the README's sim fleet runs it): what a person would run on --backend sim
SCRIPT = Path(cua_tui.__file__).resolve().parent / "labs" / "scripts" / "sim-form.json"


def _closed_port() -> int:
    # a port bound and released: nothing listens there, so a connect is refused at once
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _silent() -> socket.socket:
    # accepts connections into its backlog and never reads or answers
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock


def _time(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=120)
    took = time.perf_counter() - started
    if out.returncode != 0:
        raise RuntimeError(f"the sim run failed (exit {out.returncode}): {out.stderr[-1000:]}")
    return took


def run(tmp: Path, quick: bool) -> dict[str, Any]:
    """``repeats`` runs each way, interleaved; the medians, the extra time and the target."""
    repeats = 7 if quick else 11
    script = SCRIPT
    env = {**os.environ, "CUA_TUI_CONFIG": str(tmp / "no-config.toml")}
    env.pop("OTEL_EXPORTER_OTLP_HEADERS", None)
    base = [sys.executable, "-m", "cua_tui.cli", "run", "--backend", "sim", "--agent", f"script:{script}"]
    base += ["--headless", "--on-confirm", "approve", "--runs-dir", str(tmp / "otel-runs")]
    silent = _silent()
    ways = {"none": base, "refused": [*base, "--otel", f"http://127.0.0.1:{_closed_port()}"]}
    if not quick:  # a silent collector costs seconds a run: the full run only
        ways["silent"] = [*base, "--otel", f"http://127.0.0.1:{silent.getsockname()[1]}"]
    log(f"otel: a sim run through the CLI, {repeats} times each way: {', '.join(ways)} (collector)")
    samples: dict[str, list[float]] = {way: [] for way in ways}
    try:
        for args in ways.values():
            _time(args, env)  # warm the file cache, untimed: the SDK's modules too, not only the baseline's
        for _ in range(repeats):
            for way, args in ways.items():
                samples[way].append(_time(args, env))
    finally:
        silent.close()
    medians = {way: statistics.median(values) for way, values in samples.items()}
    # what --otel adds: the fastest run of each way, the one the least disturbed by a load that comes and goes
    # (the suite's other parts); beside it, the median of each interleaved pair's difference, reported
    paired = statistics.median(r - n for r, n in zip(samples["refused"], samples["none"], strict=True))
    extra = min(samples["refused"]) - min(samples["none"])
    return {
        "repeats": repeats,
        "samples_s": samples,
        "median_s": medians,
        "refused_extra_s": extra,
        "refused_extra_paired_s": paired,
        "silent_extra_s": medians["silent"] - medians["none"] if "silent" in medians else None,
        "target_extra_s": TARGET_EXTRA_S,
        # the budget as a ratio for the gate: no collector's time plus the budget, over ours (>= 1 passes)
        "refused_budget_ratio": (medians["none"] + TARGET_EXTRA_S) / (medians["none"] + extra),
    }


def report(result: dict[str, Any]) -> list[str]:
    """The suite's section of the report."""
    m = result["median_s"]
    from cua_tui.export.otel import EXPORT_TIMEOUT_S

    return [
        f"otel: what --otel costs a sim run through the CLI, median of {result['repeats']} each (interleaved)",
        f"  no collector (baseline)      {m['none']:7.3f} s",
        f"  collector refuses            {m['refused']:7.3f} s   +{result['refused_extra_s']:.3f} s  "
        f"(fastest against fastest; target: at most +{result['target_extra_s']:.1f} s; the pairs' median "
        f"difference +{result['refused_extra_paired_s']:.3f} s)",
    ] + (
        [
            f"  collector never answers      {m['silent']:7.3f} s   +{result['silent_extra_s']:.3f} s  "
            f"(may cost its timeout, {EXPORT_TIMEOUT_S:g} s; not held to a target)"
        ]
        if "silent" in m
        else ["  collector never answers      (the full run only: --quick leaves it out)"]
    )


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m bench.otel", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cua-tui-bench-otel-") as name:
        print("\n".join(report(run(Path(name), args.quick))))
