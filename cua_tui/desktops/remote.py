"""What the helper-driven desktops share (``cwsandbox.py``, ``docker.py``): the project's own desktop runs
resident inside the sandbox (``helper.py``), and each request (an action and the screenshot after it, a
screenshot, a region, the verdict) is one exec whose stdout is the helper's reply.

A subclass says how one request travels (``_request``: the exec, and its errors as DesktopError); this base
judges what comes back. The reply is untrusted: its exit status, its shape (``parse_reply``, every length
checked against the run's cap, ``reply_cap``), only the pictures the request asked for (a zoom's, of the
zoom's size), each PNG header against the reply's header and the expected size before anything decodes
it, and at most ``MAX_EGRESS_PER_REPLY`` egress records (``egress_events``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..core import events as ev
from ..core.actions import Action, Kind
from ..core.geometry import Size
from ..core.imaging import ImageRefused, decode_png, png_size
from ..core.ports import DesktopError, Frame, StepResult, Verification, VerifierPlace
from ..core.stale import ScreenCheck
from ..core.text import one_line, truncate
from .helper import DOWNLOADS_CAP, MAX_EGRESS_PER_REPLY, MAX_HEADER_BYTES, ReplyError, action_to_wire, parse_reply

REPLY_CAP = 24 * 1024 * 1024  # the Docker channel's cap (its ``downloads`` reply carries up to 8 MiB of files)
STDERR_CAP = 64 * 1024  # what a helper's exec may write to stderr: a traceback fits, a flood is cut off
EGRESS_FIELDS = ("host", "port", "method", "allowed", "reason")

Blobs = dict[str, tuple[bytes, int, int]]


def png_bound(size: Size) -> int:
    """The most bytes an honest PNG of ``size`` takes: RGBA rows stored uncompressed, with the filter byte
    of each row, deflate's stored-block and PNG's chunk overhead (under 0.1%), and room for ancillary chunks."""
    raw = size.height * (1 + 4 * size.width)
    return raw + raw // 1024 + 64 * 1024


def reply_cap(size: Size) -> int:
    """The most an honest reply for a run of screen ``size`` takes: its header, and a screenshot with at most
    one picture no larger than the screen (a zoom's region lies on it), or the downloads a verifier fetches."""
    return MAX_HEADER_BYTES + max(2 * png_bound(size), DOWNLOADS_CAP)


def egress_events(records: Any, cap: int = MAX_EGRESS_PER_REPLY) -> tuple[list[ev.Egress], ev.Note | None]:
    """The egress records a reply claims, as events: well-formed ones only, fields bounded, at most ``cap``
    (the helper itself sends no more a reply); the excess is counted in one note, never recorded one by one."""
    if not isinstance(records, list):
        return [], None
    events: list[ev.Egress] = []
    excess = refused = malformed = 0
    for r in records:
        host, port, method, allowed, reason = (r.get(k) for k in EGRESS_FIELDS) if isinstance(r, dict) else [None] * 5
        if not (
            isinstance(host, str)
            and isinstance(port, int)
            and not isinstance(port, bool)
            and isinstance(method, str)
            and isinstance(allowed, bool)
        ):
            malformed += 1
        elif len(events) >= cap:
            excess += 1
            refused += not allowed
        else:
            reason = reason if isinstance(reason, str) else ""
            events.append(ev.Egress(truncate(host, 300), port, truncate(method, 40), allowed, truncate(reason, 300)))
    parts = []
    if excess:
        parts.append(f"{excess} egress record(s) over the {cap} a reply may carry ({refused} of them refused)")
    if malformed:
        parts.append(f"{malformed} malformed egress record(s)")
    note = ev.Note(f"the sandbox's reply claimed {' and '.join(parts)}: not recorded one by one") if parts else None
    return events, note


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
        self.reply_cap = reply_cap(size)
        self.timing: dict[str, float] = {}  # the last step's parts as the helper measured them (benchmarks)

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
        _only(blobs, {"screen"}, "ready request")
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
        _only(blobs, {"screen"}, "screenshot")
        return self._frame(blobs, self.size)

    def perform(self, action: Action) -> StepResult:
        return self.perform_checked(action, None)

    def perform_checked(self, action: Action, check: ScreenCheck | None) -> StepResult:
        """One request: the action, and with ``check`` only if its area still looks as the model saw it (the
        helper then answers ``stale`` without acting, with the screen as it is now)."""
        self._first = None
        request: dict[str, Any] = {"op": "perform", "action": action_to_wire(action)}
        if check is not None:
            request["check"] = check.to_wire()
        header, blobs = self._request(request, timeout=self.step_timeout)
        self.timing = _timing(header.get("timing"))
        stale = header.get("stale", False)
        if not isinstance(stale, bool):
            raise DesktopError("the sandbox sent a malformed reply: its stale flag is not true or false", fatal=True)
        if stale and check is None:
            raise DesktopError("the sandbox answered stale to a request that had no screen check", fatal=True)
        zoom = action.kind is Kind.ZOOM and action.region is not None and not stale
        _only(blobs, {"screen", "image"} if zoom else {"screen"}, action.kind.value)
        frame = self._frame(blobs, self.size)
        if stale:
            return StepResult(frame, stale=True)
        image = None
        if zoom and action.region is not None:
            x0, y0, x1, y1 = action.region
            image = self._frame(blobs, Size(x1 - x0, y1 - y0), name="image")
        output = header.get("output")
        return StepResult(frame, output=truncate(output, 1000) if isinstance(output, str) else None, image=image)

    def capture_region(self, region: tuple[int, int, int, int]) -> Frame:
        _header, blobs = self._request({"op": "region", "region": list(region)}, timeout=self.step_timeout)
        _only(blobs, {"screen"}, "region capture")
        x0, y0, x1, y1 = region
        return self._frame(blobs, Size(x1 - x0, y1 - y0))


def _timing(data: Any) -> dict[str, float]:
    """A reply's timing, as the sandbox claims it: a few known numbers, nothing else kept."""
    if not isinstance(data, dict):
        return {}
    return {
        k: float(v)
        for k in ("input", "settle", "encode", "helper")
        if isinstance(v := data.get(k), (int, float)) and not isinstance(v, bool) and 0 <= v < 1e7
    }


def _only(blobs: Blobs, names: set[str], what: str) -> None:
    """A reply carries the pictures its request asked for and nothing more (a hostile one may add a huge one)."""
    if set(blobs) - names:
        raise DesktopError(f"the sandbox's reply to a {what} carries a picture it did not ask for", fatal=True)


def verdict(data: Any) -> Verification | None:
    """A verifier's verdict as a reply's header carries it (``None``: the task has no verifier). It ran
    inside the sandbox: the verdict says so, and the user it names is the sandbox's own word too."""
    if data is None:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("passed"), bool):
        raise DesktopError("the sandbox's verifier sent a malformed verdict", fatal=True)
    user = data.get("user")
    return Verification(
        data["passed"],
        truncate(str(data.get("detail", "")), 500),
        truncate(str(data.get("verifier", "")), 100),
        where=VerifierPlace.SANDBOX,
        user=one_line(user, 60) if isinstance(user, str) else "",
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
