"""End to end through ``--backend cwsandbox``: the real cwsandbox client, a local gRPC service built on the
package's own stubs (tests/fakes/cwsandbox_local.py), and inside each "sandbox" the project's own desktop (real
Xvfb, openbox, Chromium, the egress proxy and the lab) started from the helper zipapp it was given.

The service counts every request: each step is one exec and nothing else.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest

from cua_tui.build import RunOptions, build_run
from cua_tui.core import events as ev
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.core.geometry import Size
from cua_tui.core.ports import process_user
from cua_tui.desktops.cwsandbox import CWSandboxDesktop, SandboxSettings
from cua_tui.desktops.target import Target
from cua_tui.labs import get_lab

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from recorder import Recorder

from tests.fakes.cwsandbox_local import HOST_IMAGE, Fault, LocalService

pytestmark = pytest.mark.e2e
KEY = "cw-test-key-7f3a9c"  # a credential that must reach the service and nothing else


@pytest.fixture(autouse=True)
def _quiet_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPC_VERBOSITY", "ERROR")


def point_at(svc: LocalService, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's client pointed at ``svc``, with the key, on this host's programs (the process-group mode)."""
    monkeypatch.setenv("CWSANDBOX_BASE_URL", svc.base_url)
    monkeypatch.setenv("CWSANDBOX_API_KEY", KEY)
    monkeypatch.setenv("CUA_TUI_CWSANDBOX_IMAGE", HOST_IMAGE)


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalService]:
    with LocalService(tmp_path / "service") as svc:
        point_at(svc, monkeypatch)
        yield svc


def lab_run(tmp_path: Path, lab: str, decisions: str, *, variant: str | None = None, **options: Any) -> Any:
    recorder = Recorder()
    run = build_run(
        RunOptions(
            backend="cwsandbox",
            agent=None,
            lab=lab,
            script=get_lab(lab).script(variant),
            runs_dir=tmp_path / "runs",
            decisions=decisions,
            fsync=False,
            listeners=(recorder,),
            **options,
        )
    )
    return run, recorder


def assert_clean_end(run: Any, service: LocalService) -> None:
    """Sealed and intact, the sandbox recorded before anything else and stopped, no key anywhere."""
    report = verify_run(run.path)
    assert report.code is VerifyExit.INTACT, report.summary
    kinds = [json.loads(line)["kind"] for line in (run.path / "audit.jsonl").read_text().splitlines()]
    if (run.path / "sandbox-id.txt").exists():
        sandbox_id = (run.path / "sandbox-id.txt").read_text().strip()
        assert kinds[1] == "sandbox_created"  # right after run_started: before the desktop is set up
        assert sandbox_id not in {sb.sandbox_id for sb in service.service.live()}
    assert service.service.live() == []
    for path in run.path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    for create in service.service.creates:
        assert KEY not in str(create)  # neither the command, its environment nor the mounted files
    assert all(KEY not in " ".join(argv) for argv in service.service.exec_argv)
    # every exec took the path the service offers: the direct data plane (mTLS), as a real run's execs do,
    # unless the service was started without it
    offered = "direct" if service.direct is not None else "gateway"
    assert set(service.service.paths()) <= {offered}, service.service.requests


def step_requests(service: LocalService) -> list[tuple[str, str]]:
    """The requests between the desktop's ``ready`` and the verifier: the steps of the run."""
    log = [(rpc, op) for rpc, _sid, op in service.service.requests]
    start = log.index(("StreamExec", "ready")) + 1
    end = log.index(("StreamExec", "verify"))
    return log[start:end]


def assert_one_exec_per_step(service: LocalService, recorder: Recorder) -> None:
    """Every step the supervisor counted that reached the desktop (executed, or found stale by the check
    that travels with it) is exactly one exec, and nothing else travels between the start and the verdict."""
    requests = step_requests(service)
    outcomes = recorder.of(ev.Outcome)
    reached = [o for o in outcomes if o.status in ("executed", "stale")]
    assert all(rpc == "StreamExec" for rpc, _op in requests), requests
    assert len(requests) == len(reached), (requests, [(o.index, o.status) for o in outcomes])
    assert max(o.step for o in outcomes) == len(outcomes)  # the supervisor's own count of steps


def test_form_lab_passes_with_approvals_one_exec_per_step(tmp_path: Path, service: LocalService) -> None:
    run, recorder = lab_run(tmp_path, "form", "approve")
    result = run.run()
    assert result.status == "passed", result.reason
    assert_clean_end(run, service)
    requests = step_requests(service)
    executed = [o for o in recorder.of(ev.Outcome) if o.status == "executed"]
    # one exec per step: the reviewed Verify click's stale-screen check travels with the click
    assert_one_exec_per_step(service, recorder)
    performs = [op for _rpc, op in requests if op == "perform"]
    screenshots = [op for _rpc, op in requests if op == "screenshot"]
    assert len(executed) == 5  # click, type, click, wait, screenshot
    assert len(performs) == 4  # each action and the screenshot after it: one exec
    assert len(screenshots) == 1  # the screenshot action
    # the typed phrase reached the page (the lab passed) but no command line: it travelled sealed
    script = get_lab("form").script(None)
    typed = [a["text"] for turn in script["turns"] for a in turn["actions"] if a.get("type") == "type"]
    assert typed and not [t for t in typed for argv in service.service.exec_argv if t in " ".join(argv)]
    assert len(requests) == len(executed) == len(recorder.of(ev.Outcome))
    # the helper's sha256 and the sandbox's settings in run.json; the isolation obtained inside
    info = json.loads((run.path / "run.json").read_text())
    assert len(info["sandbox"]["helper_sha256"]) == 64
    assert info["sandbox"]["network"] == "egress denied"
    assert info["isolation"]["bubblewrap"] is True and info["isolation"]["remote"] == "cwsandbox"
    create = service.service.creates[0].sandbox.spec
    assert set(create.tags) == {"cua-tui", f"cua-tui-run-{run.run_id}"}
    assert create.network.deny_egress is True
    assert service.service.metadata[0]["authorization"] == f"Bearer {KEY}"
    # the proxy's records inside came back with the steps, into the audit log
    assert any(e.allowed and e.method == "POST" for e in recorder.of(ev.Egress))
    # the lab's verdict came from inside the sandbox, as the user its helper runs as (the test's here)
    (done,) = recorder.of(ev.VerificationDone)
    assert (done.where, done.user) == ("sandbox", process_user())


def test_form_lab_rejected_fails_cleanly(tmp_path: Path, service: LocalService) -> None:
    run, recorder = lab_run(tmp_path, "form", "reject")
    result = run.run()
    assert result.status == "failed"
    assert any(o.status == "declined" for o in recorder.of(ev.Outcome))
    assert_clean_end(run, service)


def test_search_export_lab_passes(tmp_path: Path, service: LocalService) -> None:
    run, recorder = lab_run(tmp_path, "search-export", "approve")
    result = run.run()
    assert result.status == "passed", result.reason
    assert_clean_end(run, service)
    assert_one_exec_per_step(service, recorder)


def test_injection_lab_without_bubblewrap_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox where bubblewrap cannot make namespaces: probed, the desktop runs without it, run.json
    and the desktop_ready event say so, and the lab still passes with rejections."""
    with LocalService(tmp_path / "service", bwrap_fails=True) as svc:
        point_at(svc, monkeypatch)
        run, recorder = lab_run(tmp_path, "injection", "reject")
        result = run.run()
        assert result.status == "passed", result.reason
        ready = recorder.of(ev.DesktopReady)[0]
        assert ready.isolation["bubblewrap"] is False
        assert "namespaces" in ready.isolation["bubblewrap_note"]
        from cua_tui.core.describe import isolation_label

        assert "NO bubblewrap" in isolation_label(ready.isolation)
        assert_clean_end(run, svc)
        assert_one_exec_per_step(svc, recorder)


# ---------------------------------------------------------------------------------------------------
# Faults: each ends cleanly, the sandbox stopped, the chain intact
# ---------------------------------------------------------------------------------------------------
def desktop_run(tmp_path: Path, service: LocalService, *, step_timeout: float = 30.0, **run_options: Any) -> Any:
    settings = SandboxSettings(base_url=service.base_url, api_key=KEY, step_timeout=step_timeout, image="local")
    desktop = CWSandboxDesktop(Size(1024, 720), Target(get_lab("form")), settings)
    recorder = Recorder()
    options = RunOptions(
        backend="cwsandbox",
        agent=None,
        lab="form",
        script=get_lab("form").script(),
        runs_dir=tmp_path / "runs",
        decisions="approve",
        fsync=False,
        desktop=desktop,
        listeners=(recorder,),
        **run_options,
    )
    return build_run(options), recorder


def test_unavailable_at_create(tmp_path: Path, service: LocalService) -> None:
    service.service.inject(Fault("CreateSandbox", "abort", grpc.StatusCode.UNAVAILABLE))
    run, _recorder = desktop_run(tmp_path, service)
    result = run.run()
    assert result.status == "error"
    assert "cwsandbox" in result.reason and "\n" not in result.reason
    assert not (run.path / "sandbox-id.txt").exists()
    assert_clean_end(run, service)


def test_lost_create_reply_found_by_tag_and_stopped(tmp_path: Path, service: LocalService) -> None:
    service.service.inject(Fault("CreateSandbox", "lost_reply", grpc.StatusCode.UNAVAILABLE))
    run, recorder = desktop_run(tmp_path, service)
    result = run.run()
    assert result.status == "error"
    assert ("ListSandboxes", "", "") in service.service.requests
    made = service.service.sandboxes
    assert len(made) == 1
    assert (run.path / "sandbox-id.txt").read_text().strip() in made
    assert recorder.of(ev.SandboxCreated)
    assert_clean_end(run, service)


def test_a_lost_create_that_turns_up_two_sandboxes_stops_both(tmp_path: Path, service: LocalService) -> None:
    """The run's tag finds two sandboxes after a lost create (one left by a retry, say): each is stopped, not
    only the first (the stop is once per sandbox, not once per run)."""
    import cwsandbox
    from cwsandbox import AuthHeaders, SandboxDefaults

    from cua_tui.desktops.cwsandbox import TAG, run_tag

    cwsandbox.disable_signal_handlers()  # as the desktop does: SIGINT/SIGTERM stay the process's own
    defaults = SandboxDefaults(
        base_url=service.base_url, auth=AuthHeaders(headers={"Authorization": f"Bearer {KEY}"}, strategy="api_key")
    )
    earlier = cwsandbox.Sandbox.run(defaults=defaults, tags=[TAG, run_tag("lost-twice")])
    earlier.wait(timeout=30)
    service.service.inject(Fault("CreateSandbox", "lost_reply", grpc.StatusCode.UNAVAILABLE))
    run, _recorder = desktop_run(tmp_path, service, run_id="lost-twice")
    result = run.run()
    assert result.status == "error"
    assert len(service.service.sandboxes) == 2
    assert service.service.live() == []


def test_kill_during_create_stops_the_sandbox_once_it_exists(tmp_path: Path, service: LocalService) -> None:
    service.service.inject(Fault("CreateSandbox", "delay", seconds=3.0))
    run, _recorder = desktop_run(tmp_path, service)
    threading.Timer(1.0, run.supervisor.kill).start()
    result = run.run()
    assert result.status == "killed"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (service.service.live() or not service.service.sandboxes):
        time.sleep(0.1)
    assert len(service.service.sandboxes) == 1
    assert service.service.live() == []
    assert verify_run(run.path).code is VerifyExit.INTACT


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (Fault("StreamExec", "no_exit", op="perform"), "without an exit status"),
        (Fault("StreamExec", "abort", grpc.StatusCode.DEADLINE_EXCEEDED, op="perform"), "Timeout"),
        (Fault("StreamExec", "hang", op="perform"), "Timeout"),
    ],
    ids=["no-exit-frame", "deadline-exceeded", "exec-hangs"],
)
def test_exec_faults_end_in_error(tmp_path: Path, service: LocalService, fault: Fault, words: str) -> None:
    service.service.inject(fault)
    run, recorder = desktop_run(tmp_path, service, step_timeout=3.0)
    started = time.monotonic()
    result = run.run()
    assert result.status == "error", result.reason
    assert words in result.reason and "\n" not in result.reason
    assert time.monotonic() - started < 30
    assert next(o.status for o in recorder.of(ev.Outcome)) == "failed"
    assert_clean_end(run, service)


def test_sandbox_disappearing_mid_run(tmp_path: Path, service: LocalService) -> None:
    run, _recorder = desktop_run(tmp_path, service)

    def vanish(stamped: ev.Stamped) -> None:
        if isinstance(stamped.event, ev.Outcome) and stamped.event.index == 0:
            service.service.vanish(run.supervisor.desktop.sandbox_id)

    run.subscribe(vanish)
    result = run.run()
    assert result.status == "error"
    assert "NotFound" in result.reason or "not found" in result.reason.lower()
    assert_clean_end(run, service)


def test_kill_cancels_a_hung_exec_and_stops_the_sandbox_within_seconds(tmp_path: Path, service: LocalService) -> None:
    service.service.inject(Fault("StreamExec", "hang", op="perform"))
    run, _recorder = desktop_run(tmp_path, service, step_timeout=300.0)
    killed_at: list[float] = []

    def kill_when_hung(stamped: ev.Stamped) -> None:
        if isinstance(stamped.event, ev.Executing) and not killed_at:
            killed_at.append(time.monotonic())
            threading.Timer(1.0, run.supervisor.kill).start()

    run.subscribe(kill_when_hung)
    result = run.run()
    assert result.status == "killed"
    assert time.monotonic() - killed_at[0] < 12
    assert_clean_end(run, service)


# ---------------------------------------------------------------------------------------------------
# Many at once
# ---------------------------------------------------------------------------------------------------
def test_parallel_runs_do_not_interfere(tmp_path: Path, service: LocalService) -> None:
    """Three at once (the suite's load of eight Chromiums is the container fleet's, in
    test_cwsandbox_container.py): each its own sandbox, uid and sealed run."""
    runs = [lab_run(tmp_path, "form", "approve")[0] for _ in range(3)]
    results: dict[str, Any] = {}

    def drive(run: Any) -> None:
        results[run.run_id] = run.run()

    threads = [threading.Thread(target=drive, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert len(results) == 3
    # Every run passes: each sees its own lab page from the first screenshot on. (Eight Chromiums on two CPUs
    # showed their empty window for over 3 s after the page was served; the first screenshot was taken of it,
    # the script's Verify click planned on it, and the stale-screen guard refused that click. A lab's page is
    # now waited for until its text shows, and the settle after input follows the desktop's paint times.)
    assert {run_id: result.status for run_id, result in results.items()} == {run.run_id: "passed" for run in runs}
    ids = {(run.path / "sandbox-id.txt").read_text().strip() for run in runs}
    assert len(ids) == 3 and len({run.path for run in runs}) == 3
    for run in runs:
        assert verify_run(run.path).code is VerifyExit.INTACT
        info = json.loads((run.path / "run.json").read_text())
        assert info["isolation"]["sandbox_id"] == (run.path / "sandbox-id.txt").read_text().strip()
    assert service.service.live() == []
    uids = {json.loads((run.path / "run.json").read_text())["isolation"]["uid"] for run in runs}
    assert len(uids) == 3  # a uid (and so a proxy socket, an X cookie) of its own inside each


def test_sandboxes_command_lists_and_stops_leftovers_twice_harmlessly(tmp_path: Path, service: LocalService) -> None:
    from click.testing import CliRunner

    from cua_tui.cli import main

    run, _recorder = desktop_run(tmp_path, service)
    # a leftover: a sandbox this run created, still running (as after a crash of the controller)
    desktop = run.supervisor.desktop
    desktop.start()
    sandbox_id = desktop.sandbox_id
    runner = CliRunner()
    env = {
        "CWSANDBOX_BASE_URL": service.base_url,
        "CWSANDBOX_API_KEY": KEY,
        "CUA_TUI_CWSANDBOX_IMAGE": HOST_IMAGE,
        "CUA_TUI_RUNS_DIR": str(tmp_path / "runs"),
    }
    listed = runner.invoke(main, ["sandboxes"], env=env)
    assert listed.exit_code == 0, listed.output
    assert sandbox_id in listed.output and run.run_id in listed.output
    for _ in range(2):
        stopped = runner.invoke(main, ["sandboxes", "--stop", str(run.path)], env=env)
        assert stopped.exit_code == 0, stopped.output
        assert f"stopped {sandbox_id}" in stopped.output
    assert service.service.live() == []
    assert KEY not in listed.output + stopped.output
    everything = runner.invoke(main, ["sandboxes", "--all"], env=env)
    assert everything.exit_code == 0 and "0 sandbox(es) stopped" in everything.output


def test_a_failed_exec_never_records_the_typed_text(tmp_path: Path, service: LocalService) -> None:
    """The client's error quotes the exec's command, and a typing step's command carries the text: the
    message recorded names the failure without it."""
    secret = "zebra-7731-secret"
    service.service.inject(Fault("StreamExec", "no_exit", op="perform", skip=1))
    script = {"turns": [{"actions": [{"type": "click", "x": 280, "y": 240}, {"type": "type", "text": secret}]}]}
    run, _recorder = desktop_run(tmp_path, service)
    run = build_run(
        dataclasses.replace(
            run.options,
            script=script,
            desktop=CWSandboxDesktop(
                Size(1024, 720),
                Target(get_lab("form")),
                SandboxSettings(base_url=service.base_url, api_key=KEY, image="local"),
            ),
        )
    )
    result = run.run()
    assert result.status == "error"
    assert "without an exit status" in result.reason
    for path in run.path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert_clean_end(run, service)


def test_form_lab_passes_on_the_gateway_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A service without direct connect (ConnectSandbox answers UNIMPLEMENTED): the client falls back to the
    gateway for every exec, and the run is the same: passed, one exec per step."""
    with LocalService(tmp_path / "service", direct=False) as svc:
        point_at(svc, monkeypatch)
        run, recorder = lab_run(tmp_path, "form", "approve")
        result = run.run()
        assert result.status == "passed", result.reason
        assert_clean_end(run, svc)
        assert_one_exec_per_step(svc, recorder)
        assert svc.service.count("ConnectSandbox") >= 1 and set(svc.service.paths()) == {"gateway"}


def test_a_killed_team_worker_leaves_its_sandbox_listed_from_any_machine(tmp_path: Path, service: LocalService) -> None:
    """A worker running a CoreWeave run is killed (SIGKILL): its run reads lost on the queue once its lease
    lapses, and `cua-tui sandboxes`, run elsewhere (no run folder), lists and stops the sandbox by the run id
    it is tagged with."""
    import os
    import signal
    import subprocess

    import psycopg
    from click.testing import CliRunner

    from cua_tui.cli import main
    from cua_tui.core.policy import Policy as RunPolicy
    from cua_tui.team.payload import Policy, Spec
    from cua_tui.team.submit import submit
    from tests.fakes.pgserver import PgServer

    server = PgServer().start()
    try:
        url = server.new_database()
        policy = RunPolicy.default()
        spec = Spec(
            name="form", backend="cwsandbox", agent="script", script=get_lab("form").script(), lab="form",
            policy=Policy(policy.text, policy.sha256),
        )  # fmt: skip
        run_id = submit(url, [spec], tasks_sha256="9" * 64, name="cw").runs[0][1]
        env = {
            **os.environ,
            "CWSANDBOX_BASE_URL": service.base_url,
            "CWSANDBOX_API_KEY": KEY,
            "CUA_TUI_CWSANDBOX_IMAGE": HOST_IMAGE,
            "CUA_TUI_CONFIG": str(tmp_path / "none.toml"),
            "CUA_TUI_RUNS_DIR": str(tmp_path / "worker-runs"),
        }
        worker = subprocess.Popen(
            [sys.executable, "-m", "cua_tui.cli", "worker", "--queue", url, "--backend", "cwsandbox", "--lease", "2"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        with psycopg.connect(url, autocommit=True) as conn:
            deadline = time.monotonic() + 90
            # killed once its sandbox exists (the desktop inside it need not start: what is left is the point)
            while time.monotonic() < deadline and not service.service.live():
                time.sleep(0.05)
            worker.send_signal(signal.SIGKILL)
            worker.wait(10)
            while time.monotonic() < deadline:
                conn.execute("SELECT cua_tui.reap()")
                if conn.execute("SELECT status FROM cua_tui.runs WHERE id = %s", (run_id,)).fetchone() == ("lost",):
                    break
                time.sleep(0.1)
            assert conn.execute("SELECT status FROM cua_tui.runs WHERE id = %s", (run_id,)).fetchone() == ("lost",)
        (sandbox,) = service.service.live()
        elsewhere = {**env, "CUA_TUI_RUNS_DIR": str(tmp_path / "another-machine")}
        listed = CliRunner().invoke(main, ["sandboxes"], env=elsewhere)
        assert listed.exit_code == 0 and run_id in listed.output, listed.output
        stopped = CliRunner().invoke(main, ["sandboxes", "--stop", run_id], env=elsewhere)
        assert stopped.exit_code == 0, stopped.output
        assert service.service.live() == [] and KEY not in listed.output + stopped.output
        del sandbox
    finally:
        server.stop()
