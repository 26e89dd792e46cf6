"""``cua-tui stats``: the analysts' own record over a runs directory, per operator (core/stats.py). Every run
directory is untrusted: it is read through core/safeio and core/runlog (bounded), and every operator name
it supplies is shown literally."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .flags import flag, queue_flag
from .runs import runs_in, since_option

if TYPE_CHECKING:
    from ..core.drills import DrillScore
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


DRILL_COLUMNS = ("DRILLED", "SHOWN", "CAUGHT", "MISSED", "CATCH RATE (95%)", "FALSE ALARMS", "DRILL MEDIAN",
                 "REAL MEDIAN")  # fmt: skip


def _drill_table(scores: dict[str, DrillScore], real: dict[str, OperatorStats]) -> list[str]:
    """Drills per operator (a person, or an approver by its name): caught and missed threats, the catch rate
    with its Wilson 95 % interval, false alarms on benign drills, and the time on drills against real ones."""
    from ..core.text import shown_operator

    rows: list[tuple[str, ...]] = [DRILL_COLUMNS]
    for who, score in sorted(scores.items()):
        rate, interval = score.catch_rate, score.catch_interval
        catch = "-" if rate is None or interval is None else f"{rate:.0%} [{interval[0]:.0%}, {interval[1]:.0%}]"
        alarms = f"{score.false_alarms} of {score.benign}" if score.benign else "-"
        drill_ms = round(statistics.median(score.drill_ms)) if score.drill_ms else None
        mine = real.get(who)
        rows.append((shown_operator(who, limit=40), str(score.shown), str(score.caught), str(score.missed), catch,
                     alarms, _seconds(drill_ms), _seconds(mine.median_ms if mine is not None else None)))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(DRILL_COLUMNS))]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def drill_json(score: DrillScore | None, real: OperatorStats | None) -> dict[str, Any] | None:
    """One operator's drills as ``--json`` gives them (None: never drilled)."""
    if score is None:
        return None
    interval = score.catch_interval
    return {
        "shown": score.shown, "threats": score.threats, "caught": score.caught, "missed": score.missed,
        "catch_rate": None if score.catch_rate is None else round(score.catch_rate, 4),
        "catch_interval_95": None if interval is None else [round(interval[0], 4), round(interval[1], 4)],
        "benign": score.benign, "false_alarms": score.false_alarms,
        "false_alarm_rate": None if score.false_alarm_rate is None else round(score.false_alarm_rate, 4),
        "drill_median_ms": round(statistics.median(score.drill_ms)) if score.drill_ms else None,
        "real_median_ms": real.median_ms if real is not None else None,
    }  # fmt: skip


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
    from ..core import events as ev
    from ..core.drills import drill_scores
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
    runs, unreadable, drilled = [], 0, list[ev.DrillAnswered]()
    for entry in entries:
        try:
            with RunReader(entry.path) as reader:
                events = [stamped.event for stamped in reader.poll()]
        except (OSError, RunFileError):
            unreadable += 1
            continue
        samples = samples_of(events)
        if operators:
            samples = [s for s in samples if s.operator in operators]
        runs.append(RunSamples(tuple(samples), entry.duration))
        drilled.extend(e for e in events if isinstance(e, ev.DrillAnswered))
    found = operator_stats(runs)
    scores = {who: score for who, score in drill_scores(drilled).items() if not operators or who in operators}
    if as_json:
        rows = [{**s.as_json(), "drills": drill_json(scores.pop(s.operator, None), s)} for s in found]
        rows += [{"operator": who, "drills": drill_json(score, None)} for who, score in scores.items()]
        click.echo(json.dumps(rows, ensure_ascii=True, indent=2))
    elif not found and not scores:
        click.echo(
            f"no decisions made by a person in {visible(str(folder))}" + (" that match" if since or operators else "")
        )
    else:
        for line in _table(found) if found else []:
            click.echo(line)
        if scores:
            click.echo("")
            for line in _drill_table(scores, {s.operator: s for s in found}):
                click.echo(line)
    if unreadable:
        click.echo(f"note: {unreadable} run director{'y' if unreadable == 1 else 'ies'} could not be read", err=True)


def _queued(
    queue: str | None, fleet_id: str | None, since: float | None, operators: tuple[str, ...], as_json: bool
) -> None:
    """``stats --queue``: the same figures from the runs' mirrored chains, and the team's own columns."""
    from ..core.drills import drill_scores
    from ..core.stats import RunSamples, operator_stats
    from ..team import db
    from ..team.stats import team_figures, team_samples
    from .base import settings

    url = db.queue_url(queue, settings().queue)
    with db.connect(url, "cua-tui stats") as conn:
        runs, unreadable, drilled = team_samples(conn, fleet_id, since)
        team = team_figures(conn, fleet_id, since)
    if operators:
        runs = [RunSamples(tuple(s for s in r.samples if s.operator in operators), r.seconds) for r in runs]
        team = {k: v for k, v in team.items() if k in operators}
    found = operator_stats(runs)
    scores = {who: score for who, score in drill_scores(drilled).items() if not operators or who in operators}
    _show(found, team, as_json, f"queue {db.shown(url)}", unreadable, bool(operators or since or fleet_id), scores)


def _show(
    found: list[OperatorStats],
    team: dict[str, TeamFigures],
    as_json: bool,
    where: str,
    unreadable: int,
    narrowed: bool,
    scores: dict[str, DrillScore],
) -> None:
    from ..team.stats import TeamFigures

    if as_json:
        rows = [
            {
                **s.as_json(),
                **team.get(s.operator, TeamFigures()).as_json(),
                "drills": drill_json(scores.pop(s.operator, None), s),
            }
            for s in found
        ]
        rows += [{"operator": who, "drills": drill_json(score, None)} for who, score in scores.items()]
        click.echo(json.dumps(rows, ensure_ascii=True, indent=2))
    elif not found and not scores:
        click.echo(f"no decisions made by a person on {where}" + (" that match" if narrowed else ""))
    else:
        for line in _table(found, team) if found else []:
            click.echo(line)
        if scores:
            click.echo("")
            for line in _drill_table(scores, {s.operator: s for s in found}):
                click.echo(line)
    if unreadable:
        click.echo(f"note: {unreadable} run{'s' if unreadable != 1 else ''} had a line too large to read", err=True)
