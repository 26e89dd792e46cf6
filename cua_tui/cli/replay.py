"""``cua-tui replay``: a recorded run in the TUI's panes, offline and read-only (``--follow`` for one still
being written)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .base import fail, queued_run, run_directory, settings
from .flags import flag, queue_flag


@click.command("replay")
@click.argument("run")
@click.option("--follow", is_flag=True, help="Follow a run still being written (by another process).")
@flag("theme")
@flag("runs_dir")
@queue_flag("A team's queue (postgresql://...): RUN is a run id there, read from the database alone.")
def command(run: str, follow: bool, theme: str | None, runs_dir: Path | None, queue: str | None) -> None:
    """Replay RUN (a run directory, or a run id as `cua-tui runs` prints it) in the TUI's panes, offline
    and read-only: step through its actions with the arrow keys, jump to decisions (d), refusals (r),
    errors (e) and refused egress (g), flip before/after screens (b), zoom (z); ? lists the keys.

    A banner shows the chain's state as `cua-tui verify` finds it; a tampered run still opens, with the
    steps after the first bad line marked untrusted. Exit status: 0, 1 when the TUI failed, or 2 when RUN
    cannot be read."""
    from .session import check_theme

    where = settings()
    check_theme(theme, where)
    if queue is not None:
        if follow:
            fail("--follow with --queue: a run on the queue is replayed as mirrored so far; attach to follow it")
        with queued_run(queue, run) as path:
            _replay(path, False, theme, where)
        return
    _replay(run_directory(run, runs_dir or where.runs_dir), follow, theme, where)


def _replay(path: Path, follow: bool, theme: str | None, where: Any) -> None:
    from ..core.runlog import RunReader
    from ..core.safeio import RunFileError

    try:
        reader = RunReader(path)
    except RunFileError as exc:
        fail(str(exc), path=path)
    with reader:
        from ..ocr import ScreenReader
        from ..tui.app import graphics_widget
        from ..tui.replay import chain_state, replay_app

        app = replay_app(
            reader,
            # verified in the background: the banner says VERIFYING… until it is done
            lambda: chain_state(path, follow=follow),
            follow=follow,
            theme=theme or where.theme,
            theme_dirs=(where.themes_dir,),
            graphics=graphics_widget(),
            reverify=lambda: chain_state(path, follow=follow),
            screen_reader=ScreenReader(),
        )
        app.run()
    if app.return_code:
        # the App ended on an error (Textual printed it): not a review that went well
        sys.exit(1)
