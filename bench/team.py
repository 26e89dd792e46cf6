"""Suite ``team``: a fleet on a team's queue (cua_tui/team/) against a throwaway PostgreSQL server: sim runs
of the form task by 4 worker processes, 5 headless analysts racing on the same requests, and the in-process
fleet answering the same requests at once for comparison. ``python -m bench team [--quick]`` (1,000 runs;
quick: 24 runs, 2 workers, 3 analysts: still races on both sides, at a tenth of the CPU); what it measures:
docs/benchmarks.md, "team".
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import psycopg

from cua_tui.build import HANDSHAKE, RunOptions
from cua_tui.core import events as ev
from cua_tui.core import fleet_queue as cf
from cua_tui.core.policy import Policy as RunPolicy
from cua_tui.core.ports import Answer
from cua_tui.team import analyst, db
from cua_tui.team.control import TeamFleet
from cua_tui.team.payload import Policy, Spec
from cua_tui.team.submit import submit
from cua_tui.team.verify import check_fleet
from tests.fakes.pgserver import PgServer

from .common import log
from .fleet import FORM, _percentile, _settings

# (runs, worker processes, headless analysts) of a full run and a quick one
SIZES = {False: (1000, 4, 5), True: (24, 2, 3)}
# runs at once per worker: the sim desktop is in-process, so a worker's runs share its one CPU's worth
WORKER_CONCURRENCY = 8
# answer (its commit) to the action's execution, 99th percentile: the target this machine is held to
TARGET_P99_MS = 250.0
# an answer seen by another attached analyst (the fleet TUI's control), 99th percentile: "within a second"
TARGET_SEEN_P99_MS = 1000.0
DONE_S = 1800.0
_ANSWERED = re.compile(r": (\d+) answered, (\d+) answered by others first")


def run(tmp: Path, quick: bool) -> dict[str, Any]:
    runs, workers, analysts = SIZES[quick]
    server = PgServer().start()
    try:
        url = server.new_database()
        team = bench_team(tmp, url, runs, workers, analysts)
        team["seen"] = bench_seen(tmp, url, max(6, runs // 10))
    finally:
        server.stop()
    team["in_process"] = bench_in_process(tmp, runs, workers * WORKER_CONCURRENCY)
    team["ratio_p99_in_process"] = team["answer_to_execution_ms_p99"] / max(
        team["in_process"]["answer_to_execution_ms_p99"], 1e-6
    )
    return team


def _spec(i: int) -> Spec:
    policy = RunPolicy.default()
    return Spec(
        name=f"form-{i:04d}", task="fill the form", backend="sim", agent="script", script=FORM,
        policy=Policy(policy.text, policy.sha256),
    )  # fmt: skip


def _cli(*argv: str, url: str, tmp: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "CUA_TUI_CONFIG": str(tmp / "no-config.toml"), "CUA_TUI_RUNS_DIR": str(tmp / "team-runs")}
    return subprocess.Popen(
        [sys.executable, "-m", "cua_tui.cli", *argv, "--queue", url],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def bench_team(tmp: Path, url: str, runs: int, n_workers: int, n_analysts: int) -> dict[str, Any]:
    with db.connect(url, "bench") as conn:
        empty = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]  # type: ignore[index]
    done = submit(url, [_spec(i) for i in range(runs)], tasks_sha256="0" * 64, name="bench team")
    log(f"team: {runs} sim runs by {n_workers} workers ({WORKER_CONCURRENCY} each), {n_analysts} analysts racing")
    t0 = time.perf_counter()
    workers = [_cli("worker", "--backend", "sim", "--concurrency", str(WORKER_CONCURRENCY), url=url, tmp=tmp)
               for _ in range(n_workers)]  # fmt: skip
    analysts = [_cli("attach", done.fleet_id, "--headless", "--on-confirm", "approve", url=url, tmp=tmp)
                for _ in range(n_analysts)]  # fmt: skip
    said = [a.communicate(timeout=DONE_S)[1] for a in analysts]
    wall = time.perf_counter() - t0
    for w in workers:
        w.send_signal(signal.SIGTERM)
    worker_said = [w.communicate(timeout=60)[1] for w in workers]
    answered = lost_races = 0
    for text in said:
        found = _ANSWERED.search(text)
        if found:
            answered += int(found.group(1))
            lost_races += int(found.group(2))
    with db.connect(url, "bench") as conn:
        out = _figures(conn, done.fleet_id, runs, empty)
        fleet = check_fleet(conn, done.fleet_id, None)
    out.update(
        {
            "runs": runs,
            "workers": n_workers,
            "analysts": n_analysts,
            "wall_s": wall,
            "runs_per_s": runs / wall,
            "answers_by_analysts": answered,
            "races_lost": lost_races,
            "verified_intact": sum(1 for r in fleet.runs if r.report.code == 0),
            "database_and_chains_agree": not fleet.problems,
            "disagreements": fleet.problems[:5],
            "worker_exit_codes": [w.returncode for w in workers],
            "worker_errors": [line for text in worker_said for line in text.splitlines() if "Traceback" in line][:5],
            "target_p99_ms": TARGET_P99_MS,
        }
    )
    out["ok"] = (
        out["answered_twice"] == 0 and out["answers_lost"] == 0 and out["verified_intact"] == runs
        and out["sealed"] == runs and out["database_and_chains_agree"] and answered == out["requests"]
    )  # fmt: skip
    return out


def bench_seen(tmp: Path, url: str, runs: int) -> dict[str, Any]:
    """Two analysts attached to one fleet: alice as the fleet TUI is (``TeamFleet``), bob answering each
    request once it is on alice's screen, from a session of his own. How soon each request reached alice, and
    how soon bob's answer did (the server's clock for both ends)."""
    done = submit(url, [_spec(i) for i in range(runs)], tasks_sha256="1" * 64, name="bench seen")
    log(f"team: {runs} runs, one analyst answering what another sees")
    alice = _Watch(url, done.fleet_id)
    worker = _cli("worker", "--backend", "sim", "--concurrency", str(WORKER_CONCURRENCY), url=url, tmp=tmp)
    answered: set[int] = set()
    try:
        with db.connect(url, "bench bob") as bob:
            end = time.monotonic() + DONE_S
            while not alice.fleet.done and time.monotonic() < end:
                for item in alice.fleet.queue():
                    if item.ticket not in answered:
                        answered.add(item.ticket)
                        analyst.answer(bob, item.ticket, Answer.APPROVE, how="human")
                time.sleep(0.01)
            figures = alice.figures(bob)
    finally:
        alice.fleet.close()
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=60)
    return {"runs": runs, "answered_by_bob": len(answered), **figures}


class _Watch:
    """An analyst attached to the fleet as the fleet TUI is (``TeamFleet``, in this process): when each request
    reached it, and when each answer given elsewhere did (the server's clock)."""

    def __init__(self, url: str, fleet_id: str) -> None:
        self.fleet = TeamFleet(url, fleet_id)
        self.shown: dict[int, float] = {}
        self.closed: dict[int, float] = {}
        self.fleet.subscribe(self._told)
        self.fleet.start()

    def _told(self, event: cf.FleetEvent) -> None:
        if isinstance(event, cf.RequestQueued):
            self.shown.setdefault(event.item.ticket, self.fleet.now())
        elif isinstance(event, cf.RequestClosed):
            self.closed.setdefault(event.item.ticket, self.fleet.now())

    def figures(self, conn: psycopg.Connection[Any]) -> dict[str, Any]:
        times = {
            int(i): (float(posted), float(answered))
            for i, posted, answered in conn.execute(
                "SELECT id, extract(epoch FROM posted_at), extract(epoch FROM answered_at) FROM cua_tui.requests "
                "WHERE fleet_id = %s AND answered_at IS NOT NULL",
                (self.fleet.fleet_id,),
            )
        }
        shown = [(at - times[i][0]) * 1000 for i, at in self.shown.items() if i in times]
        seen = [(at - times[i][1]) * 1000 for i, at in self.closed.items() if i in times]
        return {
            "requests_shown": len(shown),
            "answers_seen": len(seen),
            "posted_to_shown_ms_p50": statistics.median(shown) if shown else None,
            "posted_to_shown_ms_p99": _percentile(shown, 0.99) if shown else None,
            "answer_seen_by_another_ms_p50": statistics.median(seen) if seen else None,
            "answer_seen_by_another_ms_p99": _percentile(seen, 0.99) if seen else None,
            "target_seen_p99_ms": TARGET_SEEN_P99_MS,
        }


def _figures(conn: psycopg.Connection[Any], fleet_id: str, runs: int, empty: int) -> dict[str, Any]:
    """Exactly once, latency and size, from what the database holds."""
    statuses = dict(
        conn.execute("SELECT status, count(*) FROM cua_tui.runs WHERE fleet_id = %s GROUP BY status", (fleet_id,))
    )
    requests = conn.execute(
        "SELECT q.run_id, q.turn, q.index, extract(epoch FROM q.answered_at), q.applied_at IS NOT NULL, q.answer "
        "FROM cua_tui.requests q WHERE q.fleet_id = %s",
        (fleet_id,),
    ).fetchall()
    executing: dict[tuple[str, int, int], float] = {}
    for run_id, line in conn.execute(
        "SELECT e.run_id, e.line FROM cua_tui.events e JOIN cua_tui.runs r ON r.id = e.run_id "
        "WHERE r.fleet_id = %s AND position('\"kind\":\"executing\"' in convert_from(e.line, 'UTF8')) > 0",
        (fleet_id,),
    ):
        record = msgspec.json.decode(bytes(line))
        executing.setdefault((run_id, record["turn"], record["index"]), record["ts"])
    latencies = [
        (executing[(r, t, i)] - float(at)) * 1000
        for r, t, i, at, applied, answer in requests
        if answer == "approve" and applied and (r, t, i) in executing
    ]
    claimed = conn.execute(
        "SELECT extract(epoch FROM max(claimed_at) - min(claimed_at)), count(*) FROM cua_tui.runs WHERE fleet_id = %s",
        (fleet_id,),
    ).fetchone()
    size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    sealed = conn.execute(
        "SELECT count(*) FROM cua_tui.runs WHERE fleet_id = %s AND sealed_locally", (fleet_id,)
    ).fetchone()
    assert claimed is not None and size is not None and sealed is not None
    return {
        "statuses": statuses,
        "sealed": sealed[0],
        "requests": len(requests),
        # the schema's unique answer id and the trigger make a second answer impossible: counted anyway
        "answered_twice": len(requests) - len({(r, t, i) for r, t, i, *_ in requests}),
        "answers_lost": sum(1 for *_, applied, answer in requests if answer is None or not applied),
        "answer_to_execution_ms_p50": statistics.median(latencies) if latencies else None,
        "answer_to_execution_ms_p99": _percentile(latencies, 0.99) if latencies else None,
        "claims_per_s": claimed[1] / max(float(claimed[0] or 0), 1e-3),
        "database_bytes_per_1000_runs": (size[0] - empty) * 1000 / runs,
    }


def bench_in_process(tmp: Path, runs: int, concurrency: int) -> dict[str, Any]:
    """The same runs in one process (``cua-tui fleet``): each request answered the moment it is queued."""
    from cua_tui.fleet_runner import Fleet, FleetTask

    answered: dict[tuple[str, int, int], float] = {}
    executed: dict[tuple[str, int, int], float] = {}
    lock = threading.Lock()

    base = RunOptions(
        backend="sim", agent=None, script=FORM, task="fill the form", decisions=HANDSHAKE, fsync=True,
        settings=_settings(tmp),
    )  # fmt: skip
    tasks = []
    for i in range(runs):
        name = f"form-{i:04d}"

        def listen(stamped: ev.Stamped, name: str = name) -> None:
            event = stamped.event
            if isinstance(event, ev.Executing):
                with lock:
                    executed.setdefault((name, event.turn, event.index), stamped.ts)

        tasks.append(FleetTask(name, dataclasses.replace(base, listeners=(listen,))))
    fleet = Fleet(tasks, runs_dir=tmp / "in-process", concurrency=concurrency)

    def on_event(event: cf.FleetEvent) -> None:
        if isinstance(event, cf.RequestQueued):
            item = event.item

            def approve(item: cf.QueueItem = item) -> None:
                # the moment of the answer, as the database's commit time is the queue's
                at = time.time()
                if fleet.answer(item, Answer.APPROVE) is None:
                    with lock:
                        answered[(item.task, item.request.turn, item.request.index)] = at

            threading.Thread(target=approve, daemon=True).start()

    fleet.subscribe(on_event)
    log(f"team: the same {runs} runs in one process, {concurrency} at a time, for comparison")
    rows = fleet.run()
    latencies = [(executed[key] - at) * 1000 for key, at in answered.items() if key in executed]
    return {
        "runs": runs,
        "passed": sum(1 for r in rows if r.status == "passed"),
        "answer_to_execution_ms_p50": statistics.median(latencies),
        "answer_to_execution_ms_p99": _percentile(latencies, 0.99),
    }


def report(r: dict[str, Any]) -> list[str]:
    ip = r["in_process"]
    return [
        f"team: {r['runs']} runs, {r['workers']} workers, {r['analysts']} analysts: {r['wall_s']:.1f} s "
        f"({r['runs_per_s']:.1f} runs/s, {r['claims_per_s']:.1f} claims/s); ok={r['ok']}",
        f"  answered twice {r['answered_twice']}, answers lost {r['answers_lost']}, races lost {r['races_lost']}, "
        f"verified intact {r['verified_intact']}/{r['runs']}, "
        f"database and chains agree: {r['database_and_chains_agree']}",
        f"  answer to execution p50 {r['answer_to_execution_ms_p50']:.1f} ms, "
        f"p99 {r['answer_to_execution_ms_p99']:.1f} ms (target {r['target_p99_ms']:g}, ratio "
        f"{r['target_p99_ms'] / r['answer_to_execution_ms_p99']:.2f}x); in one process p50 "
        f"{ip['answer_to_execution_ms_p50']:.1f}, p99 {ip['answer_to_execution_ms_p99']:.1f} ms "
        f"(the queue's p99 is {r['ratio_p99_in_process']:.1f}x it)",
        f"  database: {r['database_bytes_per_1000_runs'] / 2**20:.1f} MiB per 1,000 runs",
        *_seen(r["seen"]),
    ]


def _seen(r: dict[str, Any]) -> list[str]:
    if r.get("answer_seen_by_another_ms_p99") is None or r.get("posted_to_shown_ms_p99") is None:
        return ["  two analysts: none of bob's answers reached alice"]
    ratio = r["target_seen_p99_ms"] / r["answer_seen_by_another_ms_p99"]
    return [
        f"  two analysts ({r['runs']} runs): bob's answer on alice's screen p50 "
        f"{r['answer_seen_by_another_ms_p50']:.0f} ms, p99 {r['answer_seen_by_another_ms_p99']:.0f} ms "
        f"(target {r['target_seen_p99_ms']:g}, ratio {ratio:.2f}x; {r['answers_seen']} answers); a request "
        f"posted to on her screen p50 {r['posted_to_shown_ms_p50']:.0f} ms, p99 {r['posted_to_shown_ms_p99']:.0f} ms",
    ]
