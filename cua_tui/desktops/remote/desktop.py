"""The desktop the remote backends share (``cwsandbox.py``, ``docker.py``): the project's own desktop runs
resident inside the sandbox (``helper.py``), and each request (an action and the screenshot after it, a
screenshot, a region, the verdict) is one exec whose stdout is the helper's reply.

A subclass says how one request travels (``_request``: the exec, and its errors as DesktopError); this base
judges what comes back, with the checks of ``replies.py``: the exit status, the shape (every length checked
against the run's cap), the pictures, the egress records.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ...core import events as ev
from ...core.actions import Action, Kind
from ...core.geometry import Size
from ...core.ports import BaseDesktop, DesktopError, Frame, RunHandle, StepResult
from ...core.stale import ScreenCheck
from ...core.text import one_line, truncate
from .replies import STDERR_CAP, asked_only, picture, plain, reply_cap, step_timing
from .wire import Blobs, ReplyError, action_to_wire, parse_reply


class HelperDesktop(BaseDesktop):
    """A desktop driven through the in-sandbox helper, one request per step, bound to its run (the
    sandbox carries the run id; sandbox-id.txt goes in its directory) before it starts."""

    name = "remote"

    def __init__(self, size: Size, *, step_timeout: float) -> None:
        self.size = size
        self.step_timeout = step_timeout
        # the ``ready`` reply's screen: the run's first screenshot
        self._first: Frame | None = None
        self._isolation: dict[str, Any] = {}
        self.run_id = ""
        self._run: RunHandle | None = None
        self._sink: Callable[[ev.Event], None] | None = None
        self._stopping = threading.Event()
        # the sandbox this run created (docker: its container's id), once its create ended; each let go once
        self._sandbox: Any = None
        self.sandbox_id: str | None = None
        self._discarded: set[str] = set()
        self._lock = threading.Lock()  # the sandbox, the exec in flight, the discarding
        self.reply_cap = reply_cap(size)
        # the last step's parts as the helper measured them (benchmarks)
        self.timing: dict[str, float] = {}
        self._acted_at = 0.0  # time.monotonic() when the last action's request ended (a verdict waits on it)

    def bind_run(self, run: RunHandle) -> None:
        """The run: its id (the sandbox's tag or label) and its directory (sandbox-id.txt goes there)."""
        self._run = run
        self.run_id = run.run_id

    def bind_events(self, sink: Callable[[ev.Event], None]) -> None:
        self._sink = sink

    def _adopt(self, sandbox: Any, ident: str, tags: list[str]) -> None:
        """A new sandbox, recorded before it runs anything: its id in the run's directory and on the event
        stream; discarded at once if a stop came during the create."""
        with self._lock:
            self._sandbox, self.sandbox_id = sandbox, ident
        try:
            if self._run is not None:
                self._run.write_sandbox_id(ident)
            if self._sink is not None:
                self._sink(ev.SandboxCreated(self.name, ident, tags))
        finally:
            if self._stopping.is_set():
                self._discard_sandbox()

    def _discard_sandbox(self) -> None:
        """Stop or remove the sandbox adopted last, once, from any thread; one whose create is still under
        way is discarded when the create ends (``_adopt``). Once per sandbox, not per run: a lost create
        can turn up more than one (each adopted, then discarded, in turn)."""
        with self._lock:
            sandbox, ident = self._sandbox, self.sandbox_id
            if sandbox is None or ident is None or ident in self._discarded:
                return
            self._discarded.add(ident)
        self._discard(sandbox)

    def _discard(self, sandbox: Any) -> None:
        """The backend's way of stopping or removing ``sandbox`` (called once)."""
        raise NotImplementedError

    def _check_stopping(self) -> None:
        if self._stopping.is_set():
            raise DesktopError("the desktop was stopped", fatal=True)

    # ---------------------------------------------------------------------------------------------
    def _request(self, request: dict[str, Any], *, timeout: float) -> tuple[dict[str, Any], Blobs]:
        """One request to the helper; its header (``ok`` true) and blobs, or a DesktopError."""
        raise NotImplementedError

    def _reply_egress(self, records: Any) -> None:
        """The egress records a reply carries (from a proxy inside the sandbox); ignored by default."""

    def _answer(
        self, returncode: int, stdout: bytes, stderr: bytes, *, cap: int | None = None
    ) -> tuple[dict[str, Any], Blobs]:
        """The helper's reply, judged: the exit status, the shape, then its ``ok``."""
        if returncode != 0:
            detail = one_line(stderr[:STDERR_CAP].decode("utf-8", "replace"))
            raise DesktopError(
                f"the sandbox's helper failed (status {returncode}): {truncate(detail, 200)}", fatal=True
            )
        try:
            header, blobs = parse_reply(stdout, cap=self.reply_cap if cap is None else cap)
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
        asked_only(blobs, {"screen"}, "ready request")
        self._first = picture(blobs, self.size)

    # ---------------------------------------------------------------------------------------------
    # Desktop
    # ----------------------------------------------------------------------------------------------
    def screenshot(self) -> Frame:
        first, self._first = self._first, None
        if first is not None:
            # the ``ready`` reply already carried it: no round trip for the first one
            return first
        _header, blobs = self._request({"op": "screenshot"}, timeout=self.step_timeout)
        asked_only(blobs, {"screen"}, "screenshot")
        return picture(blobs, self.size)

    def perform(self, action: Action) -> StepResult:
        return self.perform_checked(action, None)

    def perform_checked(self, action: Action, check: ScreenCheck | None) -> StepResult:
        """One request: the action, and with ``check`` only if its area still looks as the model saw it (the
        helper then answers ``stale`` without acting, with the screen as it is now)."""
        self._first = None
        request: dict[str, Any] = {"op": "perform", "action": action_to_wire(action)}
        if check is not None:
            request["check"] = check.to_wire()
        try:
            header, blobs = self._request(request, timeout=self.step_timeout)
        finally:
            self._acted_at = time.monotonic()
        self.timing = step_timing(header.get("timing"))
        stale = header.get("stale", False)
        if not isinstance(stale, bool):
            raise DesktopError("the sandbox sent a malformed reply: its stale flag is not true or false", fatal=True)
        if stale and check is None:
            raise DesktopError("the sandbox answered stale to a request that had no screen check", fatal=True)
        zoom = action.kind is Kind.ZOOM and action.region is not None and not stale
        asked_only(blobs, {"screen", "image"} if zoom else {"screen"}, action.kind.value)
        frame = picture(blobs, self.size)
        if stale:
            return StepResult(frame, stale=True)
        image = None
        if zoom and action.region is not None:
            x0, y0, x1, y1 = action.region
            image = picture(blobs, Size(x1 - x0, y1 - y0), name="image")
        output = header.get("output")
        return StepResult(frame, output=truncate(output, 1000) if isinstance(output, str) else None, image=image)

    def capture_region(self, region: tuple[int, int, int, int]) -> Frame:
        _header, blobs = self._request({"op": "region", "region": list(region)}, timeout=self.step_timeout)
        asked_only(blobs, {"screen"}, "region capture")
        x0, y0, x1, y1 = region
        return picture(blobs, Size(x1 - x0, y1 - y0))
