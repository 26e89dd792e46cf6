"""``cua-tui stats``: the analysts' own record over a runs directory, per operator (core/stats.py). Every run
directory is untrusted: it is read through core/safeio and core/runlog (bounded), and every operator name
it supplies is shown literally."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .flags import flag, queue_flag
from .runs import runs_in, since_option

if TYPE_CHECKING:
    from ..core.stats import OperatorStats
    from ..team.stats import TeamFigures

COLUMNS = ("OPERATOR", "DECISIONS", "APPROVED", "REJECTED", "MEDIAN", "P10", "PER HOUR", "STREAK", "UNDER 1 S", "RUNS")
# shown after REJECTED where anyone listed took over a desktop: requests answered by taking the desktop
# (not rejections), and the actions they did themselves then (no request: not among DECISIONS)
TAKEOVER_COLUMNS = ("TAKEOVERS", "OWN ACTIONS")
# a team's queue's own (stats --queue): approvals that met a quorum, requests set aside, escalations received
# and answered
TEAM_COLUMNS = ("SECOND", "ASIDE", "ESCALATED", "ANSWERED")


def _table(found: list[OperatorStats], team: dict[str, TeamFigures] | None = None) -> list[str]:
    """The figures as aligned columns, each operator's name shown literally."""
    from ..core.text import shown_operator

    took_over = any(s.counts.takeovers or s.counts.takeover_actions for s in found)
    header: tuple[str, ...] = COLUMNS[:4] + TAKEOVER_COLUMNS + COLUMNS[4:] if took_over else COLUMNS
    if team is not None:
        header += TEAM_COLUMNS
    rows = [header]
    for s in found:
        row: tuple[str, ...] = (
            shown_operator(s.operator, limit=40),
            str(s.counts.decisions),
            str(s.counts.approvals),
            str(s.counts.rejections),
            _seconds(s.median_ms),
            _seconds(s.p10_ms),
            "-" if s.per_hour is None else f"{s.per_hour:.0f}",
            str(s.longest_approval_streak),
            "-" if s.under_a_second is None else f"{s.under_a_second:.0%}",
            str(s.runs),
        )
        if took_over:
            row = (*row[:4], str(s.counts.takeovers), str(s.counts.takeover_actions), *row[4:])
        if team is not None:
            mine = team.get(s.operator)
            row += tuple(str(v) for v in mine.as_json().values()) if mine is not None else ("0",) * len(TEAM_COLUMNS)
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def _seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f}s"


@click.command("stats")
@flag("runs_dir")
@click.option(
    "--since", default=None, metavar="WHEN", help="Only runs started since WHEN: 30m, 2h, 3d, 1w or an ISO date/time."
)
@click.option("--operator", "operators", multiple=True, metavar="NAME", help="Only this operator (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array, one object per operator.")
@queue_flag("A team's queue (postgresql://...): the figures of its runs on every worker, and the team's own.")
@click.option("--fleet", "fleet_id", default=None, metavar="FLEET", help="With --queue: only this fleet's runs.")
def command(
    runs_dir: Path | None,
    since: str | None,
    operators: tuple[str, ...],
    as_json: bool,
    queue: str | None,
    fleet_id: str | None,
) -> None:
    """Per operator, the decisions they made, counted as `cua-tui runs` counts them: how many, approved and
    rejected (taking the desktop instead, T, is neither: TAKEOVERS, with the actions they then did, OWN
    ACTIONS), the median and 10th percentile of the time each was on screen before the answer, decisions
    per hour of supervision (the runs' durations), the longest run of approvals in a row, and the share
    answered in under a second."""
    from ..core.runlog import RunReader
    from ..core.safeio import RunFileError
    from ..core.stats import RunSamples, operator_stats, samples_of
    from ..core.text import visible

    since_at = since_option(since)
    if queue is not None or fleet_id is not None:
        if queue is None:
            from .base import fail

            fail("stats --fleet is a team's: give --queue URL")
        _queued(queue, fleet_id, since_at, operators, as_json)
        return
    folder, listed = runs_in(runs_dir, check=False)
    if listed is None and not as_json:
        # the settings' folder, not made yet
        click.echo(f"no runs yet in {visible(str(folder))}")
        return
    entries = [e for e in listed or [] if since_at is None or (e.started_at is not None and e.started_at >= since_at)]
    entries.sort(key=lambda e: (e.started_at or 0.0, e.id))
    runs, unreadable = [], 0
    for entry in entries:
        try:
            with RunReader(entry.path) as reader:
                samples = samples_of(stamped.event for stamped in reader.poll())
        except (OSError, RunFileError):
            unreadable += 1
            continue
        if operators:
            samples = [s for s in samples if s.operator in operators]
        runs.append(RunSamples(tuple(samples), entry.duration))
    found = operator_stats(runs)
    if as_json:
        click.echo(json.dumps([s.as_json() for s in found], ensure_ascii=True, indent=2))
    elif not found:
        click.echo(
            f"no decisions made by a person in {visible(str(folder))}" + (" that match" if since or operators else "")
        )
    else:
        for line in _table(found):
            click.echo(line)
    if unreadable:
        click.echo(f"note: {unreadable} run director{'y' if unreadable == 1 else 'ies'} could not be read", err=True)


def _queued(
    queue: str | None, fleet_id: str | None, since: float | None, operators: tuple[str, ...], as_json: bool
) -> None:
    """``stats --queue``: the same figures from the runs' mirrored chains, and the team's own columns."""
    from ..core.stats import RunSamples, operator_stats
    from ..team import db
    from ..team.stats import team_figures, team_samples
    from .base import settings

    url = db.queue_url(queue, settings().queue)
    with db.connect(url, "cua-tui stats") as conn:
        runs, unreadable = team_samples(conn, fleet_id, since)
        team = team_figures(conn, fleet_id, since)
    if operators:
        runs = [RunSamples(tuple(s for s in r.samples if s.operator in operators), r.seconds) for r in runs]
        team = {k: v for k, v in team.items() if k in operators}
    found = operator_stats(runs)
    _show(found, team, as_json, f"queue {db.shown(url)}", unreadable, bool(operators or since or fleet_id))


def _show(
    found: list[OperatorStats],
    team: dict[str, TeamFigures],
    as_json: bool,
    where: str,
    unreadable: int,
    narrowed: bool,
) -> None:
    from ..team.stats import TeamFigures

    if as_json:
        rows = [{**s.as_json(), **team.get(s.operator, TeamFigures()).as_json()} for s in found]
        click.echo(json.dumps(rows, ensure_ascii=True, indent=2))
    elif not found:
        click.echo(f"no decisions made by a person on {where}" + (" that match" if narrowed else ""))
    else:
        for line in _table(found, team):
            click.echo(line)
    if unreadable:
        click.echo(f"note: {unreadable} run{'s' if unreadable != 1 else ''} had a line too large to read", err=True)
