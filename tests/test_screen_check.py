"""The stale-screen check that travels with a reviewed action ("perform if its area still looks as the model
saw it"): its decision, its wire form (read by the helper from a command line: untrusted shape), and how the
remote desktops read a ``stale`` answer (untrusted too)."""

from __future__ import annotations

import dataclasses
import io
import threading
from typing import Any

import pytest
from PIL import Image, ImageDraw

from cua_tui.core.actions import Action, Kind
from cua_tui.core.geometry import Size
from cua_tui.core.imaging import blank_frame
from cua_tui.core.ports import BaseDesktop, DesktopError, Frame, StepResult
from cua_tui.core.stale import CheckError, ScreenCheck, StaleGuard
from cua_tui.desktops.remote.desktop import HelperDesktop
from cua_tui.desktops.remote.wire import encode_reply, parse_reply

SIZE = Size(200, 120)
CLICK = Action(Kind.CLICK, point=(100, 60))


def frame(draw: Any = None) -> Frame:
    img = Image.new("RGB", (SIZE.width, SIZE.height), (240, 240, 240))
    if draw is not None:
        draw(ImageDraw.Draw(img))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return Frame(out.getvalue(), SIZE.width, SIZE.height)


def button_at(x: int, y: int) -> Any:
    return lambda d: d.rectangle((x - 20, y - 10, x + 20, y + 10), fill=(220, 38, 38))


def test_the_check_finds_a_moved_target_and_ignores_a_change_elsewhere_or_a_caret() -> None:
    seen = frame(button_at(100, 60))
    check = StaleGuard().check(seen, (100, 60))
    assert check is not None and check.box == (68, 28, 132, 92)
    assert not check.changed_on(seen)
    assert check.changed_on(frame(button_at(100, 100)))  # the button moved down
    assert not check.changed_on(frame(lambda d: (button_at(100, 60)(d), d.rectangle((0, 0, 20, 20), fill=0))))
    assert not check.changed_on(frame(lambda d: (button_at(100, 60)(d), d.line((70, 30, 70, 40), fill=0))))
    assert StaleGuard().check(seen, (500, 500)) is None  # off the screen: nothing to compare


def test_the_check_round_trips_and_a_malformed_one_is_refused() -> None:
    check = StaleGuard().check(frame(button_at(100, 60)), (100, 60))
    assert check is not None
    assert ScreenCheck.from_wire(check.to_wire()) == dataclasses.replace(check, seen="")  # the hash stays home
    wire = check.to_wire()
    # anything a helper's command line may carry
    bad: object
    for bad in (
        None,
        [],
        {**wire, "box": [10, 10, 5, 20]},
        {**wire, "box": [0, 0, 10]},
        {**wire, "box": [0, 0, True, 10]},
        {**wire, "reference": "not base64!"},
        {**wire, "reference": "A" * (1 << 20)},
        {**wire, "pixel_threshold": 999},
        {**wire, "changed_fraction": "0.1"},
    ):
        with pytest.raises(CheckError):
            ScreenCheck.from_wire(bad)


class Plain(BaseDesktop):
    """A desktop with no check of its own: the port's default ``perform_checked`` asks it for a screenshot
    first."""

    def __init__(self, now: Frame) -> None:
        self.now = now
        self.performed: list[Action] = []

    def screenshot(self) -> Frame:
        return self.now

    def perform(self, action: Action) -> StepResult:
        self.performed.append(action)
        return StepResult(self.now)


def test_a_desktop_without_a_check_of_its_own_is_checked_before_it_acts() -> None:
    seen = frame(button_at(100, 60))
    check = StaleGuard().check(seen, (100, 60))
    moved = Plain(frame(button_at(100, 100)))
    assert moved.perform_checked(CLICK, check).stale and moved.performed == []
    same = Plain(seen)
    assert not same.perform_checked(CLICK, check).stale and same.performed == [CLICK]
    unchecked = Plain(frame(button_at(100, 100)))
    assert not unchecked.perform_checked(CLICK, None).stale and unchecked.performed == [CLICK]


class Replying(HelperDesktop):
    """A remote desktop whose sandbox answers with the reply a test gives it."""

    def __init__(self, header: dict[str, Any], blobs: dict[str, tuple[bytes, int, int]]) -> None:
        super().__init__(SIZE, step_timeout=5)
        self.reply = encode_reply(header, blobs)
        self.sent: list[dict[str, Any]] = []

    def _request(self, request: dict[str, Any], *, timeout: float) -> Any:
        self.sent.append(request)
        return self._answer(0, self.reply, b"")


def test_a_remote_stale_answer_is_read_and_checked() -> None:
    screen = blank_frame(SIZE)
    blobs = {"screen": (screen.png, SIZE.width, SIZE.height)}
    check = StaleGuard().check(frame(button_at(100, 60)), (100, 60))
    assert check is not None
    desktop = Replying({"ok": True, "stale": True}, blobs)
    result = desktop.perform_checked(CLICK, check)
    assert result.stale and result.frame.sha256 == screen.sha256
    (sent,) = desktop.sent
    assert sent["op"] == "perform" and ScreenCheck.from_wire(sent["check"]).box == check.box  # one request, both
    with pytest.raises(DesktopError, match="no screen check"):
        Replying({"ok": True, "stale": True}, blobs).perform(CLICK)  # stale to an unchecked action: a lie
    with pytest.raises(DesktopError, match="stale flag"):
        Replying({"ok": True, "stale": "yes"}, blobs).perform_checked(CLICK, check)
    zoom = Action(Kind.ZOOM, region=(0, 0, 10, 10))
    tiny = blank_frame(Size(10, 10))
    with pytest.raises(DesktopError, match="did not ask for"):  # a stale answer carries the screen alone
        Replying({"ok": True, "stale": True}, {**blobs, "image": (tiny.png, 10, 10)}).perform_checked(zoom, check)


def test_the_helper_answers_stale_without_acting() -> None:
    """The resident helper's side: a perform request with a check goes to the desktop's own checked perform."""
    from cua_tui.desktops.remote.helper import Resident

    seen = frame(button_at(100, 60))
    moved = Plain(frame(button_at(100, 100)))

    class Inside:
        timing: dict[str, float] = {}

        def perform_checked(self, action: Action, check: ScreenCheck | None) -> StepResult:
            return moved.perform_checked(action, check)

        def egress(self) -> list[Any]:
            return []

    resident = Resident.__new__(Resident)  # its own __init__ would start a real desktop
    resident.desktop = Inside()  # type: ignore[assignment]
    resident._started, resident._start_error = threading.Event(), None
    resident._started.set()
    resident._lock, resident._egress_sent, resident._egress_lock = threading.Lock(), 0, threading.Lock()
    check = StaleGuard().check(seen, (100, 60))
    assert check is not None
    from cua_tui.desktops.remote.wire import action_to_wire

    header, blobs = parse_reply(
        resident.handle({"op": "perform", "action": action_to_wire(CLICK), "check": check.to_wire()}), cap=1 << 22
    )
    assert header["ok"] is True and header["stale"] is True and moved.performed == []
    assert set(blobs) == {"screen"}
    header, _ = parse_reply(
        resident.handle({"op": "perform", "action": action_to_wire(CLICK), "check": 5}), cap=1 << 22
    )
    assert header["ok"] is False and moved.performed == []  # a malformed check never acts
