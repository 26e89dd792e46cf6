"""``cua-tui runs --queue URL``: a team's runs as ``runs`` lists a folder's, read from the database (each run's
row, its spec's task and agent, its decisions answered on the queue). Every text is someone else's writing:
cut by the server before it is held, shown literally by the table."""

from __future__ import annotations

from typing import Any

import psycopg

from ..core.runlist import RunEntry

# runs listed at most (newest first)
MAX_LISTED = 10_000


def team_runs(conn: psycopg.Connection[Any], fleet_id: str | None = None) -> list[RunEntry]:
    """The queue's runs (of ``fleet_id`` only, when given), newest first. A run not ended reads
    ``unfinished``, as a folder without its seal does; its record is checked by ``verify --queue``."""
    rows = conn.execute(
        "SELECT r.id, left(r.worker_id, 100), extract(epoch FROM r.claimed_at)::float8, "
        "extract(epoch FROM r.ended_at)::float8, left(r.spec->>'task', 500), left(r.backend, 64), "
        "left(r.spec->>'agent', 64), left(r.spec->>'model', 64), left(r.status, 40), left(r.reason, 500), "
        "r.steps, left(r.fleet_id, 64), left(r.task_name, 64), "
        "(SELECT count(*) FROM cua_tui.requests q WHERE q.run_id = r.id AND q.answer IS NOT NULL) "
        "FROM cua_tui.runs r WHERE %s::text IS NULL OR r.fleet_id = %s "
        "ORDER BY coalesce(r.claimed_at, r.submitted_at) DESC, r.id LIMIT %s",
        (fleet_id, fleet_id, MAX_LISTED),
    ).fetchall()
    return [
        RunEntry(
            id=str(rid), path=f"on {worker}" if worker else "queued", started_at=started, ended_at=ended,
            task=task, backend=backend, agent=agent, model=model, status=str(status or "unfinished"),
            reason=reason, steps=steps, decisions=int(answered), fleet=fleet, fleet_task=name,
        )
        for rid, worker, started, ended, task, backend, agent, model, status, reason, steps, fleet, name, answered
        in rows
    ]  # fmt: skip
