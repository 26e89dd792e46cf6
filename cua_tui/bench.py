"""The shipped benchmark: supervisor overhead per action, ``verify`` throughput and the local desktop's
capture and input, side by side with baselines.

Run ``python -m cua_tui.bench`` (or ``python -m cua_tui.bench core``: sections 1-3),
``python -m cua_tui.bench local`` (section 4, needs the desktop's programs plus xdotool and scrot) or
``python -m cua_tui.bench all`` (both); ``--quick`` is a smoke run of a few seconds, ``--json PATH`` also
writes the results as JSON. Everything happens in a temporary directory.

What is measured (``time.perf_counter_ns``; medians and p90 over many samples):

1. Supervisor overhead per action, the micro figure: ``parse_openai`` of a realistic mix (click, type,
   keypress, scroll, move) + ``Policy.default().classify`` + the four events the supervisor emits for an
   executed action (proposal, verdict, decision, outcome), each appended through a real ``AuditWriter``
   and dispatched to one listener that appends to a list, exactly as ``Supervisor._emit`` does. With and
   without an fsync per line. Target: a median under 1 ms per action without fsync.
   Baseline: the seed executor's ``audit()`` (``json.dumps(sort_keys=True)`` + sha256 + ``open("a")`` per
   line) writing the same four records per action, timed interleaved with our four ``AuditWriter.append``.
2. The same actions end to end through the real ``Supervisor`` on the dry desktop (a cached blank frame;
   the screenshot store dedupes it) with a scripted agent and an approver that approves: run time divided
   by actions (nothing subtracted), and the distribution of outcome-to-outcome intervals.
3. ``verify`` throughput: a 100,000-event run directory (realistic records, HMAC-signed seal in result.json,
   a few screenshots referenced by ``screen`` events) checked by ``verify_run``; target 200,000 events/s.
   Baseline: the obvious verifier (``json.loads`` per line + ``hashlib``, seal and screenshots checked).
4. The local desktop (``local``): one ``LocalDesktop`` at 1024x720 with the form lab; the seeds' way, one
   subprocess per step on the same display (``scrot -o FILE`` + reading the file; ``xdotool mousemove X Y
   click 1`` then scrot; ``xdotool type --delay 25`` of 20 characters then scrot), against ours
   (``desktop.screenshot()``; ``desktop.perform(click)`` and ``desktop.perform(type)``, which return the
   settled screenshot after the input), timed sample by sample, alternately first. The field is clicked
   after an untimed click elsewhere (so the click visibly focuses it) and cleared between samples
   (ctrl+a, BackSpace, untimed). Targets: screenshot median at most 25 ms; click + screenshot at least 3x
   and typing + screenshot at least 5x faster than the seeds' way. Also reported: PNG sizes, how many
   step screenshots equal the screen 150 ms later ("fresh"), and a correctness check first: the phrase
   typed with no delay, then Verify, must be accepted by the lab's server.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import itertools
import json
import math
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .agents.script import Script, ScriptAgent
from .core import events as ev
from .core.actions import parse_openai
from .core.approvers import FixedApprover
from .core.audit import GENESIS, AuditClosed, AuditKey, AuditWriter, verify_run
from .core.geometry import Scaling, Size
from .core.imaging import blank_frame
from .core.policy import Policy, Verdict
from .core.ports import Answer, DesktopError
from .core.rundir import RunDir, ScreenStore, new_run_id, write_json_atomic
from .core.supervisor import RunConfig, Supervisor
from .desktops.dry import DryDesktop

SCREEN = Size(1024, 720)
TARGET_ACTION_US = 1000.0  # median supervisor overhead per action, without fsync
TARGET_VERIFY_EPS = 200_000.0  # events verified per second
ACTIONS_PER_TURN = 5
SUITES = ("core", "supervisor", "verify", "local", "tui", "all")

# Sample sizes: (full, quick).
SIZES = {
    "micro_nofsync": (20_000, 2_000),
    "micro_fsync": (1_000, 60),
    "audit_vs_seed": (10_000, 1_000),
    "e2e_nofsync_actions": (2_000, 200),
    "e2e_fsync_actions": (300, 30),
    "e2e_runs": (3, 1),
    "verify_events": (100_000, 10_000),
    "verify_repeats": (5, 3),
    "local_samples": (30, 8),
    "local_checks": (5, 2),
}
WARMUP = 200

pn = time.perf_counter_ns


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------------
# The action mix
# ---------------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------------
# The seed executor's audit() (seed 003, "Step 6"), verbatim apart from its module globals
# ---------------------------------------------------------------------------------------------------
class SeedAudit:
    """Append-only log; each line carries the hash of the previous line (reopens the file per line)."""

    def __init__(self, path: Path, run_id: str) -> None:
        self.AUDIT = path
        self.RUN_ID = run_id
        self.prev_hash = "0" * 64

    def audit(self, event: dict) -> None:
        event.update({"run": self.RUN_ID, "ts": time.time(), "prev": self.prev_hash})
        line = json.dumps(event, sort_keys=True)
        self.prev_hash = hashlib.sha256(line.encode()).hexdigest()
        with self.AUDIT.open("a") as fh:
            fh.write(line + "\n")


# ---------------------------------------------------------------------------------------------------
# 1. Supervisor overhead per action, micro
# ---------------------------------------------------------------------------------------------------
class Emitter:
    """``Supervisor._emit``: append to the audit log first, then tell the listeners."""

    def __init__(self, writer: AuditWriter, listeners: tuple[Callable[[ev.Event], None], ...]) -> None:
        self.audit = writer
        self._listeners = list(listeners)
        self._emit_lock = threading.RLock()

    def emit(self, event: ev.Event) -> None:
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


def action_events(raw: dict[str, Any], policy: Policy, scaling: Scaling, turn: int, index: int, step: int) -> list:
    """The four events the supervisor emits for one action approved and executed (unmeasured helper)."""
    call_id = f"call_{turn:05d}"
    action = parse_openai(raw, scaling)
    decision = policy.classify(action)
    if decision.verdict is Verdict.ALLOW:
        decided = ev.DecisionMade(turn, index, "approve", "policy", note=decision.reason)
    else:
        decided = ev.DecisionMade(turn, index, "approve", "headless rule: approve", subject="action")
    return [
        ev.ActionProposed(turn, index, call_id, action.to_record(), action.describe(), "", "", raw["type"]),
        ev.PolicyVerdict(turn, index, decision.verdict.value, decision.reason, decision.rule),
        decided,
        ev.Outcome(turn, index, call_id, "executed", "OK", step, 0.0),
    ]


def bench_micro(tmp: Path, raws: list[dict[str, Any]], n: int, *, fsync: bool) -> dict[str, Any]:
    """parse + classify + 4 x (event, audit append, dispatch) per action, timed one action at a time."""
    policy = Policy.default()
    scaling = Scaling.identity(SCREEN)
    writer = AuditWriter(tmp / f"micro-{'fsync' if fsync else 'nofsync'}.jsonl", new_run_id(), fsync=fsync)
    sink: list[ev.Event] = []
    emit = Emitter(writer, (sink.append,)).emit
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
        emit(ev.PolicyVerdict(turn, index, decision.verdict.value, decision.reason, decision.rule))
        if decision.verdict is Verdict.ALLOW:
            emit(ev.DecisionMade(turn, index, "approve", "policy", note=decision.reason))
        else:  # confirm: the approver's ruling (headless approve); a block would not reach here in this mix
            emit(ev.DecisionMade(turn, index, "approve", "headless rule: approve", subject="action"))
        emit(ev.Outcome(turn, index, call_id, "executed", "OK", i + 1, 0.0))
        t3 = pn()
        if i >= warmup:
            total.append(t3 - t0)
            parse_ns.append(t1 - t0)
            classify_ns.append(t2 - t1)
            emit_ns.append(t3 - t2)
    writer.close()
    records = writer.seq
    size = writer.path.stat().st_size
    writer.path.unlink()
    result = summarize_ns(total)
    result.update(
        {
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
    )
    return result


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
            audit({"kind": kind, **record})  # the seed builds a fresh dict per record too ({**rec, ...})
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


# ---------------------------------------------------------------------------------------------------
# 2. End to end through the Supervisor on the dry desktop
# ---------------------------------------------------------------------------------------------------
def _stamping_listener(sink: list[ev.Event], stamps: list[int]) -> Callable[[ev.Stamped], None]:
    """One listener that appends every event to a list and notes when each outcome arrives."""
    outcome = ev.Outcome

    def listener(stamped: ev.Stamped) -> None:
        event = stamped.event
        sink.append(event)
        if type(event) is outcome:
            stamps.append(pn())

    return listener


def bench_e2e(tmp: Path, n_actions: int, runs: int, *, fsync: bool) -> dict[str, Any]:
    raws = action_mix(n_actions, seed=99)
    turns = [{"actions": raws[i : i + ACTIONS_PER_TURN]} for i in range(0, n_actions, ACTIONS_PER_TURN)]
    policy = Policy.default().with_limits(max_turns=len(turns) + 2, max_steps=n_actions + 10, deadline_seconds=3600)
    per_action_ns: list[int] = []
    intervals: list[int] = []
    records = 0
    statuses: dict[str, int] = {}
    intact = True
    for _ in range(runs):
        agent = ScriptAgent(Script.from_data({"turns": turns, "final_text": "done"}))
        desktop = DryDesktop(SCREEN)
        rundir = RunDir.create(tmp / "e2e")
        cfg = RunConfig(task="benchmark", backend="dry", agent="script", model=None, screen=SCREEN, policy=policy)
        sink: list[ev.Event] = []
        stamps: list[int] = []
        sup = Supervisor(
            cfg,
            desktop,
            agent,
            FixedApprover(Answer.APPROVE),
            rundir,
            listeners=(_stamping_listener(sink, stamps),),
            fsync=fsync,
        )
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
                statuses[e.status] = statuses.get(e.status, 0) + 1
        intact = intact and verify_run(rundir.path).intact
        shutil.rmtree(rundir.path, ignore_errors=True)
    out = summarize_ns(intervals)
    out.update(
        {
            "fsync": fsync,
            "actions_per_run": n_actions,
            "runs": runs,
            "per_action_run_us": statistics.median(per_action_ns) / 1e3,  # run time / actions (median of runs)
            "per_action_run": summarize_ns(per_action_ns),
            "records_per_action": records / (n_actions * runs),
            "statuses": statuses,
            "intact": intact,
        }
    )
    return out


# ---------------------------------------------------------------------------------------------------
# 3. verify throughput
# ---------------------------------------------------------------------------------------------------
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
    scaling = Scaling.identity(SCREEN)
    raws = action_mix(500, seed=7)
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
    turn = step = shot = 0
    running = True
    while running:
        turn += 1
        f = frames[shot % len(frames)]
        running = emit(ev.Phase("waiting_model", "waiting for the model")) and emit(
            ev.ModelTurn(turn, _TURN_TEXTS[turn % len(_TURN_TEXTS)], 1, ACTIONS_PER_TURN, f"resp_{turn:08x}", 2100, 140)
        )
        for index in range(ACTIONS_PER_TURN):
            if not running:
                break
            raw = raws[(turn * ACTIONS_PER_TURN + index) % len(raws)]
            step += 1
            action = parse_openai(raw, scaling)
            decision = policy.classify(action)
            call_id = f"call_{turn:08x}"
            seq = [
                ev.ActionProposed(turn, index, call_id, action.to_record(), action.describe(), "", "", raw["type"]),
                ev.PolicyVerdict(turn, index, decision.verdict.value, decision.reason, decision.rule),
            ]
            if decision.verdict is Verdict.CONFIRM:
                seq += [
                    ev.DecisionRequested(turn, index, call_id, "action", decision.reason),
                    ev.Phase("awaiting_decision", decision.reason),
                    ev.DecisionMade(turn, index, "approve", "human", subject="action"),
                    ev.ScreenCaptured(f.sha256, f.width, f.height, len(f.png), turn, step, "stale_check"),
                ]
            else:
                seq.append(ev.DecisionMade(turn, index, "approve", "policy", note=decision.reason))
            shot += 1
            f = frames[shot % len(frames)]
            seq += [
                ev.Phase("executing", action.describe()),
                ev.Outcome(turn, index, call_id, "executed", "OK", step, 12.5 + index),
                ev.ScreenCaptured(f.sha256, f.width, f.height, len(f.png), turn, step, "after_action"),
            ]
            if writer.seq + len(seq) > last:  # an action's records go in whole: each proposal has its outcome
                running = False
                break
            for event in seq:
                emit(event)
    while emit(ev.Phase("waiting_model", "waiting for the model")):
        pass  # exactly n_events records
    writer.append(
        "run_ended", ev.RunEnded("finished", "the agent finished", turn, step, step, None, "done").to_record()
    )
    seal = writer.seal(key)
    write_json_atomic(
        rundir.result_json,
        {"run_id": rundir.run_id, "status": "finished", "counts": {"events": seal["events"]}, "seal": seal},
    )
    size = rundir.audit.stat().st_size
    return {"path": rundir.path, "events": seal["events"], "bytes": size, "avg_line_bytes": size / seal["events"]}


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


# ---------------------------------------------------------------------------------------------------
# 4. The local desktop: the seeds' subprocesses vs ours, on one real Xvfb + openbox + Chromium
# ---------------------------------------------------------------------------------------------------
TARGET_LOCAL_SHOT_MS = 25.0  # median of desktop.screenshot() (PNG bytes in memory)
TARGET_LOCAL_CLICK_X = 3.0  # click + fresh screenshot: times faster than xdotool click + scrot
TARGET_LOCAL_TYPE_X = 5.0  # typing 20 characters + fresh screenshot: times faster than xdotool type + scrot
LOCAL_TOOLS = ("xdotool", "scrot")  # the seeds' way; the desktop's own programs come from missing_programs()
LOCAL_TEXT = "The quick brown fox!"  # 20 characters, shifted ones included
SEED_TYPE_DELAY_MS = 25
BLANK_POINT = (760, 600)  # nothing of the form lab's page there: a click blurs the field
LOCAL_IDLE_S = 0.05  # pause after each untimed preparation step, so every timed step starts on a quiet screen
FRESH_AFTER_S = 0.15  # a frame is "fresh" when it equals the screen this long after the step returned
LOCAL_WARMUP = 1


def local_missing() -> list[str]:
    """Programs the ``local`` suite needs and this machine lacks."""
    from .desktops.local import missing_programs

    return [*missing_programs(), *(name for name in LOCAL_TOOLS if shutil.which(name) is None)]


class LocalBenchError(RuntimeError):
    """The local suite cannot measure (the seeds' tools cannot reach the display)."""


class SeedWay:
    """The seeds' executor: one subprocess per step against the same display, the screenshot through a file."""

    def __init__(self, display: str, cookie: Path | None, shot_path: Path) -> None:
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DISPLAY": display}
        self.cookie = cookie
        self.path = shot_path
        self.auth = "server-interpreted localuser (no cookie)"

    def _run(self, argv: list[str]) -> None:
        subprocess.run(argv, env=self.env, check=True, stdin=subprocess.DEVNULL, capture_output=True)

    def connect(self) -> None:
        """Probe both tools; if the server refuses them without the cookie, give them the desktop's cookie."""
        try:
            self._run(["xdotool", "getmouselocation"])
            self.screenshot()
        except subprocess.CalledProcessError as exc:
            if self.cookie is None or not self.cookie.exists():
                raise LocalBenchError(f"{exc.cmd[0]} cannot reach the display: {exc.stderr!r}") from None
            self.env["XAUTHORITY"] = str(self.cookie)
            self.auth = "the desktop's xauth cookie"
            self._run(["xdotool", "getmouselocation"])
            self.screenshot()

    def screenshot(self) -> bytes:
        self._run(["scrot", "-o", str(self.path)])
        return self.path.read_bytes()

    def click(self, x: int, y: int) -> bytes:
        self._run(["xdotool", "mousemove", str(x), str(y), "click", "1"])
        return self.screenshot()

    def type(self, text: str) -> bytes:
        self._run(["xdotool", "type", "--delay", str(SEED_TYPE_DELAY_MS), "--", text])
        return self.screenshot()


def _changed_box(png_a: bytes, png_b: bytes) -> list[int] | None:
    """The bounding box [x0, y0, x1, y1] of the pixels that differ between two screenshots, None if equal."""
    from PIL import Image, ImageChops

    with Image.open(io.BytesIO(png_a)) as a, Image.open(io.BytesIO(png_b)) as b:
        box = ImageChops.difference(a.convert("RGB"), b.convert("RGB")).getbbox()
    return list(box) if box else None


def bench_local(tmp: Path, n: int, checks: int) -> dict[str, Any]:
    """One LocalDesktop with the form lab; the seeds' way and ours timed sample by sample, alternately first."""
    from .desktops.local import LocalDesktop
    from .labs import get_lab
    from .labs.form import INPUT, PHRASE, VERIFY

    scaling = Scaling.identity(SCREEN)
    fx, fy = INPUT.center
    click_field = parse_openai({"type": "click", "button": "left", "x": fx, "y": fy}, scaling)
    blur = parse_openai({"type": "click", "button": "left", "x": BLANK_POINT[0], "y": BLANK_POINT[1]}, scaling)
    type_text = parse_openai({"type": "type", "text": LOCAL_TEXT}, scaling)
    type_phrase = parse_openai({"type": "type", "text": PHRASE}, scaling)
    click_verify = parse_openai(
        {"type": "click", "button": "left", "x": VERIFY.center[0], "y": VERIFY.center[1]}, scaling
    )
    select_all = parse_openai({"type": "keypress", "keys": ["ctrl", "a"]}, scaling)
    backspace = parse_openai({"type": "keypress", "keys": ["BackSpace"]}, scaling)
    assert len(type_text.text) == 20

    lab = get_lab("form")
    desktop = LocalDesktop(SCREEN, lab=lab)
    try:
        t0 = pn()
        desktop.start()
        start_s = (pn() - t0) / 1e9
        assert desktop.display is not None and desktop.workspace is not None
        seed = SeedWay(desktop.display, desktop.workspace / "run" / "xauth", tmp / "seed-shot.png")
        seed.connect()

        def prep(*actions: Any) -> None:
            """Untimed steps through our own session, then a short idle."""
            for action in actions:
                desktop.perform(action)
            time.sleep(LOCAL_IDLE_S)

        def stale_box(png: bytes) -> list[int] | None:
            """Where the frame differs from the screen a little later (None: the step's screenshot was fresh)."""
            time.sleep(FRESH_AFTER_S)
            return _changed_box(png, desktop.screenshot().png)

        # Correctness first: typing at full speed (no delay) must arrive intact. The lab's server records
        # a proof only for the exact phrase; count one new proof and no wrong attempt per round.
        log(f"local: typing check, {checks} round(s) of {PHRASE!r} + Verify through desktop.perform")
        intact = 0
        for _ in range(checks):
            prep(click_field, select_all, backspace)
            with lab.lock:
                proofs, wrong = len(lab.proofs), lab.wrong_attempts
            desktop.perform(type_phrase)
            desktop.perform(click_verify)
            now_proofs, now_wrong = proofs, wrong
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                with lab.lock:
                    now_proofs, now_wrong = len(lab.proofs), lab.wrong_attempts
                if (now_proofs, now_wrong) != (proofs, wrong):
                    break
                time.sleep(0.01)
            intact += int(now_proofs == proofs + 1 and now_wrong == wrong)
        verification = desktop.verify()
        assert verification is not None
        typing_check = {
            "phrase": PHRASE,
            "rounds": checks,
            "intact": intact,
            "verify_passed": verification.passed,
            "verify_detail": verification.detail,
        }

        ways: dict[str, dict[str, Callable[[], bytes]]] = {
            "seed": {
                "click": lambda: seed.click(fx, fy),
                "type": lambda: seed.type(LOCAL_TEXT),
                "screenshot": seed.screenshot,
            },
            "ours": {
                "click": lambda: desktop.perform(click_field).frame.png,
                "type": lambda: desktop.perform(type_text).frame.png,
                "screenshot": lambda: desktop.screenshot().png,
            },
        }
        steps = ("screenshot", "click", "type")
        times: dict[tuple[str, str], list[int]] = {(w, s): [] for w in ways for s in steps}
        sizes: dict[tuple[str, str], list[int]] = {(w, s): [] for w in ways for s in steps}
        fresh_count: dict[tuple[str, str], int] = {(w, s): 0 for w in ways for s in ("click", "type")}
        stale: list[dict[str, Any]] = []
        log(f"local: {LOCAL_WARMUP} warm-up + {n} samples, the seeds' way and ours interleaved")
        for i in range(LOCAL_WARMUP + n):
            record = i >= LOCAL_WARMUP
            for way in ("seed", "ours") if i % 2 == 0 else ("ours", "seed"):
                do = ways[way]
                # click: the field is blurred first (untimed), so the click visibly focuses it
                prep(blur)
                for step in ("click", "type"):  # typing goes into the field the click focused
                    gc.collect()
                    t1 = pn()
                    png = do[step]()
                    t2 = pn()
                    if record:
                        times[way, step].append(t2 - t1)
                        sizes[way, step].append(len(png))
                        box = stale_box(png)
                        if box is None:
                            fresh_count[way, step] += 1
                        else:
                            stale.append({"way": way, "step": step, "sample": i - LOCAL_WARMUP, "box": box})
                    else:
                        time.sleep(FRESH_AFTER_S)
                prep(select_all, backspace)  # the field never overflows
                gc.collect()
                t1 = pn()
                png = do["screenshot"]()
                t2 = pn()
                if record:
                    times[way, "screenshot"].append(t2 - t1)
                    sizes[way, "screenshot"].append(len(png))
    finally:
        desktop.stop()

    out: dict[str, Any] = {
        "display": desktop.display,
        "screen": f"{SCREEN.width}x{SCREEN.height}",
        "lab": "form",
        "start_s": start_s,
        "samples": n,
        "warmup": LOCAL_WARMUP,
        "text": LOCAL_TEXT,
        "text_chars": len(LOCAL_TEXT),
        "seed_type_delay_ms": SEED_TYPE_DELAY_MS,
        "seed_auth": seed.auth,
        "fresh_after_s": FRESH_AFTER_S,
        "stale": stale,
        "typing_check": typing_check,
    }
    for step in steps:
        entry: dict[str, Any] = {}
        for way in ways:
            stats = summarize_ns(times[way, step])
            stats["png_bytes"] = statistics.median(sizes[way, step])
            if step != "screenshot":
                stats["fresh"] = fresh_count[way, step]
            entry[way] = stats
        entry["speedup_vs_seed"] = entry["seed"]["median_us"] / entry["ours"]["median_us"]
        out[step] = entry
    shot, click, typed = out["screenshot"], out["click"], out["type"]
    shot["target_ms"] = TARGET_LOCAL_SHOT_MS
    shot["ratio_target"] = TARGET_LOCAL_SHOT_MS * 1000 / shot["ours"]["median_us"]
    shot["met"] = shot["ratio_target"] >= 1
    for entry, target in ((click, TARGET_LOCAL_CLICK_X), (typed, TARGET_LOCAL_TYPE_X)):
        entry["target_speedup"] = target
        entry["ratio_target"] = entry["speedup_vs_seed"] / target
        entry["met"] = entry["speedup_vs_seed"] >= target
    return out


# ---------------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------------
def _us(value: float) -> str:
    return f"{value:,.1f} µs" if value < 10_000 else f"{value / 1000:,.2f} ms"


def _ratio(value: float) -> str:
    return f"{value:,.2f}x"


def render_local(loc: dict[str, Any]) -> list[str]:
    """Section 4: the seeds' subprocesses (a) and ours (b) on one local desktop, with the targets."""
    header = (
        f"{'measurement':<58} {'n':>4} {'median':>10} {'p90':>10} {'mean':>10} {'PNG':>7}  "
        f"{'compared with':<24} {'ratio':>7}  {'target':<13}"
    )
    rule = "-" * len(header)
    lines = [
        f"3. Local desktop {loc['screen']} (Xvfb {loc['display']} + openbox + Chromium in bubblewrap, form lab; "
        f"started in {loc['start_s']:.1f} s): (a) the seeds' subprocesses vs (b) ours, interleaved",
        rule,
        header,
        rule,
    ]

    def row(name: str, s: dict[str, Any], versus: str = "", ratio: float | None = None, target: str = "") -> None:
        lines.append(
            f"{name:<58} {s['n']:>4} {_us(s['median_us']):>10} {_us(s['p90_us']):>10} {_us(s['mean_us']):>10} "
            f"{s['png_bytes'] / 1000:>5.0f}kB  {versus:<24} {_ratio(ratio) if ratio is not None else '':>7}  "
            f"{target:<13}"
        )

    def verdict(entry: dict[str, Any], goal: str) -> str:
        return f"{goal} {'met' if entry['met'] else 'MISSED'}"

    shot, click, typed = loc["screenshot"], loc["click"], loc["type"]
    goal = f"<= {shot['target_ms']:g} ms"
    row(
        "screenshot (b) ours: desktop.screenshot(), PNG in memory",
        shot["ours"],
        goal,
        shot["ratio_target"],
        verdict(shot, goal),
    )
    row("screenshot (a) seeds: scrot -o FILE + read", shot["seed"])
    row("screenshot (b) ours vs (a) seeds", shot["ours"], "(a) scrot", shot["speedup_vs_seed"])
    chars, delay = loc["text_chars"], loc["seed_type_delay_ms"]
    for entry, ours_name, seed_name in (
        (
            click,
            "click + screenshot (b) ours: desktop.perform(click)",
            "click + screenshot (a) seeds: xdotool click 1 + scrot",
        ),
        (
            typed,
            f"type {chars} chars + screenshot (b) ours: perform(type)",
            f"type {chars} chars + screenshot (a) seeds: --delay {delay} + scrot",
        ),
    ):
        goal = f">= {entry['target_speedup']:g}x"
        row(ours_name, entry["ours"], "(a) seeds", entry["speedup_vs_seed"], verdict(entry, goal))
        row(seed_name, entry["seed"])
    lines.append(rule)
    n = loc["samples"]
    lines.append(
        f"fresh frames (equal to the screen {loc['fresh_after_s'] * 1000:.0f} ms after the step returned): "
        f"click ours {click['ours']['fresh']}/{n}, seeds {click['seed']['fresh']}/{n}; "
        f"typing ours {typed['ours']['fresh']}/{n}, seeds {typed['seed']['fresh']}/{n}"
        + ("; where the others differed: local.stale in the JSON" if loc["stale"] else "")
    )
    tc = loc["typing_check"]
    ok = tc["intact"] == tc["rounds"] and tc["verify_passed"]
    lines.append(
        f"typing check ({'passed' if ok else 'FAILED'}): {tc['intact']}/{tc['rounds']} x {tc['phrase']!r} typed "
        f"with no delay arrived intact (Verify accepted); lab verify(): {tc['verify_detail']}"
    )
    lines.append(
        f"(a) runs xdotool/scrot as subprocesses on DISPLAY={loc['display']} via {loc['seed_auth']}; "
        f"typed text {loc['text']!r}; PNG = median size"
    )
    return lines


def render(results: dict[str, Any]) -> str:
    lines: list[str] = []
    m = results["machine"]
    lines.append(
        f"cua-tui benchmark ({results['suite']}{', quick' if results['quick'] else ''}): Python {m['python']}, "
        f"{m['platform']}, {m['cpus']} CPUs, temp dir {m['tmpdir']} ({m['tmp_fs']})"
    )
    lines.append("ratios: target/measured or baseline/ours for times, ours/target or ours/baseline for rates;")
    lines.append("        above 1.00x means better than the target or the baseline")
    header = f"{'measurement':<50} {'n':>7} {'median':>10} {'p90':>10} {'mean':>10}  {'compared with':<22} {'ratio':>8}"
    rule = "-" * len(header)
    sup = results.get("supervisor")
    if sup:
        lines += [
            "",
            "1. Supervisor overhead per action (parse + policy + 4 audit appends + dispatch)",
            rule,
            header,
            rule,
        ]

        def row(name: str, s: dict[str, Any], versus: str = "", ratio: float | None = None) -> None:
            lines.append(
                f"{name:<50} {s['n']:>7} {_us(s['median_us']):>10} {_us(s['p90_us']):>10} {_us(s['mean_us']):>10}  "
                f"{versus:<22} {_ratio(ratio) if ratio is not None else '':>8}"
            )

        mn, mf = sup["micro_nofsync"], sup["micro_fsync"]
        target = f"target < {TARGET_ACTION_US:,.0f} µs"
        row("micro, no fsync", mn, target, sup["ratio_target_nofsync"])
        for stage, label in (("parse", "parse_openai"), ("classify", "Policy.classify"), ("emit4", "4 events")):
            row(f"  of which {label}", mn["stages"][stage])
        row("micro, fsync per line", mf, target + " (info)", sup["ratio_target_fsync"])
        row("  of which 4 events (4 appends with fsync)", mf["stages"]["emit4"])
        ours, seed = sup["ours_audit4_nofsync"], sup["seed_audit4"]
        row("audit only: 4 x AuditWriter.append, no fsync", ours, "seed audit() x 4", sup["ratio_seed_audit"])
        row("baseline: 4 x seed audit() (reopen per line)", seed)
        row("micro, no fsync (whole action) vs seed audit only", mn, "seed audit() x 4", sup["ratio_seed_full"])
        row("micro, fsync per line vs seed (no fsync)", mf, "seed audit() x 4", sup["ratio_seed_full_fsync"])
        lines.append(rule)
        lines.append("end to end through Supervisor.run on the dry desktop (scripted agent, approver approves):")
        for label, key in (("no fsync", "e2e_nofsync"), ("fsync per line", "e2e_fsync")):
            e = sup[key]
            versus = target if not e["fsync"] else target + " (info)"
            row(f"  e2e, {label}: outcome-to-outcome interval", e, versus, TARGET_ACTION_US / e["median_us"])
            run_row = e["per_action_run"]
            row(
                f"  e2e, {label}: run time / actions (per run)",
                run_row,
                versus,
                TARGET_ACTION_US / run_row["median_us"],
            )
            lines.append(
                f"{'':<4}({e['runs']} run(s) of {e['actions_per_run']} actions; {e['records_per_action']:.2f} audit "
                f"records per action; outcomes {e['statuses']}; log verified intact: {e['intact']})"
            )
        lines.append(rule)
        lines.append(
            f"audit line size: ours {ours['avg_line_bytes']:.0f} B, seed {seed['avg_line_bytes']:.0f} B (same records)"
        )
    ver = results.get("verify")
    if ver:
        vheader = f"{'verifier':<50} {'runs':>7} {'best':>14} {'median':>14}  {'compared with':<22} {'ratio':>8}"
        vrule = "-" * len(vheader)
        lines += [
            "",
            f"2. verify throughput: {ver['events']:,} events, {ver['bytes'] / 1e6:.1f} MB, "
            f"{ver['avg_line_bytes']:.0f} B per line (generated in {ver['generate_s']:.1f} s)",
            vrule,
            vheader,
            vrule,
        ]
        o, nv = ver["ours"], ver["naive"]

        def vrow(name: str, s: dict[str, Any], versus: str = "", ratio: float | None = None) -> None:
            lines.append(
                f"{name:<50} {s['runs']:>7} {s['best_eps']:>10,.0f} ev/s {s['median_eps']:>10,.0f} ev/s  "
                f"{versus:<22} {_ratio(ratio) if ratio is not None else '':>8}"
            )

        vrow(
            "verify_run (chain, seal, HMAC signature, screens)",
            o,
            f"target {TARGET_VERIFY_EPS:,.0f} ev/s",
            ver["ratio_target"],
        )
        vrow("verify_run vs the naive verifier", o, "naive json+hashlib", ver["ratio_vs_naive"])
        vrow("baseline: naive (json.loads + hashlib per line)", nv)
        lines.append(vrule)
    loc = results.get("local")
    if loc:
        lines += ["", *render_local(loc)]
    if results.get("tui"):
        from . import bench_tui

        lines += ["", bench_tui.report(results["tui"])]
    lines += ["", f"total time {results['elapsed_s']:.1f} s; reproduce: {results['command']}"]
    return "\n".join(lines)


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


def run(suite: str, quick: bool, verify_events: int | None = None) -> dict[str, Any]:
    pick = 1 if quick else 0
    size = {name: values[pick] for name, values in SIZES.items()}
    if verify_events:
        size["verify_events"] = verify_events
    tmpdir = tempfile.gettempdir()
    results: dict[str, Any] = {
        "schema": 1,
        "suite": suite,
        "quick": quick,
        "machine": {
            "python": platform.python_version(),
            "executable": sys.executable,
            "platform": f"{platform.system()} {platform.machine()}",
            "cpus": os.cpu_count() or 0,
            "tmpdir": tmpdir,
            "tmp_fs": _tmp_fs(tmpdir),
        },
        "targets": {"action_median_us_nofsync": TARGET_ACTION_US, "verify_eps": TARGET_VERIFY_EPS},
    }
    started = pn()
    with tempfile.TemporaryDirectory(prefix="cua-tui-bench-") as tmp_name:
        tmp = Path(tmp_name)
        if suite in ("core", "supervisor", "all"):
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
            results["supervisor"] = {
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
    if suite in ("tui", "all"):
        from . import bench_tui

        log("tui: UI-thread time per new frame, ours vs textual-image's half-cell widget")
        results["tui"] = bench_tui.run(8 if quick else 30)
    results["elapsed_s"] = (pn() - started) / 1e9
    return results


def main(argv: list[str] | None = None) -> int:
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
        "tools), tui (UI-thread time per screenshot frame), all (core + local + tui)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a fast smoke run: fewer samples, 10,000 events, 8 local samples"
    )
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write the results as JSON to PATH")
    parser.add_argument("--events", type=int, metavar="N", help="events in the verify run (default 100,000)")
    args = parser.parse_args(argv)
    if args.events is not None and args.events < 10:
        parser.error("--events must be at least 10")
    if args.suite in ("local", "all"):
        missing = local_missing()
        if missing:
            print(
                f"the local suite cannot run: {', '.join(missing)} not found on this machine. Run "
                "`bash scripts/setup.sh bench local` as root: it installs the local desktop's programs (Xvfb, "
                "openbox, Chromium, bubblewrap, socat, xauth) and the seeds' xdotool and scrot.",
                file=sys.stderr,
            )
            return 2
    try:
        results = run(args.suite, args.quick, args.events)
    except (DesktopError, LocalBenchError) as exc:
        print(f"the local suite failed: {exc}", file=sys.stderr)
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
