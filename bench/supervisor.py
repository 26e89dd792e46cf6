"""Suite 1 ("supervisor"): the supervisor's overhead per action, micro and end to end, against the seed
executor's ``audit()``."""

from __future__ import annotations

import gc
import hashlib
import itertools
import json
import shutil
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cua_tui.build import Run, RunOptions, build_run
from cua_tui.config import Settings
from cua_tui.core import events as ev
from cua_tui.core.actions import parse_openai
from cua_tui.core.audit import AuditClosed, AuditWriter, verify_run
from cua_tui.core.geometry import Scaling
from cua_tui.core.policy import Policy, Verdict
from cua_tui.core.ports import Answer, OutcomeStatus
from cua_tui.core.rundir import new_run_id
from cua_tui.core.supervisor import Listener

from .common import ACTIONS_PER_TURN, SCREEN, WARMUP, action_mix, log, pn, summarize_ns

# median supervisor overhead per action, without fsync
TARGET_ACTION_US = 1000.0


# ------------------------------------------------------------------------------------------------
# The seed executor's audit() (seed 003, "Step 6"), verbatim apart from its module globals
# --------------------------------------------------------------------------------------------------
class SeedAudit:
    """Append-only log; each line carries the hash of the previous line (reopens the file per line)."""

    def __init__(self, path: Path, run_id: str) -> None:
        self.AUDIT = path
        self.RUN_ID = run_id
        self.prev_hash = "0" * 64

    def audit(self, event: dict[str, Any]) -> None:
        event.update({"run": self.RUN_ID, "ts": time.time(), "prev": self.prev_hash})
        line = json.dumps(event, sort_keys=True)
        self.prev_hash = hashlib.sha256(line.encode()).hexdigest()
        with self.AUDIT.open("a") as fh:
            fh.write(line + "\n")


# ------------------------------------------------------------------------------------------------
# 1. Supervisor overhead per action, micro
# --------------------------------------------------------------------------------------------------
class Emitter:
    """``Supervisor._emit``: append to the audit log first, then tell the listeners."""

    def __init__(self, writer: AuditWriter, listeners: tuple[Callable[[ev.Event], None], ...]) -> None:
        self.audit = writer
        self._listeners = list(listeners)
        self._emit_lock = threading.RLock()

    def emit(self, event: ev.Event) -> None:
        """Append the event's record, then dispatch it to every listener (a failing one is ignored)."""
        with self._emit_lock:
            try:
                self.audit.append(event.kind, event.to_record())
            except AuditClosed:
                raise RuntimeError("the audit log is sealed") from None
            for listener in self._listeners:
                try:
                    listener(event)
                except Exception:
                    pass


def action_events(
    raw: dict[str, Any], policy: Policy, scaling: Scaling, turn: int, index: int, step: int
) -> list[ev.Event]:
    """The four events the supervisor emits for one action approved and executed (unmeasured helper)."""
    call_id = f"call_{turn:05d}"
    action = parse_openai(raw, scaling)
    decision = policy.classify(action)
    if decision.verdict is Verdict.ALLOW:
        decided = ev.DecisionMade(turn, index, Answer.APPROVE, "policy", note=decision.reason)
    else:
        decided = ev.DecisionMade(turn, index, Answer.APPROVE, "headless rule: approve", subject="action")
    return [
        ev.ActionProposed(turn, index, call_id, action.to_record(), action.describe(), "", "", raw["type"]),
        ev.PolicyVerdict(turn, index, decision.verdict, decision.reason, decision.rule),
        decided,
        ev.Outcome(turn, index, call_id, OutcomeStatus.EXECUTED, "OK", step, 0.0),
    ]


def bench_micro(tmp: Path, raws: list[dict[str, Any]], n: int, *, fsync: bool) -> dict[str, Any]:
    """parse + classify + 4 x (event, audit append, dispatch) per action, timed one action at a time."""
    writer = AuditWriter(tmp / f"micro-{'fsync' if fsync else 'nofsync'}.jsonl", new_run_id(), fsync=fsync)
    sink: list[ev.Event] = []
    total, parse_ns, classify_ns, emit_ns = _time_actions(Emitter(writer, (sink.append,)).emit, raws, n)
    writer.close()
    records = writer.seq
    size = writer.path.stat().st_size
    writer.path.unlink()
    return {
        **summarize_ns(total),
        "fsync": fsync,
        "records_per_action": 4,
        "avg_line_bytes": size / records,
        "listener_events": len(sink),
        "stages": {
            "parse": summarize_ns(parse_ns),
            "classify": summarize_ns(classify_ns),
            "emit4": summarize_ns(emit_ns),
        },
    }


def _time_actions(
    emit: Callable[[ev.Event], None], raws: list[dict[str, Any]], n: int
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Nanoseconds per action after the warm-up: in all, then parsing, classifying and the four emits."""
    policy = Policy.default()
    scaling = Scaling.identity(SCREEN)
    total: list[int] = []
    parse_ns: list[int] = []
    classify_ns: list[int] = []
    emit_ns: list[int] = []
    warmup = min(WARMUP, n)
    nraws = len(raws)
    gc.collect()
    for i in range(warmup + n):
        raw = raws[i % nraws]
        turn, index = i // ACTIONS_PER_TURN + 1, i % ACTIONS_PER_TURN
        call_id = f"call_{turn:05d}"
        t0 = pn()
        action = parse_openai(raw, scaling)
        t1 = pn()
        decision = policy.classify(action)
        t2 = pn()
        emit(
            ev.ActionProposed(
                turn, index, call_id, action.to_record(), action.describe(), "", "", raw["type"], parsed=action
            )
        )
        emit(ev.PolicyVerdict(turn, index, decision.verdict, decision.reason, decision.rule))
        if decision.verdict is Verdict.ALLOW:
            emit(ev.DecisionMade(turn, index, Answer.APPROVE, "policy", note=decision.reason))
        else:
            # confirm: the approver's ruling (headless approve); a block would not reach here in
            # this mix
            emit(ev.DecisionMade(turn, index, Answer.APPROVE, "headless rule: approve", subject="action"))
        emit(ev.Outcome(turn, index, call_id, OutcomeStatus.EXECUTED, "OK", i + 1, 0.0))
        t3 = pn()
        if i >= warmup:
            total.append(t3 - t0)
            parse_ns.append(t1 - t0)
            classify_ns.append(t2 - t1)
            emit_ns.append(t3 - t2)
    return total, parse_ns, classify_ns, emit_ns


def bench_audit_vs_seed(tmp: Path, raws: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """The same 4 records per action: 4 x AuditWriter.append (no fsync) vs 4 x the seed's audit(), interleaved."""
    policy = Policy.default()
    scaling = Scaling.identity(SCREEN)
    payloads = []
    for i, raw in enumerate(raws):
        turn, index = i // ACTIONS_PER_TURN + 1, i % ACTIONS_PER_TURN
        payloads.append([(e.kind, e.to_record()) for e in action_events(raw, policy, scaling, turn, index, i + 1)])
    writer = AuditWriter(tmp / "ours.jsonl", new_run_id(), fsync=False)
    seed = SeedAudit(tmp / "seed.jsonl", writer.run_id)
    ours_ns: list[int] = []
    seed_ns: list[int] = []
    warmup = min(WARMUP, n)
    append, audit = writer.append, seed.audit
    gc.collect()
    for i in range(warmup + n):
        records = payloads[i % len(payloads)]
        t0 = pn()
        for kind, record in records:
            append(kind, record)
        t1 = pn()
        for kind, record in records:
            # the seed builds a fresh dict per record too ({**rec, ...})
            audit({"kind": kind, **record})
        t2 = pn()
        if i >= warmup:
            ours_ns.append(t1 - t0)
            seed_ns.append(t2 - t1)
    writer.close()
    ours_bytes = writer.path.stat().st_size / writer.seq
    seed_bytes = seed.AUDIT.stat().st_size / writer.seq
    writer.path.unlink()
    seed.AUDIT.unlink()
    ours = summarize_ns(ours_ns)
    ours["avg_line_bytes"] = ours_bytes
    theirs = summarize_ns(seed_ns)
    theirs["avg_line_bytes"] = seed_bytes
    return {"ours_audit4_nofsync": ours, "seed_audit4": theirs}


# ------------------------------------------------------------------------------------------------
# 2. End to end through the Supervisor on the dry desktop
# --------------------------------------------------------------------------------------------------
def _stamping_listener(sink: list[ev.Event], stamps: list[int]) -> Callable[[ev.Stamped], None]:
    """One listener that appends every event to a list and notes when each outcome arrives."""
    outcome = ev.Outcome

    def listener(stamped: ev.Stamped) -> None:
        event = stamped.event
        sink.append(event)
        if type(event) is outcome:
            stamps.append(pn())

    return listener


def _e2e_run(tmp: Path, raws: list[dict[str, Any]], settings: Settings, listener: Listener, *, fsync: bool) -> Run:
    """One scripted run of ``raws`` on the dry desktop, made as the command line makes a run: the one builder."""
    turns = [{"actions": raws[i : i + ACTIONS_PER_TURN]} for i in range(0, len(raws), ACTIONS_PER_TURN)]
    return build_run(
        RunOptions(
            task="benchmark",
            backend="dry",
            screen=str(SCREEN),
            agent=None,
            script={"turns": turns, "final_text": "done"},
            agent_label="script",
            max_turns=len(turns) + 2,
            max_steps=len(raws) + 10,
            deadline=3600,
            runs_dir=tmp / "e2e",
            decisions="approve",
            listeners=(listener,),
            fsync=fsync,
            settings=settings,
        )
    )


def bench_e2e(tmp: Path, n_actions: int, runs: int, *, fsync: bool) -> dict[str, Any]:
    """``runs`` real Supervisor runs of ``n_actions`` scripted actions on the dry desktop, every one approved."""
    raws = action_mix(n_actions, seed=99)
    per_action_ns: list[int] = []
    intervals: list[int] = []
    records = 0
    statuses: dict[str, int] = {}
    intact = True
    # built-in policy, whatever the user's
    settings = Settings.load({"CUA_TUI_CONFIG": str(tmp / "no-config.toml")})
    for _ in range(runs):
        sink: list[ev.Event] = []
        stamps: list[int] = []
        run = _e2e_run(tmp, raws, settings, _stamping_listener(sink, stamps), fsync=fsync)
        sup, rundir = run.supervisor, run.supervisor.rundir
        gc.collect()
        t0 = pn()
        result = sup.run()
        t1 = pn()
        if result.executed != n_actions or result.status != "finished":
            raise RuntimeError(f"end-to-end run did not execute every action: {result.status} {result.reason}")
        per_action_ns.append((t1 - t0) // n_actions)
        intervals += [b - a for a, b in itertools.pairwise(stamps)]
        records += result.seal["events"]
        for e in sink:
            if type(e) is ev.Outcome:
                statuses[str(e.status)] = statuses.get(str(e.status), 0) + 1
        intact = intact and verify_run(rundir.path).intact
        shutil.rmtree(rundir.path, ignore_errors=True)
    return {
        **summarize_ns(intervals),
        "fsync": fsync,
        "actions_per_run": n_actions,
        "runs": runs,
        # run time / actions (median of runs)
        "per_action_run_us": statistics.median(per_action_ns) / 1e3,
        "per_action_run": summarize_ns(per_action_ns),
        "records_per_action": records / (n_actions * runs),
        "statuses": statuses,
        "intact": intact,
    }


def run_supervisor(tmp: Path, size: dict[str, int]) -> dict[str, Any]:
    """The whole suite: micro with and without fsync, the seed's audit() side by side, end to end."""
    raws = action_mix(500)
    log(f"supervisor micro, no fsync ({size['micro_nofsync']:,} actions)")
    mn = bench_micro(tmp, raws, size["micro_nofsync"], fsync=False)
    log(f"supervisor micro, fsync per line ({size['micro_fsync']:,} actions)")
    mf = bench_micro(tmp, raws, size["micro_fsync"], fsync=True)
    log(f"audit append vs the seed's audit() ({size['audit_vs_seed']:,} actions)")
    versus = bench_audit_vs_seed(tmp, raws, size["audit_vs_seed"])
    log(f"end to end via Supervisor, no fsync ({size['e2e_runs']} x {size['e2e_nofsync_actions']:,} actions)")
    en = bench_e2e(tmp, size["e2e_nofsync_actions"], size["e2e_runs"], fsync=False)
    log(f"end to end via Supervisor, fsync ({size['e2e_runs']} x {size['e2e_fsync_actions']:,} actions)")
    ef = bench_e2e(tmp, size["e2e_fsync_actions"], size["e2e_runs"], fsync=True)
    seed_median = versus["seed_audit4"]["median_us"]
    return {
        "micro_nofsync": mn,
        "micro_fsync": mf,
        **versus,
        "e2e_nofsync": en,
        "e2e_fsync": ef,
        "target_us": TARGET_ACTION_US,
        "ratio_target_nofsync": TARGET_ACTION_US / mn["median_us"],
        "ratio_target_fsync": TARGET_ACTION_US / mf["median_us"],
        "ratio_target_e2e_nofsync": TARGET_ACTION_US / en["median_us"],
        "ratio_seed_audit": seed_median / versus["ours_audit4_nofsync"]["median_us"],
        "ratio_seed_full": seed_median / mn["median_us"],
        "ratio_seed_full_fsync": seed_median / mf["median_us"],
    }
