"""The in-sandbox helper: the project's own local desktop, resident inside a remote sandbox.

Shipped as a zipapp (``zipapp.py``) and started with the sandbox's ``python3``: no vendor SDK and no key
come in. Commands ``serve SPEC_JSON``, ``downloads`` and ``call`` (``call.py``); replies are in the
format of ``wire.py``: ``CUA1 <n>\\n``, a JSON header, then its blobs. docs/backends/helper.md.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import platform
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...core.geometry import Size
from ...core.ports import DesktopError, Frame, Lab, StepResult
from ...core.stale import ScreenCheck
from ...core.text import failure
from .sealed import KEY_BYTES, unseal
from .wire import DOWNLOADS_CAP, MAX_DOWNLOADS, MAX_EGRESS_PER_REPLY, Blobs, action_from_wire, encode_reply

# Seconds the ``ready`` request waits for the desktop inside.
READY_WAIT = 60.0


def probe_bubblewrap(timeout: float = 10.0) -> tuple[bool, str]:
    """Whether bubblewrap can make the namespaces the local desktop uses, here and now."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False, "bubblewrap is not installed in the sandbox"
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--die-with-parent"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bubblewrap could not run: {exc}"
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return False, f"bubblewrap cannot make namespaces here: {reason[-1] if reason else done.returncode}"
    return True, "bubblewrap works"


# Debian's setuid helper (package chromium-sandbox)
CHROME_SANDBOX = "/usr/lib/chromium/chrome-sandbox"
NOBODY = 65534


def probe_browser_sandbox(timeout: float = 10.0) -> tuple[bool, str]:
    """Whether Chromium's own sandbox can start here, here and now. Chromium uses its namespace sandbox when
    its unprivileged user may make user, PID and network namespaces, else its setuid helper, which makes PID
    and network namespaces as root. A container under Docker's default seccomp profile (no CAP_SYS_ADMIN)
    refuses both, and Chromium then dies at start (SIGTRAP, "Failed to move to new namespace"): there it
    runs without its sandbox (``--no-sandbox``), the sandbox being its boundary, and ``isolation`` says so."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return True, "not probed (no unshare in the sandbox)"
    root = os.getuid() == 0
    user = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all", "--"]
    works, why = _runs([*(user if root else []), unshare, "--user", "--pid", "--net", "--fork", "true"], timeout)
    if works:
        return True, "Chromium's namespace sandbox works"
    setuid = root and _setuid_root(CHROME_SANDBOX) and not _no_new_privileges()
    if setuid and _runs([unshare, "--pid", "--net", "--fork", "true"], timeout)[0]:
        return True, "Chromium's setuid sandbox works"
    return False, f"Chromium's sandbox cannot make namespaces here: {why}"


def _runs(argv: list[str], timeout: float) -> tuple[bool, str]:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return done.returncode == 0, reason[-1] if reason else f"status {done.returncode}"


def _setuid_root(path: str) -> bool:
    try:
        info = os.stat(path)
    except OSError:
        return False
    return info.st_uid == 0 and bool(info.st_mode & 0o4000)


def _no_new_privileges() -> bool:
    """Whether this process may not gain privileges (setuid then does nothing)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("NoNewPrivs:"):
                return line.split()[1] != "0"
    return False


class Resident:
    """The local desktop inside the sandbox and the requests it answers, one reply per request."""

    def __init__(self, spec: dict[str, Any], get_lab: Callable[[str], Lab]) -> None:
        from ..local import Confinement, LocalDesktop
        from ..target import Target

        self.size = Size.parse(spec["screen"])
        wanted = spec.get("bubblewrap", "auto")
        works, why = probe_bubblewrap() if wanted != "off" else (False, "bubblewrap turned off for this run")
        self.bubblewrap_note = why
        browser = spec.get("browser_sandbox", "auto")  # the Docker backend's spec turns it off
        sandboxed, self.browser_sandbox_note = (
            probe_browser_sandbox() if browser == "auto" else (browser is not False, "as the run's spec says")
        )
        self.desktop = LocalDesktop(
            self.size,
            Target.from_spec(spec, get_lab),
            Confinement(
                bubblewrap=works,
                browser_sandbox=sandboxed,
                egress_socket=spec.get("egress_socket"),
                start_timeout=float(spec.get("start_timeout", 30.0)),
            ),
        )
        self._started = threading.Event()
        self._start_error: str | None = None
        # one desktop operation at a time (release and stop excepted)
        self._lock = threading.Lock()
        self._egress_sent = 0
        self._egress_lock = threading.Lock()
        # for typed text sealed in a command line (sealed.py)
        self._text_key: bytes | None = None

    def start(self) -> None:
        try:
            self.desktop.start()
        except DesktopError as exc:
            self._start_error = str(exc)
        except Exception as exc:
            # the reason reaches the controller as the reply to ``ready``
            self._start_error = f"could not start the desktop: {exc}"
        finally:
            self._started.set()

    def isolation(self) -> dict[str, Any]:
        info = dict(self.desktop.isolation)
        info["bubblewrap"] = self.desktop.confinement.bubblewrap
        if not self.desktop.confinement.bubblewrap:
            info["bubblewrap_note"] = self.bubblewrap_note
        info["browser_sandbox"] = self.desktop.confinement.browser_sandbox
        if not self.desktop.confinement.browser_sandbox:
            info["browser_sandbox_note"] = self.browser_sandbox_note
        # the sandbox's own python3
        info["helper_python"] = f"{platform.python_version()} ({sys.executable})"
        return info

    def _egress(self) -> list[dict[str, Any]]:
        with self._egress_lock:
            records = self.desktop.egress()[self._egress_sent : self._egress_sent + MAX_EGRESS_PER_REPLY]
            self._egress_sent += len(records)
        return [
            {"host": r.host, "port": r.port, "method": r.method, "allowed": r.allowed, "reason": r.reason}
            for r in records
        ]

    def handle(self, request: dict[str, Any]) -> bytes:
        op = request.get("op")
        try:
            header, blobs = self._dispatch(op, request)
        except DesktopError as exc:
            header, blobs = {"ok": False, "error": str(exc), "fatal": exc.fatal}, {}
        except Exception as exc:
            # a bug inside must reach the controller as a failure, not a silence
            header, blobs = {"ok": False, "error": f"helper error: {failure(exc)}", "fatal": True}, {}
        return encode_reply({**header, "egress": self._egress()}, blobs)

    def _dispatch(self, op: Any, request: dict[str, Any]) -> tuple[dict[str, Any], Blobs]:
        if op == "release":
            self.desktop.release_all()
            return {"ok": True}, {}
        key = request.get("key")
        if op == "ready" and self._text_key is None and isinstance(key, str) and len(key) == 2 * KEY_BYTES:
            with contextlib.suppress(ValueError):
                self._text_key = bytes.fromhex(key)
        if op == "ready" and not self._started.wait(float(request.get("wait", READY_WAIT))):
            return {"ok": False, "error": "the desktop inside the sandbox is still starting", "fatal": True}, {}
        if self._start_error is not None:
            raise DesktopError(self._start_error, fatal=True)
        if not self._started.is_set():
            raise DesktopError("the desktop inside the sandbox has not started yet", fatal=True)
        with self._lock:
            if op == "ready":
                return {"ok": True, "isolation": self.isolation()}, _frame_blob("screen", self.desktop.screenshot())
            if op == "screenshot":
                return {"ok": True}, _frame_blob("screen", self.desktop.screenshot())
            if op == "region":
                x0, y0, x1, y1 = (int(v) for v in request["region"])
                return {"ok": True}, _frame_blob("screen", self.desktop.capture_region((x0, y0, x1, y1)))
            if op == "perform":
                check = ScreenCheck.from_wire(request["check"]) if request.get("check") is not None else None
                action = dict(request["action"])
                if "sealed_text" in action:
                    # typed text that travelled in a command line: sealed (sealed.py)
                    if self._text_key is None:
                        raise DesktopError("sealed text came before the run's key", fatal=True)
                    action["text"] = unseal(self._text_key, action.pop("sealed_text"))
                started = time.perf_counter()
                header, blobs = _step_reply(self.desktop.perform_checked(action_from_wire(action), check))
                # the step's parts as measured inside (the sandbox's word: only benchmarks read it)
                timing = {**self.desktop.timing, "helper": (time.perf_counter() - started) * 1000}
                return {**header, "timing": {k: round(v, 2) for k, v in timing.items()}}, blobs
            if op == "downloads":
                return _downloads(self.desktop.downloads)
            if op == "verify":
                verdict = self.desktop.verify()
                data = (
                    None
                    if verdict is None
                    else {
                        "passed": verdict.passed,
                        "detail": verdict.detail,
                        "verifier": verdict.verifier,
                        "user": verdict.user,
                    }
                )
                return {"ok": True, "verification": data}, {}
        raise DesktopError(f"unknown request {op!r}")

    def stop(self) -> None:
        self.desktop.stop()


def _downloads(folder: Path | None) -> tuple[dict[str, Any], Blobs]:
    """The finished downloads (no ``.crdownload``, no links), capped in count and bytes. Blobs are named
    by their place in the folder; the header lists what was left out."""
    blobs: Blobs = {}
    skipped: list[str] = []
    total = 0
    if folder is None or not folder.is_dir():
        return {"ok": True, "skipped": []}, {}
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".crdownload" or path.is_symlink() or not path.is_file():
            continue
        name = path.relative_to(folder).as_posix()
        size = path.stat().st_size
        if len(blobs) >= MAX_DOWNLOADS or total + size > DOWNLOADS_CAP:
            skipped.append(name)
            continue
        with open(path, "rb") as fh:
            # no more than was counted, should the file still grow
            data = fh.read(size)
        blobs[name] = (data, 0, 0)
        total += len(data)
    return {"ok": True, "skipped": skipped[:MAX_DOWNLOADS]}, blobs


def _frame_blob(name: str, frame: Frame) -> Blobs:
    return {name: (frame.png, frame.width, frame.height)}


def _step_reply(step: StepResult) -> tuple[dict[str, Any], Blobs]:
    blobs = _frame_blob("screen", step.frame)
    if step.image is not None:
        blobs.update(_frame_blob("image", step.image))
    return {"ok": True, "output": step.output, "stale": step.stale}, blobs


def armor(request: dict[str, Any], reply: bytes) -> bytes:
    """The reply as the request asked for it: as it is, or (``"armor": true``, a step's exec relayed by
    socat) in the form ``call.py ... base64`` writes: its length, a newline, the reply in base64."""
    if request.get("armor") is not True:
        return reply
    encoded = base64.b64encode(reply)
    return b"%d\n" % len(encoded) + encoded


def _read_request(conn: socket.socket) -> dict[str, Any] | None:
    data = b""
    while len(data) < 1_048_576 and not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    try:
        request = json.loads(data)
    except ValueError:
        return None
    return request if isinstance(request, dict) else None


def serve(spec: dict[str, Any], get_lab: Callable[[str], Lab]) -> int:
    """Start the desktop and answer requests until the sandbox is stopped (SIGTERM).

    The desktop is started and driven from the main thread only: the processes it starts die with the
    thread that started them (parent-death signal), and the screen grabber is per thread. Connections are
    read on their own threads and queued to it, except ``release``, which must get in at any moment.
    One function on purpose: the main thread's whole life in the sandbox (start, serve, stop) reads top to
    bottom, each stage holding what the next one stops."""
    path = Path(spec["socket"])
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # the sandbox's unprivileged users (the browser's) cannot reach it
    os.chmod(path.parent, 0o700)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen(16)
    resident = Resident(spec, get_lab)
    jobs: queue.Queue[tuple[dict[str, Any], socket.socket] | None] = queue.Queue()

    def stop(*_args: Any) -> None:
        jobs.put(None)

    def answer(conn: socket.socket) -> None:
        request = _read_request(conn)
        if request is None:
            with conn, contextlib.suppress(OSError):
                conn.sendall(encode_reply({"ok": False, "error": "malformed request", "fatal": False, "egress": []}))
        elif request.get("op") == "shutdown":
            # the controller's stream ended (call.py, ``stream``)
            with conn, contextlib.suppress(OSError):
                conn.sendall(encode_reply({"ok": True, "egress": []}))
            jobs.put(None)
        elif request.get("op") == "release":
            with conn, contextlib.suppress(OSError):
                conn.sendall(armor(request, resident.handle(request)))
        else:
            jobs.put((request, conn))

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threading.Thread(target=accept, name="helper-accept", daemon=True).start()
    try:
        resident.start()
        while (job := jobs.get()) is not None:
            request, conn = job
            with conn, contextlib.suppress(OSError):
                conn.sendall(armor(request, resident.handle(request)))
    finally:
        with contextlib.suppress(OSError):
            listener.close()
        resident.stop()
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            path.parent.rmdir()
    return 0


def main(argv: list[str], get_lab: Callable[[str], Lab]) -> int:
    """``serve SPEC_JSON``. ``get_lab`` comes from the zipapp's entry point, which puts the labs and the
    desktop together (the desktops do not import the labs)."""
    if len(argv) != 2 or argv[0] != "serve":
        print("usage: helper.pyz serve SPEC_JSON | call SOCKET REQUEST_JSON WAIT", file=sys.stderr)
        return 2
    return serve(json.loads(argv[1]), get_lab)
