"""The supervisor takes a picture from a desktop only where a zoom asked for one, no larger than its region
(issue 20, point 2): a remote desktop is untrusted, and an unasked picture would reach the log and the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import make_supervisor

from cua_tui.core import events as ev
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.core.imaging import crop_frame
from cua_tui.core.ports import StepResult
from cua_tui.desktops.sim import SimDesktop


class PicturingDesktop(SimDesktop):
    """A sim desktop that sends a picture with every action (``region`` of its own screen)."""

    def __init__(self, region: tuple[int, int, int, int]) -> None:
        super().__init__()
        self.region = region

    def perform(self, action: Any) -> StepResult:
        step = super().perform(action)
        return StepResult(step.frame, output=step.output, image=crop_frame(step.frame, self.region))


def run_with(tmp_path: Path, region: tuple[int, int, int, int], action: dict[str, Any]) -> tuple[Any, list[ev.Event]]:
    sup, events, _agent = make_supervisor(tmp_path, [{"actions": [action]}], desktop=PicturingDesktop(region))
    return sup.run(), events


def test_a_click_that_comes_back_with_a_picture_ends_the_run(tmp_path: Path) -> None:
    result, events = run_with(tmp_path, (0, 0, 400, 300), {"type": "click", "x": 10, "y": 10, "button": "left"})
    assert result.status == "error"
    assert "picture it did not ask for" in result.reason
    assert not [e for e in events if isinstance(e, ev.ScreenCaptured) and e.purpose == "zoom"]
    assert verify_run(tmp_path / "runs" / result.run_id).code is VerifyExit.INTACT
