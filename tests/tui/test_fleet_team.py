"""The fleet TUI on either control (issue 38, point 1): the same FleetScreen answering a fleet of this process
(``fleet_runner.Fleet``) and a team's fleet on PostgreSQL (``team.control.TeamFleet``: a real server, a real
worker in this process's threads, an analyst as her own login role). The same keys, the same queue; on the
queue, who answered is the database's role, a request answered by someone else first is said in one line,
and leaving detaches while the workers go on."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fleet_cases import opts
from pilot_helpers import answer, fleet_screen, possible, quick_clock, until
from psycopg.types.json import Jsonb
from team_cases import TEMPLATE, TWICE, WAIT_S, as_role, one, ready, settings, spec, wait_for
from textual.widgets import Input

from cua_tui.core.audit import verify_run
from cua_tui.core.fleet_queue import FleetControl, QueueItem, priority
from cua_tui.core.ports import Answer, DecisionRequest
from cua_tui.fleet_runner import Fleet, FleetTask
from cua_tui.team import analyst
from cua_tui.team.analyst import HeadlessAnalyst
from cua_tui.team.control import TeamFleet
from cua_tui.team.payload import Spec
from cua_tui.team.submit import submit
from cua_tui.team.worker import Worker, WorkerOptions
from cua_tui.tui.app import CuaApp
from cua_tui.tui.fleet_parts import NO_TEAM_TAKEOVER, KillAllScreen
from cua_tui.tui.fleet_screen import FleetScreen
from cua_tui.tui.row_table import RowTable
from cua_tui.tui.run_screen import RunScreen
from cua_tui.tui.text_lines import TextLines
from tests.fakes.pgserver import PgServer

pytestmark = pytest.mark.timeout(120)

SIZE = (200, 50)


class App(CuaApp):
    """The fleet TUI, keeping what it told the analyst."""

    def __init__(self, fleet: FleetControl) -> None:
        super().__init__(partial(FleetScreen, fleet=fleet, grouping=False), guard_clock=quick_clock)
        self.told: list[tuple[str, str]] = []

    def notify(self, message: str, *, title: str = "", severity: Any = "information", **kw: Any) -> None:
        self.told.append((title, message))
        super().notify(message, title=title, severity=severity, **kw)


@dataclass
class Team:
    """A fleet on the queue, its worker running in this process's threads."""

    url: str
    fleet_id: str
    runs: list[tuple[str, str]]
    worker: Worker
    thread: threading.Thread


@contextlib.contextmanager
def team_of(
    pg_server: PgServer, tmp_path: Path, specs: list[Spec], setup: Callable[[str], None] | None = None
) -> Iterator[Team]:
    """``specs`` submitted as one fleet, and a worker running them all at once (``setup``: done to the new
    database first, such as an admin's rules)."""
    url = ready(pg_server).new_database(TEMPLATE)
    if setup is not None:
        setup(url)
    done = submit(url, specs, tasks_sha256="2" * 64, name="team tui")
    worker = Worker(
        WorkerOptions(url=url, runs_dir=tmp_path / "runs", backends=("sim",), concurrency=len(specs), lease_s=5.0,
                      settings=settings(tmp_path), max_runs=len(specs)),
        lambda line: None,
    )  # fmt: skip
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield Team(url, done.fleet_id, list(done.runs), worker, thread)
    finally:
        worker.stop()
        thread.join(WAIT_S)


@pytest.fixture
def team(pg_server: PgServer, tmp_path: Path) -> Iterator[Team]:
    with team_of(pg_server, tmp_path, [spec(f"t{i}") for i in range(2)]) as made:
        yield made


def control(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[FleetControl, Team | None]:
    if kind == "team":
        team: Team = request.getfixturevalue("team")
        return TeamFleet(as_role(team.url, "alice"), team.fleet_id, poll_s=0.1), team
    tasks = [FleetTask(f"t{i}", opts(settings(tmp_path))) for i in range(2)]
    return Fleet(tasks, runs_dir=tmp_path / "runs", concurrency=2, tasks_sha256="ab" * 32), None


@dataclass
class Attached:
    """alice's fleet TUI on the team's fleet, both of its runs asking."""

    fleet: TeamFleet
    app: App
    pilot: Any
    main: FleetScreen


@contextlib.asynccontextmanager
async def attached(team: Team) -> AsyncIterator[Attached]:
    fleet = TeamFleet(as_role(team.url, "alice"), team.fleet_id, poll_s=0.1)
    app = App(fleet)
    try:
        async with app.run_test(size=SIZE) as pilot:
            main = fleet_screen(app)
            await until(pilot, lambda: len(main.items) == 2 and main.selected is not None, "both runs asking")
            yield Attached(fleet, app, pilot, main)
    finally:
        fleet.close()


def queue_keys(app: CuaApp) -> list[str]:
    return list(app.query_one("#queue", RowTable).keys)


@pytest.mark.parametrize("kind", ["process", pytest.param("team", marks=pytest.mark.pgserver)])
async def test_y_answers_the_selected_request_on_either_control(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    fleet, team = control(kind, tmp_path, request)
    app = App(fleet)
    try:
        async with app.run_test(size=SIZE) as pilot:
            main = fleet_screen(app)
            await until(pilot, lambda: len(main.items) == 2 and main.selected is not None, "both runs asking")
            rows = {row.task: row for row in fleet.rows()}
            assert set(rows) == {"t0", "t1"} and all(row.state == "waiting" for row in rows.values())
            if team is not None:
                # each run says which worker runs it, and so does the decision's run line
                assert {row.worker for row in rows.values()} == {team.worker.id}
                assert main.panel.run_name.endswith(f" · on {team.worker.id}")
            # a (the typing's scope) is offered on either
            assert possible(app, "approve_scope") is True
            for left in (1, 0):
                await until(pilot, lambda: main.selected in main.items, "a pending request selected")
                await answer(pilot, "y")
                await until(pilot, partial(lambda n: len(main.items) == n, left), f"{left} left in the queue")
            await until(pilot, lambda: fleet.done, "every run ended", timeout=WAIT_S)
            assert {row.status for row in fleet.rows()} == {"passed"}
            assert not [t for t in app.told if t[0] == "not answered"]
    finally:
        if isinstance(fleet, TeamFleet):
            fleet.close()
    if team is not None:
        # who answered is the database's role; what she was shown, and how long, in each run's chain
        assert one(team.url, "SELECT array_agg(DISTINCT answered_by) FROM cua_tui.requests") == ["alice"]
        for _task, run_id in team.runs:
            lines = (tmp_path / "runs" / run_id / "audit.jsonl").read_text().splitlines()
            (decided,) = [r for r in map(json.loads, lines) if r["kind"] == "decision" and r.get("queue")]
            asked = [r for r in map(json.loads, lines) if r["kind"] == "decision_requested"][-1]
            screens = [r["sha256"] for r in map(json.loads, lines) if r["kind"] == "screen"]
            assert decided["operator"] == "alice" and decided["shown_ms"] > 0, decided
            assert decided["screen"] in screens and asked["turn"] == decided["turn"]


@pytest.mark.pgserver
@pytest.mark.parametrize("seen", [True, False], ids=["seen-closing", "lost-the-race"])
async def test_a_request_answered_by_another_analyst_first_is_said_in_one_line(
    team: Team, seen: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bob answers the request on alice's panel; alice's n then either meets it closed (her screen was told)
    or loses the compare-and-set (it was not yet). Either way she is told in one line who answered what, and
    when; the request keeps bob's answer."""
    async with attached(team) as on:
        fleet, app, pilot, main = on.fleet, on.app, on.pilot, on.main
        if not seen:
            # her reader slow to see the queue change (a loaded machine, a far server): its view holds
            monkeypatch.setattr(fleet, "_read_requests", lambda conn, told: dict(fleet._items))
        shown = main.selected
        assert shown is not None
        with psycopg.connect(as_role(team.url, "bob"), autocommit=True) as conn:
            assert analyst.answer(conn, shown.ticket, Answer.APPROVE, how="human").won
        said = f"request {shown.ticket} was already answered: bob approved it at "
        if seen:
            # the panel still shows it, closed, saying who answered it and when: n has nothing to answer
            await until(pilot, lambda: said in (main.panel.closed or ""), "alice's panel saying who")
        else:
            await answer(pilot, "n")  # the reason's dialog
            await pilot.pause()
            await pilot.press("enter")
            await until(pilot, lambda: any(said in message for _, message in app.told), "alice told who")
            (title,) = [t for t, message in app.told if said in message]
            assert title == "not answered"
        assert one(team.url, "SELECT answer FROM cua_tui.requests WHERE id = %s", shown.ticket) == "approve"
    HeadlessAnalyst(team.url, team.fleet_id, "approve", lambda line: None).run()


@pytest.mark.pgserver
async def test_leaving_detaches_and_the_runs_go_on(team: Team) -> None:
    fleet = TeamFleet(as_role(team.url, "alice"), team.fleet_id, poll_s=0.1)
    app = App(fleet)
    async with app.run_test(size=SIZE) as pilot:
        main = fleet_screen(app)
        await until(pilot, lambda: len(main.items) == 2, "both runs asking")
        assert main.leave_warning() is None  # nothing ends when this analyst goes
        await pilot.press("q")
        await pilot.pause()
    fleet.close()
    # nothing was killed: both requests still open, the runs waiting on their worker
    assert one(team.url, "SELECT count(*) FROM cua_tui.requests WHERE answer IS NULL AND closed_at IS NULL") == 2
    HeadlessAnalyst(as_role(team.url, "bob"), team.fleet_id, "approve", lambda line: None).run()
    wait_for("every run passed", lambda: one(team.url, "SELECT bool_and(status = 'passed') FROM cua_tui.runs"))


@pytest.mark.pgserver
async def test_k_and_K_kill_runs_on_their_worker_each_recording_who_pressed_it(team: Team, tmp_path: Path) -> None:
    """k kills the selected run on the worker that runs it; K, once confirmed, every run of the fleet. Who
    pressed it is the database's role, in the row and in each run's sealed chain."""
    async with attached(team) as on:
        fleet, app, pilot, main = on.fleet, on.app, on.pilot, on.main
        first = main.selected
        assert first is not None
        await pilot.press("k")
        await until(pilot, lambda: fleet.row(first.task).status == "killed", "the selected run killed")
        assert one(team.url, "SELECT kill_by FROM cua_tui.runs WHERE id = %s", first.run_id) == "alice"
        await pilot.press("K")
        assert isinstance(app.screen, KillAllScreen)
        await pilot.press("y")
        await until(pilot, lambda: fleet.done, "every run ended", timeout=WAIT_S)
        assert {row.status for row in fleet.rows()} == {"killed"}
    team.thread.join(WAIT_S)
    for _task, run_id in team.runs:
        run_dir = tmp_path / "runs" / run_id
        assert verify_run(run_dir).intact
        reasons = [r.get("reason", "") for r in map(json.loads, (run_dir / "audit.jsonl").read_text().splitlines())]
        assert any("killed by alice (a team's kill switch)" in reason for reason in reasons), reasons


@pytest.mark.pgserver
async def test_enter_opens_a_runs_view_from_its_mirrored_lines_and_T_says_why_not(team: Team) -> None:
    async with attached(team) as on:
        app, pilot, main = on.app, on.pilot, on.main
        shown = main.selected
        assert shown is not None
        main.action_open_run()
        await until(pilot, lambda: isinstance(app.screen, RunScreen), "the run's view")
        view = app.screen
        assert isinstance(view, RunScreen)
        # the same panes as a local run: its pending request, its newest screen, from the database
        await until(pilot, lambda: view.pending is not None, "the run's pending request")
        assert view.view.screen is not None and view.view.screen.png is not None
        await pilot.press("T")
        await until(pilot, lambda: any(t == "takeover" for t, _ in app.told), "T said why not")
        assert [m for t, m in app.told if t == "takeover"] == [NO_TEAM_TAKEOVER]
        # y in the run's view answers the same row, as alice
        await answer(pilot, "y")
        answered = "SELECT answered_by FROM cua_tui.requests WHERE id = %s"
        await until(pilot, lambda: one(team.url, answered, shown.ticket) == "alice", "the view's y committed")
    HeadlessAnalyst(team.url, team.fleet_id, "approve", lambda line: None).run()


@pytest.mark.pgserver
def test_only_an_analyst_may_kill_and_a_queued_run_never_starts(pg_server: PgServer) -> None:
    url = ready(pg_server).new_database(TEMPLATE)
    done = submit(url, [spec("t0")], tasks_sha256="3" * 64, name="kill")
    with psycopg.connect(url, autocommit=True) as conn:
        # a login role of the cluster that is not in cua_tui_analyst (roles outlive a test's database)
        conn.execute("DO $$ BEGIN CREATE ROLE mallory LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        conn.execute("GRANT USAGE ON SCHEMA cua_tui TO mallory")
    with (
        psycopg.connect(as_role(url, "mallory"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT cua_tui.kill_runs(%s)", ([done.runs[0][1]],))
    with psycopg.connect(as_role(url, "bob"), autocommit=True) as conn:
        assert conn.execute("SELECT cua_tui.kill_runs(%s)", ([done.runs[0][1]],)).fetchone() == (1,)
    row = one(url, "SELECT array[state, status, kill_by, reason] FROM cua_tui.runs")
    assert row == ["ended", "killed", "bob", "killed by bob (a team's kill switch) before it started"]


async def test_an_unreachable_queue_is_said_on_the_header_never_with_its_password(tmp_path: Path) -> None:
    url = f"postgresql://alice:sekret@/queue?host={tmp_path}"  # a socket folder with no server in it
    fleet = TeamFleet(url, "fleet-x", poll_s=0.1)
    app = App(fleet)
    try:
        async with app.run_test(size=SIZE) as pilot:
            header = app.query_one("#fleet-header", TextLines)
            await until(pilot, lambda: "reconnecting to the queue" in header.plain, "the header saying it")
            assert "sekret" not in header.plain + fleet.link()
            asked = DecisionRequest("run-1", 1, 0, "c1", "action", "why")
            item = QueueItem(1, "t0", "run-1", asked, priority(asked, ""), 0.0, 0)
            assert fleet.answer(item, Answer.APPROVE).startswith("not answered: reconnecting")  # type: ignore[union-attr]
    finally:
        fleet.close()


@pytest.mark.pgserver
async def test_a_hostile_request_row_is_set_aside_unread_and_said_on_the_header(team: Team) -> None:
    wait_for("both runs asking", lambda: one(team.url, "SELECT count(*) FROM cua_tui.requests") == 2)
    run_id = team.runs[0][1]
    with psycopg.connect(team.url, autocommit=True) as conn:  # someone with the worker's rights
        hostile = {"kind": "action", "run": run_id, "turn": 9, "index": 0, "call_id": "x", "reason": "[red]hi\x1b[2J",
                   "action": {"kind": "type", "text_len": 3, "text_sha256": "0" * 64}}  # fmt: skip
        conn.execute(
            "INSERT INTO cua_tui.requests (run_id, fleet_id, turn, index, kind, seq, body, content_sha256, tier, "
            "texts) VALUES (%s, %s, 9, 0, 'action', 999, %s, %s, 1, %s)",
            (run_id, team.fleet_id, Jsonb(hostile), "0" * 64, Jsonb({"action": "abc"})),
        )
    fleet = TeamFleet(as_role(team.url, "alice"), team.fleet_id, poll_s=0.1)
    app = App(fleet)
    try:
        async with app.run_test(size=SIZE) as pilot:
            main = fleet_screen(app)
            await until(pilot, lambda: len(main.items) == 2 and bool(fleet.unreadable), "the two good ones shown")
            (line,) = fleet.unreadable.values()
            assert "does not match the record's length and SHA-256; refused" in line
            assert fleet.link().startswith("1 request set aside unread: request ")
            header = app.query_one("#fleet-header", TextLines)
            await until(pilot, lambda: "set aside unread" in header.plain, "the header saying it")
    finally:
        fleet.close()
    HeadlessAnalyst(team.url, team.fleet_id, "approve", lambda line: None).run()


def audit_of(tmp_path: Path, run_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "runs" / run_id / "audit.jsonl").read_text().splitlines()]


@pytest.mark.pgserver
async def test_a_grants_its_scope_and_e_runs_the_edit_on_the_runs_worker(pg_server: PgServer, tmp_path: Path) -> None:
    """a travels in the answer to the worker, whose run grants the scope (its next typing in the field is
    approved by the grant, naming alice); e in a run's view travels as the action to run, checked again by the
    run, its text held by the row only until the worker read it."""
    with team_of(pg_server, tmp_path, [spec("granted", TWICE), spec("edited")]) as team:
        fleet = TeamFleet(as_role(team.url, "alice"), team.fleet_id, poll_s=0.1)
        app = App(fleet)
        try:
            async with app.run_test(size=SIZE) as pilot:
                main = fleet_screen(app)
                await until(pilot, lambda: len(main.items) == 2 and main.selected is not None, "both runs asking")
                # the cursor to granted's request: a key at a time, each after the screen took the last (a key
                # pressed while the queue is rebuilt under load moved nothing once)
                for _ in range(20):
                    tasks = [item.task for item in main.items]
                    if main.selected is not None and main.selected.task == "granted":
                        break
                    if main.selected in main.items and "granted" in tasks:
                        below = tasks.index("granted") > main.items.index(main.selected)
                        await pilot.press("down" if below else "up")
                    await pilot.pause(0.2)
                await until(pilot, lambda: main.selected is not None and main.selected.task == "granted", "granted")
                await answer(pilot, "a")
                await until(pilot, lambda: fleet.row("granted").ended, "the granted run to end", timeout=WAIT_S)
                await until(pilot, lambda: [i.task for i in main.items] == ["edited"], "the other request alone")
                await pilot.press("enter")
                live = app.screen
                assert isinstance(live, RunScreen)
                await until(pilot, lambda: live.pending is not None and possible(app, "edit") is True, "e offered")
                await answer(pilot, "e")
                editor = live.editor
                assert editor is not None
                field = editor.query_one(Input)
                assert field.value == "cua-tui verified"
                field.value = "cua-tui edited"
                await pilot.pause()
                await pilot.press("enter")
                await until(pilot, lambda: fleet.row("edited").ended, "the edited run to end", timeout=WAIT_S)
        finally:
            fleet.close()
        runs = dict(team.runs)
        granted = audit_of(tmp_path, runs["granted"])
        decided = [r for r in granted if r["kind"] == "decision" and r["subject"] == "action" and r["by"] != "policy"]
        assert decided[0]["operator"] == "alice" and decided[0]["decision"] == "approve"
        (added,) = [r for r in granted if r["kind"] == "grant"]
        assert added["by"] == "alice" and added["scope"] == "typing"
        assert decided[1]["by"] == f"grant #{added['grant']} (given by alice)"
        assert sum(1 for r in granted if r["kind"] == "executing" and r["summary"].startswith("type ")) == 2
        edited = audit_of(tmp_path, runs["edited"])
        (decision,) = [r for r in edited if r["kind"] == "decision" and r.get("queue")]
        text = "cua-tui edited"
        assert decision["operator"] == "alice" and decision["edited"]["ran"]["text_len"] == len(text)
        assert decision["edited"]["ran"]["text_sha256"] == hashlib.sha256(text.encode()).hexdigest()
        typed = [r["summary"] for r in edited if r["kind"] == "executing" and r["summary"].startswith("type ")]
        assert typed == [f"type {len(text)} characters"]
        # the database holds the edit as its length and SHA-256 alone once the worker read it
        row = one(team.url, "SELECT array[edit->>'text_len', edit_text] FROM cua_tui.requests WHERE edit IS NOT NULL")
        assert row == [str(len(text)), None]
        assert one(team.url, "SELECT count(*) FROM cua_tui.events WHERE position(%s in line) > 0", text.encode()) == 0


@pytest.mark.pgserver
async def test_a_request_on_another_analysts_panel_reads_so_sorts_after_and_still_answers(team: Team) -> None:
    bob = TeamFleet(as_role(team.url, "bob"), team.fleet_id, poll_s=0.05)
    bob.start()
    try:
        async with attached(team) as on:
            app, pilot, main = on.app, on.pilot, on.main
            first = main.selected
            (second,) = [i for i in main.items if i is not first]
            assert first is not None
            # alice's panel shows it: bob sees it read by her, within a second
            wait_for("bob to see alice's mark", lambda: bob.readers().get(first.ticket) == ("alice",), 5)
            bob.looking([first.ticket])  # bob opens it too
            await until(pilot, lambda: [i.ticket for i in main.items] == [second.ticket, first.ticket], "it goes last")
            why = app.query_one("#queue-why", TextLines)
            await until(pilot, lambda: "read by bob (on their panel now; you may still answer)" in why.plain, "said")
            row = app.query_one("#queue", RowTable).get_row(str(first.ticket))
            assert "read by bob · t1" in str(row[4])
            assert main.selected is first  # the cursor stays with what the panel shows
            await answer(pilot, "y")  # a mark never stops an answer
            answered = "SELECT answered_by FROM cua_tui.requests WHERE id = %s"
            await until(pilot, lambda: one(team.url, answered, first.ticket) == "alice", "alice's y committed")
            await until(pilot, lambda: main.selected is second, "the next request on her panel")
            wait_for("bob to see her move", lambda: bob.readers() == {second.ticket: ("alice",)}, 5)
            await pilot.press("q")
        # she left: her marks go with her, at once
        wait_for("alice's marks to lapse", lambda: bob.readers() == {}, 3)
    finally:
        bob.close()
    HeadlessAnalyst(team.url, team.fleet_id, "approve", lambda line: None).run()
