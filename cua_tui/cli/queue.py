"""``cua-tui queue ACTION``: a team queue's schema (``init``, ``upgrade``: versioned migrations, each once, in
one transaction) and its upkeep (``prune``)."""

from __future__ import annotations

from typing import Any

import click

from .base import fail, settings
from .flags import queue_flag

ACTIONS = ("init", "upgrade", "prune")


@click.command("queue")
@click.argument("action", type=click.Choice(ACTIONS))
@queue_flag()
@click.option(
    "--older-than",
    metavar="AGE",
    default=None,
    help="prune: the fleets whose runs all ended this long ago or more (30d, 12h, 2w) or before a date.",
)
@click.option(
    "--even-last-copy",
    is_flag=True,
    help="prune: also the runs whose lines exist nowhere else (their worker never sealed their folder).",
)
def command(action: str, older_than: str | None, even_last_copy: bool, **values: Any) -> None:
    """A team's queue in PostgreSQL: `init` makes its schema, `upgrade` brings it to this version, `prune`
    removes old finished fleets' mirrored lines and screens."""
    from ..team import db, schema

    url = db.queue_url(values["queue"], settings().queue)
    if action == "prune":
        _prune(url, older_than, even_last_copy)
        return
    if older_than is not None or even_last_copy:
        fail(f"queue {action}: --older-than and --even-last-copy are prune's")
    with db.connect(url, "cua-tui queue", check_schema=False) as conn:
        try:
            before, after = schema.migrate(conn)
        except schema.SchemaError as exc:
            raise db.QueueError(f"queue {db.shown(url)}: {exc}") from None
    if before == after:
        click.echo(f"queue {db.shown(url)}: schema version {after}, up to date", err=True)
    else:
        verb = "made" if before == 0 else "upgraded"
        click.echo(f"queue {db.shown(url)}: schema {verb}: version {before} -> {after}", err=True)


def _prune(url: str, older_than: str | None, even_last_copy: bool) -> None:
    from ..team import db
    from ..team.prune import prune
    from .runs import parse_since

    if older_than is None:
        fail("queue prune needs --older-than AGE (such as 30d): what is younger stays")
    try:
        cutoff = parse_since(older_than, option="--older-than")
    except ValueError as exc:
        fail(str(exc))
    with db.connect(url, "cua-tui queue") as conn:
        done = prune(conn, cutoff, even_last_copy=even_last_copy)
    line = f"queue {db.shown(url)}: pruned {done.runs} runs of {done.fleets} finished fleets, {done.screens} screens"
    if done.kept:
        line += f"; kept {done.kept} whose lines exist nowhere else (--even-last-copy removes them too)"
    click.echo(line, err=True)
