"""``cua-tui worker``: run a team's tasks from its queue (PostgreSQL), each as the supervised run it would be
alone, its run directory on this machine. Keys (the model's, CoreWeave's) come from this machine's
environment and settings, never from the queue. SIGINT / SIGTERM stop it: no more claims, its runs are
killed and sealed. Exit status: 0 stopped, 1 its lease was taken (its runs ended interrupted), 2 bad usage
or a queue it cannot reach."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .base import OnSignal, say, settings
from .flags import flag, queue_flag, run_flags


@click.command("worker")
@queue_flag()
@click.option(
    "--backend",
    "backends",
    multiple=True,
    help="A backend this worker offers (repeatable; default: every backend that works on this machine). It "
    "claims only tasks on these.",
)
@click.option("--concurrency", type=click.IntRange(1, 1000), default=None, help="Runs at once (default: as `fleet`).")
@click.option(
    "--lease",
    "lease_s",
    type=click.FloatRange(1.0, 3600.0),
    default=30.0,
    show_default=True,
    help="Seconds of the worker's lease, renewed three times per lease: a worker silent for longer is declared "
    "lost (its runs read lost), and a worker that finds its lease taken runs nothing more.",
)
@run_flags("runs_dir")
@flag("audit_key", help="Key kept outside the runs directory that signs every run's seal (this worker's own).")
@click.option("--max-runs", type=click.IntRange(1, 10**9), default=None, help="Stop after so many runs ended.")
def command(
    backends: tuple[str, ...],
    concurrency: int | None,
    lease_s: float,
    runs_dir: Path | None,
    audit_key: Path | None,
    max_runs: int | None,
    **values: Any,
) -> None:
    """Claim tasks from a team's queue and run them, at most --concurrency at a time."""
    from ..desktops import BACKENDS, runs_here
    from ..fleet_runner import concurrency_for
    from ..team import db
    from ..team.worker import Worker, WorkerOptions

    config = settings()
    url = db.queue_url(values["queue"], config.queue)
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        from ..core.text import either

        raise click.BadParameter(f"{unknown[0]!r}: {either(tuple(BACKENDS))}", param_hint="--backend")
    offered = tuple(dict.fromkeys(backends)) or tuple(BACKENDS)
    local = next((b for b in offered if runs_here(b)), offered[0])
    limit, message = concurrency_for(local, concurrency, 10**6)
    if message:
        click.echo(message, err=True)

    options = WorkerOptions(
        url=url,
        runs_dir=(runs_dir or config.runs_dir).expanduser(),
        backends=offered,
        concurrency=limit,
        lease_s=lease_s,
        audit_key=audit_key,
        settings=config,
        max_runs=max_runs,
    )
    worker = Worker(options, say)

    class Stop(OnSignal):
        def act(self, signum: int, count: int) -> None:
            import signal

            worker.stop(f"stopped by signal {signal.Signals(signum).name}")

    with Stop():
        code = worker.run()
    sys.exit(code)
