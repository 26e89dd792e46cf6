"""Pilot tests of issue 11, point 6: history and detail in the live supervision TUI.

The batch pane keeps every turn (scroll back), the audit pane opens any event in full (Enter) and filters
(`/`), ids and hashes are copied (OSC 52), the command palette offers cua-tui's own commands, and the mouse
selects rows and scrolls. Runs are real: a Supervisor on the in-process sim desktop with a script agent,
decisions through the HandshakeApprover, wired by the one builder as ``cua-tui run`` wires them.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import answer, live_app, palette_titles, plain, run_screen, sim_run, until, until_ended
from scenes import SCENES
from textual.command import CommandPalette
from textual.events import MouseScrollDown, MouseScrollUp
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Input, Static

from cua_tui.core.supervisor import Supervisor
from cua_tui.desktops.sim import PHRASE
from cua_tui.tui.app import CuaApp
from cua_tui.tui.audit_list import AuditList
from cua_tui.tui.audit_pane import AuditPane
from cua_tui.tui.batch import BatchPane, TurnSummary
from cua_tui.tui.detail import DetailScreen
from cua_tui.tui.screen_text import ScreenTextRead

pytestmark = pytest.mark.timeout(90)

SIZE = (160, 50)
SMALL = (80, 24)
FIELD = (250, 182)  # the sim form's phrase field
VERIFY = (550, 182)  # its Verify button
HOSTILE = "[red]not red[/red] \x1b[2J\x1b]52;c;ZXZpbA==\x07 end"  # markup, a screen clear, an OSC 52 of its own


def click(point: tuple[int, int]) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": point[0], "y": point[1]}


def typing(text: str) -> dict[str, Any]:
    return {"type": "type", "text": text}


def clicks(turns: int) -> list[dict[str, Any]]:
    """``turns`` turns of one allowed click each: history that needs no decision."""
    return [{"text": f"step {t + 1}: clicking the field", "actions": [click(FIELD)]} for t in range(turns)]


TYPE_TURN = {"text": "typing the phrase", "actions": [click(FIELD), typing(PHRASE), click(VERIFY)]}


@dataclass
class Live:
    app: CuaApp
    supervisor: Supervisor

    @property
    def path(self) -> Path:
        return self.supervisor.rundir.path

    def lines(self) -> list[bytes]:
        return self.supervisor.rundir.audit.read_bytes().splitlines()

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines()]


def live(tmp_path: Path, turns: list[dict[str, Any]]) -> Live:
    run = sim_run(tmp_path, turns, task="history task")
    return Live(live_app(run), run.supervisor)


async def until_decision(pilot: Pilot[Any], app: CuaApp, turn: int, index: int) -> None:
    main = run_screen(app)

    def asked() -> bool:
        return main.pending is not None and (main.pending.turn, main.pending.index) == (turn, index)

    await until(pilot, asked, f"the decision on turn {turn}, action {index + 1}")
    await pilot.pause()


def detail(app: CuaApp) -> str:
    assert isinstance(app.screen, DetailScreen), app.screen
    return plain(app.screen.query_one("#detail-text", Static))


def drawn_screen(app: CuaApp) -> str:
    """Every character the terminal shows now (all layers composed)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def osc52(app: CuaApp) -> list[str]:
    """What the App writes to the terminal from now on that is an OSC 52 clipboard sequence (decoded)."""
    driver = app._driver
    assert driver is not None
    seen: list[str] = []
    write = driver.write

    def spy(data: str) -> None:
        if data.startswith("\x1b]52;c;"):
            seen.append(base64.b64decode(data[len("\x1b]52;c;") : -1]).decode())
        write(data)

    driver.write = spy  # type: ignore[method-assign]
    return seen


def shown(app: CuaApp) -> list[str]:
    return [entry.kind for entry in app.query_one(AuditList).shown]


def messages(app: CuaApp) -> list[tuple[str, str]]:
    return [(str(n.title), str(n.message)) for n in app._notifications]


# ---------------------------------------------------------------------------------------------------
# The batch pane keeps every turn
# ---------------------------------------------------------------------------------------------------
async def test_earlier_turns_stay_in_the_batch_pane_after_a_new_turn(tmp_path: Path) -> None:
    run = live(tmp_path, [*clicks(2), TYPE_TURN])
    app = run.app
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 3, 1)
        batch = app.query_one(BatchPane)
        assert batch.border_title == "Turn 3 batch"
        summaries = list(batch.query(TurnSummary))
        assert [s.turn for s in summaries] == [1, 2]
        first = plain(summaries[0])
        assert first.startswith("Turn 1 · 1 action · model: step 1: clicking the field")
        assert "click at (250, 182)" in first and "EXECUTED" in first
        # the current turn in full: its three rows, the second one pending
        assert sorted(batch.rows) == [0, 1, 2] and batch.rows[1].has_class("pending")
        assert plain(batch.rows[1]).startswith("▶")
        # in order: the earlier turns above the current one
        children = list(batch.children)
        assert children.index(summaries[1]) < children.index(batch.rows[0])
        await answer(pilot, "y")
        await until_ended(pilot, app)
        assert [s.turn for s in batch.query(TurnSummary)] == [1, 2]  # the last turn stays in full


async def test_the_pending_row_is_in_view_at_80x24_after_many_turns(tmp_path: Path, monkeypatch: Any) -> None:
    # A small bound, to see it hold: set before the app exists, as the run's turns arrive from its start.
    monkeypatch.setattr(BatchPane, "KEEP", 5)
    run = live(tmp_path, [*clicks(12), TYPE_TURN])
    app = run.app
    async with app.run_test(size=SMALL) as pilot:
        batch = app.query_one(BatchPane)
        assert batch.keep == 5
        await until_decision(pilot, app, 13, 1)

        def in_view() -> bool:
            pending = batch.rows[1]
            return batch.scroll_offset.y > 0 and batch.scrollable_content_region.contains(*pending.region.offset)

        # the scroll to the pending row can take more than one refresh on a loaded machine: wait for it to land
        await until(pilot, in_view, "the batch scrolled the pending row into view")
        assert "▶" in drawn_screen(app)  # the marker on the terminal
        assert [s.turn for s in batch.query(TurnSummary) if not s.has_class("turn-elided")] == [8, 9, 10, 11, 12]
        assert batch.dropped == 7
        assert plain(batch.query_one(".turn-elided", Static)).startswith("7 earlier turns not shown here")
        assert len(batch.children) <= 5 + 1 + 1 + 3  # the bound: sections, the count, the words, the rows
        await pilot.press("k")
        await until_ended(pilot, app)


async def test_mouse_wheel_scrolls_the_batch_pane_and_a_click_opens_a_row(tmp_path: Path) -> None:
    run = live(tmp_path, [*clicks(6), TYPE_TURN])
    app = run.app
    async with app.run_test(size=SMALL) as pilot:
        await until_decision(pilot, app, 7, 1)
        batch = app.query_one(BatchPane)
        pending = batch.rows[1]

        def at_pending() -> bool:
            # the scroll that ends on the pending row, not a step of it: on a loaded machine rows are still
            # laid out after the first scroll, and the row is brought back to the top once they are (or as
            # far as the pane scrolls, where the rows below it are fewer than a pane's height)
            top = pending.region.y == batch.content_region.y
            return batch.scroll_offset.y > 0 and (top or batch.scroll_offset.y == batch.max_scroll_y)

        await until(pilot, at_pending, "the batch scrolled to the pending row")
        before = batch.scroll_offset.y
        await pilot._post_mouse_events([MouseScrollUp], batch, offset=(10, 3))
        await pilot._post_mouse_events([MouseScrollUp], batch, offset=(10, 3))
        await until(pilot, lambda: batch.scroll_offset.y < before, "the wheel to scroll the batch up")
        assert not batch.following
        up = batch.scroll_offset.y
        # the screen's text read late (the panel grows): the reviewer's place is kept
        screen = run_screen(app)
        assert screen.view.screen is not None and screen._focus_target() is not None
        screen.screen_text_read(ScreenTextRead(screen.view.screen.sha256, None, problem="read late"))
        await pilot.pause(0.2)
        assert batch.scroll_offset.y == up and not batch.following
        await pilot._post_mouse_events([MouseScrollDown], batch, offset=(10, 3))
        await until(pilot, lambda: batch.scroll_offset.y > up, "the wheel to scroll the batch down")

        # a click on the pending row: its detail, with the policy's reason and its audit events
        batch.scroll_to_widget(batch.rows[1], animate=False, top=True)
        await pilot.pause(0.1)
        await pilot.click(batch.rows[1], offset=(4, 0))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the row's detail")
        text = detail(app)
        assert "Turn 7 · action 2 · type" in text
        assert "verdict     CONFIRM: " in text
        assert "Its audit events" in text and "· proposal · hash " in text and "· verdict · hash " in text
        assert '"call_id"' in text and PHRASE not in text  # typed text is never in the audit record
        await pilot.press("escape")
        await pilot.pause()

        # a click on an earlier turn: that turn in full, with what the model heard
        section = next(s for s in batch.query(TurnSummary) if s.turn == 6)
        batch.scroll_to_widget(section, animate=False, top=True)
        await pilot.pause(0.1)
        await pilot.click(section, offset=(4, 0))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the turn's detail")
        text = detail(app)
        assert text.startswith("Turn 6 · 1 action") and "step 6: clicking the field" in text
        assert "the model heard: OK" in text
        await pilot.press("escape")
        await pilot.press("k")
        await until_ended(pilot, app)


# ---------------------------------------------------------------------------------------------------
# The audit pane: any event in full, literally; search and filter
# ---------------------------------------------------------------------------------------------------
async def test_enter_on_an_audit_row_shows_the_whole_event_literally_and_c_copies_its_hash(tmp_path: Path) -> None:
    run = live(tmp_path, [{"text": f"model says {HOSTILE}", "actions": [click(FIELD), typing(PHRASE)]}])
    app = run.app
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1, 1)
        log = app.query_one(AuditList)
        assert app.focused is log
        turn_at = next(i for i, e in enumerate(log.shown) if e.kind == "model_turn")
        presses = len(log.shown) - turn_at
        await pilot.press(*["up"] * presses)  # from the newest event up to the model's turn
        assert log.selected_entry is not None and log.selected_entry.kind == "model_turn"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the event's detail")
        text = detail(app)
        entry = log.selected_entry
        line = run.lines()[entry.seq]
        assert entry.head == hashlib.sha256(line).hexdigest()  # the chain hash of its line in audit.jsonl
        assert f"event {entry.seq} · model_turn" in text and f"hash  {entry.head}" in text
        assert f"prev  {hashlib.sha256(run.lines()[entry.seq - 1]).hexdigest()}" in text
        record = run.records()[entry.seq]
        for name in ("turn", "calls", "actions", "input_tokens"):  # every field
            assert f'"{name}": {json.dumps(record[name])}' in text
        # the hostile text: markup and escapes shown as characters, never obeyed
        assert "[red]not red[/red] \\u001b[2J\\u001b]52;c;ZXZpbA==\\u0007 end" in text
        screen = drawn_screen(app)
        assert "[red]not red[/red]" in screen and "\x1b" not in screen
        assert "\x1b" not in text

        seen = osc52(app)
        await pilot.press("c")
        await pilot.pause()
        assert app.clipboard == entry.head and seen == [entry.head]
        assert ("clipboard", f"copied event hash: {entry.head}") in messages(app)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, DetailScreen), "the detail closed")

        # a click on a line selects it; a second click opens it (the selection first moved off the top line)
        await pilot.press(*["down"] * presses)
        assert log.selected_entry is not log.shown[log.scroll_offset.y]
        await pilot.click(log, offset=(2, 0))
        selected = log.selected_entry
        assert selected is not None and selected is log.shown[log.scroll_offset.y]
        assert not isinstance(app.screen, DetailScreen)
        await pilot.click(log, offset=(2, 0))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the clicked event's detail")
        assert f"event {selected.seq} · {selected.kind}" in detail(app)
        await pilot.press("escape")
        await pilot.press("k")
        await until_ended(pilot, app)


async def test_slash_filters_the_audit_list_by_kind_and_by_text(tmp_path: Path) -> None:
    run = live(tmp_path, [*clicks(2), TYPE_TURN])
    app = run.app
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 3, 1)
        log = app.query_one(AuditList)
        everything = len(log.shown)
        await pilot.press("slash")
        search = app.query_one("#audit-search", Input)
        assert app.focused is search
        await pilot.press(*"kind:outcome")  # k is a letter here, not the kill switch
        await pilot.pause()
        assert main.running and not main.view.killed and "kill" not in [r["kind"] for r in run.records()]
        outcomes = [r for r in run.records() if r["kind"] == "outcome"]
        assert shown(app) == ["outcome"] * len(outcomes) and len(outcomes) == 3  # turn 1, turn 2, turn 3's first
        await pilot.press("enter")  # keeps the filter, back to the list
        assert app.focused is cast(Widget, log)  # (mypy keeps app.focused narrowed to the Input above)
        assert app.query_one(AuditPane).border_subtitle == f"filter: kind:outcome · 3 of {len(log.entries)}"

        await pilot.press("slash")
        search = app.query_one("#audit-search", Input)
        # the filter's words set at once (typing them, as above, costs a redraw a key on a loaded machine)
        search.value = "step 2:"
        await pilot.pause()
        assert shown(app) == ["model_turn"]  # the words of turn 2
        search.value = "step 2: kind:decision"  # words and kinds together: none of both
        await pilot.pause()
        assert shown(app) == []
        search.value = "kind:verdict,decision_requested"
        await pilot.pause()
        assert set(shown(app)) == {"verdict", "decision_requested"}
        assert shown(app).count("decision_requested") == 1
        search.value = "kind:dec"  # the start of kinds
        await pilot.pause()
        assert set(shown(app)) == {"decision", "decision_requested"}
        await pilot.press("escape")  # clears the filter
        await pilot.pause()
        assert len(log.shown) >= everything and not log.search.active
        assert not app.query("#audit-search")
        await pilot.press("slash", *"kind:nonsense")
        await pilot.pause()
        assert shown(app) == [] and "no kind nonsense" in str(app.query_one(AuditPane).border_subtitle)
        await pilot.press("enter")
        assert any("no event kind nonsense; kinds: " in m for _, m in messages(app))
        await pilot.press("slash", "escape")
        await pilot.press("k")
        await until_ended(pilot, app)
        assert run.supervisor.rundir.result_json.exists()


# ---------------------------------------------------------------------------------------------------
# The command palette: cua-tui's own commands, those possible now
# ---------------------------------------------------------------------------------------------------


async def test_the_palette_lists_cua_commands_and_kill_from_it_kills(tmp_path: Path) -> None:
    run = live(tmp_path, [TYPE_TURN])
    app = run.app
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1, 1)
        titles = await palette_titles(pilot, app)
        for title in ("Approve", "Edit", "Reject", "Kill switch", "Copy run directory", "Verify now", "Help"):
            assert title in titles, titles
        assert {"Zoom", "Screen text", "Open screenshot"} <= set(titles)  # z frames the field clicked last
        assert "Grants" not in titles  # none in force
        assert "Theme" in titles  # Textual's own stay
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, CommandPalette), "the palette closed")

        titles = await palette_titles(pilot, app, "kill")
        assert titles[0] == "Kill switch" and main.running  # typing k in the palette is no kill
        await pilot.press("enter")
        await until_ended(pilot, app)
        assert main.final_status == "killed"
        assert [r["by"] for r in run.records() if r["kind"] == "kill"] == ["human (TUI)"]

        titles = await palette_titles(pilot, app)  # after the end: nothing to decide, kill or verify live
        assert not {"Approve", "Reject", "Kill switch"} & set(titles)
        assert "Verify now" in titles


async def test_verify_now_reports_the_chain_and_finds_an_edit(tmp_path: Path) -> None:
    run = live(tmp_path, [TYPE_TURN])
    app = run.app
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1, 1)
        await palette_titles(pilot, app, "verify now")
        await pilot.press("enter")
        events = len(run.lines())
        await until(pilot, lambda: any(t == "verify: intact" for t, _ in messages(app)), "the verdict")
        verdict = next(m for t, m in messages(app) if t == "verify: intact")
        assert verdict.startswith(f"intact prefix, UNSEALED: {events} events verified")

        # an edit to a line written so far: the same command now says where the chain breaks
        lines = run.lines()
        edited = json.loads(lines[2])
        edited["ts"] = edited["ts"] + 1
        lines[2] = json.dumps(edited, separators=(",", ":")).encode()
        run.supervisor.rundir.audit.write_bytes(b"\n".join(lines) + b"\n")
        await app.run_action("verify_now", app.screen)
        await until(pilot, lambda: any(t == "verify: NOT INTACT" for t, _ in messages(app)), "the second verdict")
        broken = next(m for t, m in messages(app) if t == "verify: NOT INTACT")
        assert "line 3" in broken or "line 4" in broken, broken
        await pilot.press("k")
        await until_ended(pilot, app)


@pytest.mark.long
async def test_copy_run_directory_and_show_policy_from_the_palette(tmp_path: Path) -> None:
    run = live(tmp_path, [TYPE_TURN])
    app = run.app
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1, 1)
        seen = osc52(app)
        await palette_titles(pilot, app, "copy run directory")
        await pilot.press("enter")
        await until(pilot, lambda: app.clipboard == str(run.path), "the run directory copied")
        assert seen == [str(run.path)]
        assert ("clipboard", f"copied run directory: {run.path}") in messages(app)

        await palette_titles(pilot, app, "show policy")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the policy")
        text = detail(app)
        for line in run.supervisor.config.policy.summary():
            assert line in text
        await pilot.press("escape")
        await pilot.press("k")
        await until_ended(pilot, app)


async def test_palette_entries_follow_the_actions_the_app_has() -> None:
    """A recording has no run directory (nothing to copy or verify); the screen-text entry runs the App's
    action (the same as t)."""
    from cua_tui.tui.screen_text import ScreenTextScreen

    app = SCENES["awaiting-decision"].app()
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.pending is not None, "the recorded decision")
        titles = await palette_titles(pilot, app)
        assert {"Approve", "Screen text", "Open screenshot", "Copy run id"} <= set(titles)
        assert "Copy run directory" not in titles and "Verify now" not in titles
        await pilot.press("escape")
        titles = await palette_titles(pilot, app, "screen text")
        assert titles[0] == "Screen text"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ScreenTextScreen), "the screen-text view")
