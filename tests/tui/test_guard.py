"""No approval is given unseen (issue 22, point 2): a decision just painted ignores y, a and n for its input
guard, says so, and lets k through at once; the answer records the screen shown and how long it was shown.

The Pilot tests here use the real clock and the shipped guard (1.0 s), or a longer one where keys must come
"as the decision appears" on a loaded machine: the guard is what they test."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fleet_cases import opts
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import fleet_screen, run_screen, until, until_ended

from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.config import ConfigError, Settings
from cua_tui.core.approvers import HandshakeApprover
from cua_tui.core.guard import DEFAULT_GUARD_S, GUARD_FLOOR_S, DecisionGuard
from cua_tui.core.ports import Answer, DecisionRequest, Ruling
from cua_tui.desktops.sim import SimDesktop
from cua_tui.fleet_runner import Fleet, FleetTask
from cua_tui.tui.app import CuaApp
from cua_tui.tui.fleet_screen import FleetScreen
from cua_tui.tui.run_screen import RunScreen
from cua_tui.tui.source import LiveRun

pytestmark = pytest.mark.timeout(90)

SIZE = (160, 50)
FIELD = {"type": "click", "button": "left", "x": 250, "y": 182}


# ---------------------------------------------------------------------------------------------------
# The guard, its setting, the handshake that records what was seen
# ---------------------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_guard_holds_a_new_decision_then_lets_its_keys_count() -> None:
    clock = Clock()
    guard = DecisionGuard(clock=clock)
    assert guard.seconds == DEFAULT_GUARD_S == 1.0
    assert guard.refusal("y") is None and guard.shown_ms() is None  # nothing shown: nothing to guard
    guard.arm("first")
    clock.now += 0.3
    assert guard.refusal("y") == "y ignored: this decision appeared 0.3 s ago; keys count after 1.0 s"
    clock.now += 0.69
    assert guard.refusal("n") == "n ignored: this decision appeared 0.9 s ago; keys count after 1.0 s"
    guard.arm("first")  # painted again, the same decision: the guard does not start over
    clock.now += 0.01
    # a second old, but a key was ignored a moment ago: keys count once they stopped for the guard's length
    assert guard.refusal("y") == "y ignored: a key was ignored 0.0 s ago; keys count after 1.0 s without one"
    clock.now += 0.99
    assert not guard.passed()
    clock.now += 0.01
    assert guard.refusal("y") is None and guard.passed() and guard.shown_ms() == 2000
    guard.arm("second")  # another decision: it starts over
    assert guard.refusal("a") is not None and guard.shown_ms() == 0
    clock.now += 5
    guard.rearm()  # the same one painted again after a view covered it
    assert guard.refusal("y") is not None
    guard.arm(None)
    assert guard.refusal("y") is None and guard.shown_ms() is None


def test_the_guard_waits_for_the_decisions_screenshot_then_counts_from_it() -> None:
    clock = Clock()
    guard = DecisionGuard(clock=clock)
    guard.arm("first", screen=True)
    clock.now += 5  # however long the picture takes, nothing counts before it is on the pane
    assert not guard.passed() and guard.waiting and guard.shown_ms() is None
    assert guard.refusal("y") == (
        "y held: this decision's screenshot is not on the desktop pane yet; keys count 1.0 s after it is"
    )
    guard.arm("first", screen=True)  # painted again while waiting: still waiting
    guard.rearm()  # uncovered while waiting: still waiting
    assert guard.waiting
    guard.screen_shown()
    clock.now += 0.5
    assert guard.refusal("y") == "y ignored: this decision appeared 0.5 s ago; keys count after 1.0 s"
    clock.now += 1.0  # a second after the screenshot, and after the key it ignored
    assert guard.passed() and guard.shown_ms() == 500 + 1000
    guard.screen_shown()  # said again: the guard does not start over
    assert guard.passed()
    guard.arm("second", screen=True)  # the next decision waits for its own screenshot
    assert guard.waiting and not guard.passed()
    guard.arm(None)
    assert not guard.waiting and guard.refusal("y") is None


def test_a_phrase_typed_on_after_an_ignored_e_answers_nothing_until_the_keys_stop() -> None:
    """e pressed a moment early is ignored; the phrase typed after it reaches the App's keys (no editor
    opened). Its a or y, however late, is ignored too while keys keep coming: an answer counts only once
    the keys have stopped for the guard's length."""
    clock = Clock()
    guard = DecisionGuard(clock=clock)
    guard.arm("decision")
    clock.now += 0.8
    assert guard.refusal("e") is not None
    for _ in range(20):  # a key every 0.3 s, for 6 s
        clock.now += 0.3
        assert guard.refusal("a") is not None and not guard.passed()
    clock.now += 1.0
    assert guard.refusal("y") is None and guard.passed()


def test_the_guard_is_never_below_its_floor() -> None:
    assert GUARD_FLOOR_S == 0.5
    with pytest.raises(ValueError, match=r"at least 0\.5 s"):
        DecisionGuard(0.2)
    assert DecisionGuard(0.5).seconds == 0.5


def test_the_setting_changes_the_guard_and_refuses_less_than_the_floor(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    env = {"CUA_TUI_CONFIG": str(config)}
    assert Settings.load(env).decision_guard_s == DEFAULT_GUARD_S  # no file: the default
    config.write_text("decision_guard_s = 2\n")
    assert Settings.load(env).decision_guard_s == 2.0
    config.write_text("decision_guard_s = 0.2\n")
    with pytest.raises(ConfigError) as raised:
        Settings.load(env)
    assert str(raised.value) == (
        f"settings file {config}, line 1: decision_guard_s: must be at least 0.5 s "
        "(the floor: a key meant for the decision before must not count)"
    )
    config.write_text('decision_guard_s = "soon"\n')
    with pytest.raises(ConfigError, match="decision_guard_s"):
        Settings.load(env)


def test_an_answer_carries_the_screen_seen_into_the_ruling() -> None:
    import threading

    handshake = HandshakeApprover(by="human (TUI)")
    request = DecisionRequest("run-1", 1, 0, "c1", "action", "typing")
    other = DecisionRequest("run-1", 1, 1, "c1", "action", "typing")
    rulings: list[Ruling] = []
    asked = threading.Thread(target=lambda: rulings.append(handshake.decide(request, threading.Event())))
    asked.start()
    assert handshake.wait_for_request(5) is request
    assert handshake.answer(Answer.APPROVE, other, screen="b" * 64, shown_ms=5) is False  # not the one asked
    assert handshake.answer(Answer.APPROVE, request, screen="a" * 64, shown_ms=1234) is True
    asked.join(5)
    assert rulings[0].human and (rulings[0].screen, rulings[0].shown_ms) == ("a" * 64, 1234)


# ---------------------------------------------------------------------------------------------------
# The single run's TUI, on the real clock
# ---------------------------------------------------------------------------------------------------
class Told(CuaApp):
    """The supervision TUI, keeping what it told the analyst."""

    def __init__(self, source: Any, **kwargs: Any) -> None:
        super().__init__(partial(RunScreen, source=source), **kwargs)
        self.told: list[str] = []

    def notify(self, message: str, **kwargs: Any) -> None:
        self.told.append(message)
        super().notify(message, **kwargs)


def live(tmp_path: Path, turns: list[dict[str, Any]], **kwargs: Any) -> tuple[Told, Path]:
    run = build_run(
        RunOptions(
            backend="sim",
            agent=None,
            script={"turns": turns, "final_text": "done"},
            runs_dir=tmp_path / "runs",
            decisions=HANDSHAKE,
            fsync=False,
            desktop=SimDesktop(),
        )
    )
    assert run.handshake is not None
    track(run.supervisor)
    return Told(LiveRun(run.supervisor, run.handshake), **kwargs), run.path


def audit(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "audit.jsonl").read_text().splitlines()]


def ignored(app: Told, key: str) -> list[str]:
    """What the app said of ``key`` ignored: within the guard, or held while the screenshot is on its way."""
    return [m for m in app.told if m.startswith((f"{key} ignored: this decision appeared ", f"{key} held: "))]


async def test_keys_pressed_as_a_decision_appears_are_ignored_and_said_then_y_approves_what_was_seen(
    tmp_path: Path,
) -> None:
    turns = [{"actions": [FIELD, {"type": "type", "text": "one"}, {"type": "type", "text": "two"}]}]
    # 3 s: "as it appears" must hold on a loaded machine too, where a poll and a key press take a while
    app, path = live(tmp_path, turns, guard_s=3.0)
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.pending is not None and main.pending.index == 1, "the first typing decision")
        first = main.pending
        await pilot.press("y", "a", "n")
        assert main.pending is first and app.screen is app.screen_stack[0]  # nothing answered, no reason asked
        for key in "yan":
            (said,) = ignored(app, key)
            assert said.endswith(("; keys count after 3.0 s", "; keys count 3.0 s after it is"))
        await until(pilot, lambda: main.painted_sha != "", "the screen painted with it")
        shown = main.painted_sha
        await until(pilot, main.guard.passed, "the guard to pass", timeout=10)
        await pilot.press("y")
        # A double tap: the second y lands right after the next decision appears, and is ignored.
        await until(pilot, lambda: main.pending is not None and main.pending.index == 2, "the second decision")
        await pilot.press("y")
        assert main.pending is not None and main.pending.index == 2 and len(ignored(app, "y")) == 2
        await until(pilot, main.guard.passed, "the guard to pass", timeout=10)
        await pilot.press("n", "escape")
        await until_ended(pilot, app)
    records = audit(path)
    decisions = [r for r in records if r["kind"] == "decision" and r["by"] == "human (TUI)"]
    assert [(d["index"], d["decision"]) for d in decisions] == [(1, "approve"), (2, "reject")]
    # the screen the analyst was shown: the screenshot the pane showed with the request, taken before it
    asked = next(i for i, r in enumerate(records) if r["kind"] == "decision_requested" and r["index"] == 1)
    screenshot = [r["sha256"] for r in records[:asked] if r["kind"] == "screen"][-1]
    assert decisions[0]["screen"] == shown == screenshot
    assert all(d["shown_ms"] >= 3000 for d in decisions)  # nothing counted before the guard


async def test_k_passes_at_once(tmp_path: Path) -> None:
    # A long guard (the real clock), so that it surely still holds when k is pressed on a loaded machine.
    app, path = live(tmp_path, [{"actions": [FIELD, {"type": "type", "text": "one"}]}], guard_s=10.0)
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.pending is not None, "the decision")
        await pilot.press("y")
        assert ignored(app, "y") and main.pending is not None  # the guard holds
        await pilot.press("k")
        assert not main.guard.passed()
        await until_ended(pilot, app)
        assert main.final_status == "killed" and not ignored(app, "k")
    records = audit(path)
    assert [r["by"] for r in records if r["kind"] == "kill"] == ["human (TUI)"]
    assert not [r for r in records if r["kind"] == "decision" and r["by"] == "human (TUI)"]


# ---------------------------------------------------------------------------------------------------
# The fleet TUI, on the real clock
# ---------------------------------------------------------------------------------------------------
class FleetTold(CuaApp):
    def __init__(self, fleet: Fleet, guard_s: float = 1.0) -> None:
        # one request at a time (a group's guard: tests/tui/test_fleet_groups.py)
        super().__init__(partial(FleetScreen, fleet=fleet, grouping=False), guard_s=guard_s)
        self.told: list[str] = []

    def notify(self, message: str, **kwargs: Any) -> None:
        self.told.append(message)
        super().notify(message, **kwargs)


@pytest.mark.long
async def test_the_fleet_guards_each_request_shown_in_the_queue_and_in_a_runs_view(tmp_path: Path) -> None:
    settings = Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")})
    fleet = Fleet(
        [FleetTask(name, opts(settings)) for name in ("a", "b")],
        runs_dir=tmp_path / "runs",
        concurrency=2,
        tasks_sha256="ab" * 32,
    )
    # a guard long enough that a key pressed right after a request is shown falls in it on a loaded machine
    app = FleetTold(fleet, guard_s=3.0)
    main = fleet_screen(app)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: len(main.items) == 2 and main.selected is not None, "both requests queued")
        await until(pilot, main.guard.passed, "the guard to pass", timeout=10)
        # another request selected: shown just now, so its keys wait again
        await pilot.press("down")
        await until(pilot, lambda: main.selected is not None and main.selected.ticket == main.items[1].ticket, "b")
        chosen = main.selected
        assert chosen is not None
        await pilot.press("y")
        assert [m for m in app.told if m.startswith("y ignored")] and len(fleet.queue()) == 2
        await until(pilot, main.guard.passed, "the guard to pass", timeout=10)
        await pilot.press("y")
        await until(pilot, lambda: len(fleet.queue()) == 1, "the request answered")
        assert fleet.queue()[0].ticket != chosen.ticket
        # a run's view opening on its request: the guard again, its own
        await until(pilot, lambda: main.selected is not None and main.selected.ticket == fleet.queue()[0].ticket, "a")
        await until(pilot, main.guard.passed, "the guard to pass", timeout=10)
        await pilot.press("enter")
        assert isinstance(app.screen, RunScreen)
        live_view = app.screen
        await until(pilot, lambda: live_view.view.pending is not None, "the run's request in its view")
        await pilot.press("n")
        assert app.screen is live_view and len([m for m in app.told if m.startswith("n ignored")]) == 1
        await until(pilot, live_view.guard.passed, "the run view's guard to pass", timeout=10)
        await pilot.press("y")
        await until(pilot, lambda: fleet.done, "every run to end")
    for row in fleet.rows():
        records = audit(Path(row.path))
        (decision,) = [r for r in records if r["kind"] == "decision" and r["by"] == "human (TUI)"]
        screens = {r["sha256"] for r in records if r["kind"] == "screen"}
        assert decision["screen"] in screens and decision["shown_ms"] >= 1000


async def test_y_is_held_while_the_pane_shows_an_older_picture_or_none_and_counts_once_the_decisions_is_painted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The conversion worker is held: at the decision the pane shows no picture yet (or one from before).
    A y then, however late, is held and said so; once the decision's own picture lands, the guard starts
    and counts from it."""
    import threading

    from cua_tui.tui.desktop_view import DesktopView

    release = threading.Event()
    frame = DesktopView._frame
    held: list[str] = []

    def slow(self: DesktopView, shot: Any, key: Any) -> Any:
        held.append(shot.sha)
        release.wait(30)
        return frame(self, shot, key)

    monkeypatch.setattr(DesktopView, "_frame", slow)
    app, path = live(tmp_path, [{"actions": [FIELD, {"type": "type", "text": "one"}]}])
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.pending is not None, "the typing decision")
        request = main.pending
        assert request is not None and request.frame is not None
        asked = request.frame.sha256
        await until(pilot, lambda: asked in held, "the worker holding the decision's screenshot")
        assert main.guard.waiting and main.painted_sha != asked  # an older picture on the pane, or none
        await pilot.pause(1.2)  # longer than the guard: still nothing counts
        await pilot.press("y")
        said = [m for m in app.told if m.startswith("y held: ")]
        assert said == [
            "y held: this decision's screenshot is not on the desktop pane yet; keys count 1.0 s after it is"
        ]
        assert main.pending is request
        release.set()
        await until(pilot, lambda: main.painted_sha == asked, "the decision's screenshot painted")
        await until(pilot, lambda: not main.guard.waiting, "the guard started")
        await pilot.press("y")
        assert main.pending is request  # within the guard, counted from the picture
        await until(pilot, main.guard.passed, "the guard to pass", timeout=5)
        await pilot.press("y")
        await until_ended(pilot, app)
    decision = next(r for r in audit(path) if r["kind"] == "decision" and r["by"] == "human (TUI)")
    assert decision["decision"] == "approve" and decision["screen"] == asked


async def test_a_fleet_too_narrow_for_its_desktop_pane_says_so_and_guards_from_the_panel(tmp_path: Path) -> None:
    """At 60x20 the fleet's layout leaves the desktop pane no room: the guard starts when the panel is painted
    (no screenshot will ever be), and the panel says that the screen is not shown."""
    settings = Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")})
    fleet = Fleet([FleetTask("form", opts(settings))], runs_dir=tmp_path / "runs", concurrency=2)
    app = CuaApp(partial(FleetScreen, fleet=fleet))
    main = fleet_screen(app)
    async with app.run_test(size=(60, 20)) as pilot:
        await until(pilot, lambda: main.selected is not None, "the request")
        await until(pilot, lambda: not main.guard.waiting, "the guard started from the panel")
        assert not main.desktop.on_screen and main.panel.unseen
        assert "screen  not shown at this size" in str(main.panel.render())
        await until(pilot, main.guard.passed, "the guard to pass", timeout=5)
        await pilot.press("y")
        await until(pilot, lambda: fleet.done, "the run to end")
    (row,) = fleet.rows()
    decision = next(r for r in audit(Path(row.path)) if r["kind"] == "decision" and r["by"] != "policy")
    assert decision["decision"] == "approve" and decision["screen"] == ""  # no screen was shown
