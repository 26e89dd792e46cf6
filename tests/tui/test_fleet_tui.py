"""The fleet TUI (issue 13, point 2): real fleets of real runs on the sim desktop, built as tests/test_fleet.py
builds them, driven with Pilot. The queue's order as shown, answers to the selected request only, a stale
answer refused with a message, per-run kill, kill-all after its confirmation, a crashing run shown as
error while the others go on, the full live view of one run (Enter, Esc), and leaving kills and seals all."""

from __future__ import annotations

import hashlib
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fleet_cases import SAFETY, SAVE_KEY, opts
from pilot_helpers import answer, fleet_screen, plain, possible, quick_clock, until
from textual.widgets import Input, Static

from cua_tui.build import RunOptions
from cua_tui.config import Settings
from cua_tui.core import events as ev
from cua_tui.core.audit import verify_run
from cua_tui.core.fleet_queue import QueueItem, RunRow, RunState
from cua_tui.core.run_view import RunView
from cua_tui.fleet_runner import Fleet, FleetTask
from cua_tui.tui.app import CuaApp
from cua_tui.tui.audit_pane import AuditPane
from cua_tui.tui.batch import BatchPane
from cua_tui.tui.decision_panel import DecisionPanel
from cua_tui.tui.desktop_view import DesktopView
from cua_tui.tui.dialogs import RejectReason
from cua_tui.tui.fleet_parts import KillAllScreen, run_info
from cua_tui.tui.fleet_screen import FleetScreen
from cua_tui.tui.fleet_tables import tail_path
from cua_tui.tui.goal import GoalBar
from cua_tui.tui.row_table import RowTable
from cua_tui.tui.run_screen import RunScreen
from cua_tui.tui.status import StatusBar
from cua_tui.tui.text_lines import TextLines

pytestmark = pytest.mark.timeout(90)

SIZE = (200, 50)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")})


def fleet_of(tmp_path: Path, tasks: dict[str, RunOptions], concurrency: int = 8) -> Fleet:
    """A fleet not started yet: the App starts it (after subscribing)."""
    return Fleet(
        [FleetTask(name, options) for name, options in tasks.items()],
        runs_dir=tmp_path / "runs",
        concurrency=concurrency,
        tasks_sha256="ab" * 32,
    )


class App(CuaApp):
    """The fleet TUI, keeping what it told the analyst."""

    # grouping off: these tests answer one request at a time (tests/tui/test_fleet_groups.py groups them)
    def __init__(self, fleet: Fleet, *, grouping: bool = False, **kwargs: Any) -> None:
        screen = partial(FleetScreen, fleet=fleet, grouping=grouping)
        super().__init__(screen, **{"guard_clock": quick_clock, **kwargs})
        self.told: list[tuple[str, str]] = []

    def notify(self, message: str, *, title: str = "", severity: Any = "information", **kw: Any) -> None:
        self.told.append((title, message))
        super().notify(message, title=title, severity=severity, **kw)


def audit(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (Path(path) / "audit.jsonl").read_text().splitlines()]


def human_decisions(path: str) -> list[tuple[str, str]]:
    return [(r["decision"], r["note"]) for r in audit(path) if r["kind"] == "decision" and r["by"] != "policy"]


def sealed_intact(path: str) -> bool:
    report = verify_run(path)
    return report.intact and report.sealed


def queue_rows(app: CuaApp) -> list[list[str]]:
    table = app.query_one("#queue", RowTable)
    return [[cell.plain for cell in table.get_row_at(i)] for i in range(table.row_count)]


def run_cells(app: CuaApp, task: str) -> dict[str, str]:
    table = app.query_one("#runs", RowTable)
    return dict(zip(table.labels, [cell.plain for cell in table.get_row(task)], strict=True))


async def until_queued(pilot: Any, app: CuaApp, n: int) -> None:
    main = fleet_screen(app)
    await until(pilot, lambda: len(main.items) >= n and main.selected is not None, f"{n} requests in the queue")
    await pilot.pause()


async def select_pending(pilot: Any, app: CuaApp) -> None:
    """The queue's cursor on a pending request. The selection stays on a request that closed (a killed run's)
    until it moves, and y would be refused there: by design, never applied to another request."""
    main = fleet_screen(app)
    pending = {str(item.ticket) for item in main.items}
    if main.selected is not None and str(main.selected.ticket) in pending:
        return
    queue = app.query_one("#queue", RowTable)
    queue.move_cursor(row=next(i for i, key in enumerate(queue.keys) if key in pending))
    await until(
        pilot,
        lambda: main.selected is not None and str(main.selected.ticket) in pending,
        "a pending request selected",
    )


async def approve_all(pilot: Any, app: CuaApp) -> None:
    """y to each queued request, each once the queue shows what the one before did (a loaded machine is slow:
    a y pressed before the selection moved on would meet the request just answered, and be refused)."""
    main = fleet_screen(app)
    for left in range(len(main.items) - 1, -1, -1):
        await select_pending(pilot, app)
        await answer(pilot, "y")

        def answered(left: int = left) -> bool:
            return len(main.items) == left

        await until(pilot, answered, f"{left} requests left in the queue")
        if left:
            await until(pilot, lambda: main.selected is not None, "the next request selected")


async def until_done(pilot: Any, app: CuaApp, fleet: Fleet) -> None:
    main = fleet_screen(app)
    await until(pilot, lambda: fleet.done and main.finished, "every run to end")
    await pilot.pause(0.1)


# ---------------------------------------------------------------------------------------------------
async def test_the_queue_shows_safety_checks_first_then_sending_then_the_rest(
    tmp_path: Path, settings: Settings
) -> None:
    policy = tmp_path / "save.toml"
    policy.write_text('[keys]\nconfirm = ["Return", "ctrl+s"]\n')
    fleet = fleet_of(
        tmp_path,
        {
            "other": opts(settings, SAVE_KEY, policy_path=policy),
            "typing": opts(settings),
            "safety": opts(settings, SAFETY),
        },
    )
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_queued(pilot, app, 3)
        rows = queue_rows(app)
        # position, priority, rule, task: in the runner's order, the rule behind each place shown
        assert [r[:4] for r in rows] == [
            ["1", "safety check", "safety_check", "safety"],
            ["2", "transmission", "actions.type", "typing"],
            ["3", "other", "keys.confirm:ctrl+s", "other"],
        ]
        assert "t1 #2 type" in rows[1][4] and "ctrl+s" in rows[2][4]
        # The selected request (the first) in the single run's decision view: the task line, the checks.
        await pilot.press("ctrl+home")
        await until(pilot, lambda: main.selected is not None and main.selected.task == "safety", "the first selected")
        panel = plain(app.query_one(DecisionPanel))
        assert "DECISION NEEDED" in panel and "task    fill the form" in panel and "malicious_instructions" in panel
        why = app.query_one("#queue-why", TextLines).plain
        assert "SAFETY CHECK" in why and "the model raised safety checks: first" in why
        await pilot.press("down")
        await until(pilot, lambda: main.selected is not None and main.selected.task == "typing", "the typing selected")
        panel = plain(app.query_one(DecisionPanel))
        assert "cua-tui verified" in panel and "goes to" in panel  # the typed text in full, and where it goes
        assert "typing can send data out: second" in app.query_one("#queue-why", TextLines).plain
        assert run_cells(app, "typing")["state"] == RunState.WAITING


async def test_y_n_and_a_answer_the_selected_request_only(tmp_path: Path, settings: Settings) -> None:
    fleet = fleet_of(tmp_path, {"approve": opts(settings), "reject": opts(settings), "scope": opts(settings)})
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_queued(pilot, app, 3)

        async def select(task: str) -> None:
            table = app.query_one("#queue", RowTable)
            ticket = next(str(item.ticket) for item in main.items if item.task == task)
            table.move_cursor(row=table.keys.index(ticket))  # the table's rows, not the queue's: see select_pending
            await until(pilot, lambda: main.selected is not None and main.selected.task == task, f"{task} selected")

        await select("reject")
        await answer(pilot, "n")
        assert isinstance(app.screen, RejectReason)
        app.screen.query_one(Input).value = "wrong field"
        await pilot.press("enter")
        await until(pilot, lambda: fleet.row("reject").ended, "the rejected run to end")

        await select("scope")
        assert possible(app, "approve_scope") is True  # typing has a scope: a is offered
        await answer(pilot, "a")
        await until(pilot, lambda: all(i.task != "scope" for i in fleet.queue()), "the scoped approval taken")

        await select("approve")
        await answer(pilot, "y")
        await until(pilot, lambda: fleet.row("approve").ended, "the approved run's typing to go on")
        # each run's next request (the Verify click asks nothing; the form is filled) - then every run ends
        await until_done(pilot, app, fleet)
        await until(pilot, lambda: app.query_one("#queue-why", TextLines).plain == "Every run ended.", "the end said")
        assert app.query_one(DesktopView).border_title == "Desktop"  # no run's title left on an empty pane
    rows = {r.task: r for r in fleet.rows()}
    assert human_decisions(rows["reject"].path) == [("reject", "wrong field")]
    assert human_decisions(rows["approve"].path) == [("approve", "")]
    assert human_decisions(rows["scope"].path) == [("approve", "")]
    assert any(r["kind"] == "grant" for r in audit(rows["scope"].path))
    assert not any(r["kind"] == "grant" for r in audit(rows["approve"].path))
    assert (rows["approve"].status, rows["scope"].status, rows["reject"].status) == ("passed", "passed", "failed")
    assert all(sealed_intact(r.path) for r in rows.values())


async def test_an_answer_to_a_request_whose_run_was_killed_is_refused_with_a_message(
    tmp_path: Path, settings: Settings
) -> None:
    fleet = fleet_of(tmp_path, {"a": opts(settings), "b": opts(settings)})
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_queued(pilot, app, 2)
        stale = main.selected
        assert stale is not None
        other = next(i for i in main.items if i.ticket != stale.ticket)
        await pilot.press("k")  # the selected request's run
        await until(pilot, lambda: stale.ticket not in main.pending_tickets, "the killed run's request to close")
        await pilot.pause()
        # The closed request stays selected, marked, so that y is not taken for the next one.
        assert main.selected is stale
        assert "CLOSED" in app.query_one("#queue-why", TextLines).plain
        assert [r[0] for r in queue_rows(app)].count("-") == 1
        await answer(pilot, "y")
        await until(pilot, lambda: any(t == "answer refused" for t, _ in app.told), "the refusal said")
        message = next(m for t, m in app.told if t == "answer refused")
        assert "no longer pending: run killed" in message and stale.task in message
        assert [i.ticket for i in fleet.queue()] == [other.ticket]  # the other request untouched
        assert human_decisions(fleet.row(other.task).path) == []
        # moving off the closed row drops it; y then answers the other run's request
        await pilot.press("down")
        await until(pilot, lambda: main.selected is not None and main.selected.ticket == other.ticket, "the other")
        assert len(queue_rows(app)) == 1
        await answer(pilot, "y")
        await until(pilot, lambda: fleet.row(other.task).ended, "the other run to end")
    assert fleet.row(stale.task).status == "killed" and fleet.row(other.task).status == "passed"
    assert human_decisions(fleet.row(stale.task).path) == []
    assert all(sealed_intact(r.path) for r in fleet.rows())


async def test_the_panel_names_the_run_asking_and_the_runs_table_follows_the_selection(
    tmp_path: Path, settings: Settings
) -> None:
    """Issue 22, point 8: three runs of the same task text; only the panel's run line says which one asks,
    and selecting a request in the queue puts the runs table's cursor on its run."""
    fleet = fleet_of(tmp_path, {name: opts(settings) for name in ("first", "second", "third")})
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_queued(pilot, app, 3)
        queue, runs = app.query_one("#queue", RowTable), app.query_one("#runs", RowTable)
        for row in (2, 0, 1):
            queue.move_cursor(row=row)
            item = next(i for i in main.items if str(i.ticket) == queue.keys[row])

            def chosen(item: QueueItem = item) -> bool:
                return main.selected is item

            await until(pilot, chosen, f"{item.task} selected")
            await pilot.pause()
            panel = plain(app.query_one(DecisionPanel)).splitlines()
            assert panel[0].startswith(" DECISION NEEDED") and "task    fill the form" in panel
            assert f"run     {item.task} · run {item.run_id}" in panel
            assert item.run_id == fleet.row(item.task).run_id
            assert runs.cursor_key == item.task  # the run highlighted is the one asking
            assert item.task in app.query_one("#run-detail", TextLines).plain
        # the runs table keeps its own cursor while the analyst moves it there
        runs.focus()
        selected = main.selected
        assert selected is not None
        other = next(i for i, key in enumerate(runs.keys) if key != selected.task)
        runs.move_cursor(row=other)
        await pilot.pause()
        assert runs.cursor_key != selected.task and main.selected is selected
        await pilot.press("K")
        await pilot.press("y")
        await until_done(pilot, app, fleet)


async def test_a_request_whose_run_was_killed_reads_closed_and_offers_no_answer(
    tmp_path: Path, settings: Settings
) -> None:
    fleet = fleet_of(tmp_path, {"a": opts(settings), "b": opts(settings)})
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_queued(pilot, app, 2)
        stale = main.selected
        assert stale is not None
        panel = app.query_one(DecisionPanel)
        assert "y approve" in plain(panel) and "n reject" in plain(panel)
        await pilot.press("k")
        await until(pilot, lambda: stale.ticket not in main.pending_tickets, "the killed run's request to close")
        await until(pilot, lambda: "CLOSED" in plain(panel), "the panel to say closed")
        text = plain(panel)
        assert text.startswith(f" CLOSED · turn {stale.request.turn} · action {stale.request.index + 1}")
        assert "DECISION NEEDED" not in text
        assert "y approve" not in text and "n reject" not in text and "approve this and all" not in text
        assert f"run     {stale.task} · run {stale.run_id}" in text
        assert "closed  run killed" in text, text  # why, as the queue's line says it
        assert "cua-tui verified" in text  # what it was, still readable
        assert panel.has_class("closed")
        # moving on to the other request: it reads as a decision again
        await pilot.press("down")
        await until(pilot, lambda: main.selected is not None and main.selected.ticket != stale.ticket, "the other")
        await pilot.pause()
        assert plain(panel).startswith(" DECISION NEEDED") and "y approve" in plain(panel)
        assert not panel.has_class("closed")
        await pilot.press("K")
        await pilot.press("y")
        await until_done(pilot, app, fleet)


def test_a_long_path_keeps_its_last_folders() -> None:
    path = "/tmp/cua-scene-fleet-7bo4h234/runs/20250301-101500-0000f1"
    assert tail_path(path, 80) == path
    assert tail_path(path, 40) == "…/runs/20250301-101500-0000f1"
    assert tail_path(path, 10) == "…/20250301-101500-0000f1"  # the run's own folder, even cut short


async def test_k_kills_the_selected_run_and_the_others_go_on(tmp_path: Path, settings: Settings) -> None:
    fleet = fleet_of(tmp_path, {"a": opts(settings), "b": opts(settings), "c": opts(settings)})
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_queued(pilot, app, 3)
        runs = app.query_one("#runs", RowTable)
        runs.focus()
        runs.move_cursor(row=1)  # the run table has the focus: k kills its row
        await pilot.pause()
        await pilot.press("k")
        await until(pilot, lambda: run_cells(app, "b")["status"] == "killed", "b shown killed")
        assert run_cells(app, "b")["record"] == "intact"
        assert {i.task for i in main.items} == {"a", "c"}
        assert [run_cells(app, t)["state"] for t in ("a", "c")] == [RunState.WAITING] * 2
        app.query_one("#queue", RowTable).focus()
        await approve_all(pilot, app)
        await until_done(pilot, app, fleet)
        assert [run_cells(app, t)["status"] for t in "abc"] == ["passed", "killed", "passed"]
        assert run_cells(app, "a")["checked in"] == "controller"


async def test_K_kills_every_run_after_its_confirmation(tmp_path: Path, settings: Settings) -> None:
    fleet = fleet_of(tmp_path, {f"t{i}": opts(settings) for i in range(4)}, concurrency=2)
    app = App(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await until_queued(pilot, app, 2)
        await pilot.press("K")
        assert isinstance(app.screen, KillAllScreen)
        assert possible(app, "approve") is False  # nothing is answered from under the dialog
        await pilot.press("n")  # changed their mind: nothing is killed
        await pilot.pause(0.2)
        assert not isinstance(app.screen, KillAllScreen) and not any(r.ended for r in fleet.rows())
        await pilot.press("K")
        await pilot.press("y")
        await until_done(pilot, app, fleet)
        assert [run_cells(app, f"t{i}")["status"] for i in range(4)] == ["killed"] * 4
        assert "every run ended" in app.query_one("#fleet-header", TextLines).plain
    rows = fleet.rows()
    assert all(sealed_intact(r.path) for r in rows[:2]) and [r.path for r in rows[2:]] == ["", ""]


class RaisingAgent:
    name = "raising"
    model = None

    def start(self, task: str, frame: Any) -> Any:
        raise RuntimeError("the adapter broke")

    def next_turn(self, results: Any, frame: Any, note: str = "") -> Any:
        raise RuntimeError("unreachable")

    def cancel(self) -> None:
        pass


async def test_a_crashing_run_is_shown_as_error_while_the_others_go_on(tmp_path: Path, settings: Settings) -> None:
    fleet = fleet_of(
        tmp_path,
        {
            "ok": opts(settings),
            "raises": opts(settings, script=None, agent_impl=RaisingAgent()),
            "ok-2": opts(settings),
        },
    )
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: run_cells(app, "raises")["status"] == "error", "the crash shown")
        await until_queued(pilot, app, 2)
        runs = app.query_one("#runs", RowTable)
        runs.move_cursor(row=1)
        await until(pilot, lambda: "the adapter broke" in app.query_one("#run-why", TextLines).plain, "why")
        assert {i.task for i in main.items} == {"ok", "ok-2"}  # the others wait for their decision
        await approve_all(pilot, app)
        await until_done(pilot, app, fleet)
        assert [run_cells(app, t)["status"] for t in ("ok", "raises", "ok-2")] == ["passed", "error", "passed"]
        assert run_cells(app, "raises")["record"] == "intact"
        runs.move_cursor(row=0)  # a passed run's detail says who vouched for its verdict: the controller
        await until(pilot, lambda: "checked in the controller" in app.query_one("#run-why", TextLines).plain, "who")


async def test_enter_opens_the_runs_live_view_fed_by_watch_and_esc_returns(tmp_path: Path, settings: Settings) -> None:
    fleet = fleet_of(tmp_path, {"a": opts(settings), "b": opts(settings)})
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_queued(pilot, app, 2)
        task = main.selected.task if main.selected else ""
        await pilot.press("enter")
        assert isinstance(app.screen, RunScreen) and app.screen.run_task == task
        live = app.screen
        await pilot.pause(0.1)
        # the single-run panes from the run's view so far: the goal, the batch, the pending request, the counters
        goal = plain(live.query_one(GoalBar))
        assert "fill the form" in goal and f"on the sim desktop (fleet task {task})" in goal
        assert "cua-tui verified" in plain(live.query_one(DecisionPanel))
        assert len(live.query_one(BatchPane).rows) == 3
        assert "turn 1/" in plain(live.query_one(StatusBar))
        # the audit pane starts with the events before the view opened, read back from the run's own log
        audit = live.query_one(AuditPane)
        await until(pilot, lambda: live._backlog is None, "the earlier audit events read back")
        before = [entry.seq for entry in audit.entries()]
        assert before == list(range(live.view.seq + 1)) and audit.entries()[0].kind == "run_started"
        await answer(pilot, "y")  # answers this run's pending request
        await until(pilot, lambda: live.view.ended is not None, "the live view to see the run end")
        assert "status: passed" in plain(live.query_one(StatusBar))  # every later event, through watch
        assert [r.state for r in live.query_one(BatchPane).rows.values()] == ["executed"] * 3
        # every event of the run once, in the chain's order: what its audit log holds, line for line
        lines = (Path(fleet.row(task).path) / "audit.jsonl").read_bytes().splitlines()
        await until(pilot, lambda: len(audit.entries()) == len(lines), "every audit event in the pane")
        entries = audit.entries()
        assert [e.seq for e in entries] == list(range(len(lines)))
        assert [e.head for e in entries] == [hashlib.sha256(line).hexdigest() for line in lines]
        assert "sealed" in plain(audit.query_one("#chain", Static))
        await pilot.press("escape")
        assert not isinstance(app.screen, RunScreen)
        assert [i.task for i in main.items] == [t for t in ("a", "b") if t != task]
    assert fleet.row(task).status == "passed"


async def test_leaving_kills_every_run_and_seals_it(tmp_path: Path, settings: Settings) -> None:
    fleet = fleet_of(tmp_path, {"a": opts(settings), "b": opts(settings), "later": opts(settings)}, concurrency=2)
    app = App(fleet)
    async with app.run_test(size=SIZE) as pilot:
        await until_queued(pilot, app, 2)
        await pilot.press("q")  # the first q only says what leaving means
        await pilot.pause(0.2)
        assert app.is_running and not any(r.ended for r in fleet.rows())
        assert any(t == "leave?" for t, _ in app.told)
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "the TUI to close once every run is sealed")
    assert fleet.done
    rows = {r.task: r for r in fleet.rows()}
    assert {r.status for r in rows.values()} == {"killed"}
    assert all(sealed_intact(rows[t].path) for t in ("a", "b")) and rows["later"].path == ""
    assert all("left the fleet TUI" in rows[t].reason for t in ("a", "b"))


def test_the_live_views_goal_names_the_tasks_lab_or_url_and_its_hosts() -> None:
    started = ev.RunStarted("fill it", "local", "script", None, "1024x720", "default", "cd" * 32, {"max_turns": 5})
    view = RunView()
    view.apply(ev.Stamped(0, "ef" * 32, started))
    row = RunRow("t1", "local", target="lab form", allowed=("example.org",), run_id="r1")
    info = run_info(row, view)
    assert (info.task, info.target, info.allowed, info.max_turns) == (
        "fill it",
        "lab form (fleet task t1)",
        ("example.org",),
        5,
    )
    assert run_info(RunRow("t2", "local", target="https://example.org/"), RunView()).target == "https://example.org/"
    assert run_info(RunRow("t3", "sim"), view).target == "the local desktop (fleet task t3)"


async def test_a_click_on_a_run_or_a_double_click_on_a_request_opens_the_live_view(
    tmp_path: Path, settings: Settings
) -> None:
    fleet = fleet_of(tmp_path, {"a": opts(settings), "b": opts(settings)})
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_queued(pilot, app, 2)
        runs = app.query_one("#runs", RowTable)
        await pilot.click("#runs", offset=(3, 3))  # the border, the header, then the rows: b is line 3
        await until(pilot, lambda: runs.cursor_key == "b" and runs.has_focus, "the clicked run under the cursor")
        assert "b" in app.query_one("#run-detail", TextLines).plain
        await pilot.click("#runs", offset=(3, 3))  # a second click on it opens it
        await until(pilot, lambda: isinstance(app.screen, RunScreen), "the run's live view")
        assert isinstance(app.screen, RunScreen) and app.screen.run_task == "b"
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, RunScreen), "back to the fleet")
        first = main.items[0].task
        await pilot.click("#queue", offset=(3, 2), times=2)  # a double click on the first request
        await until(pilot, lambda: isinstance(app.screen, RunScreen), "the request's run's live view")
        assert isinstance(app.screen, RunScreen) and app.screen.run_task == first
        await pilot.press("escape")
        await approve_all(pilot, app)
        await until_done(pilot, app, fleet)


async def test_a_fleet_that_ended_before_the_tui_listened_says_so_and_q_quits(
    tmp_path: Path, settings: Settings
) -> None:
    """run_fleet_tui starts the fleet before the App subscribes: a fleet whose every task failed to build
    has ended by then, and the TUI must still know (the reason in full, q leaves at once)."""
    fleet = fleet_of(tmp_path, {"unbuildable": opts(settings, lab="form")})  # sim hosts no lab
    fleet.start()
    assert fleet.wait(15)
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.finished, "the TUI to know the fleet ended")
        header = app.query_one("#fleet-header", TextLines).plain
        assert "1 run: " in header and "every run ended: q quits" in header
        assert "need a desktop with a browser" in app.query_one("#run-why", TextLines).plain
        assert app.query_one("#queue-why", TextLines).plain == "Every run ended."
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "q to quit at once")


async def test_e_edits_in_the_runs_view_for_that_run_only(tmp_path: Path, settings: Settings) -> None:
    """Issue 24, point 5: the queue's own panel offers no e; the view of a run opened from it does, and its
    edit reaches that run alone (the other's request stays in the queue)."""
    fleet = fleet_of(tmp_path, {"a": opts(settings), "b": opts(settings)})
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_queued(pilot, app, 2)
        assert not possible(app, "edit")
        task = main.selected.task if main.selected else ""
        await pilot.press("enter")
        live = app.screen
        assert isinstance(live, RunScreen) and live.run_task == task
        await until(pilot, lambda: live.pending is not None, "the run's pending request in its view")
        await answer(pilot, "e")
        editor = live.editor
        assert editor is not None
        field = editor.query_one(Input)
        assert field.value == "cua-tui verified"
        field.value = "cua-tui verified!"
        await pilot.pause()
        await pilot.press("enter")
        await until(pilot, lambda: live.view.ended is not None, "the edited run to end")
        await pilot.press("escape")
        other = "b" if task == "a" else "a"
        assert [i.task for i in main.items] == [other]
        (decision,) = [r for r in audit(fleet.row(task).path) if r["kind"] == "decision" and r["by"] != "policy"]
        assert decision["edited"]["ran"]["text_len"] == 17
        await approve_all(pilot, app)
        await until_done(pilot, app, fleet)
    assert [r for r in audit(fleet.row(other).path) if r["kind"] == "decision" and r.get("edited")] == []


async def test_t_takes_over_one_run_of_the_fleet_and_the_others_go_on(tmp_path: Path, settings: Settings) -> None:
    """Issue 24, point 5: a takeover from a run's view pauses that run alone: its request leaves the queue
    saying so, its row reads taken, and another run's request is answered meanwhile."""
    from cua_tui.core.fleet_queue import RequestClosed, RunState
    from cua_tui.fleet_runner import TAKEN_OVER

    fleet = fleet_of(tmp_path, {"a": opts(settings), "b": opts(settings)})
    closed: list[RequestClosed] = []
    fleet.subscribe(lambda event: closed.append(event) if isinstance(event, RequestClosed) else None)
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_queued(pilot, app, 2)
        task = main.selected.task if main.selected else ""
        other = "b" if task == "a" else "a"
        await pilot.press("enter")
        live = app.screen
        assert isinstance(live, RunScreen)
        await until(pilot, lambda: live.pending is not None, "the run's request in its view")
        await pilot.press("T")
        await until(pilot, lambda: live.view.takeover is not None, "the run taken over")
        assert fleet.row(task).state == RunState.TAKEN
        await pilot.press("escape")
        await until(pilot, lambda: [i.task for i in main.items] == [other], "only the other run's request")
        assert [(c.item.task, c.why) for c in closed] == [(task, TAKEN_OVER)]
        await approve_all(pilot, app)  # the other run goes on
        await until(pilot, lambda: fleet.row(other).status == "passed", "the other run to pass")
        assert fleet.row(task).state == RunState.TAKEN and not fleet.row(task).ended
        desk = fleet.desk(task)
        assert desk is not None and desk.taken_over
        desk.hand_back()
        await until_done(pilot, app, fleet)
    records = audit(fleet.row(task).path)
    first = next(r for r in records if r["kind"] == "decision" and r["by"] != "policy")
    assert first["decision"] == "reject" and "took control" in first["note"]
    assert [r["kind"] for r in records].count("takeover_ended") == 1
