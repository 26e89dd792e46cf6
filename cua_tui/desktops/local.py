"""``--backend local`` (the default): a real Xvfb display, openbox and Chromium on this machine, isolated.

- Xvfb on its own display number, ``-nolisten tcp``, with an xauth cookie: only the sandboxed browser
  (which gets the cookie) and this controller (server-interpreted localuser access) can connect.
- Chromium runs as an unprivileged user with its own sandbox, nested in bubblewrap with a new network
  namespace (only ``lo``), a fresh home and profile in a private workspace, and the PID namespace dying
  with its parent. Its only way out is the egress proxy of ``egress.py``, reached through a Unix socket
  bind-mounted in and relayed inside to a loopback port; by default only the lab's origin is allowed.
  Every allowed and refused request becomes an ``egress`` audit event.
- Capture and input run in-process (``x11.py``): mss with XShm and XTEST through python-xlib.
- ``stop`` kills every process group it started (also after a browser crash) and deletes the workspace:
  no process, profile, cookie or download survives a run.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..core import events as ev
from ..core.actions import Action
from ..core.geometry import Size
from ..core.ports import DesktopError, Frame, StepResult, Verification
from .egress import AllowList, EgressProxy, EgressRecord, relay_command
from .x11 import X11Session, grant_local_user

SANDBOX_USERS = ("cua-sandbox", "nobody")
INNER_PROXY_PORT = 3128
REQUIRED = ("Xvfb", "openbox", "chromium", "bwrap", "socat", "xauth")


WORKSPACE_PREFIX = "cua-tui-desktop-"


def sweep_stale_workspaces(root: Path | None = None) -> list[Path]:
    """Delete workspaces left by controllers that died without cleaning up (their owner is gone).

    Their processes already died with their owner (parent-death signal); this removes the profile,
    cookie and downloads they left on disk."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(WORKSPACE_PREFIX + "*"):
        try:
            owner = int((folder / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        if owner != os.getpid() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def url_allow_entry(url: str) -> tuple[str, str]:
    """The URL to open and the allow-list entry for its origin. ``localhost`` becomes 127.0.0.1: the proxy
    refuses names that resolve to loopback or private addresses, but allows an explicit loopback IP."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DesktopError(f"--url must be an http(s) URL, not {url!r}", fatal=True)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise DesktopError(f"--url has an invalid port: {url!r}", fatal=True) from None
    host = parts.hostname
    if host == "localhost":
        host = "127.0.0.1"
        netloc = f"127.0.0.1:{port}" if parts.port else "127.0.0.1"
        url = parts._replace(netloc=netloc).geturl()
    entry = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return url, entry


def missing_programs() -> list[str]:
    return [name for name in REQUIRED if shutil.which(name) is None]


def chromium_flags(size: Size, profile: Path, url: str) -> list[str]:
    return [
        "--kiosk",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,"
        "OptimizationGuideModelDownloading,CertificateTransparencyComponentUpdater",
        "--disable-client-side-phishing-detection",
        "--disable-domain-reliability",
        "--no-pings",
        "--disable-breakpad",
        "--disable-dev-shm-usage",
        "--password-store=basic",
        f"--user-data-dir={profile}",
        f"--window-size={size.width},{size.height}",
        "--window-position=0,0",
        f"--proxy-server=http://127.0.0.1:{INNER_PROXY_PORT}",
        "--proxy-bypass-list=<-loopback>",
        url,
    ]


class LocalDesktop:
    """Xvfb + openbox + Chromium in bubblewrap, driven in-process. One instance per run."""

    name = "local"

    def __init__(
        self,
        size: Size,
        *,
        url: str | None = None,
        lab: Any = None,
        allow_domains: tuple[str, ...] = (),
        start_timeout: float = 30.0,
    ) -> None:
        if lab is None and not url:
            raise ValueError("the local desktop needs --lab NAME or --url URL")
        self.size = size
        self.lab = lab
        self.url = url
        self.allow_domains = tuple(allow_domains)
        self.start_timeout = start_timeout
        self._sink: Callable[[ev.Event], None] | None = None
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._workspace: Path | None = None
        self._proxy: EgressProxy | None = None
        self._x11: X11Session | None = None
        self._display: str | None = None
        self._stopped = False
        self._stop_lock = threading.Lock()
        self._user = _sandbox_user()

    # ------------------------------------------------------------------------------------------------
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
        return {name: proc.pid for name, proc in self._procs.items()}

    def bind_events(self, sink: Callable[[ev.Event], None]) -> None:
        """Where egress events go (the supervisor's audit log)."""
        self._sink = sink

    def egress(self) -> list[EgressRecord]:
        return self._proxy.records if self._proxy else []

    # ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        missing = missing_programs()
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
            raise DesktopError(f"could not start the local desktop: {exc}", fatal=True) from None

    def _start(self) -> None:
        user = self._user
        sweep_stale_workspaces()
        ws = Path(tempfile.mkdtemp(prefix=WORKSPACE_PREFIX))
        self._workspace = ws
        (ws / "owner.pid").write_text(str(os.getpid()))
        os.chmod(ws, 0o711)
        home, run = ws / "home", ws / "run"
        for folder in (home, home / "Downloads", home / "profile" / "Default", run):
            folder.mkdir(parents=True, exist_ok=True)
        (home / "profile" / "Default" / "Preferences").write_text(
            '{"download": {"default_directory": "%s", "prompt_for_download": false}, '
            '"profile": {"exit_type": "Normal"}}' % (home / "Downloads")
        )
        _chown_tree(home, user)
        os.chmod(home, 0o700)
        os.chmod(run, 0o755)

        if self.lab is not None:
            self.lab.start()
            start_url = self.lab.start_url
            allow = [self.lab.allow_entry, *self.allow_domains]
        else:
            assert self.url is not None
            start_url, entry = url_allow_entry(self.url)
            allow = [entry, *self.allow_domains]
        self._proxy = EgressProxy(run / "proxy.sock", AllowList.parse(allow), on_event=self._on_egress)
        self._proxy.start()
        os.chmod(run / "proxy.sock", 0o666)

        display_name, cookie_file = self._start_xvfb(run, user)
        env = {
            "DISPLAY": display_name,
            "XAUTHORITY": str(cookie_file),
            "HOME": str(home),
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
        }
        self._procs["openbox"] = _spawn([*_as_user(user), "openbox", "--sm-disable"], env=env, log=run / "openbox.log")
        inner = run / "browser.sh"
        inner.write_text(
            "#!/bin/sh\n"
            f"{shlex.join(relay_command(str(run / 'proxy.sock'), INNER_PROXY_PORT))} 2>/dev/null &\n"
            'exec chromium "$@"\n'
        )
        inner.chmod(0o755)
        bwrap = [
            "bwrap",
            "--unshare-net",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--die-with-parent",
            "--new-session",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--tmpfs",
            "/dev/shm",
            "--tmpfs",
            "/run",
            "--bind",
            str(home),
            str(home),
            "--ro-bind",
            str(run),
            str(run),
            "--ro-bind",
            "/tmp/.X11-unix",
            "/tmp/.X11-unix",
            "--chdir",
            str(home),
            "--",
            str(inner),
        ]
        self._procs["browser"] = _spawn(
            [*_as_user(user), *bwrap, *chromium_flags(self.size, home / "profile", start_url)],
            env=env,
            log=run / "browser.log",
        )
        self._x11 = X11Session(display_name, self.size)
        self._wait_for_page()

    def _start_xvfb(self, run: Path, user: pwd.struct_passwd) -> tuple[str, Path]:
        cookie_file = run / "xauth"
        for number in range(90, 400):
            if Path(f"/tmp/.X{number}-lock").exists() or Path(f"/tmp/.X11-unix/X{number}").exists():
                continue
            name = f":{number}"
            cookie_file.unlink(missing_ok=True)
            subprocess.run(
                ["xauth", "-q", "-f", str(cookie_file), "add", name, ".", secrets.token_hex(16)],
                check=True,
                capture_output=True,
            )
            os.chown(cookie_file, user.pw_uid, user.pw_gid)
            os.chmod(cookie_file, 0o600)
            read_end, write_end = os.pipe()
            proc = _spawn(
                [
                    *_as_user(None),
                    "Xvfb",
                    name,
                    "-screen",
                    "0",
                    f"{self.size.width}x{self.size.height}x24",
                    "-nolisten",
                    "tcp",
                    "-noreset",
                    "-auth",
                    str(cookie_file),
                    "-displayfd",
                    str(write_end),
                ],
                env={"PATH": "/usr/bin:/bin"},
                log=run / "xvfb.log",
                pass_fds=(write_end,),
            )
            os.close(write_end)
            ready = _read_line(read_end, timeout=10)
            os.close(read_end)
            if ready.strip() == str(number):
                self._procs["xvfb"] = proc
                self._display = name
                # Root can read the cookie file to connect once and grant itself local-user access.
                grant_local_user(name, str(cookie_file), pwd.getpwuid(os.getuid()).pw_name)
                return name, cookie_file
            _kill_group(proc)
        raise DesktopError("no free X display number between :90 and :399", fatal=True)

    def _wait_for_page(self) -> None:
        """Wait until the browser shows something other than a blank screen."""
        assert self._x11 is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._procs["browser"].poll() is not None:
                raise DesktopError(
                    f"the browser exited at start (status {self._procs['browser'].returncode})", fatal=True
                )
            shot = self._x11.grab_raw()
            if len(set(shot.raw[:: 4 * 997])) > 2:  # more than a blank background
                time.sleep(0.3)  # let the first paint finish
                return
            time.sleep(0.1)
        raise DesktopError(f"the browser showed nothing within {self.start_timeout:g} s", fatal=True)

    def _on_egress(self, record: EgressRecord) -> None:
        if self._sink is not None:
            self._sink(ev.Egress(record.host, record.port, record.method, record.allowed, record.reason))

    # ------------------------------------------------------------------------------------------------
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
        return self._session().perform(action)

    def capture_region(self, region: tuple[int, int, int, int]) -> Frame:
        session = self._session()
        return session.encode(session.grab_raw(region))

    def release_all(self) -> None:
        if self._x11 is not None:
            self._x11.release_all()

    def verify(self) -> Verification | None:
        if self.lab is None:
            return None
        return self.lab.verify(self.downloads, self.egress())

    def stop(self) -> None:
        """Stop everything and delete the workspace. Idempotent; safe from any thread."""
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        if self._x11 is not None:
            self._x11.stop()
        for name in ("browser", "openbox", "xvfb"):
            proc = self._procs.get(name)
            if proc is not None:
                _kill_group(proc)
        if self._proxy is not None:
            self._proxy.stop()
        if self.lab is not None:
            with contextlib.suppress(Exception):
                self.lab.stop()
        if self._display:
            number = self._display.lstrip(":")
            for leftover in (Path(f"/tmp/.X{number}-lock"), Path(f"/tmp/.X11-unix/X{number}")):
                leftover.unlink(missing_ok=True)
        if self._workspace is not None:
            shutil.rmtree(self._workspace, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
def _sandbox_user() -> pwd.struct_passwd:
    if os.getuid() != 0:
        return pwd.getpwuid(os.getuid())
    for name in SANDBOX_USERS:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise DesktopError("no unprivileged user to run the browser (create 'cua-sandbox')", fatal=True)


def _as_user(user: pwd.struct_passwd | None) -> list[str]:
    """setpriv prefix: die with this process (SIGKILL when it exits, even if it is killed itself, so no
    desktop process outlives a crashed controller) and, as root, drop to the unprivileged ``user``."""
    argv = ["setpriv", "--pdeathsig", "KILL"]
    if user is not None and os.getuid() == 0:
        argv += [f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--inh-caps=-all"]
    return [*argv, "--"]


def _chown_tree(path: Path, user: pwd.struct_passwd) -> None:
    if os.getuid() != 0:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, user.pw_uid, user.pw_gid)
        for name in dirs + files:
            os.chown(os.path.join(root, name), user.pw_uid, user.pw_gid)


def _spawn(
    argv: list[str], *, env: dict[str, str], log: Path, pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, pass_fds=pass_fds
        )


def _kill_group(proc: subprocess.Popen[bytes], grace: float = 2.0) -> None:
    """SIGTERM the process group, then SIGKILL what is left after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(wait)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers in the group
            return
        except subprocess.TimeoutExpired:
            continue


def _read_line(fd: int, timeout: float) -> str:
    import select

    data = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in data and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 64)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace")
