"""End to end through ``--backend docker`` against this machine's real Docker engine and the real image
(docker/desktop/Dockerfile, built by ``scripts/setup.sh docker``, which the ``test`` job runs first).

Every lab end to end; the running container inspected (by ``docker inspect`` and from inside) against the
guide's hardening; a ``docker`` wrapper that loosens ``create`` refused before the container starts, one
loosening at a time; no host disk the container can write to; why the network is ``none`` (an
``--internal`` network exposes the host's bridge address); a kill, a controller SIGTERM and a controller
SIGKILL, each leaving no container; leftovers listed and removed by label; no engine, no image: one line
and exit 2. The benchmark's docker suite runs in the speed gate (tests/test_bench.py).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cua_tui.build import RunOptions, build_run
from cua_tui.core import events as ev
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.core.geometry import Size
from cua_tui.core.ports import process_user
from cua_tui.core.rundir import RunDir
from cua_tui.desktops.docker import DEFAULT_IMAGE, TMPFS, DockerDesktop, DockerSettings, hardening
from cua_tui.desktops.docker_engine import Engine, EngineSecurity
from cua_tui.desktops.target import Target
from cua_tui.labs import get_lab

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from recorder import Recorder

pytestmark = [pytest.mark.e2e, pytest.mark.engine, pytest.mark.timeout(180)]
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "cua_tui.cli"]
WAITS = {"turns": [{"actions": [{"type": "wait"}] * 5} for _ in range(12)], "final_text": "waited"}


def docker(*args: str, check: bool = True) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def ours() -> set[str]:
    """Every container and network labelled cua-tui, running or not."""
    containers = docker("ps", "-aq", "--no-trunc", "--filter", "label=cua-tui").split()
    networks = docker("network", "ls", "-q", "--no-trunc", "--filter", "label=cua-tui").split()
    return set(containers) | set(networks)


def gone_within(ident: str, seconds: float) -> float | None:
    """Seconds until the container ``ident`` no longer exists (None if it still does after ``seconds``)."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if ident not in docker("ps", "-aq", "--no-trunc").split():
            return time.monotonic() - start
        time.sleep(0.1)
    return None


@pytest.fixture(scope="session")
def engine() -> Engine:
    """The engine and the image, once per suite: built by ``scripts/setup.sh docker`` if missing."""
    if os.getuid() != 0:
        pytest.skip("the Docker engine here runs as root only (setup.sh docker installs and starts it as root)")
    problem = Engine().problem(DEFAULT_IMAGE)
    if problem:
        done = subprocess.run(["bash", "scripts/setup.sh", "docker"], cwd=ROOT, capture_output=True, timeout=900)
        problem = Engine().problem(DEFAULT_IMAGE)
        assert problem is None, f"{problem}\n{done.stderr.decode(errors='replace')[-2000:]}"
    return Engine()


@pytest.fixture(autouse=True)
def _no_leftovers_before(request: pytest.FixtureRequest) -> Iterator[None]:
    if "engine" in request.fixturenames:
        before = ours()
        yield
        deadline = time.monotonic() + 10  # a removal already under way (--rm) may take a moment
        while not ours() <= before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ours() <= before, "a test left a container or network labelled cua-tui"
    else:
        yield


def lab_run(tmp_path: Path, lab: str, decisions: str, **options: Any) -> tuple[Any, Recorder]:
    recorder = Recorder()
    script = options.pop("script", None) or get_lab(lab).script()
    run = build_run(
        RunOptions(
            backend="docker",
            agent=None,
            lab=lab,
            script=script,
            runs_dir=tmp_path / "runs",
            decisions=decisions,
            fsync=False,
            listeners=(recorder,),
            **options,
        )
    )
    return run, recorder


def assert_clean_end(run: Any) -> str:
    """Sealed and intact, the container recorded right after run_started, and gone."""
    report = verify_run(run.path)
    assert report.code is VerifyExit.INTACT, report.summary
    kinds = [json.loads(line)["kind"] for line in (run.path / "audit.jsonl").read_text().splitlines()]
    assert kinds[1] == "sandbox_created"
    ident: str = (run.path / "sandbox-id.txt").read_text().strip()
    assert len(ident) == 64
    assert gone_within(ident, 10) is not None, "the container outlived its run"
    return ident


# ---------------------------------------------------------------------------------------------------
# Every lab, end to end
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("lab", "decisions"), [("form", "approve"), ("search-export", "approve"), ("injection", "reject")]
)
def test_every_lab_passes_in_the_container(engine: Engine, tmp_path: Path, lab: str, decisions: str) -> None:
    run, recorder = lab_run(tmp_path, lab, decisions)
    result = run.run()
    assert result.status == "passed", result.reason
    ident = assert_clean_end(run)
    created = recorder.of(ev.SandboxCreated)[0]
    assert created.sandbox_id == ident and set(created.tags) == {"cua-tui", f"cua-tui.run={run.run_id}"}
    info = json.loads((run.path / "run.json").read_text())
    assert info["backend"] == "docker" and info["isolation"]["container_id"] == ident
    assert info["isolation"]["network"] == "none" and len(info["sandbox"]["helper_sha256"]) == 64
    # the lab's server runs in the controller: the controller vouches for the verdict, not the container
    (verdict,) = recorder.of(ev.VerificationDone)
    assert (verdict.where, verdict.user) == ("controller", process_user())
    assert json.loads((run.path / "result.json").read_text())["verifier"]["where"] == "controller"
    # the controller's proxy saw the browser's requests (to the lab on this host's loopback) and wrote them
    allowed = [e for e in recorder.of(ev.Egress) if e.allowed]
    assert allowed and all(e.host == "127.0.0.1" for e in allowed)
    # the image's browser asked nothing on its own (its policies and flags, desktops/quiet.py): 0 refused
    assert [e for e in recorder.of(ev.Egress) if not e.allowed] == []
    if lab == "form":
        assert any(e.method == "POST" for e in allowed)


def test_the_exec_transport_runs_a_lab_too(engine: Engine, tmp_path: Path) -> None:
    """One ``docker exec`` per request (the benchmark's other side) drives the same run to its end."""
    desktop = DockerDesktop(Size(1024, 720), Target(get_lab("form")), DockerSettings(transport="exec"))
    run, _recorder = lab_run(tmp_path, "form", "approve", desktop=desktop)
    result = run.run()
    assert result.status == "passed", result.reason
    assert_clean_end(run)


# ---------------------------------------------------------------------------------------------------
# The running container, inspected
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def running(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerDesktop]:
    desktop = DockerDesktop(Size(1024, 720), Target(get_lab("form")))
    desktop.bind_run(RunDir.create(tmp_path_factory.mktemp("docker-runs")))
    desktop.start()
    try:
        yield desktop
    finally:
        desktop.stop()
    assert gone_within(desktop.sandbox_id or "", 10) is not None


def inside(desktop: DockerDesktop, *argv: str) -> str:
    return docker("exec", desktop.sandbox_id or "", *argv)


def test_the_container_is_hardened_as_the_guide_says(running: DockerDesktop) -> None:
    (info,) = json.loads(docker("inspect", running.sandbox_id or ""))
    host, config = info["HostConfig"], info["Config"]
    assert config["User"] == "1000:1000"
    assert host["CapDrop"] == ["ALL"] and not host["CapAdd"] and host["Privileged"] is False
    assert "no-new-privileges" in host["SecurityOpt"]
    assert not any("seccomp" in opt and "unconfined" in opt for opt in host["SecurityOpt"])
    assert host["ReadonlyRootfs"] is True
    assert set(host["Tmpfs"]) == {"/tmp", "/home/agent", "/run/cua-tui"}
    assert host["PidsLimit"] == 256 and host["Memory"] == 2 * 1024**3 and host["NanoCpus"] == 2 * 10**9
    assert host["ShmSize"] == 512 * 1024**2
    assert not host["PortBindings"] and not host["PublishAllPorts"] and docker("port", running.sandbox_id or "") == ""
    assert host["NetworkMode"] == "none"
    assert (host["PidMode"], host["IpcMode"], host["UTSMode"], host["UsernsMode"]) == ("", "private", "", "")
    assert host["CgroupnsMode"] == "private"
    assert not host["Devices"] and not host["DeviceCgroupRules"] and not host["DeviceRequests"]
    assert not host["GroupAdd"] and host["OomKillDisable"] is False and host["OomScoreAdj"] == 0
    mounts = {m["Destination"]: (m["Type"], m["RW"], m["Source"]) for m in info["Mounts"]}
    assert set(mounts) == {"/opt/cua-tui/helper.pyz", "/run/cua-tui-egress/proxy.sock"}
    assert all(kind == "bind" and not rw for kind, rw, _source in mounts.values())
    workspace = Path(mounts["/opt/cua-tui/helper.pyz"][2]).parent
    assert mounts["/run/cua-tui-egress/proxy.sock"][2] == str(workspace / "egress" / "proxy.sock")
    assert info["Config"]["Labels"] == {"cua-tui": "", "cua-tui.run": running.run_id}
    # from inside: who runs, what it may do, what it sees
    assert inside(running, "id", "-u").strip() == "1000"
    status = inside(running, "cat", "/proc/1/status")
    assert "NoNewPrivs:\t1" in status and "Seccomp:\t2" in status and "CapEff:\t0000000000000000" in status
    browsers = inside(
        running,
        "python3",
        "-c",
        "import glob\n"
        "for p in glob.glob('/proc/[0-9]*/status'):\n"
        "    try: s = dict(l.split(':', 1) for l in open(p).read().splitlines() if ':' in l)\n"
        "    except OSError: continue\n"
        "    if 'chromium' in s['Name']: print(s['Uid'].split()[0], s['CapEff'].strip(), s['NoNewPrivs'].strip())",
    ).split("\n")
    seen = [line.split() for line in browsers if line]
    assert seen and all(b == ["1000", "0000000000000000", "1"] for b in seen), seen
    assert inside(running, "sh", "-c", "touch /usr/x /etc/x 2>/dev/null || echo read-only").strip() == "read-only"
    assert (
        inside(running, "sh", "-c", "test -e /var/run/docker.sock || test -e /run/docker.sock || echo none") == "none\n"
    )
    interfaces = [line.split(":")[0].strip() for line in inside(running, "cat", "/proc/net/dev").splitlines()[2:]]
    assert interfaces == ["lo"]
    assert inside(running, "cat", "/proc/net/route").splitlines()[1:] == []  # no route at all
    namespaces = inside(running, "sh", "-c", "readlink /proc/1/ns/pid /proc/1/ns/ipc /proc/1/ns/uts /proc/1/ns/cgroup")
    assert all(link not in namespaces for link in host_namespaces()), "the container shares a namespace of the host"
    # and the run's own record says so, item by item, from the same inspection
    isolation = running.isolation
    assert isolation["cap_drop"] == ["ALL"] and isolation["read_only_root"] is True and isolation["network"] == "none"
    assert isolation["seccomp"] == "docker default" and isolation["browser_uid"] == 1000
    assert {isolation[f"{ns}_mode"] for ns in ("pid", "ipc", "uts", "cgroupns")} == {"private"}
    assert isolation["userns_mode"] == "engine default (not remapped)"
    assert isolation["devices"] == isolation["device_cgroup_rules"] == isolation["group_add"] == []
    assert isolation["device_requests"] == 0 and isolation["sysctls"] == {}
    assert isolation["oom_kill_disable"] is False and isolation["oom_score_adj"] == 0
    apparmor = engine_security().apparmor
    assert isolation["apparmor"] == ("docker-default" if apparmor else "not on this host")
    assert (
        isolation["masked_paths"] and isolation["readonly_paths"] and isolation["security_opt"] == ["no-new-privileges"]
    )
    assert isolation["memory_swap"] == isolation["memory"] and isolation["tmpfs"] == [
        "/home/agent",
        "/run/cua-tui",
        "/tmp",
    ]
    assert {m["target"]: m["read_only"] for m in isolation["mounts"]} == {
        "/opt/cua-tui/helper.pyz": True,
        "/run/cua-tui-egress/proxy.sock": True,
    }


def host_namespaces() -> list[str]:
    """This controller's namespaces, the engine's host's (as ``readlink /proc/<pid>/ns/...`` names them)."""
    return [os.readlink(f"/proc/self/ns/{ns}") for ns in ("pid", "ipc", "uts", "cgroup")]


def engine_security() -> EngineSecurity:
    return Engine().security()


def test_a_loosened_container_is_refused(running: DockerDesktop) -> None:
    """The start's check (``hardening``) on the real inspection, each guarantee taken away in turn (the
    loosenings no single ``docker create`` flag makes here, or that need a second container)."""
    (info,) = json.loads(docker("inspect", running.sandbox_id or ""))
    expected = {m["Destination"]: (m["Source"], True) for m in info["Mounts"]}
    engine = engine_security()
    assert hardening(info, mounts=expected, tmpfs=TMPFS, engine=engine)[1] == []

    def loosened(top: dict[str, Any] | None = None, **host: Any) -> list[str]:
        changed = json.loads(json.dumps(info))
        changed["HostConfig"].update(host)
        changed.update(top or {})
        return hardening(changed, mounts=expected, tmpfs=TMPFS, engine=engine)[1]

    assert loosened(CapDrop=[]) == ["keeps capabilities"] and loosened(SecurityOpt=[]) == ["may gain privileges"]
    assert loosened(PidsLimit=0) == ["has no pids limit"] and loosened(Memory=0, MemorySwap=0) == ["has no memory"]
    assert loosened(PidMode="container:abc") == ["shares the PID namespace of container:abc"]
    assert loosened(IpcMode="shareable") == ["has IPC namespace mode 'shareable', not private"]
    assert loosened(IpcMode="container:abc") == ["shares the IPC namespace of container:abc"]
    assert loosened(DeviceRequests=[{"Driver": "nvidia", "Count": -1}]) == ["has devices of the host"]
    assert loosened(NetworkMode="bridge") == ["is on network 'bridge'"]  # (docker refuses it beside `none`)
    assert loosened({"AppArmorProfile": "unconfined"}) == ["has AppArmor off"]
    socket_mount = {"Type": "bind", "Destination": "/var/run/docker.sock", "RW": True, "Source": "/var/run/docker.sock"}
    more = json.loads(json.dumps(info))
    more["Mounts"].append(socket_mount)
    assert hardening(more, mounts=expected, tmpfs=TMPFS, engine=engine)[1]
    writable = json.loads(json.dumps(info))
    for mount in writable["Mounts"]:
        mount["RW"] = True  # the same paths, writable
    assert hardening(writable, mounts=expected, tmpfs=TMPFS, engine=engine)[1]
    # what the engine applies matters too: no default seccomp profile, or AppArmor on the host but not applied
    assert hardening(info, mounts=expected, tmpfs=TMPFS, engine=EngineSecurity(False, engine.apparmor))[1] == [
        "has no seccomp profile"
    ]
    if not engine.apparmor:
        assert hardening(info, mounts=expected, tmpfs=TMPFS, engine=EngineSecurity(True, True))[1] == [
            "has AppArmor off"
        ]
        assert (
            hardening(
                {**info, "AppArmorProfile": "docker-default"},
                mounts=expected,
                tmpfs=TMPFS,
                engine=EngineSecurity(True, True),
            )[1]
            == []
        )


# Each a flag a site's ``docker`` wrapper (or an alias) might add to ``docker create``, and what the refusal
# says of it: the nine, then what was checked before them.
LOOSENINGS = [
    (["--pid", "host"], "shares the host's PID namespace"),
    (["--ipc", "host"], "shares the host's IPC namespace"),
    (["--uts", "host"], "shares the host's UTS namespace"),
    (["--userns", "host"], "shares the host's user namespace"),
    (["--cgroupns", "host"], "shares the host's cgroup namespace"),
    (["--device", "/dev/null:/dev/extra"], "has devices of the host"),
    (["--device-cgroup-rule", "c 1:3 rwm"], "has device rules"),
    (["--group-add", "0"], "adds the groups 0"),
    (["--security-opt", "apparmor=unconfined"], "has AppArmor off"),
    (["--oom-kill-disable"], "is shielded from the OOM killer"),
    (["--oom-score-adj", "-1000"], "is shielded from the OOM killer"),
    (["--security-opt", "systempaths=unconfined"], "sees /proc and /sys unmasked"),
    (["--security-opt", "seccomp=unconfined"], "has seccomp off"),
    (["--security-opt", "label=disable"], "sets the security option 'label=disable'"),
    (["--cap-add", "SYS_ADMIN"], "keeps capabilities"),
    (["--privileged"], "keeps capabilities"),
    (["--user", "0:0"], "runs as '0:0', not 1000:1000"),
    (["--read-only=false"], "has a writable root"),
    (["--tmpfs", "/etc"], "has writable places other than its own"),
    (["--memory-swap", "-1"], "may swap beyond its memory"),
    (["--sysctl", "kernel.msgmax=65536"], "sets kernel parameters"),
    (["--publish", "127.0.0.1::5900"], "publishes ports"),
    (["--volume", "/var/run/docker.sock:/var/run/docker.sock"], "mounts more (or otherwise) than the run's own"),
    (["--mount", "type=bind,source=/tmp,target=/host-tmp"], "mounts more (or otherwise) than the run's own"),
]


def docker_wrapper(folder: Path, flag: list[str]) -> Path:
    """A ``docker`` command for the front of PATH, as a site might install: it logs each subcommand and adds
    ``flag`` to ``create``, right before the image (after the backend's own flags, so it is the one that
    counts), then runs the real docker."""
    real = shutil.which("docker")
    assert real is not None
    log = folder / "docker.log"
    script = folder / "docker"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$1" >> {shlex.quote(str(log))}\n'
        'if [ "$1" = create ]; then\n'
        "  added=\n"
        "  for arg do\n"
        "    shift\n"
        f'    if [ -z "$added" ] && [ "$arg" = {shlex.quote(DEFAULT_IMAGE)} ]; then\n'
        f'      set -- "$@" {shlex.join(flag)}; added=1\n'
        "    fi\n"
        '    set -- "$@" "$arg"\n'
        "  done\n"
        "fi\n"
        f'exec {shlex.quote(real)} "$@"\n'
    )
    script.chmod(0o755)
    return log


@pytest.mark.parametrize(("flag", "words"), LOOSENINGS, ids=[" ".join(flag) for flag, _w in LOOSENINGS])
def test_a_loosening_docker_wrapper_is_refused_before_the_container_starts(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: list[str], words: str
) -> None:
    """Create, inspect, refuse: the run ends in one line naming the loosening; the container was created
    (and recorded) but never started, no action ran, and it is gone."""
    wrapper = tmp_path / "bin"
    wrapper.mkdir()
    log = docker_wrapper(wrapper, flag)
    monkeypatch.setenv("PATH", f"{wrapper}:{os.environ['PATH']}")
    run, recorder = lab_run(tmp_path, "form", "approve")
    result = run.run()
    assert result.status == "error", result.reason
    assert "docker: the container is not confined: it " in result.reason and words in result.reason
    assert "\n" not in result.reason and result.executed == 0
    assert not recorder.of(ev.Executing) and not recorder.of(ev.Outcome)
    commands = log.read_text().split()
    assert "create" in commands and "inspect" in commands
    assert "start" not in commands and "exec" not in commands, commands  # refused before it ran anything
    (created,) = recorder.of(ev.SandboxCreated)
    assert gone_within(created.sandbox_id, 10) is not None
    assert json.loads((run.path / "run.json").read_text()).get("isolation") in (None, {})


def test_the_browser_cannot_write_to_the_hosts_disk(running: DockerDesktop) -> None:
    """The egress proxy's socket is mounted alone, read-only: the container's user can neither fill the
    host's disk beside it nor plant a link or a FIFO there, and no writable mount of the container is backed
    by a disk (only memory: its tmpfs, /dev, /proc)."""
    (info,) = json.loads(docker("inspect", running.sandbox_id or ""))
    socket_source = Path(next(m["Source"] for m in info["Mounts"] if m["Destination"].endswith("proxy.sock")))
    workspace = socket_source.parent.parent

    def listing() -> dict[str, tuple[int, int]]:
        """Every path in the run's workspace on this host, but the exec's own log: its type and size."""
        found = {}
        for path in sorted(workspace.rglob("*")):
            st = path.lstat()
            if path.name != "stream.log":
                found[str(path.relative_to(workspace))] = (stat.S_IFMT(st.st_mode), st.st_size)
        return found

    before = listing()
    assert before.keys() == {"helper.pyz", "egress", "egress/proxy.sock"}
    assert stat.S_ISSOCK(before["egress/proxy.sock"][0])
    tries = inside(
        running,
        "sh",
        "-c",
        "cd /run/cua-tui-egress || exit 9\n"
        "dd if=/dev/zero of=big bs=1M count=600 2>/dev/null && echo wrote\n"
        "ln -s / link 2>/dev/null && echo linked\n"
        "mkfifo fifo 2>/dev/null && echo fifo\n"
        "mkdir dir 2>/dev/null && echo dir\n"
        "id -u; ls -A",
    ).split()
    assert tries == ["1000", "proxy.sock"], tries  # none of it took, as the container's own user
    assert listing() == before
    writable = set()
    for line in inside(running, "cat", "/proc/self/mountinfo").splitlines():
        fields = line.split()
        point, options, fstype = fields[4], fields[5].split(","), fields[fields.index("-") + 1]
        if "rw" in options:
            writable.add((point, fstype))
    assert {fstype for _point, fstype in writable} <= {"tmpfs", "proc", "devpts", "mqueue"}, writable
    assert {"/tmp", "/home/agent", "/run/cua-tui"} <= {point for point, _fs in writable}


def bridge_gateway(network: str) -> str:
    return docker("network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", network).strip()


def host_listener(address: str) -> tuple[socket.socket, list[bytes]]:
    """A listener on this host's own address on a Docker bridge; what connects to it is recorded."""
    server = socket.socket()
    server.bind((address, 0))
    server.listen(1)
    server.settimeout(15)
    seen: list[bytes] = []

    def serve() -> None:
        try:
            conn, _ = server.accept()
            with conn:
                conn.sendall(b"host service\n")
                seen.append(b"connected")
        except OSError:
            pass

    threading.Thread(target=serve, daemon=True).start()
    return server, seen


def test_an_internal_network_reaches_the_host_so_the_browser_gets_none(
    engine: Engine, running: DockerDesktop, tmp_path: Path
) -> None:
    """Why ``--network none``: on a ``docker network create --internal`` network a container still reaches
    the host's address on that network's bridge (a service listening there answers it), while the
    backend's container cannot reach the host's bridge address at all."""
    name = f"cua-tui-probe-{os.getpid()}"
    docker("network", "create", "--internal", "--label", "cua-tui", "--label", "cua-tui.run=probe", name)
    try:
        gateway = bridge_gateway(name)
        server, seen = host_listener(gateway)
        port = server.getsockname()[1]
        probe = f"import socket; print(socket.create_connection(({gateway!r}, {port}), timeout=5).recv(64))"
        argv = ["docker", "run", "--rm", "--network", name, "--label", "cua-tui", "--user", "1000:1000"]
        argv += ["--cap-drop", "ALL", DEFAULT_IMAGE, "python3", "-c", probe]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        server.close()
        assert "host service" in done.stdout and seen, done.stderr  # the host's service answered
        # the same host address, from the backend's container
        server, seen = host_listener(gateway)
        port = server.getsockname()[1]
        reached = inside(
            running,
            "python3",
            "-c",
            f"import socket\ntry: socket.create_connection(({gateway!r}, {port}), timeout=3); print('reached')\n"
            "except OSError as e: print(e.strerror)",
        )
        server.close()
        assert reached.strip() == "Network is unreachable" and not seen
    finally:
        docker("network", "rm", name)


# ---------------------------------------------------------------------------------------------------
# Endings
# ---------------------------------------------------------------------------------------------------
def test_a_kill_stops_the_container_within_seconds(engine: Engine, tmp_path: Path) -> None:
    run, _recorder = lab_run(tmp_path, "form", "approve", script=WAITS)
    killed_at: list[float] = []

    def kill_when_running(stamped: ev.Stamped) -> None:
        if isinstance(stamped.event, ev.Executing) and not killed_at:
            killed_at.append(time.monotonic())
            threading.Thread(target=run.supervisor.kill, daemon=True).start()

    run.subscribe(kill_when_running)
    result = run.run()
    assert result.status == "killed"
    ident = (run.path / "sandbox-id.txt").read_text().strip()
    took = gone_within(ident, 10)
    assert took is not None and time.monotonic() - killed_at[0] < 6, "the container outlived the kill"
    assert verify_run(run.path).code is VerifyExit.INTACT


def controller(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """``cua-tui run --backend docker --headless`` in a process of its own, until its container runs."""
    script = tmp_path / "waits.json"
    script.write_text(json.dumps(WAITS))
    runs = tmp_path / "runs"
    argv = [*CLI, "run", "--backend", "docker", "--lab", "form", "--agent", f"script:{script}", "--headless"]
    proc = subprocess.Popen([*argv, "--runs-dir", str(runs)], cwd=ROOT, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = list(runs.glob("*/audit.jsonl"))
        if found and '"kind":"executing"' in found[0].read_text():
            return proc, found[0].parent
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the run did not get going")


def test_a_controller_sigterm_ends_the_run_killed_and_removes_the_container(engine: Engine, tmp_path: Path) -> None:
    proc, path = controller(tmp_path)
    ident = (path / "sandbox-id.txt").read_text().strip()
    assert ident in docker("ps", "-q", "--no-trunc").split()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 1
    assert json.loads((path / "result.json").read_text())["status"] == "killed"
    assert gone_within(ident, 10) is not None
    assert verify_run(path).code is VerifyExit.INTACT


def test_a_controller_killed_outright_takes_its_container_with_it(engine: Engine, tmp_path: Path) -> None:
    """SIGKILL: no cleanup code runs; the attached exec's client dies with the controller, the helper
    inside sees its stream end and shuts the container down, and the engine removes it (--rm)."""
    proc, path = controller(tmp_path)
    ident = (path / "sandbox-id.txt").read_text().strip()
    proc.kill()
    proc.wait(10)
    took = gone_within(ident, 15)
    assert took is not None and took < 10, "the container outlived its controller"
    assert verify_run(path).code is VerifyExit.INTACT  # an unsealed, intact prefix


def test_leftovers_are_listed_and_removed_by_label_twice_harmlessly(engine: Engine, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from cua_tui.cli import main

    run, _recorder = lab_run(tmp_path, "form", "approve")
    desktop = run.supervisor.desktop
    desktop.start()  # a leftover: the container of a run whose controller went away
    leftover_net = docker(
        "network", "create", "--internal", "--label", "cua-tui", "--label", "cua-tui.run=x", "cua-tui-x"
    )
    try:
        runner = CliRunner()
        env = {"CUA_TUI_RUNS_DIR": str(tmp_path / "runs")}
        listed = runner.invoke(main, ["sandboxes", "--backend", "docker"], env=env)
        assert listed.exit_code == 0, listed.output
        assert desktop.sandbox_id in listed.output and run.run_id in listed.output
        assert leftover_net.strip() in listed.output
        for _ in range(2):
            stopped = runner.invoke(main, ["sandboxes", "--backend", "docker", "--stop", str(run.path)], env=env)
            assert stopped.exit_code == 0, stopped.output
            assert f"stopped {desktop.sandbox_id}" in stopped.output
        assert gone_within(desktop.sandbox_id, 10) is not None
        everything = runner.invoke(main, ["sandboxes", "--backend", "docker", "--all"], env=env)
        assert everything.exit_code == 0, everything.output
        assert leftover_net.strip() in everything.output
        deadline = time.monotonic() + 10  # a removal already under way (--rm) may take a moment
        while ours() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not ours(), (everything.output, docker("ps", "-a", "--no-trunc"), docker("network", "ls"))
    finally:
        desktop.stop()
        docker("network", "rm", "cua-tui-x", check=False)


# ---------------------------------------------------------------------------------------------------
# No engine, no image
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"PATH": "/nonexistent"}, "there is no `docker` command"),
        ({"DOCKER_HOST": "unix:///nonexistent/docker.sock"}, "does not answer"),
        ({"CUA_TUI_DOCKER_IMAGE": "cua-tui-desktop:not-built"}, "which this engine does not have"),
    ],
    ids=["no-docker-command", "no-daemon", "no-image"],
)
def test_without_an_engine_or_its_image_one_line_and_exit_2(tmp_path: Path, env: dict[str, str], words: str) -> None:
    if "CUA_TUI_DOCKER_IMAGE" in env and Engine().problem() is not None:
        pytest.skip("needs a running engine to tell a missing image from a missing engine")
    script = tmp_path / "waits.json"
    script.write_text(json.dumps(WAITS))
    argv = [*CLI, "run", "--backend", "docker", "--lab", "form", "--agent", f"script:{script}", "--headless"]
    full_env = {**os.environ, "CUA_TUI_CONFIG": str(tmp_path / "none.toml"), **env}
    done = subprocess.run(
        [*argv, "--runs-dir", str(tmp_path / "runs")],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "bash scripts/setup.sh docker" in lines[0], lines
    assert not (tmp_path / "runs").exists()  # nothing started
