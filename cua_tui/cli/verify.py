"""``cua-tui verify``: check a run directory for tampering (0 intact, 1 tampered, 2 unusable input)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .base import fail, path_option, run_directory, settings
from .flags import flag, queue_flag


@click.command("verify")
@click.argument("run", metavar="RUN")
@path_option("--key", help="The audit key the run was signed with (HMAC secret, or Ed25519 private/public PEM).")
@flag("runs_dir")
@queue_flag(
    help="Check RUN (a run id) from a team's queue alone, or every run of FLEET and its answers: each "
    "committed answer in exactly one chain, each decision a chain took from the queue in the database."
)
def command(run: str, key: Path | None, runs_dir: Path | None, queue: str | None) -> None:
    """Check a run directory for tampering. RUN is its path, or a run id as `cua-tui runs` lists it (or a
    unique beginning of one) in the runs directory (--runs-dir).

    Recomputes the hash chain of audit.jsonl, checks the seal in result.json (event count and head hash,
    so truncation shows), the seal's signature when --key is given (so a recomputed chain shows), and every
    referenced screenshot. Exit status: 0 intact, 1 tampered (the first bad line and why), 2 unusable
    input. A run without result.json (interrupted) verifies as a prefix and is reported unsealed, with
    the actions whose outcome is unknown; with --key it exits 1 (nothing signed vouches for its end) and
    says up to which signed checkpoint it is covered. Links, FIFOs and devices in a run directory are
    refused, never followed; files and lines are read with size caps.
    """
    from ..core.audit import AuditKey, AuditKeyError, verify_run

    try:
        audit_key = AuditKey.load(key) if key else None
    except AuditKeyError as exc:
        fail(str(exc))
    if queue is not None:
        _on_queue(queue, run, audit_key)
    run_dir = run_directory(run, runs_dir)
    report = verify_run(run_dir, audit_key)
    _say(report)
    sys.exit(report.code)


def _say(report: Any, prefix: str = "") -> None:
    from ..core.audit import VerifyExit
    from ..core.text import visible

    if report.code == VerifyExit.UNUSABLE:
        # not a verdict on the run: the error every command gives
        fail(report.summary)
    stream_err = report.code != VerifyExit.INTACT
    # the summary quotes the run directory's own text (run ids, paths): shown literally, never as
    # escapes
    click.echo(prefix + visible(report.summary), err=stream_err)
    for note in report.notes:
        click.echo(f"note: {visible(note)}", err=stream_err)


def _on_queue(url: str, target: str, key: Any) -> None:
    """``--queue``: a run or a whole fleet, from the database alone (team/verify.py)."""
    from ..core.audit import VerifyExit
    from ..core.text import visible
    from ..team import db
    from ..team.verify import check_fleet, check_run, kind_of

    url = db.queue_url(url, settings().queue)
    with db.connect(url, "cua-tui verify") as conn:
        kind = kind_of(conn, target)
        if kind is None:
            fail(f"no run or fleet {target} on the queue {db.shown(url)}")
        if kind == "run":
            report = check_run(conn, target, key).report
            if report.code == VerifyExit.UNUSABLE:
                fail(report.summary)
            _say(report)
            sys.exit(report.code)
        fleet = check_fleet(conn, target, key)
    for run in fleet.runs:
        _say(run.report, prefix=f"{run.run_id} ({visible(run.status, limit=32)}): ")
    for note in fleet.notes:
        click.echo(f"note: {visible(note)}", err=True)
    for problem in fleet.problems:
        click.echo(f"NOT AGREEING: {visible(problem)}", err=True)
    if not fleet.problems:
        click.echo(
            f"fleet {target}: {len(fleet.runs)} runs; {fleet.answers} committed answers, each in exactly one chain, "
            "and every decision the chains took from the queue in the database",
            err=fleet.code != VerifyExit.INTACT,
        )
    sys.exit(fleet.code)
