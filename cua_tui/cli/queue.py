"""``cua-tui queue``: a team queue's schema (``init``, ``upgrade``: versioned migrations, each once, in one
transaction) and its upkeep (``prune``)."""

from __future__ import annotations

from typing import Any

import click

from .base import settings
from .flags import flag


@click.group("queue")
def command() -> None:
    """A team's queue in PostgreSQL: its schema and its upkeep."""


def _migrate(values: dict[str, Any], verb: str) -> None:
    from ..team import db, schema

    url = db.queue_url(values["queue"], settings().queue)
    with db.connect(url, "cua-tui queue", check_schema=False) as conn:
        try:
            before, after = schema.migrate(conn)
        except schema.SchemaError as exc:
            raise db.QueueError(f"queue {db.shown(url)}: {exc}") from None
    if before == after:
        click.echo(f"queue {db.shown(url)}: schema version {after}, up to date", err=True)
    else:
        click.echo(f"queue {db.shown(url)}: schema {verb}: version {before} -> {after}", err=True)


@command.command("init")
@flag("queue")
def init(**values: Any) -> None:
    """Make the queue's schema in the database (as a role that may create it)."""
    _migrate(values, "made")


@command.command("upgrade")
@flag("queue")
def upgrade(**values: Any) -> None:
    """Bring the queue's schema up to this version (workers and submitters do it at first use too)."""
    _migrate(values, "upgraded")
