"""``cua-tui attach``: an analyst on a team's fleet, from any machine. In the fleet TUI (the default) every run of
the fleet on every worker, its queue, and answers through the same compare-and-set any analyst uses, as the
role the database authenticates; leaving (q, a signal, the terminal going away) detaches and the fleet goes
on. Headless (``--headless``), it answers the fleet's requests with ``--on-confirm`` (approve, reject or
approver:CMD), and can come and go while the fleet runs."""

from __future__ import annotations

import sys
from typing import Any

import click

from .base import OnSignal, fail, say, settings
from .flags import queue_flag


@click.command("attach")
@queue_flag()
@click.argument("fleet_id", metavar="[FLEET]", required=False)
@click.option("--headless", is_flag=True, help="No TUI: answer with --on-confirm and print one line per answer.")
@click.option(
    "--on-confirm",
    default="reject",
    show_default=True,
    help="Headless answers: approve, reject or approver:CMD (the request's JSON on stdin, typed text included; "
    '{"decision": "approve|reject|kill"} on stdout; a timeout or a bad answer is a reject).',
)
@click.option("--theme", default=None, help="The TUI's theme (as for run).")
@click.option("--operator", default=None, hidden=True)
def command(
    fleet_id: str | None, headless: bool, on_confirm: str, theme: str | None, operator: str | None, **values: Any
) -> None:
    """Attach to a team fleet (the newest one still running, without FLEET) and answer its requests as your
    database role; leaving detaches, the fleet goes on."""
    from ..team import db

    if operator is not None:
        fail(
            "--operator: with a queue, who answers is the role the database authenticates (its session_user), "
            "never a name given here"
        )
    config = settings()
    url = db.queue_url(values["queue"], config.queue)
    fleet_id = _fleet(url, fleet_id)
    if headless:
        _headless(url, fleet_id, on_confirm)
    else:
        _tui(url, fleet_id, theme, config)


def _fleet(url: str, fleet_id: str | None) -> str:
    """The fleet named, checked to be on the queue; without a name, the newest with a run not ended."""
    from ..core.text import visible
    from ..team import db

    with db.connect(url, "cua-tui attach") as conn:
        if fleet_id is not None:
            if conn.execute("SELECT 1 FROM cua_tui.fleets WHERE id = %s", (fleet_id,)).fetchone() is None:
                fail(f"no fleet {visible(fleet_id, limit=100)} on the queue {db.shown(url)}")
            return fleet_id
        row = conn.execute(
            "SELECT f.id FROM cua_tui.fleets f WHERE EXISTS (SELECT 1 FROM cua_tui.runs r WHERE r.fleet_id = f.id "
            "AND r.state <> 'ended') ORDER BY f.submitted_at DESC LIMIT 1"
        ).fetchone()
    if row is None:
        fail(f"no fleet is running on the queue {db.shown(url)}", hint="name one: cua-tui attach FLEET")
    return str(row[0])


def _headless(url: str, fleet_id: str, on_confirm: str) -> None:
    from ..team.analyst import HeadlessAnalyst

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


def _tui(url: str, fleet_id: str, theme: str | None, config: Any) -> None:
    """The fleet TUI on the queue until the analyst leaves or the terminal goes: the fleet goes on."""
    from ..build import BuildError, drill_plan
    from ..ocr import ScreenReader
    from ..team.control import TeamFleet
    from ..tui.fleet_screen import run_fleet_tui

    try:  # this analyst's drills, never a request of the shared queue
        drills = drill_plan(config.drill_rate, config) if config.drill_rate else None
    except BuildError as exc:
        fail(str(exc))
    fleet = TeamFleet(url, fleet_id, on_escalate=settings().on_escalate, drills=drills)
    apps: list[Any] = []

    class Detach(OnSignal):
        def act(self, signum: int, count: int) -> None:
            for app in apps:
                app.exit()  # thread-safe: Textual posts it to the App's loop

    try:
        with Detach(tui=True):
            run_fleet_tui(fleet, theme=theme, settings=config, screen_reader=ScreenReader(), on_start=apps.append)
    finally:
        fleet.close()
    going = "every run ended" if fleet.done else "its runs go on on their workers"
    say(f"detached from {fleet_id}: {going}")
