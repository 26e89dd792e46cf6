"""End to end through ``--backend docker`` against this machine's real Docker engine and the real image
(docker/desktop/Dockerfile, built by ``scripts/setup.sh docker``, which the ``test`` job runs first).

Every lab end to end; the running container inspected (by ``docker inspect`` and from inside) against the
guide's hardening; why the network is ``none`` (an ``--internal`` network exposes the host's bridge
address); a kill, a controller SIGTERM and a controller SIGKILL, each leaving no container; leftovers
listed and removed by label; no engine, no image: one line and exit 2.
"""

from __future__ import annotations

import json
import os
import signal
import socket
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
from cua_tui.desktops.docker import DEFAULT_IMAGE, DockerDesktop, DockerSettings, hardening
from cua_tui.desktops.docker_engine import Engine
from cua_tui.labs import get_lab

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from recorder import Recorder

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
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
    ident = (run.path / "sandbox-id.txt").read_text().strip()
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
    if lab == "form":
        assert any(e.method == "POST" for e in allowed)


def test_the_exec_transport_runs_a_lab_too(engine: Engine, tmp_path: Path) -> None:
    """One ``docker exec`` per request (the benchmark's other side) drives the same run to its end."""
    desktop = DockerDesktop(Size(1024, 720), DockerSettings(transport="exec"), lab=get_lab("form"))
    run, _recorder = lab_run(tmp_path, "form", "approve", desktop=desktop)
    result = run.run()
    assert result.status == "passed", result.reason
    assert_clean_end(run)


# ---------------------------------------------------------------------------------------------------
# The running container, inspected
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def running(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerDesktop]:
    desktop = DockerDesktop(Size(1024, 720), lab=get_lab("form"))
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
    mounts = {m["Destination"]: (m["Type"], m["RW"], m["Source"]) for m in info["Mounts"]}
    assert set(mounts) == {"/opt/cua-tui/helper.pyz", "/run/cua-tui-egress"}
    assert mounts["/opt/cua-tui/helper.pyz"][:2] == ("bind", False)
    workspace = str(Path(mounts["/opt/cua-tui/helper.pyz"][2]).parent)
    assert all(source.startswith(workspace) for _t, _rw, source in mounts.values())  # the run's own files only
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
    browsers = [line.split() for line in browsers if line]
    assert browsers and all(b == ["1000", "0000000000000000", "1"] for b in browsers), browsers
    assert inside(running, "sh", "-c", "touch /usr/x /etc/x 2>/dev/null || echo read-only").strip() == "read-only"
    assert (
        inside(running, "sh", "-c", "test -e /var/run/docker.sock || test -e /run/docker.sock || echo none") == "none\n"
    )
    interfaces = [line.split(":")[0].strip() for line in inside(running, "cat", "/proc/net/dev").splitlines()[2:]]
    assert interfaces == ["lo"]
    assert inside(running, "cat", "/proc/net/route").splitlines()[1:] == []  # no route at all
    # and the run's own record says so, from the same inspection
    isolation = running.isolation
    assert isolation["cap_drop"] == ["ALL"] and isolation["read_only_root"] is True and isolation["network"] == "none"
    assert isolation["seccomp"] == "docker default" and isolation["browser_uid"] == 1000


def test_a_loosened_container_is_refused(running: DockerDesktop) -> None:
    """The start's check (``hardening``) on the real inspection, each guarantee taken away in turn."""
    (info,) = json.loads(docker("inspect", running.sandbox_id or ""))
    expected = {"/opt/cua-tui/helper.pyz": True, "/run/cua-tui-egress": False}
    assert hardening(info, mounts=expected, seccomp_default=True)[1] == []

    def loosened(**host: Any) -> list[str]:
        changed = json.loads(json.dumps(info))
        changed["HostConfig"].update(host)
        return hardening(changed, mounts=expected, seccomp_default=True)[1]

    assert loosened(CapDrop=[]) and loosened(CapAdd=["NET_ADMIN"]) and loosened(Privileged=True)
    assert loosened(SecurityOpt=[]) and loosened(SecurityOpt=["no-new-privileges", "seccomp=unconfined"])
    assert loosened(ReadonlyRootfs=False) and loosened(PidsLimit=0) and loosened(Memory=0)
    assert loosened(NetworkMode="bridge") and loosened(PortBindings={"5900/tcp": [{"HostPort": "5900"}]})
    socket_mount = {"Type": "bind", "Destination": "/var/run/docker.sock", "RW": True, "Source": "/var/run/docker.sock"}
    more = json.loads(json.dumps(info))
    more["Mounts"].append(socket_mount)
    assert hardening(more, mounts=expected, seccomp_default=True)[1]
    assert hardening(info, mounts=expected, seccomp_default=False)[1]  # no seccomp profile at all


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


def test_the_docker_benchmark_reports_both_ways_against_local(engine: Engine, tmp_path: Path) -> None:
    """``python -m cua_tui.bench docker --quick``: start and step medians of each side, with ratios; the
    attached exec the backend uses is the faster way."""
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [*[sys.executable, "-m", "cua_tui.bench"], "docker", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())["docker"]
    for key in ("start_s", "click_ms", "type_ms"):
        assert set(result[key]) == {"local", "docker", "docker_exec"} and all(v > 0 for v in result[key].values())
    assert result["click_ms"]["docker"] < result["click_ms"]["docker_exec"]
    assert "Docker backend vs local desktop" in done.stdout and "one attached exec" in done.stdout
