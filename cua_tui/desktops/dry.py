"""``--backend dry``: executes nothing. Every action is validated and classified against a blank screen
of the chosen size; what passes policy and approval ends ``executed`` (accepted, and nothing done)."""

from __future__ import annotations

from ..core.actions import Action, Kind
from ..core.geometry import Size
from ..core.imaging import blank_frame, crop_frame
from ..core.ports import BaseDesktop, Frame, StepResult, Verification


class DryDesktop(BaseDesktop):
    name = "dry"

    def __init__(self, size: Size) -> None:
        self.size = size
        self._frame = blank_frame(size)
        self._pointer = (0, 0)

    def start(self) -> None:
        pass

    def screenshot(self) -> Frame:
        return self._frame

    def perform(self, action: Action) -> StepResult:
        if action.target is not None and action.kind is not Kind.ZOOM:
            self._pointer = action.path[-1] if action.path else action.target
        if action.kind is Kind.CURSOR_POSITION:
            return StepResult(self._frame, output=f"X={self._pointer[0]},Y={self._pointer[1]}")
        if action.kind is Kind.ZOOM and action.region is not None:
            return StepResult(self._frame, image=self.capture_region(action.region))
        return StepResult(self._frame)

    def capture_region(self, region: tuple[int, int, int, int]) -> Frame:
        return crop_frame(self._frame, region)

    def release_all(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def verify(self) -> Verification | None:
        return None


def build(size: Size, table: None, **_: object) -> DryDesktop:
    """The backend's builder (desktops/__init__.py): a blank screen of ``size``; no lab, no page."""
    return DryDesktop(size)
