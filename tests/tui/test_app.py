"""Pilot tests of the supervision TUI (issue 4): y / n / k on a live run, the kill switch while the desktop
hangs, keys that do not apply, the target marker and zoom, untrusted text, the help screen and themes.

Live runs are real: a Supervisor on the in-process sim desktop with a scripted agent, decisions through the
HandshakeApprover, exactly as ``cua-tui run`` wires them (only the terminal is Textual's test driver).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from PIL import Image
from pilot_helpers import (
    SOON,
    answer,
    drawn,
    footer_actions,
    plain,
    possible,
    quick_clock,
    run_screen,
    until,
    until_ended,
)
from recorded_run import RecordedRun
from scenes import SCENES
from textual.app import App
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Static

from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.core import events as ev
from cua_tui.core.actions import Kind
from cua_tui.core.imaging import ScreenLimit
from cua_tui.core.ports import (
    HEARD,
    OutcomeStatus,
)
from cua_tui.core.supervisor import Supervisor
from cua_tui.desktops.sim import PHRASE, SimDesktop
from cua_tui.tui.app import CuaApp
from cua_tui.tui.audit_list import AuditList
from cua_tui.tui.batch import ActionRow, BatchPane
from cua_tui.tui.decision_panel import DecisionPanel
from cua_tui.tui.desktop_view import DesktopView
from cua_tui.tui.frames import MARKER, prepare
from cua_tui.tui.help import HelpScreen
from cua_tui.tui.messages import FrameRendered
from cua_tui.tui.run_screen import supervisor_app
from cua_tui.tui.source import LiveRun
from cua_tui.tui.status import StatusBar
from cua_tui.tui.themes import BUILTIN, load_theme_file, load_themes, project_themes_dir

pytestmark = pytest.mark.timeout(60)

SIZE = (160, 50)
SIM_SCREEN = ScreenLimit(1024, 720)  # the sim desktop's screen
FIELD = (250, 182)  # centre of the sim form's phrase field (40, 160, 420x44)
VERIFY = (550, 182)  # centre of its Verify button (480, 160, 140x44)
SEND = (120, 422)  # centre of its Send button (40, 400, 160x44)
HUMAN = "human (TUI)"
SEND_CONFIRM = {"name": "send", "x": 40, "y": 400, "width": 160, "height": 44, "verdict": "confirm", "reason": "sends"}


def click(point: tuple[int, int]) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": point[0], "y": point[1]}


def typing(text: str) -> dict[str, Any]:
    return {"type": "type", "text": text}


FORM_TURN = {"text": "filling the form", "actions": [click(FIELD), typing(PHRASE), click(VERIFY)]}


# ---------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------
@dataclass
class Live:
    """A live run wired as the CLI wires it, and what the test needs to look at."""

    app: CuaApp
    supervisor: Supervisor
    events: list[ev.Event]

    @property
    def desktop(self) -> SimDesktop:
        desktop = self.supervisor.desktop
        assert isinstance(desktop, SimDesktop)
        return desktop

    @property
    def path(self) -> Path:
        return self.supervisor.rundir.path

    def audit(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.supervisor.rundir.audit.read_text().splitlines()]

    def result_json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.supervisor.rundir.result_json.read_text())
        return data

    def outcomes(self) -> dict[int, str]:
        return {e.index: e.status for e in self.events if isinstance(e, ev.Outcome)}


def live(
    tmp_path: Path,
    turns: list[dict[str, Any]],
    *,
    desktop: SimDesktop | None = None,
    regions: tuple[dict[str, Any], ...] = (),
    final_text: str = "done",
) -> Live:
    """A run made by the one builder exactly as ``cua-tui run`` makes it for the TUI (decisions through
    the handshake), on the sim desktop with a script agent."""
    events: list[ev.Event] = []
    run = build_run(
        RunOptions(
            task="test task",
            backend="sim",
            agent=None,
            script={"turns": turns, "final_text": final_text},
            regions=regions,
            runs_dir=tmp_path / "runs",
            decisions=HANDSHAKE,
            listeners=(lambda s: events.append(s.event),),
            fsync=False,
            desktop=desktop or SimDesktop(),
        )
    )
    handshake = run.handshake
    assert handshake is not None and handshake.by == HUMAN
    track(run.supervisor)
    return Live(supervisor_app(LiveRun(run.supervisor, handshake), guard_clock=quick_clock), run.supervisor, events)


async def until_decision(pilot: Pilot[Any], app: CuaApp, index: int) -> None:
    main = run_screen(app)
    await until(pilot, lambda: main.pending is not None and main.pending.index == index, f"decision on #{index + 1}")
    await pilot.pause()


def row(app: App[Any], index: int) -> ActionRow:
    return app.query_one(BatchPane).rows[index]


def marker_pixels(image: Image.Image) -> list[tuple[int, int]]:
    rgb = image.convert("RGB")
    width, height = rgb.size
    data = rgb.tobytes()
    wanted = bytes(MARKER)
    return [(i // 3 % width, i // 3 // width) for i in range(0, width * height * 3, 3) if data[i : i + 3] == wanted]


def near(pixels: list[tuple[int, int]], point: tuple[int, int], radius: int) -> list[tuple[int, int]]:
    return [(x, y) for x, y in pixels if abs(x - point[0]) <= radius and abs(y - point[1]) <= radius]


# ---------------------------------------------------------------------------------------------------
# y / n / k
# ---------------------------------------------------------------------------------------------------
async def test_y_approves_the_typed_text_and_the_run_passes(tmp_path: Path) -> None:
    run = live(tmp_path, [FORM_TURN])
    app = run.app
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1)
        assert main.pending is not None and main.pending.action is not None
        assert main.pending.action.kind is Kind.TYPE
        panel = app.query_one(DecisionPanel)
        assert panel.display
        assert "DECISION NEEDED" in plain(panel) and PHRASE in plain(panel)
        assert PHRASE in drawn(panel)  # the full typed text, on screen
        pending = row(app, 1)
        assert pending.has_class("risk-confirm") and pending.has_class("pending") and pending.has_class("state-waiting")
        assert row(app, 0).has_class("risk-allow") and row(app, 0).has_class("state-executed")
        assert not row(app, 0).has_class("pending") and not row(app, 2).has_class("pending")
        assert app.query_one(StatusBar).phase == "awaiting_decision"
        assert {"approve", "reject", "kill"} <= footer_actions(app)
        assert "zoom" in footer_actions(app)  # typing: z frames the field the click focused

        await answer(pilot, "y")
        await until_ended(pilot, app)
        assert main.final_status == "passed"
        assert app.result is not None and app.result.status == "passed"
        assert not panel.display and main.pending is None
        assert [row(app, i).state for i in range(3)] == ["executed"] * 3
        assert row(app, 1).decided_by == HUMAN
        assert run.desktop.app.values == {"phrase": PHRASE}
        decisions = [r for r in run.audit() if r["kind"] == "decision" and r["index"] == 1]
        assert [(d["decision"], d["by"]) for d in decisions] == [("approve", HUMAN)]
        assert run.result_json()["status"] == "passed"
        assert "status: passed" in plain(app.query_one(StatusBar))
        # Shown to the reviewer, never stored in clear.
        for path in run.path.glob("*.json*"):
            assert PHRASE not in path.read_text(), path.name

        # After the end, y and n do nothing; q quits with the run's result.
        await pilot.press("y", "n")
        assert app.result.status == "passed"
        assert footer_actions(app) >= {"quit_when_done"} and not footer_actions(app) & {"approve", "reject", "kill"}
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "the app to exit")
    assert app.return_value is app.result


async def test_n_declines_halts_the_batch_and_nothing_is_typed(tmp_path: Path) -> None:
    run = live(tmp_path, [FORM_TURN])
    app = run.app
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1)
        await answer(pilot, "n", "escape")  # reject, without a reason
        await until(pilot, lambda: row(app, 1).state == "declined", "row 2 declined")
        await until(pilot, lambda: row(app, 2).state == "not_executed", "row 3 not executed")
        assert row(app, 1).has_class("state-declined") and row(app, 2).has_class("state-not_executed")
        await until_ended(pilot, app)
        assert main.final_status == "failed"
        assert app.result is not None and app.result.status == "failed"
    assert run.desktop.app.values == {}  # nothing typed reached the page
    assert run.desktop.app.proofs == []  # and Verify was never clicked
    decisions = [(r["decision"], r["by"]) for r in run.audit() if r["kind"] == "decision" and r["index"] == 1]
    assert decisions == [("reject", HUMAN)]
    messages = [r["message"] for r in run.audit() if r["kind"] == "outcome" and r["index"] == 1]
    assert messages == [HEARD[OutcomeStatus.DECLINED]]


async def test_k_at_a_decision_kills_the_run(tmp_path: Path) -> None:
    run = live(tmp_path, [FORM_TURN])
    app = run.app
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1)
        executed_before = list(run.desktop.executed)
        await pilot.press("k")
        await until_ended(pilot, app)
        assert main.final_status == "killed"
        assert main.pending is None and not app.query_one(DecisionPanel).display
        assert row(app, 1).state == "not_executed" and row(app, 2).state == "not_executed"
        assert "status: killed" in plain(app.query_one(StatusBar))
    assert run.result_json()["status"] == "killed"
    assert run.desktop.executed == executed_before  # nothing more ran after k
    assert run.desktop.app.values == {} and run.desktop.stopped
    kills = [r for r in run.audit() if r["kind"] == "kill"]
    assert [k["by"] for k in kills] == [HUMAN]


async def test_k_ends_the_run_while_a_desktop_command_hangs(tmp_path: Path) -> None:
    """The first click blocks inside the desktop (as a dead sandbox connection would) and never returns
    on its own; k still ends the run at once, and the interface keeps answering meanwhile."""
    entered, release, returned = threading.Event(), threading.Event(), threading.Event()

    def hang(desktop: SimDesktop, action: Any) -> None:
        # Unlike ``desktop.hang`` (which ``stop()`` frees), this keeps hanging until the test lets it go.
        entered.set()
        release.wait(2 * SOON)
        returned.set()

    desktop = SimDesktop()
    desktop.before_action = hang
    run = live(tmp_path, [FORM_TURN], desktop=desktop)
    app = run.app
    main = run_screen(app)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, entered.is_set, "the first click to reach the desktop")
            await until(pilot, lambda: app.query_one(StatusBar).phase == "executing", "phase executing")
            # Responsive while the desktop hangs: the help screen opens and closes, the footer offers k.
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            assert not isinstance(app.screen, HelpScreen)
            assert "kill" in footer_actions(app) and not footer_actions(app) & {"approve", "reject"}

            await pilot.press("k")
            # The run is over once its end is on screen (desktop stopped, every action closed), the command
            # still hanging (held until the test lets it go, after the wait for the kill would give up): the
            # kill waited for nothing. Sealing the log afterwards is disk-bound and waited for below.
            status = app.query_one(StatusBar)
            await until(pilot, lambda: not main.running and "status: killed" in plain(status), "the kill", SOON)
            assert not returned.is_set(), "the kill waited for the desktop command"
            await until_ended(pilot, app)
            assert main.final_status == "killed"
            assert not returned.is_set(), "the desktop command was expected to still hang"
            assert "quit_when_done" in footer_actions(app) and "kill" not in footer_actions(app)
            assert row(app, 0).state == "failed"  # interrupted in flight
            assert row(app, 1).state == "not_executed" and row(app, 2).state == "not_executed"
        assert run.result_json()["status"] == "killed"
    finally:
        release.set()
        desktop.unhang.set()
    assert returned.wait(SOON)
    assert desktop.app.clicks == [] and desktop.app.values == {}  # the click in flight became a no-op


async def test_leaving_the_tui_during_a_run_kills_it(tmp_path: Path) -> None:
    """ctrl+q while the run waits: like q, the first says that leaving kills the run, the second leaves, and
    the run ends killed at once (otherwise its thread would keep the process, and the command line's own kill
    after ``app.run()`` would never come)."""
    run = live(tmp_path, [FORM_TURN])
    app = run.app
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1)
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert app.is_running and run.supervisor.result is None
        assert any("kills the run" in str(n.message) for n in app._notifications)
        await pilot.press("ctrl+q")
        await until(pilot, lambda: not app.is_running, "the app to exit")
    assert run.supervisor.wait(SOON) is not None, "the run outlived the TUI"
    assert run.result_json()["status"] == "killed"
    assert [r["by"] for r in run.audit() if r["kind"] == "kill"] == ["human (left the TUI)"]
    assert run.desktop.app.values == {}


# ---------------------------------------------------------------------------------------------------
# Keys that do not apply
# ---------------------------------------------------------------------------------------------------
async def test_y_and_n_do_nothing_without_a_pending_decision_and_q_waits_for_the_end() -> None:
    scene = SCENES["refused"]  # the run goes on (waiting for the model); nothing is pending
    app = scene.app()
    main = run_screen(app)
    source = main.source
    assert isinstance(source, RecordedRun)
    async with app.run_test(size=SIZE) as pilot:
        rows = app.query_one(BatchPane).rows
        await until(pilot, lambda: 2 in rows and rows[2].state == "not_executed", "the replay")
        await pilot.pause()
        assert main.running and main.pending is None
        for action in ("approve", "reject", "zoom", "quit_when_done"):
            assert possible(app, action) is False, action
        assert possible(app, "kill") is True
        bindings = app.screen.active_bindings
        assert "y" not in bindings and "n" not in bindings and "z" not in bindings
        assert bindings["q"].binding.action == "leave"  # q says what leaving a run that goes on means
        assert bindings["k"].enabled
        # x (alerts seen) is offered: the refused action raised an alert that stays until seen
        assert footer_actions(app) == {
            "kill", "help", "command_palette", "screen_text", "open_screenshot", "alerts_seen"
        }  # fmt: skip
        states = [row(app, i).state for i in range(3)]
        await pilot.press("y", "n", "z", "q")
        await pilot.pause()
        assert app.is_running and main.running  # q did not quit a run that goes on
        assert any("k is the kill switch" in str(n.message) for n in app._notifications)
        assert source.answers == [] and not source.killed
        assert [row(app, i).state for i in range(3)] == states
        await pilot.press("k")
        await until(pilot, lambda: not main.running, "the kill")
        assert source.killed
        await pilot.pause()
        assert "quit_when_done" in footer_actions(app)
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "the app to exit")


async def test_keys_on_a_finished_run() -> None:
    app = SCENES["finished"].app()
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: not main.running, "the recorded end")
        await pilot.pause()
        assert footer_actions(app) == {"help", "quit_when_done", "command_palette", "screen_text", "open_screenshot"}
        assert possible(app, "kill") is False
        await pilot.press("y", "n", "k")
        source = main.source
        assert isinstance(source, RecordedRun)
        assert source.answers == [] and not source.killed
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "the app to exit")


# ---------------------------------------------------------------------------------------------------
# The marker and zoom
# ---------------------------------------------------------------------------------------------------
async def test_the_pending_click_is_marked_and_z_zooms_on_it(tmp_path: Path) -> None:
    run = live(tmp_path, [{"text": "sending", "actions": [click(SEND)]}], regions=(SEND_CONFIRM,))
    app = run.app
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 0)
        view = app.query_one(DesktopView)

        def marked() -> bool:
            return view.rendered is not None and not view.rendered.zoomed and bool(marker_pixels(view.rendered.image))

        # At a decision the pane frames the target (zoomed); z shows the whole screen, and z again the zoom.
        await until(pilot, lambda: view.rendered is not None and view.rendered.zoomed, "the framed target")
        await pilot.press("z")
        await until(pilot, marked, "a marked frame")
        assert row(app, 0).has_class("risk-confirm") and row(app, 0).has_class("pending")
        assert view.rendered is not None
        image = view.rendered.image
        scale_x, scale_y = image.width / 1024, image.height / 720
        expected = (round(SEND[0] * scale_x), round(SEND[1] * scale_y))
        pixels = marker_pixels(image)
        assert near(pixels, expected, 1), f"no marker at {expected} in a {image.size} frame"
        assert near(pixels, expected, 6) == pixels, "marker colour away from the target"
        assert "zoom" in footer_actions(app)

        await pilot.press("z")
        await until(pilot, lambda: view.rendered is not None and view.rendered.zoomed, "the zoomed frame")
        zoomed = view.rendered.image
        assert zoomed.width == view.rendered.width and zoomed.height == 2 * view.rendered.height  # 1:1 pixels
        centre = (zoomed.width // 2, zoomed.height // 2)
        zoomed_pixels = marker_pixels(zoomed)
        assert near(zoomed_pixels, centre, 1), f"no marker at the centre {centre} of the zoom"
        assert near(zoomed_pixels, centre, 10) == zoomed_pixels

        await pilot.press("z")
        await until(pilot, marked, "the un-zoomed frame")
        assert near(marker_pixels(view.rendered.image), expected, 1)

        await answer(pilot, "y")
        await until_ended(pilot, app)
        await until(pilot, lambda: view.rendered is not None and not marker_pixels(view.rendered.image), "no marker")
    assert run.desktop.app.sent == [""]  # the approved click reached the Send button


async def test_frames_finished_out_of_order_still_leave_the_newest_on_screen() -> None:
    """Screenshots are converted in parallel workers, so an older frame can be posted after a newer one.
    The newest must stay on screen: coalescing used to let the late, older frame supersede the newer one
    queued just before it, and the pane kept a stale picture (no target marker) until the next frame."""
    app = SCENES["finished"].app()
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(DesktopView)
        await until(pilot, lambda: not main.running and view.shown > 0, "the recorded end on screen")
        await pilot.pause()
        png = SimDesktop().screenshot().png
        newer, older = prepare(png, 40, 20, limit=SIM_SCREEN), prepare(png, 30, 10, limit=SIM_SCREEN)
        serial = view.shown
        view.post_message(FrameRendered(newer, serial + 2))  # both queued before either is handled
        view.post_message(FrameRendered(older, serial + 1))
        await pilot.pause()
        assert view.shown == serial + 2
        assert view.rendered is newer


# ---------------------------------------------------------------------------------------------------
# Untrusted text
# ---------------------------------------------------------------------------------------------------
MARKUP = "[bold red]x[/]"
ESCAPE = "\x1b[2J"


async def test_untrusted_text_is_shown_literally(tmp_path: Path) -> None:
    turns = [{"text": f"model says {MARKUP} {ESCAPE} end", "actions": [click(FIELD), typing(MARKUP + ESCAPE)]}]
    run = live(tmp_path, turns, final_text=f"final {MARKUP}{ESCAPE}[/]")
    app = run.app
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1)
        panel = app.query_one(DecisionPanel)
        model = app.query_one(".model-text", Static)
        for widget, expected in ((panel, f"{MARKUP}␛[2J"), (model, f"model says {MARKUP} ␛[2J end")):
            assert expected in plain(widget)
            assert expected in drawn(widget)
            assert "\x1b" not in plain(widget) and "\x1b" not in drawn(widget)
        log = app.query_one("#audit-log", AuditList)
        logged = "\n".join(entry.line for entry in log.entries)
        assert f"says: model says {MARKUP} ␛[2J end" in logged and "\x1b" not in logged

        await answer(pilot, "n", "escape")  # reject, without a reason
        await until_ended(pilot, app)
        final = app.query_one(".final-text", Static)
        assert f"final {MARKUP}␛[2J[/]" in plain(final) and "\x1b" not in drawn(final)
    assert run.desktop.app.values == {}


# ---------------------------------------------------------------------------------------------------
# Help
# ---------------------------------------------------------------------------------------------------
async def test_help_lists_the_keys_and_the_policy_and_k_still_kills(tmp_path: Path) -> None:
    run = live(tmp_path, [FORM_TURN], regions=(SEND_CONFIRM,))
    app = run.app
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = plain(app.screen.query_one(Static))
        for key in ("y", "n", "k", "z", "q"):
            assert f"\n  {key} " in text, key
        for line in run.supervisor.policy.summary():
            assert line in text, line
        assert "region send: confirm at 40,400 160x44" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await answer(pilot, "y")  # the guard has passed, but the help screen is modal: y does not reach the decision
        await pilot.pause(0.1)
        assert main.pending is not None and main.pending.index == 1
        await pilot.press("k")  # the kill switch is a priority binding: it works over the help screen
        await until_ended(pilot, app)
        assert main.final_status == "killed"
    assert run.result_json()["status"] == "killed"
    assert run.desktop.app.values == {}


# ---------------------------------------------------------------------------------------------------
# Themes
# ---------------------------------------------------------------------------------------------------
GOOD_THEME = 'name = "test-night"\nprimary = "#268bd2"\nbackground = "#002b36"\ndark = true\n'


def notifications(app: App[Any]) -> list[Any]:
    return list(app._notifications)


async def test_a_broken_theme_file_is_a_notification_and_the_app_starts(tmp_path: Path) -> None:
    (tmp_path / "broken.toml").write_text('name = "broken"\nprimary = "not a colour"\n')
    (tmp_path / "markup.toml").write_text('name = "markup"\nprimary = "#123456"\n"[/]" = 1\n')
    (tmp_path / "good.toml").write_text(GOOD_THEME)
    app = SCENES["finished"].app(theme="cua-light", theme_dirs=(tmp_path,))
    main = run_screen(app)
    async with app.run_test(size=SIZE, notifications=True) as pilot:  # toasts drawn, as in a terminal
        await until(pilot, lambda: not main.running, "the recorded end")
        await pilot.pause(0.2)
        assert app.theme == "cua-light"
        warnings = [n for n in notifications(app) if n.title == "theme"]
        assert len(warnings) == 2
        assert all(n.severity == "warning" and not n.markup for n in warnings)
        assert any("broken.toml" in n.message and "primary" in n.message for n in warnings)
        assert any("markup.toml" in n.message and "[/]" in n.message for n in warnings)  # shown, not parsed
        assert "test-night" in app.available_themes and "broken" not in app.available_themes
        assert app.is_running


async def test_theme_from_a_file_and_unknown_theme(tmp_path: Path) -> None:
    (tmp_path / "good.toml").write_text(GOOD_THEME)
    app = SCENES["finished"].app(theme="test-night", theme_dirs=(tmp_path,))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "test-night"
        assert app.current_theme.primary == "#268bd2"
        assert notifications(app) == []
        app.theme = "paper"  # as the command palette does
        await pilot.pause()
        assert app.theme == "paper"

    app = SCENES["finished"].app(theme="no-such-theme")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "cua-dark"
        assert any("no-such-theme" in n.message for n in notifications(app))


def test_the_shipped_themes_load() -> None:
    themes, problems = load_themes(project_themes_dir())
    assert problems == []
    names = {theme.name for theme in themes}
    assert {theme.name for theme in BUILTIN} | {"paper", "solarized-night"} <= names


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('name = "x"\nprimary = "#123456\n', "line 2, column 19: invalid TOML: Illegal character '\\n'"),
        ('name = "x"\nprimary = "#123456"\nprimery = "#123456"\n', "line 3: primery: unknown key 'primery'"),
        ('name = "x"\nprimary = "#123456"\naccent = "blurple"\n', "line 3: accent: 'blurple' is not a colour"),
        ('primary = "#123456"\n', "at top level: missing required key 'name'"),
        ('name = "  "\nprimary = "#123456"\n', "line 1: name: must be 1 to 40 characters"),
        ('name = "x"\nprimary = 12\n', "line 2: primary: Expected `str`, got `int`"),
        ('name = "x"\n', "at top level: missing required key 'primary'"),
    ],
    ids=["bad-toml", "unknown-key", "bad-colour", "missing-name", "blank-name", "wrong-type", "missing-primary"],
)
def test_load_theme_file_errors(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(text)
    with pytest.raises(ValueError) as excinfo:
        load_theme_file(path)
    message = str(excinfo.value)
    assert message == f"theme file mine.toml, {error}", message


def test_load_theme_file_and_load_themes(tmp_path: Path) -> None:
    path = tmp_path / "good.toml"
    path.write_text(GOOD_THEME + '[variables]\n"footer-key-foreground" = "#ffffff"\n')
    theme = load_theme_file(path)
    assert (theme.name, theme.primary, theme.background, theme.dark) == ("test-night", "#268bd2", "#002b36", True)
    assert theme.variables == {"footer-key-foreground": "#ffffff"}
    (tmp_path / "bad.toml").write_bytes(b"\xff\xfe not utf-8")
    later = tmp_path / "later"
    later.mkdir()
    (later / "again.toml").write_text(GOOD_THEME.replace("#268bd2", "#ff0000"))
    themes, problems = load_themes(tmp_path, later, tmp_path / "missing")
    assert problems == ["theme file bad.toml, line 1: not UTF-8 text (byte 0)"]
    by_name = {t.name: t for t in themes}
    assert by_name["test-night"].primary == "#ff0000"  # the later folder wins


def test_graphics_protocol_pictures_keep_the_terminal_resolution() -> None:
    """For Kitty/Sixel the picture is fitted to the pane's real pixels, not to half-block cells."""
    from cua_tui.desktops.sim import SimDesktop
    from cua_tui.tui.frames import Target, prepare

    png = SimDesktop().screenshot().png
    fitted = prepare(png, 110, 40, Target(point=(120, 422)), limit=SIM_SCREEN, strips=False, cell_pixels=(10, 20))
    assert fitted.strips == []
    assert fitted.image.size == (1024, 720)  # a 1100x800-pixel pane shows the 1024x720 screen at full size
    assert fitted.image.getpixel((120, 422)) == (255, 0, 200)  # the marker, at full-resolution coordinates
    small = prepare(png, 50, 20, None, limit=SIM_SCREEN, strips=False, cell_pixels=(10, 20))
    assert small.image.size == (500, 352)  # fitted to 500x400 pixels, aspect kept
    halfblock = prepare(png, 100, 40, None, limit=SIM_SCREEN)
    assert halfblock.image.size == (100, 70) and len(halfblock.strips) == 35


async def test_a_second_q_within_seconds_leaves_and_kills_the_run() -> None:
    """Issue 11, point 7: leaving is unambiguous. The first q says that k kills the run and what a second q
    does; the second leaves, and the run is killed on the way out."""
    app = SCENES["refused"].app()
    main = run_screen(app)
    source = main.source
    assert isinstance(source, RecordedRun)
    async with app.run_test(size=SIZE) as pilot:
        rows = app.query_one(BatchPane).rows
        await until(pilot, lambda: 2 in rows and rows[2].state == "not_executed", "the recording on screen")
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running and not source.killed
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "the app to exit")
    assert source.killed


@pytest.mark.parametrize("scene", ["awaiting-decision", "replay", "fleet"])
async def test_a_workers_message_queued_as_the_app_closes_is_dropped(scene: str) -> None:
    """A worker's message (a frame, the screen's text, a run event) can be queued as the App shuts down,
    and a timer can fire then: Textual takes the screens away (their widgets first) while what is queued may
    still be handled. The App drops it; it raised ScreenStackError (a late OCR result did, once, in CI) and
    the caller saw a crash, and a timer's query found nothing (NoMatches)."""
    from cua_tui.tui.fleet_screen import FleetChanged
    from cua_tui.tui.messages import FrameRefused, RunEvent, RunFinished
    from cua_tui.tui.screen_text import ScreenTextRead

    app = SCENES[scene].app()
    close_all = app._close_all  # Textual's own step that removes the screens
    posted: list[bool] = []

    def late() -> tuple[Message, ...]:
        return (
            ScreenTextRead("0" * 64, None, "read late"),
            FrameRendered(prepare(SimDesktop().screenshot().png, 40, 12, limit=SIM_SCREEN), 10**6),
            FrameRefused("refused late", 10**6 + 1),
            RunEvent(ev.Stamped(10**6, "0" * 64, ev.RunEnded(ev.RunStatus.PASSED, "late", 1, 1, 1))),
            RunFinished("passed", "late"),
            FleetChanged(),
        )

    screens: list[object] = []

    def fire_timers() -> None:
        for owner in (app, *screens):  # the Apps' and their screens' timers, firing then
            for timer in ("_poll", "_tick", "_take_changes", "_runs_due", "_tick_deadline"):
                getattr(owner, timer, lambda: None)()

    async def close_then_post() -> None:
        # as while a screen is taken away: still on the stack, its widgets gone; each message handled now
        screens.extend(app.screen_stack)
        await app.screen.remove_children()
        for message in late():
            await app._dispatch_message(message)
        fire_timers()
        await close_all()
        assert app.screen_stack == []
        posted.extend(app.post_message(message) for message in late())  # handled after, by the App's loop
        fire_timers()

    app._close_all = close_then_post  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
    assert posted and all(posted)  # queued behind the closing (not refused at the door), then dropped
