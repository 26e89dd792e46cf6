"""Deadlines in the TUI and the fleet (issue 25, point 2): the panel counts down the seconds left, the
fleet queue shows them, and at the deadline the decision closes rejected by the deadline (never approved),
recorded so. Live runs on the sim desktop through the TUI's handshake."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from fleet_cases import opts
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import fleet_screen, live_app, plain, run_screen, sim_run, until, until_ended
from test_fleet_tui import App, audit, fleet_of, queue_rows, until_queued

from cua_tui.build import RunOptions, build_run
from cua_tui.config import Settings
from cua_tui.core.supervisor import deadline_message
from cua_tui.desktops.sim import SimDesktop

TYPING = [{"actions": [{"type": "click", "button": "left", "x": 250, "y": 182}, {"type": "type", "text": "x"}]}]


async def test_the_panel_counts_down_and_the_deadline_rejects(tmp_path: Path) -> None:
    run = sim_run(tmp_path, TYPING, decision_timeout=3)
    app = live_app(run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = run_screen(app)
        await until(pilot, lambda: screen.pending is not None, "the decision")
        await until(pilot, lambda: "deadline rejected in" in plain(screen.panel), "the countdown")
        first = plain(screen.panel)
        await until(pilot, lambda: plain(screen.panel) != first or screen.pending is None, "a second counted down")
        await until_ended(pilot, app)
    records = [json.loads(line) for line in (run.supervisor.rundir.path / "audit.jsonl").read_text().splitlines()]
    (decided,) = [r for r in records if r["kind"] == "decision" and r["by"] != "policy"]
    assert (decided["decision"], decided["by"], decided["operator"]) == ("reject", "deadline (3 s)", "")
    (asked,) = [r for r in records if r["kind"] == "decision_requested"]
    assert asked["deadline_s"] == 3
    outcome = [r for r in records if r["kind"] == "outcome"][-1]
    assert outcome["message"] == deadline_message(3)


async def test_the_fleet_queue_shows_the_seconds_left_and_the_deadline_closes_each(tmp_path: Path) -> None:
    settings = Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")})
    short = dataclasses.replace(opts(settings), decision_timeout=3)
    fleet = fleet_of(tmp_path, {"a": short, "b": short})
    app = App(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=(200, 50)) as pilot:
        await until_queued(pilot, app, 2)
        assert all(row[-1].startswith("⏱") for row in queue_rows(app)), queue_rows(app)
        assert "rejected in" in plain(main.panel)
        await until(pilot, lambda: fleet.done and main.finished, "both runs to end on their deadlines", 60)
    for task in ("a", "b"):
        decided = [r for r in audit(fleet.row(task).path) if r["kind"] == "decision" and r["by"] != "policy"]
        assert next((r["decision"], r["by"]) for r in decided) == ("reject", "deadline (3 s)")


def budget_policy(tmp_path: Path) -> Path:
    from cua_tui.core.policy import DEFAULT_POLICY_TOML

    path = tmp_path / "policy.toml"
    path.write_text(DEFAULT_POLICY_TOML.replace("ask_at_steps = 0", "ask_at_steps = 1", 1))
    return path


async def test_a_soft_budget_is_a_decision_in_the_panel_and_n_ends_the_run_limit(tmp_path: Path) -> None:
    """Issue 25, point 3, in the TUI: the question with the spend, y goes on, n ends the run."""
    from pilot_helpers import answer

    turns = [{"actions": [{"type": "screenshot"}] * 3}]
    run = sim_run(tmp_path, turns, policy_path=budget_policy(tmp_path))
    app = live_app(run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = run_screen(app)
        await until(pilot, lambda: screen.pending is not None, "the budget's question")
        panel = plain(screen.panel)
        assert "SOFT BUDGET · turn 1 · before action 2" in panel
        assert "this run has spent 1 steps of its 200 steps cap" in panel and "y approve" in panel
        assert "e edit" not in panel and not screen.check_action("takeover", ())
        first = screen.pending
        await answer(pilot, "y")
        await until(pilot, lambda: screen.pending is not None and screen.pending is not first, "the next question")
        await answer(pilot, "n")
        await until_ended(pilot, app)
    assert run.supervisor.result is not None and run.supervisor.result.status == "limit"


def test_headless_the_blanket_rule_answers_a_soft_budget(tmp_path: Path) -> None:
    turns = [{"actions": [{"type": "screenshot"}] * 3}]
    for rule, status in (("reject", "limit"), ("approve", "failed")):
        run = build_run(
            RunOptions(backend="sim", agent=None, script={"turns": turns, "final_text": "done"},
                       runs_dir=tmp_path / rule, decisions=rule, fsync=False, desktop=SimDesktop(),
                       policy_path=budget_policy(tmp_path))
        )  # fmt: skip
        result = run.supervisor.run()
        assert result.status == status, (rule, result.reason)
