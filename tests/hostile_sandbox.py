"""A hostile CoreWeave sandbox for the tests: the local service (``tests/fakes/cwsandbox_local.py``) with
nothing inside. Every exec is answered by the service itself with a behaviour chosen per helper request
(``ready``, ``perform``, ``screenshot``, ``verify``, ...), as a sandbox whose helper was replaced would.

``honest`` answers in the helper's own form (a reply header, a PNG of the run's screen), so a run gets as
far as the behaviour under test; the others flood, lie, claim too much or hang (``hang``: an exec that never
answers until the client cancels it). ``sent`` counts the bytes each request's answer actually put on the
wire (the proof that a flood was cut off), ``answered`` the requests. ``per_sandbox[k]``, when given, is the
``behave`` of the k-th sandbox created (``runs`` lists the run ids of the sandboxes in creation order), so
one run of a fleet can be hostile while the others are answered honestly.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
from cwsandbox._proto import sandbox_pb2 as pb
from PIL import Image
from recorder import Recorder

from cua_tui.build import RunOptions, build_run
from cua_tui.desktops.cwsandbox import INSTALL, PROBE, RUN_TAG_PREFIX, helper_request
from cua_tui.desktops.remote.wire import encode_reply
from cua_tui.labs import get_lab
from tests.fakes.cwsandbox_local import HOST_IMAGE, STDERR, STDOUT, LocalService, SandboxService

# stdout or stderr, as the exec's output frames name it
Stream = pb.ExecStreamOutput.Stream

FRAME = 1 << 16  # bytes per output frame, as the local service streams a real exec
MiB = 1 << 20


def png(width: int, height: int, colour: tuple[int, int, int] = (240, 240, 240)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A small file whose PNG header claims ``width`` x ``height`` (its pixel data is a few bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    )


def armored(reply: bytes) -> bytes:
    """What ``helper.pyz call ... base64`` writes: the length, then the reply in base64."""
    text = base64.b64encode(reply)
    return b"%d\n" % len(text) + text


class HostileService(SandboxService):
    """``behave``: helper request -> behaviour (default ``honest``). ``flood`` bytes for the floods."""

    def __init__(self, root: Path, path: str) -> None:
        super().__init__(root, path)
        self.behave: dict[str, str] = {}
        self.per_sandbox: list[dict[str, str]] = []
        self.runs: list[str] = []  # the run id of each sandbox created, in order
        self.hanging = 0  # execs held by ``hang`` right now
        self.flood = 512 * MiB
        self.egress_records = 4_157
        self.sent: dict[str, int] = {}
        self.answered: dict[str, int] = {}
        self._sent_lock = threading.Lock()

    def _sandbox_argv(self, command: list[str]) -> list[str]:
        return ["sleep", "infinity"]  # no helper inside: the service answers every exec itself

    def CreateSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:
        tags = [t for t in request.sandbox.spec.tags if t.startswith(RUN_TAG_PREFIX)]
        with self._sent_lock:
            self.runs.append(tags[0].removeprefix(RUN_TAG_PREFIX) if tags else "")
        return super().CreateSandbox(request, context)

    def behaviours(self, argv: list[str]) -> dict[str, str]:
        """The behaviours of the sandbox an exec runs in (its run id is in the helper's path)."""
        with self._sent_lock:
            for k, run_id in enumerate(self.runs):
                if run_id and k < len(self.per_sandbox) and any(f"/{run_id}/" in arg for arg in argv):
                    return self.per_sandbox[k]
        return self.behave

    def _run_exec(
        self,
        sb: Any,
        argv: list[str],
        env: dict[str, str],
        context: grpc.ServicerContext,
        *,
        exit_frame: bool,
        stdin: Any = None,
    ) -> Any:
        op = _op(argv)
        with self._sent_lock:
            self.answered[op] = self.answered.get(op, 0) + 1
        behaviour = self.behaviours(argv).get(op, "honest")
        if behaviour == "hang":  # no frame at all until the client gives up or cancels
            with self._sent_lock:
                self.hanging += 1
            try:
                while context.is_active():
                    time.sleep(0.05)
            finally:
                with self._sent_lock:
                    self.hanging -= 1
            return
        code = 100 if behaviour in ("missing", "install_fails") else 0
        for stream, data in self._answer(behaviour, op, argv):
            if not context.is_active():
                return
            with self._sent_lock:
                self.sent[op] = self.sent.get(op, 0) + len(data)
            yield pb.ExecStreamResponse(output=pb.ExecStreamOutput(stream=stream, data=data))
        if exit_frame:
            yield pb.ExecStreamResponse(exit=pb.ExecStreamExit(exit_code=code))

    # ------------------------------------------------------------------------------------------------
    def _answer(self, behaviour: str, op: str, argv: list[str]) -> Iterator[tuple[Stream, bytes]]:
        size = self._screen(argv)
        match behaviour:
            case "honest" if op == "probe":
                yield STDOUT, self._honest(op, size)
            case "honest" if op == "install":  # apt's lines, as a real install prints them, then done
                yield STDOUT, b"cua-tui: update\nGet:1 https://deb.debian.org/debian bookworm InRelease\n"
                yield STDOUT, b"cua-tui: install\n" + b"Get:2 https://deb.debian.org/debian x.deb\n" * 40
                yield STDOUT, b"Setting up x (1.0) ...\n" * 30 + b"cua-tui: done\n"
            case "missing":  # the probe's answer for an image without the desktop, with words of its own
                yield STDOUT, b"missing: openbox python3-xlib \x1b]52;c;ZXZpbA==\x07[red]evil[/red]\n"
            case "install_fails":  # apt cannot reach its mirror
                yield STDOUT, b"cua-tui: update\n"
                yield STDERR, b"W: Failed to fetch https://deb.debian.org/debian/dists/bookworm/InRelease\n"
                yield STDERR, b"E: Unable to locate package chromium\n"
            case "honest":
                yield from _frames(STDOUT, armored(self._honest(op, size)))
            case "flood_declared":  # a length far over any cap, then the bytes to match
                yield STDOUT, b"%d\n" % (self.flood * 4 // 3)
                yield from _flood(STDOUT, b"A", self.flood)
            case "flood_stdout":  # a plausible length, then far more than it said
                yield STDOUT, b"%d\n" % 100_000
                yield from _flood(STDOUT, b"A", self.flood)
            case "flood_binary":  # no length at all: raw bytes, as a reply in the old form would come
                yield from _flood(STDOUT, b"\xff", self.flood)
            case "flood_stderr":
                yield from _flood(STDERR, b"E", self.flood)
            case "egress_flood":
                records = [
                    {"host": f"h{i}.x", "port": 443, "method": "GET", "allowed": False, "reason": "x"}
                    for i in range(self.egress_records)
                ]
                reply = encode_reply({"ok": True, "output": None, "egress": records}, {"screen": (png(*size), *size)})
                yield from _frames(STDOUT, armored(reply))
            case "unsolicited_picture":  # a click's reply with a picture nobody asked for
                blobs = {"screen": (png(*size), *size), "image": (png_claiming(16384, 2441), 16384, 2441)}
                yield from _frames(STDOUT, armored(encode_reply({"ok": True, "output": None, "egress": []}, blobs)))
            case "oversized_zoom":  # a zoom's reply whose picture is larger than the region it was asked for
                blobs = {"screen": (png(*size), *size), "image": (png_claiming(4096, 4096), 4096, 4096)}
                yield from _frames(STDOUT, armored(encode_reply({"ok": True, "output": None, "egress": []}, blobs)))
            case "escape":  # an honest reply marked for tests/fleet_escape.py's seam to raise on
                yield from _frames(STDOUT, armored(self._honest(op, size, escape=True)))
            case "passed":  # a verdict from a sandbox that did nothing
                header = {"ok": True, "verification": {"passed": True, "detail": "all good", "verifier": "form-lab"}}
                yield from _frames(STDOUT, armored(encode_reply({**header, "egress": []})))
            case _:
                raise ValueError(f"unknown behaviour {behaviour!r}")

    def _honest(self, op: str, size: tuple[int, int], *, escape: bool = False) -> bytes:
        if op == "probe":  # the image has what the desktop needs (the sandbox's word, as everything here)
            return b"ok\n"
        header: dict[str, Any] = {"ok": True, "egress": [], **({"escape": True} if escape else {})}
        if op == "ready":
            header["isolation"] = {"bubblewrap": False, "bubblewrap_note": "a hostile sandbox: nothing inside"}
        if op == "verify":
            header["verification"] = None
        if op == "release":
            return encode_reply(header)
        return encode_reply(header, {"screen": (png(*size), *size)})

    def _screen(self, argv: list[str]) -> tuple[int, int]:
        """The run's screen, from the sandbox's own command (the helper's ``serve`` spec)."""
        with self._lock:
            specs = [sb.spec for sb in self.sandboxes.values()]
        for spec in specs:
            for arg in spec.containers[0].args:
                if arg.startswith("{") and '"screen"' in arg:
                    width, height = json.loads(arg)["screen"].split("x")
                    return int(width), int(height)
        return 1024, 720


def _op(argv: list[str]) -> str:
    """The helper request an exec carries, or ``probe`` / ``install`` for the start's scripts."""
    if argv[:2] == ["sh", "-c"] and len(argv) > 2 and argv[2] in (PROBE, INSTALL):
        return "probe" if argv[2] == PROBE else "install"
    request = helper_request(argv)
    return str(request.get("op", "")) if request is not None else ""


def _frames(stream: Stream, data: bytes) -> Iterator[tuple[Stream, bytes]]:
    for at in range(0, len(data), FRAME):
        yield stream, data[at : at + FRAME]


def _flood(stream: Stream, byte: bytes, total: int) -> Iterator[tuple[Stream, bytes]]:
    block = byte * FRAME
    for _ in range(total // FRAME):
        yield stream, block


class HostileLocalService(LocalService):
    service_class = HostileService

    @property
    def hostile(self) -> HostileService:
        assert isinstance(self.service, HostileService)
        return self.service


@contextlib.contextmanager
def hostile_service(root: Path, monkeypatch: Any, key: str, image: str | None = HOST_IMAGE) -> Iterator[HostileService]:
    """A hostile service, the run's client pointed at it (``image`` None: no image configured)."""
    svc = HostileLocalService(root)
    with svc:
        monkeypatch.setenv("CWSANDBOX_BASE_URL", svc.base_url)
        monkeypatch.setenv("CWSANDBOX_API_KEY", key)
        if image is not None:
            monkeypatch.setenv("CUA_TUI_CWSANDBOX_IMAGE", image)
        yield svc.hostile


def form_run(tmp_path: Path) -> tuple[Any, Recorder]:
    """The form lab's scripted run on the cwsandbox backend, every decision approved."""
    recorder = Recorder()
    run = build_run(
        RunOptions(
            backend="cwsandbox",
            agent=None,
            lab="form",
            script=get_lab("form").script(None),
            runs_dir=tmp_path / "runs",
            decisions="approve",
            fsync=False,
            listeners=(recorder,),
        )
    )
    return run, recorder
