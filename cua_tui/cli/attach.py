"""``cua-tui attach``: an analyst on a team's fleet. Headless (``--headless``), it answers the fleet's requests
with ``--on-confirm`` (approve, reject or approver:CMD) through the same compare-and-set any analyst uses,
as the role the database authenticates, and can come and go while the fleet runs. The fleet TUI on a
queue is the next release's."""

from __future__ import annotations

import sys
from typing import Any

import click

from .base import OnSignal, fail, say, settings
from .flags import queue_flag


@click.command("attach")
@queue_flag()
@click.argument("fleet_id", metavar="FLEET")
@click.option("--headless", is_flag=True, help="No TUI: answer with --on-confirm and print one line per answer.")
@click.option(
    "--on-confirm",
    default="reject",
    show_default=True,
    help="Headless answers: approve, reject or approver:CMD (the request's JSON on stdin, typed text included; "
    '{"decision": "approve|reject|kill"} on stdout; a timeout or a bad answer is a reject).',
)
@click.option("--operator", default=None, hidden=True)
def command(fleet_id: str, headless: bool, on_confirm: str, operator: str | None, **values: Any) -> None:
    """Answer a team fleet's requests (as your database role)."""
    from ..team import db
    from ..team.analyst import HeadlessAnalyst

    if operator is not None:
        fail(
            "--operator: with a queue, who answers is the role the database authenticates (its session_user), "
            "never a name given here"
        )
    if not headless:
        fail("attach without --headless: the fleet TUI on a team's queue is not in this version", hint="add --headless")
    config = settings()
    url = db.queue_url(values["queue"], config.queue)

    try:
        analyst = HeadlessAnalyst(url, fleet_id, on_confirm, say)
    except ValueError as exc:
        fail(str(exc))

    class Stop(OnSignal):
        def act(self, signum: int, count: int) -> None:
            analyst.stop.set()

    with Stop():
        code = analyst.run()
    sys.exit(code)
