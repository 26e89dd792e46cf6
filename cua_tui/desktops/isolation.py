"""What the local desktop's sandbox is made of: a uid per run (leased with an ``flock``), the host files it
may see, and the window manager's read-only configuration. docs/backends/local.md, "The sandbox".
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..core.ports import DesktopError

UID_BASE = 2_100_000_000
UID_SLOTS = 4096
LOCK_DIR = Path("/run/cua-tui-uids")
SANDBOX_NAME = "cua-sandbox"

# Host paths the desktop needs, bound read-only when they exist. Everything else of /etc is absent.
ETC_ENTRIES = (
    "/etc/fonts",  # fontconfig
    # the loader finds libraries in /usr/lib/<triplet> through it
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    # Debian's launcher script sources chromium.d and reads master_preferences; the policies in
    # /etc/chromium are the sandbox's own (``chromium_etc_args``)
    "/etc/chromium",
    "/etc/chromium.d",
)
CHROMIUM_ETC = "/etc/chromium"
# without it fontconfig rescans every font at each start
OTHER_ENTRIES = ("/var/cache/fontconfig",)
# merged-/usr links, or directories
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
NAMESPACES = ("user", "mount", "pid", "net", "ipc", "uts", "cgroup")


@dataclass
class UidLease:
    """The uid (and gid) a run's sandbox uses; ``per_run`` says whether it is this run's own."""

    uid: int
    per_run: bool
    _fd: int | None = field(default=None, repr=False)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the file releases the flock


def lease_uid(lock_dir: Path = LOCK_DIR) -> UidLease:
    """A uid from the reserved range that no other controller holds and no process runs as."""
    if os.getuid() != 0:
        return UidLease(os.getuid(), per_run=False)
    lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(lock_dir)
    if info.st_uid != 0 or info.st_mode & 0o022 or not os.path.isdir(lock_dir) or os.path.islink(lock_dir):
        raise DesktopError(f"{lock_dir} must be a directory owned by root and writable only by it", fatal=True)
    busy = _uids_running()
    for n in range(UID_SLOTS):
        uid = UID_BASE + n
        if uid in busy:
            continue
        fd = os.open(lock_dir / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return UidLease(uid, per_run=True, _fd=fd)
    raise DesktopError(f"all {UID_SLOTS} sandbox uids from {UID_BASE} are in use", fatal=True)


def _uids_running() -> set[int]:
    """Owners of the live processes: a uid still running something (whatever left it) is not reused."""
    owners = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                owners.add(entry.stat(follow_symlinks=False).st_uid)
    return owners


def filesystem_args(chromium_policies: str | None = None) -> list[str]:
    """bwrap arguments for the host files the desktop needs, read-only; nothing else of the host. The
    browser's managed policies are ``chromium_policies`` (a folder), not the host's."""
    args = ["--ro-bind", "/usr", "/usr"]
    if os.path.isdir("/usr/local"):
        # what was installed by hand on this host: not the desktop's business
        args += ["--perms", "0555", "--tmpfs", "/usr/local", "--remount-ro", "/usr/local"]
    for top in TOP_LINKS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in (*ETC_ENTRIES, *OTHER_ENTRIES):
        if path == CHROMIUM_ETC:
            args += chromium_etc_args(chromium_policies)
        elif os.path.lexists(path):
            args += ["--ro-bind", path, path]
    return args


def chromium_etc_args(policies: str | None) -> list[str]:
    """/etc/chromium's entries but its policies, read-only, and ``policies`` bound in their place: the
    host's policies never reach the sandbox (a ProxySettings there would outrank --proxy-server), the run's
    quiet ones do (quiet.py)."""
    try:
        names = sorted(os.listdir(CHROMIUM_ETC))
    except OSError:
        names = []
    args = [
        arg
        for name in names
        if name != "policies"
        for arg in ("--ro-bind", f"{CHROMIUM_ETC}/{name}", f"{CHROMIUM_ETC}/{name}")
    ]
    if policies is not None:
        args += ["--ro-bind", policies, f"{CHROMIUM_ETC}/policies"]
    return args


def etc_files(uid: int, home: str) -> dict[str, str]:
    """Synthesized /etc files: the sandbox's own user (Chromium and glib look it up) and local-only lookups."""
    return {
        "passwd": (
            "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
            f"{SANDBOX_NAME}:x:{uid}:{uid}:cua-tui sandbox:{home}:/usr/sbin/nologin\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ),
        "group": f"root:x:0:\n{SANDBOX_NAME}:x:{uid}:\nnogroup:x:65534:\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n",
        "hosts": "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n",
    }


def openbox_files(config_dir: str) -> dict[str, str]:
    """openbox's whole configuration: focus and raise on click, no key bindings, no Execute, an empty menu."""
    mouse = "\n".join(
        f'      <mousebind button="{button}" action="Press"><action name="Focus"/><action name="Raise"/></mousebind>'
        for button in ("Left", "Middle", "Right")
    )
    rc = f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- cua-tui: the sandbox's window manager. Read-only; nothing here runs a program. -->
<openbox_config xmlns="http://openbox.org/3.4/rc">
  <resistance><strength>0</strength><screen_edge_strength>0</screen_edge_strength></resistance>
  <focus><focusNew>yes</focusNew><followMouse>no</followMouse></focus>
  <placement><policy>Smart</policy></placement>
  <theme><name>Clearlooks</name></theme>
  <desktops><number>1</number></desktops>
  <keyboard></keyboard>
  <mouse>
    <context name="Client">
{mouse}
    </context>
  </mouse>
  <menu><file>{config_dir}/openbox/menu.xml</file></menu>
  <applications></applications>
</openbox_config>
"""
    menu = """<?xml version="1.0" encoding="UTF-8"?>
<openbox_menu xmlns="http://openbox.org/3.4/menu">
  <menu id="root-menu" label="cua-tui"></menu>
</openbox_menu>
"""
    # in the usual layout (XDG_CONFIG_HOME/openbox/), so openbox finds its own folder and never
    # makes one
    return {"openbox/rc.xml": rc, "openbox/menu.xml": menu}


def openbox_env(config_dir: str) -> dict[str, str]:
    """Every place openbox looks for configuration, themes or menus, pointed at its read-only folder."""
    return {
        "HOME": config_dir,
        "XDG_CONFIG_HOME": config_dir,
        "XDG_CONFIG_DIRS": config_dir,
        "XDG_DATA_HOME": config_dir,
        "XDG_DATA_DIRS": "/usr/share",
        "XDG_CACHE_HOME": config_dir,
    }
