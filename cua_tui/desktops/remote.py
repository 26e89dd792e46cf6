"""What the helper-driven desktops share (``cwsandbox.py``, ``docker.py``): the project's own desktop runs
resident inside the sandbox (``helper.py``), and each request (an action and the screenshot after it, a
screenshot, a region, the verdict) is one exec whose stdout is the helper's reply.

A subclass says how one request travels (``_request``: the exec, and its errors as DesktopError); this base
judges what comes back. The reply is untrusted: its exit status, its shape (``parse_reply``, every length
checked against a cap), and each screenshot's PNG header against the reply's header and the expected size,
before anything decodes it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.actions import Action
from ..core.geometry import Size
from ..core.imaging import ImageRefused, decode_png, png_size
from ..core.ports import DesktopError, Frame, StepResult, Verification
from ..core.text import one_line, truncate
from .helper import ReplyError, action_to_wire, parse_reply

if TYPE_CHECKING:
    from ..core import events as ev

REPLY_CAP = 24 * 1024 * 1024  # a 1920x1200 PNG at low compression is well under this

Blobs = dict[str, tuple[bytes, int, int]]


class HelperDesktop:
    """A desktop driven through the in-sandbox helper, one request per step, bound to its run (the
    sandbox carries the run id; sandbox-id.txt goes in its directory) before it starts."""

    name = "remote"

    def __init__(self, size: Size, *, step_timeout: float) -> None:
        self.size = size
        self.step_timeout = step_timeout
        self._first: Frame | None = None  # the ``ready`` reply's screen: the run's first screenshot
        self._isolation: dict[str, Any] = {}
        self.run_id = ""
        self._rundir: Any = None
        self._sink: Callable[[ev.Event], None] | None = None
        self._stopping = threading.Event()

    def bind_run(self, rundir: Any) -> None:
        """The run directory (sandbox-id.txt goes there) and its id (the sandbox's tag or label)."""
        self._rundir = rundir
        self.run_id = rundir.run_id

    def bind_events(self, sink: Callable[[ev.Event], None]) -> None:
        self._sink = sink

    def _check_stopping(self) -> None:
        if self._stopping.is_set():
            raise DesktopError("the desktop was stopped", fatal=True)

    # ------------------------------------------------------------------------------------------------
    def _request(self, request: dict[str, Any], *, timeout: float) -> tuple[dict[str, Any], Blobs]:
        """One request to the helper; its header (``ok`` true) and blobs, or a DesktopError."""
        raise NotImplementedError

    def _reply_egress(self, records: Any) -> None:
        """The egress records a reply carries (from a proxy inside the sandbox); ignored by default."""

    def _answer(self, returncode: int, stdout: bytes, stderr: bytes) -> tuple[dict[str, Any], Blobs]:
        """The helper's reply, judged: the exit status, the shape, then its ``ok``."""
        if returncode != 0:
            detail = one_line(stderr.decode("utf-8", "replace"))
            raise DesktopError(
                f"the sandbox's helper failed (status {returncode}): {truncate(detail, 200)}", fatal=True
            )
        try:
            header, blobs = parse_reply(stdout, cap=REPLY_CAP)
        except ReplyError as exc:
            raise DesktopError(f"the sandbox sent a malformed reply: {exc}", fatal=True) from None
        self._reply_egress(header.get("egress"))
        if header.get("ok") is not True:
            message = header.get("error")
            raise DesktopError(
                one_line(truncate(message if isinstance(message, str) else "the helper failed", 300)),
                fatal=header.get("fatal") is not False,
            )
        return header, blobs

    def _ready(self, header: dict[str, Any], blobs: Blobs) -> None:
        """The ``ready`` reply: what isolation the helper obtained, and the first screenshot."""
        isolation = header.get("isolation")
        if not isinstance(isolation, dict):
            raise DesktopError("the sandbox's helper did not say what isolation it obtained", fatal=True)
        self._isolation = plain(isolation)
        self._first = self._frame(blobs, self.size)

    def _frame(self, blobs: Blobs, size: Size, name: str = "screen") -> Frame:
        """An untrusted screenshot: its PNG header must match the reply's header and the expected size."""
        if name not in blobs:
            raise DesktopError("the sandbox's reply carries no screenshot", fatal=True)
        png, width, height = blobs[name]
        try:
            if png_size(png) != (width, height) or (width, height) != (size.width, size.height):
                raise ImageRefused(f"a {width} x {height} screenshot where {size.width} x {size.height} was expected")
            decode_png(png, expect=(width, height))
        except ImageRefused as exc:
            raise DesktopError(f"the sandbox's screenshot was refused: {exc}", fatal=True) from None
        return Frame(png, width, height)

    # ------------------------------------------------------------------------------------------------
    # Desktop
    # ------------------------------------------------------------------------------------------------
    def screenshot(self) -> Frame:
        first, self._first = self._first, None
        if first is not None:  # the ``ready`` reply already carried it: no round trip for the first one
            return first
        _header, blobs = self._request({"op": "screenshot"}, timeout=self.step_timeout)
        return self._frame(blobs, self.size)

    def perform(self, action: Action) -> StepResult:
        self._first = None
        header, blobs = self._request({"op": "perform", "action": action_to_wire(action)}, timeout=self.step_timeout)
        frame = self._frame(blobs, self.size)
        image = None
        if "image" in blobs:
            _png, width, height = blobs["image"]
            image = self._frame(blobs, Size(width, height), name="image")
        output = header.get("output")
        return StepResult(frame, output=truncate(output, 1000) if isinstance(output, str) else None, image=image)

    def capture_region(self, region: tuple[int, int, int, int]) -> Frame:
        _header, blobs = self._request({"op": "region", "region": list(region)}, timeout=self.step_timeout)
        x0, y0, x1, y1 = region
        return self._frame(blobs, Size(x1 - x0, y1 - y0))


def verdict(data: Any) -> Verification | None:
    """A verifier's verdict as a reply's header carries it (``None``: the task has no verifier)."""
    if data is None:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("passed"), bool):
        raise DesktopError("the sandbox's verifier sent a malformed verdict", fatal=True)
    return Verification(
        data["passed"], truncate(str(data.get("detail", "")), 500), truncate(str(data.get("verifier", "")), 100)
    )


def plain(value: Any, depth: int = 0) -> Any:
    """A JSON value from the sandbox, kept small and plain (it goes to run.json and the audit log)."""
    if depth > 4:
        return None
    if isinstance(value, dict):
        return {truncate(str(k), 60): plain(v, depth + 1) for k, v in list(value.items())[:40]}
    if isinstance(value, list):
        return [plain(v, depth + 1) for v in value[:40]]
    if isinstance(value, str):
        return truncate(value, 300)
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    return None
