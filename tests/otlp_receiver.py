"""A loopback OTLP/HTTP trace receiver for the tests: ``POST /v1/traces``, each body decoded with the
``opentelemetry-proto`` package, as a collector would; and a listener that accepts and never answers."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

BODY_CAP = 64 * 1024 * 1024


@dataclass
class Span:
    """One received span, flattened: ids as hex, attributes as Python values."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    start: int
    end: int
    attrs: dict[str, Any]
    status: int
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


class Receiver:
    """``POST /v1/traces`` on 127.0.0.1 (an ephemeral port): keeps every raw body, its headers and its decoded
    spans; answers ``status`` (200: taken; another: refused, the body kept all the same)."""

    def __init__(self, status: int = 200) -> None:
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, BODY_CAP))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                ExportTraceServiceRequest.FromString(body)  # a body that is not one fails here, loudly
                with receiver.cond:
                    receiver.bodies.append(body)
                    receiver.paths.append(self.path)
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                    receiver.cond.notify_all()
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="otlp-receiver", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[Span]:
        with self.cond:
            bodies = list(self.bodies)
        out: list[Span] = []
        for body in bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                resource = _attrs(resource_spans.resource.attributes)
                for scope in resource_spans.scope_spans:
                    out.extend(_span(s, resource) for s in scope.spans)
        return out

    def wait_for(self, what: Callable[[list[Span]], bool], timeout: float = 20.0) -> list[Span]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            spans = self.spans()
            if what(spans):
                return spans
            with self.cond:
                self.cond.wait(0.1)
        raise AssertionError(f"not received within {timeout} s: {len(self.spans())} span(s)")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _span(span: Any, resource: dict[str, Any]) -> Span:
    return Span(
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=span.parent_span_id.hex(),
        start=span.start_time_unix_nano,
        end=span.end_time_unix_nano,
        attrs=_attrs(span.attributes),
        status=span.status.code,
        events=[(e.name, e.time_unix_nano, _attrs(e.attributes)) for e in span.events],
        links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
        resource=resource,
    )


class Silent:
    """A loopback port that takes connections (the kernel's backlog) and never answers a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.sock.close()


def closed_port_url() -> str:
    """A loopback URL with nothing listening (a port just released): connections are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
