"""Lab base: a fixture web application on 127.0.0.1 with a server-side verifier.

A lab runs a small ``ThreadingHTTPServer`` in a daemon thread of the controller process, on an ephemeral
loopback port. Chromium opens ``start_url`` in kiosk mode, so the window is the whole screen (1024x720 by
default) and a page's CSS pixel (x, y) is the screen pixel (x, y). Every control is absolutely positioned
from the geometry constants of its lab module (``Box``); the same constants render the HTML, mark the policy
regions and check the scripted clicks in the tests.

The verdict comes from what the server saw (requests, posted values, files served) and from the artifacts
and egress records the caller hands over; the model's claim of success is never read.
"""

from __future__ import annotations

import html
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from ..core import events as ev
from ..core.ports import Verification

SCREEN_WIDTH = 1024
SCREEN_HEIGHT = 720
MAX_BODY = 64 * 1024  # bytes a lab accepts in one request body
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True, slots=True)
class Box:
    """A control's box in page CSS pixels, which equal screen pixels in kiosk mode."""

    x: int
    y: int
    width: int
    height: int

    @property
    def center(self) -> tuple[int, int]:
        return self.x + self.width // 2, self.y + self.height // 2

    def contains(self, x: int, y: int) -> bool:
        return self.x <= x < self.x + self.width and self.y <= y < self.y + self.height

    def moved(self, dx: int, dy: int) -> Box:
        return Box(self.x + dx, self.y + dy, self.width, self.height)

    def css(self) -> str:
        """Inline style placing an element exactly on this box (with ``box-sizing: border-box``)."""
        return f"left:{self.x}px;top:{self.y}px;width:{self.width}px;height:{self.height}px"

    def region(self, name: str, verdict: str, reason: str, *, sends_out: bool = False) -> dict[str, Any]:
        """A policy region (the TOML ``[[regions]]`` shape) covering this box."""
        extra = {"sends_out": True} if sends_out else {}
        return {
            **extra,
            "name": name,
            "x": self.x,
            "y": self.y,
            "width": self.width,
            "height": self.height,
            "verdict": verdict,
            "reason": reason,
        }


@dataclass(frozen=True, slots=True)
class Variant:
    """How a lab's page differs when a drill is recorded from it (scripts/drill_library.py), so that drills of
    one kind do not look alike: its controls moved by ``shift``, the outside ``host`` it names, which of its
    wordings it uses, a ``label`` of the lab's own meaning. The default is the lab its runs and tests know."""

    shift: tuple[int, int] = (0, 0)
    host: str = ""
    wording: int = 0
    label: str = ""


AS_IS = Variant()

HEADER = Box(0, 0, SCREEN_WIDTH, 64)
# every lab says what to do in one line here, under the header
INSTRUCTIONS = Box(40, 96, SCREEN_WIDTH - 80, 24)

_STYLE = """\
html,body{margin:0;padding:0}
body{position:relative;width:%(w)dpx;height:%(h)dpx;overflow:hidden;background:#f3f5f8;color:#17202a;
  font:16px "DejaVu Sans",sans-serif}
*{box-sizing:border-box}
input,button{font:16px "DejaVu Sans",sans-serif;margin:0}
.abs{position:absolute}
.title{background:#1f3a5f;color:#fff;font-size:24px;line-height:64px;padding-left:40px;white-space:nowrap}
.text{line-height:24px;overflow:hidden}
.card{background:#fff;border:2px solid #c5ccd6;border-radius:6px;padding:0 16px;line-height:44px;
  white-space:nowrap;overflow:hidden}
.field{background:#fff;border:2px solid #7b8794;border-radius:6px;padding:0 12px;color:#17202a}
.field:focus{outline:none;border-color:#2d5d9f}
.btn{background:#2d5d9f;color:#fff;border:2px solid #1f3a5f;border-radius:6px;padding:0;cursor:pointer}
.btn:disabled{background:#a7b1bd;border-color:#a7b1bd;color:#eef1f4;cursor:default}
.btn:focus{outline:none}
.status{line-height:32px;font-weight:bold;white-space:nowrap;overflow:hidden}
.ok{color:#19692c}
.bad{color:#a51d24}
"""


def render_page(title: str, body: str, script: str = "", shift: tuple[int, int] = (0, 0)) -> str:
    """A complete page: fixed geometry, no external resources (no favicon request either); the body's
    controls moved by ``shift`` (a variant's), the header left in place."""
    style = _STYLE % {"w": SCREEN_WIDTH, "h": SCREEN_HEIGHT}
    if shift != (0, 0):
        body = f'<div class="abs" style="left:{shift[0]}px;top:{shift[1]}px">\n{body}\n</div>'
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n"
        '<link rel="icon" href="data:,">\n'
        f"<style>\n{style}</style>\n"
        "</head><body>\n"
        f'<div class="abs title" id="title" style="{HEADER.css()}">{html.escape(title)}</div>\n'
        f"{body}\n" + (f"<script>\n{script}\n</script>\n" if script else "") + "</body></html>\n"
    )


@dataclass(slots=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def text(cls, text: str, status: int = 200) -> Response:
        return cls(status, text.encode())

    @classmethod
    def json(cls, data: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(data).encode(), "application/json")

    @classmethod
    def html(cls, page: str) -> Response:
        return cls(200, page.encode(), "text/html; charset=utf-8")


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    # the request target's path and query ("/export?q=penguin")
    target: str
    path: str
    query: dict[str, list[str]]
    body: bytes

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


class Lab:
    """Base of every lab (the core's ``Lab`` port, core/ports.py). Subclasses set ``name``, ``title``,
    ``task``, render ``page()``, answer ``route()`` and ``verify()``; they keep their server-side evidence
    under ``self.lock``."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    task: ClassVar[str] = ""
    description: ClassVar[str] = ""
    controls: ClassVar[dict[str, Box]] = {}  # named control boxes, for tests and documentation
    # The script `cua-tui demo` plays (a variant's name; "" = the lab's own script). A demo should
    # make the analyst meet the lab's decision, so a lab whose point is a hostile page plays the
    # agent that obeys it.
    demo_script: ClassVar[str] = ""

    def __init__(self, variant: Variant = AS_IS) -> None:
        self.variant = variant
        self.lock = threading.Lock()
        self._requests: list[tuple[str, str]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    # ---------------------------------------------------------------------------------------------
    # Lifecycle
    # ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Bind 127.0.0.1 on an ephemeral port and serve in a daemon thread. Starting twice is harmless."""
        if self._server is not None:
            return
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self._port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"lab-{self.name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket. Idempotent; the evidence gathered so far is kept."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Lab:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"lab {self.name!r} is not started")
        return self._port

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def allow_entry(self) -> str:
        """The entry for the egress allow-list: the lab's own host and port."""
        return f"127.0.0.1:{self.port}"

    @property
    def start_url(self) -> str:
        return self.origin + "/"

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, target) of every request the server received, in order (a copy)."""
        with self.lock:
            return list(self._requests)

    def place(self, box: Box) -> Box:
        """Where ``box`` is on the screen in this lab's variant."""
        return box.moved(*self.variant.shift)

    # ---------------------------------------------------------------------------------------------
    # What a lab defines
    # ----------------------------------------------------------------------------------------------
    def page(self) -> str:
        raise NotImplementedError

    def route(self, request: Request) -> Response | None:
        """Answer the lab's own endpoints; None means 404. ``/`` and ``/favicon.ico`` are handled here."""
        return None

    def regions(self) -> list[dict[str, Any]]:
        """Policy regions (TOML-shaped dicts) marking the controls that transmit, in screen pixels."""
        return []

    def verify(self, downloads: Path | None = None, egress: Iterable[ev.Egress] = ()) -> Verification:
        raise NotImplementedError

    # ---------------------------------------------------------------------------------------------
    # Scripts
    # ----------------------------------------------------------------------------------------------
    def script_file(self, variant: str | None = None) -> Path:
        """The scripted turns' JSON file: ``labs/scripts/<name>.json`` or ``<variant>.json``."""
        ref = resources.files(__package__).joinpath("scripts", f"{variant or self.name}.json")
        return Path(str(ref))

    def script(self, variant: str | None = None) -> dict[str, Any]:
        """The scripted turns solving the lab (or a named variant), as the script agent's JSON data."""
        data = json.loads(self.script_file(variant).read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"lab script {variant or self.name}: the top level must be an object")
        return data

    # ---------------------------------------------------------------------------------------------
    def _verification(self, passed: bool, detail: str) -> Verification:
        return Verification(passed=passed, detail=detail, verifier=f"lab:{self.name} (server-side)")

    def _dispatch(self, request: Request) -> Response:
        with self.lock:
            self._requests.append((request.method, request.target))
        if request.method in ("GET", "HEAD") and request.path in ("/", "/index.html"):
            return Response.html(self.page())
        if request.path == "/favicon.ico":
            return Response(204)
        response = self.route(request)
        if response is None:
            return Response.text("not found\n", 404)
        return response


def egress_host(record: ev.Egress) -> str:
    """The lower-case host of an egress event, without IPv6 brackets or a trailing dot."""
    return record.host.strip().strip("[]").rstrip(".").lower()


def files_with_bytes(downloads: Path | None, expected: bytes) -> list[Path]:
    """Files under ``downloads`` (recursively) whose content is exactly ``expected``; partial Chromium
    downloads (``*.crdownload``) are ignored."""
    if downloads is None or not downloads.is_dir():
        return []
    found = []
    for path in sorted(downloads.rglob("*")):
        if path.suffix == ".crdownload" or path.is_symlink() or not path.is_file():
            continue
        try:
            if path.stat().st_size != len(expected):
                continue
            if path.read_bytes() == expected:
                found.append(path)
        except OSError:
            continue
    return found


def _handler_for(lab: Lab) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "cua-tui-lab"
        sys_version = ""

        def _serve(self, method: str) -> None:
            length_text = self.headers.get("Content-Length", "0") or "0"
            try:
                length = int(length_text)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY:
                self._send(Response.text("bad or too large body\n", 413), method)
                return
            body = self.rfile.read(length) if length else b""
            # origin-form, or absolute-form when a proxy forwards it as is
            parts = urlsplit(self.path)
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            request = Request(method, target, parts.path, parse_qs(parts.query, keep_blank_values=True), body)
            try:
                response = lab._dispatch(request)
            except Exception as exc:  # a lab bug answers 500; the run goes on
                response = Response.text(f"lab error: {type(exc).__name__}\n", 500)
            self._send(response, method)

        def _send(self, response: Response, method: str) -> None:
            try:
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(response.body)))
                self.send_header("Cache-Control", "no-store")
                self.send_header("X-Content-Type-Options", "nosniff")
                for key, value in response.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                if method != "HEAD" and response.body:
                    self.wfile.write(response.body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_GET(self) -> None:
            self._serve("GET")

        def do_HEAD(self) -> None:
            self._serve("HEAD")

        def do_POST(self) -> None:
            self._serve("POST")

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the lab is quiet; its evidence is in lab.requests

    return Handler
