"""HTTP/1.1 framing for the proxy: header blocks, request lines, body framing and copying, the heads the
proxy writes. Strict on purpose: anything ambiguous (folded headers, both Content-Length and
Transfer-Encoding, bad chunk sizes) is a 400, so the proxy and the server never read a request differently."""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass

MAX_HEADER_BYTES = 64 * 1024
COPY_CHUNK = 64 * 1024

_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([0-9]{3})(?: .*)?")
HOP_BY_HOP = frozenset({"connection", "keep-alive", "upgrade", "te", "proxy-connection"})
FRAMING = frozenset({"content-length", "transfer-encoding"})
_PHRASES = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}


class BadRequest(Exception):
    """Malformed request: answered 400."""


@dataclass(slots=True)
class Request:
    """A parsed request head."""

    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]


async def read_head(reader: asyncio.StreamReader) -> list[bytes] | None:
    """The lines of one header block (request or status line first), without line ends. None on a clean EOF
    before anything was sent. Raises BadRequest when it is too large or cut short."""
    lines: list[bytes] = []
    total = 0
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if not lines and not exc.partial.strip():
                return None
            raise BadRequest("connection closed in the middle of the header block") from None
        except asyncio.LimitOverrunError:
            raise BadRequest(f"header line longer than {MAX_HEADER_BYTES // 1024} KiB") from None
        total += len(line)
        if total > MAX_HEADER_BYTES:
            raise BadRequest(f"header block larger than {MAX_HEADER_BYTES // 1024} KiB")
        line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            if lines:
                return lines
            # RFC 9112 2.2: ignore empty lines before the request line
            continue
        lines.append(line)


def parse_request(lines: list[bytes]) -> Request:
    """The request line and headers of a header block; BadRequest for anything not strictly HTTP/1.x."""
    try:
        request_line = lines[0].decode("ascii")
    except UnicodeDecodeError:
        raise BadRequest("request line is not ASCII") from None
    parts = request_line.split(" ")
    if len(parts) != 3:
        raise BadRequest("malformed request line")
    method, target, version = parts
    if not _TOKEN.fullmatch(method.encode()):
        raise BadRequest("malformed method")
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest("unsupported protocol version")
    if not target or any(ord(c) < 0x21 or ord(c) == 0x7F for c in target):
        raise BadRequest("malformed request target")
    return Request(method, target, version, _parse_headers(lines[1:]))


def _parse_headers(lines: list[bytes]) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    for raw in lines:
        if raw[:1] in (b" ", b"\t"):
            raise BadRequest("folded header lines are not supported")
        name, sep, value = raw.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):
            raise BadRequest("malformed header line")
        if any(b in value for b in (b"\r", b"\n", b"\0")):
            raise BadRequest("control character in a header value")
        headers.append((name.decode("ascii"), value.strip(b" \t").decode("latin-1")))
    return headers


def body_framing(req: Request) -> tuple[str, int]:
    """("none", 0), ("length", n) or ("chunked", 0). Ambiguous framing is a 400 (request smuggling)."""
    lengths = {v.strip() for n, v in req.headers if n.lower() == "content-length"}
    codings = [v for n, v in req.headers if n.lower() == "transfer-encoding"]
    if codings:
        if lengths:
            raise BadRequest("both Content-Length and Transfer-Encoding")
        last = ",".join(codings).split(",")[-1].strip().lower()
        if last != "chunked":
            raise BadRequest("the last transfer coding must be chunked")
        return "chunked", 0
    if lengths:
        if len(lengths) != 1 or not (value := lengths.pop()).isdigit() or not value.isascii():
            raise BadRequest("invalid Content-Length")
        return "length", int(value)
    return "none", 0


def request_head(req: Request, path: str, authority: str) -> bytes:
    """The head forwarded upstream: origin-form path, Host rewritten to the judged authority, hop-by-hop and
    proxy headers dropped, and ``Connection: close`` (one request per connection)."""
    named = {
        token.strip().lower()
        for name, value in req.headers
        if name.lower() == "connection"
        for token in value.split(",")
    }
    drop = (HOP_BY_HOP | named | {"host"}) - FRAMING
    out = [f"{req.method} {path} {req.version}", f"Host: {authority}"]
    out += [
        f"{name}: {value}"
        for name, value in req.headers
        if name.lower() not in drop and not name.lower().startswith("proxy-")
    ]
    out.append("Connection: close")
    return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")


def response_head(lines: list[bytes]) -> bytes:
    """The upstream's final head passed on, without hop-by-hop headers, with ``Connection: close``."""
    named = set()
    for raw in lines[1:]:
        name, _, value = raw.partition(b":")
        if name.strip().lower() == b"connection":
            named |= {t.strip().lower() for t in value.split(b",")}
    drop = ({n.encode() for n in HOP_BY_HOP} | named) - {n.encode() for n in FRAMING}
    kept = [lines[0]] + [raw for raw in lines[1:] if raw.partition(b":")[0].strip().lower() not in drop]
    return b"\r\n".join([*kept, b"Connection: close"]) + b"\r\n\r\n"


def error_response(status: int, message: str) -> bytes:
    """A complete plain-text answer of the proxy's own (400, 403 or 502) that closes the connection."""
    body = (message + "\n").encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {status} {_PHRASES[status]}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy until EOF, then pass the half-close on."""
    while data := await src.read(COPY_CHUNK):
        dst.write(data)
        await dst.drain()
    if dst.can_write_eof():
        with contextlib.suppress(OSError, RuntimeError):
            dst.write_eof()


async def copy_exactly(src: asyncio.StreamReader, dst: asyncio.StreamWriter, n: int) -> None:
    """Copy a body of ``n`` bytes (Content-Length)."""
    while n:
        data = await src.read(min(n, COPY_CHUNK))
        if not data:
            raise BadRequest("the client closed before sending the whole body")
        dst.write(data)
        await dst.drain()
        n -= len(data)


async def _readline(reader: asyncio.StreamReader) -> bytes:
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError:
        raise BadRequest("the client closed in the middle of a chunked body") from None
    except asyncio.LimitOverrunError:
        raise BadRequest("chunk line too long") from None
    return line.rstrip(b"\r\n")


async def copy_chunked(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy a chunked body and its trailer section, checking each chunk's framing."""
    while True:
        line = await _readline(src)
        size_text = line.split(b";", 1)[0].strip(b" \t")
        if not _CHUNK_SIZE.fullmatch(size_text):
            raise BadRequest("malformed chunk size")
        size = int(size_text, 16)
        dst.write(line + b"\r\n")
        if size == 0:
            break
        await copy_exactly(src, dst, size)
        if await _readline(src):
            raise BadRequest("missing CRLF after a chunk")
        dst.write(b"\r\n")
        await dst.drain()
    total = 0
    while True:  # trailer section, ended by an empty line
        line = await _readline(src)
        total += len(line) + 2
        if total > MAX_HEADER_BYTES:
            raise BadRequest("chunked trailer section too large")
        dst.write(line + b"\r\n")
        if not line:
            break
    await dst.drain()
