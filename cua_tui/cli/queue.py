"""``cua-tui queue ACTION``: a team queue's schema (``init``, ``upgrade``: versioned migrations, each once, in
one transaction)."""

from __future__ import annotations

from typing import Any

import click

from .base import settings
from .flags import queue_flag

ACTIONS = ("init", "upgrade")


@click.command("queue")
@click.argument("action", type=click.Choice(ACTIONS))
@queue_flag()
def command(action: str, **values: Any) -> None:
    """A team's queue in PostgreSQL: `init` makes its schema, `upgrade` brings it to this version."""
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
        verb = "made" if before == 0 else "upgraded"
        click.echo(f"queue {db.shown(url)}: schema {verb}: version {before} -> {after}", err=True)
