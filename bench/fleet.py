"""Suite ``fleet``: many runs at once through the fleet runner (cua_tui/fleet_runner.py), against its
targets: 200 sim runs through one queue, memory per idle run, local desktops at once, 8 cwsandbox runs, and
the fleet TUI at that load. ``python -m bench fleet [--quick]``; what each part measures:
docs/benchmarks.md, "fleet".
"""

from __future__ import annotations

import gc
import json
import math
import os
import statistics
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_tui.build import HANDSHAKE, RunOptions
from cua_tui.config import Settings
from cua_tui.core import events as ev
from cua_tui.core import fleet_queue as cf
from cua_tui.core.ports import Answer

from .common import SCREEN, log

if TYPE_CHECKING:
    from cua_tui.fleet_runner import Fleet
    from cua_tui.tui.app import CuaApp
    from cua_tui.tui.fleet_screen import FleetScreen

# a new request shows in the queue within this of its decision request
TARGET_QUEUE_MS = 100.0
TARGET_REFRESH_MS = 10.0  # the fleet TUI's UI-thread time per refresh
# how long the benchmark's reviewer takes to answer each request
ANSWER_DELAY_S = 0.5
# the keys part's simulated analyst: once a decision's guard has passed, it reads this long (seconds,
# drawn evenly from the range by a seeded generator) before y, and reads again if what is shown changed
READ_S = (0.5, 2.5)
TARGET_KEYS_PER_100 = 5.0  # keypresses per 100 decisions with grouping on (issue 25)
ANALYST = "sim-analyst@bench"
FORM = {
    "turns": [
        {
            "actions": [
                {"type": "click", "x": 250, "y": 182},
                {"type": "type", "text": "cua-tui verified"},
                {"type": "click", "x": 550, "y": 182},
            ]
        }
    ],
    "final_text": "done",
}


def _settings(tmp: Path, env: dict[str, str] | None = None) -> Settings:
    """The settings of a run with the built-in policy, whatever the user's; ``env``: the variables its
    settings read (the user's are not)."""
    return Settings.load({**(env or {}), "CUA_TUI_CONFIG": str(tmp / "no-config.toml")})


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def _stamped_sim_fleet(
    tmp: Path, name: str, runs: int, concurrency: int, operator: str | None = None, backend: str = "sim"
) -> tuple[Fleet, dict[tuple[str, int], float], threading.Lock]:
    """``runs`` scripted form runs on the sim desktop (``backend`` "local": the form lab's own script on
    local desktops) in one fleet, and when each decision_requested event was written:
    ``written[(run id, seq)]`` (monotonic seconds), under the returned lock."""
    from cua_tui.fleet_runner import Fleet, FleetTask

    written: dict[tuple[str, int], float] = {}
    lock = threading.Lock()

    def stamp(stamped: ev.Stamped) -> None:
        if isinstance(stamped.event, ev.DecisionRequested) and stamped.event.request is not None:
            with lock:
                written[(stamped.event.request.run_id, stamped.seq)] = time.monotonic()

    lab, script = None, FORM
    if backend == "local":
        from cua_tui.labs import get_lab

        lab, script = "form", get_lab("form").script(None)
    base = RunOptions(
        backend=backend,
        agent=None,
        lab=lab,
        script=script,
        task="fill the form",
        decisions=HANDSHAKE,
        fsync=True,
        settings=_settings(tmp),
        listeners=(stamp,),
        operator=operator,
    )
    tasks = [FleetTask(f"form-{i:03d}", base) for i in range(runs)]
    return Fleet(tasks, runs_dir=tmp / name, concurrency=concurrency), written, lock


# ------------------------------------------------------------------------------------------------
# 1. 200 sim runs, 32 at a time
# --------------------------------------------------------------------------------------------------
def bench_sim_fleet(tmp: Path, runs: int, concurrency: int) -> dict[str, Any]:

    fleet, written, lock = _stamped_sim_fleet(tmp, "fleet-sim", runs, concurrency)
    latencies: list[float] = []
    refused: list[str] = []
    most = 0
    going: set[str] = set()

    def listener(event: cf.FleetEvent) -> None:
        nonlocal most
        if isinstance(event, cf.RequestQueued):
            now = time.monotonic()
            item = event.item
            with lock:
                latencies.append((now - written[(item.run_id, item.seq)]) * 1000)

            def approve(item: cf.QueueItem = item) -> None:
                why = fleet.answer(item, Answer.APPROVE)
                if why is not None:
                    refused.append(why)

            # A reviewer takes a moment: the runs overlap, so the queue is measured with the fleet
            # at its limit.
            timer = threading.Timer(ANSWER_DELAY_S, approve)
            timer.daemon = True
            timer.start()
        elif isinstance(event, cf.RunChanged) and event.row.run_id and not event.row.ended:
            going.add(event.row.task)
            most = max(most, len(going))
        elif isinstance(event, cf.RunFinished):
            going.discard(event.row.task)

    fleet.subscribe(listener)
    log(f"fleet: {runs} sim runs, {concurrency} at a time, every decision answered through the queue")
    gc.collect()
    t0 = time.perf_counter()
    rows = fleet.run()
    wall = time.perf_counter() - t0
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row.status] = statuses.get(row.status, 0) + 1
    intact = sum(1 for row in rows if row.intact)
    return {
        "runs": runs,
        "concurrency": concurrency,
        "most_at_once": most,
        "wall_s": wall,
        "runs_per_s": runs / wall,
        "statuses": statuses,
        "sealed_intact": intact,
        "all_passed_intact": statuses.get("passed", 0) == runs and intact == runs,
        "requests": len(latencies),
        "refused_answers": len(refused),
        "queue_ms_median": statistics.median(latencies),
        "queue_ms_p99": _percentile(latencies, 0.99),
        "queue_ms_max": max(latencies),
        "target_queue_ms": TARGET_QUEUE_MS,
        "ratio_queue_target": TARGET_QUEUE_MS / max(_percentile(latencies, 0.99), 1e-6),
    }


# ------------------------------------------------------------------------------------------------
# 2. Memory per idle run
# --------------------------------------------------------------------------------------------------
def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def bench_idle_memory(tmp: Path, runs: int) -> dict[str, Any]:
    from cua_tui.fleet_runner import Fleet, FleetTask

    base = RunOptions(
        backend="sim", agent=None, script=FORM, task="fill", decisions=HANDSHAKE, fsync=False, settings=_settings(tmp)
    )
    # one fleet first, so that imports, caches and the first thread stacks are not counted
    warm = Fleet([FleetTask("warm", base)], runs_dir=tmp / "fleet-warm", concurrency=1)
    warm.start()
    while not warm.queue():
        time.sleep(0.01)
    warm.kill_all()
    warm.wait(30)
    gc.collect()
    fleet = Fleet([FleetTask(f"idle-{i}", base) for i in range(runs)], runs_dir=tmp / "fleet-idle", concurrency=runs)
    tracemalloc.start()
    rss0, traced0, threads0 = _rss(), tracemalloc.get_traced_memory()[0], threading.active_count()
    fleet.start()
    deadline = time.monotonic() + 60
    while len(fleet.queue()) < runs and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    gc.collect()
    rss1, traced1, threads1 = _rss(), tracemalloc.get_traced_memory()[0], threading.active_count()
    tracemalloc.stop()
    waiting = len(fleet.queue())
    fleet.kill_all()
    fleet.wait(60)
    return {
        "runs": runs,
        "waiting": waiting,
        "rss_per_run_kb": (rss1 - rss0) / runs / 1024,
        "traced_per_run_kb": (traced1 - traced0) / runs / 1024,
        "threads_per_run": (threads1 - threads0) / runs,
    }


# ------------------------------------------------------------------------------------------------
# 3. Local desktops at once
# --------------------------------------------------------------------------------------------------
def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _pss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


def _step_latency(desktops: list[Any], steps: int) -> float:
    """Median milliseconds of a click and its screenshot while every one of ``desktops`` steps at once."""
    from cua_tui.core.actions import Action, Kind

    samples: list[float] = []
    lock = threading.Lock()

    def stepper(desktop: Any, n: int) -> None:
        for j in range(n):
            action = Action(Kind.CLICK, point=(60 + (j * 71) % 900, 560 + (j * 13) % 120))
            t0 = time.perf_counter()
            desktop.perform(action)
            with lock:
                samples.append((time.perf_counter() - t0) * 1000)

    threads = [threading.Thread(target=stepper, args=(d, steps)) for d in desktops]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statistics.median(samples)


def bench_local_desktops(counts: tuple[int, ...], steps: int) -> dict[str, Any]:
    """Start max(counts) local desktops; PSS per desktop; step latency with k of them stepping at once."""
    from cua_tui.desktops.local import LocalDesktop
    from cua_tui.desktops.target import Target
    from cua_tui.fleet_runner import LOCAL_MEMORY_SHARE, memory_total
    from cua_tui.labs import get_lab

    most = max(counts)
    before = _pss(_descendants(os.getpid()))
    desktops: list[Any] = []
    started: list[float] = []
    try:
        for i in range(most):
            desktop = LocalDesktop(SCREEN, Target(get_lab("form")))
            t0 = time.perf_counter()
            desktop.start()
            started.append(time.perf_counter() - t0)
            desktops.append(desktop)
            log(f"fleet: local desktop {i + 1} of {most} started in {started[-1]:.1f} s")
        # let the pages settle (Chromium's start-up work) before measuring
        time.sleep(2.0)
        pss = _pss(_descendants(os.getpid())) - before
        per_desktop = pss / most
        latency: dict[int, float] = {}
        for k in counts:
            latency[k] = _step_latency(desktops[:k], steps)
            log(f"fleet: {k} local desktop(s) stepping at once: median click + screenshot {latency[k]:.0f} ms")
    finally:
        for desktop in desktops:
            desktop.stop()
    one = latency[min(counts)]
    cpu_fit = max(k for k in counts if latency[k] <= 2 * one)
    mem_total = memory_total()
    memory_fit = int(mem_total * LOCAL_MEMORY_SHARE // per_desktop)
    return {
        "desktops": most,
        "start_s_median": statistics.median(started),
        "pss_per_desktop_mb": per_desktop / 2**20,
        "step_ms": {str(k): v for k, v in latency.items()},
        "cpus": os.cpu_count() or 1,
        "mem_total_gb": mem_total / 2**30,
        "memory_fit": memory_fit,
        "cpu_fit_measured": cpu_fit,
        "cpu_fit_at_most": max(counts),
        "fits": min(memory_fit, cpu_fit),
    }


# ------------------------------------------------------------------------------------------------
# 4. cwsandbox: 8 runs at once against the local service, one exec per step
# --------------------------------------------------------------------------------------------------
@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` set in the environment for the block, what was there before put back after it."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _run_requests(row: cf.RunRow, requests: list[tuple[str, str, str]]) -> dict[str, int] | None:
    """The service's requests for one run's steps (between its desktop's ready and the verifier) and its
    steps; None for a run that left no sandbox or no such window."""
    if not row.path:
        return None
    sandbox_path = Path(row.path) / "sandbox-id.txt"
    if not sandbox_path.exists():
        return None
    sandbox = sandbox_path.read_text().strip()
    log_ = [(rpc, op) for rpc, sid, op in requests if sid == sandbox]
    try:
        start = log_.index(("StreamExec", "ready")) + 1
        end = log_.index(("StreamExec", "verify"))
    except ValueError:
        return None
    window = log_[start:end]
    records = [json.loads(line) for line in (Path(row.path) / "audit.jsonl").read_text().splitlines()]
    # Steps as the supervisor counts them: one outcome per proposed action. Those that never
    # reached the desktop (declined, refused) cost no request, so they are counted out; a stale
    # one did reach it.
    outcomes = [r for r in records if r["kind"] == "outcome"]
    reached = [r for r in outcomes if r["status"] in ("executed", "stale")]
    return {
        "requests": len(window),
        "non_exec": sum(1 for rpc, _ in window if rpc != "StreamExec"),
        "steps": len(reached),
    }


def bench_cwsandbox_fleet(tmp: Path, runs: int) -> dict[str, Any]:
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    import cwsandbox

    from cua_tui.fleet_runner import Fleet, FleetTask
    from cua_tui.labs import get_lab
    from tests.fakes.cwsandbox_local import HOST_IMAGE, LocalService

    cwsandbox.disable_signal_handlers()
    with LocalService(tmp / "fleet-cw-service") as service:
        # the image through the settings, as the command line passes it; the client reads the endpoint
        # and key from the environment
        settings = _settings(tmp, {"CUA_TUI_CWSANDBOX_IMAGE": HOST_IMAGE})
        with _environment({"CWSANDBOX_BASE_URL": service.base_url, "CWSANDBOX_API_KEY": "bench-key"}):
            lab = get_lab("form")
            base = RunOptions(
                backend="cwsandbox",
                agent=None,
                lab="form",
                script=lab.script(),
                decisions="approve",
                fsync=False,
                settings=settings,
            )
            fleet = Fleet(
                [FleetTask(f"cw-{i}", base) for i in range(runs)], runs_dir=tmp / "fleet-cw", concurrency=runs
            )
            log(f"fleet: {runs} cwsandbox runs at once (form lab, real client, local service)")
            t0 = time.perf_counter()
            rows = fleet.run()
            wall = time.perf_counter() - t0
        requests: list[tuple[str, str, str]] = list(service.service.requests)
    per_run = [counted for row in rows if (counted := _run_requests(row, requests)) is not None]
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row.status] = statuses.get(row.status, 0) + 1
    steps = sum(r["steps"] for r in per_run)
    return {
        "runs": runs,
        "wall_s": wall,
        "statuses": statuses,
        "sealed_intact": sum(1 for row in rows if row.intact),
        "measured_runs": len(per_run),
        "requests_per_step": sum(r["requests"] for r in per_run) / steps if steps else None,
        "non_exec_requests": sum(r["non_exec"] for r in per_run),
        "target_requests_per_step": 1.0,
    }


# ------------------------------------------------------------------------------------------------
# 5. The fleet TUI at that load
# --------------------------------------------------------------------------------------------------
def _answer_later(fleet: Fleet, asked: dict[int, tuple[str, int]], lock: threading.Lock) -> cf.FleetListener:
    """The benchmark's reviewer: notes each request's ``(run id, seq)`` under its ticket in ``asked``
    and approves it ANSWER_DELAY_S later."""

    def reviewer(event: cf.FleetEvent) -> None:
        if isinstance(event, cf.RequestQueued):
            item = event.item
            with lock:
                asked[item.ticket] = (item.run_id, item.seq)
            timer = threading.Timer(ANSWER_DELAY_S, lambda: fleet.answer(item, Answer.APPROVE))
            timer.daemon = True
            timer.start()

    return reviewer


async def _drive(app: CuaApp, fleet: Fleet, screen: FleetScreen) -> dict[str, float]:
    """Run the app until the fleet is done and shown; its UI thread's CPU and wall seconds, runs passed."""
    async with app.run_test(size=(200, 50)) as pilot:
        t0, c0 = time.perf_counter(), time.thread_time()
        while not (fleet.done and screen.finished):
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        return {
            "cpu_s": time.thread_time() - c0,
            "wall_s": time.perf_counter() - t0,
            "passed": sum(1 for r in screen.fleet_rows.values() if r.status == "passed"),
        }


def bench_fleet_tui(tmp: Path, runs: int, concurrency: int) -> dict[str, Any]:
    import asyncio

    from cua_tui.tui.fleet_screen import FleetScreen, fleet_app
    from cua_tui.tui.signals import Signals

    # ticket -> (run id, seq) of its decision_requested event
    asked: dict[int, tuple[str, int]] = {}
    fleet, written, lock = _stamped_sim_fleet(tmp, "fleet-tui", runs, concurrency)
    fleet.subscribe(_answer_later(fleet, asked, lock))
    app = fleet_app(fleet, signals=Signals(bell=False, notify=False), measure=True)
    screen = app.main
    assert isinstance(screen, FleetScreen)
    log(f"fleet: the fleet TUI over {runs} sim runs, {concurrency} at a time")
    ui = asyncio.run(_drive(app, fleet, screen))
    refresh = screen.refresh_ms
    latencies = [
        (screen.shown_at[ticket] - written[key]) * 1000 for ticket, key in asked.items() if ticket in screen.shown_at
    ]
    per_refresh_total = ui["cpu_s"] * 1000 / max(len(refresh), 1)
    p99 = _percentile(latencies, 0.99) if latencies else float("inf")
    return {
        "runs": runs,
        "concurrency": concurrency,
        "passed_shown": int(ui["passed"]),
        "wall_s": ui["wall_s"],
        "refreshes": len(refresh),
        "refresh_ms_median": statistics.median(refresh),
        "refresh_ms_p99": _percentile(refresh, 0.99),
        "refresh_ms_max": max(refresh),
        "ui_cpu_s": ui["cpu_s"],
        "ui_cpu_ms_per_refresh": per_refresh_total,
        "target_refresh_ms": TARGET_REFRESH_MS,
        "ratio_refresh_target": TARGET_REFRESH_MS / max(_percentile(refresh, 0.99), 1e-6),
        "ratio_ui_cpu_target": TARGET_REFRESH_MS / max(per_refresh_total, 1e-6),
        "requests": len(asked),
        "shown_requests": len(latencies),
        "queue_shown_ms_median": statistics.median(latencies) if latencies else None,
        "queue_shown_ms_p99": p99,
        "queue_shown_ms_max": max(latencies) if latencies else None,
        "target_queue_ms": TARGET_QUEUE_MS,
        "ratio_queue_shown_target": TARGET_QUEUE_MS / max(p99, 1e-6),
    }


# ------------------------------------------------------------------------------------------------
# 6. Keypresses per 100 decisions: the fleet TUI's keys, with the grouping on and off
# --------------------------------------------------------------------------------------------------
async def _analyst(app: CuaApp, fleet: Fleet, screen: FleetScreen, read: Callable[[], float]) -> dict[str, Any]:
    """The simulated analyst at the keys: for each decision shown, waits for its guard, reads, presses y
    (again after reading again when what was shown changed meanwhile). Its keypresses and wall time."""
    presses = 0
    async with app.run_test(size=(200, 50)) as pilot:
        t0 = time.perf_counter()
        while not (fleet.done and screen.finished):
            item = screen.selected
            if app.screen is not screen or item is None or item.ticket not in screen.pending_tickets:
                await pilot.pause(0.02)
                continue
            guard = screen.guard
            if not guard.passed():
                await pilot.pause(0.02)
                continue
            shown = guard.shown
            await pilot.pause(read())
            if guard.shown != shown or not guard.passed():
                continue  # it changed while read: read it again
            await pilot.press("y")
            presses += 1
            await pilot.pause(0.05)
        return {"presses": presses, "wall_s": time.perf_counter() - t0}


def _stats_lines(runs_dir: Path) -> list[str]:
    """``cua-tui stats`` over the runs the simulated analyst supervised, as the command prints it."""
    import subprocess
    import sys

    code = "from cua_tui.cli import main; main()"
    out = subprocess.run(
        [sys.executable, "-c", code, "stats", "--runs-dir", str(runs_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "CUA_TUI_CONFIG": str(runs_dir / "no-config.toml")},
    )
    return out.stdout.splitlines() or [f"(stats failed: {out.stderr.strip()[-200:]})"]


def bench_fleet_keys(
    tmp: Path,
    runs: int,
    concurrency: int,
    grouping: bool,
    read_s: tuple[float, float] = READ_S,
    backend: str = "sim",
) -> dict[str, Any]:
    import asyncio
    import random

    from cua_tui.core.audit import verify_run
    from cua_tui.tui.fleet_screen import FleetScreen, fleet_app
    from cua_tui.tui.signals import Signals

    name = f"fleet-keys-{backend}-{'grouped' if grouping else 'single'}"
    fleet, _written, _lock = _stamped_sim_fleet(tmp, name, runs, concurrency, operator=ANALYST, backend=backend)
    app = fleet_app(fleet, signals=Signals(bell=False, notify=False), measure=True, grouping=grouping)
    screen = app.main
    assert isinstance(screen, FleetScreen)
    rng = random.Random(25)
    on = "on" if grouping else "off"
    log(f"fleet: {runs} {backend} runs, {concurrency} at a time, answered at the keys, grouping {on}")
    drove = asyncio.run(_analyst(app, fleet, screen, lambda: rng.uniform(*read_s)))
    decided = grouped = 0
    rows = fleet.rows()
    for row in rows:
        for record in _decisions(Path(row.path)):
            decided += 1
            grouped += record.get("group") is not None
    strays = [
        sorted(set(answered) - set(shown)) for shown, answered in screen.group_answers if set(answered) - set(shown)
    ]
    presses = drove["presses"]
    per_100 = presses * 100 / max(decided, 1)
    return {
        "backend": backend,
        "runs": runs,
        "concurrency": concurrency,
        "grouping": grouping,
        "decisions": decided,
        "decided_in_groups": grouped,
        "presses": presses,
        "presses_per_100": per_100,
        "group_answers": len(screen.group_answers),
        "largest_group": max((len(a) for _, a in screen.group_answers), default=1),
        "answers_outside_their_group": len(strays),
        "passed": sum(1 for row in rows if row.status == "passed"),
        "intact": sum(1 for row in rows if row.path and verify_run(row.path).intact),
        "wall_s": drove["wall_s"],
        "target_presses_per_100": TARGET_KEYS_PER_100,
        "ratio_target": TARGET_KEYS_PER_100 / max(per_100, 1e-6),
        "stats": _stats_lines(tmp / name) if grouping else [],
    }


def _decisions(path: Path) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in (path / "audit.jsonl").read_text().splitlines()]
    return [r for r in records if r["kind"] == "decision" and r["by"] != "policy"]


# ------------------------------------------------------------------------------------------------
def run(
    tmp: Path, quick: bool, parts: tuple[str, ...] = ("sim", "idle", "local", "cwsandbox", "tui", "keys")
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "sim" in parts:
        out["sim"] = bench_sim_fleet(tmp, 40 if quick else 200, 8 if quick else 32)
    if "tui" in parts:
        out["tui"] = bench_fleet_tui(tmp, 40 if quick else 200, 8 if quick else 32)
    if "keys" in parts:
        out["keys"] = [bench_fleet_keys(tmp, 40 if quick else 200, 8 if quick else 32, on) for on in (True, False)]
        from .local import local_missing

        if not local_missing():
            # the rule on real screens: the form lab on as many local desktops, each its own Chromium
            out["keys"].append(bench_fleet_keys(tmp, 2 if quick else 6, 2 if quick else 6, True, backend="local"))
    if "idle" in parts:
        out["idle"] = bench_idle_memory(tmp, 8 if quick else 32)
    if "local" in parts:
        from .local import local_missing

        if local_missing():
            out["local"] = {"skipped": f"{', '.join(local_missing())} not found"}
        else:
            out["local"] = bench_local_desktops((1, 2) if quick else (1, 2, 4, 6, 8), 6 if quick else 15)
    if "cwsandbox" in parts:
        out["cwsandbox"] = bench_cwsandbox_fleet(tmp, 2 if quick else 8)
    return out


def report(r: dict[str, Any]) -> list[str]:
    """The suite's lines for the benchmark report."""
    lines = ["Fleet: many runs at once, one approval queue (cua_tui/fleet_runner.py)", "-" * 110]
    sim = r.get("sim")
    if sim:
        lines += [
            f"sim: {sim['runs']} runs, {sim['concurrency']} at a time (at most {sim['most_at_once']} seen), "
            f"{sim['wall_s']:.1f} s ({sim['runs_per_s']:.1f} runs/s); statuses {sim['statuses']}; "
            f"sealed and verified intact: {sim['sealed_intact']} of {sim['runs']}",
            f"  decision_requested -> queue listener: median {sim['queue_ms_median']:.2f} ms, p99 "
            f"{sim['queue_ms_p99']:.2f} ms, max {sim['queue_ms_max']:.2f} ms over {sim['requests']} requests; "
            f"target {sim['target_queue_ms']:.0f} ms (p99): {sim['ratio_queue_target']:.1f}x",
        ]
    tui = r.get("tui")
    if tui:
        lines += [
            f"fleet TUI: {tui['runs']} sim runs, {tui['concurrency']} at a time, {tui['wall_s']:.1f} s, "
            f"{tui['passed_shown']} shown passed; {tui['refreshes']} refreshes",
            f"  UI thread per refresh (handler): median {tui['refresh_ms_median']:.2f} ms, p99 "
            f"{tui['refresh_ms_p99']:.2f} ms, max {tui['refresh_ms_max']:.2f} ms; "
            f"target {tui['target_refresh_ms']:.0f} ms (p99): {tui['ratio_refresh_target']:.1f}x",
            f"  UI thread in all (layout and painting too): {tui['ui_cpu_s']:.1f} s CPU, "
            f"{tui['ui_cpu_ms_per_refresh']:.2f} ms per refresh: {tui['ratio_ui_cpu_target']:.1f}x",
            f"  decision_requested -> in the queue table: median {tui['queue_shown_ms_median']:.1f} ms, p99 "
            f"{tui['queue_shown_ms_p99']:.1f} ms, max {tui['queue_shown_ms_max']:.1f} ms over "
            f"{tui['shown_requests']} of {tui['requests']} requests; target {tui['target_queue_ms']:.0f} ms (p99): "
            f"{tui['ratio_queue_shown_target']:.1f}x",
        ]
    lines += _keys_lines(r.get("keys") or [])
    idle = r.get("idle")
    if idle:
        lines.append(
            f"memory per idle run ({idle['runs']} runs waiting on a decision): RSS {idle['rss_per_run_kb']:.0f} kB, "
            f"Python heap (tracemalloc) {idle['traced_per_run_kb']:.0f} kB, {idle['threads_per_run']:.1f} threads"
        )
    loc = r.get("local")
    if loc and "skipped" not in loc:
        steps = ", ".join(f"{k}: {v:.0f} ms" for k, v in loc["step_ms"].items())
        lines += [
            f"local desktops: {loc['desktops']} started (median {loc['start_s_median']:.1f} s each), "
            f"{loc['pss_per_desktop_mb']:.0f} MB PSS per desktop; {loc['cpus']} CPUs, {loc['mem_total_gb']:.0f} GiB",
            f"  median click + screenshot with k desktops stepping at once: {steps}",
            f"  fits by memory (half of it): {loc['memory_fit']}; by CPU (median step within 2x of one desktop): "
            f"{loc['cpu_fit_measured']} of the {loc['cpu_fit_at_most']} tried; fits: {loc['fits']}",
        ]
    elif loc:
        lines.append(f"local desktops: skipped ({loc['skipped']})")
    cw = r.get("cwsandbox")
    if cw:
        rps = cw["requests_per_step"]
        lines.append(
            f"cwsandbox: {cw['runs']} runs at once in {cw['wall_s']:.1f} s, statuses {cw['statuses']}, sealed intact "
            f"{cw['sealed_intact']}; requests per step {rps:.2f} (target 1.00: "
            f"{(1.0 / rps if rps else 0):.2f}x), non-exec requests during steps: {cw['non_exec_requests']}"
        )
    lines.append("-" * 110)
    return lines


def _keys_lines(parts: list[dict[str, Any]]) -> list[str]:
    """The keys part's lines: keypresses per 100 decisions with the grouping on and off."""
    lines: list[str] = []
    for keys in parts:
        on = "on" if keys["grouping"] else "off"
        lines += [
            f"keys, grouping {on}: {keys['runs']} {keys.get('backend', 'sim')} runs ({keys['concurrency']} at a "
            f"time), {keys['decisions']} "
            f"decisions ({keys['decided_in_groups']} in groups) in {keys['presses']} keypresses: "
            f"{keys['presses_per_100']:.1f} per 100 decisions (target {keys['target_presses_per_100']:.0f}: "
            f"{keys['ratio_target']:.2f}x); largest group {keys['largest_group']}",
            f"  answers that reached a request not in the group shown: {keys['answers_outside_their_group']}; "
            f"passed {keys['passed']}, intact {keys['intact']}, {keys['wall_s']:.0f} s",
        ]
        lines += [f"  cua-tui stats> {line}" for line in keys["stats"]]
    return lines
