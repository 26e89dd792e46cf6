"""Drills on a team's fleet (issue 41, point 1): each analyst's own, in front of a real request the analyst may
answer, never a request of the shared queue and never counted toward a quorum. Their answers reach the run's
worker as rows the server names the role in, and the worker records them in the run's chain; a drill looks,
in the queue and on the panel, as the real request does on another analyst's screen. A real PostgreSQL, a
real worker in this process's threads, the analysts as their own login roles."""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
from drill_cases import SIM_FORM, make_library
from pilot_helpers import answer, drawn, fleet_screen, guard_of, until
from team_cases import TEMPLATE, WAIT_S, as_role, one, ready, spec, wait_for
from test_fleet_team import SIZE, App, Team, team_of

from cua_tui.core.audit import verify_run
from cua_tui.core.drills import DrillPlan, load_library
from cua_tui.core.fleet_queue import QueueItem
from cua_tui.team.control import TeamFleet
from cua_tui.team.submit import submit
from cua_tui.tui.fleet_screen import FleetScreen
from cua_tui.tui.row_table import RowTable
from tests.fakes.pgserver import PgServer

pytestmark = [pytest.mark.timeout(120), pytest.mark.pgserver]


@dataclass
class Drilled:
    """alice's fleet TUI on a one-run team fleet, her drill (drills at 1.0) first on her panel."""

    team: Team
    fleet: TeamFleet
    app: App
    pilot: Any
    main: FleetScreen
    drill: QueueItem


@contextlib.asynccontextmanager
async def alices_drill(pg_server: PgServer, tmp_path: Path, library: Path | None = None) -> AsyncIterator[Drilled]:
    library = library or make_library(tmp_path / "made")
    with team_of(pg_server, tmp_path, [spec("t0")]) as team:
        plan = DrillPlan(1.0, load_library(library), random.Random(3))
        alice = TeamFleet(as_role(team.url, "alice"), team.fleet_id, poll_s=0.1, drills=plan)
        app = App(alice)
        try:
            async with app.run_test(size=SIZE) as pilot:
                main = fleet_screen(app)
                await until(pilot, lambda: main.selected is not None, "alice's drill", timeout=WAIT_S)
                drill = main.selected
                assert drill is not None and drill.ticket < 0
                yield Drilled(team, alice, app, pilot, main, drill)
        finally:
            alice.close()


async def test_a_drill_is_each_analysts_own_recorded_in_the_runs_chain_by_its_worker(
    pg_server: PgServer, tmp_path: Path
) -> None:
    async with alices_drill(pg_server, tmp_path) as on:
        team, alice, app, pilot, main, item = on.team, on.fleet, on.app, on.pilot, on.main, on.drill
        real_id = -item.ticket  # her drill, in front of the real request
        bob = TeamFleet(as_role(team.url, "bob"), team.fleet_id, poll_s=0.1)
        bob.start()
        try:
            # bob, with no drills, sees the real request at once; the queue holds only real requests
            wait_for("bob's queue", lambda: [i.ticket for i in bob.queue()] == [real_id])
            assert one(team.url, "SELECT count(*) FROM cua_tui.requests") == 1
        finally:
            bob.close()
        # the screen and the action are the drill's; the real one is held back, not shown
        assert [i.ticket for i in main.items] == [item.ticket]
        assert "drills on" in drawn(app.query_one("#fleet-header"))  # hers: said, never which
        view = alice.view(item.task)
        assert view.pending is item.request and view.screen is not None
        assert view.screen.sha256 == item.request.frame.sha256  # type: ignore[union-attr]
        await answer(pilot, "y")  # approve the drill: nothing runs, it is revealed
        await until(pilot, lambda: main.panel.revealed.startswith("That was a drill"), "the reveal")
        reveal = main.panel.revealed
        assert ("a drill", reveal) in app.told  # and a toast, should no request follow
        # then the real request of the same run, as the others have had it all along
        await until(pilot, lambda: any(i.ticket == real_id for i in main.items), "the real request")
        assert alice.view(item.task).pending is not None
        assert one(team.url, "SELECT answer FROM cua_tui.requests WHERE id = %s", real_id) is None
        # the worker records her answer in the run's chain while the real request waits
        chain = tmp_path / "runs" / item.run_id / "audit.jsonl"
        wait_for("the drill in the chain", lambda: '"kind":"drill"' in chain.read_text())
        # the rest of the run: each request alice's, each drill before it answered too
        for _ in range(12):
            if alice.done:
                break
            await until(pilot, lambda: main.selected in main.items or alice.done, "a request", timeout=WAIT_S)
            if alice.done:
                break
            await answer(pilot, "y")
            await pilot.pause(0.3)
        await until(pilot, lambda: alice.done, "the run ended", timeout=WAIT_S)
    records = [json.loads(line) for line in chain.read_text().splitlines()]
    drills = [r for r in records if r["kind"] == "drill"]
    assert drills and all(d["operator"] == "alice" and d["by"] == "human (team queue)" for d in drills)
    assert drills[0]["answer"] == "approve" and "That was a drill" in reveal
    # the verdict is the worker's own reading: a threat approved is missed, a benign one is no false alarm
    assert all((d["caught"] is False) if d["right"] == "reject" else (d["false_alarm"] is False) for d in drills)
    # nothing of a drill ran: the run's decisions are the real requests', each answered once by alice
    decisions = [r for r in records if r["kind"] == "decision" and r.get("queue")]
    assert len(decisions) == one(team.url, "SELECT count(*) FROM cua_tui.requests")
    assert {d["operator"] for d in decisions} == {"alice"}
    assert verify_run(chain.parent).intact
    assert one(team.url, "SELECT count(*) FROM cua_tui.drill_answers WHERE recorded_at IS NULL") == 0
    # stats --queue scores her drills apart from her decisions
    from click.testing import CliRunner

    from cua_tui.cli import main as cli

    shown = CliRunner().invoke(
        cli, ["stats", "--queue", team.url, "--json"], env={"CUA_TUI_CONFIG": str(tmp_path / "none.toml")}
    )
    assert shown.exit_code == 0, shown.output
    (mine,) = [row for row in json.loads(shown.output) if row["operator"] == "alice"]
    assert mine["drills"]["shown"] == len(drills) and mine["decisions"] == len(decisions)


def test_the_server_takes_a_drill_answer_only_for_a_request_the_role_may_answer_and_the_worker_reads_it_strictly(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """A patched front end cannot record a drill against a request its role may not answer; a hostile record
    reaches the chain as a note saying why it was not read, never as a score."""
    url = ready(pg_server).new_database(TEMPLATE)
    fleet = submit(url, [spec("t0")], tasks_sha256="7" * 64, name="drills")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO cua_tui.requests (run_id, fleet_id, turn, index, kind, seq, body, content_sha256, tier, "
            "approvers) VALUES (%s, %s, 1, 0, 'action', 5, '{}', %s, 3, ARRAY['ops'])",
            (fleet.runs[0][1], fleet.fleet_id, "0" * 64),
        )
        (request_id,) = conn.execute("SELECT id FROM cua_tui.requests").fetchone()  # type: ignore[misc]
    # one drill per analyst in front of a request: a second answer cannot flood the run's chain
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO cua_tui.requests (run_id, fleet_id, turn, index, kind, seq, body, content_sha256, tier) "
            "VALUES (%s, %s, 1, 1, 'action', 6, '{}', %s, 3)",
            (fleet.runs[0][1], fleet.fleet_id, "1" * 64),
        )
        (open_id,) = conn.execute("SELECT max(id) FROM cua_tui.requests").fetchone()  # type: ignore[misc]
    with psycopg.connect(as_role(url, "alice"), autocommit=True) as conn:
        conn.execute("SELECT cua_tui.drill_answered(%s, %s)", (open_id, json.dumps({"drill": "x"})))
        with pytest.raises(psycopg.errors.CheckViolation, match="answered a drill in front of request"):
            conn.execute("SELECT cua_tui.drill_answered(%s, %s)", (open_id, json.dumps({"drill": "y"})))
    assert one(url, "SELECT count(*) FROM cua_tui.drill_answers") == 1
    with psycopg.connect(as_role(url, "carol"), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.CheckViolation, match="not one this role may answer"):
            conn.execute("SELECT cua_tui.drill_answered(%s, %s)", (request_id, json.dumps({"drill": "x"})))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO cua_tui.drill_answers (request_id, run_id, role, record) VALUES (%s, '', 'x', '{}')",
                (request_id,),
            )
    from cua_tui.core.drills import DrillError, answered_of_row

    click = {"kind": "click", "x": 1, "y": 2, "button": "left"}
    good: dict[str, Any] = {"drill": "d1", "subject": "action", "answer": "approve", "right": "reject",
                            "screen": "a" * 64, "action": click, "shown_ms": 900, "why": "w"}  # fmt: skip
    event = answered_of_row(good, 1, 0, "human (team queue)", "alice")
    assert event.caught is False and event.false_alarm is None and event.operator == "alice"
    # the verdicts are worked out, never taken as written; typed text never rides along
    typed: dict[str, Any] = {"kind": "type", "text": "pw"}
    nested: dict[str, Any] = {"kind": [[[]]]}
    hostile: Any
    for hostile in ({**good, "caught": True}, {**good, "drill": "../x"}, {**good, "action": typed},
                    {**good, "shown_ms": -1}, {**good, "why": "x" * 401}, {**good, "action": nested}, []):  # fmt: skip
        with pytest.raises(DrillError):
            answered_of_row(hostile, 1, 0, "human (team queue)", "alice")
    del tmp_path


# the queue row and the panel of a drill, on alice's screen, beside the real request on bob's: the same run, the
# same place, the same keys; what differs is the action (and its rule) and nothing else
async def test_a_drills_row_and_panel_look_as_the_real_requests_do_on_another_analysts_screen(
    pg_server: PgServer, tmp_path: Path
) -> None:
    library = tmp_path / "one"
    from cua_tui.export.drill import add_to_library

    made = make_library(tmp_path / "made")
    typed = next(d for d in load_library(made) if d.id == "typed-secret")
    add_to_library(library, typed, typed.frame.png)  # the form's typing, as its own run asks it
    # the runs play the script the drill was made from: the real request shows the same words as the drill
    with team_of(pg_server, tmp_path, [spec("t0", SIM_FORM)]) as team:
        seen: dict[str, dict[str, Any]] = {}
        for role, plan in (("alice", DrillPlan(1.0, load_library(library), random.Random(1))), ("bob", None)):
            fleet = TeamFleet(as_role(team.url, role), team.fleet_id, poll_s=0.1, drills=plan)
            app = App(fleet)
            try:
                async with app.run_test(size=SIZE) as pilot:
                    main = fleet_screen(app)
                    await until(pilot, partial(lambda m: m.selected is not None, main), f"{role}'s request", WAIT_S)
                    # drawn once its screen is painted and the input guard passed (the keys are the same then)
                    await until(pilot, guard_of(app).passed, f"{role}'s input guard", WAIT_S)
                    await pilot.pause()
                    item = main.selected
                    assert item is not None
                    table = app.query_one("#queue", RowTable)
                    seen[role] = {
                        "drill": item.ticket < 0,
                        "row": [line.rstrip() for line in drawn(table).splitlines() if "t0" in line][:1],
                        "panel": drawn(main.panel),
                        "keys": sorted(k for k in _footer(app)),
                    }
            finally:
                fleet.close()
        assert seen["alice"]["drill"] and not seen["bob"]["drill"]
        for role in ("alice", "bob"):  # each saw a request: its row in the queue, its panel, its keys
            assert seen[role]["row"] and "DECISION NEEDED" in seen[role]["panel"] and "approve" in seen[role]["keys"]
        differences = {k: (seen["alice"][k], seen["bob"][k]) for k in ("row", "panel", "keys")
                       if _without_time(seen["alice"][k]) != _without_time(seen["bob"][k])}  # fmt: skip
        import difflib

        assert differences == {}, "\n".join(
            line
            for k, (a, b) in differences.items()
            for line in difflib.unified_diff(
                str(a).splitlines(), str(b).splitlines(), "alice (drill)", "bob", lineterm=""
            )
        )


def _footer(app: App) -> set[str]:
    from pilot_helpers import footer_actions

    return footer_actions(app)


def _without_time(value: Any) -> Any:
    """A drawing with its waited seconds and read-by marks left out (the two analysts look a moment apart)."""
    import re

    text = json.dumps(value)
    return re.sub(r"\b\d+s\b", "Ns", re.sub(r"read by \w+ · ", "", text))


async def test_a_drill_whose_request_another_analyst_answers_closes_as_that_request_would(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """bob answers the real request while alice's drill stands in front of it: her row closes saying who
    answered, as the request's row would; the drill goes unanswered and unscored."""
    from cua_tui.core.ports import Answer
    from cua_tui.team import analyst

    async with alices_drill(pg_server, tmp_path) as on:
        drill, main = on.drill, on.main
        with psycopg.connect(as_role(on.team.url, "bob"), autocommit=True) as conn:
            assert analyst.answer(conn, -drill.ticket, Answer.APPROVE, how="human").won
        said = f"request {-drill.ticket} was already answered: bob approved it at "
        await until(on.pilot, lambda: said in (main.panel.closed or ""), "her row closed, saying who")
        assert drill not in on.fleet.queue() and not on.fleet.view(drill.task).held
        # y on it now answers nothing: not the drill, not the request
        assert on.fleet.answer(drill, Answer.APPROVE) is not None
        url = on.team.url
    assert one(url, "SELECT count(*) FROM cua_tui.drill_answers") == 0


async def test_a_drill_answered_from_its_runs_view_is_revealed_and_the_real_request_follows_there(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """Enter on a drill opens its run's view with the drill pending there, as a request is; y in that view
    answers the drill (never the request), and the view then waits on the real request."""
    from cua_tui.tui.run_screen import RunScreen

    async with alices_drill(pg_server, tmp_path) as on:
        app, pilot, drill = on.app, on.pilot, on.drill
        on.main.action_open_run()
        await until(pilot, lambda: isinstance(app.screen, RunScreen), "the run's view")
        view = app.screen
        assert isinstance(view, RunScreen)
        await until(pilot, lambda: view.pending is not None, "a request pending in the run's view")
        assert view.pending is drill.request  # the drill, as the fleet's row showed it
        await answer(pilot, "y")
        await until(pilot, lambda: view.panel.revealed.startswith("That was a drill"), "the reveal there")
        await until(pilot, lambda: view.pending is not None and view.pending is not drill.request, "the real")
        assert view.pending is not None and view.pending.turn == drill.request.turn
        assert one(on.team.url, "SELECT answer FROM cua_tui.requests WHERE id = %s", -drill.ticket) is None


async def test_a_typing_drill_names_its_own_field_and_offers_its_scope(pg_server: PgServer, tmp_path: Path) -> None:
    """A shipped typing drill whose field sits elsewhere than the run's: the panel reads its own field, and
    `a` offers typing into that field, as a real request of its screen would."""
    from cua_tui.export.drill import add_to_library
    from cua_tui.labs import SHIPPED_DRILLS

    phrase = next(d for d in load_library(SHIPPED_DRILLS) if d.id == "benign-phrase-2")
    assert phrase.focus == (360, 288)
    add_to_library(tmp_path / "one", phrase, phrase.frame.png)
    async with alices_drill(pg_server, tmp_path, tmp_path / "one") as on:
        scope = on.drill.request.scope
        assert scope is not None and scope.key == "360,288"
        await until(on.pilot, lambda: "(360, 288)" in drawn(on.main.panel), "its own field on the panel")
        assert "(250, 182)" not in drawn(on.main.panel)  # the run's own field is nowhere on it
