"""The controller's checks of what the sandbox's helper sends back. A reply is untrusted: its length is
capped for the run's screen (``reply_cap``), it carries only the pictures its request asked for
(``asked_only``), each PNG header is checked against the reply's header and the expected size before
anything decodes it (``picture``), and at most ``MAX_EGRESS_PER_REPLY`` egress records are kept
(``egress_events``); what else it claims is kept small and plain.
"""

from __future__ import annotations

from typing import Any

from ...core import events as ev
from ...core.geometry import Size
from ...core.imaging import ImageRefused, decode_png, png_size
from ...core.ports import DesktopError, Frame, Verification, VerifierPlace
from ...core.text import one_line, truncate
from .wire import DOWNLOADS_CAP, MAX_EGRESS_PER_REPLY, MAX_HEADER_BYTES, Blobs

# The Docker channel's cap: its ``downloads`` reply carries up to 8 MiB of files.
REPLY_CAP = 24 * 1024 * 1024
# What a helper's exec may write to stderr: a traceback fits, a flood is cut off.
STDERR_CAP = 64 * 1024
EGRESS_FIELDS = ("host", "port", "method", "allowed", "reason")


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


def picture(blobs: Blobs, size: Size, name: str = "screen") -> Frame:
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


def step_timing(data: Any) -> dict[str, float]:
    """A reply's timing, as the sandbox claims it: a few known numbers, nothing else kept."""
    if not isinstance(data, dict):
        return {}
    return {
        k: float(v)
        for k in ("input", "settle", "encode", "helper")
        if isinstance(v := data.get(k), (int, float)) and not isinstance(v, bool) and 0 <= v < 1e7
    }


def asked_only(blobs: Blobs, names: set[str], what: str) -> None:
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
