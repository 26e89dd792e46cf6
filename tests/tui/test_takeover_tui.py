"""Take over, hand back, in the TUI (issue 24, points 2, 3 and 6): ``T`` at a decision takes the desktop
(the decision is answered by it), a click on the desktop pane is a click at the pixel under it, passthrough
sends the keys typed to the desktop until ctrl+], ``s`` marks a private stretch, ``T`` hands back and the
run goes on. Live runs on the sim desktop through the TUI's handshake."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import live_app, palette_titles, plain, possible, run_screen, sim_run, until, until_ended

from cua_tui.core.actions import text_sha256
from cua_tui.core.takeover import BY_TAKEOVER, MSG_TAKEN_OVER
from cua_tui.desktops.sim import PHRASE
from cua_tui.tui.desktop_view import DesktopView
from cua_tui.tui.takeover import KILL, KILL_SHOWN, LEAVE, LEAVE_SHOWN, PassthroughScreen, key_action

SIZE = (160, 48)
FIELD = {"type": "click", "button": "left", "x": 250, "y": 182}


def cell_near(desktop: DesktopView, point: tuple[int, int]) -> tuple[int, int]:
    """A cell of the pane whose pixel is within a cell of ``point`` (the whole-screen view)."""
    return next(
        (c, r)
        for r in range(desktop.size.height)
        for c in range(desktop.size.width)
        if (p := desktop.point_at(c, r)) is not None and abs(p[0] - point[0]) <= 12 and abs(p[1] - point[1]) <= 12
    )


def records(run: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run.supervisor.rundir.path / "audit.jsonl").read_text().splitlines()]


@pytest.mark.long
async def test_t_at_a_decision_takes_the_desktop_and_t_hands_it_back(tmp_path: Path) -> None:
    # the run's clock at a tenth of the pace: its 1 s typing pause lasts 10 s, so that the phrase pressed
    # key by key on a loaded machine stays one stretch (the BackSpace, not a pause, ends it here)
    turns: list[dict[str, Any]] = [
        {"actions": [FIELD, {"type": "type", "text": "wrong"}]},
        {"actions": [{"type": "wait"}]},
    ]
    run = sim_run(tmp_path, turns, clock=lambda: time.monotonic() / 10)
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        screen = run_screen(app)
        await until(pilot, lambda: screen.pending is not None, "the typing decision")
        assert possible(app, "takeover") is True or screen.check_action("takeover", ()) is True
        await pilot.press("T")
        await until(pilot, lambda: screen.view.takeover is not None, "the desktop taken over")
        panel = plain(screen.takeover_panel)
        assert "YOU HAVE THE DESKTOP" in panel and "passthrough" in panel
        assert not screen.panel.display and not possible(app, "approve")
        desktop = screen.desktop
        await until(pilot, lambda: desktop.rendered is not None and desktop.settled, "the desktop pane")
        # a click on the pane: at the field's pixel (the pane's border: offsets count from its content)
        dx, dy = desktop.content_region.x - desktop.region.x, desktop.content_region.y - desktop.region.y
        cell = cell_near(desktop, (250, 182))
        await pilot.hover(DesktopView, offset=(cell[0] + dx, cell[1] + dy))
        await until(pilot, lambda: "a click here lands at" in plain(screen.takeover_panel), "where a click lands")
        await pilot.click(DesktopView, offset=(cell[0] + dx, cell[1] + dy))
        # passthrough: the phrase typed in the terminal reaches the desktop, key by key
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, PassthroughScreen), "passthrough")
        await pilot.press(*PHRASE, "k")  # k too is the desktop's here
        await pilot.press("backspace", LEAVE)
        await until(pilot, lambda: not isinstance(app.screen, PassthroughScreen), "passthrough left")
        await pilot.press("s")
        await until(pilot, lambda: screen.view.private, "the private stretch")
        await pilot.press("s")
        await until(pilot, lambda: not screen.view.private, "the private stretch ended")
        verify = cell_near(desktop, (550, 182))
        await pilot.click(DesktopView, offset=(verify[0] + dx, verify[1] + dy))
        taken = sum(1 for r in records(run) if r["kind"] == "proposal" and r.get("by") == BY_TAKEOVER)
        await until(pilot, lambda: sum(
            1 for r in records(run) if r["kind"] == "outcome" and r["index"] >= 2
        ) >= taken and taken == 4, "every input run")  # fmt: skip
        await pilot.press("T")
        await until_ended(pilot, app)
        assert not screen.takeover_panel.display
    audit = records(run)
    theirs = [r for r in audit if r["kind"] == "proposal" and r.get("by") == BY_TAKEOVER]
    assert theirs[0]["action"]["kind"] == "click"
    assert abs(theirs[0]["action"]["x"] - 250) <= 12 and abs(theirs[0]["action"]["y"] - 182) <= 12
    typed = [r["action"] for r in theirs[1:]]
    # the phrase and the k typed after it are one stretch (one action), ended by the BackSpace
    assert [a["kind"] for a in typed] == ["type", "keypress", "click"]
    assert typed[-2]["keys"] == "BackSpace"
    stretch = [r for r in audit if r["kind"] == "typed" and r["index"] == theirs[1]["index"]]
    last = stretch[-1] if stretch else theirs[1]["action"]
    assert (last["text_len"], last["text_sha256"]) == (len(PHRASE) + 1, text_sha256(PHRASE + "k"))
    assert PHRASE not in json.dumps(audit)
    decisions = [r for r in audit if r["kind"] == "decision" and r["by"] == BY_TAKEOVER]
    assert len(decisions) == len(theirs) and all(d["operator"] for d in decisions)
    first = next(r for r in audit if r["kind"] == "decision" and r["by"] != "policy")
    assert first["decision"] == "reject" and first["screen"]  # the decision T answered, with its screen
    outcome = next(r for r in audit if r["kind"] == "outcome" and r["index"] == 1)
    assert (outcome["status"], outcome["message"]) == ("declined", MSG_TAKEN_OVER)
    (ended,) = [r for r in audit if r["kind"] == "takeover_ended"]
    assert "did 4 actions: click at" in ended["told"] and f"type {len(PHRASE) + 1} characters" in ended["told"]
    assert run.supervisor.result is not None and run.supervisor.result.status == "passed"


async def test_in_passthrough_the_kill_chord_kills_and_the_panel_offers_only_what_works(tmp_path: Path) -> None:
    """Issue 34, point 7: in passthrough T and k are the desktop's, typed into the stretch; the panel and the
    bar offer the kill chord and the way out, nothing else; the chord kills the run, the stretch on record."""
    from textual.widgets import Static

    run = sim_run(tmp_path, [{"actions": [FIELD, {"type": "type", "text": "wrong"}]}])
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        screen = run_screen(app)
        await until(pilot, lambda: screen.pending is not None, "the typing decision")
        await pilot.press("T")
        await until(pilot, lambda: screen.view.takeover is not None, "the desktop taken over")
        assert "T hand back" in plain(screen.takeover_panel) and "k kill switch" in plain(screen.takeover_panel)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, PassthroughScreen), "passthrough")
        panel = plain(screen.takeover_panel)
        assert f"{KILL_SHOWN} kill switch" in panel and f"{LEAVE_SHOWN} leave passthrough" in panel
        for offered in ("T hand back", "k kill switch", "p passthrough", "s private", "z whole", "click on the"):
            assert offered not in panel, offered
        bar = plain(app.screen.query_one(Static))
        assert f"{KILL_SHOWN} kill switch" in bar and "then k" not in bar
        # the App's keys are the desktop's here (T does not hand back, k does not kill), but the chord
        assert possible(app, "kill") is False and app.check_action("kill_chord", ()) is True
        await pilot.press("T", "k", "x")

        def typed() -> int:
            """Characters of the reviewer's on record, over their stretches (on a loaded machine a pause of
            1 s between two keys can start another)."""
            return sum(stretches(records(run)).values())

        await until(pilot, lambda: typed() == 3, "T, k and x typed on the desktop")
        assert screen.running and screen.view.takeover is not None
        await pilot.press(KILL)
        await until_ended(pilot, app)
        assert not isinstance(app.screen, PassthroughScreen)
    audit = records(run)
    assert [r["by"] for r in audit if r["kind"] == "kill"] == ["human (TUI)"]
    theirs = [r for r in audit if r["kind"] == "proposal" and r.get("by") == BY_TAKEOVER]
    outcomes = [r for r in audit if r["kind"] == "outcome" and r["index"] in {p["index"] for p in theirs}]
    assert [o["status"] for o in outcomes] == ["executed"] * len(theirs)
    # each stretch's one hash is of its part of "Tkx", in order (one stretch, unless a key came 1 s late)
    offset = 0
    for index, length in stretches(audit).items():
        final = [r for r in audit if r["kind"] == "typed" and r["index"] == index][-1]
        assert final["text_sha256"] == text_sha256("Tkx"[offset : offset + length])
        offset += length
    assert offset == 3
    assert run.supervisor.result is not None and run.supervisor.result.status == "killed"


def stretches(audit: list[dict[str, Any]]) -> dict[int, int]:
    """The reviewer's typing stretches on record: the characters of each, by its action's index."""
    out: dict[int, int] = {}
    for r in audit:
        if r["kind"] == "proposal" and r.get("by") == BY_TAKEOVER and r["action"]["kind"] == "type":
            out[r["index"]] = r["action"]["text_len"]
        elif r["kind"] == "typed" and r["index"] in out:
            out[r["index"]] = r["text_len"]
    return out


def test_keys_become_the_desktops_actions() -> None:
    typed = key_action("a", "a")
    assert not isinstance(typed, str) and typed.text == "a"
    upper = key_action("A", "A")
    assert not isinstance(upper, str) and upper.text == "A"
    for key, chord in (("enter", "Return"), ("ctrl+a", "ctrl+a"), ("shift+tab", "shift+Tab"), ("f5", "F5")):
        action = key_action(key, None)
        assert not isinstance(action, str) and action.chord == chord, key
    assert isinstance(key_action("ctrl+nonsense_key", None), str)
    # the kill chord has no name on the desktop: no program there could get it from passthrough
    assert isinstance(key_action(KILL, "\x1c"), str)


async def test_the_palette_takes_over_and_hands_back(tmp_path: Path) -> None:
    run = sim_run(tmp_path, [{"actions": [FIELD, {"type": "type", "text": "wrong"}]}])
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        screen = run_screen(app)
        await until(pilot, lambda: screen.pending is not None, "the typing decision")
        titles = await palette_titles(pilot, app, "take over")
        assert titles[0] == "Take over" and "Hand back" not in titles
        await pilot.press("enter")
        await until(pilot, lambda: screen.view.takeover is not None, "the desktop taken over")
        titles = await palette_titles(pilot, app, "hand back")
        assert titles[0] == "Hand back" and "Take over" not in titles
        await pilot.press("enter")
        await until_ended(pilot, app)
    assert [r["kind"] for r in records(run)].count("takeover_ended") == 1


async def test_a_run_of_fast_approvals_is_said_once(tmp_path: Path) -> None:
    """Issue 25, point 5: the pace check, through the App every view answers with (once, not a dialog)."""
    from cua_tui.core.ports import Answer

    run = sim_run(tmp_path, [{"actions": [{"type": "wait"}]}])
    app = live_app(run)
    told: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        real = app.notify

        def notify(message: str, **kwargs: Any) -> None:
            told.append(message)
            real(message, **kwargs)

        app.notify = notify  # type: ignore[method-assign]
        for _ in range(7):
            app.paced(Answer.APPROVE, 300)
        await pilot.pause()
        assert len(app.screen_stack) == 1  # a notice, not a dialog over the run
        await until_ended(pilot, app)
    assert len([m for m in told if "approvals in a row" in m]) == 1
