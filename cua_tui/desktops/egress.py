"""The egress proxy of the local desktop: the sandbox's only way out (DESIGN.md, REFERENCE.md "Local desktop").

The desktop runs in a network namespace that has nothing but ``lo``. Its browser is pointed at a loopback port
inside the namespace where a relay (:func:`relay_command`, socat) forwards every connection to a Unix socket
bind-mounted from the parent. On the other end of that socket listens :class:`EgressProxy`, an HTTP/1.1 forward
proxy that lets through only what an :class:`AllowList` names and records every decision.

Rules, following the sandboxing guide (seeds/003, "Layer 3" and the Squid configuration):

* the decision is made on the host and port of the request target only (``CONNECT host:port`` or an absolute
  ``http://`` URL), never on the Host header, which is rewritten to the judged authority before forwarding;
* an address carrying user information (``http://allowed@evil/``) is refused outright, whatever side of the ``@``
  is on the list; a fragment or backslash ends the authority (``http://evil#@allowed`` is judged as ``evil``);
* a host entry without a port allows ports 80 and 443; ``host:port`` allows that port only;
* ``*.example.org`` allows subdomains of example.org (not example.org itself, not ``evilexample.org``);
* names are compared as lowercase ASCII (punycode); anything outside ``[a-z0-9.-]`` is refused, and an address
  that looks numeric must be a canonical IPv4 or IPv6 literal (``2130706433``, ``127.1``, ``0x7f.0.0.1`` are refused);
  the grammar of entries and hosts is :mod:`cua_tui.core.allowlist`, the same one the policy file is checked with;
* a refused host is never resolved; an allowed name must resolve to public addresses (a name that resolves to
  loopback, private, link-local or metadata addresses is refused) unless ``allow_private_resolution`` is set;
  IP literals on the list are connected to as written;
* every redirect is a new request and is judged again.

For HTTPS the proxy sees only the CONNECT host name: it cannot see or stop TLS SNI / Host mismatches inside the
tunnel (domain fronting). That is the same limit as Squid without TLS interception.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import re
import socket
import stat
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path

from ..core.allowlist import AllowList, Judgement, parse_port, show_host
from ..core.text import truncate

__all__ = ["MAX_HEADER_BYTES", "AllowList", "EgressProxy", "EgressRecord", "Judgement", "relay_command"]

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())  # a library: say nothing on stderr (under the TUI) unless logging is set up

MAX_HEADER_BYTES = 64 * 1024
_COPY_CHUNK = 64 * 1024
_RECORD_HOST_MAX = 300
_RECORD_METHOD_MAX = 40

_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([0-9]{3})(?: .*)?")
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "upgrade", "te", "proxy-connection"})
_FRAMING = frozenset({"content-length", "transfer-encoding"})


# --------------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class EgressRecord:
    """One request seen by the proxy and what was decided for it."""

    host: str
    port: int
    method: str
    allowed: bool
    reason: str
    ts: float


# ------------------------------------------------------------------------------------------------ the relay

_SOCAT_SPECIAL = frozenset(":,!\"'\\{}[]()")


def relay_command(socket_path: str, port: int) -> list[str]:
    """argv of the relay to run inside the network namespace: loopback TCP ``port`` -> the proxy's Unix socket."""
    path = str(socket_path)
    if not path or any(c in _SOCAT_SPECIAL or not c.isprintable() for c in path):
        raise ValueError(f"socket path {path!r} is empty or has characters socat would misread")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"invalid relay port {port!r}")
    return ["socat", f"TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr", f"UNIX-CONNECT:{path}"]


# ---------------------------------------------------------------------------------------------------- proxy


class _BadRequest(Exception):
    """Malformed request: answered 400."""


class _Refused(Exception):
    """Refused before the allow-list was consulted (user information): answered 403."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__(reason)
        self.host, self.port, self.reason = host, port, reason


class _NotPublic(Exception):
    """An allowed name resolved only to non-public addresses: answered 403."""


@dataclass(slots=True)
class _Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]


async def _read_head(reader: asyncio.StreamReader) -> list[bytes] | None:
    """The lines of one header block (request or status line first), without line ends. None on a clean EOF
    before anything was sent. Raises _BadRequest when it is too large or cut short."""
    lines: list[bytes] = []
    total = 0
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if not lines and not exc.partial.strip():
                return None
            raise _BadRequest("connection closed in the middle of the header block") from None
        except asyncio.LimitOverrunError:
            raise _BadRequest(f"header line longer than {MAX_HEADER_BYTES // 1024} KiB") from None
        total += len(line)
        if total > MAX_HEADER_BYTES:
            raise _BadRequest(f"header block larger than {MAX_HEADER_BYTES // 1024} KiB")
        line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            if lines:
                return lines
            continue  # RFC 9112 2.2: ignore empty lines before the request line
        lines.append(line)


def _parse_request(lines: list[bytes]) -> _Request:
    try:
        request_line = lines[0].decode("ascii")
    except UnicodeDecodeError:
        raise _BadRequest("request line is not ASCII") from None
    parts = request_line.split(" ")
    if len(parts) != 3:
        raise _BadRequest("malformed request line")
    method, target, version = parts
    if not _TOKEN.fullmatch(method.encode()):
        raise _BadRequest("malformed method")
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise _BadRequest("unsupported protocol version")
    if not target or any(ord(c) < 0x21 or ord(c) == 0x7F for c in target):
        raise _BadRequest("malformed request target")
    headers: list[tuple[str, str]] = []
    for raw in lines[1:]:
        if raw[:1] in (b" ", b"\t"):
            raise _BadRequest("folded header lines are not supported")
        name, sep, value = raw.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):
            raise _BadRequest("malformed header line")
        if any(b in value for b in (b"\r", b"\n", b"\0")):
            raise _BadRequest("control character in a header value")
        headers.append((name.decode("ascii"), value.strip(b" \t").decode("latin-1")))
    return _Request(method, target, version, headers)


def _split_hostport(authority: str, default_port: int | None) -> tuple[str, int]:
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise _BadRequest("malformed IPv6 address in the request target")
        host, rest = authority[1:end], authority[end + 1 :]
        if rest and not rest.startswith(":"):
            raise _BadRequest("malformed authority in the request target")
        port_text = rest[1:] if rest else None
    else:
        if authority.count(":") > 1:
            raise _BadRequest("IPv6 addresses must be written in brackets")
        host, sep, port_text_ = authority.partition(":")
        port_text = port_text_ if sep else None
    if not host:
        raise _BadRequest("missing host in the request target")
    if port_text is None:
        if default_port is None:
            raise _BadRequest("missing port in the CONNECT target")
        return host, default_port
    port = parse_port(port_text)
    if port is None:
        raise _BadRequest("invalid port in the request target")
    return host, port


def _parse_authority(authority: str, default_port: int | None) -> tuple[str, int]:
    if "@" in authority:
        after = authority.rpartition("@")[2]
        try:
            host, port = _split_hostport(after, default_port)
        except _BadRequest:
            host, port = after, default_port or 0
        raise _Refused(host, port, "refused: the address carries user information (user@host)")
    return _split_hostport(authority, default_port)


def _body_framing(req: _Request) -> tuple[str, int]:
    """("none", 0), ("length", n) or ("chunked", 0). Ambiguous framing is a 400 (request smuggling)."""
    lengths = {v.strip() for n, v in req.headers if n.lower() == "content-length"}
    codings = [v for n, v in req.headers if n.lower() == "transfer-encoding"]
    if codings:
        if lengths:
            raise _BadRequest("both Content-Length and Transfer-Encoding")
        last = ",".join(codings).split(",")[-1].strip().lower()
        if last != "chunked":
            raise _BadRequest("the last transfer coding must be chunked")
        return "chunked", 0
    if lengths:
        if len(lengths) != 1 or not (value := lengths.pop()).isdigit() or not value.isascii():
            raise _BadRequest("invalid Content-Length")
        return "length", int(value)
    return "none", 0


def _is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _close(writer: asyncio.StreamWriter | None, abort: bool = False) -> None:
    if writer is None:
        return
    with contextlib.suppress(Exception):
        if abort:
            writer.transport.abort()
        else:
            writer.close()


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy until EOF, then pass the half-close on."""
    while data := await src.read(_COPY_CHUNK):
        dst.write(data)
        await dst.drain()
    if dst.can_write_eof():
        with contextlib.suppress(OSError, RuntimeError):
            dst.write_eof()


async def _copy_exactly(src: asyncio.StreamReader, dst: asyncio.StreamWriter, n: int) -> None:
    while n:
        data = await src.read(min(n, _COPY_CHUNK))
        if not data:
            raise _BadRequest("the client closed before sending the whole body")
        dst.write(data)
        await dst.drain()
        n -= len(data)


async def _readline(reader: asyncio.StreamReader) -> bytes:
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError:
        raise _BadRequest("the client closed in the middle of a chunked body") from None
    except asyncio.LimitOverrunError:
        raise _BadRequest("chunk line too long") from None
    return line.rstrip(b"\r\n")


async def _copy_chunked(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    while True:
        line = await _readline(src)
        size_text = line.split(b";", 1)[0].strip(b" \t")
        if not _CHUNK_SIZE.fullmatch(size_text):
            raise _BadRequest("malformed chunk size")
        size = int(size_text, 16)
        dst.write(line + b"\r\n")
        if size == 0:
            break
        await _copy_exactly(src, dst, size)
        if await _readline(src):
            raise _BadRequest("missing CRLF after a chunk")
        dst.write(b"\r\n")
        await dst.drain()
    total = 0
    while True:  # trailer section, ended by an empty line
        line = await _readline(src)
        total += len(line) + 2
        if total > MAX_HEADER_BYTES:
            raise _BadRequest("chunked trailer section too large")
        dst.write(line + b"\r\n")
        if not line:
            break
    await dst.drain()


_PHRASES = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}


class EgressProxy:
    """Allow-list HTTP/1.1 forward proxy on a Unix socket, run by an asyncio loop in a daemon thread.

    ``on_event`` is called once per request (allowed, refused or malformed) from the proxy thread; it must
    return quickly, and an exception in it is logged and ignored.
    """

    def __init__(
        self,
        socket_path: Path,
        allow: AllowList,
        on_event: Callable[[EgressRecord], None] | None = None,
        *,
        connect_timeout: float = 10.0,
        header_timeout: float = 30.0,
        allow_private_resolution: bool = False,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.allow = allow
        self._on_event = on_event
        self._connect_timeout = connect_timeout
        self._header_timeout = header_timeout
        self._allow_private = allow_private_resolution
        self._lock = threading.Lock()
        self._records: list[EgressRecord] = []
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._stopped = False
        self._closing = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._socket_ino: tuple[int, int] | None = None

    # ----------------------------------------------------------------------------------------- lifecycle

    @property
    def records(self) -> list[EgressRecord]:
        """A copy of every record so far, oldest first."""
        with self._lock:
            return list(self._records)

    def start(self) -> None:
        """Listen on the socket (mode 0666); returns once connections are accepted."""
        with self._lock:
            if self._stopped:
                raise RuntimeError("this EgressProxy was stopped; make a new one")
            if self._thread is not None:
                raise RuntimeError("EgressProxy.start() called twice")
            self._thread = threading.Thread(target=self._run, name="cua-egress-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=30):
            raise RuntimeError("the egress proxy did not start listening in time")
        if self._start_error is not None:
            with self._lock:
                self._stopped = True
            raise self._start_error

    def stop(self) -> None:
        """Close the listener and every open connection and tunnel, remove the socket. Idempotent; any thread.

        From any thread but the proxy's own (an ``on_event`` callback), it returns once everything is closed."""
        with self._lock:
            first = not self._stopped
            self._stopped = True
            thread = self._thread
        if thread is None:
            return
        if threading.current_thread() is thread:  # from on_event: cannot wait for ourselves
            if first:
                asyncio.get_running_loop().create_task(self._shutdown())
            return
        self._ready.wait(timeout=30)  # stop() racing with start() from another thread
        loop = self._loop
        if loop is None or self._start_error is not None:
            return
        if first:
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
            except Exception:  # the loop already ended, or shutdown hung: still clean up what we can
                log.debug("egress proxy shutdown", exc_info=True)
                self._remove_socket()
        thread.join(timeout=10)

    def __enter__(self) -> EgressProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._server = loop.run_until_complete(self._listen())
        except BaseException as exc:
            self._start_error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_default_executor(timeout=1))
            loop.close()

    async def _listen(self) -> asyncio.Server:
        path = self.socket_path
        with contextlib.suppress(FileNotFoundError):
            mode = path.lstat().st_mode
            if not stat.S_ISSOCK(mode):
                raise FileExistsError(f"{path} exists and is not a socket")
            path.unlink()  # a stale socket from an earlier run
        server = await asyncio.start_unix_server(self._accept, path=str(path), limit=MAX_HEADER_BYTES)
        os.chmod(path, 0o666)
        st = path.lstat()
        self._socket_ino = (st.st_dev, st.st_ino)
        return server

    def _remove_socket(self) -> None:
        with contextlib.suppress(OSError):
            st = self.socket_path.lstat()
            if (st.st_dev, st.st_ino) == self._socket_ino:
                self.socket_path.unlink()

    async def _shutdown(self) -> None:
        self._closing = True
        if self._server is not None:
            # Stop accepting first and let connections already accepted reach _accept (which now aborts them):
            # asyncio fails to build, and leaks without closing, a connection it accepts after Server.close().
            loop = asyncio.get_running_loop()
            for sock in self._server.sockets:
                with contextlib.suppress(Exception):
                    loop.remove_reader(sock.fileno())
            for _ in range(5):
                await asyncio.sleep(0)
            self._server.close()  # connections still queued on the listening socket are reset by the kernel
        for writer in list(self._writers):
            _close(writer, abort=True)
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        self._remove_socket()
        asyncio.get_running_loop().call_soon(asyncio.get_running_loop().stop)

    # ------------------------------------------------------------------------------------------ requests

    def _record(self, host: str, port: int, method: str, allowed: bool, reason: str) -> None:
        rec = EgressRecord(
            truncate(host, _RECORD_HOST_MAX), port, truncate(method, _RECORD_METHOD_MAX), allowed, reason, time.time()
        )
        with self._lock:
            self._records.append(rec)
        if self._on_event is not None:
            try:
                self._on_event(rec)
            except Exception:
                log.exception("egress on_event callback failed")

    def _track(self, writer: asyncio.StreamWriter) -> asyncio.StreamWriter:
        self._writers.add(writer)
        if self._closing:
            _close(writer, abort=True)
        return writer

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Called synchronously for each new connection, so that shutdown sees it even before its task runs."""
        self._track(writer)
        if self._closing:
            return
        task = asyncio.get_running_loop().create_task(self._handle(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: list[asyncio.StreamWriter] = []
        try:
            await self._serve(reader, writer, upstream)
        except (asyncio.CancelledError, ConnectionError, OSError):
            pass
        except Exception:
            log.exception("egress proxy connection failed")
        finally:
            for w in (*upstream, writer):
                _close(w, abort=self._closing)
                self._writers.discard(w)

    async def _respond(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, status: int, message: str
    ) -> None:
        body = (message + "\n").encode("utf-8", "replace")
        head = (
            f"HTTP/1.1 {status} {_PHRASES[status]}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode("ascii") + body)
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        # Lingering close: read (and drop) what the client still sends, briefly, so that closing with unread
        # data does not turn into a reset that swallows the answer.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                drained = 0
                while drained < 1 << 20 and (data := await reader.read(_COPY_CHUNK)):
                    drained += len(data)

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: list[asyncio.StreamWriter]
    ) -> None:
        method, host, port = "", "", 0
        try:
            try:
                async with asyncio.timeout(self._header_timeout):
                    lines = await _read_head(reader)
            except TimeoutError:
                return  # nothing usable arrived in time: just close
            if lines is None:
                return  # connected and closed without a request (a relay probe, a port scan)
            req = _parse_request(lines)
            method = req.method
            if method == "CONNECT":
                if any(c in req.target for c in "/?#\\"):
                    raise _BadRequest("CONNECT needs host:port")
                host, port = _parse_authority(req.target, None)
                up = await self._open(reader, writer, method, host, port, upstream)
                if up is None:
                    return
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
                await self._relay(_pipe(reader, up[1]), _pipe(up[0], writer))
                return
            path, host, port = self._absolute_target(req.target)
            framing = _body_framing(req)
            if not path.startswith("/") and self.allow.judge(host, port).allowed:  # refused hosts get their 403
                raise _BadRequest("malformed path in the request target")
            up = await self._open(reader, writer, method, host, port, upstream)
            if up is None:
                return
            ureader, uwriter = up
            uwriter.write(self._request_head(req, path, self._judged_authority(host, port)))
            await self._relay(
                self._send_body(framing, reader, uwriter), self._relay_response(ureader, writer), until_second=True
            )
        except _BadRequest as exc:
            self._record(host, port, method, False, f"bad request: {exc}")
            await self._respond(reader, writer, 400, f"cua-tui egress proxy: bad request: {exc}")
        except _Refused as exc:
            self._record(exc.host, exc.port, method, False, exc.reason)
            await self._respond(reader, writer, 403, f"cua-tui egress proxy: {exc.reason}")

    @staticmethod
    def _absolute_target(target: str) -> tuple[str, str, int]:
        lower = target[:8].lower()
        if lower.startswith("https://"):
            raise _BadRequest("https:// URLs go through CONNECT")
        if not lower.startswith("http://"):
            if target.startswith("/") or target == "*":
                raise _BadRequest("this is a forward proxy: the request target must be an absolute http:// URL")
            raise _BadRequest("only http:// URLs can be forwarded")
        rest = target[7:]
        end = next((i for i, c in enumerate(rest) if c in "/?#\\"), len(rest))
        authority, tail = rest[:end], rest[end:]
        host, port = _parse_authority(authority, 80)
        tail = tail.split("#", 1)[0]
        if tail.startswith("?"):
            tail = "/" + tail
        if not tail:
            tail = "/"
        return tail, host, port

    def _judged_authority(self, host: str, port: int) -> str:
        canon = self.allow.judge(host, port).host or host
        return show_host(canon) + ("" if port == 80 else f":{port}")

    @staticmethod
    def _request_head(req: _Request, path: str, authority: str) -> bytes:
        named = {
            token.strip().lower()
            for name, value in req.headers
            if name.lower() == "connection"
            for token in value.split(",")
        }
        drop = (_HOP_BY_HOP | named | {"host"}) - _FRAMING
        out = [f"{req.method} {path} {req.version}", f"Host: {authority}"]
        out += [
            f"{name}: {value}"
            for name, value in req.headers
            if name.lower() not in drop and not name.lower().startswith("proxy-")
        ]
        out.append("Connection: close")
        return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")

    async def _open(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        method: str,
        host: str,
        port: int,
        upstream: list[asyncio.StreamWriter],
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """Judge host:port, connect if allowed, record the decision, answer 403/502 if it goes no further."""
        j = self.allow.judge(host, port)
        shown = f"{show_host(j.host or host)}:{port}"
        if not j.allowed or j.host is None:
            self._record(j.host or host, port, method, False, j.reason)
            await self._respond(reader, writer, 403, f"cua-tui egress proxy refused {shown}: {j.reason}")
            return None
        try:
            async with asyncio.timeout(self._connect_timeout):
                ureader, uwriter = await self._connect(j.host, port, j.is_ip)
        except _NotPublic as exc:
            reason = f"refused: {exc}"
            self._record(j.host, port, method, False, reason)
            await self._respond(reader, writer, 403, f"cua-tui egress proxy refused {shown}: {reason}")
            return None
        except TimeoutError:
            reason = f"{j.reason}; connection failed: no answer within {self._connect_timeout:g} s"
            self._record(j.host, port, method, True, reason)
            await self._respond(reader, writer, 502, f"cua-tui egress proxy could not reach {shown}: {reason}")
            return None
        except OSError as exc:
            what = "DNS lookup failed" if isinstance(exc, socket.gaierror) else "connection failed"
            reason = f"{j.reason}; {what}: {exc.strerror or exc}"
            self._record(j.host, port, method, True, reason)
            await self._respond(reader, writer, 502, f"cua-tui egress proxy could not reach {shown}: {reason}")
            return None
        upstream.append(self._track(uwriter))
        self._record(j.host, port, method, True, j.reason)
        return ureader, uwriter

    async def _connect(self, host: str, port: int, is_ip: bool) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if is_ip:
            return await asyncio.open_connection(host, port, limit=MAX_HEADER_BYTES)
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses: list[str] = []
        for *_, sockaddr in infos:
            address = str(sockaddr[0]).split("%", 1)[0]
            if address not in addresses:
                addresses.append(address)
        if not self._allow_private:
            public = [a for a in addresses if _is_public(ipaddress.ip_address(a))]
            if not public:
                raise _NotPublic(f"{host} resolves to {', '.join(addresses) or 'nothing'}, not a public address")
            addresses = public
        error: OSError = OSError(f"no address for {host}")
        for address in addresses:
            try:
                return await asyncio.open_connection(address, port, limit=MAX_HEADER_BYTES)
            except OSError as exc:
                error = exc
        raise error

    @staticmethod
    async def _relay(
        first: Coroutine[object, object, None], second: Coroutine[object, object, None], *, until_second: bool = False
    ) -> None:
        """Run both directions until both are done, or ``second`` is done (``until_second``), or either fails."""
        tasks = [asyncio.ensure_future(first), asyncio.ensure_future(second)]
        try:
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                failed = [t for t in done if not t.cancelled() and t.exception() is not None]
                for task in failed:
                    if not isinstance(task.exception(), OSError):
                        log.debug("egress relay ended: %r", task.exception())
                if failed or (until_second and tasks[1].done()):
                    break
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    @staticmethod
    async def _send_body(framing: tuple[str, int], reader: asyncio.StreamReader, uwriter: asyncio.StreamWriter) -> None:
        await uwriter.drain()
        kind, length = framing
        if kind == "length":
            await _copy_exactly(reader, uwriter, length)
        elif kind == "chunked":
            await _copy_chunked(reader, uwriter)
        # Anything the client sends after this one request (a pipelined second request) is not forwarded.

    async def _relay_response(self, ureader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sent = False
        try:
            while True:
                lines = await _read_head(ureader)
                if lines is None:
                    raise _BadRequest("the server closed without answering")
                m = _STATUS_LINE.fullmatch(lines[0])
                if not m:
                    raise _BadRequest("the server did not answer in HTTP/1.x")
                code = int(m[1])
                if 100 <= code < 200 and code != 101:  # interim response (100 Continue): pass it on as is
                    writer.write(b"\r\n".join(lines) + b"\r\n\r\n")
                    await writer.drain()
                    sent = True
                    continue
                break
        except _BadRequest as exc:
            if not sent:
                body = f"cua-tui egress proxy: bad answer from upstream: {exc}\n".encode()
                writer.write(
                    b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\n"
                    + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
            return
        named = set()
        for raw in lines[1:]:
            name, _, value = raw.partition(b":")
            if name.strip().lower() == b"connection":
                named |= {t.strip().lower() for t in value.split(b",")}
        drop = ({n.encode() for n in _HOP_BY_HOP} | named) - {n.encode() for n in _FRAMING}
        kept = [lines[0]] + [raw for raw in lines[1:] if raw.partition(b":")[0].strip().lower() not in drop]
        writer.write(b"\r\n".join([*kept, b"Connection: close"]) + b"\r\n\r\n")
        await writer.drain()
        await _pipe(ureader, writer)
