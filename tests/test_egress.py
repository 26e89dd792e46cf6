"""The egress proxy of the local desktop: allow-list rules and the HTTP/1.1 forward proxy on a Unix socket.

Everything here stays on loopback: the "lab" is an http.server on 127.0.0.1, the proxy listens on a Unix socket
in tmp_path, refused hosts are never contacted (nor resolved), and curl reaches the proxy through the socat relay
that runs inside the desktop's network namespace in production.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from allowlist_cases import BAD, GOOD

from cua_tui.core import events as ev
from cua_tui.desktops.egress import AllowList, EgressProxy, relay_command

pytestmark = pytest.mark.timeout(30)


# ------------------------------------------------------------------------------------------------- AllowList
def allows(allow: AllowList, host: str, port: int) -> tuple[bool, str]:
    """The verdict on host:port and its reason, as a person reads it."""
    judged = allow.judge(host, port)
    return judged.allowed, judged.reason


def test_exact_host_is_case_insensitive_ignores_trailing_dot_and_allows_80_and_443() -> None:
    allow = AllowList.parse(["Example.COM."])
    assert allow.entries == ("example.com",)
    for host in ("example.com", "EXAMPLE.com", "example.com."):
        assert allows(allow, host, 443) == (True, "allowed: example.com")
        assert allows(allow, host, 80)[0]
    ok, reason = allows(allow, "example.com", 8080)
    assert not ok and "port 8080" in reason and "80, 443" in reason
    assert allows(allow, "www.example.com", 443) == (False, "not on the allow-list")
    assert allows(allow, "example.org", 443) == (False, "not on the allow-list")


def test_wildcard_matches_subdomains_only_on_a_label_boundary() -> None:
    allow = AllowList.parse(["*.example.org"])
    assert allows(allow, "a.example.org", 443) == (True, "allowed: *.example.org")
    assert allows(allow, "deep.a.EXAMPLE.org.", 80)[0]
    for host in ("example.org", "evilexample.org", "example.org.evil.com", "a.example.org.evil.com", "xexample.org"):
        assert allows(allow, host, 443) == (False, "not on the allow-list"), host
    assert not allows(allow, "a.example.org", 22)[0]


def test_port_rules() -> None:
    allow = AllowList.parse(["127.0.0.1:8123", "example.com:8443", "example.com", "[::1]:9000", "::2"])
    assert allows(allow, "127.0.0.1", 8123) == (True, "allowed: 127.0.0.1:8123")
    for port in (80, 443, 8124):
        ok, reason = allows(allow, "127.0.0.1", port)
        assert not ok and "port" in reason and "8123" in reason
    assert allows(allow, "example.com", 8443) == (True, "allowed: example.com:8443")
    assert allows(allow, "example.com", 443) == (True, "allowed: example.com")
    assert not allows(allow, "example.com", 8080)[0]
    assert allows(allow, "::1", 9000) == (True, "allowed: [::1]:9000")
    assert allows(allow, "[0:0::1]", 9000)[0]
    assert not allows(allow, "::1", 443)[0]
    assert allows(allow, "::2", 443) == (True, "allowed: [::2]")
    assert not allows(allow, "::2", 8080)[0]
    # no wildcard for IPs, and a name never matches an IP entry
    assert not allows(allow, "localhost", 8123)[0]
    for port in (0, -1, 65536):
        assert not allows(allow, "example.com", port)[0]


def test_parse_normalizes_deduplicates_and_takes_any_iterable() -> None:
    allow = AllowList.parse(e for e in [" example.com ", "EXAMPLE.com", "127.0.0.1:0080", "*.Example.org"])
    assert allow.entries == ("example.com", "127.0.0.1:80", "*.example.org")
    assert len(allow) == 3
    assert len(AllowList.parse([])) == 0
    assert allows(AllowList.parse([]), "example.com", 443) == (False, "not on the allow-list")
    with pytest.raises(TypeError):
        AllowList.parse("example.com")


@pytest.mark.parametrize(
    "entry",
    [
        "",
        "   ",
        "*",
        "*.",
        "**.example.com",
        "a.*.example.com",
        "foo*.example.com",
        "http://example.com",
        "example.com/path",
        "user@example.com",
        "example.com:0",
        "example.com:65536",
        "example.com:http",
        "example.com:",
        "a..b",
        ".example.com",
        "exämple.com",
        "bad_host.com",
        "two words.com",
        "*.127.0.0.1",
        "999.1.1.1",
        "127.1",
        "2130706433",
        "[::1",
        "[::1]x",
        "[example.com]",
        "fe80::1%eth0",
        "a" * 64 + ".com",
    ],
)
def test_invalid_entries_are_rejected_naming_the_entry(entry: str) -> None:
    with pytest.raises(ValueError) as info:
        AllowList.parse(["example.com", entry])
    assert repr(entry) in str(info.value)


@pytest.mark.parametrize("entry", BAD, ids=repr)
def test_the_proxy_refuses_every_entry_the_policy_refuses(entry: str) -> None:
    """The same table tests `policy --check` (tests/test_policy_cli.py): the two agree entry by entry."""
    with pytest.raises(ValueError) as info:
        AllowList.parse(["example.com", entry])
    assert repr(entry) in str(info.value)


@pytest.mark.parametrize(("entry", "normalized"), GOOD.items(), ids=repr)
def test_the_proxy_accepts_every_entry_the_policy_accepts(entry: str, normalized: str) -> None:
    allow = AllowList.parse([entry])
    assert allow.entries == (normalized,)
    host = normalized.removeprefix("*.").rsplit(":", 1)[0] if not normalized.endswith("]") else normalized
    port = int(normalized.rsplit(":", 1)[1]) if ":" in normalized.rsplit("]", 1)[-1] else 443
    if normalized.startswith("*."):
        host = "sub." + host
    assert allows(allow, host.strip("[]"), port)[0], (host, port)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1.evil.test",
        "evil127.0.0.1",
        "127.0.0.1@evil.test",
        "evil.test@127.0.0.1",
        "2130706433",
        "127.1",
        "0x7f.0.0.1",
        "0177.0.0.1",
        "127.0.0.1 ",
        "127.0.0.1%00",
        "",
        "xn--ls8h.127.0.0.1",
        "[127.0.0.1]",
        "::ffff:127.0.0.1",
    ],
)
def test_host_tricks_do_not_match_an_ip_entry(host: str) -> None:
    allow = AllowList.parse(["127.0.0.1:8123", "*.example.org"])
    ok, reason = allows(allow, host, 8123)
    assert not ok and reason


def test_non_ascii_hosts_are_refused_with_a_punycode_hint() -> None:
    allow = AllowList.parse(["xn--bcher-kva.example"])
    assert allows(allow, "XN--BCHER-KVA.example", 443)[0]
    ok, reason = allows(allow, "bücher.example", 443)
    assert not ok and "punycode" in reason


# ---------------------------------------------------------------------------------------------- the lab


class _LabHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Lab

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.seen.append(self.requestline)
        if self.path.startswith("/slow/"):  # /slow/<seconds>: an answer that takes its time
            time.sleep(float(self.path.removeprefix("/slow/")))
            self._reply(b"slow")
        elif self.path == "/headers":
            info = {"line": self.requestline, "headers": [[k, v] for k, v in self.headers.items()]}
            self._reply(json.dumps(info).encode(), "application/json")
        else:
            self._reply(f"lab page {self.path}".encode())

    def do_POST(self) -> None:
        self.server.seen.append(self.requestline)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while size := int(self.rfile.readline().split(b";")[0], 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._reply(body, "application/octet-stream")


class _Lab(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 drops SYNs under the concurrency test

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _LabHandler)
        self.seen: list[str] = []

    @property
    def port(self) -> int:
        return self.server_address[1]


@pytest.fixture
def lab() -> Iterator[_Lab]:
    server = _Lab()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


# -------------------------------------------------------------------------------------------- the proxy

ProxyFactory = Callable[..., EgressProxy]


@pytest.fixture
def make_proxy(tmp_path: Path, lab: _Lab) -> Iterator[ProxyFactory]:
    started: list[EgressProxy] = []

    def factory(
        entries: list[str] | None = None, on_event: Callable[[ev.Event], None] | None = None, **kw: Any
    ) -> EgressProxy:
        entries = [f"127.0.0.1:{lab.port}"] if entries is None else entries
        proxy = EgressProxy(tmp_path / f"egress{len(started)}.sock", AllowList.parse(entries), on_event, **kw)
        proxy.start()
        started.append(proxy)
        return proxy

    yield factory
    for proxy in started:
        proxy.stop()


@pytest.fixture
def proxy(make_proxy: ProxyFactory) -> EgressProxy:
    return make_proxy()


def connect(proxy: EgressProxy) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(str(proxy.socket_path))
    return sock


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def ask(proxy: EgressProxy, request: bytes) -> bytes:
    """Send one raw request and read the whole answer (the proxy always closes after one request)."""
    with connect(proxy) as sock:
        sock.sendall(request)
        return read_all(sock)


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def body(answer: bytes) -> bytes:
    return answer.partition(b"\r\n\r\n")[2]


def get(url: str, *headers: str) -> bytes:
    return ("\r\n".join([f"GET {url} HTTP/1.1", "Host: whatever", *headers]) + "\r\n\r\n").encode()


def read_head(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(1)
        assert chunk, data
        data += chunk
    return data


def test_allowed_get_gets_the_lab_page_in_origin_form_with_host_rewritten(proxy: EgressProxy, lab: _Lab) -> None:
    answer = ask(proxy, get(f"http://127.0.0.1:{lab.port}/hello?x=1"))
    assert status(answer) == 200 and body(answer) == b"lab page /hello?x=1"
    assert b"\r\nConnection: close\r\n" in answer.partition(b"\r\n\r\n")[0] + b"\r\n"
    assert lab.seen == ["GET /hello?x=1 HTTP/1.1"]
    [rec] = proxy.records
    assert (rec.host, rec.port, rec.method, rec.allowed) == ("127.0.0.1", lab.port, "GET", True)
    assert rec.reason == f"allowed: 127.0.0.1:{lab.port}"

    # The Host header is the judged authority; Proxy-* and hop-by-hop headers do not reach the server.
    answer = ask(
        proxy,
        get(
            f"http://127.0.0.1:{lab.port}/headers#frag",
            "Proxy-Authorization: Basic c2VjcmV0",
            "Proxy-Connection: keep-alive",
            "Connection: keep-alive, X-Hop",
            "X-Hop: 1",
            "X-Kept: yes",
        ),
    )
    info = json.loads(body(answer))
    headers = {k.lower(): v for k, v in info["headers"]}
    assert info["line"] == "GET /headers HTTP/1.1"
    assert headers["host"] == f"127.0.0.1:{lab.port}"
    assert headers["connection"] == "close" and headers["x-kept"] == "yes"
    assert not {"proxy-authorization", "proxy-connection", "x-hop"} & headers.keys()


def test_allowed_connect_tunnel_carries_a_plain_http_request(proxy: EgressProxy, lab: _Lab) -> None:
    with connect(proxy) as sock:
        sock.sendall(f"CONNECT 127.0.0.1:{lab.port} HTTP/1.1\r\nHost: 127.0.0.1:{lab.port}\r\n\r\n".encode())
        assert read_head(sock) == b"HTTP/1.1 200 Connection Established\r\n\r\n"
        sock.sendall(b"GET /tunnelled HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n")
        answer = read_all(sock)
    assert status(answer) == 200 and body(answer) == b"lab page /tunnelled"
    [rec] = proxy.records
    assert (rec.method, rec.host, rec.port, rec.allowed) == ("CONNECT", "127.0.0.1", lab.port, True)


def test_bytes_sent_right_after_connect_are_tunnelled(proxy: EgressProxy, lab: _Lab) -> None:
    answer = ask(
        proxy,
        f"CONNECT 127.0.0.1:{lab.port} HTTP/1.1\r\n\r\n".encode()
        + b"GET /early HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200 ")
    assert answer.endswith(b"lab page /early")


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every host name handed to getaddrinfo in this process (the proxy resolves in its loop's executor)."""
    seen: list[str] = []
    real = socket.getaddrinfo

    def spy(host: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(host))
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", spy)
    return seen


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET http://doesnotexist.invalid/ HTTP/1.1\r\nHost: doesnotexist.invalid\r\n\r\n",
        b"CONNECT doesnotexist.invalid:443 HTTP/1.1\r\n\r\n",
        b"CONNECT example.com:443 HTTP/1.1\r\n\r\n",
        b"GET http://blocked.invalid:8080/x HTTP/1.1\r\n\r\n",
    ],
)
def test_a_host_off_the_list_is_refused_without_any_dns_lookup(
    proxy: EgressProxy, lookups: list[str], request_bytes: bytes
) -> None:
    answer = ask(proxy, request_bytes)
    assert status(answer) == 403 and b"not on the allow-list" in body(answer)
    [rec] = proxy.records
    assert not rec.allowed and rec.reason == "not on the allow-list"
    assert rec.host in ("doesnotexist.invalid", "example.com", "blocked.invalid")
    assert rec.method == request_bytes.split(b" ")[0].decode()
    assert not [h for h in lookups if h.endswith((".invalid", ".com"))]


def test_the_lab_host_on_another_port_is_refused(proxy: EgressProxy, lab: _Lab) -> None:
    for request in (
        get(f"http://127.0.0.1:{lab.port + 1}/"),
        get("http://127.0.0.1/"),
        b"CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n",
    ):
        answer = ask(proxy, request)
        assert status(answer) == 403
    assert [(r.port, r.allowed) for r in proxy.records] == [(lab.port + 1, False), (80, False), (443, False)]
    assert all("is not on the allow-list for 127.0.0.1" in r.reason for r in proxy.records)
    assert lab.seen == []


def test_user_information_never_bypasses_the_allow_list(proxy: EgressProxy, lab: _Lab, lookups: list[str]) -> None:
    allowed = f"127.0.0.1:{lab.port}"
    attempts = [
        get(f"http://{allowed}@doesnotexist.invalid/"),
        get(f"http://user:pw@{allowed}/"),  # even towards an allowed host: browsers never send userinfo
        get(f"http://doesnotexist.invalid#@{allowed}/"),
        get(f"http://doesnotexist.invalid\\@{allowed}/"),
        get(f"http://doesnotexist.invalid?@{allowed}/"),
        f"CONNECT user@{allowed} HTTP/1.1\r\n\r\n".encode(),
        f"CONNECT {allowed}@doesnotexist.invalid:443 HTTP/1.1\r\n\r\n".encode(),
    ]
    for attempt in attempts:
        answer = ask(proxy, attempt)
        assert status(answer) == 403, attempt
    records = proxy.records
    assert len(records) == len(attempts) and not any(r.allowed for r in records)
    assert records[0].host == "doesnotexist.invalid" and "user information" in records[0].reason
    assert records[2].host == "doesnotexist.invalid" and records[2].reason == "not on the allow-list"
    assert lab.seen == []
    assert not [h for h in lookups if "invalid" in h]


def test_suffix_and_notation_tricks_are_refused(proxy: EgressProxy, lab: _Lab) -> None:
    for host in ("127.0.0.1.evil.test", "evil127.0.0.1", "2130706433", "127.1", "0x7f.0.0.1", "[::ffff:127.0.0.1]"):
        for request in (get(f"http://{host}:{lab.port}/"), f"CONNECT {host}:{lab.port} HTTP/1.1\r\n\r\n".encode()):
            assert status(ask(proxy, request)) == 403, request
    assert len(proxy.records) == 12 and not any(r.allowed for r in proxy.records)
    assert lab.seen == []


def test_post_bodies_are_forwarded_intact(proxy: EgressProxy, lab: _Lab) -> None:
    payload = bytes(range(256)) * 1200 + b"\r\n\r\nGET http://evil.test/ HTTP/1.1\r\n\r\n"
    head = f"POST http://127.0.0.1:{lab.port}/echo HTTP/1.1\r\nHost: x\r\nContent-Length: {len(payload)}\r\n\r\n"
    answer = ask(proxy, head.encode() + payload)
    assert status(answer) == 200 and body(answer) == payload

    chunks = [b"hello ", b"chunked\r\n", b"x" * 70000]
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    head = f"POST http://127.0.0.1:{lab.port}/echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    answer = ask(proxy, head.encode() + chunked)
    assert status(answer) == 200 and body(answer) == b"".join(chunks)
    assert lab.seen == ["POST /echo HTTP/1.1"] * 2


def test_a_pipelined_second_request_is_not_forwarded(proxy: EgressProxy, lab: _Lab) -> None:
    answer = ask(proxy, get(f"http://127.0.0.1:{lab.port}/first") + get(f"http://127.0.0.1:{lab.port}/second"))
    assert status(answer) == 200 and body(answer) == b"lab page /first"
    assert lab.seen == ["GET /first HTTP/1.1"] and len(proxy.records) == 1


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"hello\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"GET https://example.com/ HTTP/1.1\r\n\r\n",
        b"GET ftp://example.com/ HTTP/1.1\r\n\r\n",
        b"GET http://example.com/ HTTP/2.0\r\n\r\n",
        b"GET  http://example.com/ HTTP/1.1\r\n\r\n",
        b"CONNECT example.com HTTP/1.1\r\n\r\n",
        b"CONNECT example.com:99999 HTTP/1.1\r\n\r\n",
        b"CONNECT http://example.com:443/ HTTP/1.1\r\n\r\n",
        b"CONNECT ::1:443 HTTP/1.1\r\n\r\n",
        b"GET http://:80/ HTTP/1.1\r\n\r\n",
        b"GET http://example.com/ HTTP/1.1\r\nBad Header\r\n\r\n",
        b"GET http://example.com/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
        b"POST http://LAB/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST http://LAB/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        b"POST http://LAB/ HTTP/1.1\r\nContent-Length: -3\r\n\r\n",
        b"POST http://LAB/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"GET http://example.com/" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
        b"GET http://example.com/ HTTP/1.1\r\n" + b"X: y\r\n" * 11000 + b"\r\n",
    ],
    ids=lambda r: r[:40].decode("latin-1").encode("unicode_escape").decode() + (f"..({len(r)})" if len(r) > 40 else ""),
)
def test_malformed_requests_get_400(proxy: EgressProxy, lab: _Lab, request_bytes: bytes) -> None:
    answer = ask(proxy, request_bytes.replace(b"LAB", f"127.0.0.1:{lab.port}".encode()))
    assert status(answer) == 400, answer
    [rec] = proxy.records
    assert not rec.allowed and rec.reason.startswith("bad request: ")
    assert lab.seen == []


def test_an_empty_connection_is_not_a_request(proxy: EgressProxy) -> None:
    with connect(proxy) as sock:
        sock.shutdown(socket.SHUT_WR)
        assert read_all(sock) == b""
    assert proxy.records == []


def test_a_failing_on_event_does_not_break_the_proxy(make_proxy: ProxyFactory, lab: _Lab) -> None:
    seen: list[ev.Egress] = []

    def on_event(rec: ev.Egress) -> None:
        seen.append(rec)
        raise RuntimeError("listener bug")

    proxy = make_proxy(on_event=on_event)
    for _ in range(2):
        assert status(ask(proxy, get(f"http://127.0.0.1:{lab.port}/"))) == 200
    assert status(ask(proxy, b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")) == 403
    assert seen == proxy.records and [r.allowed for r in seen] == [True, True, False]


def test_unreachable_allowed_host_gets_502_and_an_allowed_record(make_proxy: ProxyFactory) -> None:
    with socket.socket() as probe:  # a loopback port with nobody listening
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    proxy = make_proxy([f"127.0.0.1:{closed_port}"])
    answer = ask(proxy, get(f"http://127.0.0.1:{closed_port}/"))
    assert status(answer) == 502
    [rec] = proxy.records
    assert rec.allowed and rec.reason.startswith(f"allowed: 127.0.0.1:{closed_port}; connection failed")


def test_an_allowed_name_must_resolve_to_a_public_address(
    make_proxy: ProxyFactory, lab: _Lab, lookups: list[str]
) -> None:
    strict = make_proxy([f"localhost:{lab.port}"])
    answer = ask(strict, get(f"http://localhost:{lab.port}/"))
    assert status(answer) == 403
    [rec] = strict.records
    assert not rec.allowed and "localhost resolves to" in rec.reason and "not a public address" in rec.reason
    assert lab.seen == []
    assert "localhost" in lookups  # an allowed name is resolved (and the spy used elsewhere does see lookups)

    relaxed = make_proxy([f"localhost:{lab.port}"], allow_private_resolution=True)
    answer = ask(relaxed, get(f"http://LocalHost.:{lab.port}/named"))
    assert status(answer) == 200 and body(answer) == b"lab page /named"
    assert relaxed.records[0].host == "localhost" and relaxed.records[0].allowed


def test_a_server_that_closes_without_answering_gets_502(make_proxy: ProxyFactory) -> None:
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen()
        port = mute.getsockname()[1]

        def serve() -> None:
            conn, _ = mute.accept()
            with conn:
                conn.recv(65536)

        threading.Thread(target=serve, daemon=True).start()
        proxy = make_proxy([f"127.0.0.1:{port}"])
        answer = ask(proxy, get(f"http://127.0.0.1:{port}/"))
    assert status(answer) == 502 and b"closed without answering" in body(answer)
    assert [r.allowed for r in proxy.records] == [True]


def test_wait_quiet_waits_for_a_request_in_flight(proxy: EgressProxy, lab: _Lab) -> None:
    """A verdict waits for what the last action caused: a request still being answered holds it."""
    answers: list[bytes] = []
    client = threading.Thread(target=lambda: answers.append(ask(proxy, get(f"http://127.0.0.1:{lab.port}/slow/0.8"))))
    start = time.monotonic()
    client.start()
    while not lab.seen:  # the request reached the lab through the proxy
        assert time.monotonic() - start < 5
        time.sleep(0.01)
    assert proxy.wait_quiet(quiet=0.1, limit=5)
    assert time.monotonic() - start >= 0.8  # not before the answer went
    client.join(timeout=2)
    assert answers and body(answers[0]) == b"slow"
    assert [r.allowed for r in proxy.records] == [True]


def test_wait_quiet_waits_for_the_quiet_time_after_the_last_request(proxy: EgressProxy, lab: _Lab) -> None:
    """Right after an answer (a redirect the browser is about to follow) it is not yet quiet."""
    ask(proxy, get(f"http://127.0.0.1:{lab.port}/"))
    start = time.monotonic()
    assert proxy.wait_quiet(quiet=0.4, limit=5)
    assert 0.3 <= time.monotonic() - start < 2
    assert proxy.wait_quiet(quiet=0.4, limit=0)  # quiet already: true with no time to wait


def test_wait_quiet_counts_the_quiet_from_the_last_action_too(proxy: EgressProxy, lab: _Lab) -> None:
    """On a loaded machine the browser may send what the last click caused after the proxy has long been
    quiet (its last request the page's load): the quiet counts from the action as well."""
    assert proxy.wait_quiet(quiet=1.5, limit=10)  # nothing for longer than the quiet asked below
    acted = time.monotonic()
    late = threading.Timer(0.1, ask, args=(proxy, get(f"http://127.0.0.1:{lab.port}/late")))
    late.start()
    assert proxy.wait_quiet(quiet=1.2, limit=10, since=acted)
    assert lab.seen == ["GET /late HTTP/1.1"]  # judged: it came within the quiet time after the action
    assert time.monotonic() - acted >= 1.2
    late.join(timeout=5)
    assert proxy.wait_quiet(quiet=1.2, limit=0, since=acted - 60)  # an action long ago holds nothing


def test_wait_quiet_gives_up_at_its_limit(proxy: EgressProxy, lab: _Lab) -> None:
    client = threading.Thread(target=ask, args=(proxy, get(f"http://127.0.0.1:{lab.port}/slow/2")), daemon=True)
    client.start()
    while not lab.seen:
        time.sleep(0.01)
    start = time.monotonic()
    assert not proxy.wait_quiet(quiet=0.1, limit=0.3)
    assert 0.25 <= time.monotonic() - start < 3
    client.join(timeout=5)


def test_an_idle_connection_or_an_open_tunnel_is_no_request_in_flight(proxy: EgressProxy, lab: _Lab) -> None:
    """Browsers open connections to the proxy ahead of need and keep tunnels open: neither holds a verdict."""
    with connect(proxy) as idle, connect(proxy) as tunnel:
        tunnel.sendall(f"CONNECT 127.0.0.1:{lab.port} HTTP/1.1\r\n\r\n".encode())
        assert read_head(tunnel) == b"HTTP/1.1 200 Connection Established\r\n\r\n"
        assert proxy.wait_quiet(quiet=0.2, limit=3)  # held by either, it would never be quiet
        idle.sendall(b"x")  # both still open
        tunnel.sendall(b"GET /still HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert read_all(tunnel).endswith(b"lab page /still")


def test_stop_from_on_event_does_not_deadlock(make_proxy: ProxyFactory, lab: _Lab) -> None:
    holder: list[EgressProxy] = []
    proxy = make_proxy(on_event=lambda rec: holder[0].stop())
    holder.append(proxy)
    ask(proxy, get(f"http://127.0.0.1:{lab.port}/"))
    proxy.stop()  # waits for the shutdown the callback started
    assert not proxy.socket_path.exists()
    with pytest.raises(OSError):
        connect(proxy)


def test_stop_closes_open_tunnels_removes_the_socket_and_is_idempotent(make_proxy: ProxyFactory, lab: _Lab) -> None:
    proxy = make_proxy()
    assert (proxy.socket_path.stat().st_mode & 0o777) == 0o666
    sock = connect(proxy)
    sock.sendall(f"CONNECT 127.0.0.1:{lab.port} HTTP/1.1\r\n\r\n".encode())
    assert read_head(sock).startswith(b"HTTP/1.1 200")
    idle = connect(proxy)  # a client that never finishes its request
    idle.sendall(b"GET http://127.0.0.1/ HTTP/1.1\r\n")
    began = time.monotonic()
    threading.Thread(target=proxy.stop).start()  # from another thread...
    proxy.stop()  # ...and this one: both return, nothing breaks
    proxy.stop()
    for s in (sock, idle):
        try:
            assert s.recv(100) == b""
        except ConnectionResetError:
            pass
        s.close()
    assert time.monotonic() - began < 3
    assert not proxy.socket_path.exists()
    with pytest.raises(RuntimeError):
        proxy.start()


def test_start_twice_fails_and_a_stale_socket_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "stale.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()
    with EgressProxy(path, AllowList.parse([])) as proxy:
        with pytest.raises(RuntimeError):
            proxy.start()
        assert status(ask(proxy, b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")) == 403
    assert not path.exists()
    regular = tmp_path / "file"
    regular.write_text("not a socket")
    with pytest.raises(FileExistsError):
        EgressProxy(regular, AllowList.parse([])).start()
    assert regular.read_text() == "not a socket"
    EgressProxy(regular, AllowList.parse([])).stop()  # never started: harmless


def test_many_concurrent_requests_are_all_answered(proxy: EgressProxy, lab: _Lab) -> None:
    def one(i: int) -> int:
        if i % 5 == 4:
            return status(ask(proxy, b"CONNECT blocked.invalid:443 HTTP/1.1\r\n\r\n"))
        answer = ask(proxy, get(f"http://127.0.0.1:{lab.port}/n{i}"))
        assert body(answer) == f"lab page /n{i}".encode()
        return status(answer)

    with ThreadPoolExecutor(max_workers=50) as pool:
        statuses = list(pool.map(one, range(50)))
    assert statuses == [403 if i % 5 == 4 else 200 for i in range(50)]
    assert len(proxy.records) == 50 and sum(r.allowed for r in proxy.records) == 40


# ------------------------------------------------------------------------------- a real client, via socat


def test_relay_command() -> None:
    assert relay_command("/run/cua/egress.sock", 3128) == [
        "socat",
        "TCP-LISTEN:3128,bind=127.0.0.1,fork,reuseaddr",
        "UNIX-CONNECT:/run/cua/egress.sock",
    ]
    for bad_path in ("/tmp/a,b.sock", "/tmp/a:b", "", "/tmp/a\nb"):
        with pytest.raises(ValueError):
            relay_command(bad_path, 3128)
    for bad_port in (0, 70000, True):
        with pytest.raises(ValueError):
            relay_command("/tmp/egress.sock", bad_port)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def relay(proxy: EgressProxy) -> Iterator[int]:
    if shutil.which("socat") is None:
        pytest.skip("socat is not installed")
    port = _free_port()
    proc = subprocess.Popen(relay_command(str(proxy.socket_path), port), stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "socat relay did not start"
                time.sleep(0.02)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=5)


def curl(relay_port: int, *args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    return subprocess.run(
        ["curl", "-sS", "--max-time", "5", "--proxy", f"http://127.0.0.1:{relay_port}", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=10,
    )


def test_curl_through_the_relay(relay: int, proxy: EgressProxy, lab: _Lab) -> None:
    lab_url = f"http://127.0.0.1:{lab.port}"
    done = curl(relay, f"{lab_url}/via-curl")
    assert done.returncode == 0 and done.stdout == "lab page /via-curl", done.stderr

    done = curl(relay, "--proxytunnel", f"{lab_url}/via-tunnel")
    assert done.returncode == 0 and done.stdout == "lab page /via-tunnel", done.stderr

    done = curl(relay, "--data-binary", "a=1&b=2", f"{lab_url}/post")
    assert done.returncode == 0 and done.stdout == "a=1&b=2", done.stderr

    began = time.monotonic()  # an interim "100 Continue" from the server reaches the client
    done = curl(relay, "-H", "Expect: 100-continue", "--expect100-timeout", "4", "--data-binary", "c=3", f"{lab_url}/")
    assert done.returncode == 0 and done.stdout == "c=3" and time.monotonic() - began < 3, done.stderr

    done = curl(relay, "-o", "/dev/null", "-w", "%{http_code}", "http://doesnotexist.invalid/")
    assert done.stdout == "403"
    done = curl(relay, "-o", "/dev/null", "-w", "%{http_connect}", "https://example.com/")
    assert done.returncode != 0 and done.stdout == "403"

    assert [(r.method, r.host, r.allowed) for r in proxy.records] == [
        ("GET", "127.0.0.1", True),
        ("CONNECT", "127.0.0.1", True),
        ("POST", "127.0.0.1", True),
        ("POST", "127.0.0.1", True),
        ("GET", "doesnotexist.invalid", False),
        ("CONNECT", "example.com", False),
    ]


def test_a_page_looping_on_requests_is_recorded_up_to_the_cap_then_counted_and_said_once(
    make_proxy: ProxyFactory,
) -> None:
    """Past the cap only a request to a host not seen yet is kept (a lab looks for its exfiltration host),
    up to NEW_HOSTS_PAST_CAP more; the rest are counted, and a note says so once."""
    from cua_tui.desktops.egress.proxy import NEW_HOSTS_PAST_CAP

    seen: list[ev.Event] = []
    proxy = make_proxy(on_event=seen.append, max_records=50)
    for _ in range(200):
        proxy._record("junk.example", 443, "CONNECT", False, "not allowed")
    proxy._record("exfil.example", 443, "CONNECT", False, "not allowed")  # after the cap: a new host is kept
    proxy._record("exfil.example", 443, "CONNECT", False, "not allowed")  # the same host again: counted
    for n in range(NEW_HOSTS_PAST_CAP + 10):
        proxy._record(f"h{n}.example", 443, "CONNECT", False, "not allowed")
    records = proxy.records
    assert len(records) == 50 + NEW_HOSTS_PAST_CAP
    assert [r.host for r in records].count("exfil.example") == 1
    assert proxy.dropped == 150 + 1 + 11  # the junk, exfil again, the hosts past the reserve
    notes = [e for e in seen if isinstance(e, ev.Note)]
    assert len(notes) == 1 and "over 50 requests" in notes[0].message
    assert [e for e in seen if isinstance(e, ev.Egress)] == records
