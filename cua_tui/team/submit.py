"""Putting a fleet on a team's queue (``cua-tui fleet --queue URL --detach``) and a lost run back on it as a
new run (``fleet --retry RUN``). A fleet is one transaction: all of its runs are queued, or none."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.rundir import new_run_id
from ..core.text import visible
from ..fleet_runner import FleetTask
from . import db
from .payload import MAX_SPEC_BYTES, Spec, SpecError, decode, spec_of


@dataclass(frozen=True)
class Submitted:
    fleet_id: str
    runs: tuple[tuple[str, str], ...]  # (task name, run id)
    role: str


def specs_of(tasks: Sequence[FleetTask], default_policy: Path | None) -> list[Spec]:
    """Every task's spec, made and checked before anything is sent (SpecError names the task)."""
    return [spec_of(task.name, task.options, default_policy) for task in tasks]


def _run_ids(count: int) -> list[str]:
    ids: list[str] = []
    seen: set[str] = set()
    while len(ids) < count:
        rid = new_run_id()
        if rid not in seen:
            seen.add(rid)
            ids.append(rid)
    return ids


def submit(url: str, specs: Sequence[Spec], *, tasks_sha256: str, name: str) -> Submitted:
    """Queue a fleet: its row and a run row per spec, in one transaction."""
    fleet_id = f"fleet-{new_run_id()}"
    ids = _run_ids(len(specs))
    with db.connect(url, "cua-tui fleet") as conn, conn.transaction():
        role = db.session_user(conn)
        conn.execute(
            "INSERT INTO cua_tui.fleets (id, name, tasks_sha256) VALUES (%s, %s, %s)",
            (fleet_id, name[:200], tasks_sha256),
        )
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO cua_tui.runs (id, fleet_id, position, task_name, backend, spec, spec_sha256) "
                "VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s)",
                [
                    (rid, fleet_id, i, spec.name, spec.backend, spec.encode().decode(), spec.sha256)
                    for i, (rid, spec) in enumerate(zip(ids, specs, strict=True))
                ],
            )
    return Submitted(fleet_id, tuple((spec.name, rid) for spec, rid in zip(specs, ids, strict=True)), role)


def retry(url: str, run_id: str) -> tuple[str, str]:
    """A new run of an ended run's task, in the same fleet (``retry_of`` names the old one); (fleet, run)."""
    with db.connect(url, "cua-tui fleet") as conn, conn.transaction():
        row = conn.execute(
            "SELECT fleet_id, task_name, backend, CASE WHEN octet_length(spec::text) <= %s THEN spec::text END, "
            "spec_sha256, state FROM cua_tui.runs WHERE id = %s FOR UPDATE",
            (MAX_SPEC_BYTES, run_id),
        ).fetchone()
        if row is None:
            raise db.QueueError(f"--retry {visible(run_id, limit=100)}: no such run on the queue")
        fleet_id, task, backend, text, sha, state = row
        if state != "ended":
            raise db.QueueError(f"--retry {run_id}: the run is {state}, not ended; only an ended run is retried")
        try:
            if text is None:
                raise SpecError(f"its spec is larger than {MAX_SPEC_BYTES:,} bytes")
            spec = decode(text)
        except SpecError as exc:
            raise db.QueueError(f"--retry {run_id}: {exc}") from None
        if spec.sha256 != sha:
            raise db.QueueError(f"--retry {run_id}: its spec does not match its SHA-256; not retried")
        new_id = _run_ids(1)[0]
        conn.execute(
            "INSERT INTO cua_tui.runs (id, fleet_id, position, task_name, backend, spec, spec_sha256, retry_of) "
            "SELECT %s, %s, coalesce(max(position), -1) + 1, %s, %s, %s::jsonb, %s, %s FROM cua_tui.runs "
            "WHERE fleet_id = %s",
            (new_id, fleet_id, task, backend, spec.encode().decode(), sha, run_id, fleet_id),
        )
    return str(fleet_id), new_id
