"""The fleet TUI on a team's queue under the admin's rules (issue 39, points 2 and 3): a request shows who may
answer it and its approvals so far; y and n of a role the rule does not name say in one line why not; a
two-person rule records the first approval and waits for another role, whose screen shows the first's
edit; the queue's header says what no attached analyst may answer. A real PostgreSQL server, a real worker
in this process's threads, each analyst as her own login role."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from pilot_helpers import answer, fleet_screen, until
from team_cases import TWICE, WAIT_S, as_role, one, spec, wait_for
from test_fleet_team import App, Team, team_of

from cua_tui.core.actions import Action, Kind
from cua_tui.core.ports import Answer
from cua_tui.team import analyst, db, rules
from cua_tui.team.control import TeamFleet
from cua_tui.tui.text_lines import TextLines
from tests.fakes.pgserver import PgServer

pytestmark = [pytest.mark.pgserver, pytest.mark.timeout(120)]

SIZE = (200, 50)


def two_persons(url: str) -> None:
    """The admin's rule: typing needs two approvals of payments' members."""
    with db.connect(as_role(url, "root_admin"), "test") as conn:
        rules.set_rule(conn, "actions.type", ("payments",), 2)


def stop(team: Team) -> None:
    """The fleet's runs killed (each request left would need two of payments)."""
    with psycopg.connect(as_role(team.url, "bob"), autocommit=True) as conn:
        conn.execute("SELECT cua_tui.kill_runs(%s)", ([run_id for _, run_id in team.runs],))


async def test_a_two_person_request_waits_for_a_second_role_and_others_are_told_why_not(
    pg_server: PgServer, tmp_path: Path
) -> None:
    with team_of(pg_server, tmp_path, [spec("t0", TWICE)], setup=two_persons) as team:
        carol = TeamFleet(as_role(team.url, "carol"), team.fleet_id, poll_s=0.1)
        carol.start()
        fleet = TeamFleet(as_role(team.url, "alice"), team.fleet_id, poll_s=0.1)
        app = App(fleet)
        try:
            async with app.run_test(size=SIZE) as pilot:
                main = fleet_screen(app)
                await until(pilot, lambda: main.selected is not None, "the request on alice's panel", WAIT_S)
                first = main.selected
                assert first is not None and first.deciders is not None
                assert main.panel.who == "payments may answer · 0 of 2 approvals"
                await answer(pilot, "y")
                said = f"request {first.ticket}: approval 1 of 2 recorded; another role must approve it too"
                await until(pilot, lambda: ("recorded", said) in app.told, "alice told it waits for another role")

                def approved() -> bool:
                    found = [i for i in main.items if i.ticket == first.ticket]
                    return bool(found) and found[0].deciders is not None and found[0].deciders.approved_by == ("alice",)

                # the request stays in the queue, showing her approval; her second y is refused before it is sent
                await until(pilot, approved, "her approval on the row")
                await pilot.press("home")
                await until(pilot, lambda: main.selected is not None and main.selected.ticket == first.ticket, "it")
                await until(pilot, lambda: main.panel.who == "payments may answer · 1 of 2 approvals, by alice", "who")
                await answer(pilot, "y")
                again = (
                    f"not answered: you approved request {first.ticket} already; another role's approval must follow"
                )
                await until(pilot, lambda: any(again in m for _, m in app.told), "her second y refused")
                # carol, outside the group, is told why not (the server would refuse her anyway)
                wait_for("carol to see it", lambda: carol.queue(), 10)
                (item,) = carol.queue()
                assert item.deciders is not None and not item.deciders.mine
                assert carol.answer(item, Answer.APPROVE) == (
                    f"not answered: only payments may answer request {first.ticket}; you are carol"
                )
                # bob approves: the request closes, its run goes on
                with psycopg.connect(as_role(team.url, "bob"), autocommit=True) as conn:
                    assert analyst.answer(conn, first.ticket, Answer.APPROVE, how="human").won
                await until(pilot, lambda: first.ticket not in main.pending_tickets, "the request closed")
        finally:
            fleet.close()
            carol.close()
            stop(team)


async def test_the_first_approvers_edit_is_what_the_second_sees_and_the_header_counts_the_unanswerable(
    pg_server: PgServer, tmp_path: Path
) -> None:
    edited = Action(Kind.TYPE, text="alice's words")
    with team_of(pg_server, tmp_path, [spec("t0", TWICE)], setup=two_persons) as team:
        # carol alone is attached: nobody attached may answer the run's typing, and her header says so
        fleet = TeamFleet(as_role(team.url, "carol"), team.fleet_id, poll_s=0.1)
        app = App(fleet)
        try:
            async with app.run_test(size=SIZE) as pilot:
                main = fleet_screen(app)
                await until(pilot, lambda: main.selected is not None, "the request on carol's panel", WAIT_S)
                header = app.query_one("#fleet-header", TextLines)
                await until(pilot, lambda: "1 request no attached analyst may answer" in header.plain, "said")
                ticket = main.selected.ticket if main.selected else 0
                with psycopg.connect(as_role(team.url, "alice"), autocommit=True) as conn:
                    assert analyst.answer(conn, ticket, Answer.APPROVE, how="human", edit=edited).pending
                bob = TeamFleet(as_role(team.url, "bob"), team.fleet_id, poll_s=0.1)
                bob.start()
                try:

                    def shown() -> list[object]:
                        return [i for i in bob.queue() if i.ticket == ticket and i.deciders and i.deciders.edited_by]

                    (item,) = wait_for("bob's view of alice's edit", shown, 10)
                    # bob's screen shows the action as alice edited it, and says whose edit it is
                    assert item.request.action == edited
                    assert item.deciders.approved_by == ("alice",)
                    await until(pilot, lambda: "no attached analyst" not in header.plain, "bob attached now")
                    assert bob.answer(item, Answer.APPROVE) is None
                    answered = "SELECT answer FROM cua_tui.requests WHERE id = %s"
                    wait_for("the answer", lambda: one(team.url, answered, ticket), 10)
                finally:
                    bob.close()
        finally:
            fleet.close()
            stop(team)
    assert one(team.url, "SELECT edit->>'text_len' FROM cua_tui.requests WHERE id = %s", ticket) == str(
        len(edited.text)
    )


async def test_l_sets_a_request_aside_for_this_analyst_only_and_it_comes_back(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """Set aside is not reject: it leaves alice's view (bob's keeps it), comes back after the time, is recorded
    by the server, and answers nothing. On one machine's fleet l is not offered."""
    from pilot_helpers import possible

    with team_of(pg_server, tmp_path, [spec("t0")]) as team:
        bob = TeamFleet(as_role(team.url, "bob"), team.fleet_id, poll_s=0.1)
        bob.start()
        fleet = TeamFleet(as_role(team.url, "alice"), team.fleet_id, poll_s=0.1)
        app = App(fleet)
        try:
            async with app.run_test(size=SIZE) as pilot:
                main = fleet_screen(app)
                await until(pilot, lambda: main.selected is not None, "the request on alice's panel", WAIT_S)
                ticket = main.selected.ticket if main.selected else 0
                assert possible(app, "set_aside") is True
                await pilot.press("l")
                await pilot.press(*"0.03", "enter")  # about 2 s
                await until(pilot, lambda: ticket not in main.pending_tickets, "it left alice's view")
                assert [i.ticket for i in bob.queue()] == [ticket]  # not bob's
                asides = (
                    "SELECT array[role, answer] FROM cua_tui.asides s JOIN cua_tui.requests q ON q.id = s.request_id"
                )
                assert one(team.url, asides) == ["alice", None]
                await until(pilot, lambda: ticket in main.pending_tickets, "it came back", 15)
                await pilot.press("l", "escape")  # Esc keeps it in view
                await pilot.pause()
                assert ticket in main.pending_tickets
                await answer(pilot, "y")
                await until(pilot, lambda: fleet.done, "the run ended", WAIT_S)
        finally:
            fleet.close()
            bob.close()
    runs = [json.loads(line) for line in (tmp_path / "runs" / team.runs[0][1] / "audit.jsonl").read_text().splitlines()]
    (decided,) = [r for r in runs if r["kind"] == "decision" and r.get("queue")]
    assert decided["queue"]["set_aside"] == 1 and decided["operator"] == "alice"


def test_a_headless_approver_may_set_aside_and_answer_later(pg_server: PgServer, tmp_path: Path) -> None:
    """``{"decision": "aside", "minutes": N}`` from an approver command sets the request aside for its role;
    once it is back, the same command's approve answers it."""
    from cua_tui.team.analyst import HeadlessAnalyst

    state = tmp_path / "asked-once"
    command = tmp_path / "approver.sh"
    command.write_text(
        f'#!/bin/sh\ncat >/dev/null\nif [ -e "{state}" ]; then echo \'{{"decision": "approve"}}\'; '
        f'else : > "{state}"; echo \'{{"decision": "aside", "minutes": 0.02}}\'; fi\n'
    )
    command.chmod(0o755)
    lines: list[str] = []
    with team_of(pg_server, tmp_path, [spec("t0")]) as team:
        person = HeadlessAnalyst(as_role(team.url, "carol"), team.fleet_id, f"approver:{command}", lines.append)
        assert person.run() == 0
    assert any(line.endswith("set aside for 0.02 min") for line in lines), lines
    assert one(team.url, "SELECT array[answer, answered_by] FROM cua_tui.requests") == ["approve", "carol"]
    assert one(team.url, "SELECT count(*) FROM cua_tui.asides") == 1


async def test_an_escalated_request_goes_first_for_its_group_rings_once_and_its_command_cannot_answer(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """A rule's --escalate-after: on time the request is marked escalated; for payments' members it goes to the
    top and rings once, and the analyst's own on_escalate command gets it (no typed text), whatever it says
    answering nothing; carol, outside the group, sees no escalation."""
    seen = tmp_path / "escalated.json"
    command = tmp_path / "page.sh"
    command.write_text(f'#!/bin/sh\ncat > "{seen}"\necho \'{{"decision": "approve"}}\'\n')
    command.chmod(0o755)

    def escalating(url: str) -> None:
        with db.connect(as_role(url, "root_admin"), "test") as conn:
            rules.set_rule(conn, "actions.type", None, 1, escalate_after_s=1.0, escalate_to="payments")

    with team_of(pg_server, tmp_path, [spec("t0")], setup=escalating) as team:
        carol = TeamFleet(as_role(team.url, "carol"), team.fleet_id, poll_s=0.1)
        carol.start()
        fleet = TeamFleet(as_role(team.url, "alice"), team.fleet_id, poll_s=0.1, on_escalate=str(command))
        app = App(fleet)
        try:
            async with app.run_test(size=SIZE) as pilot:
                main = fleet_screen(app)
                await until(pilot, lambda: main.selected is not None, "the request on alice's panel", WAIT_S)
                ticket = main.selected.ticket if main.selected else 0
                await until(pilot, lambda: any(t == "escalated" for t, _ in app.told), "the escalation rung", 15)
                assert [m for t, m in app.told if t == "escalated"] == [
                    f"request {ticket} of t0 escalated to your group: it is first"
                ]
                assert "ESCALATED to your group" in main.panel.who
                data = wait_for("the command's input", lambda: seen.exists() and seen.read_text(), 10)
                assert f'"request_id": {ticket}' in data and "cua-tui verified" not in data
                await pilot.pause(0.5)
                # the command said approve: nothing was answered
                assert one(team.url, "SELECT answer FROM cua_tui.requests WHERE id = %s", ticket) is None
                (theirs,) = carol.queue()
                assert theirs.deciders is not None and not theirs.deciders.escalated
                await answer(pilot, "y")
                await until(pilot, lambda: fleet.done, "the run ended", WAIT_S)
                assert len([t for t, _ in app.told if t == "escalated"]) == 1  # rung once
        finally:
            fleet.close()
            carol.close()
    # the record: alice (in payments) received the escalation and answered it; bob received it too
    from click.testing import CliRunner

    from cua_tui.cli import main as cli

    out = CliRunner().invoke(cli, ["stats", "--queue", team.url, "--fleet", team.fleet_id, "--json"])
    assert out.exit_code == 0, out.output
    (alice,) = json.loads(out.stdout)
    assert alice["operator"] == "alice" and (alice["escalations_received"], alice["escalations_answered"]) == (1, 1)


def test_a_runs_view_never_answers_a_request_that_changed_under_it() -> None:
    """The run's view holds the request as it was posted; on a team's queue another analyst's approval or edit
    makes a new item of it: y there is refused in one line, never applied to what the view does not show."""
    from dataclasses import replace

    from cua_tui.core.fleet_queue import Deciders, QueueItem, RunRow, priority
    from cua_tui.core.ports import DecisionRequest
    from cua_tui.tui.fleet_parts import FleetRun

    asked = DecisionRequest("run-1", 1, 1, "c1", "action", "typing", action=Action(Kind.TYPE, text="proposed"))
    now = replace(asked, action=Action(Kind.TYPE, text="alice's edit"))
    item = QueueItem(7, "t0", "run-1", now, priority(now, "actions.type"), 0.0, 3, deciders=Deciders(quorum=2))
    answered: list[object] = []

    class Queue:
        owns_runs = False

        def row(self, task: str) -> RunRow:
            return RunRow(task=task, backend="sim", run_id="run-1")

        def queue(self) -> list[QueueItem]:
            return [item]

        def answer(self, *args: object, **kwargs: object) -> None:
            answered.append(args)

    run = FleetRun(Queue(), "t0")  # type: ignore[arg-type]
    said = run.answer(Answer.APPROVE, asked)
    assert said == "it changed since (another analyst's approval or edit): answer it in the queue, as it is now"
    assert answered == []
