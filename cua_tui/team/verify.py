"""``cua-tui verify --queue URL RUN|FLEET``: a run checked from the database alone, as ``verify`` checks a
folder (its mirrored lines written out as they were and put to the same verifier), and a fleet's answers
held to its chains: every committed answer in exactly one chain, every decision a chain took from the
queue in the database, the same answer by the same role.

Everything read is someone else's writing: lines are streamed one at a time with a cap each, screens are
refused above the run folder's own cap, and what is said of a row is made visible by the caller."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import psycopg

from ..core.audit import AuditKey, VerifyExit, VerifyReport, verify_run
from ..core.rundir import RunDir, write_json_atomic
from ..core.safeio import LINE_CAP, SCREEN_CAP
from . import db
from .mirror import RUN_JSON_CAP

# the runs of one fleet checked at most (a fleet file holds at most 1,000 tasks; retries add some)
MAX_RUNS = 10_000


class _Decision(msgspec.Struct):
    kind: str
    decision: str | None = None
    queue: dict[str, Any] | None = None


_decode = msgspec.json.Decoder(_Decision).decode


@dataclass
class RunCheck:
    run_id: str
    status: str
    report: VerifyReport
    # (request id, answer id or None, decision, role, late) of each decision the chain took from the queue
    taken: list[tuple[Any, Any, str, Any, bool]] = field(default_factory=list)


@dataclass
class FleetCheck:
    fleet_id: str
    runs: list[RunCheck]
    answers: int
    problems: list[str]
    notes: list[str]

    @property
    def code(self) -> VerifyExit:
        if any(r.report.code == VerifyExit.UNUSABLE for r in self.runs):
            return VerifyExit.UNUSABLE
        if self.problems or any(r.report.code != VerifyExit.INTACT for r in self.runs):
            return VerifyExit.TAMPERED
        return VerifyExit.INTACT


def kind_of(conn: psycopg.Connection[Any], target: str) -> str | None:
    """``run`` or ``fleet`` for an id the queue holds; None when it holds neither."""
    if conn.execute("SELECT 1 FROM cua_tui.runs WHERE id = %s", (target,)).fetchone():
        return "run"
    if conn.execute("SELECT 1 FROM cua_tui.fleets WHERE id = %s", (target,)).fetchone():
        return "fleet"
    return None


def check_run(conn: psycopg.Connection[Any], run_id: str, key: AuditKey | None) -> RunCheck:
    """The run's mirrored lines, seal and screens written to a folder of its own and verified there."""
    with conn.transaction():  # one view of the run, and what its cursors need
        return _check_run(conn, run_id, key)


def _check_run(conn: psycopg.Connection[Any], run_id: str, key: AuditKey | None) -> RunCheck:
    with tempfile.TemporaryDirectory(prefix="cua-tui-verify-") as tmp:
        folder, status, taken = _materialize(conn, run_id, tmp)
        report = verify_run(folder.path, key)
    return RunCheck(run_id, status, report, taken)


@contextlib.contextmanager
def run_folder(url: str, run_id: str) -> Iterator[Path]:
    """A team's run as a folder made from the database alone (its mirrored lines as they were, its seal and
    screens), in a temporary folder removed afterwards: what ``replay`` and ``export`` read, and verify as
    they verify any folder. QueueError when the queue or the run cannot be read."""
    with db.connect(url, "cua-tui") as conn, tempfile.TemporaryDirectory(prefix="cua-tui-queue-") as tmp:
        try:
            with conn.transaction():
                folder, _status, _taken = _materialize(conn, run_id, tmp)
        except db.LINK_ERRORS as exc:
            raise db.QueueError(f"queue {db.shown(url)}: {db.one_line_error(exc)}") from None
        yield folder.path


def _materialize(conn: psycopg.Connection[Any], run_id: str, parent: str) -> tuple[RunDir, str, list[Any]]:
    """The run's folder under ``parent``, its status, and the decisions its chain took from the queue."""
    row = conn.execute(
        "SELECT left(coalesce(status, state), 32), seal FROM cua_tui.runs WHERE id = %s", (run_id,)
    ).fetchone()
    if row is None:
        raise db.QueueError(f"no run {run_id} on the queue")
    status, seal = row
    try:
        folder = RunDir.create(parent, run_id=run_id)
    except ValueError as exc:
        raise db.QueueError(str(exc)) from None
    taken: list[tuple[Any, Any, str, Any, bool]] = []
    with open(folder.audit, "wb") as out:
        for line in _lines(conn, run_id):
            out.write(line + b"\n")
            if b'"queue":{' in line:
                taken.extend(_taken(line))
    if isinstance(seal, dict):
        write_json_atomic(folder.result_json, {"status": status, "seal": seal})
    info = conn.execute(
        "SELECT CASE WHEN octet_length(run_json) <= %s THEN run_json END FROM cua_tui.runs WHERE id = %s",
        (RUN_JSON_CAP, run_id),
    ).fetchone()
    if info is not None and info[0] is not None:
        # as the worker's run wrote it; a reader bounds and checks it as it does a folder's
        folder.run_json.write_bytes(bytes(info[0]))
    for sha, png in _screens(conn, run_id):
        folder.screens.put(sha, png)
    return folder, str(status), taken


def _lines(conn: psycopg.Connection[Any], run_id: str) -> Iterator[bytes]:
    with conn.cursor(name="cua_tui_lines") as cur:
        cur.itersize = 500
        cur.execute(
            "SELECT CASE WHEN octet_length(line) <= %s THEN line END, octet_length(line), seq "
            "FROM cua_tui.events WHERE run_id = %s ORDER BY seq",
            (LINE_CAP, run_id),
        )
        for line, size, seq in cur:
            if line is None:
                # a line no writer of this program makes: the folder's verifier calls it unusable too
                raise db.QueueError(f"run {run_id}: line {seq} is {size:,} bytes, more than {LINE_CAP:,}")
            yield bytes(line)


def _screens(conn: psycopg.Connection[Any], run_id: str) -> Iterator[tuple[str, bytes]]:
    with conn.cursor(name="cua_tui_screens") as cur:
        cur.itersize = 20
        cur.execute(
            "SELECT s.sha256, s.png FROM cua_tui.run_screens r JOIN cua_tui.screens s ON s.sha256 = r.sha256 "
            "WHERE r.run_id = %s AND octet_length(s.png) <= %s AND s.sha256 ~ '^[0-9a-f]{64}$'",
            (run_id, SCREEN_CAP),
        )
        for sha, png in cur:
            yield str(sha), bytes(png)


def _taken(line: bytes) -> list[tuple[Any, Any, str, Any, bool]]:
    try:
        record = _decode(line)
    except msgspec.DecodeError:
        return []  # the chain's own check says what is wrong with the line
    queue = record.queue
    if record.kind != "decision" or not isinstance(queue, dict):
        return []
    late = queue.get("late") is True
    return [(queue.get("request"), queue.get("answer"), str(record.decision), queue.get("role"), late)]


def check_fleet(conn: psycopg.Connection[Any], fleet_id: str, key: AuditKey | None) -> FleetCheck:
    """Every run of the fleet verified, then its answers and its chains held to each other, all in one
    snapshot of the database (a worker still writing cannot make the two disagree)."""
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    with conn.transaction():
        return _check_fleet(conn, fleet_id, key)


def _check_fleet(conn: psycopg.Connection[Any], fleet_id: str, key: AuditKey | None) -> FleetCheck:
    run_ids = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM cua_tui.runs WHERE fleet_id = %s ORDER BY position LIMIT %s", (fleet_id, MAX_RUNS)
        ).fetchall()
    ]
    runs = [_check_run(conn, run_id, key) for run_id in run_ids]
    rows = conn.execute(
        "SELECT id, run_id, answer, answer_id, left(answered_by, 64), left(not_applied, 200), "
        "left(closed_why, 200) FROM cua_tui.requests WHERE fleet_id = %s",
        (fleet_id,),
    ).fetchall()
    problems: list[str] = []
    notes: list[str] = []
    status = {r.run_id: r.status for r in runs}
    seen: dict[Any, list[tuple[str, tuple[Any, Any, str, Any, bool]]]] = {}
    for run in runs:
        for taken in run.taken:
            seen.setdefault(taken[0], []).append((run.run_id, taken))
    answers = 0
    for request_id, run_id, answer, answer_id, role, not_applied, closed_why in rows:
        found = seen.pop(request_id, [])
        if answer is not None:
            answers += 1
        if answer is None and not found:
            if closed_why is None and status.get(run_id) not in ("lost",):
                notes.append(f"request {request_id} of run {run_id} is still open")
            continue
        if len(found) != 1:
            if not found and status.get(run_id) == "lost":
                notes.append(f"request {request_id}: run {run_id} was lost before its chain recorded the answer")
                continue
            problems.append(f"request {request_id} (run {run_id}) is in {len(found)} chains' decisions, not one")
            continue
        where, (_req, said_answer, decision, said_role, late) = found[0]
        if where != run_id:
            problems.append(f"request {request_id} of run {run_id} is decided in the chain of run {where}")
        elif answer is None:
            if said_answer is not None:
                problems.append(f"run {run_id}: the chain took answer {said_answer} for request {request_id}, "
                                "which the database has unanswered")  # fmt: skip
        elif said_answer != answer_id or said_role != role:
            problems.append(
                f"run {run_id}: request {request_id}'s answer is {answer_id} by {role} in the database, "
                f"{said_answer} by {said_role} in the chain"
            )
        elif late != (not_applied is not None) or (not late and decision != answer):
            problems.append(f"run {run_id}: request {request_id} was {answer} in the database, {decision} in the chain")
    for request_id, found in seen.items():
        for run_id, _ in found:
            problems.append(f"run {run_id}: its chain took request {request_id}, which the database does not hold")
    return FleetCheck(fleet_id, runs, answers, problems, notes)
