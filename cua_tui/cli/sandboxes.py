"""``cua-tui sandboxes``: this user's CoreWeave sandboxes tagged ``cua-tui``, and stopping leftovers."""

from __future__ import annotations

from pathlib import Path

import click

from .base import UsageFailure, settings

SANDBOX_ID_CAP = 256


@click.command("sandboxes")
@click.option("--stop", "target", default=None, help="Stop one: a run directory, a run id or a sandbox id.")
@click.option("--all", "stop_all", is_flag=True, help="Stop every sandbox tagged cua-tui.")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=None, help="Where run directories are.")
def command(target: str | None, stop_all: bool, runs_dir: Path | None) -> None:
    """List this user's sandboxes tagged cua-tui (CWSANDBOX_API_KEY says whose), or stop leftovers.

    A run leaves its sandbox's id in sandbox-id.txt before anything else, so --stop RUN_DIR finds it even
    after a crash. Stopping a sandbox that is already gone is harmless. Exit status: 0 done, 1 the service
    failed, 2 bad usage or configuration."""
    if target and stop_all:
        raise UsageFailure("--stop and --all: choose one")
    # Imported here: the vendor SDK loads only when this command runs.
    from ..core.text import one_line, visible
    from ..factory import UnavailableError, sandbox_settings

    config = settings()
    try:
        options = sandbox_settings(config)
    except UnavailableError as exc:
        raise UsageFailure(str(exc)) from None
    from ..desktops.cwsandbox import list_sandboxes, stop_sandbox

    try:
        if target:
            sandbox_id = _sandbox_id(target, (runs_dir or config.runs_dir).expanduser())
            stop_sandbox(options, sandbox_id)
            click.echo(f"stopped {visible(sandbox_id)}")
            return
        found = list_sandboxes(options)
        if stop_all:
            for row in found:
                stop_sandbox(options, row["id"])
                click.echo(f"stopped {visible(row['id'])}")
            click.echo(f"{len(found)} sandbox(es) stopped")
            return
        for row in found:
            click.echo(f"{visible(row['id'])}  {visible(row['state'], limit=20)}  run {visible(row['run']) or '-'}")
        click.echo(f"{len(found)} sandbox(es) tagged cua-tui")
    except UsageFailure:
        raise
    except Exception as exc:  # the service's error, in one line (it carries no credential)
        key = options.api_key or ""
        message = one_line(f"cwsandbox: {type(exc).__name__}: {exc}")
        raise click.ClickException(message.replace(key, "[redacted]") if key else message) from None


def _sandbox_id(target: str, runs_dir: Path) -> str:
    """The sandbox id a run directory (or run id) recorded, else ``target`` itself as a sandbox id."""
    from ..core.rundir import RunNotFound, resolve_run
    from ..core.safeio import RunFileError, RunFolder

    path = Path(target).expanduser()
    if not path.is_dir():
        try:
            path = resolve_run(target, runs_dir)
        except RunNotFound:
            if "/" in target or not target.strip() or len(target) > 200:
                raise UsageFailure(f"{target!r}: no such run directory, run id or sandbox id") from None
            return target.strip()
    try:
        with RunFolder.open(path) as folder:
            text = folder.read_bytes("sandbox-id.txt", SANDBOX_ID_CAP).decode("ascii").strip()
    except (OSError, RunFileError, UnicodeDecodeError) as exc:
        raise UsageFailure(f"{path}: no readable sandbox-id.txt ({exc})") from None
    if not text or not text.isprintable() or " " in text:
        raise UsageFailure(f"{path}: sandbox-id.txt does not hold a sandbox id")
    return text
