"""``--backend local`` (the default): a real Xvfb display, openbox and Chromium on this machine, isolated.

One bubblewrap sandbox per run, a uid per run (``isolation.py``), the egress proxy (``egress/``) its only
way out; capture and input in-process (``x11.py``). Variants without bubblewrap, or with the proxy outside,
serve the remote backends. Design: docs/backends/local.md.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import events as ev
from ..core.actions import Action
from ..core.geometry import Size
from ..core.ports import BaseDesktop, DesktopError, Frame, StepResult, Verification
from ..core.stale import ScreenCheck
from ..core.text import failure
from ..procs import kill_group
from . import quiet
from .egress import EgressProxy, relay_command
from .isolation import (
    NAMESPACES,
    SANDBOX_NAME,
    UidLease,
    etc_files,
    filesystem_args,
    lease_uid,
    openbox_env,
    openbox_files,
)
from .target import Target
from .x11 import X11Session, grant_local_user

INNER_PROXY_PORT = 3128
REQUIRED = ("Xvfb", "openbox", "chromium", "bwrap", "socat", "xauth")

# First paint. Chromium shows its empty window (one flat colour) before the page, for over a second
# on a loaded machine. A page is on screen once the frame holds more than two colours (the black
# root and an empty window are two at most; text, even a few words, is drawn with many shades), then
# it gets a quiet period to finish painting. A page that really is one or two flat colours counts
# only once its document went through the proxy and the frame then held still for a long while; a
# lab's page never does (each has text). With eight Chromiums on two cores the empty window stayed
# over 3 s after the document was served: the model was shown an empty screen, planned on it, and
# the stale-screen guard refused its click.
FIRST_PAINT_POLL = 0.05
FIRST_PAINT_QUIET = 0.3  # painted, then unchanged this long: settled
# an animated page never settles: it counts as painted this long after it showed
FIRST_PAINT_LIMIT = 2.0
# a frame of at most two colours, unchanged this long (the page fetched): a flat page
FLAT_PAGE_WAIT = 8.0
ROOT_COLOUR = (0, 0, 0)


WORKSPACE_PREFIX = "cua-tui-desktop-"


def sweep_stale_workspaces(root: Path | None = None) -> list[Path]:
    """Delete workspaces left by controllers that died without cleaning up (their owner is gone).

    Their processes already died with their owner (parent-death signal); this removes the profile,
    cookie and downloads they left on disk, and frees the display numbers they claimed."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(WORKSPACE_PREFIX + "*"):
        try:
            owner = int((folder / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        if owner != os.getpid() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if removed:
        # the display numbers they claimed: the link to their X socket and its lock file
        for link in Path("/tmp/.X11-unix").glob("X*"):
            with contextlib.suppress(OSError):
                if link.is_symlink() and any(Path(os.readlink(link)).is_relative_to(f) for f in removed):
                    link.unlink()
                    Path(f"/tmp/.{link.name}-lock").unlink(missing_ok=True)
    return removed


class FirstPaint:
    """Decides, one grab at a time, when the browser has painted its page (see "First paint" above).

    Every pixel counts: Pillow counts the frame's colours over the whole frame, in C, and stops at three.
    """

    def __init__(self, background: tuple[int, int, int] = ROOT_COLOUR, *, flat_page: bool = True) -> None:
        self.background = background
        # False: the page is known to have content (a lab's), a flat frame never counts
        self.flat_page = flat_page
        self._last: bytes | bytearray | None = None
        # the last frame's, if two at most
        self._colours: set[tuple[int, ...]] | None = {background}
        self._since = 0.0  # when the frame last changed
        self._content_at: float | None = None  # when content first showed

    def ready(self, raw: bytes | bytearray, size: tuple[int, int], now: float, *, fetched: bool = True) -> bool:
        """``fetched``: the page's document has been served (only a page of one or two colours needs it)."""
        if raw != self._last:
            self._last, self._since = raw, now
            self._colours = few_colours(raw, size)
            if self._content_at is None and self._colours is None:
                self._content_at = now
        if self._content_at is not None:
            return now - self._since >= FIRST_PAINT_QUIET or now - self._content_at >= FIRST_PAINT_LIMIT
        shown = self.flat_page and self._colours is not None and self._colours != {self.background}
        return fetched and shown and now - self._since >= FLAT_PAGE_WAIT


def few_colours(raw: bytes | bytearray, size: tuple[int, int]) -> set[tuple[int, ...]] | None:
    """The colours of a BGRX frame if it has two at most, judged on every pixel; None if it has more."""
    from PIL import Image

    # bytes(): see x11.encode
    found = Image.frombuffer("RGB", size, bytes(raw), "raw", "BGRX", 0, 1).getcolors(2)
    # An RGB image's colours are tuples; Pillow's type also allows a single-band float.
    return None if found is None else {colour for _count, colour in found if isinstance(colour, tuple)}


def missing_programs() -> list[str]:
    return [name for name in REQUIRED if shutil.which(name) is None]


def chromium_flags(size: Size, profile: Path, url: str, *, sandbox: bool = True) -> list[str]:
    # without its sandbox Chromium shows a warning bar that shifts the page; --test-type hides it
    unsandboxed = [] if sandbox else ["--no-sandbox", "--test-type"]
    return [
        *unsandboxed,
        "--kiosk",
        # nothing asked on its own (quiet.py): a clean run's egress is the page's alone
        *quiet.FLAGS,
        "--disable-dev-shm-usage",
        "--password-store=basic",
        f"--user-data-dir={profile}",
        f"--window-size={size.width},{size.height}",
        "--window-position=0,0",
        f"--proxy-server=http://127.0.0.1:{INNER_PROXY_PORT}",
        "--proxy-bypass-list=<-loopback>",
        url,
    ]


@dataclass(frozen=True)
class Confinement:
    """How a local desktop is shut in. On this machine: all of it. Inside a remote sandbox the helper
    decides from probes (no user namespaces: no bubblewrap; Docker: no Chromium sandbox) and hands in
    the socket of the proxy outside, where the lab runs too."""

    bubblewrap: bool = True
    browser_sandbox: bool = True
    egress_socket: str | None = None  # None: the desktop runs its own egress proxy
    start_timeout: float = 30.0  # seconds until the browser must show a page


class LocalDesktop(BaseDesktop):
    """Xvfb + openbox + Chromium in bubblewrap, driven in-process. One instance per run."""

    name = "local"

    def __init__(self, size: Size, target: Target, confinement: Confinement = Confinement()) -> None:
        target.require(self.name)
        if confinement.egress_socket is not None and target.lab is not None:
            raise ValueError("with an outside proxy the lab runs outside too: give its URL")
        self.size = size
        self.target = target
        self.confinement = confinement
        self._sink: Callable[[ev.Event], None] | None = None
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._workspace: Path | None = None
        self._proxy: EgressProxy | None = None
        self._x11: X11Session | None = None
        self._display: str | None = None
        self._stopped = False
        self._stop_lock = threading.Lock()
        self._lease: UidLease | None = None
        self._inside: dict[str, int] = {}  # host pids of Xvfb and openbox, inside the sandbox
        self._acted_at = 0.0  # time.monotonic() when the last action ended (verify waits on it)

    # ---------------------------------------------------------------------------------------------
    @property
    def workspace(self) -> Path | None:
        return self._workspace

    @property
    def downloads(self) -> Path | None:
        return self._workspace / "home" / "Downloads" if self._workspace else None

    @property
    def display(self) -> str | None:
        return self._display

    def processes(self) -> dict[str, int]:
        """Host pids: the sandbox (bwrap, whose namespaces hold everything else), and Xvfb and openbox in it."""
        pids = {name: proc.pid for name, proc in self._procs.items()}
        browser = self._procs.get("browser")
        if browser is not None:
            for name, comm in (("xvfb", "Xvfb"), ("openbox", "openbox")):
                if name not in self._inside:
                    found = _descendant(browser.pid, comm)
                    if found is not None:
                        self._inside[name] = found
        return {**pids, **self._inside}

    @property
    def isolation(self) -> dict[str, Any]:
        """What isolation this run obtained (for run.json and the audit log)."""
        lease = self._lease
        uid = lease.uid if lease is not None else None
        per_run = bool(lease and lease.per_run)
        if not self.confinement.bubblewrap:
            return self._isolation_without_bubblewrap(uid, per_run)
        info: dict[str, Any] = {
            "namespaces": list(NAMESPACES),
            "uid": uid,
            "uid_per_run": per_run,
            "filesystem": "minimal read-only binds (/usr, libraries, fonts, the browser) + own workspace",
            "x_server": "inside sandbox",
            "window_manager": "inside sandbox, read-only configuration",
            "relay": "inside sandbox",
            "x_socket": "this run's display only",
            "egress": "allow-list proxy only",
        }
        if lease is None:
            info["note"] = "not started"
        elif not per_run:
            info["note"] = "not root: the sandbox runs as the controller's own uid; a uid per run needs root"
        return info

    def _isolation_without_bubblewrap(self, uid: int | None, per_run: bool) -> dict[str, Any]:
        return {
            "namespaces": [],
            "uid": uid,
            "uid_per_run": per_run,
            "filesystem": "the sandbox's own (no bubblewrap)",
            "x_server": "as the run's uid, no namespaces",
            "window_manager": "read-only configuration, no namespaces",
            "relay": "as the run's uid, no namespaces",
            "x_socket": "this run's display, cookie required",
            "egress": "the controller's allow-list proxy, through a mounted socket"
            if self.confinement.egress_socket
            else "the browser's allow-list proxy; the network has no namespace of its own",
            "note": "no bubblewrap: the processes of the desktop share the sandbox's namespaces",
        }

    def bind_events(self, sink: Callable[[ev.Event], None]) -> None:
        """Where egress events go (the supervisor's audit log)."""
        self._sink = sink

    def egress(self) -> list[ev.Egress]:
        return self._proxy.records if self._proxy else []

    # ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        missing = [name for name in missing_programs() if self.confinement.bubblewrap or name != "bwrap"]
        if missing:
            raise DesktopError(
                f"the local desktop needs {', '.join(missing)}: run `bash scripts/setup.sh env` as "
                "root to install them",
                fatal=True,
            )
        try:
            self._start()
        except DesktopError:
            self.stop()
            raise
        except Exception as exc:
            self.stop()
            raise DesktopError(f"could not start the local desktop: {failure(exc)}", fatal=True) from None

    def _start(self) -> None:
        lease = self._lease = lease_uid()
        uid = lease.uid
        sweep_stale_workspaces()
        ws = Path(tempfile.mkdtemp(prefix=WORKSPACE_PREFIX))
        self._workspace = ws
        home, run, config, etc = _lay_out_workspace(ws, uid)
        start_url = self._start_proxy(run, uid)
        x_dir = _x_socket_dir(ws, uid)
        number = self._claim_display(x_dir if self.confinement.bubblewrap else None)
        display_name = self._display = f":{number}"
        cookie_file = _x_cookie(run, display_name, uid)
        env = {
            "DISPLAY": display_name,
            "XAUTHORITY": str(cookie_file),
            "HOME": str(home),
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
        }
        relay_to = self.confinement.egress_socket or str(run / "proxy.sock")
        if self.confinement.bubblewrap:
            init = _write_init(run, config, self.size, display_name, cookie_file, relay_to)
            command = _bwrap_command(uid, home, run, etc, x_dir, init)
            x_socket = x_dir / f"X{number}"
        else:
            # The init script's scratch files in the run's own folder, /tmp being shared.
            scratch = home / ".init"
            scratch.mkdir(mode=0o700)
            _own(scratch, uid, 0o700)
            init = _write_init(run, config, self.size, display_name, cookie_file, relay_to, scratch=str(scratch))
            command = [str(init)]
            x_socket = Path(f"/tmp/.X11-unix/X{number}")
            env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        self._procs["browser"] = _spawn(
            [
                *_as_user(uid),
                *command,
                *chromium_flags(self.size, home / "profile", start_url, sandbox=self.confinement.browser_sandbox),
            ],
            env=env,
            log=run / "browser.log",
            cwd=None if self.confinement.bubblewrap else home,
        )
        self._wait_for_x(x_socket)
        # As root, the controller is not mapped in the sandbox's user namespace: the X server sees
        # it as the overflow user "nobody". It connects once with the cookie and lets "nobody" in:
        # on the host only root gets through the socket folder (0700, the sandbox user's), and
        # inside only the sandbox user exists. Without root the controller shares the sandbox's uid,
        # which the X server knows by the sandbox's name for it.
        grant_local_user(display_name, str(cookie_file), self._controller_name(lease.per_run))
        self._x11 = X11Session(display_name, self.size)
        self._wait_for_page()

    def _controller_name(self, per_run: bool) -> str:
        """The name the X server knows this controller by (see ``_start``)."""
        if not self.confinement.bubblewrap:  # no user namespace: the controller is who it is
            import pwd

            return pwd.getpwuid(os.getuid()).pw_name
        return "nobody" if per_run else SANDBOX_NAME

    def _start_proxy(self, run: Path, uid: int) -> str:
        """Start the lab (if any) and the allow-list proxy on its socket in ``run``; return the start URL.
        With an outside proxy (``egress_socket``) nothing starts here: the target is a page."""
        start_url, allow = self.target.open()
        if self.confinement.egress_socket is not None:
            return start_url
        self._proxy = EgressProxy(run / "proxy.sock", allow, on_event=self._on_egress)
        self._proxy.start()
        _own(run / "proxy.sock", uid, 0o600)
        return start_url

    def _claim_display(self, socket_dir: Path | None) -> int:
        """A display number of our own: its lock file (as X servers take them) and the host's path to the
        socket, a link into the workspace where the sandboxed X server creates it (without bubblewrap,
        ``socket_dir`` None, the X server makes its socket there itself)."""
        x11_unix = Path("/tmp/.X11-unix")
        if not x11_unix.exists() and not x11_unix.is_symlink():
            x11_unix.mkdir(mode=0o1777, exist_ok=True)
            os.chmod(x11_unix, 0o1777)
        info = os.lstat(x11_unix)
        # whoever owns it could swap our link for one to an X server of theirs
        if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (0, os.getuid()) or not info.st_mode & stat.S_ISVTX:
            raise DesktopError(f"{x11_unix} must be a sticky directory owned by root", fatal=True)
        for number in range(90, 400):
            lock, link = Path(f"/tmp/.X{number}-lock"), x11_unix / f"X{number}"
            if link.is_symlink() or link.exists():
                continue
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as out:
                out.write(f"{os.getpid():10d}\n")
            if socket_dir is None:
                self._display = f":{number}"
                return number
            try:
                os.symlink(socket_dir / f"X{number}", link)
            except FileExistsError:
                lock.unlink(missing_ok=True)
                continue
            self._display = f":{number}"  # from now on stop() removes both
            return number
        raise DesktopError("no free X display number between :90 and :399", fatal=True)

    def _wait_for_x(self, socket_path: Path, timeout: float = 10.0) -> None:
        """Until the sandboxed X server accepts connections on its socket."""
        deadline = time.monotonic() + timeout
        while True:
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(str(socket_path))
                    return
                except (FileNotFoundError, ConnectionRefusedError):
                    pass
            if self._procs["browser"].poll() is not None:
                raise DesktopError(
                    f"the sandbox exited at start (status {self._procs['browser'].returncode})", fatal=True
                )
            if time.monotonic() > deadline:
                raise DesktopError(f"the X server did not start within {timeout:g} s", fatal=True)
            time.sleep(0.005)

    def _wait_for_page(self) -> None:
        """Wait until the browser painted its page and the screen settled (see ``FirstPaint``)."""
        assert self._x11 is not None
        # a lab's page has text: it waits for the text
        watch = FirstPaint(flat_page=self.target.lab is None)
        deadline = time.monotonic() + self.confinement.start_timeout
        while time.monotonic() < deadline:
            if self._procs["browser"].poll() is not None:
                raise DesktopError(
                    f"the browser exited at start (status {self._procs['browser'].returncode})", fatal=True
                )
            shot = self._x11.grab_raw()
            fetched = any(record.allowed for record in self.egress())
            if watch.ready(shot.raw, shot.size, time.monotonic(), fetched=fetched):
                return
            time.sleep(FIRST_PAINT_POLL)
        raise DesktopError(f"the browser showed nothing within {self.confinement.start_timeout:g} s", fatal=True)

    def _on_egress(self, event: ev.Event) -> None:
        if self._sink is not None:
            self._sink(event)

    # ---------------------------------------------------------------------------------------------
    def _session(self) -> X11Session:
        if self._stopped or self._x11 is None:
            raise DesktopError("the desktop was stopped", fatal=True)
        browser = self._procs.get("browser")
        if browser is not None and browser.poll() is not None:
            raise DesktopError(f"the browser exited (status {browser.returncode})", fatal=True)
        return self._x11

    def screenshot(self) -> Frame:
        return self._session().screenshot()

    def perform(self, action: Action) -> StepResult:
        return self.perform_checked(action, None)

    def perform_checked(self, action: Action, check: ScreenCheck | None) -> StepResult:
        try:
            return self._session().perform_checked(action, check)
        finally:
            self._acted_at = time.monotonic()

    @property
    def timing(self) -> dict[str, float]:
        """The last action's parts in ms (input, settle, encode), for the benchmarks."""
        return dict(self._x11.timing) if self._x11 is not None else {}

    def capture_region(self, region: tuple[int, int, int, int]) -> Frame:
        session = self._session()
        return session.encode(session.grab_raw(region))

    def foreign_input(self) -> None:
        """Another X client gave input (a benchmark's xdotool): see ``X11Session.foreign_input``."""
        if self._x11 is not None:
            self._x11.foreign_input()

    def release_all(self) -> None:
        if self._x11 is not None:
            self._x11.release_all()

    def verify(self) -> Verification | None:
        if self.target.lab is not None and self._proxy is not None:
            # a request the last action caused is judged (and logged) too
            self._proxy.wait_quiet(since=self._acted_at)
        return self.target.verify(self.downloads, self.egress())

    def stop(self) -> None:
        """Stop everything and delete the workspace. Idempotent; safe from any thread."""
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        if self._x11 is not None:
            self._x11.stop()
        proc = self._procs.get("browser")
        if proc is not None:
            # the sandbox: everything of the desktop dies with its namespace
            kill_group(proc)
        if self._proxy is not None:
            self._proxy.stop()
        self.target.stop()
        if self._display:
            number = self._display.lstrip(":")
            for leftover in (Path(f"/tmp/.X{number}-lock"), Path(f"/tmp/.X11-unix/X{number}")):
                leftover.unlink(missing_ok=True)
        if self._workspace is not None:
            shutil.rmtree(self._workspace, ignore_errors=True)
        if self._lease is not None:
            # only now: nothing of the run is left that could use the uid
            self._lease.release()


# ------------------------------------------------------------------------------------------------
def _as_user(uid: int | None) -> list[str]:
    """setpriv prefix: die with this process (SIGKILL when it exits, even if it is killed itself, so no
    desktop process outlives a crashed controller) and, as root, drop to the unprivileged ``uid``."""
    argv = ["setpriv", "--pdeathsig", "KILL"]
    if uid is not None and os.getuid() == 0:
        argv += [f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all"]
    return [*argv, "--"]


def _chown_tree(path: Path, uid: int) -> None:
    if os.getuid() != 0:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, uid, uid)
        for name in dirs + files:
            os.chown(os.path.join(root, name), uid, uid, follow_symlinks=False)


def _write_readonly(path: Path, text: str) -> None:
    """A root-owned file everyone may read (its folders too), whatever the umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o755)
    path.write_text(text)
    os.chmod(path, 0o644)


def _own(path: Path, uid: int, mode: int) -> None:
    if os.getuid() == 0:
        os.chown(path, uid, uid)
    os.chmod(path, mode)


def _lay_out_workspace(ws: Path, uid: int) -> tuple[Path, Path, Path, Path]:
    """The run's workspace: ``home`` (the sandbox user's, writable inside) and ``run`` (the controller's,
    read-only inside: openbox's configuration and the sandbox's /etc files). Returns home, run, the
    openbox configuration folder and the /etc folder."""
    (ws / "owner.pid").write_text(str(os.getpid()))
    # the sandbox user binds its two folders from here; nobody else lists it
    os.chmod(ws, 0o711)
    home, run = ws / "home", ws / "run"
    config = run / "openbox"
    for folder in (home, home / "Downloads", home / "profile" / "Default", run, config):
        folder.mkdir(parents=True, exist_ok=True)
    (home / "profile" / "Default" / "Preferences").write_text(
        '{"download": {"default_directory": "%s", "prompt_for_download": false}, '
        '"profile": {"exit_type": "Normal"}}' % (home / "Downloads")
    )
    _chown_tree(home, uid)
    os.chmod(home, 0o700)
    # run/ stays the controller's: the sandbox sees it read-only (its init script, openbox's
    # configuration, its /etc files), and only the cookie and the proxy socket are the sandbox
    # user's. Modes are explicit: whatever this process's umask, the sandbox user reads them and
    # cannot write.
    os.chmod(run, 0o755)
    os.chmod(config, 0o755)
    for name, text in openbox_files(str(config)).items():
        _write_readonly(config / name, text)
    etc = run / "etc"
    etc.mkdir(mode=0o755)
    for name, text in etc_files(uid, str(home)).items():
        _write_readonly(etc / name, text)
    # the browser's managed policies, bound at /etc/chromium/policies (quiet.py)
    _write_readonly(run / "chromium-policies" / "managed" / quiet.POLICY_NAME, quiet.policy_json())
    os.chmod(run / "chromium-policies", 0o755)
    return home, run, config, etc


def _x_socket_dir(ws: Path, uid: int) -> Path:
    """The X server's socket folder, bound at /tmp/.X11-unix inside, where the X server makes it
    world-writable: the folder above it is the sandbox user's, 0700, so on the host only that user and
    root reach the socket."""
    x_dir = ws / "x11" / "sockets"
    x_dir.mkdir(parents=True)
    _own(x_dir.parent, uid, 0o700)
    _own(x_dir, uid, 0o700)
    return x_dir


def _x_cookie(run: Path, display_name: str, uid: int) -> Path:
    """A fresh X authorization cookie for the display, in a file only the sandbox user reads."""
    cookie_file = run / "xauth"
    subprocess.run(
        ["xauth", "-q", "-f", str(cookie_file), "add", display_name, ".", secrets.token_hex(16)],
        check=True,
        capture_output=True,
    )
    _own(cookie_file, uid, 0o600)
    return cookie_file


def _write_init(
    run: Path, config: Path, size: Size, display_name: str, cookie_file: Path, proxy: str, *, scratch: str = "/tmp"
) -> Path:
    """The sandbox's init script: the X server, the proxy relay (to the ``proxy`` socket), the window
    manager and the browser. ``scratch``: where it keeps its two marker files (the sandbox's own /tmp in
    bubblewrap)."""
    xvfb = [
        "Xvfb",
        display_name,
        "-screen",
        "0",
        f"{size.width}x{size.height}x24",
        # a black root window: what FirstPaint takes for "nothing shown yet"
        "-br",
        "-nolisten",
        "tcp",
        "-noreset",
        "-auth",
        str(cookie_file),
    ]
    openbox = [
        "env",
        *(f"{k}={v}" for k, v in openbox_env(str(config)).items()),
        "openbox",
        "--config-file",
        str(config / "openbox" / "rc.xml"),
        "--sm-disable",
        # run once it manages the screen (again after a restart: harmless)
        "--startup",
        f"touch {scratch}/wm-ready",
    ]
    init = run / "init.sh"
    init.write_text(
        "#!/bin/sh\n"
        "# Everything the desktop runs, inside the sandbox: the X server, the proxy relay, the window\n"
        "# manager and the browser. The X server first; the others once it accepts connections.\n"
        # -displayfd: the X server writes its number once it accepts connections
        f"mkfifo {scratch}/x-ready\n"
        f"{shlex.join(xvfb)} -displayfd 3 3>{scratch}/x-ready &\n"
        f'read -r shown < {scratch}/x-ready || {{ echo "the X server did not start" >&2; exit 1; }}\n'
        f"{shlex.join(relay_command(proxy, INNER_PROXY_PORT))} 2>/dev/null &\n"
        f"{shlex.join(openbox)} &\n"
        # the browser's window must not be mapped while openbox is still starting: it would be
        # adopted (reparented) under the first input, and that input lost
        "n=0\n"
        f'while [ ! -e {scratch}/wm-ready ] && [ "$n" -lt 1000 ]; do n=$((n + 1)); sleep 0.01; done\n'
        'exec chromium "$@"\n'
    )
    os.chmod(init, 0o755)
    return init


def _bwrap_command(uid: int, home: Path, run: Path, etc: Path, x_dir: Path, init: Path) -> list[str]:
    """bubblewrap with every namespace of its own and only what the desktop needs of the host, running
    ``init`` inside."""
    return [
        "bwrap",
        *(f"--unshare-{ns}" for ns in ("user", "pid", "net", "ipc", "uts", "cgroup")),
        "--die-with-parent",
        "--new-session",
        *filesystem_args(chromium_policies=str(run / "chromium-policies")),
        *(arg for name in etc_files(uid, str(home)) for arg in ("--ro-bind", str(etc / name), f"/etc/{name}")),
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--tmpfs",
        "/dev/shm",
        "--bind",
        str(x_dir),
        "/tmp/.X11-unix",
        "--bind",
        str(home),
        str(home),
        "--ro-bind",
        str(run),
        str(run),
        "--remount-ro",
        "/",
        "--chdir",
        str(home),
        "--",
        str(init),
    ]


def _spawn(
    argv: list[str], *, env: dict[str, str], log: Path, pass_fds: tuple[int, ...] = (), cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            pass_fds=pass_fds,
            cwd=cwd,
        )


def _descendant(pid: int, comm: str) -> int | None:
    """The first process named ``comm`` below ``pid`` (its host pid), if any."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                head, rest = fh.read().rsplit(")", 1)
        except OSError:
            continue
        child = int(entry)
        names[child] = head.split("(", 1)[1]
        children.setdefault(int(rest.split()[1]), []).append(child)
    todo = list(children.get(pid, []))
    while todo:
        current = todo.pop(0)
        if names.get(current) == comm:
            return current
        todo += children.get(current, [])
    return None


def build(size: Size, table: None, *, target: Target, **_: object) -> LocalDesktop:
    """The backend's builder (desktops/__init__.py): the lab or page in a local Xvfb + Chromium."""
    return LocalDesktop(size, target)
