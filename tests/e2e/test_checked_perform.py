"""A reviewed action's stale-screen check and the action are one request (DESIGN.md, "Remote sandboxes"):
on a real Xvfb, the X11 session grabs the target's area and acts only if it still looks as the model saw it.
The same code answers inside a remote sandbox (the helper calls it), so nothing changes between the check
and the act, and a remote step costs one exec."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from Xlib import X, display
from xvfb import Xvfb

from cua_tui.core.actions import Action, Kind
from cua_tui.core.geometry import Size
from cua_tui.core.stale import StaleGuard
from cua_tui.desktops.local import missing_programs
from cua_tui.desktops.x11 import X11Session

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif("Xvfb" in missing_programs(), reason="needs Xvfb (scripts/setup.sh env)"),
]
SIZE = Size(320, 240)
TARGET = (160, 120)


@pytest.fixture
def session() -> Iterator[tuple[X11Session, str]]:
    server = Xvfb(SIZE)
    x = X11Session(server.name, SIZE)
    yield x, server.name
    x.stop()
    server.close()


def cover(name: str, box: tuple[int, int, int, int]) -> display.Display:
    """A white window over ``box`` (a popup where the model saw the button); kept open by the caller."""
    d = display.Display(name)
    screen = d.screen()
    x0, y0, x1, y1 = box
    window = screen.root.create_window(
        x0, y0, x1 - x0, y1 - y0, 0, screen.root_depth, X.InputOutput, X.CopyFromParent,
        background_pixel=screen.white_pixel, override_redirect=True,
    )  # fmt: skip
    window.map()
    d.sync()
    time.sleep(0.1)
    return d


def test_a_changed_area_is_not_acted_on_and_the_screen_now_comes_back(session: tuple[X11Session, str]) -> None:
    x, name = session
    x.move(5, 5)
    seen = x.screenshot()
    check = StaleGuard().check(seen, TARGET)
    popup = cover(name, (130, 100, 200, 150))
    try:
        result = x.perform_checked(Action(Kind.CLICK, point=TARGET), check)
        assert result.stale
        assert x.pointer() == (5, 5)  # nothing ran: the pointer never went to the target
        assert result.frame.sha256 != seen.sha256  # the screen as it is now, popup included
        # Asked again against the screen as it is now, the click runs.
        again = StaleGuard().check(result.frame, TARGET)
        assert not x.perform_checked(Action(Kind.CLICK, point=TARGET), again).stale
        assert x.pointer() == TARGET
    finally:
        popup.close()


def test_a_change_away_from_the_target_does_not_stop_the_action(session: tuple[X11Session, str]) -> None:
    x, name = session
    x.move(5, 5)
    check = StaleGuard().check(x.screenshot(), TARGET)
    elsewhere = cover(name, (0, 0, 60, 60))  # far from the target's area
    try:
        result = x.perform_checked(Action(Kind.CLICK, point=TARGET), check)
        assert not result.stale and x.pointer() == TARGET
    finally:
        elsewhere.close()
