"""``cua-tui sandboxes``: the sandboxes a backend holds for cua-tui (CoreWeave's tagged, Docker's labelled
``cua-tui``), and removing leftovers."""

from __future__ import annotations

from pathlib import Path

import click

from ..core.errors import CommandError
from ..desktops import BACKENDS
from .base import RUNS_HINT, fail, settings
from .flags import flag

SANDBOX_ID_CAP = 256


# the backends that leave sandboxes behind (their records say how to list and stop them)
KINDS = tuple(name for name, backend in BACKENDS.items() if backend.leftovers)


@click.command("sandboxes")
@click.option(
    "--backend",
    type=click.Choice(KINDS),
    default=KINDS[0],
    show_default=True,
    help="Whose sandboxes: " + ", or ".join(BACKENDS[name].leftovers_about for name in KINDS) + ".",
)
@click.option(
    "--stop",
    "target",
    default=None,
    help="Stop one: a run directory, a run id (its folder here, else the sandboxes tagged with it, as a team's "
    "worker on another machine leaves them) or a sandbox id.",
)
@click.option("--all", "stop_all", is_flag=True, help="Stop every sandbox tagged (or labelled) cua-tui.")
@flag("runs_dir")
def command(backend: str, target: str | None, stop_all: bool, runs_dir: Path | None) -> None:
    """List the sandboxes tagged cua-tui (CoreWeave: CWSANDBOX_API_KEY says whose; Docker: the containers
    and networks labelled cua-tui on this machine's engine), or stop leftovers.

    A run leaves its sandbox's id in sandbox-id.txt before anything else, so --stop RUN_DIR finds it even
    after a crash. Stopping a sandbox that is already gone is harmless. Exit status: 0 done, 1 the service
    failed, 2 bad usage or configuration."""
    if target and stop_all:
        fail("--stop and --all: choose one")
    # Imported here: the vendor SDK loads only when this command runs.
    from ..core.text import one_line, visible

    config = settings()
    # the run directory's problem (if any) before the backend's: it is the real one
    sandbox_id = _sandbox_id(target, (runs_dir or config.runs_dir).expanduser()) if target else None
    found = BACKENDS[backend].leftovers_of(config)
    try:
        if sandbox_id is not None:
            # a run id whose folder is on another machine (a team's worker): the sandboxes tagged with it
            tagged = [row["id"] for row in found.list() if row["run"] == sandbox_id]
            for one in tagged or [sandbox_id]:
                found.stop(one)
                click.echo(f"stopped {visible(one)}")
            return
        rows = found.list()
        if stop_all:
            for row in rows:
                found.stop(row["id"])
                click.echo(f"stopped {visible(row['id'])}")
            click.echo(f"{len(rows)} sandbox(es) stopped")
            return
        for row in rows:
            click.echo(f"{visible(row['id'])}  {visible(row['state'], limit=20)}  run {visible(row['run']) or '-'}")
        click.echo(f"{len(rows)} sandbox(es) {found.what}")
    except CommandError:
        raise
    # the service's error, in one line (it carries no credential)
    except Exception as exc:
        message = one_line(f"{backend}: {type(exc).__name__}: {exc}")
        raise CommandError(message.replace(found.secret, "[redacted]") if found.secret else message) from None


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
                fail("no such run directory, run id or sandbox id", path=target, hint=RUNS_HINT)
            return target.strip()
    try:
        with RunFolder.open(path) as folder:
            text = folder.read_bytes("sandbox-id.txt", SANDBOX_ID_CAP).decode("ascii").strip()
    except RunFileError as exc:
        fail(f"no readable sandbox-id.txt ({exc.detail})", path=path, hint="only a run on cwsandbox or docker has one")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"no readable sandbox-id.txt ({exc})", path=path)
    if not text or not text.isprintable() or " " in text:
        fail("sandbox-id.txt does not hold a sandbox id", path=path)
    return text
