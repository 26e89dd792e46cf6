"""``cua-tui runs``: the runs in the runs directory, each with its chain checked."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .base import settings

if TYPE_CHECKING:
    from ..core.safeio import RunFolder


def _read_json(run: RunFolder, name: str) -> dict[str, Any] | None:
    """A run's JSON file through safeio: {} when absent, None when hostile or not an object."""
    from ..core.safeio import RunFileError

    try:
        data = run.read_json(name)
    except RunFileError as exc:
        return {} if exc.reason == "missing" else None
    return data if isinstance(data, dict) else None


def _audit_cell(run: RunFolder) -> str:
    from ..core.audit import VerifyExit, verify_run

    report = verify_run(run)
    if report.code != VerifyExit.INTACT:
        return "TAMPERED" if report.code == VerifyExit.TAMPERED else "unusable"
    if report.sealed:
        return "intact"
    unknown = len(report.unknown_outcomes)
    return f"unsealed, {unknown} unknown" if unknown else "unsealed"


def _row(name: str, info: dict[str, Any] | None, result: dict[str, Any] | None, audit: str) -> tuple[str, ...]:
    from ..core.text import visible

    status = "?" if result is None else str(result.get("status", "unfinished"))
    info, result = info or {}, result or {}
    counts = result.get("counts")
    verified = result.get("verified")
    cells = (
        name,
        name[:8],
        str(info.get("task", "?")),
        status,
        str(counts.get("steps", "-") if isinstance(counts, dict) else "-"),
        "-" if verified is None else "yes" if verified is True else "no",
        audit,
    )
    # a run directory is untrusted: its name and files are shown literally, never as escapes
    return tuple(visible(cell, limit=limit) for cell, limit in zip(cells, (40, 8, 40, 20, 8, 8, 40), strict=True))


def _rows(top: RunFolder, check: bool) -> list[tuple[str, ...]]:
    """One row per run directory under ``top``; a hostile entry is a row of its own, never followed."""
    from ..core.rundir import RUN_ID_RE
    from ..core.safeio import RunFileError

    unusable = "unusable" if check else "-"
    rows = []
    for name, mode in top.entries():
        if stat.S_ISLNK(mode) and RUN_ID_RE.match(name):  # a run's name, but a link: never followed
            rows.append(_row(name, None, None, unusable))
            continue
        if not stat.S_ISDIR(mode):
            continue
        try:
            run = top.subdir(name)
        except RunFileError:
            rows.append(_row(name, None, None, unusable))
            continue
        with run:
            try:
                if run.kind("audit.jsonl") is None:
                    continue
            except RunFileError:
                rows.append(_row(name, None, None, unusable))
                continue
            audit = _audit_cell(run) if check else "-"
            rows.append(_row(name, _read_json(run, "run.json"), _read_json(run, "result.json"), audit))
    return rows


@click.command("runs")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=None, help="Where run directories are.")
@click.option("--no-check", is_flag=True, help="Skip checking each run's audit chain.")
def command(runs_dir: Path | None, no_check: bool) -> None:
    """List runs: id, date, task, status, steps, verified (task) and audit (chain check).

    AUDIT is intact, unsealed (interrupted; with the number of actions whose outcome is unknown),
    TAMPERED or unusable (`cua-tui verify RUN` says why)."""
    from ..core.safeio import RunFileError, RunFolder
    from ..core.text import visible

    folder = runs_dir or settings().runs_dir
    try:
        top = RunFolder.open(folder, follow_link=True)
    except RunFileError:
        click.echo(f"no runs in {visible(str(folder))}")
        return
    with top:
        rows = _rows(top, check=not no_check)
    header = ("RUN", "DATE", "TASK", "STATUS", "STEPS", "VERIFIED", "AUDIT")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for cells in [header, *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip())
