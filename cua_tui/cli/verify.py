"""``cua-tui verify``: check a run directory for tampering (0 intact, 1 tampered, 2 unusable input)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .base import fail, path_option, run_directory
from .flags import flag


@click.command("verify")
@click.argument("run", metavar="RUN")
@path_option("--key", help="The audit key the run was signed with (HMAC secret, or Ed25519 private/public PEM).")
@flag("runs_dir")
def command(run: str, key: Path | None, runs_dir: Path | None) -> None:
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
    from ..core.audit import AuditKey, AuditKeyError, VerifyExit, verify_run
    from ..core.text import visible

    run_dir = run_directory(run, runs_dir)
    try:
        audit_key = AuditKey.load(key) if key else None
    except AuditKeyError as exc:
        fail(str(exc))
    report = verify_run(run_dir, audit_key)
    if report.code == VerifyExit.UNUSABLE:
        # not a verdict on the run: the error every command gives
        fail(report.summary)
    stream_err = report.code != VerifyExit.INTACT
    # the summary quotes the run directory's own text (run ids, paths): shown literally, never as
    # escapes
    click.echo(visible(report.summary), err=stream_err)
    for note in report.notes:
        click.echo(f"note: {visible(note)}", err=stream_err)
    sys.exit(report.code)
