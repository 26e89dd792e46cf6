"""``cua-tui locate``: where settings, themes and runs live."""

from __future__ import annotations

import click

from .base import settings


@click.command("locate")
def command() -> None:
    """Print where settings, themes, runs and the cache live."""
    where = settings()
    click.echo(f"config file: {where.config_file}")
    click.echo(f"themes:      {where.themes_dir}")
    click.echo(f"runs:        {where.runs_dir}")
    click.echo(f"cache:       {where.cache_dir}")
