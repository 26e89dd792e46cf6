"""``--backend docker``: the desktop in a hardened container on this machine, one request per step.

The container is created, inspected (``hardening``) and only then started; it has no network, and the
helper zipapp runs the local desktop inside it. Design: docs/backends/docker.md; why the Docker CLI rather
than the SDK: ``docker_engine.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import msgspec

from ..core import events as ev
from ..core.errors import Unavailable
from ..core.geometry import Size
from ..core.ports import DesktopError, Verification
from ..core.text import failure, truncate
from . import Leftovers
from .docker_engine import (
    LABEL,
    RUN_LABEL,
    Channel,
    Engine,
    EngineError,
    EngineSecurity,
    first_line,
    kill,
    run_bounded,
)
from .egress import EgressProxy
from .remote.desktop import HelperDesktop
from .remote.replies import REPLY_CAP
from .remote.wire import Blobs
from .remote.zipapp import helper_sha256, helper_zipapp
from .target import Target

DEFAULT_IMAGE = "cua-tui-desktop:latest"  # scripts/setup.sh docker builds and tags it
UID = GID = 1000  # the image's ``agent``
HOME = "/home/agent"
HELPER_PATH = "/opt/cua-tui/helper.pyz"
SOCKET_DIR = "/run/cua-tui"
SOCKET_PATH = f"{SOCKET_DIR}/helper.sock"
# the proxy's socket alone: its folder is the read-only root
EGRESS_SOCKET = "/run/cua-tui-egress/proxy.sock"
TMPFS = ("/tmp", HOME, SOCKET_DIR)  # the only writable places (memory, size-capped)
APPARMOR_DEFAULT = "docker-default"
# the isolation record's namespace modes (as ``hardening`` writes them) and the values that are its
# own
NAMESPACES = (
    ("pid_mode", "PID", ("private",)),
    ("ipc_mode", "IPC", ("private",)),
    ("uts_mode", "UTS", ("private",)),
    ("userns_mode", "user", ("engine default (not remapped)", "private (remapped)")),
    ("cgroupns_mode", "cgroup", ("private",)),
)
# no-new-privileges as it may be spelled; every other security option is the container's own profile
NO_NEW_PRIVILEGES = ("no-new-privileges", "no-new-privileges:true", "no-new-privileges=true")
# seconds a request waits for the helper's socket (the first one: the helper starting)
CONNECT_WAIT = "20"
WORKSPACE_PREFIX = "cua-tui-docker-"
DOWNLOAD_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")


@dataclass(frozen=True)
class DockerSettings:
    """The container's image and limits (the guide's), and how requests travel."""

    image: str = DEFAULT_IMAGE
    docker: str = "docker"
    memory: str = "2g"
    cpus: str = "2"
    pids_limit: int = 256
    shm_size: str = "512m"
    # the browser's profile, the X socket and the downloads
    tmp_size: str = "512m"
    start_timeout: float = 60.0  # until the desktop inside shows its page
    step_timeout: float = 30.0  # one request
    # "stream": one attached exec for the run; "exec": one docker exec a request
    transport: str = "stream"

    def public(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "docker"}


def container_argv(
    settings: DockerSettings, run_id: str, helper: Path, egress_socket: Path, spec: dict[str, Any]
) -> list[str]:
    """``docker create``: the hardened container of one run (see the module's notes)."""
    tmpfs = "rw,nosuid,nodev"
    return [
        settings.docker,
        "create",
        "--name",
        f"cua-tui-{run_id}",
        "--label",
        LABEL,
        "--label",
        f"{RUN_LABEL}={run_id}",
        "--rm",
        "--init",
        "--user",
        f"{UID}:{GID}",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--read-only",
        "--tmpfs",
        f"{TMPFS[0]}:{tmpfs},exec,size={settings.tmp_size},mode=1777",
        "--tmpfs",
        f"{TMPFS[1]}:{tmpfs},noexec,size=64m,uid={UID},gid={GID},mode=0700",
        "--tmpfs",
        f"{TMPFS[2]}:{tmpfs},noexec,size=1m,uid={UID},gid={GID},mode=0700",
        # Asked for by name: an engine's default may be "host" (cgroupns on cgroup v1) or
        # "shareable" (ipc).
        "--ipc",
        "private",
        "--cgroupns",
        "private",
        *_limit_flags(settings),
        "--network",
        "none",
        "--mount",
        f"type=bind,source={helper},target={HELPER_PATH},readonly",
        # Connecting needs no write access to the mount: read-only, and nothing beside it.
        "--mount",
        f"type=bind,source={egress_socket},target={EGRESS_SOCKET},readonly",
        "--env",
        f"HOME={HOME}",
        "--env",
        "LANG=C.UTF-8",
        "--workdir",
        HOME,
        settings.image,
        "python3",
        HELPER_PATH,
        "serve",
        json.dumps(spec),
    ]


def _limit_flags(settings: DockerSettings) -> list[str]:
    """What the container may use: shared memory, processes, memory (no swap beyond it) and CPUs."""
    return [
        "--shm-size",
        settings.shm_size,
        "--pids-limit",
        str(settings.pids_limit),
        "--memory",
        settings.memory,
        "--memory-swap",
        settings.memory,
        "--cpus",
        settings.cpus,
    ]


def hardening(
    info: dict[str, Any], *, mounts: dict[str, tuple[str, bool]], tmpfs: tuple[str, ...], engine: EngineSecurity
) -> tuple[dict[str, Any], list[str]]:
    """What ``docker inspect`` shows of a container's confinement, item by item, and what of it falls short
    of the backend's: ``mounts`` (target -> host source, read-only) the only host paths in, ``tmpfs`` the
    only writable places, ``engine`` what the engine applies by default. Run between create and start."""
    host = info.get("HostConfig") or {}
    security = [str(o) for o in host.get("SecurityOpt") or []]
    profile = str(info.get("AppArmorProfile") or "")
    summary = _confinement(info, security, profile, engine)
    problems = [
        *_privilege_problems(summary, security, profile, engine),
        *_isolation_problems(summary),
        *_resource_problems(summary, tmpfs),
        *_exposure_problems(summary, mounts, publish_all=bool(host.get("PublishAllPorts"))),
    ]
    return summary, list(dict.fromkeys(problems))


def _confinement(info: dict[str, Any], security: list[str], profile: str, engine: EngineSecurity) -> dict[str, Any]:
    """The isolation record: each item of the inspection that bears on confinement, as the run shows it."""
    host = info.get("HostConfig") or {}
    config = info.get("Config") or {}
    default = "engine default"
    return {
        "user": config.get("User"),
        "group_add": [str(g) for g in host.get("GroupAdd") or []],
        "cap_drop": host.get("CapDrop") or [],
        "cap_add": host.get("CapAdd") or [],
        "privileged": bool(host.get("Privileged")),
        # A seccomp option carries its whole profile.
        "security_opt": [truncate(o, 200) for o in security],
        "no_new_privileges": any(o in NO_NEW_PRIVILEGES for o in security),
        "seccomp": _seccomp_mode(security, engine),
        "apparmor": _apparmor_mode(profile, engine) or "none",
        "masked_paths": list(host.get("MaskedPaths") or []),
        "readonly_paths": list(host.get("ReadonlyPaths") or []),
        # "" is Docker's private namespace for pid and uts; ipc and cgroup are asked for as
        # "private".
        "pid_mode": host.get("PidMode") or "private",
        "ipc_mode": host.get("IpcMode") or default,
        "uts_mode": host.get("UTSMode") or "private",
        "userns_mode": host.get("UsernsMode")
        or ("private (remapped)" if engine.userns_remap else f"{default} (not remapped)"),
        "cgroupns_mode": host.get("CgroupnsMode") or default,
        "devices": [
            f"{d.get('PathOnHost')}:{d.get('PathInContainer')}:{d.get('CgroupPermissions')}"
            for d in host.get("Devices") or []
            if isinstance(d, dict)
        ],
        "device_cgroup_rules": [str(r) for r in host.get("DeviceCgroupRules") or []],
        "device_requests": len(host.get("DeviceRequests") or []),
        "sysctls": dict(host.get("Sysctls") or {}),
        "oom_kill_disable": bool(host.get("OomKillDisable")),
        "oom_score_adj": host.get("OomScoreAdj") or 0,
        "read_only_root": bool(host.get("ReadonlyRootfs")),
        "tmpfs": sorted(host.get("Tmpfs") or {}),
        "pids_limit": host.get("PidsLimit"),
        "memory": host.get("Memory"),
        "memory_swap": host.get("MemorySwap"),
        "nano_cpus": host.get("NanoCpus"),
        "shm_size": host.get("ShmSize"),
        "network": host.get("NetworkMode"),
        "published_ports": host.get("PortBindings") or {},
        "mounts": [
            {
                "target": m.get("Destination"),
                "source": m.get("Source"),
                "type": m.get("Type"),
                "read_only": not m.get("RW", True),
            }
            for m in info.get("Mounts") or []
        ],
    }


def _seccomp_mode(security: list[str], engine: EngineSecurity) -> str:
    option = next((o.replace(":", "=", 1).split("=", 1)[-1] for o in security if o.startswith("seccomp")), None)
    if option is None:
        return "docker default" if engine.seccomp_default else "none"
    # The option carries the whole profile: the record names it only.
    return option if option == "unconfined" else "a profile of its own"


def _apparmor_mode(profile: str, engine: EngineSecurity) -> str:
    if engine.apparmor:
        return profile
    return f"not on this host (asked for: {truncate(profile, 80)})" if profile else "not on this host"


def _privilege_problems(
    summary: dict[str, Any], security: list[str], profile: str, engine: EngineSecurity
) -> list[str]:
    """Who the container runs as, and what may widen its rights: capabilities, seccomp, AppArmor."""
    problems = []
    if summary["user"] != f"{UID}:{GID}":
        problems.append(f"runs as {summary['user']!r}, not {UID}:{GID}")
    if summary["group_add"]:
        problems.append(f"adds the groups {', '.join(summary['group_add'])}")
    if "ALL" not in [c.upper() for c in summary["cap_drop"]] or summary["cap_add"] or summary["privileged"]:
        problems.append("keeps capabilities")
    if not summary["no_new_privileges"]:
        problems.append("may gain privileges")
    if summary["seccomp"] == "none":
        problems.append("has no seccomp profile")
    for option in security:
        kind, _sep, value = option.replace(":", "=", 1).partition("=")
        # no-new-privileges is judged above.
        if option in NO_NEW_PRIVILEGES or kind == "no-new-privileges":
            continue
        if kind == "seccomp":
            problems.append("has seccomp off" if value == "unconfined" else "has a seccomp profile of its own")
        elif kind == "apparmor":
            problems.append("has AppArmor off" if value == "unconfined" else "has an AppArmor profile of its own")
        else:
            problems.append(f"sets the security option {truncate(option, 80)!r}")
    # With AppArmor, the engine's own profile; without, none asked for (an ask is a loosening
    # meant).
    if profile != (APPARMOR_DEFAULT if engine.apparmor else ""):
        problems.append("has AppArmor off" if profile in ("", "unconfined") else "has an AppArmor profile of its own")
    return problems


def _isolation_problems(summary: dict[str, Any]) -> list[str]:
    """What the container shares of the host: /proc and /sys, namespaces, devices, kernel settings."""
    problems = []
    if not summary["masked_paths"] or not summary["readonly_paths"]:
        problems.append("sees /proc and /sys unmasked")
    for key, name, own in NAMESPACES:
        mode = str(summary[key])
        if mode == "host":
            problems.append(f"shares the host's {name} namespace")
        elif mode.startswith("container:"):
            problems.append(f"shares the {name} namespace of {truncate(mode, 80)}")
        elif mode not in own:
            problems.append(f"has {name} namespace mode {truncate(mode, 80)!r}, not private")
    if summary["devices"] or summary["device_requests"]:
        problems.append("has devices of the host")
    if summary["device_cgroup_rules"]:
        problems.append("has device rules")
    if summary["sysctls"]:
        problems.append("sets kernel parameters")
    if summary["oom_kill_disable"] or summary["oom_score_adj"] < 0:
        problems.append("is shielded from the OOM killer")
    return problems


def _resource_problems(summary: dict[str, Any], tmpfs: tuple[str, ...]) -> list[str]:
    """Where the container may write, and the limits on what it may use."""
    problems = []
    if not summary["read_only_root"]:
        problems.append("has a writable root")
    if sorted(tmpfs) != summary["tmpfs"]:
        problems.append("has writable places other than its own")
    for limit in ("pids_limit", "memory", "nano_cpus"):
        if not isinstance(summary[limit], int) or summary[limit] <= 0:
            problems.append(f"has no {limit.replace('_', ' ')}")
    if summary["memory_swap"] != summary["memory"]:
        problems.append("may swap beyond its memory")
    return problems


def _exposure_problems(summary: dict[str, Any], mounts: dict[str, tuple[str, bool]], *, publish_all: bool) -> list[str]:
    """What reaches the container from outside: a network, published ports, host paths."""
    problems = []
    if summary["network"] != "none":
        problems.append(f"is on network {summary['network']!r}")
    if summary["published_ports"] or publish_all:
        problems.append("publishes ports")
    seen = summary["mounts"]
    found = {m["target"]: (m["source"], m["read_only"]) for m in seen}
    if found != mounts or any(m["type"] != "bind" for m in seen):
        problems.append("mounts more (or otherwise) than the run's own files")
    return problems


class DockerDesktop(HelperDesktop):
    """The desktop in a hardened container. One instance per run; ``bind_run`` before ``start``."""

    name = "docker"

    def __init__(self, size: Size, target: Target, settings: DockerSettings | None = None) -> None:
        target.require(self.name)
        settings = settings or DockerSettings()
        super().__init__(size, step_timeout=settings.step_timeout)
        self.settings = settings
        self.engine = Engine(settings.docker)
        self.target = target
        self._workspace: Path | None = None
        self._egress_socket: Path | None = None
        self._proxy: EgressProxy | None = None
        self._confinement: dict[str, Any] = {}
        self._channel: Channel | None = None
        self._process: subprocess.Popen[bytes] | None = None  # the docker command in flight
        self._requests = threading.Lock()  # one request at a time
        self._stopped = False
        # ``docker start`` done: before it, nothing inside holds input (or runs)
        self._started = False

    # ---------------------------------------------------------------------------------------------
    @property
    def labels(self) -> list[str]:
        return [LABEL, f"{RUN_LABEL}={self.run_id}"]

    def record(self) -> dict[str, Any]:
        """For run.json before the start: the container's settings and the helper shipped into it."""
        return {**self.settings.public(), "labels": self.labels, "helper_sha256": helper_sha256(), "network": "none"}

    @property
    def isolation(self) -> dict[str, Any]:
        if not self._confinement or not self._isolation:
            return {}
        inside = self._isolation
        return {
            "container": "docker",
            "container_id": self.sandbox_id,
            "image": self.settings.image,
            "helper_sha256": helper_sha256(),
            **self._confinement,
            "browser_uid": inside.get("uid"),
            "browser_sandbox": "off: the container is its boundary",
            "x_server": "inside the container, as its user, cookie required",
            "egress": "the controller's allow-list proxy only, through a Unix socket mounted in",
        }

    def egress(self) -> list[ev.Egress]:
        return self._proxy.records if self._proxy else []

    def _on_egress(self, event: ev.Event) -> None:
        if self._sink is not None:
            self._sink(event)

    # ---------------------------------------------------------------------------------------------
    # Start
    # ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        if not self.run_id:
            raise DesktopError("the docker desktop was not bound to a run", fatal=True)
        try:
            self._start()
        except DesktopError:
            raise
        except Exception as exc:
            if self._stopping.is_set():
                raise DesktopError("the desktop was stopped", fatal=True) from None
            raise DesktopError(f"docker: could not start the desktop: {failure(exc)}", fatal=True) from None

    def _start(self) -> None:
        # 0700, this controller's
        ws = self._workspace = Path(tempfile.mkdtemp(prefix=WORKSPACE_PREFIX))
        helper = ws / "helper.pyz"
        helper.write_bytes(helper_zipapp())
        os.chmod(helper, 0o644)
        # this controller's: only the socket in it is mounted, read-only
        egress = ws / "egress"
        egress.mkdir(mode=0o700)
        start_url, allow = self.target.open()
        self._egress_socket = egress / "proxy.sock"
        self._proxy = EgressProxy(self._egress_socket, allow, on_event=self._on_egress)
        self._proxy.start()  # before the create: the mount's source must exist
        if os.getuid() == 0:
            # connecting takes write permission on the socket
            os.chown(self._egress_socket, UID, GID)
        os.chmod(self._egress_socket, 0o600)
        spec = {
            "socket": SOCKET_PATH,
            "screen": str(self.size),
            "url": start_url,
            "egress_socket": EGRESS_SOCKET,
            "bubblewrap": "off",
            "browser_sandbox": False,
            "start_timeout": self.settings.start_timeout,
        }
        self._create(container_argv(self.settings, self.run_id, helper, self._egress_socket, spec))
        self._confine({HELPER_PATH: (str(helper), True), EGRESS_SOCKET: (str(self._egress_socket), True)})
        self._check_stopping()
        self._docker("start", self.sandbox_id or "")
        self._started = True
        if self.settings.transport == "stream":
            self._channel = Channel(
                [self.settings.docker, "exec", "-i", self.sandbox_id or "", *self._helper("stream")],
                stderr_path=str(ws / "stream.log"),
            )
        wait = self.settings.start_timeout
        header, blobs = self._request({"op": "ready", "wait": wait}, timeout=wait + 30)
        self._ready(header, blobs)

    def _create(self, argv: list[str]) -> None:
        try:
            code, out, err = run_bounded(argv, timeout=120, started=self._track)
        except EngineError as exc:
            code, out, err = -1, b"", str(exc).encode()
        ident = out.decode("ascii", "replace").strip()
        if code != 0 or not re.fullmatch(r"[0-9a-f]{64}", ident):
            self._find_lost()
            self._check_stopping()
            raise DesktopError(f"docker: creating the container failed: {first_line(err)}", fatal=True)
        self._adopt(ident, ident, self.labels)

    def _find_lost(self) -> None:
        """The create failed or was cut off, perhaps after the engine made the container: find it by label."""
        with contextlib.suppress(EngineError):
            for row in self.engine.by_label(f"{RUN_LABEL}={self.run_id}"):
                if row["kind"] == "container":
                    self._adopt(row["id"], row["id"], self.labels)
                    self._discard_sandbox()

    def _confine(self, mounts: dict[str, tuple[str, bool]]) -> None:
        """Inspect the container, created and not started: nothing in it has run yet. Refuse to start it
        unless it is confined as it should be (``mounts``: target -> host source, read-only)."""
        self._check_stopping()
        try:
            info = self.engine.inspect(self.sandbox_id or "")
            engine = self.engine.security()
        except (EngineError, ValueError) as exc:
            self._check_stopping()
            raise DesktopError(f"docker: inspecting the container failed: {exc}", fatal=True) from None
        summary, problems = hardening(info, mounts=mounts, tmpfs=TMPFS, engine=engine)
        if problems:
            raise DesktopError(f"docker: the container is not confined: it {'; '.join(problems)}", fatal=True)
        self._confinement = summary

    def _helper(self, mode: str) -> list[str]:
        """The helper's argv inside the container (``call`` reads its request from stdin)."""
        call = ["call", SOCKET_PATH, "-", CONNECT_WAIT] if mode == "call" else ["stream", SOCKET_PATH, CONNECT_WAIT]
        return ["python3", "-S", HELPER_PATH, *call]

    def _docker(self, *args: str) -> None:
        try:
            code, _out, err = run_bounded([self.settings.docker, *args], timeout=60, started=self._track)
        except EngineError as exc:
            code, err = -1, str(exc).encode()
        if code != 0:
            self._check_stopping()
            raise DesktopError(f"docker {args[0]}: {first_line(err)}", fatal=True)

    def _track(self, proc: subprocess.Popen[bytes] | None) -> None:
        with self._lock:
            self._process = proc

    # ---------------------------------------------------------------------------------------------
    # One request per step
    # ----------------------------------------------------------------------------------------------
    def _request(self, request: dict[str, Any], *, timeout: float) -> tuple[dict[str, Any], Blobs]:
        self._check_stopping()
        if not self._requests.acquire(timeout=timeout):
            raise DesktopError("the desktop is busy with another request", fatal=True)
        try:
            return self._send(request, timeout)
        finally:
            self._requests.release()

    def _send(self, request: dict[str, Any], timeout: float) -> tuple[dict[str, Any], Blobs]:
        self._check_stopping()
        data = json.dumps(request).encode()
        try:
            if self._channel is not None:
                code, out, err = 0, self._channel.ask(data, timeout=timeout, cap=REPLY_CAP), b""
            else:
                argv = [self.settings.docker, "exec", "-i", self.sandbox_id or "", *self._helper("call")]
                code, out, err = run_bounded(
                    argv, timeout=timeout, cap=REPLY_CAP, stdin=data + b"\n", started=self._track
                )
        except (DesktopError, EngineError) as exc:
            self._check_stopping()
            raise DesktopError(f"docker: the {request.get('op')} request failed: {exc}", fatal=True) from None
        self._check_stopping()
        return self._answer(code, out, err)

    def verify(self) -> Verification | None:
        """The lab's verdict, here: from what its server saw, this proxy's records and the downloads."""
        if self.target.lab is None:
            return None
        _header, blobs = self._request({"op": "downloads"}, timeout=self.step_timeout)
        assert self._workspace is not None
        folder = self._workspace / "downloads"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(mode=0o700)
        for number, (name, (data, _w, _h)) in enumerate(blobs.items()):
            base = name.rsplit("/", 1)[-1]
            safe = base if DOWNLOAD_NAME.fullmatch(base) and base not in (".", "..") else f"download-{number}"
            (folder / f"{number:02d}-{safe}").write_bytes(data)
        if self._proxy is not None:
            # a request the last action caused is judged (and logged) too
            self._proxy.wait_quiet(since=self._acted_at)
        # The lab's server and this proxy run in the controller: the container only handed over
        # files.
        return self.target.verify(folder, self.egress())

    def release_all(self) -> None:
        """Release held input, unless a stop is under way (the container goes, input with it), the
        container never started (a refused one runs nothing, not even this) or a request is in flight
        (it is being cut off)."""
        if self._stopping.is_set() or not self._started or not self._requests.acquire(blocking=False):
            return
        try:
            self._send({"op": "release"}, 5)
        except DesktopError:
            pass
        finally:
            self._requests.release()

    # ---------------------------------------------------------------------------------------------
    # Stop
    # ----------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Cut off the request in flight, remove the container (and anything else of the run), stop the
        proxy and the lab, delete the workspace. Any thread, any moment, idempotent."""
        self._stopping.set()
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            process = self._process
        if process is not None:
            kill(process)
        if self._channel is not None:
            self._channel.kill()
        problem = None
        try:
            self._discard_sandbox()
        except EngineError as exc:
            problem = str(exc)
        if self._proxy is not None:
            self._proxy.stop()
        self.target.stop()
        if self._requests.acquire(timeout=5):
            # the request in flight has given up: close its pipes
            try:
                if self._channel is not None:
                    self._channel.dispose()
            finally:
                self._requests.release()
        if self._workspace is not None:
            shutil.rmtree(self._workspace, ignore_errors=True)
        if problem:
            raise DesktopError(truncate(f"docker: removing the container failed: {problem}", 300))

    def _discard(self, sandbox: Any) -> None:
        """Remove the run's container (``sandbox`` is its id) and anything else of the run."""
        self.engine.remove(sandbox)
        self.engine.remove_run(self.run_id)  # anything else carrying the run's label


def list_leftovers(settings: DockerSettings | None = None) -> list[dict[str, str]]:
    """Containers and networks labelled ``cua-tui`` on this engine: kind, id, name, state, run id."""
    return Engine((settings or DockerSettings()).docker).by_label(LABEL)


def remove_leftover(ident: str, settings: DockerSettings | None = None) -> bool:
    """Remove one by id or name; False when it was already gone (running it twice is harmless)."""
    return Engine((settings or DockerSettings()).docker).remove(ident)


class DockerTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """The settings file's ``[docker]`` table."""

    image: str | None = None  # None: DEFAULT_IMAGE (the one ``scripts/setup.sh docker`` builds)


def build(size: Size, table: DockerTable | None, *, target: Target, **_: object) -> DockerDesktop:
    """The backend's builder (desktops/__init__.py): an engine that is missing, not running or without the
    image is refused here, in one line, before anything starts."""
    options = DockerSettings(image=table.image) if table is not None and table.image else DockerSettings()
    problem = Engine(options.docker).problem(options.image)
    if problem:
        raise Unavailable(problem)
    return DockerDesktop(size, target, options)


def leftovers(settings: object) -> Leftovers:
    """``cua-tui sandboxes --backend docker``: the containers and networks labelled cua-tui here."""
    options = DockerSettings()
    problem = Engine(options.docker).problem()
    if problem:
        raise Unavailable(problem)
    return Leftovers(
        lambda: [{**row, "state": f"{row['kind']} {row['state']}"} for row in list_leftovers(options)],
        lambda ident: remove_leftover(ident, options),
        "labelled cua-tui",
    )
