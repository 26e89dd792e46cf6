"""Simulated analysts of known vigilance against the drills' scoring (issue 41, point 6).

    .venv/bin/python -m bench.drills [--seeds 100] [--decisions 2000] [--rate 0.05] [--json PATH]

Each analyst decides ``--decisions`` real requests; before each, the run's own DrillPlan (core/drills.py)
puts a drill at ``--rate`` from a library of threats and benign drills, and the analyst catches a threat
with their true catch rate (0, 0.7, 1.0) and rejects a benign drill with a false-alarm rate of 0.1. Their
answers go through the chain's own record (``drills.answered``) and the scores ``cua-tui stats`` gives
(``drill_scores``: the catch rate with its Wilson 95 % interval). Over ``--seeds`` seeds, the interval must
cover the true rate in at least 90 of 100 (a 95 % interval is expected to, about 95); a seed whose analyst
met no threat drill gives no interval and is counted apart.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

from cua_tui.core.drills import Drill, DrillPlan, answered, drill_scores
from cua_tui.core.geometry import Size
from cua_tui.core.imaging import blank_frame
from cua_tui.core.values import Answer, DecisionRequest

TRUE_RATES = (0.0, 0.7, 1.0)
FALSE_ALARMS = 0.1
# covered in at least this many of 100 seeds
FLOOR = 0.90


def library() -> tuple[Drill, ...]:
    """Three threats and one benign drill (their screens blank: the scoring is what is measured), each a safety
    check's, drilled in front of the real requests of the same kind."""
    frame = blank_frame(Size(64, 64))

    def made(name: str, answer: Answer) -> Drill:
        return Drill(name, "safety_check", answer, "why", "reason", "rule", "words", frame)

    return (made("t1", Answer.REJECT), made("t2", Answer.REJECT), made("t3", Answer.REJECT), made("b1", Answer.APPROVE))


def simulate(true_rate: float, seed: int, decisions: int, rate: float) -> dict[str, Any]:
    """One analyst over ``decisions`` real requests: their drill score."""
    plan = DrillPlan(rate, library(), random.Random(seed))
    analyst = random.Random(seed * 7919 + 1)
    events = []
    last = ""
    for n in range(decisions):
        real = DecisionRequest("run", n, 0, "c", "safety_check", "the model raised safety checks")
        drill = plan.before(real, last)
        if drill is None:
            continue
        last = drill.id
        if drill.benign:
            answer = "reject" if analyst.random() < FALSE_ALARMS else "approve"
        else:
            answer = "reject" if analyst.random() < true_rate else "approve"
        events.append(answered(drill, real, answer, "human", f"analyst-{true_rate}", 1000))
    score = drill_scores(events).get(f"analyst-{true_rate}")
    interval = score.catch_interval if score is not None else None
    return {
        "threats": score.threats if score else 0,
        "caught": score.caught if score else 0,
        "interval": interval,
        "covered": None if interval is None else interval[0] <= true_rate <= interval[1],
    }


def bench_drills(seeds: int = 100, decisions: int = 2000, rate: float = 0.05) -> dict[str, Any]:
    analysts = {}
    for true_rate in TRUE_RATES:
        results = [simulate(true_rate, seed, decisions, rate) for seed in range(seeds)]
        judged = [r for r in results if r["covered"] is not None]
        covered = sum(bool(r["covered"]) for r in judged)
        widths = sorted(r["interval"][1] - r["interval"][0] for r in judged)
        analysts[str(true_rate)] = {
            "seeds": seeds,
            "with_an_interval": len(judged),
            "covered": covered,
            "coverage": covered / len(judged) if judged else None,
            "median_threats": sorted(r["threats"] for r in results)[len(results) // 2],
            "median_width": widths[len(widths) // 2] if widths else None,
        }
    ok = all(a["coverage"] is not None and a["coverage"] >= FLOOR for a in analysts.values())
    return {"decisions": decisions, "drill_rate": rate, "floor": FLOOR, "analysts": analysts, "ok": ok}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=0.05)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    result = bench_drills(args.seeds, args.decisions, args.rate)
    print(f"drills: {args.decisions} decisions an analyst, drill_rate {args.rate}, {args.seeds} seeds")
    print("TRUE CATCH RATE  SEEDS  COVERED  COVERAGE  MEDIAN THREATS  MEDIAN WIDTH")
    for true_rate, a in result["analysts"].items():
        coverage = "-" if a["coverage"] is None else f"{a['coverage']:.0%}"
        width = "-" if a["median_width"] is None else f"{a['median_width']:.3f}"
        print(f"{true_rate:<15}  {a['seeds']:<5}  {a['covered']:<7}  {coverage:<8}  {a['median_threats']:<14}  {width}")
    print(f"the 95% interval covers the true rate in at least {FLOOR:.0%} of seeds: {'yes' if result['ok'] else 'NO'}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
