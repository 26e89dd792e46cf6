"""End to end through ``--backend cwsandbox`` on the images a user would run: the real cwsandbox client, the
local service in container mode (tests/fakes/cwsandbox_container.py), and each sandbox a real container
of the run's image on this machine's Docker engine, the helper inside it on the image's own python3.

- Every lab on the project's desktop image (``cua-tui-desktop:latest``, the run's configured image), and on
  the stock ``debian:bookworm-slim`` (no image configured: the packages installed at start; made here by
  tagging ``cua-tui-base:bookworm``): passed, sealed, intact, the container removed afterwards.
- The service's own promises (resources, lifetime, mounted files, environment, egress, tags, exit status),
  read from ``docker inspect`` and from inside.
- ``cua-tui fleet --backend cwsandbox`` (the real command line, in a subprocess) with 8 runs, each its own
  container, all removed (the suite's one load of eight Chromiums, run alone); a fleet of three sent SIGTERM
  mid-run leaves no container; ``cua-tui sandboxes`` finds none.

Skipped, with the reason, only where no Docker engine answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cua_tui.build import RunOptions, build_run
from cua_tui.config import Settings
from cua_tui.core import events as ev
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.core.ports import VerifierPlace
from cua_tui.desktops import quiet
from cua_tui.labs import get_lab
from tests.fakes.cwsandbox_container import (
    SANDBOX_LABEL,
    SERVICE_LABEL,
    TAGS_LABEL,
    ContainerSandbox,
    ContainerService,
    engine_problem,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from recorder import Recorder

pytestmark = [pytest.mark.e2e, pytest.mark.engine, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]
KEY = "cw-container-key-5d2e81"  # reaches the service and nothing else
DESKTOP = "cua-tui-desktop:latest"  # scripts/setup.sh docker builds it from docker/desktop/Dockerfile
STOCK = "debian:bookworm-slim"
BASE = "cua-tui-base:bookworm"  # setup.sh's debootstrap-made bookworm root: stands in for the stock image here
DECISIONS = {"form": "approve", "search-export": "approve", "injection": "reject"}
CLI = [sys.executable, "-m", "cua_tui.cli"]


def docker(*args: str, check: bool = True, timeout: float = 60) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def has_image(name: str) -> bool:
    return docker("image", "inspect", "--format", "{{.Id}}", name, check=False).strip() != ""


@pytest.fixture(scope="module")
def engine() -> None:
    """A Docker engine that answers, and the desktop image (built by ``scripts/setup.sh docker`` if missing)."""
    problem = engine_problem()
    if problem:
        pytest.skip(f"container mode needs a Docker engine: {problem}")
    if not has_image(DESKTOP) or not has_image(BASE):
        done = subprocess.run(["bash", "scripts/setup.sh", "docker"], cwd=ROOT, capture_output=True, timeout=900)
        assert has_image(DESKTOP) and has_image(BASE), done.stderr.decode(errors="replace")[-2000:]


@pytest.fixture(scope="module")
def stock_image(engine: None) -> str:
    """``debian:bookworm-slim`` on this engine (no registry here): the debootstrap-made bookworm root, tagged."""
    if not has_image(STOCK):
        docker("tag", BASE, STOCK)
    return STOCK


@pytest.fixture(autouse=True)
def _quiet_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPC_VERBOSITY", "ERROR")


@pytest.fixture
def service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: None, request: pytest.FixtureRequest
) -> Iterator[ContainerService]:
    """The service in this process (its threads), the client pointed at it; on the way out no container of
    its is left, whatever the test did. Beside the suite's parts its containers yield the CPU to them."""
    svc = ContainerService(tmp_path / "service")
    if request.node.get_closest_marker("beside") is not None:
        svc.service.cpu_shares = 2
    monkeypatch.setenv("CWSANDBOX_BASE_URL", svc.base_url)
    monkeypatch.setenv("CWSANDBOX_API_KEY", KEY)
    try:
        yield svc
    finally:
        svc.stop()
        assert svc.containers() == [], "the service left a container"


def config_file(tmp_path: Path, image: str | None) -> Path:
    """The user's settings file: the run's image (none: the stock image, installed at start)."""
    path = tmp_path / "config.toml"
    path.write_text(f'cwsandbox_image = "{image}"\n' if image else "")
    return path


def container_logs(root: Path) -> str:
    """What the service's containers printed last (kept as each was removed), for a failure's message."""
    return "\n".join(f"{log.name}: {log.read_text(errors='replace')[-2000:]}" for log in sorted(root.glob("*.log")))


# seconds a removal may take: the engine deletes a container's written layer (the stock image's installed
# desktop is hundreds of MB) and on a loaded disk that is slow; the wait ends as soon as it is done
REMOVAL = 90


def removed_within(svc: ContainerService, seconds: float = REMOVAL) -> list[str]:
    """The service's containers still on the engine after up to ``seconds`` (a removal may be under way)."""
    deadline = time.monotonic() + seconds
    while (left := svc.containers()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


class Inside:
    """Looks into a run's container once its desktop is ready: what the engine made, and its python3."""

    def __init__(self) -> None:
        self.sandbox_id = ""
        self.inspect: dict[str, Any] = {}
        self.python = ""
        self.policies = ""

    def __call__(self, stamped: ev.Stamped) -> None:
        if isinstance(stamped.event, ev.SandboxCreated):
            self.sandbox_id = stamped.event.sandbox_id
        if isinstance(stamped.event, ev.DesktopReady) and not self.inspect:
            (ident,) = docker(
                "ps", "--quiet", "--no-trunc", "--filter", f"label={SANDBOX_LABEL}={self.sandbox_id}"
            ).split()
            self.inspect = json.loads(docker("inspect", ident))[0]
            self.python = docker("exec", ident, "python3", "-c", "import platform; print(platform.python_version())")
            self.policies = docker("exec", ident, "cat", quiet.POLICY_PATH, check=False)


# ---------------------------------------------------------------------------------------------------
# Every lab, through the real client, in a container of the image a user would run
# ---------------------------------------------------------------------------------------------------
# The stock image's install (a minute alone, most of it apt's downloads) runs beside the suite's parts, its
# container yielding the CPU to them: one lab proves the install path (three installs at once on a loaded
# machine took over five minutes); the built image runs all three labs.
@pytest.mark.parametrize(
    "image",
    [DESKTOP, pytest.param(None, marks=[pytest.mark.beside, pytest.mark.timeout(540)])],
    ids=["desktop", "stock"],
)
def test_every_lab_passes_in_a_container_of_the_run_image(
    tmp_path: Path, service: ContainerService, request: pytest.FixtureRequest, image: str | None
) -> None:
    """The labs at once, each in its own container."""
    labs = dict(DECISIONS) if image else {"form": DECISIONS["form"]}
    if image is None:
        request.getfixturevalue("stock_image")
    settings = Settings.load({"CUA_TUI_CONFIG": str(config_file(tmp_path, image))})
    runs: dict[str, tuple[Any, Recorder, Inside]] = {}
    for lab, decisions in labs.items():
        recorder, inside = Recorder(), Inside()
        options = RunOptions(
            backend="cwsandbox",
            agent=None,
            lab=lab,
            script=get_lab(lab).script(),
            runs_dir=tmp_path / "runs",
            decisions=decisions,
            fsync=False,
            listeners=(recorder, inside),
            settings=settings,
        )
        runs[lab] = (build_run(options), recorder, inside)
    results: dict[str, Any] = {}

    def drive(lab: str) -> None:
        started = time.monotonic()
        results[lab] = runs[lab][0].run()
        print(f"{lab} on {image or STOCK}: {results[lab].status} in {time.monotonic() - started:.1f} s")

    threads = [threading.Thread(target=drive, args=(lab,)) for lab in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=280 if image else 520)
    statuses = {lab: (r.status, r.reason) for lab, r in results.items()}
    assert {lab: status for lab, (status, _why) in statuses.items()} == dict.fromkeys(labs, "passed"), (
        statuses,
        container_logs(tmp_path / "service"),
    )
    assert removed_within(service) == []  # every sandbox's container removed once its run ended
    assert service.service.live() == [] and len(service.service.sandboxes) == len(labs)
    for lab, (run, recorder, inside) in runs.items():
        check_lab_run(lab, run, recorder, inside, image or STOCK, service)


def check_lab_run(
    lab: str, run: Any, recorder: Recorder, inside: Inside, image: str, service: ContainerService
) -> None:
    report = verify_run(run.path)
    assert report.code is VerifyExit.INTACT and report.sealed, (lab, report.summary)
    # the sandbox recorded before anything else
    kinds = [json.loads(line)["kind"] for line in (run.path / "audit.jsonl").read_text().splitlines()]
    assert kinds[1] == "sandbox_created", lab
    sandbox_id = (run.path / "sandbox-id.txt").read_text().strip()
    assert sandbox_id == inside.sandbox_id and sandbox_id in service.service.sandboxes, lab
    # the container was the run's image, made as the sandbox's spec said
    config, host = inside.inspect["Config"], inside.inspect["HostConfig"]
    assert config["Image"] == image, lab
    assert config["Labels"][SERVICE_LABEL] == service.service.service_id, lab
    assert set(json.loads(config["Labels"][TAGS_LABEL])) == {"cua-tui", f"cua-tui-run-{run.run_id}"}, lab
    assert host["NanoCpus"] == 2 * 10**9 and host["Memory"] == 4 * 1024**3 and host["ShmSize"] == 1024**3, lab
    # A lab denies egress: no network at all, only lo. The stock image's install is granted deb.debian.org
    # (HTTPS): here that is the default bridge, which this local service cannot filter by name.
    assert host["NetworkMode"] == ("none" if image == DESKTOP else "bridge"), lab
    helper = f"/opt/cua-tui/{run.run_id}/helper.pyz"
    assert {m["Destination"]: m["RW"] for m in inside.inspect["Mounts"]}[helper] is False, lab
    # the helper ran on the image's own python3 (3.11, bookworm's), not the controller's
    isolation = json.loads((run.path / "run.json").read_text())["isolation"]
    assert inside.python.startswith("3.11."), (lab, inside.python)
    assert isolation["helper_python"] == f"{inside.python.strip()} (/usr/bin/python3)", lab
    assert isolation["image"] == image and isolation["sandbox_id"] == sandbox_id, lab
    # Docker's default seccomp profile refuses namespaces: no bubblewrap, and Chromium without its own
    # sandbox; both said, with why
    assert isolation["bubblewrap"] is False and "namespaces" in isolation["bubblewrap_note"], lab
    assert isolation["browser_sandbox"] is False and "namespaces" in isolation["browser_sandbox_note"], lab
    assert isolation["uid_per_run"] is True, lab  # the helper runs as root inside and leases a uid for the desktop
    (done,) = recorder.of(ev.VerificationDone)
    assert (done.where, done.user) == (VerifierPlace.SANDBOX, "root"), lab
    # the browser's quiet policies, copied into the image or written by the install, and a clean run refused
    # nothing: the browser asked nothing on its own
    assert inside.policies == quiet.policy_json(), lab
    assert [e for e in recorder.of(ev.Egress) if not e.allowed] == [], lab
    # one exec per step that reached the desktop, and nothing else between the start and the verdict
    log = [(r.rpc, r[2]) for r in service.service.requests if r[1] == sandbox_id]
    window = log[log.index(("StreamExec", "ready")) + 1 : log.index(("StreamExec", "verify"))]
    reached = [o for o in recorder.of(ev.Outcome) if o.status in ("executed", "stale")]
    assert all(rpc == "StreamExec" for rpc, _op in window) and len(window) == len(reached), (lab, window)
    # the stock image installed its packages at start (apt over HTTPS, said in notes); a built one was probed
    sandbox = json.loads((run.path / "run.json").read_text())["sandbox"]
    notes = [n.message for n in recorder.of(ev.Note)]
    installed = [n for n in notes if n.startswith("installed the desktop's packages in")]
    assert sandbox["install_at_start"] is (image != DESKTOP) and len(installed) == (image != DESKTOP), (lab, notes)
    for path in run.path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


# ---------------------------------------------------------------------------------------------------
# The service's promises, read from the engine and from inside
# ---------------------------------------------------------------------------------------------------
def test_the_container_is_made_as_the_spec_says(service: ContainerService) -> None:
    """Resources, mounted files (in place before the command, read-only), environment, tags, and the two
    networks: ``deny_egress`` gives none at all; an egress rule gives the default bridge, because this local
    service cannot filter by DNS name (the rule is not enforced: the container reaches what the bridge does)."""
    import cwsandbox

    cwsandbox.disable_signal_handlers()
    defaults = cwsandbox.SandboxDefaults(base_url=service.base_url, auth=_auth())
    # the command reads the mounted file as it starts: it was there before
    first = 'cat /opt/probe/f.txt > /tmp/seen; trap "exit 0" TERM; sleep infinity & wait'
    denied = cwsandbox.Sandbox.run(
        "sh",
        "-c",
        first,
        resources={"cpu": "500m", "memory": "512Mi"},
        mounted_files=[{"mount_path": "/opt/probe/f.txt", "file_content": b"mounted"}],
        network=cwsandbox.NetworkOptions(deny_egress=True),
        container_image=BASE,
        environment_variables={"PROBE": "v=1"},
        tags=["t1", "t2"],
        defaults=defaults,
    )
    ruled = cwsandbox.Sandbox.run(
        "sleep",
        "600",
        network=cwsandbox.NetworkOptions(egress=[cwsandbox.EgressRule(dns_name="deb.debian.org")]),
        container_image=BASE,
        environment_variables={"PROBE": "v=1"},
        tags=["t1", "t2"],
        defaults=defaults,
    )
    try:
        for sandbox in (denied, ruled):
            sandbox.wait(timeout=60)
        seen = denied.exec(["sh", "-c", 'cat /tmp/seen; echo " $PROBE"; ls /sys/class/net; echo x > /opt/probe/f.txt'])
        result = seen.result(timeout=30)
        assert result.stdout.split() == ["mounted", "v=1", "lo"] and result.returncode != 0
        assert "Read-only file system" in result.stderr
        denied.write_file("/tmp/w", b"written inside").result(timeout=30)
        assert denied.read_file("/tmp/w").result(timeout=30) == b"written inside"
        made = {}
        for ident in service.containers(running=True):
            data = json.loads(docker("inspect", ident))[0]
            made[data["Config"]["Labels"][SANDBOX_LABEL]] = data
        first_made, second = made[denied.sandbox_id], made[ruled.sandbox_id]
        assert first_made["HostConfig"]["NanoCpus"] == 5 * 10**8 and first_made["HostConfig"]["Memory"] == 512 * 1024**2
        assert (
            first_made["HostConfig"]["MemorySwap"] == 512 * 1024**2
            and first_made["HostConfig"]["ShmSize"] == 128 * 1024**2
        )
        assert first_made["HostConfig"]["NetworkMode"] == "none"
        assert second["HostConfig"]["NetworkMode"] == "bridge"  # the rule's host is not enforced here
        assert "lo" in ruled.exec(["ls", "/sys/class/net"]).result(timeout=30).stdout.split()
        assert "PROBE=v=1" in first_made["Config"]["Env"]
        assert json.loads(first_made["Config"]["Labels"][TAGS_LABEL]) == ["t1", "t2"]
        listed = cwsandbox.Sandbox.list(tags=["t1"], base_url=service.base_url, auth=_auth()).result(timeout=30)
        assert {s.sandbox_id for s in listed} == {denied.sandbox_id, ruled.sandbox_id}
    finally:
        for sandbox in (denied, ruled):
            sandbox.stop(missing_ok=True).result(timeout=60)
    assert removed_within(service) == []


def test_an_exited_container_reads_completed_or_failed_and_the_lifetime_ends_it(service: ContainerService) -> None:
    import cwsandbox

    cwsandbox.disable_signal_handlers()
    defaults = cwsandbox.SandboxDefaults(base_url=service.base_url, auth=_auth())
    done = cwsandbox.Sandbox.run("true", container_image=BASE, defaults=defaults)
    failed = cwsandbox.Sandbox.run("sh", "-c", "exit 3", container_image=BASE, defaults=defaults)
    short = cwsandbox.Sandbox.run("sleep", "600", max_lifetime_seconds=2, container_image=BASE, defaults=defaults)
    wanted = {"done": "COMPLETED", "failed": "FAILED", "short": "TERMINATED"}
    sandboxes = {"done": done, "failed": failed, "short": short}
    deadline = time.monotonic() + 30
    states: dict[str, str] = {}
    while states != wanted and time.monotonic() < deadline:
        time.sleep(0.3)
        states = {name: sb.get_status().name for name, sb in sandboxes.items()}
    assert states == wanted  # "short": its lifetime ran out, and its container with it
    assert short.sandbox_id is not None
    made = service.service.sandboxes[short.sandbox_id]
    assert isinstance(made, ContainerSandbox)
    assert made.container not in docker("ps", "-aq", "--no-trunc").split()
    for sandbox in (done, failed, short):
        sandbox.stop(missing_ok=True).result(timeout=60)
    assert removed_within(service) == []


def test_an_image_the_engine_lacks_is_refused_never_pulled(service: ContainerService) -> None:
    import cwsandbox

    cwsandbox.disable_signal_handlers()
    defaults = cwsandbox.SandboxDefaults(base_url=service.base_url, auth=_auth())
    with pytest.raises(cwsandbox.exceptions.CWSandboxError):
        cwsandbox.Sandbox.run("true", container_image="registry.invalid/none:1", defaults=defaults).wait(timeout=30)
    assert service.containers() == []


def _auth() -> Any:
    from cwsandbox import AuthHeaders

    return AuthHeaders(headers={"Authorization": f"Bearer {KEY}"}, strategy="api_key")


# ---------------------------------------------------------------------------------------------------
# The real command line: a fleet, its containers, a signal, the leftovers command
# ---------------------------------------------------------------------------------------------------
APPROVER = """\
import os, sys, time
open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
time.sleep(600)
"""


def fleet(tmp_path: Path, svc: ContainerService, runs: int, on_confirm: str) -> subprocess.Popen[str]:
    script = get_lab("form").script_file()
    tasks = tmp_path / "tasks.toml"
    tasks.write_text(
        'version = 1\nname = "containers"\n\n'
        + "".join(f'[[tasks]]\nname = "t{n}"\nlab = "form"\nagent = "script:{script}"\n\n' for n in range(runs))
    )
    args = ["fleet", "--tasks", str(tasks), "--backend", "cwsandbox", "--runs-dir", str(tmp_path / "runs")]
    args += ["--concurrency", str(runs), "--headless", "--on-confirm", on_confirm]
    return subprocess.Popen([*CLI, *args], env=cli_env(tmp_path, svc), stderr=subprocess.PIPE, text=True, cwd=ROOT)


def cli_env(tmp_path: Path, svc: ContainerService) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "GRPC_VERBOSITY": "ERROR",
        "CUA_TUI_CONFIG": str(config_file(tmp_path, DESKTOP)),
        "CUA_TUI_RUNS_DIR": str(tmp_path / "runs"),
        "CWSANDBOX_BASE_URL": svc.base_url,
        "CWSANDBOX_API_KEY": KEY,
    }


def manifest(runs: Path) -> list[dict[str, Any]]:
    (entry,) = json.loads((runs / "fleet.json").read_text())["fleets"].values()
    assert "ended_at" in entry
    return list(entry["runs"])


def none_left(tmp_path: Path, svc: ContainerService) -> None:
    """No container of the service's on the engine, and ``cua-tui sandboxes`` (the real CLI) finds none."""
    assert removed_within(svc) == []
    assert svc.service.live() == []
    listed = subprocess.run([*CLI, "sandboxes"], env=cli_env(tmp_path, svc), capture_output=True, text=True, cwd=ROOT)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip().splitlines()[-1] == "0 sandbox(es) tagged cua-tui", listed.stdout


@pytest.mark.alone  # eight Chromiums at once: no other desktop part beside it
def test_a_fleet_of_eight_runs_each_in_its_own_container(tmp_path: Path, service: ContainerService) -> None:
    started = time.monotonic()
    proc = fleet(tmp_path, service, 8, "approve")
    _out, err = proc.communicate(timeout=240)
    print(f"8 runs: the fleet took {time.monotonic() - started:.1f} s")
    assert proc.returncode == 0, err[-3000:]
    rows = manifest(tmp_path / "runs")
    assert len(rows) == 8 and {r["status"] for r in rows} == {"passed"}, rows
    sandbox_ids = set()
    for row in rows:
        path = tmp_path / "runs" / row["run_id"]
        report = verify_run(path)
        assert report.code is VerifyExit.INTACT and report.sealed, report.summary
        sandbox_ids.add((path / "sandbox-id.txt").read_text().strip())
        assert json.loads((path / "run.json").read_text())["isolation"]["helper_python"].endswith("(/usr/bin/python3)")
    assert len(sandbox_ids) == 8 and set(service.service.sandboxes) == sandbox_ids
    assert len(set(service.service.made)) == 8  # a container each
    none_left(tmp_path, service)


def test_a_fleet_sent_sigterm_mid_run_leaves_no_container(tmp_path: Path, service: ContainerService) -> None:
    """Three runs, each at its first decision (one put to an approver that never answers, two waiting for
    their turn: a headless fleet asks one at a time), their desktops up in their containers: SIGTERM ends the
    fleet, every run killed and sealed, every container removed."""
    asked = tmp_path / "asked"
    asked.mkdir()
    (tmp_path / "approver.py").write_text(APPROVER)
    proc = fleet(tmp_path, service, 3, f"approver:{sys.executable} {tmp_path / 'approver.py'} {asked}")
    deadline = time.monotonic() + 120
    logs = tmp_path / "runs"
    while (
        len(list(asked.iterdir())) < 1
        or sum(b'"decision_requested"' in p.read_bytes() for p in logs.glob("*/audit.jsonl")) < 3
    ):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(proc.communicate(timeout=30)[1][-3000:])
        time.sleep(0.1)
    assert len(list(asked.iterdir())) == 1  # the others wait for their turn
    assert len(service.containers(running=True)) == 3
    proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    _out, err = proc.communicate(timeout=60)
    print(f"SIGTERM: the fleet exited {time.monotonic() - started:.2f} s after the signal")
    assert proc.returncode == 1, err[-3000:]
    rows = manifest(tmp_path / "runs")
    assert [r["status"] for r in rows] == ["killed"] * 3, rows
    for row in rows:
        report = verify_run(tmp_path / "runs" / row["run_id"])
        assert report.code is VerifyExit.INTACT and report.sealed, report.summary
    assert len(set(service.service.made)) == 3
    none_left(tmp_path, service)
    assert "Traceback" not in err
