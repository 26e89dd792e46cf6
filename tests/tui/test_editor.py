"""Edit, then approve, in the TUI (issue 24, point 1): ``e`` at a decision opens the editor in the panel's
place; the text (control characters written out), the chord, the scroll and the point (arrows: one screen
pixel, shift: ten; a click on the desktop pane) change; Enter approves the edit, which the run checks and
classifies again; Esc goes back. Live runs on the sim desktop through the TUI's handshake."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import answer, guard_of, live_app, plain, possible, run_screen, sim_run, until, until_ended
from textual import events
from textual.keys import _character_to_key
from textual.widgets import Input, Static

from cua_tui.build import Run
from cua_tui.core.actions import text_sha256
from cua_tui.tui.desktop_view import DesktopView
from cua_tui.tui.detail import action_detail
from cua_tui.tui.editor import ActionEditor

SIZE = (160, 48)
FIELD = {"type": "click", "button": "left", "x": 250, "y": 182}
SEND = {"name": "send", "x": 40, "y": 400, "width": 160, "height": 44, "verdict": "confirm", "reason": "sends"}
WIPE = {"name": "wipe", "x": 600, "y": 400, "width": 100, "height": 40, "verdict": "block", "reason": "wipes"}


def run_of(tmp_path: Path, turns: list[dict[str, Any]], regions: tuple[dict[str, Any], ...] = ()) -> Run:
    return sim_run(tmp_path, turns, task="edit test", regions=regions)


def decisions(run: Run) -> list[dict[str, Any]]:
    lines = (run.supervisor.rundir.path / "audit.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "decision" and r["by"] != "policy"]


def outcomes(run: Run) -> list[dict[str, Any]]:
    lines = (run.supervisor.rundir.path / "audit.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "outcome"]


async def until_asked(pilot: Any, app: Any) -> None:
    await until(pilot, lambda: run_screen(app).pending is not None, "a decision")


def editor_of(app: Any) -> ActionEditor:
    editor = run_screen(app).editor
    assert editor is not None
    return editor


async def test_typed_text_is_corrected_with_its_control_characters_written_out(tmp_path: Path) -> None:
    run = run_of(tmp_path, [{"actions": [FIELD, {"type": "type", "text": "helo\tx"}]}])
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app)
        screen = run_screen(app)
        assert "e edit" in plain(screen.panel).replace("  ", " ")
        await answer(pilot, "e")
        editor = editor_of(app)
        field = editor.query_one(Input)
        assert field.value == "helo\\tx" and field.has_focus
        # y, n and a wait while the edit is open; k is a letter of the text (ctrl+k is the kill switch)
        assert not possible(app, "approve") and not possible(app, "reject") and not possible(app, "kill")
        await pilot.press(*["backspace"] * 4, "l", "o", "\\", "n")
        assert field.value == "hello\\n"
        assert "as edited: type 6 characters: hello↵" in plain(editor.query_one("#edit-draft", Static))
        assert "needs a decision" in plain(editor.query_one("#edit-verdict", Static))
        await pilot.press("enter")
        await until_ended(pilot, app)
    (decision,) = decisions(run)
    assert decision["decision"] == "approve" and decision["edited"]["ran"]["text_len"] == 6
    assert decision["edited"]["ran"]["text_sha256"] == text_sha256("hello\n")
    assert decision["screen"] and decision["shown_ms"] >= 0
    said = outcomes(run)[-1]["message"]
    assert said == "OK. The reviewer changed the text before it ran: 6 characters were typed (you proposed 6)."


async def test_a_click_is_moved_with_the_arrows_and_a_click_on_the_pane(tmp_path: Path) -> None:
    click = {"type": "click", "button": "left", "x": 45, "y": 405}
    run = run_of(tmp_path, [{"actions": [click]}], regions=(SEND, WIPE))
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app)
        await answer(pilot, "e")
        editor = editor_of(app)
        assert editor.has_focus and run_screen(app).desktop.exact
        await pilot.press("right", "right", "down", "shift+right", "shift+down")
        assert editor.point == (57, 416)
        desktop = run_screen(app).desktop
        await until(pilot, lambda: desktop.settled and desktop.rendered is not None, "the exact zoom")
        rendered = desktop.rendered
        assert rendered is not None and rendered.zoomed and rendered.magnify >= 2
        # a click on the pane: the pixel under it, exactly (a cell is one screen pixel here)
        width, height = desktop.size
        # the pane's border: a click's offset counts from the widget's edge, the picture from its content
        dx, dy = desktop.content_region.x - desktop.region.x, desktop.content_region.y - desktop.region.y
        for col, row in ((width // 2, height // 2), (width // 2 + 7, height // 2 - 3)):
            await until(pilot, lambda: desktop.settled, "the frame around the point")
            expected = desktop.point_at(col, row)
            assert expected is not None
            await pilot.click(DesktopView, offset=(col + dx, row + dy))
            assert editor.point == expected
        # into the blocked region: shown, and Enter does not approve it
        editor.place((650, 420))
        await pilot.pause()
        assert "BLOCKED" in plain(editor.query_one("#edit-verdict", Static))
        await pilot.press("enter")
        await pilot.pause()
        assert run_screen(app).editor is editor
        editor.place((120, 422))
        await pilot.pause()
        await pilot.press("enter")
        await until_ended(pilot, app)
        # the batch row and its detail: what ran, and what the model proposed
        shown = run_screen(app).batch_pane.rows[0]
        await until(pilot, lambda: shown.proposed != "", "the row to say it was edited")
        assert (shown.params, shown.proposed) == ("click at (120, 422)", "click at (45, 405)")
        assert "(edited; proposed: click at (45, 405))" in str(shown.content)
        detail = action_detail(shown.snapshot(), [])
        assert "as proposed click at (45, 405) (the reviewer changed it before it ran)" in detail.body.plain
    (decision,) = decisions(run)
    assert decision["edited"]["ran"] == {"kind": "click", "x": 120, "y": 422, "button": "left"}
    assert outcomes(run)[0]["message"].endswith("click at (120, 422) ran, not click at (45, 405).")


async def test_escape_goes_back_and_a_decision_that_closes_takes_the_editor_with_it(tmp_path: Path) -> None:
    run = run_of(tmp_path, [{"actions": [{"type": "keypress", "keys": ["Return"]}]}])
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app)
        await answer(pilot, "e")
        field = editor_of(app).query_one(Input)
        assert field.value == "Return"
        await pilot.press("escape")
        screen = run_screen(app)
        assert screen.editor is None and screen.panel.display and possible(app, "approve")
        await answer(pilot, "e")
        editor = editor_of(app)
        await pilot.press("ctrl+k")  # the kill switch while typing in the field
        await until(pilot, lambda: run_screen(app).editor is None, "the editor closed with its decision")
        assert not editor.is_attached
        await until_ended(pilot, app)
    assert decisions(run) == [] and [o["status"] for o in outcomes(run)] != ["executed"]
    kinds = [json.loads(line)["kind"] for line in (run.supervisor.rundir.path / "audit.jsonl").read_text().splitlines()]
    assert "kill" in kinds


@pytest.mark.parametrize(("written", "sent"), [("tab", "Tab"), ("ctrl+shift+T", "ctrl+shift+t")])
async def test_a_chord_is_changed(tmp_path: Path, written: str, sent: str) -> None:
    run = run_of(tmp_path, [{"actions": [{"type": "keypress", "keys": ["Return"]}]}])
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app)
        await answer(pilot, "e")
        editor_of(app).query_one(Input).value = written
        await pilot.pause()
        await pilot.press("enter")
        await until_ended(pilot, app)
    (decision,) = decisions(run)
    assert decision["edited"]["ran"]["keys"] == sent


async def test_the_palette_opens_the_editor_with_the_focus_in_its_field(tmp_path: Path) -> None:
    from textual.command import CommandPalette

    run = run_of(tmp_path, [{"actions": [FIELD, {"type": "type", "text": "x"}]}])
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app)
        await until(pilot, guard_of(app).passed, "the input guard")
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"edit")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await until(pilot, lambda: run_screen(app).editor is not None, "the editor")
        await until(pilot, lambda: editor_of(app).query_one(Input).has_focus, "the focus in the editor's field")
        await pilot.press("y")  # a letter of the text, not an approval
        assert editor_of(app).query_one(Input).value == "xy"
        await pilot.press("ctrl+k")
        await until_ended(pilot, app)


async def test_a_drags_ends_and_a_scrolls_notches_and_point_are_edited(tmp_path: Path) -> None:
    drag = {"type": "drag", "path": [{"x": 50, "y": 410}, {"x": 300, "y": 300}]}
    scroll = {"type": "scroll", "x": 60, "y": 420, "scroll_x": 0, "scroll_y": 300}
    run = run_of(tmp_path, [{"actions": [drag]}, {"actions": [scroll]}], regions=(SEND,))
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app)
        await answer(pilot, "e")
        editor = editor_of(app)
        assert editor.ends == [(50, 410), (300, 300)] and editor.handle == 1  # the end moves first
        await pilot.press("right", "tab", "shift+down")
        assert editor.ends == [(50, 420), (301, 300)]
        assert "(moving its start)" in plain(editor.query_one("#edit-draft", Static))
        await pilot.press("enter")
        await until(pilot, lambda: len(decisions(run)) == 1, "the drag's decision recorded")
        await until(pilot, lambda: run_screen(app).pending is not None, "the scroll's decision")
        await answer(pilot, "e")
        editor = editor_of(app)
        field = editor.query_one(Input)
        assert field.value == "0 3"
        field.value = "0 -2"
        await pilot.press("up")  # the arrows move the scroll's point while its amount has the focus
        assert editor.point == (60, 419)
        await pilot.press("enter")
        await until_ended(pilot, app)
    first, second = decisions(run)
    assert first["edited"]["ran"]["path"] == [[50, 420], [301, 300]]
    assert (second["edited"]["ran"]["scroll_y"], second["edited"]["ran"]["y"]) == (-2, 419)


def burst(*keys: str) -> list[events.Key]:
    """Key events as a terminal delivers a fast typist's keys: named keys ("backspace", "enter") and
    characters, posted to the App all at once, with no wait for any of them to be handled."""
    out = []
    for key in keys:
        if len(key) == 1:
            out.append(events.Key(_character_to_key(key), key))
        else:
            out.append(events.Key(key, "\r" if key == "enter" else None))
    return out


async def test_a_burst_of_keys_after_e_is_approved_exactly_as_typed(tmp_path: Path) -> None:
    """The defect: Textual inserts a letter in the field's own queue but runs a BackSpace only once its event
    has bubbled up to the App, so a burst of BackSpaces then a phrase lost the phrase's end ("cua-tui
    verif" approved for "cua-tui verified"). And keys typed right after e, before the field had the focus,
    went to the App's keys: a k there was the kill switch."""
    proposed, typed = "cua-tui verifyd", "kay: yes, no, all verified"
    run = run_of(tmp_path, [{"actions": [FIELD, {"type": "type", "text": proposed}]}])
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app)
        await until(pilot, guard_of(app).passed, "the input guard")
        for key in burst("e", *["backspace"] * (len(proposed) + 1), *typed):
            app.post_message(key)
        await until(pilot, lambda: run_screen(app).editor is not None, "the editor")
        field = editor_of(app).query_one(Input)
        await until(pilot, lambda: field.value == typed, f"the field to read {typed!r}")
        app.post_message(burst("enter")[0])
        await until_ended(pilot, app)
    (decision,) = decisions(run)
    assert decision["decision"] == "approve"
    assert decision["edited"]["ran"]["text_sha256"] == text_sha256(typed)


async def test_bursts_of_backspaces_and_text_then_enter_approve_each_text_typed(tmp_path: Path) -> None:
    """Thirty bursts into one open editor, each erasing what is there and typing a new text, then Enter at
    once: what the field holds when Enter is handled is the last text, every time."""
    proposed = "x" * 16
    run = run_of(tmp_path, [{"actions": [FIELD, {"type": "type", "text": proposed}]}])
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app)
        await answer(pilot, "e")
        field = editor_of(app).query_one(Input)
        previous = field.value
        for n in range(30):
            text = f"burst {n:02d}: cua-tui verified"
            for key in burst(*["backspace"] * (len(previous) + 1), *text):
                app.post_message(key)
            await until(pilot, partial(lambda want: field.value == want, text), f"burst {n} in the field")
            previous = text
        for key in burst(*["backspace"] * (len(previous) + 1), *"the last text", "enter"):
            app.post_message(key)
        await until_ended(pilot, app)
    (decision,) = decisions(run)
    assert decision["edited"]["ran"]["text_sha256"] == text_sha256("the last text")


async def test_a_burst_into_the_reason_box_is_the_reason_recorded(tmp_path: Path) -> None:
    run = run_of(tmp_path, [{"actions": [FIELD, {"type": "type", "text": "secret"}]}])
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app)
        await until(pilot, guard_of(app).passed, "the input guard")
        reason = "use the search box, k is a letter"
        for key in burst("n", *"wrong words", *["backspace"] * 12, *reason, "enter"):
            app.post_message(key)
        await until_ended(pilot, app)
    (decision,) = decisions(run)
    assert decision["decision"] == "reject" and decision["note"] == reason


async def test_a_paste_into_the_editor_runs_exactly_what_was_pasted(tmp_path: Path) -> None:
    """A paste is written with the field's escapes: a real U+200B, an escape byte and the six characters
    ``\\u200b`` pasted together run as exactly those characters (the literal text is not made a U+200B)."""
    pasted = "pay\u200b\x1bnow \\u200b"
    run = run_of(tmp_path, [{"actions": [FIELD, {"type": "type", "text": "x"}]}])
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await until_asked(pilot, app)
        await answer(pilot, "e")
        field = editor_of(app).query_one(Input)
        await pilot.press("backspace")
        app.post_message(events.Paste(pasted + "\nsecond line, dropped"))
        await until(pilot, lambda: field.value != "", "the paste in the field")
        assert field.value == "pay\\u200b\\x1bnow \\\\u200b"
        await pilot.press("enter")
        await until_ended(pilot, app)
    (decision,) = decisions(run)
    assert decision["edited"]["ran"]["text_sha256"] == text_sha256(pasted)
