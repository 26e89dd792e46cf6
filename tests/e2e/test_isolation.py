"""End to end: what a run's sandbox holds and what it cannot reach (real Xvfb + openbox + Chromium in bubblewrap).

The attacker here is code running as the sandbox's user inside the browser's namespaces: the tests enter
them with ``nsenter --all`` and the run's uid (no capabilities, no supplementary groups), as a compromised
browser would be. Each refusal is paired with a control showing the same step works where it should, so
a test cannot pass because its probe was broken.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from cua_tui.core.actions import parse_openai
from cua_tui.core.geometry import Scaling, Size
from cua_tui.desktops import isolation, quiet
from cua_tui.desktops.local import FIRST_PAINT_QUIET, FLAT_PAGE_WAIT, Confinement, FirstPaint, LocalDesktop
from cua_tui.desktops.target import Target
from cua_tui.labs import get_lab

SIZE = Size(1024, 720)
SCALING = Scaling.identity(SIZE)
NAMESPACE_KINDS = ("user", "mnt", "pid", "net", "ipc", "uts")


# ------------------------------------------------------------------------------------------------- helpers
@contextlib.contextmanager
def running(desktop: LocalDesktop) -> Iterator[LocalDesktop]:
    desktop.start()
    try:
        yield desktop
    finally:
        desktop.stop()


def sandbox_init(desktop: LocalDesktop) -> int:
    """Host pid of the sandbox's first process (pid 1 inside): the child of the outer bwrap."""
    bwrap = desktop.processes()["browser"]
    children = Path(f"/proc/{bwrap}/task/{bwrap}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def sandbox_env(desktop: LocalDesktop) -> dict[str, str]:
    assert desktop.workspace is not None and desktop.display is not None
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(desktop.workspace / "home"),
        "DISPLAY": desktop.display,
        "XAUTHORITY": str(desktop.workspace / "run" / "xauth"),
        "LANG": "C.UTF-8",
    }


def inside(desktop: LocalDesktop, script: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """Run ``script`` as the sandbox user, in every namespace of the sandbox (its root and cwd too)."""
    uid = desktop.isolation["uid"]
    target = sandbox_init(desktop)
    argv = ["nsenter", f"--target={target}", "--all", "--root", "--wd", f"--setuid={uid}", f"--setgid={uid}"]
    guard = f'[ "$(id -u)" = {uid} ] && [ "$(id -g)" = {uid} ] && grep -q "^CapEff:.0*$" /proc/self/status || exit 99\n'
    proc = subprocess.run(
        [*argv, "/bin/sh", "-c", guard + script],
        env=sandbox_env(desktop),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode != 99, f"not the sandbox user inside: {proc.stderr}"
    return proc


def as_uid_on_host(uid: int, script: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The same user, without the sandbox: what it could do if it ran outside."""
    argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--"]
    return subprocess.run(
        [*argv, "/bin/sh", "-c", script],
        env=env or {"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=20,
        cwd="/",
    )


def namespaces(pid: int) -> dict[str, str]:
    return {kind: os.readlink(f"/proc/{pid}/ns/{kind}") for kind in NAMESPACE_KINDS}


def chromium_main(desktop: LocalDesktop) -> int:
    """The browser process in the sandbox's own namespaces (its renderers nest further)."""
    init = sandbox_init(desktop)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if stat.split("(", 1)[1].startswith("chromium)") and int(stat.rsplit(")", 1)[1].split()[1]) == init:
                    return int(entry)
    raise AssertionError("no chromium process under the sandbox's init")


class TcpProbe:
    """A TCP server on the host's loopback that counts who reaches it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        assert self.port != 3128  # the relay's port inside the sandbox
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def wait_for(predicate: Callable[[], object], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


# ------------------------------------------------------------------------------ point 1: the attack
def _hostile_rc(command: str, menu: str) -> str:
    action = f'<action name="Execute"><command>{command}</command></action>'
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<openbox_config xmlns="http://openbox.org/3.4/rc">
  <keyboard><keybind key="W-F12">{action}</keybind></keyboard>
  <mouse>
    <context name="Client"><mousebind button="Left" action="Press">{action}</mousebind></context>
    <context name="Root"><mousebind button="Left" action="Press">{action}</mousebind></context>
  </mouse>
  <menu><file>{menu}</file></menu>
</openbox_config>
"""


def _hostile_menu(command: str) -> str:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<openbox_menu xmlns="http://openbox.org/3.4/menu">
  <menu id="root-menu" label="x">
    <item label="x"><action name="Execute"><command>{command}</command></action></item>
  </menu>
</openbox_menu>
"""


@pytest.mark.e2e
def test_a_hijacked_window_manager_config_runs_nothing_and_nothing_reaches_the_host(tmp_path: Path) -> None:
    """The attack of issue 8: as the sandbox user, write openbox's configuration wherever it could be read,
    reconfigure and restart openbox, press the bound key and click. Nothing runs, the host's loopback is
    not reached, no file appears outside; and openbox lives in the sandbox's namespaces."""
    probe = TcpProbe()
    outside = Path(tempfile.mkdtemp(prefix="cua-outside-", dir="/tmp"))
    os.chmod(outside, 0o777)  # writable by the sandbox uid, were it ever able to see it
    try:
        with running(LocalDesktop(SIZE, Target(get_lab("form")))) as desktop:
            assert desktop.workspace is not None
            home = desktop.workspace / "home"
            config = desktop.workspace / "run" / "openbox"
            uid = desktop.isolation["uid"]
            assert desktop.isolation["uid_per_run"] is True and uid >= isolation.UID_BASE

            def commands(tag: str) -> str:
                return f"touch {home}/{tag}; touch {outside}/{tag}; socat -u OPEN:/dev/null TCP:127.0.0.1:{probe.port}"

            def payload(tag: str) -> str:
                return f"sh -c '{commands(tag)}'"

            # Control: the payload works for this uid where nothing isolates it.
            assert as_uid_on_host(uid, commands("control-host")).returncode == 0
            assert (outside / "control-host").exists() and wait_for(lambda: probe.connections == 1, 5)
            (outside / "control-host").unlink()
            probe.connections = 0

            # openbox shares the browser's namespaces, none of the host's
            box = desktop.processes()["openbox"]
            assert namespaces(box) == namespaces(chromium_main(desktop))
            assert all(namespaces(box)[k] != namespaces(os.getpid())[k] for k in NAMESPACE_KINDS)
            assert Path(f"/proc/{box}/status").read_text().count(f"\t{uid}\t") >= 1

            # The attack: every place openbox could read configuration from.
            attack = payload("attack")
            places = {
                f"{home}/.config/openbox/rc.xml": _hostile_rc(attack, f"{home}/.config/openbox/menu.xml"),
                f"{home}/.config/openbox/menu.xml": _hostile_menu(attack),
                f"{home}/.config/openbox/autostart": f"{attack}\n",
                f"{home}/.config/openbox/environment": f"X=$({attack})\n",
                f"{config}/openbox/rc.xml": _hostile_rc(attack, f"{config}/openbox/menu.xml"),
                f"{config}/openbox/menu.xml": _hostile_menu(attack),
                f"{config}/rc.xml": _hostile_rc(attack, f"{home}/.config/openbox/menu.xml"),
                "/etc/xdg/openbox/rc.xml": _hostile_rc(attack, f"{home}/.config/openbox/menu.xml"),
                "/etc/xdg/openbox/menu.xml": _hostile_menu(attack),
            }
            script = "".join(
                f"mkdir -p {shlex.quote(os.path.dirname(path))} 2>/dev/null; "
                f"if printf %s {shlex.quote(text)} > {shlex.quote(path)} 2>/dev/null; "
                f"then echo WROTE {path}; else echo DENIED {path}; fi\n"
                for path, text in places.items()
            )
            written = inside(desktop, script).stdout.split("\n")
            assert f"WROTE {home}/.config/openbox/rc.xml" in written  # the home is the user's own
            protected = [p for p in places if not p.startswith(str(home))]
            assert [f"DENIED {p}" for p in protected] == [w for w in written if w.split(" ")[-1] in protected]

            key = parse_openai({"type": "keypress", "keys": ["super", "F12"]}, SCALING)
            click = parse_openai({"type": "click", "button": "left", "x": 700, "y": 600}, SCALING)
            for message in ("--reconfigure", "--restart"):
                done = inside(desktop, f"openbox {message}")
                assert done.returncode == 0, done.stderr
                time.sleep(0.5)
                desktop.perform(key)
                desktop.perform(click)  # the agent's next ordinary click
                time.sleep(1.0)
                assert desktop.processes()["openbox"] == box and Path(f"/proc/{box}").exists()
                assert f"{config}/openbox/rc.xml" in Path(f"/proc/{box}/cmdline").read_text().replace("\0", " ")
                assert probe.connections == 0
                assert not (outside / "attack").exists()
                assert not (home / "attack").exists(), "openbox read a configuration the sandbox user wrote"

            # Control: a binding openbox really loads (written by root to its read-only file) does fire on
            # the same key after --reconfigure, and even then its command runs inside: the home gets the
            # marker, the host's loopback and the outside folder do not.
            rc = config / "openbox" / "rc.xml"
            rc.write_text(_hostile_rc(payload("control"), f"{config}/openbox/menu.xml"))
            assert inside(desktop, "openbox --reconfigure").returncode == 0
            time.sleep(0.5)
            desktop.perform(key)
            assert wait_for(lambda: (home / "control").exists(), 10), "the key never reached openbox"
            time.sleep(0.5)
            assert probe.connections == 0
            assert not (outside / "control").exists()
    finally:
        probe.close()
        shutil.rmtree(outside, ignore_errors=True)


@pytest.mark.e2e
def test_everything_started_for_the_desktop_runs_inside_one_sandbox(form_desktop: LocalDesktop) -> None:
    """The X server, the relay, openbox and Chromium share the sandbox's namespaces and uid; on the host
    there is only bwrap's outer process (which holds the sandbox, as the sandbox's uid)."""
    desktop = form_desktop
    uid = desktop.isolation["uid"]
    init = sandbox_init(desktop)
    own = namespaces(init)
    family = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError):
                pid = int(entry)
                cur = pid
                while cur > 1:
                    cur = int(Path(f"/proc/{cur}/stat").read_text().rsplit(")", 1)[1].split()[1])
                    if cur == init:
                        family.append(pid)
                        break
    names = {Path(f"/proc/{pid}/comm").read_text().strip() for pid in family}
    assert {"Xvfb", "socat", "openbox", "chromium"} <= names, names
    pids = desktop.processes()
    assert set(pids) == {"browser", "xvfb", "openbox"}
    assert pids["xvfb"] in family and pids["openbox"] in family
    outer = Path(f"/proc/{pids['browser']}/status").read_text()
    assert next(line for line in outer.splitlines() if line.startswith("Uid:")).split()[1:] == [str(uid)] * 4
    for pid in family:
        status = Path(f"/proc/{pid}/status").read_text()
        uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
        assert set(uids) == {str(uid)}, (pid, uids)
        ns = namespaces(pid)
        assert ns["pid"] == own["pid"] or Path(f"/proc/{pid}/comm").read_text().startswith("chromium")
        assert ns["net"] == own["net"] or Path(f"/proc/{pid}/comm").read_text().startswith("chromium")
    # the X socket is this run's only
    listing = inside(desktop, "ls -A /tmp/.X11-unix").stdout.split()
    assert desktop.display is not None
    assert listing == [f"X{desktop.display.lstrip(':')}"]


# ------------------------------------------------------------------------ point 1: the host file system
@pytest.mark.e2e
def test_a_world_readable_host_file_is_not_visible_inside(form_desktop: LocalDesktop) -> None:
    """Planted after the desktop started: a host folder bound into the sandbox would show them (binds are
    live), so none of them may be seen inside."""
    token = secrets.token_hex(6)
    places = ["/srv", "/opt", "/var/tmp", "/var/lib", "/etc", "/usr/local", "/root", "/home", "/mnt", "/tmp", "/"]
    # the host's browser policies too (a ProxySettings there would outrank --proxy-server)
    places += ["/etc/chromium", "/etc/chromium/policies", "/etc/chromium/policies/managed"]
    planted: list[Path] = []
    made: list[Path] = []
    try:
        for place in places:
            folder = Path(place)
            if not folder.exists():
                folder.mkdir(mode=0o755)
                made.append(folder)
            target = folder / f"cua-planted-{token}"
            target.write_text("secret of the host\n")
            target.chmod(0o644)
            planted.append(target)
        desktop = form_desktop
        uid = desktop.isolation["uid"]
        # Control: the same uid reads them on the host (all but the one under the private /root).
        readable = [p for p in planted if not str(p).startswith("/root/")]
        seen = as_uid_on_host(uid, " && ".join(f"cat {p}" for p in readable))
        assert seen.returncode == 0 and seen.stdout.count("secret of the host") == len(readable), seen.stderr
        # Inside: none of them exists.
        probe = inside(desktop, "".join(f"[ -e {p} ] && echo VISIBLE {p}; cat {p} 2>/dev/null\n" for p in planted))
        assert "VISIBLE" not in probe.stdout and "secret" not in probe.stdout, probe.stdout
        # And only what the desktop needs is there at all.
        top = set(inside(desktop, "ls -A /").stdout.split())
        assert top <= {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "var", "dev", "proc", "tmp"}
        assert inside(desktop, "ls -A /var").stdout.split() == ["cache"]
        assert inside(desktop, "ls -A /usr/local").stdout.split() == []
        etc = set(inside(desktop, "ls -A /etc").stdout.split())
        allowed = {Path(p).name for p in isolation.ETC_ENTRIES} | {
            "ssl",
            "passwd",
            "group",
            "nsswitch.conf",
            "hosts",
        }
        assert etc <= allowed, etc - allowed
        for secret in ("shadow", "machine-id", "hostname", "resolv.conf", "subuid"):
            assert secret not in etc
        # the browser's policies are the run's quiet ones alone (desktops/quiet.py)
        policies = inside(desktop, f"ls -A /etc/chromium/policies/managed && cat {quiet.POLICY_PATH}").stdout
        assert policies == f"{quiet.POLICY_NAME}\n{quiet.policy_json()}"
        # the root of the sandbox is read-only: nothing can be planted inside for later either
        assert inside(desktop, "touch /planted || touch /etc/planted || exit 0; exit 1").returncode == 0
    finally:
        for target in planted:
            target.unlink(missing_ok=True)
        for folder in reversed(made):
            folder.rmdir()


# -------------------------------------------------------------------------- point 1: a uid per run
@pytest.mark.e2e
def test_two_desktops_get_their_own_uids_and_cannot_read_each_other(form_desktop: LocalDesktop) -> None:
    one = form_desktop
    with running(LocalDesktop(SIZE, Target(get_lab("form")))) as two:
        assert one.workspace is not None and two.workspace is not None
        assert one.display is not None and two.display is not None
        uid_one, uid_two = one.isolation["uid"], two.isolation["uid"]
        assert uid_one != uid_two and one.isolation["uid_per_run"] and two.isolation["uid_per_run"]
        for desktop, uid in ((one, uid_one), (two, uid_two)):
            ws = desktop.workspace
            assert ws is not None
            for path, mode in ((ws / "home", 0o700), (ws / "run" / "xauth", 0o600), (ws / "run" / "proxy.sock", 0o600)):
                info = path.stat()
                assert (info.st_uid, info.st_mode & 0o777) == (uid, mode), path
        secrets_of_two = [
            two.workspace / "run" / "xauth",
            two.workspace / "home" / "profile" / "Default" / "Preferences",
            two.workspace / "home" / "Downloads",
        ]
        # Inside one: the other run's workspace does not exist, nor its X socket.
        probe = inside(one, "".join(f"[ -e {p} ] && echo VISIBLE {p}\n" for p in secrets_of_two))
        assert "VISIBLE" not in probe.stdout
        other_x = f"/tmp/.X11-unix/X{two.display.lstrip(':')}"
        assert inside(one, f"[ -e {other_x} ] || exit 7").returncode == 7
        # Even on the host, one's uid cannot read two's cookie or profile, nor connect to two's display.
        for path in secrets_of_two:
            denied = as_uid_on_host(uid_one, f"ls {path}" if path.name == "Downloads" else f"cat {path}")
            assert denied.returncode != 0 and "Permission denied" in denied.stderr, (path, denied)
        env = {"PATH": "/usr/bin:/bin", "DISPLAY": two.display, "XAUTHORITY": str(one.workspace / "run" / "xauth")}
        assert as_uid_on_host(uid_one, "xdpyinfo >/dev/null", env).returncode != 0
        env["DISPLAY"] = one.display
        assert as_uid_on_host(uid_one, "xdpyinfo >/dev/null", env).returncode == 0  # control: its own works


def _lease_in_child(lock_dir: str, hold: Any, out: multiprocessing.Queue[int]) -> None:
    lease = isolation.lease_uid(Path(lock_dir))
    out.put(lease.uid)
    hold.wait(30)  # every child holds its lease until all have one: they overlap, however late each started
    lease.release()


def test_uid_leases_are_exclusive_across_processes_and_freed_at_release(tmp_path: Path) -> None:
    lock_dir = tmp_path / "locks"
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    hold = ctx.Event()
    children = [ctx.Process(target=_lease_in_child, args=(str(lock_dir), hold, out)) for _ in range(6)]
    for child in children:
        child.start()
    uids = [out.get(timeout=30) for _ in children]
    hold.set()
    for child in children:
        child.join(30)
    assert len(set(uids)) == len(uids)
    assert all(isolation.UID_BASE <= uid < isolation.UID_BASE + isolation.UID_SLOTS for uid in uids)
    first = isolation.lease_uid(lock_dir)
    second = isolation.lease_uid(lock_dir)
    assert first.uid != second.uid
    first.release()
    again = isolation.lease_uid(lock_dir)
    assert again.uid == first.uid  # released, so free again
    again.release()
    second.release()


def test_a_uid_still_running_a_process_is_never_leased(tmp_path: Path) -> None:
    uid = isolation.UID_BASE
    squatter = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "30"])
    try:
        assert wait_for(lambda: Path(f"/proc/{squatter.pid}").stat().st_uid == uid, 5)
        lease = isolation.lease_uid(tmp_path / "locks")
        assert lease.uid != uid
        lease.release()
    finally:
        squatter.kill()
        squatter.wait()


def test_without_root_the_sandbox_runs_as_the_callers_uid_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "getuid", lambda: 4242)  # the os module isolation reads
    lease = isolation.lease_uid(tmp_path / "locks")
    assert (lease.uid, lease.per_run) == (4242, False)
    assert not (tmp_path / "locks").exists()  # nothing to lock: no range to take from
    desktop = LocalDesktop(SIZE, Target(url="http://127.0.0.1:9/"))
    desktop._lease = lease
    info = desktop.isolation
    assert info["uid"] == 4242 and info["uid_per_run"] is False and "not root" in info["note"]


@pytest.mark.e2e
@pytest.mark.alone
def test_a_killed_controllers_display_claim_is_swept() -> None:
    """SIGKILL leaves the display's lock file and host link behind; the next start's sweep frees them."""
    import signal
    import sys

    from cua_tui.desktops.local import sweep_stale_workspaces

    code = (
        "import time\n"
        "from cua_tui.core.geometry import Size\n"
        "from cua_tui.desktops.local import LocalDesktop\n"
        "from cua_tui.desktops.target import Target\n"
        "from cua_tui.labs import get_lab\n"
        "d = LocalDesktop(Size(1024, 720), Target(get_lab('form')))\n"
        "d.start()\n"
        "print(d.display, d.workspace, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    display, workspace = proc.stdout.readline().split()
    number = display.lstrip(":")
    link, lock = Path(f"/tmp/.X11-unix/X{number}"), Path(f"/tmp/.X{number}-lock")
    assert link.is_symlink() and lock.exists()
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert link.is_symlink() and lock.exists()  # nobody cleaned up
    assert Path(workspace) in sweep_stale_workspaces()
    assert not link.is_symlink() and not lock.exists()


# ----------------------------------------------------------------------------- point 8: first paint
SPARSE_PAGE = b"""<!doctype html><html><head><title>sparse</title></head>
<body style="margin:0;background:#ffffff">
<p style="position:absolute;left:620px;top:430px;margin:0;font:11px sans-serif;color:#777">just a few words</p>
</body></html>"""


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(SPARSE_PAGE)))
        self.end_headers()
        self.wfile.write(SPARSE_PAGE)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.e2e
def test_a_mostly_white_page_with_a_few_words_starts() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        desktop = LocalDesktop(
            SIZE, Target(url=f"http://127.0.0.1:{server.server_address[1]}/"), Confinement(start_timeout=20)
        )
        started = time.monotonic()
        with running(desktop):
            took = time.monotonic() - started
            assert desktop._x11 is not None
            shot = desktop._x11.grab_raw()
            image = Image.frombuffer("RGB", shot.size, shot.raw, "raw", "BGRX", 0, 1)
            # the words are on screen, and they are all there is on a white page
            colours = image.getcolors(2)  # None: more than two
            assert colours is None or len(colours) > 1
            box = Image.eval(image.convert("L"), lambda v: 255 - v).getbbox()
            assert box is not None and (box[2] - box[0]) * (box[3] - box[1]) < 0.01 * SIZE.width * SIZE.height
            # the sampling the old check relied on sees at most two values here: it would never have started
            assert len(set(shot.raw[:: 4 * 997])) <= 2
            assert took < 15
    finally:
        server.shutdown()
        server.server_close()


def test_first_paint_looks_at_every_pixel() -> None:
    """No X needed: frames as Pillow makes them."""
    size = (64, 48)

    def frame(colour: tuple[int, int, int], dots: tuple[tuple[int, int, int], ...] = ()) -> bytes:
        image = Image.new("RGB", size, colour)
        for x, shade in enumerate(dots):  # a few pixels in one corner, in shades, as antialiased text is
            image.putpixel((50 + x, 40), shade)
        return image.tobytes("raw", "BGRX")

    root = frame((0, 0, 0))
    window = frame((246, 245, 244))  # Chromium's empty window, before the page
    half = Image.new("RGB", size, (0, 0, 0))
    half.paste((246, 245, 244), (0, 0, 64, 20))  # the same window, half drawn over the root
    words = frame((255, 255, 255), ((40, 40, 40), (120, 120, 120)))
    watch = FirstPaint()  # the root window is black (Xvfb -br)
    assert not watch.ready(root, size, 0.0)
    assert not watch.ready(half.tobytes("raw", "BGRX"), size, 0.5)
    assert not watch.ready(window, size, 1.0)
    assert not watch.ready(window, size, 1.0 + FLAT_PAGE_WAIT, fetched=False)  # still only the empty window
    later = 2.0 + FLAT_PAGE_WAIT
    assert not watch.ready(words, size, later)  # content: it gets its quiet period
    assert watch.ready(words, size, later + FIRST_PAINT_QUIET)
    # a page of one flat colour counts once it was fetched and held still long enough
    flat = FirstPaint()
    white = frame((255, 255, 255))
    assert not flat.ready(white, size, 0.0)
    assert not flat.ready(white, size, FLAT_PAGE_WAIT / 2)
    assert not flat.ready(white, size, FLAT_PAGE_WAIT + 0.01, fetched=False)
    assert flat.ready(white, size, FLAT_PAGE_WAIT + 0.01, fetched=True)
    # a lab's page has text: a flat frame (Chromium's empty window on a loaded machine) never counts
    lab_page = FirstPaint(flat_page=False)
    assert not lab_page.ready(window, size, 0.0) and not lab_page.ready(window, size, 100.0, fetched=True)
    assert not lab_page.ready(words, size, 100.0) and lab_page.ready(words, size, 100.0 + FIRST_PAINT_QUIET + 0.01)
    # the root window itself never counts (nor another root colour given as the background)
    empty = FirstPaint()
    assert not empty.ready(root, size, 0.0) and not empty.ready(root, size, 100.0)
    grey = frame((90, 90, 90))
    assert not FirstPaint((90, 90, 90)).ready(grey, size, 100.0)
    # every pixel is looked at: one shaded pixel anywhere is enough to make a frame content
    for x in (0, 31, 63):
        for y in (0, 23, 47):
            image = Image.new("RGB", size, (255, 255, 255))
            image.putpixel((x, y), (10, 10, 10))
            image.putpixel(((x + 1) % 64, y), (90, 90, 90))
            dots = FirstPaint()
            assert not dots.ready(image.tobytes("raw", "BGRX"), size, 0.0)
            assert dots.ready(image.tobytes("raw", "BGRX"), size, FIRST_PAINT_QUIET)
