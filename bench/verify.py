"""Suite 2 ("verify"): ``verify_run`` throughput on a generated, sealed and signed run directory, against
the obvious verifier."""

from __future__ import annotations

import gc
import hashlib
import json
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cua_tui.core import events as ev
from cua_tui.core.actions import parse_openai
from cua_tui.core.audit import GENESIS, AuditKey, AuditWriter, verify_run
from cua_tui.core.geometry import Scaling, Size
from cua_tui.core.imaging import blank_frame
from cua_tui.core.policy import Policy, Verdict
from cua_tui.core.ports import Answer, Frame, OutcomeStatus
from cua_tui.core.rundir import RunDir, ScreenStore, write_json_atomic

from .common import ACTIONS_PER_TURN, SCREEN, action_mix, pn

TARGET_VERIFY_EPS = 200_000.0  # events verified per second

_TURN_TEXTS = (
    "I'll open the search page and look for the form.",
    "The form is visible. I will fill in the name field, then submit it.",
    "Scrolling down to find the submit button below the fold.",
    "",
)


def make_run_dir(root: Path, n_events: int, key: AuditKey) -> dict[str, Any]:
    """A run directory of exactly ``n_events`` realistic records, sealed and signed, with 6 screenshots."""
    rundir = RunDir.create(root)
    store = ScreenStore(rundir.path / "screens")
    frames = [blank_frame(Size(320 + 16 * i, 200), (255, 255 - 30 * i, 255)) for i in range(6)]
    for frame in frames:
        store.put(frame.sha256, frame.png)
    writer = AuditWriter(rundir.audit, rundir.run_id, fsync=False)
    policy = Policy.default()
    last = n_events - 1  # room for run_ended

    def emit(event: ev.Event) -> bool:
        if writer.seq >= last:
            return False
        writer.append(event.kind, event.to_record())
        return True

    emit(
        ev.RunStarted(
            "fill in the contact form on the lab page and submit it",
            "dry",
            "script",
            None,
            str(SCREEN),
            policy.name,
            policy.sha256,
            {"max_turns": 30, "max_steps": 200, "deadline_seconds": 1800},
        )
    )
    turn, step = _write_turns(writer, emit, frames, policy, last)
    while emit(ev.Phase(ev.RunPhase.WAITING_MODEL, "waiting for the model")):
        pass  # exactly n_events records
    writer.append(
        "run_ended",
        ev.RunEnded(ev.RunStatus.FINISHED, "the agent finished", turn, step, step, None, "done").to_record(),
    )
    seal = writer.seal(key)
    write_json_atomic(
        rundir.result_json,
        {"run_id": rundir.run_id, "status": "finished", "counts": {"events": seal["events"]}, "seal": seal},
    )
    size = rundir.audit.stat().st_size
    return {"path": rundir.path, "events": seal["events"], "bytes": size, "avg_line_bytes": size / seal["events"]}


def _write_turns(
    writer: AuditWriter, emit: Callable[[ev.Event], bool], frames: list[Frame], policy: Policy, last: int
) -> tuple[int, int]:
    """Model turns of ACTIONS_PER_TURN actions each until the log is nearly full; (last turn, last step)."""
    scaling = Scaling.identity(SCREEN)
    raws = action_mix(500, seed=7)
    turn = step = shot = 0
    running = True
    while running:
        turn += 1
        f = frames[shot % len(frames)]
        running = emit(ev.Phase(ev.RunPhase.WAITING_MODEL, "waiting for the model")) and emit(
            ev.ModelTurn(turn, _TURN_TEXTS[turn % len(_TURN_TEXTS)], 1, ACTIONS_PER_TURN, f"resp_{turn:08x}", 2100, 140)
        )
        for index in range(ACTIONS_PER_TURN):
            if not running:
                break
            raw = raws[(turn * ACTIONS_PER_TURN + index) % len(raws)]
            step += 1
            shot += 1
            seq = _action_records(raw, policy, scaling, turn, index, step, f, frames[shot % len(frames)])
            f = frames[shot % len(frames)]
            if writer.seq + len(seq) > last:
                # an action's records go in whole: each proposal has its outcome
                running = False
                break
            for event in seq:
                emit(event)
    return turn, step


def _action_records(
    raw: dict[str, Any],
    policy: Policy,
    scaling: Scaling,
    turn: int,
    index: int,
    step: int,
    before: Frame,
    after: Frame,
) -> list[ev.Event]:
    """The events of one approved, executed action, as the supervisor writes them (a stale check first
    when the policy asks for a confirmation)."""
    action = parse_openai(raw, scaling)
    decision = policy.classify(action)
    call_id = f"call_{turn:08x}"
    seq: list[ev.Event] = [
        ev.ActionProposed(turn, index, call_id, action.to_record(), action.describe(), "", "", raw["type"]),
        ev.PolicyVerdict(turn, index, decision.verdict, decision.reason, decision.rule),
    ]
    if decision.verdict is Verdict.CONFIRM:
        seq += [
            ev.DecisionRequested(turn, index, call_id, "action", decision.reason),
            ev.Phase(ev.RunPhase.AWAITING_DECISION, decision.reason),
            ev.DecisionMade(turn, index, Answer.APPROVE, "human", subject="action"),
            ev.ScreenCaptured(before.sha256, before.width, before.height, len(before.png), turn, step, "stale_check"),
        ]
    else:
        seq.append(ev.DecisionMade(turn, index, Answer.APPROVE, "policy", note=decision.reason))
    seq += [
        ev.Phase(ev.RunPhase.EXECUTING, action.describe()),
        ev.Outcome(turn, index, call_id, OutcomeStatus.EXECUTED, "OK", step, 12.5 + index),
        ev.ScreenCaptured(after.sha256, after.width, after.height, len(after.png), turn, step, "after_action"),
    ]
    return seq


def naive_verify(run_dir: Path) -> tuple[bool, int]:
    """The obvious verifier: json.loads each line, recompute the chain with hashlib, check seal and screens."""
    prev, count, screens = GENESIS, 0, set()
    with open(run_dir / "audit.jsonl", "rb") as fh:
        for raw in fh:
            line = raw.rstrip(b"\n")
            record = json.loads(line)
            if record["prev"] != prev or record["seq"] != count:
                return False, count
            if record["kind"] == "screen":
                screens.add(record["sha256"])
            prev = hashlib.sha256(line).hexdigest()
            count += 1
    seal = json.loads((run_dir / "result.json").read_bytes())["seal"]
    if seal["events"] != count or seal["head"] != prev:
        return False, count
    for sha in screens:
        if hashlib.sha256((run_dir / "screens" / f"{sha}.png").read_bytes()).hexdigest() != sha:
            return False, count
    return True, count


def bench_verify(tmp: Path, n_events: int, repeats: int) -> dict[str, Any]:
    """``verify_run`` and the naive verifier, ``repeats`` times each, on one generated run of ``n_events``."""
    secret = tmp / "audit.key"
    secret.write_bytes(hashlib.sha256(b"cua-tui bench key").hexdigest().encode())
    key = AuditKey.load(secret)
    t0 = pn()
    run = make_run_dir(tmp / "verify-runs", n_events, key)
    generate_s = (pn() - t0) / 1e9
    ours_ns: list[int] = []
    naive_ns: list[int] = []
    for _ in range(repeats):
        gc.collect()
        t0 = pn()
        report = verify_run(run["path"], key)
        t1 = pn()
        if report.code != 0 or report.events != run["events"] or not report.signature_checked:
            raise RuntimeError(f"verify_run did not find the generated run intact: {report.summary}")
        gc.collect()
        t2 = pn()
        ok, count = naive_verify(run["path"])
        t3 = pn()
        if not ok or count != run["events"]:
            raise RuntimeError("the naive verifier did not find the generated run intact")
        ours_ns.append(t1 - t0)
        naive_ns.append(t3 - t2)
    events = run["events"]

    def stats(samples: list[int]) -> dict[str, Any]:
        best, median = min(samples), statistics.median(samples)
        return {
            "runs": len(samples),
            "best_s": best / 1e9,
            "median_s": median / 1e9,
            "best_eps": events / (best / 1e9),
            "median_eps": events / (median / 1e9),
        }

    ours, naive = stats(ours_ns), stats(naive_ns)
    shutil.rmtree(run["path"], ignore_errors=True)
    return {
        "events": events,
        "bytes": run["bytes"],
        "avg_line_bytes": run["avg_line_bytes"],
        "generate_s": generate_s,
        "target_eps": TARGET_VERIFY_EPS,
        "ours": ours,
        "naive": naive,
        "ratio_target": ours["median_eps"] / TARGET_VERIFY_EPS,
        "ratio_vs_naive": ours["median_eps"] / naive["median_eps"],
    }
