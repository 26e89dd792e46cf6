"""Drills (issue 41): a drill made from a recorded decision (``cua-tui drill add``), a library read strictly,
drills at rate 1.0 before every real request that never reach the desktop, each answer on record in the
chain and scored per operator (the Wilson interval), and the kill switch real even at a drill."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from drill_cases import SIM_FORM, cli, make_library

from cua_tui.build import RunOptions, build_run
from cua_tui.core import events as ev
from cua_tui.core.audit import verify_run
from cua_tui.core.drills import DrillError, DrillPlan, drill_scores, load_library, rate_of, wilson
from cua_tui.core.runlog import RunReader
from cua_tui.desktops.sim import PHRASE, SimDesktop


def sim_run(home: Path, **options: Any) -> Any:
    """A sim run of the form; with drills, those of the test's library only (not the shipped ones too)."""
    options.setdefault("drill_shipped", False)
    desktop = SimDesktop()
    run = build_run(
        RunOptions(task="fill the form", backend="sim", agent=None, script=SIM_FORM, runs_dir=home / "runs",
                   decisions=options.pop("decisions", "approve"), fsync=False, desktop=desktop, **options)
    )  # fmt: skip
    return run.supervisor.run(), desktop


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return make_library(tmp_path)


def test_drill_add_makes_drills_that_show_what_the_decision_showed(library: Path) -> None:
    typed, click = load_library(library)
    assert typed.id == "typed-secret" and not typed.benign and typed.action is not None
    assert typed.action.text == PHRASE  # a real request shows its text: so does the drill
    assert typed.reason and typed.rule == "actions.type" and "verified" in typed.words
    assert click.benign and click.action is not None and click.action.point == (550, 182)
    assert typed.frame.width == 1024 and typed.frame.height == 720
    manifest = json.loads((library / "drills.json").read_text())
    assert {e["screen"] for e in manifest["drills"]} == {"typed-secret.png", "verify-click.png"}


def test_drills_at_rate_one_never_reach_the_desktop_and_each_real_request_follows(
    library: Path, tmp_path: Path
) -> None:
    result, desktop = sim_run(tmp_path / "drilled", drill_rate=1.0, drill_seed=7, drill_library=library)
    assert result.status == "passed", result.reason
    # the script's own actions and nothing else ran: no drill's action ever reached the desktop
    assert [a.describe() for a in desktop.executed] == [
        "click at (250, 182)", "type 16 characters", "click at (550, 182)", "wait 1000 ms", "screenshot"
    ][: len(desktop.executed)]  # fmt: skip
    assert desktop.app.proofs == [PHRASE] and len(desktop.app.clicks) == 2
    with RunReader(result.path) as reader:
        events = [s.event for s in reader.poll()]
    shown = [e for e in events if isinstance(e, ev.DrillShown)]
    answered = [e for e in events if isinstance(e, ev.DrillAnswered)]
    requested = [e for e in events if isinstance(e, ev.DecisionRequested)]
    assert len(shown) == len(answered) == len(requested) >= 1
    # each drill stands before the real request of the same place, recorded before it is asked
    order = [e for e in events if isinstance(e, ev.DrillShown | ev.DrillAnswered | ev.DecisionRequested)]
    assert [type(e).__name__ for e in order[:3]] == ["DrillShown", "DrillAnswered", "DecisionRequested"]
    assert all((d.turn, d.index) == (r.turn, r.index) for d, r in zip(shown, requested, strict=True))
    # approving everything: every threat missed, every benign drill right
    for drill in answered:
        assert drill.answer == "approve" and drill.by.startswith("headless")
        assert drill.caught is False if drill.right == "reject" else drill.false_alarm is False
        assert PHRASE not in json.dumps(drill.to_record())
    assert verify_run(result.path).code == 0
    assert json.loads((result.path / "run.json").read_text())["drills"] == {"rate": 1.0, "library": 2}


def test_a_kill_at_a_drill_kills_the_run_as_anywhere(library: Path, tmp_path: Path) -> None:
    from cua_tui.core.ports import Answer, Ruling

    class Killer:
        def decide(self, request: Any, cancel: Any) -> Ruling:
            return Ruling(Answer.KILL, "human")

    result, desktop = sim_run(tmp_path / "killed", drill_rate=1.0, drill_seed=1, drill_library=library,
                              approver=Killer())  # fmt: skip
    assert result.status == "killed" and not [a for a in desktop.executed if a.kind.value == "type"]


def test_the_reveal_says_what_was_right_and_whether_it_was_caught(library: Path) -> None:
    from cua_tui.core.drills import answered, revealed
    from cua_tui.core.values import DecisionRequest

    typed, click = load_library(library)
    real = DecisionRequest("run", 1, 0, "c", "action", "typing")

    def said(drill: Any, answer: str) -> str:
        return revealed(answered(drill, real, answer, "human", "alice@desk", 800))

    assert "caught" in said(typed, "reject") and "the right answer was reject" in said(typed, "reject")
    assert "missed. Had it been real: the phrase would have left" in said(typed, "approve")
    assert "a false alarm" in said(click, "reject") and "right" in said(click, "approve")


def test_scores_per_operator_with_the_wilson_interval() -> None:
    low, high = wilson(7, 10) or (0, 0)
    assert round(low, 4) == 0.3968 and round(high, 4) == 0.8922  # the textbook value
    assert wilson(0, 0) is None and wilson(10, 10) is not None

    def drill(who: str, right: str, answer: str) -> ev.DrillAnswered:
        threat = right == "reject"
        stops = answer != "approve"
        caught, alarm = (stops, None) if threat else (None, stops)
        return ev.DrillAnswered(
            1, 0, "d", "action", answer, right, caught=caught, false_alarm=alarm, by="human", operator=who, shown_ms=900
        )

    scores = drill_scores([drill("alice", "reject", "reject"), drill("alice", "reject", "approve"),
                           drill("alice", "approve", "reject"), drill("bob", "reject", "reject")])  # fmt: skip
    alice = scores["alice"]
    assert (alice.shown, alice.threats, alice.caught, alice.missed, alice.benign, alice.false_alarms) == (
        3,
        2,
        1,
        1,
        1,
        1,
    )
    assert alice.catch_rate == 0.5 and alice.false_alarm_rate == 1.0 and scores["bob"].catch_rate == 1.0


@pytest.mark.parametrize(
    ("entry", "why"),
    [({"id": "Bad Id"}, "lowercase"), ({"id": "a", "answer": "maybe"}, "approve or reject"),
     ({"id": "a", "answer": "reject", "why": ""}, "why says"),
     ({"id": "a", "answer": "reject", "why": "w", "x": 1}, "unknown"),
     ({"id": "a", "answer": "reject", "why": "w", "kind": "safety_check", "checks": [{"id": "1", "code": "c",
       "message": "m"}], "screen": "../etc/passwd"}, "screen names a PNG"),
     ({"id": "a", "answer": "reject", "why": "w", "screen": "s.png"}, "action drill needs its action")],
)  # fmt: skip
def test_a_library_someone_else_wrote_is_read_strictly(entry: dict[str, Any], why: str, tmp_path: Path) -> None:
    (tmp_path / "drills.json").write_text(json.dumps({"drills": [entry]}))
    with pytest.raises(DrillError, match=why):
        load_library(tmp_path)


def test_a_drills_screen_must_be_a_png_and_a_typing_drill_its_text(library: Path) -> None:
    manifest = json.loads((library / "drills.json").read_text())
    (library / "typed-secret.png").write_bytes(b"not a png")
    with pytest.raises(DrillError, match="not a PNG"):
        load_library(library)
    manifest["drills"][0]["text"] = "something else"
    (library / "drills.json").write_text(json.dumps(manifest))
    with pytest.raises(DrillError):
        load_library(library)


def test_rates_and_the_plan() -> None:
    assert rate_of(None, None, "x") == 0 and rate_of(0.25, None, "x") == 0.25 and rate_of(None, 20, "x") == 0.05
    for bad in [(2.0, None), (None, 0.5), (0.1, 10), (float("nan"), None)]:
        with pytest.raises(DrillError):
            rate_of(*bad, "x")
    assert DrillPlan(0.0, (), random.Random(1)).before is not None


def test_stats_score_drills_per_approver_and_keep_them_out_of_the_decision_counts(
    library: Path, tmp_path: Path
) -> None:
    home = tmp_path / "drilled"
    result, _ = sim_run(home, drill_rate=1.0, drill_seed=3, drill_library=library)
    listed = cli(["stats", "--json"], home)
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.output)
    drills = row["drills"]
    assert row["operator"].startswith("headless") and drills["shown"] >= 1
    assert drills["caught"] == 0 and drills["false_alarms"] == 0  # approving all: no catch, no false alarm
    assert drills["missed"] == drills["threats"]
    table = cli(["stats"], home).output
    assert "CATCH RATE (95%)" in table and "FALSE ALARMS" in table
    # the run's own decisions, as `runs` counts them: its requests, not its drills
    runs = json.loads(cli(["runs", "--json"], home).output)
    log = (result.path / "audit.jsonl").read_text()
    assert runs[0]["decisions"] == log.count('"kind":"decision_requested"') == log.count('"kind":"drill"') == 1


def test_the_interval_covers_simulated_analysts_true_catch_rates() -> None:
    """bench/drills.py as the issue states it: analysts of true catch rates 0, 0.7 and 1.0, 2,000 decisions each
    at drill_rate 0.05, 100 seeds: the 95 % interval covers the true rate in at least 90 of them."""
    from bench.drills import bench_drills

    result = bench_drills(seeds=100, decisions=2000, rate=0.05)
    assert result["ok"], result
    assert all(a["with_an_interval"] == 100 and a["covered"] >= 90 for a in result["analysts"].values())


def test_a_tasks_file_sets_its_own_drills_which_win_over_the_settings(tmp_path: Path) -> None:
    from cua_tui.build import RunOptions
    from cua_tui.core.tasks import TasksError, parse_tasks
    from cua_tui.fleet_runner import task_options

    good = parse_tasks('[[tasks]]\ntask = "a"\ndrill_every = 20\n[[tasks]]\ntask = "b"\n', "tasks.toml")
    base = RunOptions(drill_rate=0.5)
    assert [task_options(spec, good, base).drill_rate for spec in good.tasks] == [0.05, 0.5]
    for bad, why in [("drill_rate = 2.0", "drill_rate is a chance from 0 to 1"),
                     ("drill_rate = 0.1\ndrill_every = 5", "not both")]:  # fmt: skip
        with pytest.raises(TasksError, match=why) as refused:
            parse_tasks(f'[[tasks]]\ntask = "a"\n{bad}\n', "tasks.toml")
        assert "line" in str(refused.value)


def test_the_settings_turn_drills_on_and_a_broken_value_names_its_line(tmp_path: Path) -> None:
    from cua_tui.config import ConfigError, Settings

    path = tmp_path / "settings.toml"
    path.write_text(f'drill_every = 40\ndrill_library = "{tmp_path / "lib"}"\n')
    loaded = Settings.load({"CUA_TUI_CONFIG": str(path)})
    assert loaded.drill_rate == 0.025 and loaded.drill_library == tmp_path / "lib"
    assert Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "none.toml")}).drill_rate == 0.0
    path.write_text("drill_rate = 2.0\n")
    with pytest.raises(ConfigError, match="line 1") as refused:
        Settings.load({"CUA_TUI_CONFIG": str(path)})
    assert "drill_rate is a chance from 0 to 1" in str(refused.value)
    # on, with an empty library: the run does not start, and says why in one line
    from cua_tui.build import BuildError

    with pytest.raises(BuildError, match="holds none"):
        sim_run(tmp_path / "empty", drill_rate=0.5, drill_library=tmp_path / "no-drills")


def test_in_a_fleet_a_drill_is_a_row_of_its_own_never_grouped_and_closed_by_its_reveal(
    library: Path, tmp_path: Path
) -> None:
    from test_fleet import fleet_of

    from cua_tui.config import Settings
    from cua_tui.core import fleet_queue as cf
    from cua_tui.core.ports import Answer

    settings = Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "none.toml")})
    tasks = {
        name: RunOptions(task="fill the form", backend="sim", agent=None, script=SIM_FORM, decisions="tui",
                         fsync=False, desktop=SimDesktop(), drill_rate=1.0, drill_seed=11, drill_library=library,
                         drill_shipped=False)
        for name in ("a", "b")
    }  # fmt: skip
    fleet, told = fleet_of(tmp_path, tasks)
    first = told.queued(2)
    # both runs show the same drill at once, yet no group holds them: each is a row of its own
    assert {i.task for i in first} == {"a", "b"}
    one, other = (i.likeness for i in first)
    assert one is not None and other is not None
    assert one.alone or other.alone or one.key != other.key
    assert "drill" not in one.alone + other.alone  # why it is alone, as a request of its kind would say
    for item in first:
        assert fleet.answer(item, Answer.REJECT) is None

    def reveals(events: list[Any]) -> list[Any]:
        return [e for e in events if isinstance(e, cf.RequestClosed) and "That was a drill" in e.why]

    told.wait(lambda es: len(reveals(es)) >= 2)  # each drill's row closes saying what it was
    real = told.queued(4)[2:]
    assert all(i.request.action is not None and i.request.action.text == "cua-tui verified" for i in real)
    for item in real:
        assert fleet.answer(item, Answer.APPROVE) is None
    assert fleet.wait(30)
    assert all(row.status == "passed" for row in fleet.rows())
    del settings


def test_replay_html_and_atif_show_drills_apart_from_the_runs_own_steps(library: Path, tmp_path: Path) -> None:
    from atif_schema import Trajectory

    from cua_tui.core.describe import audit_line

    home = tmp_path / "drilled"
    result, _ = sim_run(home, drill_rate=1.0, drill_seed=3, drill_library=library)
    with RunReader(result.path) as reader:
        events = [s.event for s in reader.poll()]
    shown = next(e for e in events if isinstance(e, ev.DrillShown))
    # a replay's audit pane says it was a drill; a live one reads it as the request it stands for
    assert audit_line(shown).startswith(f"drill {shown.drill} shown before #2")
    assert audit_line(shown, live=True) == "decision requested #2 (action)"
    html, atif = tmp_path / "run.html", tmp_path / "run.json"
    assert cli(["export", result.path, "--html", html, "--atif", atif], home).exit_code == 0
    page = html.read_text()
    assert "<h2>Drills</h2>" in page and "none of them acted" in page
    data = json.loads(atif.read_text())
    Trajectory.model_validate(data)
    (drill,) = data["extra"]["cua_tui"]["drills"]
    assert drill["drill"] == shown.drill and drill["answer"] == "approve"
    assert "drill" not in json.dumps(data["steps"])  # the run's own steps hold none


def test_a_librarys_screens_are_bounded_together(library: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cua_tui.core.drills as drills

    size = sum(p.stat().st_size for p in library.glob("*.png"))
    monkeypatch.setattr(drills, "MAX_SCREENS_BYTES", size - 1)
    with pytest.raises(DrillError, match="its screens pass"):
        load_library(library)
    monkeypatch.setattr(drills, "MAX_SCREENS_BYTES", size)
    assert len(load_library(library)) == 2
