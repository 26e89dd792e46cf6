"""The allow-list forward proxy: HTTP/1.1 on a Unix socket, run by an asyncio loop in a daemon thread."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path

from ...core import events as ev
from ...core.allowlist import AllowList, show_host
from ...core.text import truncate
from .http1 import (
    COPY_CHUNK,
    MAX_HEADER_BYTES,
    STATUS_LINE,
    BadRequest,
    Request,
    body_framing,
    copy_chunked,
    copy_exactly,
    error_response,
    parse_request,
    pipe,
    read_head,
    request_head,
    response_head,
)
from .judge import NotPublic, Refused, absolute_target, connect_target, judged_authority, open_upstream

# The package's name, as when the proxy was one module: logging configuration keeps matching it.
log = logging.getLogger(__package__)
# a library: say nothing on stderr (under the TUI) unless logging is set up
log.addHandler(logging.NullHandler())

_RECORD_HOST_MAX = 300
_RECORD_METHOD_MAX = 40
CONNECT_TIMEOUT = 10.0  # seconds for an allowed request's upstream to answer the connect
HEADER_TIMEOUT = 30.0  # seconds for a client to send its request head
# The requests a run's proxy keeps and reports one by one (about 4 MB of audit log): a page looping on
# refused requests must not grow the controller and the log for as long as the run lasts. Past them, a
# request to a host not seen yet is still kept (a lab's verdict looks for its exfiltration host), up to
# NEW_HOSTS_PAST_CAP more; the rest are counted, and said once.
MAX_RECORDS = 20_000
NEW_HOSTS_PAST_CAP = 1_000


def _close(writer: asyncio.StreamWriter | None, abort: bool = False) -> None:
    if writer is None:
        return
    with contextlib.suppress(Exception):
        if abort:
            writer.transport.abort()
        else:
            writer.close()


@dataclass
class _Client:
    """One client connection: its streams, the upstream connections opened for it (closed with it), and
    its stage: "request" once its head is read (a connection opened ahead, idle, is none), then "tunnel"
    once a CONNECT tunnel is open (from then on no request is in flight)."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    upstream: list[asyncio.StreamWriter] = field(default_factory=list)
    stage: str = ""


class EgressProxy:
    """Allow-list HTTP/1.1 forward proxy on a Unix socket, run by an asyncio loop in a daemon thread.

    Each request (allowed, refused or malformed) is recorded as the core's :class:`~cua_tui.core.events.Egress`
    event, and ``on_event`` is called with it from the proxy thread; it must return quickly, and an exception
    in it is logged and ignored.
    """

    def __init__(
        self,
        socket_path: Path,
        allow: AllowList,
        on_event: Callable[[ev.Event], None] | None = None,
        *,
        allow_private_resolution: bool = False,
        max_records: int = MAX_RECORDS,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.allow = allow
        self._on_event = on_event
        self._allow_private = allow_private_resolution
        self._lock = threading.Lock()
        self._records: list[ev.Egress] = []
        self._max_records = max_records
        self._hosts: set[str] = set()  # of the requests kept
        self.dropped = 0  # requests past the cap, counted only
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
        # Requests being handled (an open tunnel is not one: its bytes are no new request), and when
        # the last one came or went: what wait_quiet watches.
        self._busy = 0
        self._last_activity = time.monotonic()

    # ---------------------------------------------------------------------------------------------
    # lifecycle

    @property
    def records(self) -> list[ev.Egress]:
        """A copy of every request's event so far, oldest first."""
        with self._lock:
            return list(self._records)

    def wait_quiet(self, quiet: float = 0.5, limit: float = 5.0, *, since: float = 0.0) -> bool:
        """Wait until no request is being handled and none came or went for ``quiet`` seconds, nor since
        ``since`` (a ``time.monotonic()``: the last action), at most ``limit`` seconds in all; whether it
        got quiet.

        A verdict judges what the proxy saw: a request the last action caused (a form's POST, the redirect
        it answered) can still be on its way when the run ends, and would be judged and logged too late. On
        a loaded machine the browser may not even have sent it yet: hence the quiet counted from the action
        too, not only from the last request the proxy saw (which may be the page's load, long before)."""
        deadline = time.monotonic() + limit
        while True:
            now = time.monotonic()
            with self._lock:
                busy, last = self._busy, max(self._last_activity, since)
            if self._stopped or (busy == 0 and now - last >= quiet):
                return True
            if now >= deadline:
                return False
            time.sleep(min(0.05, deadline - now))

    def _activity(self, busy: int) -> None:
        with self._lock:
            self._busy += busy
            self._last_activity = time.monotonic()

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
            except Exception:
                # the loop already ended, or shutdown hung: still clean up what we can
                log.debug("egress proxy shutdown", exc_info=True)
                self._remove_socket()
        thread.join(timeout=10)

    def __enter__(self) -> EgressProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        # The selector loop new_event_loop() makes on Unix, named so: its executor shutdown takes a
        # timeout.
        loop = asyncio.SelectorEventLoop()
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
            # Stop accepting first and let connections already accepted reach _accept (which now
            # aborts them): asyncio fails to build, and leaks without closing, a connection it
            # accepts after Server.close().
            loop = asyncio.get_running_loop()
            for sock in self._server.sockets:
                with contextlib.suppress(Exception):
                    loop.remove_reader(sock.fileno())
            for _ in range(5):
                await asyncio.sleep(0)
            # connections still queued on the listening socket are reset by the kernel
            self._server.close()
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

    # ---------------------------------------------------------------------------------------------
    # requests

    def _record(self, host: str, port: int, method: str, allowed: bool, reason: str) -> None:
        rec = ev.Egress(truncate(host, _RECORD_HOST_MAX), port, truncate(method, _RECORD_METHOD_MAX), allowed, reason)
        with self._lock:
            kept = len(self._records)
            keep = kept < self._max_records or (
                rec.host not in self._hosts and kept < self._max_records + NEW_HOSTS_PAST_CAP
            )
            if keep:
                self._records.append(rec)
                self._hosts.add(rec.host)
            else:
                self.dropped += 1
            first_dropped = self.dropped == 1 and not keep
        if keep:
            self._emit(rec)
        elif first_dropped:
            self._emit(
                ev.Note(
                    f"egress: over {self._max_records:,} requests in this run; from here on only a request to a "
                    "host not seen yet is recorded, the others are counted"
                )
            )

    def _emit(self, event: ev.Event) -> None:
        if self._on_event is not None:
            try:
                self._on_event(event)
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
        self._activity(0)
        task = asyncio.get_running_loop().create_task(self._handle(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = _Client(reader, writer)
        try:
            await self._serve(client)
        except (asyncio.CancelledError, ConnectionError, OSError):
            pass
        except Exception:
            log.exception("egress proxy connection failed")
        finally:
            for w in (*client.upstream, writer):
                _close(w, abort=self._closing)
                self._writers.discard(w)
            self._activity(-1 if client.stage == "request" else 0)

    async def _respond(self, client: _Client, status: int, message: str) -> None:
        writer = client.writer
        writer.write(error_response(status, message))
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        # Lingering close: read (and drop) what the client still sends, briefly, so that closing
        # with unread data does not turn into a reset that swallows the answer.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                drained = 0
                while drained < 1 << 20 and (data := await client.reader.read(COPY_CHUNK)):
                    drained += len(data)

    async def _serve(self, client: _Client) -> None:
        """One request: a CONNECT tunnel or one forwarded http:// request; a bad or refused one is answered."""
        method, host, port = "", "", 0
        try:
            req = await self._read_request(client.reader)
            if req is None:
                return
            client.stage = "request"
            self._activity(+1)
            method = req.method
            if method == "CONNECT":
                host, port = connect_target(req.target)
                await self._tunnel(client, method, host, port)
                return
            path, host, port = absolute_target(req.target)
            await self._forward(client, req, path, host, port)
        except BadRequest as exc:
            self._record(host, port, method, False, f"bad request: {exc}")
            await self._respond(client, 400, f"cua-tui egress proxy: bad request: {exc}")
        except Refused as exc:
            self._record(exc.host, exc.port, method, False, exc.reason)
            await self._respond(client, 403, f"cua-tui egress proxy: {exc.reason}")

    async def _read_request(self, reader: asyncio.StreamReader) -> Request | None:
        """The request head; None when nothing usable arrived in time, or the client closed without one."""
        try:
            async with asyncio.timeout(HEADER_TIMEOUT):
                lines = await read_head(reader)
        except TimeoutError:
            # Nothing usable arrived in time: just close.
            return None
        if lines is None:
            # Connected and closed without a request (a relay probe, a port scan).
            return None
        return parse_request(lines)

    async def _tunnel(self, client: _Client, method: str, host: str, port: int) -> None:
        """CONNECT: once allowed and connected, copy both ways until both ends are done."""
        up = await self._open(client, method, host, port)
        if up is None:
            return
        client.writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        await client.writer.drain()
        client.stage = "tunnel"
        self._activity(-1)
        await self._relay(pipe(client.reader, up[1]), pipe(up[0], client.writer))

    async def _forward(self, client: _Client, req: Request, path: str, host: str, port: int) -> None:
        """An absolute http:// request: forwarded with its body, the answer relayed back."""
        framing = body_framing(req)
        # A refused host gets its 403 rather than this.
        if not path.startswith("/") and self.allow.judge(host, port).allowed:
            raise BadRequest("malformed path in the request target")
        up = await self._open(client, req.method, host, port)
        if up is None:
            return
        ureader, uwriter = up
        uwriter.write(request_head(req, path, judged_authority(self.allow, host, port)))
        await self._relay(
            self._send_body(framing, client.reader, uwriter),
            self._relay_response(ureader, client.writer),
            until_second=True,
        )

    async def _open(
        self, client: _Client, method: str, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """Judge host:port, connect if allowed, record the decision, answer 403/502 if it goes no further."""
        j = self.allow.judge(host, port)
        shown = f"{show_host(j.host or host)}:{port}"
        if not j.allowed or j.host is None:
            self._record(j.host or host, port, method, False, j.reason)
            await self._respond(client, 403, f"cua-tui egress proxy refused {shown}: {j.reason}")
            return None
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                ureader, uwriter = await open_upstream(j.host, port, j.is_ip, self._allow_private)
        except NotPublic as exc:
            reason = f"refused: {exc}"
            self._record(j.host, port, method, False, reason)
            await self._respond(client, 403, f"cua-tui egress proxy refused {shown}: {reason}")
            return None
        except TimeoutError:
            reason = f"{j.reason}; connection failed: no answer within {CONNECT_TIMEOUT:g} s"
        except OSError as exc:
            what = "DNS lookup failed" if isinstance(exc, socket.gaierror) else "connection failed"
            reason = f"{j.reason}; {what}: {exc.strerror or exc}"
        else:
            client.upstream.append(self._track(uwriter))
            self._record(j.host, port, method, True, j.reason)
            return ureader, uwriter
        # Allowed, but not reached.
        self._record(j.host, port, method, True, reason)
        await self._respond(client, 502, f"cua-tui egress proxy could not reach {shown}: {reason}")
        return None

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
            await copy_exactly(reader, uwriter, length)
        elif kind == "chunked":
            await copy_chunked(reader, uwriter)
        # Anything the client sends after this one request (a pipelined second request) is not
        # forwarded.

    async def _relay_response(self, ureader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lines = await self._final_head(ureader, writer)
        if lines is None:
            return
        writer.write(response_head(lines))
        await writer.drain()
        await pipe(ureader, writer)

    @staticmethod
    async def _final_head(ureader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> list[bytes] | None:
        """The upstream's final head, interim ones (100 Continue) passed on as they come; None once a bad
        answer has been turned into a 502 (unless an interim head already went out)."""
        sent = False
        try:
            while True:
                lines = await read_head(ureader)
                if lines is None:
                    raise BadRequest("the server closed without answering")
                m = STATUS_LINE.fullmatch(lines[0])
                if not m:
                    raise BadRequest("the server did not answer in HTTP/1.x")
                code = int(m[1])
                if 100 <= code < 200 and code != 101:
                    # interim response (100 Continue): pass it on as is
                    writer.write(b"\r\n".join(lines) + b"\r\n\r\n")
                    await writer.drain()
                    sent = True
                    continue
                return lines
        except BadRequest as exc:
            if not sent:
                writer.write(error_response(502, f"cua-tui egress proxy: bad answer from upstream: {exc}"))
                await writer.drain()
            return None
