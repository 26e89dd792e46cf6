"""``cua-tui worker``: claims a team's tasks and runs each as exactly the supervised run it would be alone.

One process: a claim loop (``FOR UPDATE SKIP LOCKED``, at most ``concurrency`` runs, only the backends it
offers), one thread per run, a heartbeat that renews the worker's lease and declares others' lapsed ones
lost, a listener woken by the server (LISTEN/NOTIFY; polling is the fallback), and the mirror of its runs'
lines and screens. Its lease carries a fencing token: every action is preceded by a check that the lease
is still held by this process's clock, and every answer is applied only while the database shows it held;
a worker that finds its lease taken executes nothing more and ends its runs ``interrupted``, sealed.
Faults and what happens: docs/team/faults.md.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..build import BuildError, Run, build_run
from ..core import events as ev
from ..core.closing import Aborted
from ..core.events import RunStatus
from ..core.policy import Policy as RunPolicy
from ..core.policy import PolicyError
from ..core.ports import DecisionRequest
from ..core.text import failure, one_line, visible
from . import db, payload, schema
from .approver import Claim, QueueApprover
from .link import Link, Stopped
from .mirror import Mirror

DEFAULT_LEASE_S = 30.0
# the lease is renewed this many times per lease
BEATS_PER_LEASE = 3
# this process stops trusting its lease this long before the database's copy of it ends
LEASE_MARGIN = 0.2
# the claim loop looks for work at least this often when no notification comes
CLAIM_POLL_S = 2.0
SPEC_CAP = payload.MAX_SPEC_BYTES
# seconds a stopping worker waits for its runs to seal, and for their last lines to be copied
SEAL_WAIT_S = 60.0
MIRROR_WAIT_S = 30.0


class Lease:
    """The worker's lease as this process knows it: held until its last renewal's send time plus the lease,
    less a margin (the database's copy ends later: it was computed at the server's receipt). Monotonic
    time runs on while the process is frozen, so a worker thawed after its lease knows it at once."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._until = 0.0
        self.token = 0
        self.taken = threading.Event()
        self.taken_why = ""

    def renewed(self, sent_at: float) -> None:
        self._until = max(self._until, sent_at + self.seconds - LEASE_MARGIN)

    def take(self, why: str) -> None:
        if not self.taken.is_set():
            self.taken_why = why
            self.taken.set()

    def why_not(self) -> str | None:
        """None while the lease is held; else why no action may run (the run's fence)."""
        if self.taken.is_set():
            return f"the worker lost its lease: {self.taken_why}; nothing more runs"
        if self._clock() >= self._until:
            return "the worker's lease lapsed (no renewal in time); nothing more runs"
        return None


@dataclass
class _Active:
    claim: Claim
    run: Run | None = None
    thread: threading.Thread | None = None
    # (turn, index, kind) -> the seq of its decision_requested line; (turn, index) -> its verdict's rule
    asked: dict[tuple[int, int, str], int] = field(default_factory=dict)
    rules: dict[tuple[int, int], str] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerOptions:
    url: str
    runs_dir: Path
    backends: tuple[str, ...]
    concurrency: int
    lease_s: float = DEFAULT_LEASE_S
    audit_key: Path | None = None
    settings: Any = None
    # stop after this many runs have ended (tests, benchmarks); None: until told to stop
    max_runs: int | None = None


class Worker:
    def __init__(self, options: WorkerOptions, say: Callable[[str], None]) -> None:
        self.options = options
        self.say = say
        self.id = f"{socket.gethostname()[:60]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.id = "".join(c if c.isalnum() or c in "._-" else "-" for c in self.id)
        self.lease = Lease(options.lease_s)
        self.link = Link(options.url, "cua-tui worker", size=options.concurrency + 2, say=say)
        self.mirror = Mirror(self.link, say)
        self.stopping = threading.Event()
        self._wake = threading.Event()
        self._active: dict[str, _Active] = {}
        self._lock = threading.Lock()
        self._waiters: dict[int, threading.Event] = {}
        self._ended = 0
        self.role = ""

    # ---------------------------------------------------------------------------------------------
    # Start and stop
    # ----------------------------------------------------------------------------------------------
    def register(self) -> None:
        """Join the queue (QueueError when the database cannot be reached: said in one line by the caller)."""
        self.link.open()
        opts = self.options

        def insert(conn: psycopg.Connection[Any]) -> tuple[int, str]:
            row = conn.execute(
                "INSERT INTO cua_tui.workers (id, host, pid, backends, concurrency, runs_dir, lease_s, lease_until) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, now() + make_interval(secs => %s)) RETURNING token, role",
                (self.id, socket.gethostname()[:255], os.getpid(), list(opts.backends), opts.concurrency,
                 str(opts.runs_dir)[:4096], opts.lease_s, opts.lease_s),
            ).fetchone()  # fmt: skip
            assert row is not None
            return int(row[0]), str(row[1])

        sent = time.monotonic()
        try:
            self.lease.token, self.role = self.link.call(insert, "registering the worker", patience=0)
        except db.LINK_ERRORS as exc:
            raise db.QueueError(f"queue {db.shown(opts.url)}: {db.one_line_error(exc)}") from None
        self.lease.renewed(sent)

    def run(self) -> int:
        """Claim and run tasks until stopped (SIGTERM, ``stop()``), or fenced; the exit status."""
        self.register()
        opts = self.options
        self.say(
            f"worker {self.id} on the queue as {visible(self.role, limit=64)}: backends {', '.join(opts.backends)}, "
            f"{opts.concurrency} at a time, lease {opts.lease_s:g} s"
        )
        threads = [
            threading.Thread(target=self._heartbeat, name="cua-team-heartbeat", daemon=True),
            threading.Thread(target=self._listen, name="cua-team-listen", daemon=True),
        ]
        for thread in threads:
            thread.start()
        self.mirror.start()
        try:
            self._claim_loop()
        finally:
            code = self._wind_down()
        return code

    def stop(self, why: str = "stopped") -> None:
        """Stop claiming and kill the runs going (from any thread; a signal handler's)."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self._wake.set()
        for run in self._runs():
            run.supervisor.kill(by=f"worker {why}")

    def _runs(self) -> list[Run]:
        """The runs going now (built; a claimed task not yet built checks ``stopping`` before it starts)."""
        with self._lock:
            return [item.run for item in self._active.values() if item.run is not None]

    def _wind_down(self) -> int:
        """Every run sealed and copied, then the worker's row says how it stopped."""
        with self._lock:
            threads = [a.thread for a in self._active.values() if a.thread is not None]
        for thread in threads:
            thread.join(SEAL_WAIT_S)
        fenced = self.lease.taken.is_set()
        with contextlib.suppress(Exception):
            state = "lost" if fenced else "stopped"
            self.link.call(
                lambda conn: conn.execute(
                    "UPDATE cua_tui.workers SET state = %s, stopped_at = now() WHERE id = %s AND state = 'running'",
                    (state, self.id),
                ),
                "signing off",
                patience=5.0,
            )
        self.link.close()
        if fenced:
            self.say(f"worker {self.id}: {self.lease.taken_why}; its runs ended interrupted")
            return 1
        return 0

    # ---------------------------------------------------------------------------------------------
    # The lease
    # ----------------------------------------------------------------------------------------------
    def _heartbeat(self) -> None:
        every = self.options.lease_s / BEATS_PER_LEASE
        while not self.link.stop.is_set():
            sent = time.monotonic()

            def renew(conn: psycopg.Connection[Any]) -> bool:
                row = conn.execute(
                    "UPDATE cua_tui.workers SET heartbeat_at = now(), lease_until = now() + make_interval(secs => %s) "
                    "WHERE id = %s AND token = %s AND state = 'running' RETURNING 1",
                    (self.options.lease_s, self.id, self.lease.token),
                ).fetchone()
                conn.execute("SELECT cua_tui.reap(), cua_tui.escalate()")
                return row is not None

            try:
                held = self.link.call(renew, "renewing the lease", patience=every)
            except Stopped:
                return
            except Exception:
                held = None  # the server is away: the lease runs out on its own, and the fence says so
            if held is False:
                self._fenced(f"its lease (fencing token {self.lease.token}) was taken")
                return
            if held:
                self.lease.renewed(sent)
                self._obey_kills()
            self.link.stop.wait(max(0.0, every - (time.monotonic() - sent)))

    def _fenced(self, why: str) -> None:
        """The lease is gone: nothing more runs; every run ends interrupted and sealed; no more claims."""
        self.lease.take(why)
        self.stopping.set()
        self._wake.set()
        for run in self._runs():
            run.supervisor.interrupt(self.lease.why_not() or why)

    # ---------------------------------------------------------------------------------------------
    # Notifications: a request answered, a task queued
    # ----------------------------------------------------------------------------------------------
    def _listen(self) -> None:
        backoff = db.Backoff(self.say)
        while not self.link.stop.is_set():
            try:
                with psycopg.connect(self.link.info, autocommit=True) as conn:
                    conn.execute(f"LISTEN {schema.ANSWERED}")
                    conn.execute(f"LISTEN {schema.QUEUED}")
                    conn.execute(f"LISTEN {schema.KILL}")
                    backoff.ok()
                    # anything missed while the link was down: every waiter reads its row again
                    self._wake_all()
                    while not self.link.stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            self._notified(note.channel, note.payload)
            except db.LINK_ERRORS as exc:
                if self.link.stop.wait(backoff.failed("listening", exc)):
                    return

    def _notified(self, channel: str, text: str) -> None:
        if channel == schema.QUEUED:
            self._wake.set()
        elif channel == schema.KILL:
            self._obey_kills()
        elif channel == schema.ANSWERED and text.isdigit() and len(text) < 20:
            with self._lock:
                event = self._waiters.get(int(text))
            if event is not None:
                event.set()

    def _wake_all(self) -> None:
        with self._lock:
            events = list(self._waiters.values())
        for event in events:
            event.set()
        self._wake.set()
        self._obey_kills()

    def _obey_kills(self) -> None:
        """A team's kill switch pressed on runs of this worker: each ends killed, naming who pressed it (the
        database's role). Read again after a notification, a reconnection and every heartbeat."""
        with self._lock:
            going = [run_id for run_id, item in self._active.items() if item.run is not None]
        if not going:
            return
        try:
            rows = self.link.call(
                lambda conn: conn.execute(
                    "SELECT id, left(kill_by, 64) FROM cua_tui.runs WHERE id = ANY(%s) AND worker_id = %s "
                    "AND kill_at IS NOT NULL",
                    (going, self.id),
                ).fetchall(),
                "reading the kill switch",
                patience=0,
            )
        except Exception:
            return  # the server is away: the next heartbeat reads it again
        for run_id, by in rows:
            with self._lock:
                item = self._active.get(str(run_id))
            if item is not None and item.run is not None:
                item.run.supervisor.kill(by=f"{visible(str(by), limit=64)} (a team's kill switch)")

    def _waiter(self, request_id: int) -> threading.Event:
        with self._lock:
            return self._waiters.setdefault(request_id, threading.Event())

    def _forget(self, request_id: int) -> None:
        with self._lock:
            self._waiters.pop(request_id, None)

    # ---------------------------------------------------------------------------------------------
    # Claiming
    # ----------------------------------------------------------------------------------------------
    def _claim_loop(self) -> None:
        while not self.stopping.is_set():
            if self.options.max_runs is not None and self._ended >= self.options.max_runs:
                break
            with self._lock:
                free = self.options.concurrency - len(self._active)
            claimed = None
            if free > 0 and self.lease.why_not() is None:
                try:
                    claimed = self._claim()
                except Stopped:
                    return
                except Exception as exc:
                    self.say(f"queue: claiming: {failure(exc)}")
            if claimed is not None:
                continue  # perhaps more
            self._wake.wait(CLAIM_POLL_S)
            self._wake.clear()

    def _claim(self) -> _Active | None:
        opts = self.options

        def claim(conn: psycopg.Connection[Any]) -> tuple[Any, ...] | None:
            return conn.execute(
                "UPDATE cua_tui.runs SET state = 'running', worker_id = %(w)s, token = %(t)s, claimed_at = now() "
                "WHERE id = (SELECT id FROM cua_tui.runs WHERE state = 'queued' AND backend = ANY(%(b)s) "
                "ORDER BY submitted_at, fleet_id, position FOR UPDATE SKIP LOCKED LIMIT 1) "
                "AND EXISTS (SELECT 1 FROM cua_tui.workers WHERE id = %(w)s AND token = %(t)s "
                "AND state = 'running' AND lease_until > now()) "
                "RETURNING id, fleet_id, spec_sha256, octet_length(spec::text), "
                "CASE WHEN octet_length(spec::text) <= %(cap)s THEN spec::text END",
                {"w": self.id, "t": self.lease.token, "b": list(opts.backends), "cap": SPEC_CAP},
            ).fetchone()

        row = self.link.call(claim, "claiming a task")
        if row is None:
            return None
        run_id, fleet_id, sha, size, text = row
        item = _Active(Claim(str(run_id), str(fleet_id), self.lease.token))
        with self._lock:
            self._active[item.claim.run_id] = item
        thread = threading.Thread(target=self._drive, args=(item, sha, size, text), name=f"cua-team-{run_id}")
        item.thread = thread
        thread.start()
        return item

    # ---------------------------------------------------------------------------------------------
    # One run
    # ----------------------------------------------------------------------------------------------
    def _drive(self, item: _Active, sha: str, size: int, text: str | None) -> None:
        claim = item.claim
        try:
            try:
                spec = self._spec(sha, size, text)
                run = self._build(item, spec)
            except (payload.SpecError, BuildError) as exc:
                self.say(f"run {claim.run_id}: refused: {visible(str(exc), limit=300)}")
                self._report(claim, status=RunStatus.ERROR.value, reason=f"refused: {one_line(str(exc), 500)}")
                return
            self.mirror.add(claim.run_id, run.path)
            item.run = run
            if self.lease.why_not() is not None or self.stopping.is_set():
                run.supervisor.interrupt(self.lease.why_not() or "the worker is stopping")
            result = run.run()
            self.mirror.wake()
            copied = self.mirror.close(claim.run_id, MIRROR_WAIT_S)
            self._report(
                claim,
                status=result.status.value,
                reason=result.reason,
                verified=result.verified,
                seal=result.seal,
                sealed=result.sealed,
            )
            if not copied:
                self.say(f"run {claim.run_id}: its lines are not all in the database yet (its folder has them)")
            self.say(f"run {claim.run_id} ended {result.status.value}: {visible(result.reason, limit=200)}")
        except Stopped:
            pass
        except Exception as exc:  # a run's failure must not stop the worker
            self.say(f"run {claim.run_id}: {failure(exc)}")
            with contextlib.suppress(Exception):
                self._report(claim, status=RunStatus.ERROR.value, reason=f"worker error: {failure(exc)}")
        finally:
            with self._lock:
                self._active.pop(claim.run_id, None)
                self._ended += 1
            self._wake.set()

    def _spec(self, sha: str, size: int, text: str | None) -> payload.Spec:
        if text is None:
            raise payload.SpecError(f"a task spec of {size:,} bytes: more than {SPEC_CAP:,}; refused")
        spec = payload.decode(text)
        if spec.sha256 != sha:
            raise payload.SpecError("the task spec does not match its SHA-256 (the row was changed)")
        return spec

    def _build(self, item: _Active, spec: payload.Spec) -> Run:
        claim = item.claim
        # the policy the run classifies by (its spec's text): its [[approvers]] narrow the team's rules (a text
        # that does not parse fails the run's own build below, saying why)
        try:
            policy: RunPolicy | None = RunPolicy.from_toml(spec.policy.text, source="task policy")
        except PolicyError:
            policy = None
        approver = QueueApprover(
            self.link,
            claim,
            seq_of=lambda request: self._seq_of(item, request),
            waiter=self._waiter,
            forget=self._forget,
            fenced=lambda why: self._fenced(why),
            narrowed=policy.approvers_for if policy is not None else lambda rule, tier: None,
        )

        def listen(stamped: ev.Stamped) -> None:
            event = stamped.event
            if isinstance(event, ev.PolicyVerdict):
                item.rules[(event.turn, event.index)] = event.rule
            elif isinstance(event, ev.DecisionRequested):
                item.asked[(event.turn, event.index, event.subject)] = stamped.seq
            self.mirror.wake()

        options = spec.options(
            runs_dir=self.options.runs_dir,
            run_id=claim.run_id,
            approver=approver,
            fence=self.lease.why_not,
            listeners=(listen,),
            audit_key=self.options.audit_key,
            settings=self.options.settings,
            extra={"fleet": claim.fleet_id, "fleet_task": spec.name, "queue_worker": self.id},
            # drills are each analyst's own, never a shared queue's request: their answers come back as rows,
            # which the approver records in the run's chain
            drills=False,
        )
        run = build_run(options)
        supervisor = run.supervisor

        def drilled(event: ev.Event) -> None:
            with contextlib.suppress(Aborted):  # the run is ending: its chain takes nothing more
                supervisor.emit(event)

        approver.drilled = drilled
        return run

    @staticmethod
    def _seq_of(item: _Active, request: DecisionRequest) -> tuple[int, str]:
        seq = item.asked.get((request.turn, request.index, request.kind), -1)
        rule = "safety_check" if request.kind == "safety_check" else item.rules.get((request.turn, request.index), "")
        return seq, rule

    def _report(
        self,
        claim: Claim,
        *,
        status: str,
        reason: str,
        verified: bool | None = None,
        seal: dict[str, Any] | None = None,
        sealed: bool = False,
    ) -> None:
        """The run's end in its row. The sealed chain is the authority: a run the database already called
        lost (its worker frozen past its lease) is reported as it ended here."""

        def end(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "UPDATE cua_tui.runs SET state = 'ended', status = %s, reason = %s, verified = %s, seal = %s, "
                "sealed_locally = %s, ended_at = coalesce(ended_at, now()) "
                "WHERE id = %s AND worker_id = %s AND (token = %s OR status = 'lost')",
                (status, reason[:2000], verified, Jsonb(seal) if seal else None, sealed,
                 claim.run_id, self.id, claim.token),
            )  # fmt: skip
            # a request still open closes with the run
            conn.execute(
                "UPDATE cua_tui.requests SET closed_at = clock_timestamp(), closed_why = %s "
                "WHERE run_id = %s AND answer IS NULL AND closed_at IS NULL",
                (f"run ended ({status})", claim.run_id),
            )

        self.link.call(end, f"reporting the end of run {claim.run_id}", patience=MIRROR_WAIT_S)
