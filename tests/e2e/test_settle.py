"""The settle after input follows how the desktop paints: on a real Xvfb, an X client that paints late or in
pieces (tests/e2e/painter.py) is caught by the waits once they have seen it, and a prompt one keeps them short.

The screenshot after an action "caught" the paint when it is the screen as it stays: the same as a grab
taken half a second later."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from xvfb import Xvfb

from cua_tui.core.actions import Action, Kind
from cua_tui.core.geometry import Size
from cua_tui.desktops.local import missing_programs
from cua_tui.desktops.x11 import (
    FIRST_CHANGE_CAP,
    KEYBOARD_FIRST_CHANGE,
    SETTLE_LIMIT,
    SETTLE_QUIET,
    PaintTiming,
    X11Session,
    changed_at_least,
)

pytestmark = pytest.mark.skipif("Xvfb" in missing_programs(), reason="needs Xvfb (scripts/setup.sh env)")
PAINTER = Path(__file__).with_name("painter.py")
SIZE = Size(320, 240)
KEY = Action(Kind.KEYPRESS, chord="a")


@pytest.fixture
def xvfb() -> Iterator[str]:
    server = Xvfb(SIZE)
    yield server.name
    server.close()


def painter(
    display: str, delay: float, chunks: int = 1, gap: float = 0.0, caret: bool = False
) -> subprocess.Popen[str]:
    args = [sys.executable, str(PAINTER), display, str(delay), str(chunks), str(gap), "1" if caret else "0"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


@pytest.fixture
def session(xvfb: str) -> Iterator[X11Session]:
    x = X11Session(xvfb, SIZE)
    yield x
    x.stop()


def press_and_check(x: X11Session) -> bool:
    """One key press; whether its screenshot is the screen as it stays."""
    frame = x.perform(KEY).frame
    time.sleep(0.5 + x.key_timing.latency)
    return frame.sha256 == x.screenshot().sha256


@pytest.mark.e2e
@pytest.mark.alone
def test_a_desktop_that_paints_late_is_waited_for_once_seen(session: X11Session, xvfb: str) -> None:
    """Each press shows 250 ms after the key (past the 100 ms first-change wait): the first screenshots miss
    it, the next action sees that it came late, and the wait grows until the paint is caught."""
    slow = painter(xvfb, 0.25)
    try:
        caught = [press_and_check(session) for _ in range(6)]
    finally:
        slow.kill()
    assert caught[-3:] == [True, True, True], caught
    assert session.key_timing.late >= 1  # the default wait was too short (a paint came after it): the reason
    _quiet, first, _limit = session.key_timing.waits(SETTLE_QUIET, KEYBOARD_FIRST_CHANGE, SETTLE_LIMIT)
    assert 0.25 < first <= FIRST_CHANGE_CAP


@pytest.mark.e2e
@pytest.mark.alone
def test_an_update_painted_in_pieces_is_waited_for_to_its_end(session: X11Session, xvfb: str) -> None:
    """Three strips 60 ms apart (past the 20 ms quiet wait): the quiet wait grows until the last strip is in."""
    pieces = painter(xvfb, 0.0, chunks=3, gap=0.06)
    try:
        caught = [press_and_check(session) for _ in range(7)]
    finally:
        pieces.kill()
    assert caught[-3:] == [True, True, True], caught
    assert session.key_timing.late >= 1  # the 20 ms quiet ended between two strips at first
    quiet, _first, _limit = session.key_timing.waits(SETTLE_QUIET, KEYBOARD_FIRST_CHANGE, SETTLE_LIMIT)
    assert quiet > 0.06


@pytest.mark.e2e
@pytest.mark.alone
def test_a_prompt_desktop_keeps_the_short_waits_and_a_caret_is_no_late_paint(session: X11Session, xvfb: str) -> None:
    prompt = painter(xvfb, 0.0, caret=True)
    try:
        for _ in range(8):
            session.perform(KEY)
            time.sleep(0.3)  # the caret blinks meanwhile: a 2x16 change before the next input
    finally:
        prompt.kill()
    assert session.key_timing.late == 0
    assert session.key_timing.waits(SETTLE_QUIET, KEYBOARD_FIRST_CHANGE, SETTLE_LIMIT) == (
        SETTLE_QUIET,
        KEYBOARD_FIRST_CHANGE,
        SETTLE_LIMIT,
    )


def test_paint_timing_grows_to_its_caps_and_forgets() -> None:
    timing = PaintTiming()
    assert timing.waits(0.02, 0.05, 0.4) == (0.02, 0.05, 0.4)
    timing.came_late(False, 0.02, 0.05)  # nothing changed in the 50 ms wait, then it did
    assert timing.waits(0.02, 0.05, 0.4)[1] == pytest.approx(0.1)
    for _ in range(20):
        timing.came_late(False, 0.02, 10.0)
        timing.came_late(True, 10.0, 0.05)
    quiet, first, limit = timing.waits(0.02, 0.05, 0.4)
    assert (quiet, first, limit) == pytest.approx((0.15, 0.6, 1.2))
    for _ in range(200):  # prompt settles since: the waits come back to the defaults
        timing.settled(0.005, 0.0)
    assert timing.waits(0.02, 0.05, 0.4) == (0.02, 0.05, 0.4)


def test_changed_at_least_measures_the_box_around_the_change() -> None:
    width, height = 64, 48
    before = bytearray(width * height * 4)

    def drawn(x0: int, y0: int, w: int, h: int) -> bytearray:
        after = bytearray(before)
        for y in range(y0, y0 + h):
            for x in range(x0, x0 + w):
                after[(y * width + x) * 4 + 1] = 200
        return after

    caret, glyph = drawn(30, 10, 2, 16), drawn(5, 5, 8, 16)
    assert not changed_at_least(before, before, (width, height), 1)
    assert not changed_at_least(before, caret, (width, height), 64)  # 2x16 = 32
    assert changed_at_least(before, glyph, (width, height), 64)  # 8x16 = 128
    corners = bytearray(before)
    corners[0] = corners[-4] = 9  # two pixels far apart: the box between them is the whole screen
    assert changed_at_least(before, corners, (width, height), width * height)
    # near a point: only what changed within NEAR of it counts
    big = (4000, 1000)
    before = bytearray(big[0] * big[1] * 4)
    far = bytearray(before)
    for y in range(900, 916):
        far[(y * big[0] + 3900) * 4 : (y * big[0] + 3916) * 4] = b"\x10\x10\x10\x00" * 16  # a clock ticking
    assert changed_at_least(before, far, big, 64)
    assert not changed_at_least(before, far, big, 64, near=(100, 100))
    assert changed_at_least(before, far, big, 64, near=(3600, 850))
