"""``cua-tui drill add RUN [STEP]``: a drill made from a recorded decision of any run, added to the drill
library (docs/drills.md). Without STEP, the run's decisions are listed, numbered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .base import fail, run_directory, settings
from .flags import flag


@click.command("drill")
@click.argument("action", type=click.Choice(("add",)))
@click.argument("run")
@click.argument("step", type=click.IntRange(1, 10**6), required=False)
@click.option("--answer", type=click.Choice(("approve", "reject")), default=None, help="The right answer to the drill.")
@click.option("--why", default=None, help="Why that answer is right (shown once the drill is answered).")
@click.option("--missed", default="", help="What would have happened had it been approved (a threat's).")
@click.option("--text", default="", help="A typing decision's text: its SHA-256 must be the record's.")
@click.option("--id", "drill_id", default="", help="The drill's id (default: RUN-STEP).")
@click.option(
    "--library", type=click.Path(path_type=Path), default=None,
    help="The library folder (default: the settings' drill_library, else the user data folder's drills/).",
)  # fmt: skip
@flag("runs_dir")
def command(**values: Any) -> None:
    """Make a drill from decision STEP of RUN (list them without STEP) and add it to the drill library."""
    from ..core.drills import DrillError
    from ..core.values import Answer
    from ..export import RunUnusable, open_run
    from ..export.drill import add_to_library, decisions, make_drill

    path = run_directory(values["run"], values["runs_dir"])
    try:
        run = open_run(path)
    except RunUnusable as exc:
        fail(str(exc), path=path)
    if run.tampered:
        fail("its audit log does not verify: a drill is made from an intact record", path=path)
    found = decisions(run)
    if values["step"] is None:
        for decision in found:
            click.echo(decision.line)
        if not found:
            click.echo("no decision was asked in this run", err=True)
        return
    if values["answer"] is None or not (values["why"] or "").strip():
        fail("--answer and --why are needed: the right answer, and why it is right")
    if values["step"] > len(found):
        fail(f"the run asked {len(found)} decision(s): STEP is 1 to {len(found)}", path=path)
    folder = values["library"] or settings().drill_library
    try:
        drill, png = make_drill(
            run, found[values["step"] - 1], answer=Answer(values["answer"]), why=values["why"].strip(),
            missed=values["missed"], text=values["text"], drill_id=values["drill_id"],
        )  # fmt: skip
        manifest = add_to_library(folder, drill, png)
    except DrillError as exc:
        fail(str(exc))
    click.echo(f"drill {drill.id} added to {manifest} (right answer: {drill.answer.value})")
