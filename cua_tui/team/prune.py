"""``cua-tui queue prune``: a finished fleet's mirrored lines and screens removed once they are old, never a
run's whose lines exist nowhere else (a run its worker did not seal in its own folder) unless told."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg


@dataclass(frozen=True)
class Pruned:
    runs: int
    fleets: int
    # runs left as they were: the database holds their only copy
    kept: int
    screens: int


def prune(conn: psycopg.Connection[Any], cutoff: float, *, even_last_copy: bool) -> Pruned:
    """Every fleet whose runs all ended before ``cutoff`` (epoch seconds), in one transaction."""
    with conn.transaction():
        fleets = [
            r[0]
            for r in conn.execute(
                "SELECT f.id FROM cua_tui.fleets f WHERE EXISTS (SELECT 1 FROM cua_tui.runs r WHERE r.fleet_id = f.id) "
                "AND NOT EXISTS (SELECT 1 FROM cua_tui.runs r WHERE r.fleet_id = f.id "
                "AND (r.state <> 'ended' OR r.ended_at >= to_timestamp(%s)))",
                (cutoff,),
            ).fetchall()
        ]
        rows = conn.execute(
            "SELECT id, sealed_locally FROM cua_tui.runs WHERE fleet_id = ANY(%s) AND pruned_at IS NULL",
            (fleets,),
        ).fetchall()
        gone = [run_id for run_id, sealed in rows if sealed or even_last_copy]
        conn.execute("DELETE FROM cua_tui.events WHERE run_id = ANY(%s)", (gone,))
        conn.execute("DELETE FROM cua_tui.run_screens WHERE run_id = ANY(%s)", (gone,))
        conn.execute("UPDATE cua_tui.runs SET pruned_at = now() WHERE id = ANY(%s)", (gone,))
        screens = conn.execute(
            "DELETE FROM cua_tui.screens s WHERE NOT EXISTS "
            "(SELECT 1 FROM cua_tui.run_screens r WHERE r.sha256 = s.sha256)"
        ).rowcount
    return Pruned(len(gone), len(fleets), len(rows) - len(gone), screens)
