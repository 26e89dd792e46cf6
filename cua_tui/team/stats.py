"""``cua-tui stats --queue URL``: the analysts' record on a team's queue. The figures of ``stats`` per operator,
from each run's chain as its worker mirrored it (the same reading as a folder's: core/stats.py), and the
team's own from the database: approvals given as the second of a quorum, requests set aside, escalations
received and answered. Every row is someone else's writing: cut by the server, bounded per pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from ..core import events as ev
from ..core.runlog import line_event
from ..core.stats import RunSamples, samples_of
from ..core.text import visible
from .mirror import LINE_CAP

# runs read at most, and lines of one run
MAX_RUNS = 10_000
MAX_LINES = 200_000


@dataclass
class TeamFigures:
    """One role's figures that only a team's queue has."""

    second_approvals: int = 0
    set_aside: int = 0
    escalations: int = 0
    escalations_answered: int = 0

    def as_json(self) -> dict[str, int]:
        return {
            "second_approvals": self.second_approvals,
            "set_aside": self.set_aside,
            "escalations_received": self.escalations,
            "escalations_answered": self.escalations_answered,
        }


def team_samples(
    conn: psycopg.Connection[Any], fleet_id: str | None, since: float | None
) -> tuple[list[RunSamples], int, list[ev.DrillAnswered]]:
    """Each run's decisions by a person (of ``fleet_id``, started since ``since``), oldest first, read from its
    mirrored lines; how many runs had a line that could not be read (counted, not guessed); and the drills its
    analysts answered, as the run's worker recorded them."""
    runs = conn.execute(
        "SELECT id, extract(epoch FROM ended_at - claimed_at)::float8 FROM cua_tui.runs "
        "WHERE (%(fleet)s::text IS NULL OR fleet_id = %(fleet)s) AND claimed_at IS NOT NULL "
        "AND (%(since)s::float8 IS NULL OR claimed_at >= to_timestamp(%(since)s)) "
        "ORDER BY claimed_at, id LIMIT %(n)s",
        {"fleet": fleet_id, "since": since, "n": MAX_RUNS},
    ).fetchall()
    out: list[RunSamples] = []
    drilled: list[ev.DrillAnswered] = []
    unreadable = 0
    for run_id, seconds in runs:
        events = []
        broken = False
        with conn.transaction(), conn.cursor(name="cua_tui_stats") as cur:
            cur.itersize = 1000
            cur.execute(
                "SELECT seq, CASE WHEN octet_length(line) <= %s THEN line END FROM cua_tui.events WHERE run_id = %s "
                "AND (position('\"kind\":\"decision\"' in convert_from(line, 'UTF8')) > 0 "
                "OR position('\"kind\":\"drill\"' in convert_from(line, 'UTF8')) > 0) ORDER BY seq LIMIT %s",
                (LINE_CAP, run_id, MAX_LINES),
            )
            for seq, line in cur:
                if line is None:
                    broken = True
                    continue
                events.append(line_event(int(seq), bytes(line)).event)
        unreadable += broken
        drilled.extend(e for e in events if isinstance(e, ev.DrillAnswered))
        out.append(RunSamples(tuple(samples_of(events)), float(seconds) if seconds is not None else None))
    return out, unreadable, drilled


def team_figures(conn: psycopg.Connection[Any], fleet_id: str | None, since: float | None) -> dict[str, TeamFigures]:
    """Per role: approvals that met a quorum (the second of two, or the last of more), requests set aside,
    requests escalated to a group the role is in, and of those the ones it answered."""
    found: dict[str, TeamFigures] = {}
    scope = (
        "q.fleet_id IN (SELECT id FROM cua_tui.fleets WHERE %(fleet)s::text IS NULL OR id = %(fleet)s) "
        "AND (%(since)s::float8 IS NULL OR q.posted_at >= to_timestamp(%(since)s))"
    )
    values = {"fleet": fleet_id, "since": since}
    for role, count in conn.execute(
        f"SELECT left(q.answered_by, 64), count(*) FROM cua_tui.requests q WHERE {scope} AND q.quorum > 1 "
        "AND q.answer = 'approve' GROUP BY 1",
        values,
    ):
        found.setdefault(visible(str(role), limit=64), TeamFigures()).second_approvals = int(count)
    for role, count in conn.execute(
        f"SELECT left(s.role, 64), count(*) FROM cua_tui.asides s JOIN cua_tui.requests q ON q.id = s.request_id "
        f"WHERE {scope} GROUP BY 1",
        values,
    ):
        found.setdefault(visible(str(role), limit=64), TeamFigures()).set_aside = int(count)
    # escalations received: each escalated request counts for every role that was a member of its group and
    # made a decision on the queue (a role that never answered anything is nobody's row)
    for role, received, answered in conn.execute(
        f"SELECT left(u.rolname, 64), count(*), count(*) FILTER (WHERE q.answered_by = u.rolname) "
        "FROM cua_tui.requests q JOIN pg_roles g ON g.rolname = q.escalate_to "
        "JOIN pg_roles u ON pg_has_role(u.oid, g.oid, 'MEMBER') AND u.rolcanlogin "
        f"WHERE {scope} AND q.escalated_at IS NOT NULL GROUP BY 1",
        values,
    ):
        figures = found.setdefault(visible(str(role), limit=64), TeamFigures())
        figures.escalations, figures.escalations_answered = int(received), int(answered)
    return found
