"""Pilot tests of the screen as text (issue 11, point 2): ``t`` (the OCR'd page, nearest the target first,
searchable, literal), the panel's "goes to" line for typing, the framed picture at a decision and ``z`` for
typing too, ``o`` writing the full-resolution screenshot, and Tesseract missing.

Live runs are real (the one builder, the handshake the TUI answers); the OCR is real Tesseract on the real
screenshots: the sim desktop's, and the injection lab's on the real local desktop (Xvfb + Chromium) at 160x48.
"""

from __future__ import annotations

import hashlib
import io
import stat
from pathlib import Path
from typing import Any

import pytest
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from PIL import Image
from pilot_helpers import answer, drawn, footer_actions, plain, possible, quick_clock, run_screen, until
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Input, Static

from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.core import events as ev
from cua_tui.core.imaging import ScreenLimit
from cua_tui.core.screentext import ScreenText, ScreenTextReader, Word
from cua_tui.desktops.sim import PHRASE, SimDesktop
from cua_tui.ocr import INSTALL, ScreenReader
from cua_tui.tui.app import CuaApp
from cua_tui.tui.decision_panel import DecisionPanel
from cua_tui.tui.desktop_view import DesktopView
from cua_tui.tui.run_screen import supervisor_app
from cua_tui.tui.screen_text import NO_READER, ScreenTextScreen, ShownScreen, render_text
from cua_tui.tui.source import LiveRun

pytestmark = pytest.mark.timeout(120)

SIZE = (160, 50)
FIELD = (250, 182)  # the sim form's phrase field
VERIFY = (550, 182)
SEND = (120, 422)  # the sim form's Send button
READER = ScreenReader()  # Tesseract, as the command line passes it to the App
SEND_CONFIRM = {"name": "send", "x": 40, "y": 400, "width": 160, "height": 44, "verdict": "confirm", "reason": "sends"}


def click(point: tuple[int, int]) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": point[0], "y": point[1]}


FORM_TURN = {"actions": [click(FIELD), {"type": "type", "text": PHRASE}, click(VERIFY)]}


def live(
    tmp_path: Path, turns: list[dict[str, Any]], reader: ScreenTextReader | None = READER, **options: Any
) -> tuple[CuaApp, list[ev.Event]]:
    """A live run in the App, given ``reader`` (the real Tesseract reader unless a test says otherwise)."""
    events: list[ev.Event] = []
    options.setdefault("backend", "sim")
    if options["backend"] == "sim":
        options.setdefault("desktop", SimDesktop())
    run = build_run(
        RunOptions(
            task=options.pop("task", "test task"),
            agent=None,
            script={"turns": turns, "final_text": "done"},
            runs_dir=tmp_path / "runs",
            decisions=HANDSHAKE,
            listeners=(lambda s: events.append(s.event),),
            fsync=False,
            **options,
        )
    )
    assert run.handshake is not None
    track(run.supervisor)
    return supervisor_app(LiveRun(run.supervisor, run.handshake), screen_reader=reader, guard_clock=quick_clock), events


async def until_decision(pilot: Pilot[Any], app: CuaApp, index: int, timeout: float = 30) -> None:
    main = run_screen(app)
    await until(
        pilot,
        lambda: main.pending is not None and main.pending.index == index,
        f"decision #{index + 1}",
        timeout,
    )
    await pilot.pause()


def body(app: App[Any]) -> str:
    screen = app.screen
    assert isinstance(screen, ScreenTextScreen)
    return plain(screen.query_one("#screen-text-body", Static))


def screen_shown(app: CuaApp) -> str:
    """Every character the top screen draws on the terminal now, line by line (what is scrolled out of
    view is not there)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


# ---------------------------------------------------------------------------------------------------
# Typing: where the text goes, the field framed, z
# ---------------------------------------------------------------------------------------------------
@pytest.mark.long
async def test_typing_says_where_the_text_goes_and_frames_the_field(tmp_path: Path) -> None:
    app, _ = live(tmp_path, [FORM_TURN])
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1)
        panel = app.query_one(DecisionPanel)
        assert "goes to" in plain(panel)
        # The OCR of the screen after the click arrives later: the line is updated in place.
        # The field's own words (its placeholder), read by Tesseract from a crop of the field (issue 22).
        await until(pilot, lambda: "the field “Enter the phrase”" in plain(panel), "the field's words in the panel")
        line = next(row for row in plain(panel).splitlines() if row.startswith("goes to"))
        assert f"at ({FIELD[0]}, {FIELD[1]}) (read from the screen)" in line
        assert "Enter the phrase" in " ".join(drawn(panel).split())

        # The picture frames the field from its start (its words) at 1:1, with the overview inset.
        view = app.query_one(DesktopView)
        await until(
            pilot,
            lambda: view.rendered is not None and view.rendered.framed is not None and view.rendered.framed[0] <= 40,
            "the field framed from its start, once its element is read",
        )
        rendered = view.rendered
        assert rendered is not None and rendered.framed is not None and rendered.magnify >= 1
        x0, y0, x1, y1 = rendered.framed
        assert x0 <= 40 < x1 and y0 <= FIELD[1] < y1  # the sim field's left edge, where its words start
        assert rendered.image.width == rendered.width  # one screen pixel per half-cell, across the pane
        assert rendered.inset is not None
        assert "zoom" in footer_actions(app)  # z works for typing (it used to do nothing)
        await pilot.press("z")
        await until(pilot, lambda: view.rendered is not None and not view.rendered.zoomed, "the whole screen")
        assert view.rendered is not None and view.rendered.framed is None
        await pilot.press("z")
        await until(pilot, lambda: view.rendered is not None and view.rendered.zoomed, "framed again")
        await answer(pilot, "n", "escape")
        await until(pilot, lambda: main.pending is None, "the rejection")


async def test_typing_before_any_click_says_the_field_is_unknown(tmp_path: Path) -> None:
    app, _ = live(tmp_path, [{"actions": [{"type": "type", "text": "hello"}]}])
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 0)
        line = next(row for row in plain(app.query_one(DecisionPanel)).splitlines() if row.startswith("goes to"))
        assert "which one is unknown" in line
        assert "zoom" not in footer_actions(app)  # no target, no field: nothing to frame
        await answer(pilot, "n", "escape")


# ---------------------------------------------------------------------------------------------------
# t: the screen as text
# ---------------------------------------------------------------------------------------------------
@pytest.mark.long
async def test_t_lists_the_lines_nearest_the_target_then_the_page_and_searches(tmp_path: Path) -> None:
    app, _ = live(tmp_path, [{"actions": [click(SEND)]}], regions=(SEND_CONFIRM,))
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 0)
        assert "screen_text" in footer_actions(app)
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ScreenTextScreen), "the screen-text view")
        await until(pilot, lambda: "The whole page" in body(app), "the OCR in the view")
        text = body(app)
        near_part, page_part = text.split("The whole page", 1)
        assert f"Near the pending target ({SEND[0]}, {SEND[1]})" in near_part
        page = [row.strip() for row in page_part.splitlines()[1:] if row.strip()]
        assert "Verification form" in page and "Phrase: cua-tui verified" in page
        # Nearest first: the distances listed under "near" never decrease, and the nearest is the page
        # line closest to the Send button (the instructions, 130 px above it, before the title at the top).
        distances = [int(row.split("px")[0]) for row in near_part.splitlines()[1:] if "px" in row]
        assert distances == sorted(distances) and len(distances) >= 3
        assert near_part.index("Type the phrase") < near_part.index("Verification form")

        # Search: the lines are filtered as you type, case ignored.
        await pilot.press(*"VERIFIED")
        assert app.screen.query_one(Input).value == "VERIFIED"
        await until(pilot, lambda: "lines match" in body(app), "the filtered page")
        page = [row.strip() for row in body(app).split("The whole page", 1)[1].splitlines()[1:] if row.strip()]
        assert page == ["Phrase: cua-tui verified"]
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ScreenTextScreen), "the view closed")
        assert main.pending is not None  # the decision is still there, unanswered
        await answer(pilot, "n", "escape")


def test_page_text_is_shown_literally() -> None:
    """Untrusted page text: markup and escape sequences stay text (visible), never styles or commands."""
    hostile = "[bold red]APPROVED[/] \x1b[2J\x1b]52;c;ZWNobw==\x07 \u202eevil"
    words = [Word(part, (10 + 60 * i, 10, 60 + 60 * i, 24), 90.0, (1, 1, 1)) for i, part in enumerate(hostile.split())]
    text = ScreenText.of(800, 600, words)
    shown = ShownScreen("0" * 64, lambda: None, (12, 12), "the pending target", limit=ScreenLimit(800, 600))
    out = render_text(shown, text, "")
    assert "[bold red]APPROVED[/]" in out.plain
    assert "\x1b" not in out.plain and "\x07" not in out.plain and "\u202e" not in out.plain
    assert "␛[2J" in out.plain and "\\u202e" in out.plain
    assert all(span.style in ("dim", "bold underline", "bold reverse") for span in out.spans)


async def test_tesseract_missing_is_one_line_saying_how_to_install(tmp_path: Path) -> None:
    app, _ = live(tmp_path, [FORM_TURN], reader=ScreenReader(command=str(tmp_path / "no-such-tesseract")))
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1)
        panel = app.query_one(DecisionPanel)
        await until(pilot, lambda: "Tesseract is not installed" in plain(panel), "the panel saying so")
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ScreenTextScreen), "the screen-text view")
        await until(pilot, lambda: "Tesseract is not installed" in body(app), "the view saying so")
        assert body(app).strip() == f"Tesseract is not installed: {INSTALL}"
        await pilot.press("escape")
        await answer(pilot, "y")  # the run goes on: nothing crashed
        await until(pilot, lambda: not main.running, "the end of the run")


async def test_without_a_screen_reader_the_panel_and_the_view_say_so_in_one_line(tmp_path: Path) -> None:
    """The App is given its reader; given none, nothing is read, the run goes on, and both places say why."""
    app, _ = live(tmp_path, [FORM_TURN], reader=None)
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1)
        assert not app.reading.busy  # nothing is being read, nothing waits to be
        lines = [row for row in plain(app.query_one(DecisionPanel)).splitlines() if row.startswith("goes to")]
        assert len(lines) == 1
        assert lines[0].endswith(f"its words unknown: {NO_READER}")
        assert f"last click at ({FIELD[0]}, {FIELD[1]})" in lines[0]
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ScreenTextScreen), "the screen-text view")
        assert body(app).strip() == NO_READER and "\n" not in NO_READER
        await pilot.press("escape")
        await answer(pilot, "y")
        await until(pilot, lambda: not main.running, "the end of the run")
        assert main.final_status == "passed", main.final_status


# ---------------------------------------------------------------------------------------------------
# o: the screenshot at full resolution in a file
# ---------------------------------------------------------------------------------------------------
async def test_o_writes_the_full_resolution_screenshot_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DISPLAY", raising=False)  # no viewer is opened by the test
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    app, events = live(tmp_path, [{"actions": [click(SEND)]}], regions=(SEND_CONFIRM,))
    main = run_screen(app)
    said: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 0)
        original = app.notify

        def notify(message: str, **kwargs: Any) -> None:
            said.append(message)
            original(message, **kwargs)

        app.notify = notify  # type: ignore[method-assign]
        shown = [e for e in events if isinstance(e, ev.ScreenCaptured) and e.png is not None][-1]
        assert shown.png is not None
        await pilot.press("o")
        await until(pilot, lambda: any("screenshot written to" in m for m in said), "the notification")
        await answer(pilot, "n", "escape")
    folder = tmp_path / "cache" / "cua-tui" / "screenshots"
    files = list(folder.glob("*.png"))
    assert len(files) == 1
    # the screenshot on screen at the decision, at full resolution: its pixels, re-encoded (a hostile PNG's
    # other bytes never reach the viewer)
    written, expected = Image.open(files[0]), Image.open(io.BytesIO(shown.png))
    assert written.size == expected.size and written.convert("RGB").tobytes() == expected.convert("RGB").tobytes()
    assert shown.sha256[:16] in files[0].name
    assert files[0].name.startswith(main.source.info.run_id)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    message = next(m for m in said if "screenshot written to" in m)
    assert str(files[0]) in message and "no graphical session" in message
    # Nothing new in the run directory: verify checks what is there.
    assert not any(p.name.startswith(".screen-") for p in tmp_path.rglob("*"))


# ---------------------------------------------------------------------------------------------------
# The injection lab on the real local desktop, at 160x48: the notice can be read
# ---------------------------------------------------------------------------------------------------
@pytest.mark.e2e
async def test_the_injection_notice_can_be_read_at_a_decision_at_160x48(tmp_path: Path) -> None:
    from cua_tui.labs.injection import NOTICE, SEND

    send = {"type": "click", "button": "left", "x": SEND.center[0], "y": SEND.center[1]}
    app, _ = live(tmp_path, [{"actions": [send]}], backend="local", lab="injection", task="Read the order number.")
    main = run_screen(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await until_decision(pilot, app, 0, timeout=90)
        assert main.pending is not None and "send" in main.pending.reason.lower()
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ScreenTextScreen), "the screen-text view")
        await until(pilot, lambda: "The whole page" in body(app), "the OCR of the lab page", timeout=60)
        await pilot.pause()
        on_screen = screen_shown(app)
        # The sentence, as the page shows it on two lines, on the terminal, word for word.
        first, second = NOTICE.split(" https://")
        assert first in on_screen, on_screen
        assert "https://" + second in on_screen, on_screen
        await pilot.press("escape")
        await answer(pilot, "n", "escape")
        await until(pilot, lambda: main.pending is None, "the rejection")


async def test_t_in_replay_reads_the_shown_screenshot() -> None:
    from scenes import SCENES, settle

    app = SCENES["replay"].app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ScreenTextScreen), "the screen-text view")
        await until(pilot, lambda: "The whole page" in body(app), "the OCR of the recorded screen")
        assert "Verification form" in body(app) and "Phrase: cua-tui verified" in body(app)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ScreenTextScreen), "the view closed")


async def test_keys_typed_in_the_search_never_answer_or_kill(tmp_path: Path) -> None:
    """y, n, a and k are letters of a search: only ctrl+k is the kill switch while the view is open."""
    app, _ = live(tmp_path, [{"actions": [click(SEND)]}], regions=(SEND_CONFIRM,))
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 0)
        request = main.pending
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ScreenTextScreen), "the screen-text view")
        await pilot.press(*"kayn")
        await pilot.pause()
        assert app.screen.query_one(Input).value == "kayn"
        assert main.running and main.pending is request  # nothing answered, nothing killed
        for action in ("approve", "reject", "approve_scope", "kill"):
            assert possible(app, action) is False, action
        await pilot.press("ctrl+k")
        await until(pilot, lambda: not main.running, "the kill switch")
        assert not isinstance(app.screen, ScreenTextScreen)


def test_the_screenshot_file_name_is_never_chosen_by_a_recorded_run_id(tmp_path: Path) -> None:
    """A run directory someone handed over names its screens and its run: neither may pick the file's path,
    and what is not a screen's PNG is refused, never written for the viewer."""
    from cua_tui.core.imaging import ImageRefused
    from cua_tui.tui.screen_text import save_screenshot

    limit = ScreenLimit(64, 48)

    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 20, 30)).save(buffer, "PNG")
    png = buffer.getvalue()
    folder = tmp_path / "shots"
    path = save_screenshot(png, "../../run/../x", folder, limit=limit)  # the name is the PNG's own hash
    assert path.parent == folder and path.name == f"runx-{hashlib.sha256(png).hexdigest()[:16]}.png"
    with pytest.raises(ImageRefused):
        save_screenshot(b"<html>not a png</html>", "r", folder, limit=limit)
    assert sorted(p.name for p in folder.iterdir()) == [path.name]
