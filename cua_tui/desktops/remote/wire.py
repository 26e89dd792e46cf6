"""The helper's wire format, the same on both sides: actions as requests carry them, and replies:
``CUA1 <n>\\n`` then ``n`` bytes of JSON header, then the blobs the header lists (name, bytes, and
width/height for images). ``parse_reply`` checks every length against the bytes received and a cap.
Shipped in the zipapp: the standard library and the core's actions only.
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from ...core.actions import Action, Kind

MAGIC = b"CUA1"
# The egress records of a busy step fit; a longer header is refused.
MAX_HEADER_BYTES = 256 * 1024
# Egress records a reply carries at most: the rest come with the next reply.
MAX_EGRESS_PER_REPLY = 500
# Files and bytes a ``downloads`` reply carries at most; a larger file is listed, not sent.
MAX_DOWNLOADS = 32
DOWNLOADS_CAP = 8 * 1024 * 1024

# name -> (bytes, width, height); width and height are 0 for a file that is not a picture
Blobs = dict[str, tuple[bytes, int, int]]


class ReplyError(ValueError):
    """A reply from the sandbox that does not have the expected shape (it is untrusted input)."""


def action_to_wire(action: Action) -> dict[str, Any]:
    """Every field of the action, typed text included: it travels to the sandbox, never to a record."""
    data: dict[str, Any] = {}
    for f in fields(action):
        value = getattr(action, f.name)
        if isinstance(value, tuple):
            value = [list(v) if isinstance(v, tuple) else v for v in value]
        data[f.name] = value
    data["kind"] = action.kind.value
    return data


def action_from_wire(data: dict[str, Any]) -> Action:
    names = {f.name for f in fields(Action)}
    values = {k: v for k, v in data.items() if k in names}
    values["kind"] = Kind(values["kind"])
    for name in ("point", "region"):
        if values.get(name) is not None:
            values[name] = tuple(values[name])
    for name in ("path", "hold"):
        values[name] = tuple(tuple(v) if isinstance(v, list) else v for v in values.get(name, ()))
    return Action(**values)


def encode_reply(header: dict[str, Any], blobs: Blobs | None = None) -> bytes:
    """``blobs``: name -> (bytes, width, height). The header lists them in order."""
    listed = [{"name": n, "bytes": len(b), "width": w, "height": h} for n, (b, w, h) in (blobs or {}).items()]
    head = json.dumps({**header, "blobs": listed}, separators=(",", ":")).encode()
    return MAGIC + b" " + str(len(head)).encode() + b"\n" + head + b"".join(b for b, _w, _h in (blobs or {}).values())


def parse_reply(data: bytes, *, cap: int) -> tuple[dict[str, Any], Blobs]:
    """The header and the blobs of a reply, every length checked against the bytes received and ``cap``."""
    if len(data) > cap:
        raise ReplyError(f"the reply is {len(data)} bytes, over the {cap}-byte cap")
    first, sep, _rest = data[:32].partition(b"\n")
    parts = first.split(b" ")
    if not sep or len(parts) != 2 or parts[0] != MAGIC or not parts[1].isdigit():
        raise ReplyError("the reply does not start with the helper's header")
    size = int(parts[1])
    start = len(first) + 1
    if size > MAX_HEADER_BYTES or start + size > len(data):
        raise ReplyError("the reply's header length is out of bounds")
    try:
        header = json.loads(data[start : start + size])
    except (UnicodeDecodeError, ValueError):
        raise ReplyError("the reply's header is not JSON") from None
    if not isinstance(header, dict) or not isinstance(header.get("blobs"), list):
        raise ReplyError("the reply's header is not an object with a list of blobs")
    offset, blobs = start + size, {}
    for blob in header["blobs"]:
        if not isinstance(blob, dict) or not all(
            isinstance(blob.get(k), int) and not isinstance(blob.get(k), bool) and blob[k] >= 0
            for k in ("bytes", "width", "height")
        ):
            raise ReplyError("the reply lists a blob without its byte count and size")
        name, length = blob.get("name"), blob["bytes"]
        if not isinstance(name, str) or name in blobs or offset + length > len(data):
            raise ReplyError("the reply lists more bytes than it carries")
        blobs[name] = (data[offset : offset + length], blob["width"], blob["height"])
        offset += length
    if offset != len(data):
        raise ReplyError(f"the reply carries {len(data) - offset} bytes more than its header lists")
    return header, blobs
